//! The Current task state section: where the assigned step stands, which attempt this
//! is and what happened to the earlier ones, and the work already recorded for it.

use std::fmt::Write as _;

use super::render::{Arena, MAX_ITEM_CHARS, push_by, push_clean};
use super::sections::{
    ANCHOR_BONUS, Block, CAP_STEP_WORK, Context, Item, KIND_COMPLETED, Spec, block, fixed_item,
    heading,
};
use super::{AssignmentKind, Section};
use crate::state::{AttemptOutcome, CompletedWork, Severity, StepAttempt, StepStatus};

/// Earlier attempts on a step shown in full; older ones are counted in one line.
pub const SHOWN_ATTEMPTS: usize = 3;
/// Longest rendering of one attempt's detail, in chars.
const ATTEMPT_CHARS: usize = 160;

/// One line per earlier attempt on the step (the last `SHOWN_ATTEMPTS`, oldest first,
/// after a count of any older ones). Ranked right after the step line, the latest
/// first, so a tight budget trims the oldest.
fn attempt_items(arena: &mut Arena<'_>, attempts: &[StepAttempt]) -> Vec<Item> {
    let hidden = attempts.len().saturating_sub(SHOWN_ATTEMPTS);
    let shown = &attempts[hidden..];
    let mut items = Vec::with_capacity(shown.len() + 1);
    for (age, a) in shown.iter().rev().enumerate() {
        let out = arena.begin();
        let _ = write!(
            out,
            "- turn {} ({}): {} — ",
            a.turn,
            a.worker,
            a.outcome.as_str()
        );
        let cut = push_clean(out, &a.detail, ATTEMPT_CHARS);
        items.push(Item {
            id: format!("attempt.turn{}", a.turn),
            score: 2 * ANCHOR_BONUS - 1 - age as u32,
            order: (1 + SHOWN_ATTEMPTS - age) as u64,
            piece: arena.end(),
            short: None,
            compact: None,
            shortened: cut,
        });
    }
    if hidden > 0 {
        let (first, last) = (attempts[0].turn, attempts[hidden - 1].turn);
        let failed = attempts[..hidden]
            .iter()
            .filter(|a| a.outcome == AttemptOutcome::Failed)
            .count();
        let line = format!(
            "- {hidden} earlier attempt(s) not shown (turns {first}–{last}: {failed} failed, {} \
             without evidence of work)",
            hidden - failed
        );
        let mut item = fixed_item(arena, "attempts.older", SHOWN_ATTEMPTS + 1, &line);
        item.order = 1;
        items.push(item);
    }
    items
}

