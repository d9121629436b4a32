//! Containing what baton starts: an agent or a gate, and everything either of them
//! starts in turn, ends with its turn.
//!
//! A process group is not enough: `setsid`, a double fork or `nohup … &` leave it, and
//! are re-parented to init when their parent exits. So every process baton starts
//! carries a mark in its environment, [`TREE_VAR`]`=<instance>.<n>`, which its
//! descendants inherit; when the turn ends, [`kill_marked`] finds every process still
//! carrying that mark (in `/proc/<pid>/environ`) and kills it. If baton itself is killed
//! (`kill -9` included), the agent dies with it (`PR_SET_PDEATHSIG`), and the
//! [watchdog](start_watchdog), a small process forked before baton starts any thread,
//! sees baton's end and kills everything marked with this instance.
//!
//! What escapes: a descendant that rewrites or clears its own environment (`env -i`)
//! before baton looks. Linux only; elsewhere the process group is all there is.

use std::ffi::OsStr;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that marks a process as started by baton.
pub const TREE_VAR: &str = "BATON_TREE";

/// This process's prefix for marks: unique per process start.
fn instance() -> &'static str {
    static INSTANCE: OnceLock<String> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("b{}x{:x}", std::process::id(), nanos)
    })
}

/// A new mark for one process tree (an agent run, a gate run).
pub fn new_mark() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}.{}", instance(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Marks `cmd` with `mark`, gives it its own process group (its own session, without a
/// terminal, when baton has one) and makes it die with baton.
///
/// The new session matters when baton runs in a terminal: a tool that opens `/dev/tty`
/// to ask a question then fails at once, instead of reading the keyboard of whoever
/// started baton or stopping on SIGTTIN as a background group would.
///
/// The `pre_exec` hook makes std fork instead of `posix_spawn` (a few milliseconds in
/// a large process, see `benches/command.rs`); a child that outlives a killed baton is
/// worth far more than that.
pub fn confine(cmd: &mut Command, mark: &str) {
    cmd.env(TREE_VAR, mark);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let has_terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .is_ok();
        // SAFETY: `setsid`, `setpgid` and `prctl` are async-signal-safe and touch no
        // memory of the parent; they are the only calls made between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let grouped = if has_terminal {
                    libc::setsid()
                } else {
                    libc::setpgid(0, 0)
                };
                if grouped == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                #[cfg(target_os = "linux")]
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// Which marks a kill addresses.
#[derive(Clone, Copy)]
enum Select<'a> {
    /// Exactly this mark: one tree.
    Exactly(&'a str),
    /// Every mark of this baton instance (`<instance>.*`).
    Instance(&'a str),
}

impl Select<'_> {
    fn matches(&self, environ: &[u8]) -> bool {
        let prefix = TREE_VAR.as_bytes();
        environ.split(|b| *b == 0).any(|entry| {
            let Some(value) = entry
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(b"="))
            else {
                return false;
            };
            match self {
                Select::Exactly(mark) => value == mark.as_bytes(),
                Select::Instance(instance) => value
                    .strip_prefix(instance.as_bytes())
                    .is_some_and(|rest| rest.first() == Some(&b'.')),
            }
        })
    }
}

/// Kills (SIGKILL) every process carrying `mark`, again and again until none is left
/// (one may fork while the first pass runs). Returns how many were killed.
pub fn kill_marked(mark: &str) -> usize {
    kill_selected(Select::Exactly(mark))
}

fn kill_selected(select: Select<'_>) -> usize {
    #[cfg(target_os = "linux")]
    {
        let me = std::process::id();
        let mut killed = 0;
        // A process forking as fast as it can could outrun one pass; a bounded number
        // of passes still ends, and each pass kills every process it saw.
        for _ in 0..50 {
            let found = marked_pids(select, me);
            if found.is_empty() {
                break;
            }
            for pid in &found {
                crate::process::kill_pid(*pid);
            }
            killed += found.len();
        }
        killed
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = select;
        0
    }
}

#[cfg(target_os = "linux")]
fn marked_pids(select: Select<'_>, me: u32) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = numeric(&name) else {
            continue;
        };
        if pid as u32 == me {
            continue;
        }
        // A zombie's environ reads empty, so the killed are not seen again; a process
        // of another user cannot be read and is not ours.
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ"))
            && select.matches(&environ)
        {
            pids.push(pid);
        }
    }
    pids
}

#[cfg(target_os = "linux")]
fn numeric(name: &OsStr) -> Option<libc::pid_t> {
    let s = name.to_str()?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Starts the watchdog: a process forked from baton that waits for baton to end, by any
/// means, then kills every process baton marked. Call it before any thread starts (a
/// fork copies only the calling thread); it is a no-op when called again, or off Linux.
///
/// The watchdog holds nothing of baton's: its standard streams go to /dev/null (so a
/// pipe reading baton's output ends when baton does), it ignores the terminal's
/// signals (Ctrl-C goes to baton's whole process group), and it learns of baton's end
/// when the pipe only baton writes to reaches end-of-file.
pub fn start_watchdog() {
    #[cfg(target_os = "linux")]
    {
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            let instance = instance().to_string();
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: plain syscalls; the child below runs only in a copy of a process
            // that has one thread, so it may allocate and use std.
            unsafe {
                if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                    return;
                }
                let [read_end, write_end] = fds;
                match libc::fork() {
                    -1 => {
                        libc::close(read_end);
                        libc::close(write_end);
                    }
                    0 => {
                        libc::close(write_end);
                        watchdog(read_end, &instance)
                    }
                    _ => {
                        // baton keeps the write end open for its whole life.
                        libc::close(read_end);
                    }
                }
            }
        });
    }
}

#[cfg(target_os = "linux")]
unsafe fn watchdog(read_end: libc::c_int, instance: &str) -> ! {
    // SAFETY: plain syscalls in the forked child.
    unsafe {
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        let mut byte = 0u8;
        loop {
            let n = libc::read(read_end, (&raw mut byte).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        kill_selected(Select::Instance(instance));
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_match_exactly_or_by_instance() {
        let env = b"PATH=/bin\0BATON_TREE=b1x2.3\0HOME=/\0";
        assert!(Select::Exactly("b1x2.3").matches(env));
        assert!(!Select::Exactly("b1x2.30").matches(env));
        assert!(!Select::Exactly("b1x2").matches(env));
        assert!(Select::Instance("b1x2").matches(env));
        assert!(!Select::Instance("b1x").matches(env));
        assert!(!Select::Instance("b1x2").matches(b"XBATON_TREE=b1x2.3\0"));
        assert!(!Select::Exactly("b1x2.3").matches(b""));
    }

    #[test]
    fn marks_are_unique_within_the_instance() {
        let (a, b) = (new_mark(), new_mark());
        assert_ne!(a, b);
        assert!(a.starts_with(instance()) && b.starts_with(instance()));
    }
}
