//! The assembly line's reconciler rules: the only write path into findings, verdicts,
//! plan versions and the plan lock.
//!
//! - Findings are raised only by seats that check work (`review.*`, `checkpoint.*`,
//!   `plan.scrutiny`, `judge`); a restated finding gains a voice, and its severity only
//!   rises (the stricter wins).
//! - A finding is never closed on a claim (invariant 2, as for issues): a builder's
//!   "fixed" is recorded, and the finding stays open until a checking seat other than
//!   the fixer (and, for a checkpoint's finding, other than its finder) confirms it, or
//!   a gate passes. Only the lead or a human dismisses one, with a reason.
//! - Plan versions are appended; once the plan is locked nothing changes it: a new
//!   version or a second lock is refused, with a warning.
//! - Provenance is the engine's (`TurnContext`), never the model's (invariant 5).

use super::restate::{DecisionAt, ForNext, merge_decision};
use super::{Action, ReconcileOutcome, TurnContext, clip};
use crate::claims::DecisionClaim;
use crate::ids::Timestamp;
use crate::line::{
    ClosedBy, Closure, Finding, FindingClaim, FindingStatus, PlanDraft, PlanLock, PlanVersion,
    Verdict, Voice, plan_hash, synthesis::Synthesis,
};
use crate::router::{CHECKPOINT_FIND, SeatId};
use crate::state::{ExecutionState, RecordKind, ResolutionClaim};
use crate::text::{normalize, same_statement};

/// The intake's answer. With questions, nothing is recorded and the question the line
/// stops on is returned, every question numbered. Otherwise its constraints and
/// acceptance criteria (and its reading of the objective, when it differs from the
/// run's) become decisions of the intake's seat, merged like any decision (a restatement
/// reaffirms one), so every later briefing carries them.
pub fn record_intake(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    objective: &str,
    constraints: &[String],
    acceptance: &[String],
    questions: &[String],
    out: &mut ReconcileOutcome,
) -> Option<String> {
    let asked: Vec<&str> = questions
        .iter()
        .map(|q| q.trim())
        .filter(|q| !q.is_empty())
        .collect();
    if !asked.is_empty() {
        let numbered: Vec<String> = asked
            .iter()
            .enumerate()
            .map(|(i, q)| format!("{}) {q}", i + 1))
            .collect();
        return Some(format!(
            "the intake ({} held by {}) needs a human's answers before the line goes on: {}",
            turn.seat,
            turn.ctx.worker.id,
            numbered.join(" ")
        ));
    }
    let objective = objective.trim();
    let restated = if !objective.is_empty() && normalize(objective) != normalize(&state.objective) {
        vec![objective.to_string()]
    } else {
        Vec::new()
    };
    let mut next = ForNext::default();
    for (kind, field, items) in [
        (
            "Objective as the intake reads it",
            "objective",
            &restated[..],
        ),
        ("Constraint", "constraints", constraints),
        ("Acceptance", "acceptance", acceptance),
    ] {
        for (i, text) in items.iter().enumerate() {
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let claim = DecisionClaim {
                text: format!("{kind}: {text}"),
                reason: Some(format!("stated at the intake by {}", turn.seat)),
            };
            let path = format!("{field}[{i}]");
            let at = DecisionAt {
                claim: &claim,
                path: &path,
            };
            merge_decision(state, turn.ctx, &at, out, &mut next);
        }
    }
    None
}

/// A human's reply to the question the line stopped on, recorded as a decision with
/// the turn's provenance (the engine stamps it `human`), so every later briefing
/// carries it; returns the decision's id.
pub fn record_answer(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    question: &str,
    answer: &str,
    out: &mut ReconcileOutcome,
) -> Option<String> {
    let claim = DecisionClaim {
        text: format!(
            "A human answered \"{}\": {}",
            clip(question, 400),
            answer.trim()
        ),
        reason: Some("the line stopped to ask a human".into()),
    };
    let before = state.decisions.len();
    let at = DecisionAt {
        claim: &claim,
        path: "answer",
    };
    merge_decision(state, ctx, &at, out, &mut ForNext::default());
    state.decisions.get(before).map(|d| d.id.clone())
}

