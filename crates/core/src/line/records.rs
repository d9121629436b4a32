//! The line's typed records: findings, verdicts, plan versions and the plan lock. They
//! live in `ExecutionState` with engine-stamped provenance (invariant 5) and are written
//! only by the reconciler (`reconciler::line`), never from a model's words directly.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{Timestamp, WorkerId};
use crate::router::SeatId;
use crate::state::{Provenance, ResolutionClaim};

/// How bad a finding is. Ordered: a stricter severity compares greater, so the
/// stricter of two is their `max`. NIT: style or taste, never holds anything up; MINOR:
/// worth fixing, no fix round; MAJOR: forces a fix round back to the build; BLOCKER: the
/// work cannot go on without a human's decision. (Said here, not on the variants: a
/// variant's doc comment turns the answer schema's plain enum into a longer `oneOf`.)
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum FindingSeverity {
    Nit,
    Minor,
    Major,
    Blocker,
}

impl FindingSeverity {
    pub const ALL: [FindingSeverity; 4] = [
        FindingSeverity::Nit,
        FindingSeverity::Minor,
        FindingSeverity::Major,
        FindingSeverity::Blocker,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingSeverity::Nit => "NIT",
            FindingSeverity::Minor => "MINOR",
            FindingSeverity::Major => "MAJOR",
            FindingSeverity::Blocker => "BLOCKER",
        }
    }
}

impl fmt::Display for FindingSeverity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingStatus {
    Open,
    /// Closed after a fix was claimed and then confirmed (a checkpoint's confirm seat
    /// or a gate): never on the fixer's claim alone.
    Fixed,
    /// Closed without a fix, by the lead or a human, with a reason.
    Dismissed,
}

impl FindingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingStatus::Open => "open",
            FindingStatus::Fixed => "fixed",
            FindingStatus::Dismissed => "dismissed",
        }
    }
}

/// Another reviewer raising a finding already on record, in its own severity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voice {
    pub by: WorkerId,
    pub family: String,
    pub seat: SeatId,
    pub turn: u32,
    pub severity: FindingSeverity,
    /// The wording used, when it differs from the record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wording: Option<String>,
}

/// Who closed a finding. Set by the engine from the turn it reconciles, never from a
/// model's claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum ClosedBy {
    /// A checking seat confirmed the claimed fix (`checkpoint.confirm`).
    Confirmed { seat: SeatId, worker: WorkerId },
    /// A passing gate confirmed it.
    Gate { gate: String },
    /// The lead dismissed it.
    Lead { seat: SeatId, worker: WorkerId },
    /// A human's answer dismissed it.
    Human,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closure {
    #[serde(flatten)]
    pub by: ClosedBy,
    pub turn: u32,
    pub at: Timestamp,
    /// Why (a dismissal's reason), or what the confirmation saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A problem a checking seat found in the work: a typed record, not a note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    /// The route's station it was raised at (`review`, `build` for a checkpoint).
    pub station: String,
    pub seat: SeatId,
    /// The round (or checkpoint pass) of the station, from 1.
    pub round: u32,
    /// The plan step a checkpoint finding is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The stricter of every voice's severity: it only ever rises.
    pub severity: FindingSeverity,
    /// The severity the first reviewer raised it at.
    pub raised_as: FindingSeverity,
    pub what: String,
    /// Where in the work: a path, a path:line, a plan step, a section.
    #[serde(rename = "where")]
    pub location: String,
    pub status: FindingStatus,
    /// The family of the worker that raised it (the worker is `provenance.recorded_by`).
    pub family: String,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voices: Vec<Voice>,
    /// A claim that the finding is fixed. Recorded; it does not close the finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix_claimed: Option<ResolutionClaim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<Closure>,
}

impl Finding {
    pub fn is_open(&self) -> bool {
        self.status == FindingStatus::Open
    }

    /// Every worker that raised it, the first one first, each once.
    pub fn raisers(&self) -> Vec<&WorkerId> {
        let mut out = vec![&self.provenance.recorded_by];
        for v in &self.voices {
            if !out.contains(&&v.by) {
                out.push(&v.by);
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VerdictKind {
    Approved,
    NeedsChanges,
    Blocked,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Approved => "APPROVED",
            VerdictKind::NeedsChanges => "NEEDS_CHANGES",
            VerdictKind::Blocked => "BLOCKED",
        }
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of a synthesis, with its reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub id: String,
    pub station: String,
    /// Which synthesis of the unit this is, from 1 (a fix round makes another).
    pub round: u32,
    pub verdict: VerdictKind,
    pub reasons: Vec<String>,
    /// The open findings the verdict rests on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// Whether the work goes back to the build for a fix round.
    pub fix_round: bool,
    pub provenance: Provenance,
}

/// One step of a drafted plan. Tags (`heavy`, `credentials`) are the plan's, as strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftStep {
    pub title: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A version of the plan: a co-draft, a merge, or a revision after scrutiny. Versions
/// are appended, never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanVersion {
    pub id: String,
    pub version: u32,
    pub station: String,
    pub seat: SeatId,
    pub steps: Vec<DraftStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The versions this one merges or revises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// `plan_hash` of `steps`.
    pub content_hash: String,
    pub provenance: Provenance,
}

/// The plan frozen: which version, its hash at the lock, who locked it and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanLock {
    pub plan: String,
    pub version: u32,
    pub content_hash: String,
    pub provenance: Provenance,
}

/// The first 12 digits of a hash, to name it in text (the whole of a shorter or
/// malformed one: a stored hash is outside input, never sliced blindly).
pub fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// sha256 of a plan's steps: titles and tags, one step a line, so two versions with
/// the same steps hash the same whatever their rationale.
pub fn plan_hash(steps: &[DraftStep]) -> String {
    let mut h = Sha256::new();
    for step in steps {
        h.update(step.title.as_bytes());
        h.update(b"\x1f");
        h.update(step.tags.join("\x1e").as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// What a checking seat may claim of one finding: no id, status or provenance (those
/// are the engine's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindingClaim {
    pub severity: FindingSeverity,
    pub what: String,
    #[serde(rename = "where")]
    pub location: String,
}

/// What a drafting seat may claim of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanDraft {
    pub steps: Vec<DraftStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
}
