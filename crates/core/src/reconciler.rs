//! The reconciler: the only write path from claims into canonical state (invariant 1).
//!
//! It merges a turn's `WorkerResult` and `HandoffReport` under the invariants: claims
//! never close issues (2), artifacts gain versions and start unverified (3), failed
//! attempts only grow (4), and provenance comes from the engine's `TurnContext` (5).
//! Restatements become reaffirmations, discrepancies become persisted warnings.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::claims::{HandoffReport, Refusal, WorkerResult};
use crate::compiler::{Assignment, WorkerProfile};
use crate::ids::Timestamp;
use crate::state::{
    Artifact, ArtifactVersion, Assumption, CompletedWork, ExecutionState, HandoffRecord, Issue,
    IssueStatus, Provenance, Reaffirmation, RecordKind, ResolutionClaim, Stamped, WorkerRecord,
};
use crate::text::{normalize, same_statement};

mod restate;

use restate::{DecisionAt, ForNext, merge, merge_decision, merge_failed_attempt, merge_resolution};

pub mod line;
mod step;
pub use step::{StepEnd, WorkSeen, complete_step, failure_phrase, record_failed_turn};

/// The engine's facts about the turn being reconciled.
#[derive(Debug, Clone)]
pub struct TurnContext<'a> {
    pub worker: &'a WorkerProfile,
    pub turn: u32,
    pub at: Timestamp,
    pub assignment: &'a Assignment,
    /// What the engine saw of the work besides the claims (a coding agent's commit).
    pub seen: WorkSeen,
}

impl TurnContext<'_> {
    fn provenance(&self) -> Provenance {
        Provenance {
            recorded_by: self.worker.id.clone(),
            model: self.worker.model.clone(),
            turn: self.turn,
            recorded_at: self.at,
        }
    }
    fn reaffirmation(&self, record_text: &str, wording: &str) -> Reaffirmation {
        Reaffirmation {
            by: self.worker.id.clone(),
            turn: self.turn,
            wording: (normalize(record_text) != normalize(wording)).then(|| wording.to_string()),
            severity: None,
        }
    }
}

/// What a verifier concluded about a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Checked and confirmed; `by` names the check (verifier, gate, commit), and
    /// `content_hash` is what the check saw on disk, when it read the content.
    Verified {
        by: String,
        content_hash: Option<String>,
    },
    /// Not checked (the default): recorded, `verified` stays false.
    Unverified,
    /// Checked and false: the claim is refused.
    Rejected { reason: String },
}

/// The seam through which checks set `verified`. Later issues implement it with files
/// on disk, content hashes and gates; this crate ships only `NoVerifier`.
pub trait Verifier: Send + Sync {
    fn verify_artifact(&self, artifact: &Artifact, version: &ArtifactVersion) -> Verification;
    fn verify_resolution(&self, issue: &Issue, claim: &ResolutionClaim) -> Verification;

    /// The content hash of `artifact` when this turn is seen to have changed it (a
    /// workspace commit that touched the file), so a claim in unchanged words still
    /// records the new version. `None`: nothing observed.
    fn observed_change(&self, _artifact: &Artifact) -> Option<String> {
        None
    }
}

/// Verifies nothing: every claim stays unverified.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoVerifier;

impl Verifier for NoVerifier {
    fn verify_artifact(&self, _: &Artifact, _: &ArtifactVersion) -> Verification {
        Verification::Unverified
    }
    fn verify_resolution(&self, _: &Issue, _: &ResolutionClaim) -> Verification {
        Verification::Unverified
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Created,
    NewVersion,
    Mentioned,
    Reaffirmed,
    ResolutionClaimed,
    Verified,
    /// The assembly line's plan lock, and a finding closed without a fix.
    Locked,
    Dismissed,
}

/// One change the reconciler made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub kind: RecordKind,
    pub id: String,
    pub action: Action,
}

