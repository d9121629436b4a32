//! Stopping work in flight: an agent, a gate, a wait between retries.
//!
//! A [`Cancel`] is cancelled when its own flag is set (a job whose lease is lost, a
//! `baton cancel` from another process, which the engine polls the store for), when
//! one of the tokens it was derived from is (the whole `baton work`), or, for tokens
//! that [`Cancel::on_interrupt`] made, when the process was interrupted (Ctrl-C,
//! SIGTERM). The interrupt flag is process-wide because signals are: the signal handler
//! can do nothing but store to a static atomic.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Set by [`interrupt`] (from a signal handler); never cleared.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The signal that interrupted, for messages.
static INTERRUPT_SIGNAL: AtomicU32 = AtomicU32::new(0);

/// Records that the process was interrupted by `signal`. Async-signal-safe.
pub fn interrupt(signal: u32) {
    INTERRUPT_SIGNAL.store(signal, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether the process was interrupted, and by which signal number.
pub fn interrupted() -> Option<u32> {
    INTERRUPTED
        .load(Ordering::SeqCst)
        .then(|| INTERRUPT_SIGNAL.load(Ordering::SeqCst))
}

#[derive(Clone, Default)]
pub struct Cancel {
    own: Arc<AtomicBool>,
    inherited: Vec<Arc<AtomicBool>>,
    on_interrupt: bool,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Cancel {
    /// A token that is cancelled only when [`Cancel::cancel`] is called on it.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// A token that is also cancelled when the process is interrupted.
    pub fn on_interrupt() -> Self {
        Cancel {
            on_interrupt: true,
            ..Cancel::default()
        }
    }

    /// A token cancelled with this one, or on its own.
    pub fn child(&self) -> Self {
        let mut inherited = self.inherited.clone();
        inherited.push(self.own.clone());
        Cancel {
            own: Arc::new(AtomicBool::new(false)),
            inherited,
            on_interrupt: self.on_interrupt,
        }
    }

    pub fn cancel(&self) {
        self.own.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.own.load(Ordering::SeqCst)
            || self.inherited.iter().any(|f| f.load(Ordering::SeqCst))
            || (self.on_interrupt && INTERRUPTED.load(Ordering::SeqCst))
    }

    /// Sleeps for `duration`, or less when cancelled meanwhile; true when it was.
    pub fn sleep(&self, duration: Duration) -> bool {
        let deadline = Instant::now().checked_add(duration);
        loop {
            if self.is_cancelled() {
                return true;
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_millis(50),
            };
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_cancelled_with_its_parent_and_not_the_other_way() {
        let parent = Cancel::new();
        let child = parent.child();
        let grandchild = child.child();
        grandchild.cancel();
        assert!(grandchild.is_cancelled());
        assert!(!child.is_cancelled() && !parent.is_cancelled());
        parent.cancel();
        assert!(child.is_cancelled());
        assert!(parent.child().child().is_cancelled());
    }

    #[test]
    fn a_cancelled_sleep_returns_early() {
        let c = Cancel::new();
        c.cancel();
        let t = Instant::now();
        assert!(c.sleep(Duration::from_secs(10)));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(!Cancel::new().sleep(Duration::from_millis(1)));
    }
}
