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

/// When the first signal came, in monotonic milliseconds.
#[cfg(unix)]
static FIRST_AT_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A second signal this soon after the first is the same request twice, not a second
/// Ctrl-C: `timeout` signals both baton and its process group, and a shell's Ctrl-C
/// can arrive doubled through a wrapper.
#[cfg(unix)]
const SAME_REQUEST_MS: u64 = 1000;

/// Monotonic milliseconds; async-signal-safe (clock_gettime is).
#[cfg(unix)]
fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1000)
        .saturating_add(ts.tv_nsec.max(0) as u64 / 1_000_000)
}

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    use std::sync::atomic::Ordering;
    let again = cancel::interrupted().is_some();
    if again {
        let first = FIRST_AT_MS.load(Ordering::SeqCst);
        if now_ms().saturating_sub(first) < SAME_REQUEST_MS {
            return;
        }
        const NOW: &[u8] = b"\nbaton: stopping now\n";
        // SAFETY: async-signal-safe calls only.
        unsafe {
            libc::write(2, NOW.as_ptr().cast(), NOW.len());
            libc::_exit(128 + sig);
        }
    }
    FIRST_AT_MS.store(now_ms(), std::sync::atomic::Ordering::SeqCst);
    cancel::interrupt(sig as u32);
    const FIRST: &[u8] = b"\nbaton: stopping: ending agents and gates, abandoning a model call in flight, discarding the turn in flight, releasing leases (press Ctrl-C again to stop at once)\n";
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
