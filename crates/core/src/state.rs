//! `ExecutionState`: the canonical record of a run. Only the reconciler (and, for the plan
//! cursor, the orchestrator) changes it; models only ever make claims about it.
//!
//! Every record carries engine-stamped `Provenance`. The claim types in `claims` have no
//! field that could express provenance or verification, so a model cannot set them
//! (invariant 5).

use serde::{Deserialize, Serialize};

use crate::ids::{RunId, Timestamp, WorkerId};
use crate::line::{Finding, PlanLock, PlanVersion, Verdict};
pub use crate::step_scope::StepScope;
pub use crate::step_tag::StepTag;

/// Who recorded something, with what model, at which turn and engine time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub recorded_by: WorkerId,
    pub model: String,
    pub turn: u32,
    pub recorded_at: Timestamp,
}

/// A later worker restating something already on record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reaffirmation {
    pub by: WorkerId,
    pub turn: u32,
    /// The wording used, when it differs from the record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wording: Option<String>,
    /// The severity a restated issue was claimed at, when it differs from the one on
    /// record (which only ever rises: see the reconciler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Done,
}

/// One step of the plan (a task). The engine owns `status`: a step is done when its
/// turn commits with evidence of work (see `reconciler::complete_step`), however the
/// model words its completion claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub id: String,
    pub title: String,
    pub status: StepStatus,
    /// Package budget for this step, in tokens, when set per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<usize>,
    /// The seat a routed run fills for this step (`review.code`); none: the default
    /// seat of a plan step (see the engine's `seating`). Ignored when the run has no
    /// pools or seats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<crate::router::SeatId>,
    /// The work the step covers, when the plan states it; else `StepScope::of_title`
    /// decides (see `scope`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<StepScope>,
    /// What the step touches (`credentials`, `db`), as the plan tags it: a routed run's
    /// seat policy (`deny_tags`) reads them. None is the common case, and is not
    /// written, so an untagged plan's record reads as it did before tags existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<StepTag>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_by: Option<WorkerId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at_turn: Option<u32>,
    /// The turns on this step that did not complete it, oldest first. Append-only, like
    /// failed attempts: the next attempt is told what happened to them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<StepAttempt>,
}

impl PlanStep {
    /// The work the step covers: as the plan states it, else as its title reads.
    pub fn scope(&self) -> StepScope {
        self.scope
            .unwrap_or_else(|| StepScope::of_title(&self.title))
    }
}

/// How a turn on a step ended without completing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// A call failed or its output was unusable: nothing was merged.
    Failed,
    /// The claims were merged, but none of them was evidence of work on the step.
    NoEvidence,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::NoEvidence => "no evidence of work",
        }
    }
}

/// One turn on a step that did not complete it, as the engine saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepAttempt {
    pub turn: u32,
    pub worker: WorkerId,
    pub outcome: AttemptOutcome,
    /// What happened, shortened: the error, or what the worker said instead of working.
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reaffirmed: Vec<Reaffirmation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedWork {
    pub id: String,
    pub text: String,
    /// The plan step this work belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub provenance: Provenance,
    /// Later claims of the same work on the same step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reaffirmed: Vec<Reaffirmation>,
}

/// One version of an artifact. Versions are appended, never overwritten (invariant 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactVersion {
    pub version: u32,
    pub description: String,
    /// sha256 of the claimed content, when the claim carried content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub provenance: Provenance,
    /// False until a `Verifier` checked it; never set from a claim.
    pub verified: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub id: String,
    /// The artifact's name or path, its identity across versions.
    pub name: String,
    pub kind: String,
    pub versions: Vec<ArtifactVersion>,
    /// Workers that mentioned the artifact without changing it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<Reaffirmation>,
}