/// Where in the line a turn is: the engine's facts about it, besides the turn's own.
#[derive(Debug, Clone, Copy)]
pub struct LineTurn<'a> {
    pub ctx: &'a TurnContext<'a>,
    /// The route's station (`review`, `build`).
    pub station: &'a str,
    /// The seat the turn's worker holds.
    pub seat: &'a SeatId,
    /// The station's round or checkpoint pass, from 1.
    pub round: u32,
    /// The plan step a checkpoint is about.
    pub step: Option<&'a str>,
}

impl LineTurn<'_> {
    fn claim(&self, note: Option<&str>) -> ResolutionClaim {
        ResolutionClaim {
            by: self.ctx.worker.id.clone(),
            turn: self.ctx.turn,
            at: self.ctx.at,
            note: note.map(str::to_string),
        }
    }
}

/// Merges a checking seat's findings; returns the ids of the findings it created (a
/// round that creates none raised nothing new).
pub fn raise_findings(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    claims: &[FindingClaim],
    out: &mut ReconcileOutcome,
) -> Vec<String> {
    let mut created = Vec::new();
    for (i, claim) in claims.iter().enumerate() {
        let path = format!("findings[{i}]");
        if !turn.seat.reviews_work() {
            out.refuse(
                path,
                format!(
                    "findings are raised by seats that check work (review.*, checkpoint.*, plan.scrutiny, judge), not by {}; a builder's concern is an issue",
                    turn.seat
                ),
            );
            continue;
        }
        let (what, location) = (claim.what.trim(), claim.location.trim());
        if what.is_empty() {
            out.refuse(path, "a finding needs to say what is wrong".into());
            continue;
        }
        let place = normalize(location);
        let worker = &turn.ctx.worker;
        let same = state.findings.iter_mut().find(|f| {
            f.is_open()
                && f.station == turn.station
                && f.step.as_deref() == turn.step
                && normalize(&f.location) == place
                && same_statement(&f.what, what)
        });
        if let Some(f) = same {
            let already = f.provenance.recorded_by == worker.id
                && f.provenance.turn == turn.ctx.turn
                || f.voices
                    .iter()
                    .any(|v| v.by == worker.id && v.turn == turn.ctx.turn);
            f.severity = f.severity.max(claim.severity);
            if !already {
                f.voices.push(Voice {
                    by: worker.id.clone(),
                    family: worker.family.clone(),
                    seat: turn.seat.clone(),
                    turn: turn.ctx.turn,
                    severity: claim.severity,
                    wording: (normalize(&f.what) != normalize(what)).then(|| what.to_string()),
                });
            }
            let id = f.id.clone();
            out.push(RecordKind::Finding, &id, Action::Reaffirmed);
            continue;
        }
        let id = format!("N{}", state.findings.len() + 1);
        state.findings.push(Finding {
            id: id.clone(),
            station: turn.station.to_string(),
            seat: turn.seat.clone(),
            round: turn.round,
            step: turn.step.map(str::to_string),
            severity: claim.severity,
            raised_as: claim.severity,
            what: what.to_string(),
            location: location.to_string(),
            status: FindingStatus::Open,
            family: worker.family.clone(),
            provenance: turn.ctx.provenance(),
            voices: Vec::new(),
            fix_claimed: None,
            closed: None,
        });
        out.push(RecordKind::Finding, &id, Action::Created);
        created.push(id);
    }
    created
}

/// The open finding `id`, or the refusal's reason.
fn open_finding<'s>(state: &'s mut ExecutionState, id: &str) -> Result<&'s mut Finding, String> {
    match state.findings.iter_mut().find(|f| f.id == id) {
        None => Err(format!("no finding {} is on record", clip(id, 40))),
        Some(f) if !f.is_open() => Err(format!("finding {id} is already {}", f.status.as_str())),
        Some(f) => Ok(f),
    }
}

