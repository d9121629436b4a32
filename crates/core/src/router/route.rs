//! `route`: fill one seat from `qualified ∩ allowed by policy ∩ headroom`, coldest pool
//! first, and say why every other worker was left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Benches, CHECKPOINT_CONFIRM, CHECKPOINT_FIND, Candidate, Dimension, Fractions, Pin, PinReason,
    Pool, PoolId, PoolUsage, Seat, SeatId,
};
use crate::ids::{Timestamp, WorkerId};
use crate::step_tag::StepTag;

/// One entry of the run's history of who did what: `worker` held `seat` for `step`.
/// The engine builds these from its pins and turns; the router reads from them who wrote
/// the work under review (the holders of seats that do not review) and who held
/// `checkpoint.find`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authored {
    /// The unit of work: a plan step's id, or a station's own key such as `plan`.
    pub step: String,
    pub seat: SeatId,
    pub worker: WorkerId,
    pub family: String,
}

/// Everything one routing decision depends on. Nothing else is read: no clock, no store.
#[derive(Debug, Clone, Copy)]
pub struct RouteInput<'a> {
    pub seat: &'a Seat,
    /// The phase being worked; a pin holds only within its phase.
    pub phase: &'a str,
    /// The hand-off (turn number) this seating is for; named in a re-seating's pin.
    pub handoff: u32,
    /// The engine's clock: the pin's time, and the instant exhaustion marks are read at.
    pub now: Timestamp,
    /// The step's tags, read against the seat's `deny_tags`.
    pub tags: &'a [StepTag],
    /// The roster. Ids are unique (the config refuses duplicates).
    pub candidates: &'a [Candidate],
    pub pools: &'a [Pool],
    /// Each pool's usage in its current window; a pool without an entry used nothing.
    pub usage: &'a [PoolUsage],
    pub benches: &'a Benches,
    /// The run's pins so far, oldest first.
    pub pins: &'a [Pin],
    /// The unit of work this seating is for, looked up in `history`.
    pub step: Option<&'a str>,
    pub history: &'a [Authored],
    /// The worker running the lead, when the station wants this seat to stay with it at
    /// phase start (taken if eligible, with `PinReason::InheritedFromLead`).
    pub inherit_from: Option<&'a WorkerId>,
}

/// Why a worker cannot take the seat. Each excluded worker carries the first reason
/// that applies, in the order of the variants: the ones no owner's action lifts come
/// first, so that the reason shown for a benched worker is never one that unbenching
/// would not fix.
///
/// Names are borrowed from the `RouteInput`, as in `Excluded` and `Routed`: a decision
/// over 100 workers would otherwise copy a hundred ids that the caller already holds,
/// and those copies were most of its cost. Only the pick's pin is owned.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Exclusion<'a> {
    /// The worker's `qualified` globs do not cover the seat, or the seat's narrowing
    /// matches neither its id nor its model.
    NotQualified,
    /// The seat's policy keeps the worker's family from steps with this tag.
    PolicyDenied { tag: &'a str },
    /// The seat reviews, checks or judges work written by this family.
    SameFamilyAsWriter {
        family: &'a str,
        writer: &'a WorkerId,
    },
    /// `checkpoint.confirm` for a step whose checkpoint this worker found.
    HeldFind,
    /// Switched off in the config.
    Disabled,
    /// Benched by the owner: the worker's pool when `pool` is given, else the worker.
    Benched {
        #[serde(skip_serializing_if = "Option::is_none")]
        pool: Option<&'a PoolId>,
    },
    /// A provider said the pool's quota is gone until this reset.
    PoolExhausted { pool: &'a PoolId, until: Timestamp },
    /// The pool has spent its allowance on this dimension for the current window,
    /// which ends at `resets_at`.
    NoHeadroom {
        pool: &'a PoolId,
        dimension: Dimension,
        #[serde(skip_serializing_if = "Option::is_none")]
        resets_at: Option<Timestamp>,
    },
    /// The worker names a pool that is not configured (the config refuses this; the
    /// router still never guesses a pool's headroom).
    UnknownPool { pool: &'a PoolId },
}

/// One worker left out, and why.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Excluded<'a> {
    pub worker: &'a WorkerId,
    pub reason: Exclusion<'a>,
}

/// The router's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Routed<'a> {
    pub pick: Pick,
    /// Every eligible worker, in the order the router ranks them (the pick's pool
    /// first unless a pin held).
    pub eligible: Vec<&'a WorkerId>,
    /// Every other worker, by id.
    pub excluded: Vec<Excluded<'a>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pick {
    /// The seat's pin for this phase still holds: nothing new to record.
    Held { pin: Pin },
    /// A new seating; the engine writes this pin with the turn it seats.
    Seated { pin: Pin },
    /// Nobody may take the seat; the run stops with this question to a human.
    Nobody { seat: SeatId, question: String },
}