/// What reconciling a turn did; persisted with the turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReconcileOutcome {
    pub accepted: Vec<Accepted>,
    pub refusals: Vec<Refusal>,
    pub warnings: Vec<String>,
    /// New decisions that may contradict one another worker recorded (each also
    /// warned of): the assembly line stops on them for a human.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradicted: Vec<Contradicted>,
}

/// A new decision `id` that may contradict decision `of`, recorded by another worker,
/// `by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contradicted {
    pub id: String,
    pub of: String,
    pub by: crate::ids::WorkerId,
}

impl ReconcileOutcome {
    pub fn count(&self, action: Action) -> usize {
        self.accepted.iter().filter(|a| a.action == action).count()
    }
    fn push(&mut self, kind: RecordKind, id: &str, action: Action) {
        self.accepted.push(Accepted {
            kind,
            id: id.to_string(),
            action,
        });
    }
    fn refuse(&mut self, claim: String, reason: String) {
        self.refusals.push(Refusal { claim, reason });
    }
}

/// Merges one turn's claims into `state`. `refusals` are what parsing already refused
/// (engine-only fields); they are carried into the outcome.
pub fn reconcile(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    report: &HandoffReport,
    refusals: Vec<Refusal>,
    verifier: &dyn Verifier,
) -> ReconcileOutcome {
    let mut out = ReconcileOutcome {
        refusals,
        ..ReconcileOutcome::default()
    };
    record_worker(state, ctx);
    let mut next = ForNext::default();

    for (i, d) in result.decisions.iter().enumerate() {
        let path = format!("result.decisions[{i}]");
        let claim = DecisionAt {
            claim: d,
            path: &path,
        };
        merge_decision(state, ctx, &claim, &mut out, &mut next);
    }
    for (i, d) in report.decisions.iter().enumerate() {
        let path = format!("report.decisions[{i}]");
        let claim = DecisionAt {
            claim: d,
            path: &path,
        };
        merge_decision(state, ctx, &claim, &mut out, &mut next);
    }

    for text in &result.completed {
        merge::<CompletedWork>(state, ctx, &text.as_str(), &mut out, &mut next);
    }
    // What the worker says it did is part of the record: with no `completed` list, its
    // summary is the step's completed work (models fill the one required field) —
    // unless it is a report of failure, or an agent's words about a commit it did not
    // make (see `step::summary_counts`); it stays in the turn's result either way.
    // An agent's final message can run to pages: its first paragraph, clipped, is the
    // record's entry (the whole summary stays in the turn's result).
    if result.completed.iter().all(|c| c.trim().is_empty())
        && step::summary_counts(result, report, ctx)
    {
        let first = result.summary.trim().split("\n\n").next().unwrap_or("");
        let first = clip(first, SUMMARY_AS_COMPLETED_CHARS);
        merge::<CompletedWork>(state, ctx, &first.as_str(), &mut out, &mut next);
    }
    check_step_claims(state, ctx, result, &mut out);

    merge_artifacts(state, ctx, result, report, verifier, &mut out);

    for issue in result.issues.iter().chain(&report.issues) {
        merge::<Issue>(state, ctx, &issue, &mut out, &mut next);
    }
    let resolutions = result
        .resolved_issues
        .iter()
        .map(|r| ("result", r))
        .chain(report.resolved_issues.iter().map(|r| ("report", r)));
    for (i, (from, r)) in resolutions.enumerate() {
        merge_resolution(
            state,
            ctx,
            &r.issue,
            r.note.as_deref(),
            from,
            i,
            verifier,
            &mut out,
        );
    }

    for f in result.failed_attempts.iter().chain(&report.failed_attempts) {
        merge_failed_attempt(state, ctx, &f.what, &f.why, &mut out, &mut next);
    }
    for a in result.assumptions.iter().chain(&report.assumptions) {
        merge::<Assumption>(state, ctx, &a.as_str(), &mut out, &mut next);
    }

    merge_actions(state, ctx, result, report, &mut out);
    merge_handoff(state, ctx, report, next, &mut out);
    out
}

