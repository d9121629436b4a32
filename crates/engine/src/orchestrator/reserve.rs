//! Headroom held for a routed turn while it is in flight (`Store::try_reserve`).
//!
//! The router picks from the floor's reading, and a turn's calls are counted at its
//! commit: without a hold in between, two processes (or hosts, or lanes of one batch)
//! that seat at once both see the last of a pool and both spend it. So once the router
//! has picked a metered pool, the turn reserves an estimate of its spend, under the
//! store's lock; a pool found short is taken out of the reading and the seat routed
//! again, to the next coldest pool or to the router's question. The reservation goes
//! with the turn's commit (its calls count instead), with the plan when the turn ends
//! any other way (`Held`'s drop), or by expiry when the process dies.

use std::sync::{Arc, Mutex, PoisonError};

use baton_core::router::Pool;
use baton_core::state::ExecutionState;
use baton_store::{Estimate, ReservationId, ReserveOutcome, ReserveRequest, Store};

use super::{Engine, Session};
use crate::seating::{Seating, Unit};
use crate::{Error, Result};

/// What a reservation holds for when the process has no run lease whose heartbeat
/// would keep it alive (an embedding that does not lease its runs): long enough for a
/// slow turn, short enough that a process that died holding it frees the pool soon.
const UNLEASED_TTL_MS: i64 = 10 * 60 * 1000;

/// The output a call is assumed to produce when the worker names no `max_tokens`: a
/// guess, held only while the turn is in flight (its reported spend replaces it).
const OUTPUT_GUESS_TOKENS: u64 = 4_096;

/// A reservation held for one planned turn; released when dropped unless the turn's
/// commit took it (`committed`). Shared by the clones of its plan: the last one
/// dropped releases it.
pub(super) struct Held {
    store: Arc<dyn Store>,
    id: Mutex<Option<ReservationId>>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Held").field(&self.id()).finish()
    }
}

impl Held {
    /// The reservation, while it is still this plan's to release.
    pub fn id(&self) -> Option<ReservationId> {
        *self.id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The turn committed: its transaction released the reservation.
    pub fn committed(&self) {
        self.id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let id = self
            .id
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(id) = id {
            // A release that fails leaves a reservation that expires by itself; the
            // turn's own end (an error, a block) is what the caller needs to hear.
            let _ = self.store.release_reservation(id);
        }
    }
}

/// Whether a pool's allowance meters anything: an unmetered pool is never short, so
/// its turns reserve nothing (and pay nothing for it).
fn metered(pool: &Pool) -> bool {
    let a = &pool.allowance;
    a.tokens.is_some() || a.usd.is_some() || a.requests.is_some()
}

impl Engine {
    /// Fills the seat of `unit` for turn `turn` and, when the pick's pool is metered,
    /// reserves the turn's estimate of it (a briefing of up to `budget` tokens). A pool
    /// found short (other turns in flight hold the rest of it) is read as the store
    /// found it, and the seat routed again; `Seating::Nobody` when no pool is left.
    pub(super) fn seat_reserved(
        &self,
        session: &Session,
        state: &ExecutionState,
        unit: &Unit,
        turn: u32,
        budget: usize,
    ) -> Result<(Seating, Option<Arc<Held>>)> {
        let floor = &session.config.settings.floor;
        let mut reading = self.reading(floor)?;
        // Each short answer takes one more pool off the floor: the loop ends within
        // one pass per pool.
        for _ in 0..=floor.pools.len() {
            let seating = self.seat_from(session, state, unit, &reading);
            let Some(pin) = seating.pin() else {
                return Ok((seating, None));
            };
            let Some(pool) = floor.pools.iter().find(|p| p.id == pin.pool) else {
                return Ok((seating, None));
            };
            if !metered(pool) {
                return Ok((seating, None));
            }
            let worker = self.roster_index(session, &pin.worker)?;
            let window = pool
                .window
                .bounds(reading.now)
                .map_err(|e| Error::Config(format!("pool {}: {e}", pool.id)))?;
            let request = ReserveRequest {
                pool: pool.id.clone(),
                window,
                allowance: pool.allowance,
                estimate: self.estimate(session, worker, budget),
                run: session.run.clone(),
                turn,
                lease_token: session.run_lease.as_ref().map(|l| l.token.clone()),
                at: reading.now,
                ttl_ms: session
                    .run_lease
                    .as_ref()
                    .map_or(UNLEASED_TTL_MS, |l| l.lease_ms),
            };
            match self.store.try_reserve(&request)? {
                ReserveOutcome::Reserved { id } => {
                    let held = Held {
                        store: self.store.clone(),
                        id: Mutex::new(Some(id)),
                    };
                    return Ok((seating, Some(Arc::new(held))));
                }
                // The router reads the pool as the store found it: out of headroom.
                ReserveOutcome::Short { usage } => {
                    match reading.usage.iter_mut().find(|u| u.pool == usage.pool) {
                        Some(read) => *read = usage,
                        None => reading.usage.push(usage),
                    }
                }
            }
        }
        Err(Error::Config(format!(
            "seat {}: the store kept answering that pools were short after the router had read them so; this is a bug in baton",
            unit.seat
        )))
    }

    /// What turn of `worker` may spend: one request per call it makes, each sending a
    /// briefing of up to `budget` tokens and receiving up to its `max_tokens`, priced
    /// when the worker has a price. Retries and repairs are not counted: a turn that
    /// makes them spends more than it held, as it would have without holding anything.
    fn estimate(&self, session: &Session, worker: usize, budget: usize) -> Estimate {
        let w = &session.config.roster.workers[worker];
        let is_agent = session.gateways[worker]
            .as_ref()
            .is_some_and(|g| g.needs_workspace());
        let calls: u64 = if !is_agent && self.two_calls(session, worker) {
            2
        } else {
            1
        };
        let input = budget as u64;
        let output = w.max_tokens.map_or(OUTPUT_GUESS_TOKENS, u64::from);
        let cost = w
            .price
            .as_ref()
            .map_or(0, |p| p.cost_micro_usd(input, output, 0));
        Estimate {
            tokens: input.saturating_add(output).saturating_mul(calls),
            cost_micro_usd: cost.saturating_mul(calls),
            requests: calls,
        }
    }
}
