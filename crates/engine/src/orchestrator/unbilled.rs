//! What a turn's calls spent while the turn is in flight: a committed turn counts its
//! calls against its worker's pool in its own transaction, but one that ends without
//! committing (stopped by a cancel, fenced off by another process, a gate or a write
//! that failed) would count nothing, though the provider delivered and bills its
//! answered calls. This keeps them until the turn commits, and counts them apart
//! (`Store::record_spend`) on every other way out of the turn.

use baton_core::ids::{RunId, Timestamp};
use baton_core::router::PoolId;
use baton_core::turn::CallRecord;
use baton_store::{SpentBy, SpentCall, Store};

/// Armed with a turn's calls once they are made; `committed` disarms it. Dropped
/// armed (an early return, a `?`), it records the spend. A drop cannot say that the
/// record failed, and the turn is failing already: the error it ends with is the one
/// the user needs, so a failure here is not reported over it.
pub(super) struct Unbilled<'a> {
    store: &'a dyn Store,
    armed: Option<(PoolId, SpentBy, Vec<SpentCall>)>,
    at: Timestamp,
}

impl<'a> Unbilled<'a> {
    /// Nothing is kept for a worker in no pool, or a turn whose calls spent nothing.
    pub fn new(
        store: &'a dyn Store,
        pool: Option<&PoolId>,
        run: &RunId,
        turn: u32,
        calls: &[CallRecord],
        at: Timestamp,
    ) -> Self {
        let armed = pool.map(|pool| {
            let by = SpentBy::Turn {
                run: run.clone(),
                turn,
            };
            (pool.clone(), by, calls.iter().map(SpentCall::of).collect())
        });
        Unbilled { store, armed, at }
    }

    /// The turn committed: its calls were counted with it.
    pub fn committed(mut self) {
        self.armed = None;
    }
}

impl Drop for Unbilled<'_> {
    fn drop(&mut self) {
        if let Some((pool, by, calls)) = self.armed.take() {
            let _ = self.store.record_spend(&pool, &by, &calls, self.at);
        }
    }
}
