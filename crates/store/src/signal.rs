//! Wake-ups for idle claimers: "new work may be claimable".
//!
//! A backend that can hear other processes enqueue (PostgreSQL's `LISTEN/NOTIFY`)
//! bumps a [`JobSignal`]; an idle `baton work` waits on it instead of sleeping a whole
//! poll interval. Polling stays the fallback: a wake-up can be lost (a listener that is
//! reconnecting), and a lease that runs out sends none.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A counter of wake-ups that threads can wait on.
#[derive(Debug, Default)]
pub struct JobSignal {
    generation: Mutex<u64>,
    moved: Condvar,
}

impl JobSignal {
    pub fn new() -> JobSignal {
        JobSignal::default()
    }

    /// The wake-ups so far. Read it before looking for work, then [`wait_past`] it: a
    /// wake-up between the two is not missed.
    ///
    /// [`wait_past`]: JobSignal::wait_past
    pub fn generation(&self) -> u64 {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// New work may be claimable: wakes every waiter.
    pub fn notify(&self) {
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *generation = generation.wrapping_add(1);
        self.moved.notify_all();
    }

    /// Waits until a wake-up after `seen`, or `timeout`. Whether there was one.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *generation == seen {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return false;
            }
            generation = self
                .moved
                .wait_timeout(generation, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_wake_up_between_reading_and_waiting_is_not_missed() {
        let signal = JobSignal::new();
        let seen = signal.generation();
        signal.notify();
        assert!(signal.wait_past(seen, Duration::from_secs(5)));
        assert!(!signal.wait_past(signal.generation(), Duration::from_millis(20)));
    }

    #[test]
    fn a_waiter_wakes_when_another_thread_notifies() {
        let signal = Arc::new(JobSignal::new());
        let seen = signal.generation();
        let other = signal.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.notify();
        });
        let started = Instant::now();
        assert!(signal.wait_past(seen, Duration::from_secs(30)));
        assert!(started.elapsed() < Duration::from_secs(30));
        t.join().unwrap();
    }
}
