//! Seats (named roles at a station) and the router's view of a worker.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Glob, PoolId, RouterError};
use crate::ids::WorkerId;
use crate::step_tag::StepTag;

/// A seat: `lead.build`, `plan.co-draft`, `checkpoint.find`, `review.deep-rounds` …
/// The seat and its contract stay put; the worker in it changes.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct SeatId(pub String);

impl SeatId {
    pub fn new(id: impl Into<String>) -> Self {
        SeatId(id.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Seats that review, check or judge someone else's work: `review.*`,
    /// `checkpoint.*`, `plan.scrutiny` and `judge` (or `judge.*`). The cross-family rule
    /// applies to them.
    pub fn reviews_work(&self) -> bool {
        let id = self.as_str();
        id.starts_with("review.")
            || id.starts_with("checkpoint.")
            || id == "plan.scrutiny"
            || id == "judge"
            || id.starts_with("judge.")
    }
}

impl fmt::Display for SeatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The stations and roles a seat's name starts with (`review` in `review.deep-rounds`,
/// `judge` on its own): the assembly line's stations (DESIGN.md) plus `lead` and
/// `judge`. A config that names a seat outside them has a typo: it would configure a
/// seat no station ever asks for.
pub const SEAT_GROUPS: &[&str] = &[
    "discovery",
    "plan",
    "lead",
    "build",
    "checkpoint",
    "review",
    "gate",
    "merge",
    "judge",
];

impl SeatId {
    /// Whether the name starts with one of `SEAT_GROUPS` (alone, or followed by `.`).
    pub fn in_known_group(&self) -> bool {
        let group = self.0.split('.').next().unwrap_or("");
        SEAT_GROUPS.contains(&group)
    }
}

/// The seat that finds a step's checkpoint; `checkpoint.confirm` is never its holder.
pub const CHECKPOINT_FIND: &str = "checkpoint.find";
/// The seat that confirms what `checkpoint.find` found.
pub const CHECKPOINT_CONFIRM: &str = "checkpoint.confirm";

/// A seat as configured. A seat without an entry in the config is `Seat::new(id)`: no
/// narrowing and no policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seat {
    pub id: SeatId,
    /// Optional narrowing: when given, only workers whose id or model matches one of
    /// these globs may take the seat (on top of the workers' own `qualified`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualified: Vec<Glob>,
    /// Policy: a step tag mapped to the families that must never see a step with that
    /// tag in this seat (`credentials = ["glm"]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deny_tags: BTreeMap<String, Vec<String>>,
}

impl Seat {
    pub fn new(id: SeatId) -> Self {
        Seat {
            id,
            qualified: Vec::new(),
            deny_tags: BTreeMap::new(),
        }
    }

    pub fn validate(&self) -> Result<(), RouterError> {
        if self.id.0.trim().is_empty() {
            return Err(RouterError::EmptyName { what: "seat" });
        }
        Ok(())
    }

    /// Whether the seat's narrowing admits the worker (no narrowing admits everyone).
    pub fn admits(&self, worker: &Candidate) -> bool {
        self.qualified.is_empty()
            || self
                .qualified
                .iter()
                .any(|g| g.matches(worker.id.as_str()) || g.matches(&worker.model))
    }

    /// The first of `tags` (in the order given) whose policy denies `family`.
    pub fn denied_tag<'t>(&self, tags: &'t [StepTag], family: &str) -> Option<&'t StepTag> {
        if self.deny_tags.is_empty() {
            return None;
        }
        tags.iter().find(|tag| {
            self.deny_tags
                .get(tag.as_str())
                .is_some_and(|families| families.iter().any(|f| f == family))
        })
    }
}

/// The router's view of one worker in the roster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: WorkerId,
    pub model: String,
    pub family: String,
    pub pool: PoolId,
    /// Globs over seat names this worker may take (`lead.*`, `review.*`). Empty means
    /// every seat: qualification is a restriction the owner writes down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualified: Vec<Glob>,
    /// A worker switched off in the config (not the same as benched, which is an
    /// owner's action recorded in the store).
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

impl Candidate {
    /// Whether the worker's own globs cover the seat.
    pub fn qualifies_for(&self, seat: &SeatId) -> bool {
        self.qualified.is_empty() || Glob::any_matches(&self.qualified, seat.as_str())
    }
}