impl Artifact {
    pub fn latest(&self) -> &ArtifactVersion {
        // An artifact is created with one version and versions are never removed.
        &self.versions[self.versions.len() - 1]
    }
    pub fn creator(&self) -> &WorkerId {
        &self.versions[0].provenance.recorded_by
    }
    /// Every worker that produced a version after the first, in order, without repeats.
    pub fn modifiers(&self) -> Vec<&WorkerId> {
        let mut out: Vec<&WorkerId> = Vec::new();
        for v in &self.versions[1..] {
            if !out.contains(&&v.provenance.recorded_by) {
                out.push(&v.provenance.recorded_by);
            }
        }
        out
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueStatus {
    Open,
    /// Closed by a verifier or gate, never by a claim (invariant 2).
    Resolved,
}

/// A claim that an issue is resolved. Recorded; it does not close the issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionClaim {
    pub by: WorkerId,
    pub turn: u32,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub id: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub severity: Severity,
    pub status: IssueStatus,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_claimed_by: Option<ResolutionClaim>,
    /// What confirmed the resolution (a verifier or gate), set only by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// The gate whose passing run closes this issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reaffirmed: Vec<Reaffirmation>,
}

/// Something that was tried and did not work. Append-only (invariant 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub id: String,
    pub what: String,
    pub why: String,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reaffirmed: Vec<Reaffirmation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assumption {
    pub id: String,
    pub text: String,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reaffirmed: Vec<Reaffirmation>,
}

/// A statement with who made it (last action, next action).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped {
    pub text: String,
    pub provenance: Provenance,
}

/// What one worker left for the next: notes and warnings from its handoff report, and
/// what the engine found in the turn's claims that the next worker must see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffRecord {
    pub id: String,
    pub notes: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Written by the reconciler, never by a model: e.g. a possible contradiction
    /// between a claim of this turn and an earlier record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engine_warnings: Vec<String>,
    pub provenance: Provenance,
}

/// A worker's participation in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub id: WorkerId,
    pub model: String,
    pub family: String,
    pub turns: Vec<u32>,
}

/// The canonical record of a run.
///
/// Record vectors only ever grow, and existing entries keep their index, which lets the
/// store persist a turn as the records it changed (`diff`), not the whole state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionState {
    pub run_id: RunId,
    pub objective: String,
    pub plan: Vec<PlanStep>,
    /// Committed turns so far; the next turn is number `turns`.
    pub turns: u32,
    /// Failed turns in a row since the last committed one (orchestrator bookkeeping).
    #[serde(default)]
    pub consecutive_failures: u32,
    #[serde(default)]
    pub decisions: Vec<Decision>,
    #[serde(default)]
    pub completed: Vec<CompletedWork>,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    #[serde(default)]
    pub issues: Vec<Issue>,
    #[serde(default)]
    pub failed_attempts: Vec<FailedAttempt>,
    #[serde(default)]
    pub assumptions: Vec<Assumption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<Stamped>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<Stamped>,
    #[serde(default)]
    pub handoffs: Vec<HandoffRecord>,
    #[serde(default)]
    pub workers: Vec<WorkerRecord>,
    /// The assembly line's records (see `line`): empty, and not serialized, in a run
    /// that does not use the line, so such a run's bytes are what they always were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<Verdict>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan_versions: Vec<PlanVersion>,
    /// The plan frozen at the plan lock; nothing changes a locked plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_lock: Option<PlanLock>,
    /// Where the unit is on its route (the supervisor's cursor, like the plan cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<crate::line::cursor::LineProgress>,
    /// Memoised term sets for the compiler's relevance scoring (derived, never stored).
    #[serde(skip)]
    pub scoring: crate::text::ScoringCache,
}

impl ExecutionState {
    pub fn new(run_id: RunId, objective: impl Into<String>, steps: &[String]) -> Self {
        ExecutionState {
            run_id,
            objective: objective.into(),
            plan: steps
                .iter()
                .enumerate()
                .map(|(i, title)| PlanStep {
                    id: format!("T{}", i + 1),
                    title: title.clone(),
                    status: StepStatus::Pending,
                    budget: None,
                    seat: None,
                    scope: None,
                    tags: Vec::new(),
                    done_by: None,
                    done_at_turn: None,
                    attempts: Vec::new(),
                })
                .collect(),
            turns: 0,
            consecutive_failures: 0,
            decisions: Vec::new(),
            completed: Vec::new(),
            artifacts: Vec::new(),
            issues: Vec::new(),
            failed_attempts: Vec::new(),
            assumptions: Vec::new(),
            last_action: None,
            next_action: None,
            handoffs: Vec::new(),
            workers: Vec::new(),
            findings: Vec::new(),
            verdicts: Vec::new(),
            plan_versions: Vec::new(),
            plan_lock: None,
            line: None,
            scoring: Default::default(),
        }
    }

