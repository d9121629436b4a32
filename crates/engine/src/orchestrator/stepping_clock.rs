use std::sync::atomic::{AtomicU64, Ordering};

use baton_core::ids::Timestamp;

use crate::clock::Clock;

/// A clock that advances one second per reading from a fixed start: deterministic
/// timestamps for tests and reproducible exports.
#[derive(Debug)]
pub struct SteppingClock {
    next: AtomicU64,
}

impl SteppingClock {
    pub fn new(start: Timestamp) -> Self {
        SteppingClock {
            next: AtomicU64::new(start.0 as u64),
        }
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.next.fetch_add(1000, Ordering::Relaxed) as i64)
    }
}
