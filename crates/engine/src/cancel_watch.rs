//! Noticing a cancel asked for from outside the process (`baton cancel`): a small
//! thread per held run, job or `baton work` polls the store for a request and, when
//! one is there, cancels the work's [`Cancel`] — which every wait (a provider's delay,
//! an HTTP call, an agent, a gate) watches, so the work stops within a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton_gateway::Cancel;
use baton_store::{CancelTarget, Store};

/// How often the store is asked. With the waits' own polling (50 ms at most), a
/// cancel takes effect well inside a second; one indexed read per poll is nothing
/// next to a turn.
pub const CANCEL_POLL: Duration = Duration::from_millis(250);

/// Polls for a cancel request for `target` until dropped.
pub struct CancelWatch {
    stop: Arc<AtomicBool>,
    requested: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for CancelWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelWatch")
            .field("requested", &self.requested())
            .finish()
    }
}

impl CancelWatch {
    /// Watches for a request for `target` under the lease `token` (`None` for a
    /// process); on one, cancels `cancel` and stops watching.
    pub fn start(
        store: Arc<dyn Store>,
        target: CancelTarget,
        token: Option<String>,
        cancel: Cancel,
    ) -> CancelWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let requested = Arc::new(AtomicBool::new(false));
        let handle = {
            let (stop, requested) = (stop.clone(), requested.clone());
            std::thread::Builder::new()
                .name("baton-cancel-watch".into())
                .spawn(move || {
                    let mut next = Instant::now();
                    while !stop.load(Ordering::Acquire) && !cancel.is_cancelled() {
                        if Instant::now() >= next {
                            // A failing read is retried at the next poll: the
                            // heartbeat is what stops work whose database is gone.
                            if let Ok(true) = store.cancel_requested(&target, token.as_deref()) {
                                requested.store(true, Ordering::SeqCst);
                                cancel.cancel();
                                return;
                            }
                            next = Instant::now() + CANCEL_POLL;
                        }
                        // Short naps, so dropping the watch never waits a whole poll.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                })
                .ok()
        };
        CancelWatch {
            stop,
            requested,
            handle,
        }
    }

    /// Whether a cancel request was seen (and the work's token cancelled for it).
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}

impl Drop for CancelWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_cancels_the_token_within_a_poll_and_another_lease_is_untouched() {
        let store: Arc<dyn Store> = Arc::new(baton_store::SqliteStore::open_in_memory().unwrap());
        let target = CancelTarget::Process("pid-1@h".into());
        let (mine, other) = (Cancel::new(), Cancel::new());
        let watch = CancelWatch::start(store.clone(), target.clone(), None, mine.clone());
        let unrelated = CancelWatch::start(
            store.clone(),
            CancelTarget::Process("pid-2@h".into()),
            None,
            other.clone(),
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(!mine.is_cancelled() && !watch.requested());
        let asked = Instant::now();
        store
            .request_cancel(&target, baton_core::ids::Timestamp(1))
            .unwrap();
        while !mine.is_cancelled() && asked.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(mine.is_cancelled() && watch.requested());
        assert!(asked.elapsed() < CANCEL_POLL * 2, "{:?}", asked.elapsed());
        assert!(!other.is_cancelled() && !unrelated.requested());
    }
}