    /// Index of the first step not yet done, if any.
    pub fn cursor(&self) -> Option<usize> {
        self.plan
            .iter()
            .position(|s| s.status == StepStatus::Pending)
    }

    pub fn steps_done(&self) -> usize {
        self.plan
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .count()
    }

    pub fn open_issues(&self) -> impl Iterator<Item = &Issue> {
        self.issues.iter().filter(|i| i.status == IssueStatus::Open)
    }

    /// Number of records across every category (for reporting and benchmarks).
    pub fn item_count(&self) -> usize {
        self.decisions.len()
            + self.completed.len()
            + self.artifacts.len()
            + self.issues.len()
            + self.failed_attempts.len()
            + self.assumptions.len()
            + self.handoffs.len()
    }

    /// The records `self` has that differ from, or are absent in, `before`.
    ///
    /// Relies on records never being removed or reordered (append-only vectors), so a
    /// turn's storage cost is what the turn changed.
    pub fn diff(&self, before: &ExecutionState) -> Vec<RecordChange> {
        let mut out = Vec::new();
        diff_vec(
            &mut out,
            RecordKind::Decision,
            &before.decisions,
            &self.decisions,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Completed,
            &before.completed,
            &self.completed,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Artifact,
            &before.artifacts,
            &self.artifacts,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Issue,
            &before.issues,
            &self.issues,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::FailedAttempt,
            &before.failed_attempts,
            &self.failed_attempts,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Assumption,
            &before.assumptions,
            &self.assumptions,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Handoff,
            &before.handoffs,
            &self.handoffs,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Finding,
            &before.findings,
            &self.findings,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::Verdict,
            &before.verdicts,
            &self.verdicts,
            |r| &r.id,
        );
        diff_vec(
            &mut out,
            RecordKind::PlanVersion,
            &before.plan_versions,
            &self.plan_versions,
            |r| &r.id,
        );
        out
    }

    /// The part of the state that is not a record vector: objective, plan, counters,
    /// last/next action and the worker roster of the run. Small; stored whole per turn.
    pub fn header(&self) -> StateHeader {
        StateHeader {
            run_id: self.run_id.clone(),
            objective: self.objective.clone(),
            plan: self.plan.clone(),
            turns: self.turns,
            consecutive_failures: self.consecutive_failures,
            last_action: self.last_action.clone(),
            next_action: self.next_action.clone(),
            workers: self.workers.clone(),
            plan_lock: self.plan_lock.clone(),
            line: self.line.clone(),
        }
    }

    /// Rebuilds a state from its header and its records (in record order).
    pub fn from_parts(header: StateHeader, records: Vec<RecordChange>) -> crate::Result<Self> {
        let mut state = ExecutionState {
            run_id: header.run_id,
            objective: header.objective,
            plan: header.plan,
            turns: header.turns,
            consecutive_failures: header.consecutive_failures,
            decisions: Vec::new(),
            completed: Vec::new(),
            artifacts: Vec::new(),
            issues: Vec::new(),
            failed_attempts: Vec::new(),
            assumptions: Vec::new(),
            last_action: header.last_action,
            next_action: header.next_action,
            handoffs: Vec::new(),
            workers: header.workers,
            findings: Vec::new(),
            verdicts: Vec::new(),
            plan_versions: Vec::new(),
            plan_lock: header.plan_lock,
            line: header.line,
            scoring: Default::default(),
        };
        for rec in records {
            let body = rec.body;
            let corrupt = |e: serde_json::Error| crate::Error::Corrupt {
                what: format!("{} record {}", rec.kind.as_str(), rec.id),
                detail: e.to_string(),
            };
            match rec.kind {
                RecordKind::Decision => state
                    .decisions
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Completed => state
                    .completed
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Artifact => state
                    .artifacts
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Issue => state
                    .issues
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::FailedAttempt => state
                    .failed_attempts
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Assumption => state
                    .assumptions
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Handoff => state
                    .handoffs
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Finding => state
                    .findings
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::Verdict => state
                    .verdicts
                    .push(serde_json::from_value(body).map_err(corrupt)?),
                RecordKind::PlanVersion => state
                    .plan_versions
                    .push(serde_json::from_value(body).map_err(corrupt)?),
            }
        }
        Ok(state)
    }
}

