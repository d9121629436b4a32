//! `[[pools]]` and `[[seats]]`: the subscriptions a roster's workers draw on, and the
//! seats' narrowing and policy. Read raw, then checked against the roster so that every
//! mistake is refused when the file is read, with what to write instead.

use std::collections::{BTreeMap, BTreeSet};

use baton_core::router::{
    Allowance, Candidate, Glob, Pool, PoolId, SEAT_GROUPS, Seat, SeatId, Window,
};
use serde::{Deserialize, Serialize};

use super::{Roster, WorkerConfig};
use crate::{Error, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPool {
    id: String,
    /// `{ tokens, usd, requests }` per window; none given is an unmetered pool.
    #[serde(default)]
    allowance: Allowance,
    /// `weekly` (the default), `daily` or `monthly`, optionally with its reset.
    window: Option<String>,
    /// The reset on its own (`"thu 09:30"`), when `window` names only the period.
    reset: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSeat {
    id: String,
    #[serde(default)]
    qualified: Vec<String>,
    #[serde(default)]
    deny_tags: BTreeMap<String, Vec<String>>,
}

/// The pools and seats of a configuration file, checked against its roster. A routed
/// run keeps its own copy with its settings, as it keeps its roster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Floor {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<Pool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<Seat>,
}

impl Floor {
    /// Neither pools nor seats: runs take turns as they always have.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty() && self.seats.is_empty()
    }

    pub fn pool(&self, id: &PoolId) -> Option<&Pool> {
        self.pools.iter().find(|p| &p.id == id)
    }

    pub(crate) fn pool_ids(&self) -> String {
        join(self.pools.iter().map(|p| p.id.as_str()))
    }
}

fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

pub(super) fn resolve(pools: Vec<RawPool>, seats: Vec<RawSeat>) -> Result<Floor> {
    let mut floor = Floor::default();
    for raw in pools {
        let id = PoolId::new(raw.id);
        let window = match (&raw.window, &raw.reset) {
            (None, None) => Window::default(),
            (window, reset) => {
                Window::parse(window.as_deref().unwrap_or("weekly"), reset.as_deref())
                    .map_err(|e| Error::Config(format!("pool {id}: {e}")))?
            }
        };
        let pool = Pool {
            id,
            allowance: raw.allowance,
            window,
        };
        pool.validate().map_err(|e| Error::Config(e.to_string()))?;
        if floor.pool(&pool.id).is_some() {
            return Err(Error::Config(format!(
                "pool id \"{}\" appears twice; give each [[pools]] entry its own id",
                pool.id
            )));
        }
        floor.pools.push(pool);
    }
    let mut seen = BTreeSet::new();
    for raw in seats {
        let seat = Seat {
            id: SeatId::new(raw.id),
            qualified: raw.qualified.into_iter().map(Glob::new).collect(),
            deny_tags: raw.deny_tags,
        };
        seat.validate().map_err(|e| Error::Config(e.to_string()))?;
        // A key no step could carry would deny nothing, silently.
        for tag in seat.deny_tags.keys() {
            baton_core::state::StepTag::new(tag)
                .map_err(|e| Error::Config(format!("seat {}: deny_tags: {e}", seat.id)))?;
        }
        if !seat.id.in_known_group() {
            return Err(Error::Config(format!(
                "seat \"{}\" is not a seat any station asks for: a seat's name starts with one of {}; fix the name (e.g. \"checkpoint.find\")",
                seat.id,
                SEAT_GROUPS.join(", ")
            )));
        }
        if !seen.insert(seat.id.clone()) {
            return Err(Error::Config(format!(
                "seat id \"{}\" appears twice; merge the two [[seats]] entries",
                seat.id
            )));
        }
        floor.seats.push(seat);
    }
    Ok(floor)
}

impl WorkerConfig {
    /// The router's view of this worker. A worker outside any pool (a roster without
    /// pools) is given the empty pool id, which no configured pool has.
    pub fn candidate(&self) -> Candidate {
        Candidate {
            id: self.id.clone(),
            model: self.model.clone(),
            family: self.family.clone(),
            pool: self.pool.clone().unwrap_or_else(|| PoolId::new("")),
            qualified: self.qualified.clone(),
            enabled: self.enabled,
        }
    }
}

