use super::*;
use crate::compiler::WorkerProfile;
use crate::ids::RunId;
use crate::line::test_fixtures::as_seat;
use crate::line::{DraftStep, PlanDraft};
use crate::reconciler::ReconcileOutcome;
use crate::reconciler::line::{lock_plan, propose_plan};
use crate::router::SeatId;
use crate::tokens::HeuristicEstimator;

fn draft_by(s: &mut ExecutionState, who: &str, seat: &str, titles: &[&str], lock: bool) {
    let plan = PlanDraft {
        steps: titles
            .iter()
            .map(|t| DraftStep {
                title: t.to_string(),
                tags: vec!["heavy".into()],
            })
            .collect(),
        rationale: None,
    };
    let mut out = ReconcileOutcome::default();
    as_seat(who, seat, "plan", s.turns, None, |turn| {
        let id = propose_plan(s, turn, &plan, &[], &mut out).unwrap();
        if lock {
            assert!(lock_plan(s, turn.ctx, &id, &mut out));
        }
    });
    s.turns += 1;
}

fn lane(seat: &str, index: u32, role: Role, blind: bool) -> Lane {
    Lane {
        seat: SeatId::new(seat),
        index,
        role,
        blind,
    }
}

fn at<'a>(
    kind: StationKind,
    station: &'a str,
    round: u32,
    step: Option<&'a str>,
    n: u32,
) -> LaneAt<'a> {
    LaneAt {
        kind,
        station,
        round,
        step,
        lanes_of_seat: n,
    }
}

fn text(a: &SeatAsk) -> String {
    format!("{}\n{}", a.assignment.task, a.block.text)
}

#[test]
fn a_blind_co_draft_is_asked_to_draft_alone_and_shown_no_other_draft() {
    let mut s = ExecutionState::new(RunId("u".into()), "Add rate limiting", &[]);
    draft_by(
        &mut s,
        "gpt",
        "plan.co-draft",
        &["token bucket per key"],
        false,
    );
    let me = WorkerId::new("opus");
    let a = ask(
        &s,
        &at(StationKind::Plan, "plan", 1, None, 2),
        &lane("plan.co-draft", 1, Role::Work, true),
        &me,
        2_000,
        &HeuristicEstimator,
    );
    assert_eq!(a.answer, AnswerKind::Plan);
    assert_eq!(a.answer.schema(), Some(answers::plan_schema()));
    assert!(
        a.assignment
            .task
            .starts_with("As plan.co-draft (lane 2 of 2): draft the plan"),
        "{}",
        a.assignment.task
    );
    assert!(a.assignment.task.ends_with(
        "You work blind: you are shown no other lane's work, and yours is not shown to them."
    ));
    assert!(!text(&a).contains("token bucket"), "{}", text(&a));
}

#[test]
fn a_build_lane_is_asked_for_its_step_by_title_and_shown_the_locked_plan() {
    let mut s = ExecutionState::new(RunId("u".into()), "Add rate limiting", &[]);
    draft_by(
        &mut s,
        "opus",
        "lead.plan",
        &["token bucket per key", "429 with Retry-After"],
        true,
    );
    let me = WorkerId::new("opus");
    let build = ask(
        &s,
        &at(StationKind::Build, "build", 1, Some("T2"), 1),
        &lane("build.hard-step", 0, Role::Build, false),
        &me,
        2_000,
        &HeuristicEstimator,
    );
    assert_eq!(build.answer, AnswerKind::Claims);
    assert_eq!(build.answer.schema(), None);
    assert_eq!(build.assignment.step_id.as_deref(), Some("T2"));
    assert_eq!(
        build.assignment.task,
        "As build.hard-step: build step T2 (429 with Retry-After) of the locked plan, and fix the open findings shown: name each finding you fixed by its id (N1) in resolved_issues. The plan is locked: do not change it."
    );
    assert!(
        build
            .block
            .text
            .contains("2. [heavy] 429 with Retry-After  ← this step"),
        "{}",
        build.block.text
    );

    let glm = WorkerId::new("glm");
    let find = ask(
        &s,
        &at(StationKind::Build, "build", 1, Some("T2"), 1),
        &lane("checkpoint.find", 1, Role::Find { pass: 2 }, false),
        &glm,
        2_000,
        &HeuristicEstimator,
    );
    assert_eq!(find.answer, AnswerKind::Check);
    assert!(find.assignment.task.starts_with(
        "As checkpoint.find, find pass 2: check step T2 (429 with Retry-After) as built"
    ));
    // Deterministic (invariant 7).
    assert_eq!(
        ask(
            &s,
            &at(StationKind::Build, "build", 1, Some("T2"), 1),
            &lane("checkpoint.find", 1, Role::Find { pass: 2 }, false),
            &glm,
            2_000,
            &HeuristicEstimator
        ),
        find
    );
}