impl Routed<'_> {
    /// The pin of whoever takes the seat, held or new.
    pub fn pin(&self) -> Option<&Pin> {
        match &self.pick {
            Pick::Held { pin } | Pick::Seated { pin } => Some(pin),
            Pick::Nobody { .. } => None,
        }
    }
}

/// A pool's standing at `now`, computed once per decision.
struct PoolState<'a> {
    usage: Option<&'a PoolUsage>,
    fraction: f64,
    /// The dimension whose allowance is used up, with the end of the window (when the
    /// clock is in the calendar): computed here, once per pool, not per worker.
    spent: Option<(Dimension, Option<Timestamp>)>,
}

/// Fills `input.seat`.
///
/// Eligible = qualified ∩ allowed by policy ∩ cross-family ∩ headroom (see `Exclusion`).
/// A pin for the seat in this phase holds while its worker stays eligible. Otherwise the
/// pick is the eligible worker of the coldest pool (lowest used fraction, the largest
/// over its dimensions), ties broken by pool id and then worker id, so the same input
/// gives the same answer in whatever order the roster lists its workers.
pub fn route<'a>(input: &RouteInput<'a>) -> Routed<'a> {
    let pools = pool_states(input);
    let writers = writers_under_review(input);
    let found_by = find_holders(input);

    let mut eligible: Vec<(f64, &PoolId, &Candidate)> = Vec::with_capacity(input.candidates.len());
    let mut excluded = Vec::with_capacity(input.candidates.len());
    for candidate in input.candidates {
        match exclusion(input, &pools, &writers, &found_by, candidate) {
            Ok(fraction) => eligible.push((fraction, &candidate.pool, candidate)),
            Err(reason) => excluded.push(Excluded {
                worker: &candidate.id,
                reason,
            }),
        }
    }
    // Unstable sorts are deterministic here: worker ids are unique, so no two keys tie.
    eligible.sort_unstable_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.cmp(b.1))
            .then_with(|| a.2.id.cmp(&b.2.id))
    });
    excluded.sort_unstable_by(|a, b| a.worker.cmp(b.worker));

    let pick = pick(input, &pools, &eligible, &excluded);
    Routed {
        pick,
        eligible: eligible.iter().map(|(_, _, c)| &c.id).collect(),
        excluded,
    }
}

fn pool_states<'a>(input: &RouteInput<'a>) -> BTreeMap<&'a PoolId, PoolState<'a>> {
    input
        .pools
        .iter()
        .map(|pool| {
            let usage = input.usage.iter().find(|u| u.pool == pool.id);
            let fraction = usage.map_or(0.0, |u| pool.allowance.used_fraction(u));
            let spent = usage
                .and_then(|u| pool.allowance.spent_dimension(u))
                .map(|dimension| {
                    let resets_at = pool.window.bounds(input.now).ok().map(|(_, end)| end);
                    (dimension, resets_at)
                });
            (
                &pool.id,
                PoolState {
                    usage,
                    fraction,
                    spent,
                },
            )
        })
        .collect()
}

/// The families (with one of their workers) that wrote the work this seat reviews.
fn writers_under_review<'a>(input: &RouteInput<'a>) -> Vec<&'a Authored> {
    let Some(step) = input.step else {
        return Vec::new();
    };
    if !input.seat.id.reviews_work() {
        return Vec::new();
    }
    // One writer per family is enough to name: the rule is about families, and every
    // worker is compared against each entry.
    let mut writers: Vec<&Authored> = Vec::new();
    for authored in input.history {
        if authored.step == step
            && !authored.seat.reviews_work()
            && !writers.iter().any(|w| w.family == authored.family)
        {
            writers.push(authored);
        }
    }
    writers
}

/// The workers that held `checkpoint.find` for the step, when this is its confirmation.
fn find_holders<'a>(input: &RouteInput<'a>) -> Vec<&'a WorkerId> {
    let Some(step) = input.step else {
        return Vec::new();
    };
    if input.seat.id.as_str() != CHECKPOINT_CONFIRM {
        return Vec::new();
    }
    input
        .history
        .iter()
        .filter(|a| a.step == step && a.seat.as_str() == CHECKPOINT_FIND)
        .map(|a| &a.worker)
        .collect()
}