/// Records a claim that finding `id` is fixed. The finding stays open.
pub fn claim_fixed(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    id: &str,
    note: Option<&str>,
    out: &mut ReconcileOutcome,
) {
    match open_finding(state, id) {
        Err(reason) => out.refuse(format!("fixed[{id}]"), reason),
        Ok(f) => {
            f.fix_claimed = Some(turn.claim(note));
            out.push(RecordKind::Finding, id, Action::ResolutionClaimed);
        }
    }
}

/// An advisory seat's claims (a discovery lane's): it advises and never decides, so the
/// decisions it claims are taken out of `result` and kept as its advice, assumptions in
/// its seat's name ("Advice of discovery.deep: …"), for the lead that merges the lanes
/// to decide on.
pub fn advice_only(result: &mut crate::claims::WorkerResult, seat: &SeatId) {
    for d in std::mem::take(&mut result.decisions) {
        let advice = match d.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            Some(reason) => format!("Advice of {seat}: {} (because {reason})", d.text.trim()),
            None => format!("Advice of {seat}: {}", d.text.trim()),
        };
        result.assumptions.push(advice);
    }
}

/// A builder's claims of fixed findings: the entries of its `resolved_issues` that name
/// a finding (`N2`) rather than an issue are taken out of `result` and recorded as
/// claimed fixes (`claim_fixed`: the finding stays open until another worker confirms
/// it). What names no finding is left for the issue rules.
pub fn take_finding_fixes(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    result: &mut crate::claims::WorkerResult,
    out: &mut ReconcileOutcome,
) {
    let names_finding = |claim: &crate::claims::ResolutionClaimInput| {
        let id = claim.issue.trim();
        id.starts_with('N') && state.findings.iter().any(|f| f.id == id)
    };
    let (fixes, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut result.resolved_issues)
        .into_iter()
        .partition(names_finding);
    result.resolved_issues = rest;
    for fix in fixes {
        claim_fixed(state, turn, fix.issue.trim(), fix.note.as_deref(), out);
    }
}

/// A checking seat confirms the claimed fix of finding `id`, which closes it.
pub fn confirm_fixed(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    id: &str,
    note: Option<&str>,
    out: &mut ReconcileOutcome,
) {
    let worker = &turn.ctx.worker.id;
    let path = format!("confirmed[{id}]");
    if !turn.seat.reviews_work() {
        out.refuse(
            path,
            format!(
                "a fix is confirmed by a checking seat (checkpoint.confirm), not by {}",
                turn.seat
            ),
        );
        return;
    }
    let f = match open_finding(state, id) {
        Err(reason) => return out.refuse(path, reason),
        Ok(f) => f,
    };
    let refusal = match &f.fix_claimed {
        None => Some(format!(
            "nothing claims finding {id} fixed yet: the builder claims a fix, then a checking seat confirms it"
        )),
        Some(claim) if &claim.by == worker => Some(format!(
            "{worker} claimed the fix of {id} and cannot confirm it: a different worker does"
        )),
        Some(_) if f.seat.as_str() == CHECKPOINT_FIND && &f.provenance.recorded_by == worker => {
            Some(format!(
                "{worker} found {id} at {CHECKPOINT_FIND}; a checkpoint is confirmed by a different worker than its finder"
            ))
        }
        Some(_) => None,
    };
    if let Some(reason) = refusal {
        return out.refuse(path, reason);
    }
    close(
        f,
        FindingStatus::Fixed,
        ClosedBy::Confirmed {
            seat: turn.seat.clone(),
            worker: worker.clone(),
        },
        (turn.ctx.turn, turn.ctx.at),
        note,
    );
    out.push(RecordKind::Finding, id, Action::Verified);
}

/// A passing gate confirms the claimed fix of finding `id`.
pub fn confirm_by_gate(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    id: &str,
    gate: &str,
    out: &mut ReconcileOutcome,
) {
    let path = format!("gate[{gate}]");
    let f = match open_finding(state, id) {
        Err(reason) => return out.refuse(path, reason),
        Ok(f) => f,
    };
    if f.fix_claimed.is_none() {
        return out.refuse(
            path,
            format!("nothing claims finding {id} fixed: a gate confirms a claimed fix"),
        );
    }
    let by = ClosedBy::Gate {
        gate: gate.to_string(),
    };
    close(f, FindingStatus::Fixed, by, (ctx.turn, ctx.at), None);
    out.push(RecordKind::Finding, id, Action::Verified);
}

