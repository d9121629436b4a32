//! Process control, in one place for agents and gates: signalling a process group,
//! terminate-then-kill, and telling whether a pid still runs.
//!
//! Every process baton starts leads its own process group (see
//! [`contain::confine`](crate::contain::confine)), so `-pid` addresses exactly it and
//! what it started without leaving the group; [`contain::kill_marked`] then reaches
//! what did leave it.
//!
//! [`contain::kill_marked`]: crate::contain::kill_marked

use std::process::Child;
use std::time::{Duration, Instant};

/// The signals baton sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A request to exit (SIGTERM): the process may clean up.
    Term,
    /// No choice (SIGKILL).
    Kill,
}

/// Sends `signal` to the process group `child` leads. Off Unix there are no groups
/// and this does nothing: [`terminate`] and [`kill_now`] then kill the child alone.
pub fn signal_group(child: &Child, signal: Signal) {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(child.id()) else {
            return;
        };
        let sig = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: plain syscall. The child leads its own group (`confine`), so `-pid`
        // is that group and nothing else; a group already gone gives ESRCH, ignored.
        unsafe {
            libc::kill(-pid, sig);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (child, signal);
    }
}

/// SIGKILL to one process by pid (one found by its mark, outside any group baton
/// leads). One syscall and nothing else, so the watchdog's forked child may call it.
pub fn kill_pid(pid: i32) {
    #[cfg(unix)]
    // SAFETY: plain syscall on a pid read from /proc a moment ago; one gone since
    // gives ESRCH, ignored.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// SIGTERM to the group, up to `grace` for the leader to exit, then SIGKILL to the
/// group (what the leader started may outlive it); reaps the child.
pub fn terminate(child: &mut Child, grace: Duration) {
    signal_group(child, Signal::Term);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            // The leader is gone; its group may not be.
            signal_group(child, Signal::Kill);
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_now(child);
}

/// SIGKILL to the group at once (a gate past its timeout or cancelled: its output is
/// discarded anyway, so it gets no grace); reaps the child.
pub fn kill_now(child: &mut Child) {
    signal_group(child, Signal::Kill);
    let _ = child.kill();
    let _ = child.wait();
}

/// True when no process `pid` runs on this machine: none exists, or it is a zombie
/// (it exited and waits only to be reaped; it will never do anything again). False
/// when that cannot be told (no `/proc`).
pub fn is_gone(pid: u32) -> bool {
    if !std::path::Path::new("/proc/self").exists() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command, which is in parentheses
        // and may itself contain spaces and parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn grouped(script: &str) -> Child {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        crate::contain::confine(&mut cmd, &crate::contain::new_mark());
        cmd.spawn().unwrap()
    }

    #[test]
    fn terminate_ends_a_group_that_ignores_sigterm() {
        // The leader ignores SIGTERM and so does its child: only SIGKILL ends them.
        let mut child = grouped("trap '' TERM; sleep 1800 & echo $! >/dev/null; sleep 1800");
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        terminate(&mut child, Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(is_gone(pid));
    }

    #[test]
    fn a_live_process_is_not_gone_and_a_reaped_one_is() {
        assert!(!is_gone(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(is_gone(pid));
        // Pid numbers this high are never handed out.
        assert!(is_gone(999_999_999));
    }
}