fn record_worker(state: &mut ExecutionState, ctx: &TurnContext<'_>) {
    match state.workers.iter_mut().find(|w| w.id == ctx.worker.id) {
        Some(w) => {
            if !w.turns.contains(&ctx.turn) {
                w.turns.push(ctx.turn);
            }
        }
        None => state.workers.push(WorkerRecord {
            id: ctx.worker.id.clone(),
            model: ctx.worker.model.clone(),
            family: ctx.worker.family.clone(),
            turns: vec![ctx.turn],
        }),
    }
}

fn push_reaffirmation(list: &mut Vec<Reaffirmation>, r: Reaffirmation) -> bool {
    // One reaffirmation per worker per turn, however often the turn restates it.
    if list.iter().any(|x| x.by == r.by && x.turn == r.turn) {
        return false;
    }
    list.push(r);
    true
}

fn check_step_claims(
    state: &ExecutionState,
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    out: &mut ReconcileOutcome,
) {
    for claimed in &result.steps_completed {
        // Models write the step as the briefing shows it: `T1 List the features`,
        // `T1: …`; its leading id is the claim.
        let step = leading_step_id(claimed, state, ctx.assignment.step_id.as_deref());
        if ctx.assignment.step_id.as_deref() == Some(step) {
            continue;
        }
        let assigned = ctx
            .assignment
            .step_id
            .as_deref()
            .unwrap_or("no step (continuation)");
        let known = state.plan.iter().any(|s| s.id == step);
        out.warnings.push(format!(
            "claimed completion of {} which was not assigned (assigned: {assigned}); ignored, \
             the plan cursor belongs to the orchestrator",
            if known {
                step.to_string()
            } else {
                format!("unknown step \"{}\"", clip(step, 40))
            }
        ));
    }
}

/// The plan step a `steps_completed` entry names: the whole trimmed text when that is a
/// step id, else its first word without trailing punctuation when that is one.
fn leading_step_id<'a>(
    claimed: &'a str,
    state: &ExecutionState,
    assigned: Option<&str>,
) -> &'a str {
    let text = claimed.trim();
    let is_step = |id: &str| assigned == Some(id) || state.plan.iter().any(|s| s.id == id);
    if is_step(text) {
        return text;
    }
    let first = text
        .split(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_end_matches([':', '.', ',', ')', ']', '-']);
    if !first.is_empty() && is_step(first) {
        first
    } else {
        text
    }
}

fn content_hash(content: &str) -> String {
    hex::encode(Sha256::digest(content.as_bytes()))
}