/// The lead dismisses finding `id` without a fix, saying why.
pub fn dismiss(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    id: &str,
    reason: &str,
    out: &mut ReconcileOutcome,
) {
    let path = format!("dismissed[{id}]");
    if !turn.seat.as_str().starts_with("lead.") {
        return out.refuse(
            path,
            format!(
                "only the lead or a human dismisses a finding, not {}; a disagreement is a finding of its own",
                turn.seat
            ),
        );
    }
    let by = ClosedBy::Lead {
        seat: turn.seat.clone(),
        worker: turn.ctx.worker.id.clone(),
    };
    dismiss_as(state, id, reason, by, (turn.ctx.turn, turn.ctx.at), out);
}

/// A human's answer dismisses finding `id`.
pub fn dismiss_by_human(
    state: &mut ExecutionState,
    turn: u32,
    at: Timestamp,
    id: &str,
    reason: &str,
    out: &mut ReconcileOutcome,
) {
    dismiss_as(state, id, reason, ClosedBy::Human, (turn, at), out);
}

fn dismiss_as(
    state: &mut ExecutionState,
    id: &str,
    reason: &str,
    by: ClosedBy,
    when: (u32, Timestamp),
    out: &mut ReconcileOutcome,
) {
    let path = format!("dismissed[{id}]");
    if reason.trim().is_empty() {
        return out.refuse(path, "a dismissal needs a reason".into());
    }
    match open_finding(state, id) {
        Err(why) => out.refuse(path, why),
        Ok(f) => {
            close(f, FindingStatus::Dismissed, by, when, Some(reason.trim()));
            out.push(RecordKind::Finding, id, Action::Dismissed);
        }
    }
}

fn close(
    f: &mut Finding,
    status: FindingStatus,
    by: ClosedBy,
    (turn, at): (u32, Timestamp),
    note: Option<&str>,
) {
    f.status = status;
    f.closed = Some(Closure {
        by,
        turn,
        at,
        note: note.map(str::to_string),
    });
}

/// Why the plan can no longer change, when it is locked.
fn locked(state: &ExecutionState) -> Option<String> {
    let lock = state.plan_lock.as_ref()?;
    Some(format!(
        "the plan is locked at {} (version {}, sha256 {}); nothing changes a locked plan",
        lock.plan,
        lock.version,
        crate::line::short_hash(&lock.content_hash)
    ))
}

/// Appends a version of the plan (a draft, a merge of `from`, a revision); returns its
/// id. Refused once the plan is locked.
pub fn propose_plan(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    draft: &PlanDraft,
    from: &[String],
    out: &mut ReconcileOutcome,
) -> Option<String> {
    if let Some(why) = locked(state) {
        out.warnings.push(format!(
            "{} ({}) proposed a plan after the lock; refused: {why}",
            turn.ctx.worker.id, turn.seat
        ));
        out.refuse("plan".into(), why);
        return None;
    }
    if draft.steps.is_empty() || draft.steps.iter().any(|s| s.title.trim().is_empty()) {
        out.refuse(
            "plan.steps".into(),
            "a plan needs one or more steps, each with a title".into(),
        );
        return None;
    }
    if let Some(unknown) = from
        .iter()
        .find(|id| !state.plan_versions.iter().any(|p| &p.id == *id))
    {
        out.refuse(
            "plan.from".into(),
            format!("no plan version {} is on record", clip(unknown, 40)),
        );
        return None;
    }
    let version = state.plan_versions.len() as u32 + 1;
    let id = format!("P{version}");
    state.plan_versions.push(PlanVersion {
        id: id.clone(),
        version,
        station: turn.station.to_string(),
        seat: turn.seat.clone(),
        steps: draft.steps.clone(),
        rationale: draft.rationale.clone(),
        from: from.to_vec(),
        content_hash: plan_hash(&draft.steps),
        provenance: turn.ctx.provenance(),
    });
    out.push(RecordKind::PlanVersion, &id, Action::Created);
    Some(id)
}

