//! Step completion: a turn completes its step only with evidence of work, and a turn
//! that does not is recorded on the step, so the next attempt is told what happened.
//!
//! Evidence is something the worker produced beyond its summary: a completed-work
//! item, a new artifact or artifact version that no check refused, a new decision, or,
//! for a coding agent, a commit that changed files. A summary alone counts only for a
//! worker whose claims are all the engine sees (an API worker), and only when it is not
//! a report of failure: it does not say the worker could not do the step
//! (`FAILURE_PHRASES`), and the turn raised no issue and reported no failed attempt —
//! unless it also claimed the step in `steps_completed`.

use crate::claims::{HandoffReport, WorkerResult};
use crate::state::{AttemptOutcome, ExecutionState, RecordKind, StepAttempt, StepStatus};

use super::{Action, ReconcileOutcome, TurnContext, clip};

/// What the engine saw of a turn's work besides its claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkSeen {
    /// A worker that answers with claims: they are all there is.
    #[default]
    Claims,
    /// A coding agent in a workspace: its commit is the evidence; `committed` says
    /// whether the turn's commit changed anything.
    Agent { committed: bool },
}

/// How a committed turn left its step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepEnd {
    /// The turn had no step (a continuation).
    NoStep,
    /// Evidence of work: the step is done.
    Done,
    /// No evidence of work: the step stays open and the turn counts as a failure.
    Open,
}

/// Phrases that make a summary a report of failure rather than of work (matched on
/// its first paragraph, lower-cased). First-person and "nothing was …" forms only:
/// "the parser could not read empty files" describes a fix, "I could not" does not.
const FAILURE_PHRASES: &[&str] = &[
    "i could not",
    "i couldn't",
    "i cannot",
    "i can't",
    "i was unable",
    "i am unable",
    "i'm unable",
    "we could not",
    "we couldn't",
    "we were unable",
    "nothing was produced",
    "nothing was done",
    "nothing was changed",
    "nothing was written",
    "did nothing",
    "no work was done",
    "no changes were made",
];

/// Longest `detail` kept on a step attempt (the briefing shortens it further).
const ATTEMPT_DETAIL_CHARS: usize = 300;
/// How much of a summary a no-evidence attempt quotes.
const QUOTED_SUMMARY_CHARS: usize = 120;

/// The phrase that makes `summary` a report of failure, if any.
pub fn failure_phrase(summary: &str) -> Option<&'static str> {
    let first = summary.trim().split("\n\n").next().unwrap_or("");
    let lower = first.to_lowercase().replace('\u{2019}', "'");
    FAILURE_PHRASES.iter().copied().find(|p| lower.contains(p))
}

/// Whether the turn's summary stands for its work (see the module comment): the
/// reconciler records it as the step's completed work only then.
pub(super) fn summary_counts(
    result: &WorkerResult,
    report: &HandoffReport,
    ctx: &TurnContext<'_>,
) -> bool {
    let raised = !result.issues.is_empty()
        || !report.issues.is_empty()
        || !result.failed_attempts.is_empty()
        || !report.failed_attempts.is_empty();
    // An issue or a failed attempt may be why the step was not done; it was not, unless
    // the worker also says it finished the step. (A continuation has no step to leave
    // undone: raising issues is what it is for.)
    let claims_step = match ctx.assignment.step_id.as_deref() {
        Some(id) => result.steps_completed.iter().any(|c| names_step(c, id)),
        None => true,
    };
    let claims_only = match ctx.seen {
        WorkSeen::Claims => true,
        // An agent's final message describes its commit: without one it is only talk.
        WorkSeen::Agent { committed } => committed,
    };
    claims_only
        && (!raised || claims_step)
        && failure_phrase(&result.summary).is_none()
        && !result.summary.trim().is_empty()
}

/// Whether a `steps_completed` entry names step `id` (`T2`, `T2: title`, `T2 title`).
fn names_step(claimed: &str, id: &str) -> bool {
    claimed
        .trim()
        .strip_prefix(id)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric()))
}

