//! `route`: fill one seat from `qualified ∩ allowed by policy ∩ headroom`, coldest pool
//! first, and say why every other worker was left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Benches, CHECKPOINT_CONFIRM, CHECKPOINT_FIND, Candidate, Dimension, Fractions, Pin, PinReason,
    Pool, PoolId, PoolUsage, Seat, SeatId,
};
use crate::ids::{Timestamp, WorkerId};

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
    pub tags: &'a [String],
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Exclusion {
    /// The worker's `qualified` globs do not cover the seat, or the seat's narrowing
    /// matches neither its id nor its model.
    NotQualified,
    /// The seat's policy keeps the worker's family from steps with this tag.
    PolicyDenied { tag: String },
    /// The seat reviews, checks or judges work written by this family.
    SameFamilyAsWriter { family: String, writer: WorkerId },
    /// `checkpoint.confirm` for a step whose checkpoint this worker found.
    HeldFind,
    /// Switched off in the config.
    Disabled,
    /// Benched by the owner: the worker's pool when `pool` is given, else the worker.
    Benched {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<PoolId>,
    },
    /// A provider said the pool's quota is gone until this reset.
    PoolExhausted { pool: PoolId, until: Timestamp },
    /// The pool has spent its allowance on this dimension for the current window,
    /// which ends at `resets_at`.
    NoHeadroom {
        pool: PoolId,
        dimension: Dimension,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resets_at: Option<Timestamp>,
    },
    /// The worker names a pool that is not configured (the config refuses this; the
    /// router still never guesses a pool's headroom).
    UnknownPool { pool: PoolId },
}

/// One worker left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub worker: WorkerId,
    pub reason: Exclusion,
}

/// The router's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routed {
    pub pick: Pick,
    /// Every eligible worker, in the order the router ranks them (the pick's pool
    /// first unless a pin held).
    pub eligible: Vec<WorkerId>,
    /// Every other worker, by id.
    pub excluded: Vec<Excluded>,
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

impl Routed {
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
    pool: &'a Pool,
    usage: Option<&'a PoolUsage>,
    fraction: f64,
}

/// Fills `input.seat`.
///
/// Eligible = qualified ∩ allowed by policy ∩ cross-family ∩ headroom (see `Exclusion`).
/// A pin for the seat in this phase holds while its worker stays eligible. Otherwise the
/// pick is the eligible worker of the coldest pool (lowest used fraction, the largest
/// over its dimensions), ties broken by pool id and then worker id, so the same input
/// gives the same answer in whatever order the roster lists its workers.
pub fn route(input: &RouteInput<'_>) -> Routed {
    let pools = pool_states(input);
    let writers = writers_under_review(input);
    let found_by = find_holders(input);

    let mut eligible: Vec<(f64, &PoolId, &Candidate)> = Vec::with_capacity(input.candidates.len());
    let mut excluded = Vec::new();
    for candidate in input.candidates {
        match exclusion(input, &pools, &writers, &found_by, candidate) {
            None => {
                let fraction = pools.get(&candidate.pool).map_or(0.0, |p| p.fraction);
                eligible.push((fraction, &candidate.pool, candidate));
            }
            Some(reason) => excluded.push(Excluded {
                worker: candidate.id.clone(),
                reason,
            }),
        }
    }
    eligible.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.cmp(b.1))
            .then_with(|| a.2.id.cmp(&b.2.id))
    });
    excluded.sort_by(|a, b| a.worker.cmp(&b.worker));

    let pick = pick(input, &pools, &eligible, &excluded);
    Routed {
        pick,
        eligible: eligible.iter().map(|(_, _, c)| c.id.clone()).collect(),
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
            (
                &pool.id,
                PoolState {
                    pool,
                    usage,
                    fraction,
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
    input
        .history
        .iter()
        .filter(|a| a.step == step && !a.seat.reviews_work())
        .collect()
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

fn exclusion(
    input: &RouteInput<'_>,
    pools: &BTreeMap<&PoolId, PoolState<'_>>,
    writers: &[&Authored],
    found_by: &[&WorkerId],
    candidate: &Candidate,
) -> Option<Exclusion> {
    let seat = input.seat;
    if !candidate.qualifies_for(&seat.id) || !seat.admits(candidate) {
        return Some(Exclusion::NotQualified);
    }
    if let Some(tag) = seat.denied_tag(input.tags, &candidate.family) {
        return Some(Exclusion::PolicyDenied { tag: tag.clone() });
    }
    if let Some(writer) = writers.iter().find(|w| w.family == candidate.family) {
        return Some(Exclusion::SameFamilyAsWriter {
            family: writer.family.clone(),
            writer: writer.worker.clone(),
        });
    }
    if found_by.contains(&&candidate.id) {
        return Some(Exclusion::HeldFind);
    }
    if !candidate.enabled {
        return Some(Exclusion::Disabled);
    }
    let Some(state) = pools.get(&candidate.pool) else {
        return Some(Exclusion::UnknownPool {
            pool: candidate.pool.clone(),
        });
    };
    if input.benches.pools.contains(&candidate.pool) {
        return Some(Exclusion::Benched {
            pool: Some(candidate.pool.clone()),
        });
    }
    if input.benches.workers.contains(&candidate.id) {
        return Some(Exclusion::Benched { pool: None });
    }
    let usage = state.usage?;
    if let Some(until) = usage.exhausted_at(input.now) {
        return Some(Exclusion::PoolExhausted {
            pool: candidate.pool.clone(),
            until,
        });
    }
    let dimension = state.pool.allowance.spent_dimension(usage)?;
    Some(Exclusion::NoHeadroom {
        pool: candidate.pool.clone(),
        dimension,
        resets_at: state.pool.window.bounds(input.now).ok().map(|(_, end)| end),
    })
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
        .find(|e| e.worker == pin.worker)
        .map(|e| &e.reason);
    match reason {
        Some(Exclusion::Benched { pool: Some(pool) }) => {
            PinReason::PoolBenched { pool: pool.clone() }
        }
        Some(Exclusion::PoolExhausted { pool, .. } | Exclusion::NoHeadroom { pool, .. }) => {
            PinReason::PoolExhausted { pool: pool.clone() }
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
