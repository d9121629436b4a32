//! What the line asks of one lane: the station-specific assignment (what to do, in
//! this seat, this round, on this step), the block of line records it is shown
//! (`brief`), and the answer it must give (`AnswerKind`, with its schema).
//!
//! Pure and deterministic, like the compiler: the supervisor compiles the assignment
//! into the lane's briefing and sends the schema with the call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::brief::{LineBrief, LineView, brief};
use super::cursor::{Lane, Role};
use super::{StationKind, answers};
use crate::compiler::{Assignment, AssignmentKind};
use crate::ids::WorkerId;
use crate::state::ExecutionState;
use crate::tokens::TokenEstimator;

/// The answer a lane gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// `answers::IntakeAnswer`.
    Intake,
    /// `answers::PlanAnswer`.
    Plan,
    /// `answers::CheckAnswer`.
    Check,
    /// The turn's usual claims (`claims::TurnAnswer`): discovery notes, a build step.
    Claims,
}

impl AnswerKind {
    /// The schema of the answer; `None` for the usual claims, whose schema the turn
    /// already sends.
    pub fn schema(self) -> Option<&'static Value> {
        match self {
            AnswerKind::Intake => Some(answers::intake_schema()),
            AnswerKind::Plan => Some(answers::plan_schema()),
            AnswerKind::Check => Some(answers::check_schema()),
            AnswerKind::Claims => None,
        }
    }
}

/// Where the lane works, as the cursor said.
#[derive(Debug, Clone, Copy)]
pub struct LaneAt<'a> {
    pub kind: StationKind,
    pub station: &'a str,
    pub round: u32,
    /// `T2` at a build.
    pub step: Option<&'a str>,
    /// Lanes of the same seat this round (for "lane 2 of 3").
    pub lanes_of_seat: u32,
}

/// What one lane is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatAsk {
    pub assignment: Assignment,
    pub block: LineBrief,
    pub answer: AnswerKind,
}

/// The ask of `lane` (held by `worker`) at `at`, its block within `budget` tokens.
pub fn ask(
    state: &ExecutionState,
    at: &LaneAt<'_>,
    lane: &Lane,
    worker: &WorkerId,
    budget: usize,
    estimator: &dyn TokenEstimator,
) -> SeatAsk {
    let view = LineView {
        kind: at.kind,
        station: at.station,
        seat: &lane.seat,
        worker,
        step: at.step,
        blind: lane.blind,
    };
    let (task, answer) = task(state, at, lane);
    SeatAsk {
        assignment: Assignment {
            kind: AssignmentKind::Step,
            step_id: at.step.map(str::to_string),
            task,
        },
        block: brief(state, &view, budget, estimator),
        answer,
    }
}