fn same_artifact_name(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

fn merge_artifacts(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    report: &HandoffReport,
    verifier: &dyn Verifier,
    out: &mut ReconcileOutcome,
) {
    for (i, claim) in result.artifacts.iter().enumerate() {
        let name = claim.name.trim();
        if name.is_empty() {
            out.refuse(
                format!("result.artifacts[{i}]"),
                "an artifact needs a name".into(),
            );
            continue;
        }
        let hash = claim.content.as_deref().map(content_hash);
        let existing = state
            .artifacts
            .iter()
            .position(|a| same_artifact_name(&a.name, name));
        let mut v = ArtifactVersion {
            version: 1,
            description: claim.description.trim().to_string(),
            content_hash: hash.clone(),
            content: claim.content.clone(),
            provenance: ctx.provenance(),
            verified: false,
            verified_by: None,
        };
        let fresh = Artifact {
            id: format!("A{}", state.artifacts.len() + 1),
            name: name.to_string(),
            kind: claim.kind.clone().unwrap_or_else(|| "document".into()),
            versions: Vec::new(),
            mentions: Vec::new(),
        };
        let subject = match existing {
            Some(idx) => &state.artifacts[idx],
            None => &fresh,
        };
        // Every claim is checked before it can pass for a restatement: a false file
        // claim worded exactly like an earlier true one is still false.
        let verification = verifier.verify_artifact(subject, &v);
        if let Verification::Rejected { reason } = verification {
            out.refuse(format!("result.artifacts[{i}]"), reason);
            continue;
        }
        let index = match existing {
            Some(idx) => {
                let art = &state.artifacts[idx];
                let latest = art.latest();
                // The same words can still cover new bytes: what the verifier saw on disk
                // this turn decides, when it saw the artifact change.
                let on_disk = verifier.observed_change(art);
                let unchanged = latest.description == claim.description
                    && (hash.is_none() || hash == latest.content_hash)
                    && (on_disk.is_none() || on_disk == latest.content_hash);
                if unchanged {
                    let id = art.id.clone();
                    let r = ctx.reaffirmation("", "");
                    if push_reaffirmation(&mut state.artifacts[idx].mentions, r) {
                        out.push(RecordKind::Artifact, &id, Action::Mentioned);
                    }
                    continue;
                }
                v.version = latest.version + 1;
                idx
            }
            None => {
                state.artifacts.push(fresh);
                state.artifacts.len() - 1
            }
        };
        let version = v.version;
        match verification {
            Verification::Verified { by, content_hash } => {
                v.verified = true;
                v.verified_by = Some(by);
                if content_hash.is_some() {
                    // The hash of what is on disk replaces the hash of what was claimed.
                    v.content_hash = content_hash;
                }
            }
            Verification::Unverified | Verification::Rejected { .. } => {}
        }
        let art = &mut state.artifacts[index];
        let verified = v.verified;
        art.versions.push(v);
        let id = art.id.clone();
        let action = if version == 1 {
            Action::Created
        } else {
            Action::NewVersion
        };
        out.push(RecordKind::Artifact, &id, action);
        if verified {
            out.push(RecordKind::Artifact, &id, Action::Verified);
        }
    }

    for (i, mention) in report.artifacts.iter().enumerate() {
        let name = mention.name.trim();
        let in_result = result
            .artifacts
            .iter()
            .any(|a| same_artifact_name(&a.name, name));
        if in_result {
            continue;
        }
        match state
            .artifacts
            .iter_mut()
            .find(|a| same_artifact_name(&a.name, name))
        {
            Some(art) => {
                out.warnings.push(format!(
                    "handoff report names artifact \"{}\" that this turn's result did not list; \
                     recorded as a mention, its content and description unchanged",
                    clip(name, 80)
                ));
                let id = art.id.clone();
                if push_reaffirmation(&mut art.mentions, ctx.reaffirmation("", "")) {
                    out.push(RecordKind::Artifact, &id, Action::Mentioned);
                }
            }
            None => {
                out.warnings.push(format!(
                    "handoff report names artifact \"{}\" that no result ever produced",
                    clip(name, 80)
                ));
                out.refuse(
                    format!("report.artifacts[{i}]"),
                    format!(
                        "artifact \"{}\" does not exist; a report can only mention artifacts, \
                         not create them",
                        clip(name, 80)
                    ),
                );
            }
        }
    }
}

fn merge_actions(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    report: &HandoffReport,
    out: &mut ReconcileOutcome,
) {
    let result_last = result.last_action.trim();
    let report_last = report.last_action.trim();
    if !result_last.is_empty()
        && !report_last.is_empty()
        && !same_statement(result_last, report_last)
    {
        out.warnings.push(format!(
            "last action differs between result (\"{}\") and handoff report (\"{}\"); the result's is recorded",
            clip(result_last, 60),
            clip(report_last, 60)
        ));
    }
    // The execute call did the work, so its account of the last action wins.
    let last = if result_last.is_empty() {
        report_last
    } else {
        result_last
    };
    if !last.is_empty() {
        state.last_action = Some(Stamped {
            text: last.to_string(),
            provenance: ctx.provenance(),
        });
    }
    // The handoff call is written for the next worker, so its next action wins.
    let next =
        nonempty(Some(report.next_action.as_str())).or(nonempty(result.next_action.as_deref()));
    if let Some(next) = next {
        state.next_action = Some(Stamped {
            text: next.to_string(),
            provenance: ctx.provenance(),
        });
    }
}

fn merge_handoff(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    report: &HandoffReport,
    next: ForNext,
    out: &mut ReconcileOutcome,
) {
    let notes = report.notes.trim();
    if notes.is_empty() {
        out.warnings
            .push("handoff report has no notes for the next worker".into());
    }
    let warnings: Vec<String> = report
        .warnings
        .iter()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty())
        .collect();
    let id = format!("H{}", state.handoffs.len() + 1);
    state.handoffs.push(HandoffRecord {
        id: id.clone(),
        notes: notes.to_string(),
        warnings,
        engine_warnings: next.0,
        provenance: ctx.provenance(),
    });
    out.push(RecordKind::Handoff, &id, Action::Created);
}