/// Marks the assigned step done when the turn shows evidence of work; otherwise leaves
/// it open, records the attempt on the step and warns. Called once per committed turn,
/// after `reconcile` (whose outcome says what the turn's claims created).
pub fn complete_step(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    report: &HandoffReport,
    out: &mut ReconcileOutcome,
) -> StepEnd {
    let Some(step_id) = ctx.assignment.step_id.as_deref() else {
        return StepEnd::NoStep;
    };
    let Some(index) = state.plan.iter().position(|s| s.id == step_id) else {
        return StepEnd::NoStep;
    };
    if has_evidence(ctx, result, report, out) {
        let step = &mut state.plan[index];
        step.status = StepStatus::Done;
        step.done_by = Some(ctx.worker.id.clone());
        step.done_at_turn = Some(ctx.turn);
        return StepEnd::Done;
    }
    let why = missing_evidence(ctx.seen, result, report);
    out.warnings.push(format!(
        "step {step_id} stays open: no evidence of work ({why}); this turn counts towards \
         the failure breaker. A worker completes it by doing the work and listing it in \
         `completed`{}",
        match ctx.seen {
            WorkSeen::Agent { .. } => ", or by committing its changes",
            WorkSeen::Claims => ", `artifacts` or `decisions`",
        }
    ));
    // For the next attempt: what the worker said instead, in its own words first.
    let mut detail = match ctx.seen {
        WorkSeen::Agent { committed: false } => "no commit; ".to_string(),
        _ => String::new(),
    };
    let summary = one_line(&result.summary);
    if summary.is_empty() {
        detail.push_str("nothing claimed, no summary");
    } else {
        detail.push_str(&format!(
            "said \"{}\"",
            clip(&summary, QUOTED_SUMMARY_CHARS)
        ));
    }
    let raised: Vec<&str> = out
        .accepted
        .iter()
        .filter(|a| {
            matches!(a.kind, RecordKind::Issue | RecordKind::FailedAttempt)
                && matches!(a.action, Action::Created | Action::Reaffirmed)
        })
        .map(|a| a.id.as_str())
        .collect();
    if !raised.is_empty() {
        detail.push_str(&format!("; raised {}", raised.join(", ")));
    }
    // A refused claim is often the work the worker thought it did: say why it was not.
    if let Some(first) = out.refusals.first() {
        detail.push_str(&format!(
            "; {} claim(s) refused, first: {}",
            out.refusals.len(),
            clip(&first.reason, QUOTED_SUMMARY_CHARS)
        ));
    }
    push_attempt(state, index, ctx, AttemptOutcome::NoEvidence, &detail);
    StepEnd::Open
}

/// Records a failed turn (nothing merged) on its step, with its error, so the next
/// attempt is told. A turn without a step records nothing.
pub fn record_failed_turn(state: &mut ExecutionState, ctx: &TurnContext<'_>, error: &str) {
    let Some(step_id) = ctx.assignment.step_id.as_deref() else {
        return;
    };
    if let Some(index) = state.plan.iter().position(|s| s.id == step_id) {
        push_attempt(state, index, ctx, AttemptOutcome::Failed, error);
    }
}

fn push_attempt(
    state: &mut ExecutionState,
    index: usize,
    ctx: &TurnContext<'_>,
    outcome: AttemptOutcome,
    detail: &str,
) {
    let step = &mut state.plan[index];
    // One attempt per turn, however often it is recorded.
    if step.attempts.iter().any(|a| a.turn == ctx.turn) {
        return;
    }
    step.attempts.push(StepAttempt {
        turn: ctx.turn,
        worker: ctx.worker.id.clone(),
        outcome,
        detail: clip(&one_line(detail), ATTEMPT_DETAIL_CHARS),
    });
}

fn has_evidence(
    ctx: &TurnContext<'_>,
    result: &WorkerResult,
    report: &HandoffReport,
    out: &ReconcileOutcome,
) -> bool {
    let listed = result.completed.iter().any(|c| !c.trim().is_empty());
    let created = |kind: RecordKind, actions: &[Action]| {
        out.accepted
            .iter()
            .any(|a| a.kind == kind && actions.contains(&a.action))
    };
    listed
        || created(RecordKind::Artifact, &[Action::Created, Action::NewVersion])
        || created(RecordKind::Decision, &[Action::Created])
        || ctx.seen == WorkSeen::Agent { committed: true }
        || summary_counts(result, report, ctx)
}

/// Why the turn shows no evidence of work, in a few words.
fn missing_evidence(seen: WorkSeen, result: &WorkerResult, report: &HandoffReport) -> String {
    // In the order `summary_counts` decides.
    let mut why = String::from("no completed work, new artifact or new decision");
    if seen == (WorkSeen::Agent { committed: false }) {
        why.push_str(" and no commit: the agent changed no file");
    } else if let Some(phrase) = failure_phrase(&result.summary) {
        why.push_str(&format!(
            ", and the summary reports a failure (\"{phrase}\")"
        ));
    } else if !(result.issues.is_empty() && report.issues.is_empty()) {
        why.push_str(
            ", and the turn raised an issue without claiming the step in `steps_completed`",
        );
    } else if !(result.failed_attempts.is_empty() && report.failed_attempts.is_empty()) {
        why.push_str(
            ", and the turn reported a failed attempt without claiming the step in \
             `steps_completed`",
        );
    } else {
        why.push_str(", and no summary");
    }
    why
}

/// `text` on one line, runs of whitespace collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