pub(super) fn current_task_state(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let state = cx.state;
    let mut items = Vec::new();
    let mut step_work = Vec::new();
    match (cx.assignment.kind, cx.assigned_step_id()) {
        (AssignmentKind::Step, Some(id)) => {
            // With their indices in `state.completed`, for the scoring cache.
            let work: Vec<(usize, &CompletedWork)> = state
                .completed
                .iter()
                .enumerate()
                .filter(|(_, c)| c.step.as_deref() == Some(id))
                .collect();
            let mut line = String::new();
            let mut attempts: &[StepAttempt] = &[];
            match cx.step_index.and_then(|i| state.plan.get(i)) {
                Some(step) => {
                    // The title is the assigned task, shown above. Tags only when the
                    // plan gives some: an untagged step's line is as it always was.
                    let _ = write!(line, "Step {id}");
                    for (k, tag) in step.tags.iter().enumerate() {
                        line.push_str(if k == 0 { " (tagged " } else { ", " });
                        line.push_str(tag.as_str());
                    }
                    if !step.tags.is_empty() {
                        line.push(')');
                    }
                    line.push_str(" is ");
                    match (&step.status, &step.done_by, step.done_at_turn) {
                        (StepStatus::Done, Some(by), Some(t)) => {
                            let _ = write!(line, "already marked done (by {by}, turn {t}).");
                        }
                        (StepStatus::Done, _, _) => line.push_str("already marked done."),
                        (StepStatus::Pending, _, _) => {
                            line.push_str("pending.");
                            attempts = &step.attempts;
                        }
                    }
                }
                None => {
                    let _ = write!(line, "Step {id} is not in the plan.");
                }
            }
            if !attempts.is_empty() {
                let _ = write!(
                    line,
                    " This is attempt {} of this step: {} earlier turn(s) did not complete \
                     it (below); do not repeat what failed. A step is done only with evidence \
                     of work: completed work, an artifact, a decision, or a commit.",
                    attempts.len() + 1,
                    attempts.len()
                );
                if !work.is_empty() {
                    let _ = write!(
                        line,
                        " The record has {} completed-work item(s) for it: build on them.",
                        work.len()
                    );
                }
                items.push(fixed_item(arena, "step", 0, &line));
                items.extend(attempt_items(arena, attempts));
            } else if work.is_empty() {
                line.push_str(" No work for it is recorded yet: its first attempt.");
            } else {
                let _ = write!(
                    line,
                    " The record already has {} completed-work item(s) for it, so it was \
                     attempted before: build on them, do not redo them.",
                    work.len()
                );
            }
            if attempts.is_empty() {
                items.push(fixed_item(arena, "step", 0, &line));
            }
            step_work = work;
        }
        (AssignmentKind::Step, None) => {
            items.push(fixed_item(
                arena,
                "step",
                0,
                "No plan step is named for this assignment.",
            ));
        }
        (AssignmentKind::Continuation, _) => {
            let total = state.plan.len();
            let done = state.steps_done();
            let line = if done == total {
                format!("All {total} plan steps are done; continue from the record.")
            } else {
                format!(
                    "{done} of {total} plan steps are done and the rest are taken; this turn \
                     has no step of its own."
                )
            };
            items.push(fixed_item(arena, "steps", 0, &line));
            let (mut open, mut critical, mut high, mut claimed) = (0, 0, 0, 0);
            for i in state.open_issues() {
                open += 1;
                critical += usize::from(i.severity == Severity::Critical);
                high += usize::from(i.severity == Severity::High);
                claimed += usize::from(i.resolution_claimed_by.is_some());
            }
            let line = format!(
                "Open issues: {open} ({critical} critical, {high} high); {claimed} with a \
                 resolution claimed but NOT verified."
            );
            items.push(fixed_item(arena, "open_issues", 1, &line));
            let unverified = state
                .artifacts
                .iter()
                .filter(|a| !a.versions.last().is_some_and(|v| v.verified))
                .count();
            let line = format!(
                "Artifacts whose latest version is NOT verified: {unverified} of {}.",
                state.artifacts.len()
            );
            items.push(fixed_item(arena, "artifacts", 2, &line));
        }
    }
    let fixed = items.len();
    let mut work_block = block(
        arena,
        Spec {
            section: Section::CurrentTaskState,
            cap: CAP_STEP_WORK,
            records: &step_work,
            include: &|_| true,
            relevant: &|_, _| true,
            score: &|_, &(i, c)| {
                cx.score_cached(KIND_COMPLETED, i, 0, &[&c.text], c.provenance.turn)
            },
            id: &|(_, c)| &c.id,
            compact: None,
            render: &|_, (_, c), out| {
                let _ = write!(out, "- {}: ", c.id);
                let cut = push_clean(out, &c.text, MAX_ITEM_CHARS);
                out.push(' ');
                push_by(out, &c.provenance.recorded_by, c.provenance.turn);
                cut
            },
        },
    );
    for item in &mut work_block.items {
        // After the fixed lines, in record order.
        item.order += 16;
    }
    items.append(&mut work_block.items);
    Block {
        section: Section::CurrentTaskState,
        heading: heading(arena, Section::CurrentTaskState, items.is_empty(), None),
        available: fixed + work_block.available,
        items,
        cap_dropped: work_block.cap_dropped,
        warnings: 0,
        floor: 0,
        primary: usize::MAX,
    }
}