fn diff_vec<T: PartialEq + Serialize>(
    out: &mut Vec<RecordChange>,
    kind: RecordKind,
    before: &[T],
    after: &[T],
    id: impl Fn(&T) -> &String,
) {
    for (i, rec) in after.iter().enumerate() {
        if before.get(i) != Some(rec) {
            // Serialising plain data structs to a Value cannot fail (no maps with
            // non-string keys, no custom serialisers).
            let body = serde_json::to_value(rec).unwrap_or(serde_json::Value::Null);
            out.push(RecordChange {
                kind,
                id: id(rec).clone(),
                ordinal: i as u32,
                body,
            });
        }
    }
}

/// The non-record part of `ExecutionState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHeader {
    pub run_id: RunId,
    pub objective: String,
    pub plan: Vec<PlanStep>,
    pub turns: u32,
    #[serde(default)]
    pub consecutive_failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<Stamped>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<Stamped>,
    #[serde(default)]
    pub workers: Vec<WorkerRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_lock: Option<PlanLock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<crate::line::cursor::LineProgress>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    Decision,
    Completed,
    Artifact,
    Issue,
    FailedAttempt,
    Assumption,
    Handoff,
    /// The assembly line's (after the others: `ALL`'s order is the stored order).
    Finding,
    Verdict,
    PlanVersion,
}

impl RecordKind {
    pub const ALL: [RecordKind; 10] = [
        RecordKind::Decision,
        RecordKind::Completed,
        RecordKind::Artifact,
        RecordKind::Issue,
        RecordKind::FailedAttempt,
        RecordKind::Assumption,
        RecordKind::Handoff,
        RecordKind::Finding,
        RecordKind::Verdict,
        RecordKind::PlanVersion,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Decision => "decision",
            RecordKind::Completed => "completed",
            RecordKind::Artifact => "artifact",
            RecordKind::Issue => "issue",
            RecordKind::FailedAttempt => "failed_attempt",
            RecordKind::Assumption => "assumption",
            RecordKind::Handoff => "handoff",
            RecordKind::Finding => "finding",
            RecordKind::Verdict => "verdict",
            RecordKind::PlanVersion => "plan_version",
        }
    }
    pub fn parse(s: &str) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One record as persisted: created or changed by a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordChange {
    pub kind: RecordKind,
    pub id: String,
    /// Position within its category; records keep their position forever.
    pub ordinal: u32,
    pub body: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prov(turn: u32) -> Provenance {
        Provenance {
            recorded_by: WorkerId::new("w1"),
            model: "mock/a".into(),
            turn,
            recorded_at: Timestamp(1),
        }
    }

    #[test]
    fn diff_reports_only_new_and_changed_records_and_parts_roundtrip() {
        let mut before = ExecutionState::new(RunId("r".into()), "obj", &["a".into()]);
        before.decisions.push(Decision {
            id: "D1".into(),
            text: "use x".into(),
            reason: None,
            provenance: prov(0),
            reaffirmed: vec![],
        });
        before.assumptions.push(Assumption {
            id: "S1".into(),
            text: "a".into(),
            provenance: prov(0),
            reaffirmed: vec![],
        });
        let mut after = before.clone();
        after.decisions[0].reaffirmed.push(Reaffirmation {
            by: WorkerId::new("w2"),
            turn: 1,
            wording: None,
            severity: None,
        });
        after.failed_attempts.push(FailedAttempt {
            id: "F1".into(),
            what: "w".into(),
            why: "y".into(),
            provenance: prov(1),
            reaffirmed: vec![],
        });
        let changes = after.diff(&before);
        let ids: Vec<_> = changes.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["D1", "F1"]);

        let mut all = after.diff(&ExecutionState::new(RunId("r".into()), "obj", &[]));
        all.sort_by_key(|c| (c.kind.as_str(), c.ordinal));
        let rebuilt = ExecutionState::from_parts(after.header(), all).unwrap();
        assert_eq!(rebuilt, after);
    }
}
