//! Standard output and error that end quietly when their reader goes away.
//!
//! baton keeps Rust's default of ignoring SIGPIPE: a write to an agent or a git process
//! that exited without reading must fail as an ordinary error of that one write, never
//! kill `baton work` and every job in it. The price is that `baton history | head`
//! would panic in `println!` when `head` closes the pipe; these macros end the process
//! quietly instead, with the status a death by SIGPIPE would have given (128 + 13).

use std::io::Write;

/// The status of a process ended by SIGPIPE, which shells and `set -o pipefail` expect.
const BROKEN_PIPE_STATUS: i32 = 141;

pub(crate) fn emit(to_stderr: bool, args: std::fmt::Arguments<'_>) {
    let result = if to_stderr {
        std::io::stderr().lock().write_fmt(args)
    } else {
        let mut out = std::io::stdout().lock();
        out.write_fmt(args).and_then(|()| out.flush())
    };
    if let Err(e) = result {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        // Nothing sensible is left to report an output error to.
        std::process::exit(1);
    }
}

macro_rules! print {
    ($($arg:tt)*) => { $crate::out::emit(false, format_args!($($arg)*)) };
}
macro_rules! println {
    () => { $crate::out::emit(false, format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::emit(false, format_args!("{}\n", format_args!($($arg)*))) };
}
macro_rules! eprintln {
    () => { $crate::out::emit(true, format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::emit(true, format_args!("{}\n", format_args!($($arg)*))) };
}
