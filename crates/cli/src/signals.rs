//! Ctrl-C and SIGTERM: the first stops gracefully (agents and gates ended, the turn in
//! flight discarded, leases released, a message saying how to continue); a second one
//! stops at once.

use baton_gateway::cancel;

/// Installs the handlers for SIGINT and SIGTERM.
pub(crate) fn install() {
    #[cfg(unix)]
    {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction is valid; the handler only stores to atomics
            // and calls write(2) and _exit(2), which are async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                // SA_RESTART: a read or write in flight resumes instead of failing with
                // EINTR; the work notices the interrupt at its next check.
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    let again = cancel::interrupted().is_some();
    if again {
        const NOW: &[u8] = b"\nbaton: stopping now\n";
        // SAFETY: async-signal-safe calls only.
        unsafe {
            libc::write(2, NOW.as_ptr().cast(), NOW.len());
            libc::_exit(128 + sig);
        }
    }
    cancel::interrupt(sig as u32);
    const FIRST: &[u8] = b"\nbaton: stopping: ending agents and gates, discarding the turn in flight, releasing leases (again to stop at once)\n";
    // SAFETY: async-signal-safe.
    unsafe {
        libc::write(2, FIRST.as_ptr().cast(), FIRST.len());
    }
}

/// The exit status for a process stopped by the interrupt, as a shell reports a
/// death by that signal (130 for Ctrl-C).
pub(crate) fn exit_code() -> Option<std::process::ExitCode> {
    cancel::interrupted().map(|sig| std::process::ExitCode::from((128 + sig.min(127)) as u8))
}