/// The worker's pool's used fraction when it may take the seat, else the first reason
/// it may not.
fn exclusion<'a>(
    input: &RouteInput<'a>,
    pools: &BTreeMap<&'a PoolId, PoolState<'a>>,
    writers: &[&'a Authored],
    found_by: &[&'a WorkerId],
    candidate: &'a Candidate,
) -> Result<f64, Exclusion<'a>> {
    let seat = input.seat;
    if !candidate.qualifies_for(&seat.id) || !seat.admits(candidate) {
        return Err(Exclusion::NotQualified);
    }
    if let Some(tag) = seat.denied_tag(input.tags, &candidate.family) {
        return Err(Exclusion::PolicyDenied { tag: tag.as_str() });
    }
    if let Some(writer) = writers.iter().find(|w| w.family == candidate.family) {
        return Err(Exclusion::SameFamilyAsWriter {
            family: &writer.family,
            writer: &writer.worker,
        });
    }
    if found_by.contains(&&candidate.id) {
        return Err(Exclusion::HeldFind);
    }
    if !candidate.enabled {
        return Err(Exclusion::Disabled);
    }
    let pool = &candidate.pool;
    let Some(state) = pools.get(pool) else {
        return Err(Exclusion::UnknownPool { pool });
    };
    if input.benches.pools.contains(pool) {
        return Err(Exclusion::Benched { pool: Some(pool) });
    }
    if input.benches.workers.contains(&candidate.id) {
        return Err(Exclusion::Benched { pool: None });
    }
    if let Some(until) = state.usage.and_then(|u| u.exhausted_at(input.now)) {
        return Err(Exclusion::PoolExhausted { pool, until });
    }
    match state.spent {
        None => Ok(state.fraction),
        Some((dimension, resets_at)) => Err(Exclusion::NoHeadroom {
            pool,
            dimension,
            resets_at,
        }),
    }
}

fn pick(
    input: &RouteInput<'_>,
    pools: &BTreeMap<&PoolId, PoolState<'_>>,
    eligible: &[(f64, &PoolId, &Candidate)],
    excluded: &[Excluded],
) -> Pick {
    let is_eligible = |id: &WorkerId| eligible.iter().find(|(_, _, c)| &c.id == id);
    // The latest pin of this seat in this phase (the last one when several share a time).
    let current = input
        .pins
        .iter()
        .filter(|p| p.seat == input.seat.id && p.phase == input.phase)
        .max_by_key(|p| p.at);
    let (reason, chosen) = match current {
        Some(pin) if is_eligible(&pin.worker).is_some() => {
            return Pick::Held { pin: pin.clone() };
        }
        Some(pin) => (reseat_reason(input, pin, excluded), eligible.first()),
        None => match input.inherit_from.and_then(is_eligible) {
            Some(lead) => (PinReason::InheritedFromLead, Some(lead)),
            None => (PinReason::AtPhaseStart, eligible.first()),
        },
    };
    match chosen {
        Some((_, _, candidate)) => Pick::Seated {
            pin: Pin {
                seat: input.seat.id.clone(),
                worker: candidate.id.clone(),
                model: candidate.model.clone(),
                family: candidate.family.clone(),
                pool: candidate.pool.clone(),
                phase: input.phase.to_string(),
                at: input.now,
                fractions: fractions(pools),
                reason,
                excluded: None,
            },
        },
        None => Pick::Nobody {
            seat: input.seat.id.clone(),
            question: super::question::nobody(input, excluded),
        },
    }
}

/// Why the seat's pin in this phase stopped holding.
fn reseat_reason(input: &RouteInput<'_>, pin: &Pin, excluded: &[Excluded]) -> PinReason {
    let reason = excluded
        .iter()
        .find(|e| *e.worker == pin.worker)
        .map(|e| &e.reason);
    match reason {
        Some(Exclusion::Benched { pool: Some(pool) }) => PinReason::PoolBenched {
            pool: (*pool).clone(),
        },
        Some(Exclusion::PoolExhausted { pool, .. } | Exclusion::NoHeadroom { pool, .. }) => {
            PinReason::PoolExhausted {
                pool: (*pool).clone(),
            }
        }
        _ => PinReason::ReseatedAtHandoff {
            handoff: input.handoff,
        },
    }
}

fn fractions(pools: &BTreeMap<&PoolId, PoolState<'_>>) -> Fractions {
    pools
        .iter()
        .map(|(id, state)| ((*id).clone(), state.fraction))
        .collect()
}