#[test]
fn every_station_with_seats_asks_for_the_answer_its_work_gives() {
    let s = ExecutionState::new(RunId("u".into()), "o", &[]);
    let w = WorkerId::new("w");
    let cases = [
        (
            StationKind::Intake,
            "lead.intake",
            Role::Work,
            AnswerKind::Intake,
        ),
        (
            StationKind::Discovery,
            "discovery.invariant-map",
            Role::Work,
            AnswerKind::Claims,
        ),
        (
            StationKind::Discovery,
            "lead.discovery",
            Role::Merge,
            AnswerKind::Claims,
        ),
        (
            StationKind::Plan,
            "lead.plan",
            Role::Merge,
            AnswerKind::Plan,
        ),
        (
            StationKind::PlanLoop,
            "lead.plan",
            Role::Revise,
            AnswerKind::Plan,
        ),
        (
            StationKind::PlanLoop,
            "plan.scrutiny",
            Role::Work,
            AnswerKind::Check,
        ),
        (
            StationKind::Build,
            "checkpoint.confirm",
            Role::Confirm,
            AnswerKind::Check,
        ),
        (
            StationKind::Review,
            "review.deep-rounds",
            Role::Work,
            AnswerKind::Check,
        ),
    ];
    for (kind, seat, role, answer) in cases {
        let a = ask(
            &s,
            &at(kind, "x", 3, None, 1),
            &lane(seat, 0, role, false),
            &w,
            500,
            &HeuristicEstimator,
        );
        assert_eq!(a.answer, answer, "{seat}");
        assert!(
            a.assignment.task.starts_with(&format!("As {seat}")),
            "{}",
            a.assignment.task
        );
    }
    let deep = ask(
        &s,
        &at(StationKind::Review, "review", 3, None, 1),
        &lane("review.deep-rounds", 0, Role::Work, false),
        &w,
        500,
        &HeuristicEstimator,
    );
    assert!(
        deep.assignment
            .task
            .starts_with("As review.deep-rounds, round 3: go deeper"),
        "{}",
        deep.assignment.task
    );
}

/// A seat's briefing is the compiled record with the line block after the objective:
/// the block paid for first, the whole within the budget, and what the block showed and
/// left out reported with the package. A blind co-draft's briefing holds no other draft.
#[test]
fn a_seats_briefing_carries_its_line_block_within_the_budget() {
    let mut s = ExecutionState::new(RunId("u".into()), "Add rate limiting", &[]);
    draft_by(
        &mut s,
        "gpt",
        "plan.co-draft",
        &["token bucket per key"],
        false,
    );
    let me = WorkerId::new("opus");
    let profile = WorkerProfile {
        id: me.clone(),
        model: "m".into(),
        family: "anthropic".into(),
        role: None,
    };
    let budget = 1_000;
    let merge = ask(
        &s,
        &at(StationKind::Plan, "plan", 1, None, 1),
        &lane("plan.lead", 0, Role::Merge, false),
        &me,
        budget / 2,
        &HeuristicEstimator,
    );
    assert!(merge.block.text.contains("token bucket per key"));
    let package = crate::compiler::compile_with_line(
        &s,
        &merge.assignment,
        &profile,
        budget,
        &HeuristicEstimator,
        &merge.block,
    );
    let objective = package.text.find("## Objective").unwrap();
    let block = package.text.find(merge.block.text.trim_end()).unwrap();
    assert!(block > objective, "{}", package.text);
    assert!(package.tokens <= budget, "{} > {budget}", package.tokens);
    let line = package.line.as_ref().unwrap();
    assert_eq!(line.shown, merge.block.shown);
    assert_eq!(line.tokens, merge.block.tokens);

    let blind = ask(
        &s,
        &at(StationKind::Plan, "plan", 1, None, 2),
        &lane("plan.co-draft", 1, Role::Work, true),
        &me,
        budget / 2,
        &HeuristicEstimator,
    );
    let package = crate::compiler::compile_with_line(
        &s,
        &blind.assignment,
        &profile,
        budget,
        &HeuristicEstimator,
        &blind.block,
    );
    assert!(
        !package.text.contains("token bucket per key"),
        "{}",
        package.text
    );
    assert!(
        package
            .line
            .unwrap()
            .omitted
            .iter()
            .any(|o| o.reason == crate::line::brief::OmitReason::Blind)
    );

    // Every other briefing is what it was: no line block, no `line` in its JSON.
    let plain =
        crate::compiler::compile(&s, &merge.assignment, &profile, budget, &HeuristicEstimator);
    assert!(plain.line.is_none());
    assert!(!serde_json::to_string(&plain).unwrap().contains("\"line\""));
}