/// Freezes plan version `id`: hashed, and nothing changes the plan afterwards.
pub fn lock_plan(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    id: &str,
    out: &mut ReconcileOutcome,
) -> bool {
    if let Some(why) = locked(state) {
        out.warnings.push(format!(
            "a second lock of the plan ({id}) was refused: {why}"
        ));
        out.refuse(format!("lock[{id}]"), why);
        return false;
    }
    let Some(plan) = state.plan_versions.iter().find(|p| p.id == id) else {
        out.refuse(
            format!("lock[{id}]"),
            format!("no plan version {} is on record", clip(id, 40)),
        );
        return false;
    };
    let hash = plan_hash(&plan.steps);
    if hash != plan.content_hash {
        out.refuse(
            format!("lock[{id}]"),
            format!(
                "plan version {id}'s steps no longer match the hash they were recorded with; the record is corrupt"
            ),
        );
        return false;
    }
    state.plan_lock = Some(PlanLock {
        plan: id.to_string(),
        version: plan.version,
        content_hash: hash,
        provenance: ctx.provenance(),
    });
    out.push(RecordKind::PlanVersion, id, Action::Locked);
    true
}

/// Makes the locked plan's steps the run's plan (`T1` …, each with its title and the
/// tags that parse as step tags), which the build's turns then work on; `false` (and
/// nothing changed) when no plan is locked. Said as a warning for each tag dropped.
pub fn adopt_locked_plan(state: &mut ExecutionState, out: &mut ReconcileOutcome) -> bool {
    use crate::state::{PlanStep, StepStatus};
    use crate::step_tag::StepTag;

    let Some(locked) = state.locked_plan().cloned() else {
        return false;
    };
    let mut steps = Vec::with_capacity(locked.steps.len());
    for (i, s) in locked.steps.iter().enumerate() {
        let id = format!("T{}", i + 1);
        let mut tags = Vec::new();
        for t in &s.tags {
            match StepTag::new(t) {
                Ok(tag) => tags.push(tag),
                Err(e) => out.warnings.push(format!(
                    "step {id} of plan {}: tag {t:?} dropped: {e}",
                    locked.id
                )),
            }
        }
        steps.push(PlanStep {
            id,
            title: s.title.clone(),
            status: StepStatus::Pending,
            budget: None,
            seat: None,
            scope: None,
            tags,
            done_by: None,
            done_at_turn: None,
            attempts: Vec::new(),
        });
    }
    state.plan = steps;
    true
}

/// Whether the locked plan still hashes to what it was locked at (`Err` says what
/// changed). An unlocked plan holds trivially.
pub fn lock_holds(state: &ExecutionState) -> Result<(), String> {
    let Some(lock) = &state.plan_lock else {
        return Ok(());
    };
    let Some(plan) = state.locked_plan() else {
        return Err(format!(
            "the plan lock names {}, which is not on record",
            lock.plan
        ));
    };
    if plan_hash(&plan.steps) != lock.content_hash {
        return Err(format!(
            "plan {} no longer hashes to what it was locked at",
            lock.plan
        ));
    }
    Ok(())
}

/// Records a synthesis's verdict at `station`; returns its id. Its reasons and
/// findings are the synthesis's, its provenance the engine's.
pub fn record_verdict(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    station: &str,
    synthesis: &Synthesis,
    out: &mut ReconcileOutcome,
) -> String {
    let round = state
        .verdicts
        .iter()
        .filter(|v| v.station == station)
        .count() as u32
        + 1;
    let id = format!("V{}", state.verdicts.len() + 1);
    state.verdicts.push(Verdict {
        id: id.clone(),
        station: station.to_string(),
        round,
        verdict: synthesis.verdict,
        reasons: synthesis.reasons.clone(),
        findings: synthesis.open_findings(),
        fix_round: synthesis.fix_round,
        provenance: ctx.provenance(),
    });
    out.push(RecordKind::Verdict, &id, Action::Created);
    id
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
