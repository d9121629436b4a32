//! A step over earlier work (a review, a check, a summary) sees the completed work and
//! the artifacts of the steps it covers. Regression: since the relevance floor, the
//! demo's closing review (turn 4) saw 2 of its 7 completed items and 2 of its 5
//! artifacts, the rest listed as not relevant, because its words shared nothing with
//! them; naming what it covers did not help.

use baton_core::compiler::{DropReason, HandoffPackage, Section, compile};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{
    Artifact, ArtifactVersion, CompletedWork, ExecutionState, Provenance, StepScope, StepStatus,
};
use baton_core::tokens::BpeEstimator;

use super::compiler::{step, worker};

fn prov(turn: u32) -> Provenance {
    Provenance {
        recorded_by: WorkerId::new(["analyst", "dba", "security", "api"][turn as usize % 4]),
        model: "mock/m".into(),
        turn,
        recorded_at: Timestamp(1_767_225_600_000 + i64::from(turn)),
    }
}

/// The demo's record at its last turn: four steps done, seven completed items, five
/// artifacts, the last step a review.
fn demo_like(review: &str) -> ExecutionState {
    let titles: Vec<String> = [
        "Define the requirements and the overall architecture",
        "Design the PostgreSQL schema",
        "Design authentication and authorization",
        "Define the REST endpoints",
        review,
    ]
    .iter()
    .map(|t| t.to_string())
    .collect();
    let mut s = ExecutionState::new(
        RunId("demo".into()),
        "Build the architecture and implementation plan for a Task Management REST API \
         using FastAPI and PostgreSQL.",
        &titles,
    );
    let completed = [
        (
            "T1",
            "Listed the functional requirements: users, projects, tasks, comments",
        ),
        (
            "T1",
            "Chose the layered architecture and wrote architecture.md",
        ),
        (
            "T2",
            "Wrote the schema for users, projects, memberships and tasks",
        ),
        ("T2", "Added indexes for the task list queries"),
        (
            "T3",
            "Specified JWT access tokens and rotating refresh tokens",
        ),
        ("T4", "Wrote openapi.yaml with 18 endpoints"),
        ("T4", "Mapped each endpoint to the role it requires"),
    ];
    for (n, (step, text)) in completed.iter().enumerate() {
        let turn = step[1..].parse::<u32>().unwrap_or(1) - 1;
        s.completed.push(CompletedWork {
            id: format!("C{}", n + 1),
            text: (*text).into(),
            step: Some((*step).into()),
            provenance: prov(turn),
            reaffirmed: Vec::new(),
        });
    }
    let artifacts = [
        (
            "requirements.md",
            "Functional and non-functional requirements",
            0,
        ),
        (
            "architecture.md",
            "Component overview and the data layer",
            0,
        ),
        (
            "schema.sql",
            "DDL for users, projects, memberships and tasks",
            1,
        ),
        ("auth.md", "Token lifetimes, rotation and the role model", 2),
        ("openapi.yaml", "OpenAPI 3.1: 18 endpoints under /api/v1", 3),
    ];
    for (n, (name, description, turn)) in artifacts.iter().enumerate() {
        s.artifacts.push(Artifact {
            id: format!("A{}", n + 1),
            name: (*name).into(),
            kind: "document".into(),
            versions: vec![ArtifactVersion {
                version: 1,
                description: (*description).into(),
                content_hash: None,
                content: None,
                provenance: prov(*turn),
                verified: false,
                verified_by: None,
            }],
            mentions: Vec::new(),
        });
    }
    for (n, step) in s.plan.iter_mut().enumerate().take(4) {
        step.status = StepStatus::Done;
        step.done_by = Some(prov(n as u32).recorded_by);
        step.done_at_turn = Some(n as u32);
    }
    s.turns = 4;
    s
}

fn kept(p: &HandoffPackage, section: Section) -> Vec<String> {
    p.sections
        .iter()
        .filter(|r| r.section == section)
        .flat_map(|r| r.kept.iter().map(|k| k.item.clone()))
        .collect()
}

fn not_relevant(p: &HandoffPackage, section: Section) -> usize {
    (p.dropped.iter())
        .filter(|d| d.section == section && d.reason == DropReason::NotRelevant)
        .map(|d| d.count as usize)
        .sum()
}

