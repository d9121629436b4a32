//! A provider's "not before", remembered. A 429 or an overload that names a delay
//! holds its worker — and every worker on the same account — until the delay has
//! passed, across turns and processes: the hold is committed with the turn
//! (`WorkerHold`), and the next turn of any of those workers waits it out, or, when
//! it is longer than the retry policy waits, blocks the run and says so instead of
//! calling a provider that already said no.

use std::time::Duration;

use baton_core::ids::{Timestamp, WorkerId};
use baton_core::turn::CallRecord;
use baton_gateway::RetryPolicy;
use baton_store::WorkerHold;

use super::{Engine, Session};
use crate::config::WorkerConfig;

/// The longest a provider's word holds a worker. Rate limits and overloads clear in
/// seconds to hours; a delay of years (`Retry-After: 99999999999999999999`) is a
/// broken header, and honouring it would lock the worker out of the run for good.
pub const MAX_HOLD: Duration = Duration::from_secs(24 * 3600);

/// `delay` (at most [`MAX_HOLD`]) after `now`, saturating: the delay came from outside.
pub(super) fn after(now: Timestamp, delay: Duration) -> Timestamp {
    let ms = i64::try_from(delay.min(MAX_HOLD).as_millis()).unwrap_or(i64::MAX);
    Timestamp(now.0.saturating_add(ms))
}

/// The hold a turn leaves on its worker: the longest delay its failed calls were
/// asked for, counted from `now` (the end of the turn's calls).
pub(super) fn left_by(worker: &WorkerId, calls: &[CallRecord], now: Timestamp) -> Vec<WorkerHold> {
    calls
        .iter()
        .filter_map(|c| c.retry_after_ms)
        .max()
        .map(|asked_ms| WorkerHold {
            worker: worker.clone(),
            not_before: after(now, Duration::from_millis(asked_ms)),
            asked_ms,
        })
        .into_iter()
        .collect()
}

/// Whether two workers draw on one provider account, whose rate limits they share:
/// the same provider, endpoint and key.
fn same_account(a: &WorkerConfig, b: &WorkerConfig) -> bool {
    let provider = |w: &WorkerConfig| w.model.split_once('/').map(|(p, _)| p.to_string());
    let options = |w: &WorkerConfig| {
        let o = w.gateway_options();
        (o.get("api_base").cloned(), o.get("api_key_env").cloned())
    };
    provider(a) == provider(b) && options(a) == options(b) && a.api_key == b.api_key
}

impl Engine {
    /// Waits until the provider of the roster's worker `index` may be called again,
    /// when an earlier turn (of this worker or one on the same account, in any
    /// process) was asked to wait. Returns the question to block the run with when
    /// the wait is longer than the worker's retry policy allows.
    pub(super) fn wait_for_hold(&self, session: &Session, index: usize) -> Option<String> {
        let roster = &session.config.roster.workers;
        let me = &roster[index];
        let applies = |h: &&WorkerHold| {
            h.worker == me.id
                || roster
                    .iter()
                    .any(|w| w.id == h.worker && same_account(w, me))
        };
        let hold = session
            .holds
            .iter()
            .filter(applies)
            .max_by_key(|h| h.not_before)?;
        let left_ms = hold.not_before.0.saturating_sub(self.clock.now().0);
        let Ok(left_ms @ 1..) = u64::try_from(left_ms) else {
            return None;
        };
        let left = Duration::from_millis(left_ms);
        let max_wait = RetryPolicy::new(me.max_retries).max_wait;
        if left <= max_wait {
            // An interrupt ends the wait; `step` then stops before the turn.
            session.cancel.sleep(left);
            return None;
        }
        let whose = if hold.worker == me.id {
            String::new()
        } else {
            format!(" (worker {} shares its account)", hold.worker)
        };
        Some(format!(
            "worker {}'s provider asked baton to wait {} s before calling it again{whose}; \
             baton declined to wait that long (it waits at most {} s) and sent nothing. \
             The provider said it can be retried after {}: {} then, or \
             give the step to a worker on another account.",
            me.id,
            hold.asked_ms / 1000,
            max_wait.as_secs(),
            hold.not_before,
            super::block::continue_hint(session, false)
        ))
    }
}