fn task(state: &ExecutionState, at: &LaneAt<'_>, lane: &Lane) -> (String, AnswerKind) {
    let seat = &lane.seat;
    let lane_of = if at.lanes_of_seat > 1 {
        format!(" (lane {} of {})", lane.index + 1, at.lanes_of_seat)
    } else {
        String::new()
    };
    let blind = if lane.blind {
        " You work blind: you are shown no other lane's work, and yours is not shown to them."
    } else {
        ""
    };
    let step_title = at.step.and_then(|id| {
        let n: usize = id.strip_prefix('T')?.parse().ok()?;
        let plan = state.locked_plan()?;
        plan.steps.get(n.checked_sub(1)?).map(|s| s.title.as_str())
    });
    let step = match (at.step, step_title) {
        (Some(id), Some(title)) => format!("step {id} ({title})"),
        (Some(id), None) => format!("step {id}"),
        (None, _) => "the fix round's open findings".to_string(),
    };
    match (at.kind, lane.role) {
        (StationKind::Intake, _) => (
            format!(
                "As {seat}: say what is actually wanted: the objective, its constraints and the acceptance criteria. If the description is ambiguous, ask concrete questions instead (questions); the line stops until a human answers them."
            ),
            AnswerKind::Intake,
        ),
        (StationKind::Discovery, Role::Merge) => (
            format!(
                "As {seat}: merge the discovery lanes' notes into one account of the code: what it does, where the change goes, what must not break. The lanes advise; you decide."
            ),
            AnswerKind::Claims,
        ),
        (StationKind::Discovery, _) => (
            format!(
                "As {seat}{lane_of}: {} Record what you learn as completed work and assumptions; you advise, the lead decides (a decision you claim is kept as your seat's advice).{blind}",
                discovery_focus(seat.as_str())
            ),
            AnswerKind::Claims,
        ),
        (StationKind::Plan, Role::Merge) => (
            format!(
                "As {seat}: merge the plan drafts shown, or pick one, and say why in rationale; list the versions you used in from. Tag each step light, standard or heavy."
            ),
            AnswerKind::Plan,
        ),
        (StationKind::Plan, _) => (
            format!(
                "As {seat}{lane_of}: draft the plan for the objective on your own: steps in order, each tagged light, standard or heavy (and any policy tag, such as credentials).{blind}"
            ),
            AnswerKind::Plan,
        ),
        (StationKind::PlanLoop, Role::Revise) => (
            format!(
                "As {seat}: revise the plan to answer the open scrutiny findings shown: list in fixed the findings the revision answers, in dismissed (with reasons) those you reject, and the version you revise in from."
            ),
            AnswerKind::Plan,
        ),
        (StationKind::PlanLoop, _) => (
            format!(
                "As {seat}{lane_of}, round {}: attack the plan shown: raise what is wrong, missing or risky as findings. Raise only what is not already among the open findings; an empty list says the round found nothing new.",
                at.round
            ),
            AnswerKind::Check,
        ),
        (StationKind::Build, Role::Find { pass }) => (
            format!(
                "As {seat}, find pass {pass}: check {step} as built and raise every problem as a finding with where it is. You did not build it; do not fix it."
            ),
            AnswerKind::Check,
        ),
        (StationKind::Build, Role::Confirm) => (
            format!(
                "As {seat}: for {step}, check each claimed fix among the open findings and list in confirmed those you verified; raise anything still wrong. You are neither the builder nor the finder."
            ),
            AnswerKind::Check,
        ),
        (StationKind::Build, _) => (
            format!(
                "As {seat}: build {step} of the locked plan, and fix the open findings shown: name each finding you fixed by its id (N1) in resolved_issues. The plan is locked: do not change it."
            ),
            AnswerKind::Claims,
        ),
        (StationKind::Review, _) => (
            format!(
                "As {seat}{lane_of}, round {}: {} Raise only what is not already among the open findings; an empty list says the round found nothing new. List in confirmed each claimed fix among them that you verified.{blind}",
                at.round,
                review_focus(seat.as_str())
            ),
            AnswerKind::Check,
        ),
        (StationKind::Synthesis | StationKind::Gate | StationKind::Merge, _) => (
            format!("{seat}: this station has no model"),
            AnswerKind::Claims,
        ),
    }
}

fn discovery_focus(seat: &str) -> &'static str {
    match seat {
        "discovery.deep" => "read the code the change touches in depth.",
        "discovery.breadth" => "skim the whole repository for everything the change could affect.",
        "discovery.invariant-map" => {
            "map the invariants the change must keep (what must stay true, and where it is enforced)."
        }
        _ => "read the code for what the change needs.",
    }
}

fn review_focus(seat: &str) -> &'static str {
    match seat {
        "review.fresh-eyes" => {
            "review the change against the locked plan with fresh eyes: you never saw how it was built."
        }
        "review.breadth" => "review everything the change touches, across files.",
        "review.deep-rounds" => {
            "go deeper than the rounds before: edge cases, failure paths, concurrency."
        }
        _ => "review the change against the locked plan.",
    }
}

#[cfg(test)]
#[path = "ask_tests.rs"]
mod tests;