const REVIEWS: [&str; 3] = [
    "Review the plan",
    "Review the whole architecture for inconsistencies and missing dependencies",
    "Review the PostgreSQL schema, the authentication design and the REST endpoints",
];

#[test]
fn a_review_step_sees_every_earlier_steps_work_and_artifacts() {
    for review in REVIEWS {
        let s = demo_like(review);
        let p = compile(&s, &step("T5", review), &worker(), 2000, &BpeEstimator);
        assert_eq!(
            kept(&p, Section::CompletedWork).len(),
            7,
            "{review}\n{}",
            p.text
        );
        assert_eq!(
            kept(&p, Section::Artifacts).len(),
            5,
            "{review}\n{}",
            p.text
        );
        let lost: Vec<_> = (p.dropped.iter())
            .filter(|d| d.reason != DropReason::Summarized)
            .collect();
        assert!(lost.is_empty(), "{review}: {lost:?}");
    }
}

#[test]
fn a_review_on_a_tight_budget_reports_the_rest_as_omitted_for_budget() {
    let review = REVIEWS[0];
    let s = demo_like(review);
    let p = compile(&s, &step("T5", review), &worker(), 300, &BpeEstimator);
    let shown = kept(&p, Section::CompletedWork).len() + kept(&p, Section::Artifacts).len();
    let for_budget = (p.dropped.iter())
        .filter(|d| {
            matches!(d.section, Section::CompletedWork | Section::Artifacts)
                && d.reason == DropReason::Budget
        })
        .count();
    assert!(
        shown < 12,
        "300 tokens should not hold every record:\n{}",
        p.text
    );
    assert_eq!(shown + for_budget, 12, "{:?}", p.dropped);
    assert_eq!(not_relevant(&p, Section::CompletedWork), 0);
    assert_eq!(not_relevant(&p, Section::Artifacts), 0);
}

#[test]
fn a_step_of_its_own_still_keeps_other_steps_work_out_and_the_plan_can_say_which() {
    // A step of its own: the relevance floor holds (the last turn's work only).
    let s = demo_like("Write the deployment guide");
    let task = step("T5", "Write the deployment guide");
    let p = compile(&s, &task, &worker(), 2000, &BpeEstimator);
    assert_eq!(kept(&p, Section::CompletedWork), ["C6", "C7"]);
    assert_eq!(not_relevant(&p, Section::CompletedWork), 5);

    // The plan states the scope: it wins over the title, both ways.
    let mut covering = s.clone();
    covering.plan[4].scope = Some(StepScope::Earlier);
    let p = compile(&covering, &task, &worker(), 2000, &BpeEstimator);
    assert_eq!(kept(&p, Section::CompletedWork).len(), 7);
    assert_eq!(kept(&p, Section::Artifacts).len(), 5);

    let mut own = demo_like(REVIEWS[0]);
    own.plan[4].scope = Some(StepScope::Own);
    let p = compile(
        &own,
        &step("T5", REVIEWS[0]),
        &worker(),
        2000,
        &BpeEstimator,
    );
    assert_eq!(kept(&p, Section::CompletedWork), ["C6", "C7"]);
}

#[test]
fn a_review_covers_only_the_steps_before_it() {
    // A review in the middle of the plan: work of a later step (done out of order) is
    // not what it reviews.
    let mut s = demo_like("Design authentication and authorization");
    s.plan.swap(2, 4);
    s.plan[2].title = "Review the schema".into();
    s.plan[2].id = "T3".into();
    s.plan[4].id = "T5".into();
    s.plan[2].status = StepStatus::Pending;
    for c in &mut s.completed {
        if c.step.as_deref() == Some("T4") {
            c.step = Some("T5".into());
            c.provenance.turn = 1;
        }
    }
    s.turns = 9;
    let p = compile(
        &s,
        &step("T3", "Review the schema"),
        &worker(),
        2000,
        &BpeEstimator,
    );
    let shown = kept(&p, Section::CompletedWork);
    assert!(!shown.contains(&"C6".to_string()) && !shown.contains(&"C7".to_string()));
    for c in ["C1", "C2", "C3", "C4"] {
        assert!(shown.contains(&c.to_string()), "{c} missing: {shown:?}");
    }
}