/// Records gate runs as facts: a failing gate opens (or reaffirms) an issue that names
/// it, stamped by the gate, so the next worker sees it; a passing gate closes every open
/// issue that names it, with `verified_by` naming the gate and the commit. Gates are the
/// engine's own observations, never a model's claim, but they still enter the record
/// only here.
pub fn apply_gates(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    gates: &[crate::turn::GateResult],
    out: &mut ReconcileOutcome,
) {
    for g in gates {
        let stamp = Provenance {
            recorded_by: crate::ids::WorkerId::new(format!("gate:{}", g.name)),
            model: "gate".into(),
            turn: ctx.turn,
            recorded_at: ctx.at,
        };
        let short = &g.commit[..g.commit.len().min(12)];
        if g.passed {
            for issue in state.issues.iter_mut() {
                if issue.status == IssueStatus::Open
                    && issue.gate.as_deref() == Some(g.name.as_str())
                {
                    issue.status = IssueStatus::Resolved;
                    issue.verified_by = Some(format!("gate:{}@{short}", g.name));
                    let id = issue.id.clone();
                    out.push(RecordKind::Issue, &id, Action::Verified);
                }
            }
            continue;
        }
        let outcome = match g.exit_code {
            Some(code) => format!("exit code {code}"),
            None => "did not finish".to_string(),
        };
        let detail = format!(
            "`{}` at {short}: {outcome}. Output ends:\n{}",
            g.command,
            clip(g.output_tail.trim(), 1200)
        );
        // The gate's own issue (one per gate while it keeps failing), apart from any
        // worker's issue that merely names the gate.
        let open = state.issues.iter_mut().find(|i| {
            i.status == IssueStatus::Open
                && i.gate.as_deref() == Some(g.name.as_str())
                && i.provenance.recorded_by == stamp.recorded_by
        });
        match open {
            Some(issue) => {
                let id = issue.id.clone();
                if push_reaffirmation(
                    &mut issue.reaffirmed,
                    Reaffirmation {
                        by: stamp.recorded_by.clone(),
                        turn: ctx.turn,
                        wording: Some(detail),
                        severity: None,
                    },
                ) {
                    out.push(RecordKind::Issue, &id, Action::Reaffirmed);
                }
            }
            None => {
                let id = format!("I{}", state.issues.len() + 1);
                state.issues.push(Issue {
                    id: id.clone(),
                    title: format!("Gate `{}` fails", g.name),
                    detail,
                    severity: crate::state::Severity::High,
                    status: IssueStatus::Open,
                    provenance: stamp,
                    resolution_claimed_by: None,
                    verified_by: None,
                    gate: Some(g.name.clone()),
                    reaffirmed: Vec::new(),
                });
                out.push(RecordKind::Issue, &id, Action::Created);
            }
        }
    }
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// At most `max` characters, with an ellipsis when cut.
/// How much of a summary becomes a completed-work entry.
const SUMMARY_AS_COMPLETED_CHARS: usize = 400;

pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