/// The checks that need both the roster and the floor.
pub(crate) fn check(roster: &Roster, floor: &Floor) -> Result<()> {
    check_workers(roster, floor)?;
    for seat in &floor.seats {
        check_seat(roster, seat)?;
    }
    Ok(())
}

/// The checks of each worker against the floor (its pool, its seat globs), without
/// asking that every seat be fillable from these workers alone: what a job's candidate
/// (a part of the roster) must pass. A seat its plan needs and none of them may take
/// stops its run with the router's question.
pub(crate) fn check_workers(roster: &Roster, floor: &Floor) -> Result<()> {
    for worker in &roster.workers {
        let id = &worker.id;
        match &worker.pool {
            Some(pool) if floor.pool(pool).is_none() => {
                return Err(Error::Config(if floor.pools.is_empty() {
                    format!(
                        "worker {id} names pool \"{pool}\", but no pools are defined; add a [[pools]] entry with id = \"{pool}\" and its allowance, or remove `pool` from the worker"
                    )
                } else {
                    format!(
                        "worker {id} names pool \"{pool}\", which no [[pools]] entry defines (defined: {}); fix the name, or add a [[pools]] entry for it",
                        floor.pool_ids()
                    )
                }));
            }
            None if !floor.pools.is_empty() => {
                return Err(Error::Config(format!(
                    "worker {id} has no pool, but pools are defined ({}); add pool = \"…\" to the worker so its calls count against a subscription's allowance (an unmetered pool, with no allowance, suits a local model)",
                    floor.pool_ids()
                )));
            }
            _ => {}
        }
        for glob in &worker.qualified {
            if !names_known_group(glob) {
                return Err(Error::Config(format!(
                    "worker {id}: qualified = \"{glob}\" names no seat: a seat's name starts with one of {}; fix the name (e.g. \"review.*\")",
                    SEAT_GROUPS.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// A seat nobody could ever take is refused now, not at the turn that needs it.
fn check_seat(roster: &Roster, seat: &Seat) -> Result<()> {
    let candidates: Vec<Candidate> = roster.enabled().map(|(_, w)| w.candidate()).collect();
    let admitted: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.qualifies_for(&seat.id) && seat.admits(c))
        .collect();
    if admitted.is_empty() {
        let narrowed: Vec<&Candidate> = candidates.iter().filter(|c| seat.admits(c)).collect();
        let why = if narrowed.is_empty() {
            format!(
                "its qualified = [{}] matches no enabled worker's id or model; widen it",
                join(seat.qualified.iter().map(Glob::as_str))
            )
        } else {
            format!(
                "no {} qualified for it (the worker's qualified globs do not match {}); add the seat to a worker's qualified{}",
                if seat.qualified.is_empty() {
                    "enabled worker is".to_string()
                } else {
                    format!(
                        "worker its qualified admits ({}) is",
                        join(narrowed.iter().map(|c| c.id.as_str()))
                    )
                },
                seat.id,
                if seat.qualified.is_empty() {
                    ""
                } else {
                    ", or widen the seat's"
                }
            )
        };
        return Err(Error::Config(format!(
            "seat {}: no enabled worker may take it: {why}",
            seat.id
        )));
    }
    for (tag, denied) in &seat.deny_tags {
        if admitted.iter().all(|c| denied.contains(&c.family)) {
            return Err(Error::Config(format!(
                "seat {}: deny_tags.{tag} = [{}] excludes every worker that may take the seat ({}), so a step tagged {tag} could never be seated; remove a family from the list, or qualify a worker of another family",
                seat.id,
                denied.join(", "),
                join(admitted.iter().map(|c| c.id.as_str()))
            )));
        }
    }
    Ok(())
}

/// Whether a seat glob's first part (up to the first `.`) is a known group, or a
/// wildcard that may stand for one: `review.*`, `judge`, `*`, `*.find`.
fn names_known_group(glob: &Glob) -> bool {
    let group = glob.as_str().split('.').next().unwrap_or("");
    if group.contains(['*', '?']) {
        return SEAT_GROUPS.iter().any(|g| Glob::new(group).matches(g));
    }
    SEAT_GROUPS.contains(&group)
}
