//! A plan step's tags and scope, as `baton run --step-tags` and `--step-scope` give them:
//! the tags reach the seat policy of a routed run, the scope decides what the step's
//! briefing holds of the earlier steps' work.

use baton_core::compiler::{DropReason, Section};
use baton_core::router::{Seat, SeatId};
use baton_core::state::{StepScope, StepTag};

use super::seats::{mock_spec, pool, routed, workers_of};
use super::*;

/// Two families in two unmetered pools (a tie: pool `a` is picked first), and a
/// `build.step` seat that keeps `denied` families from steps with a tag.
fn tagged_spec(tasks: &[&str], deny: &[(&str, &str)]) -> RunSpec {
    let mut spec = routed(
        mock_spec(tasks, &[("w1", "fa"), ("w2", "fb")]),
        vec![pool("a", None), pool("b", None)],
        &[("w1", "a"), ("w2", "b")],
    );
    let mut seat = Seat::new(SeatId::new("build.step"));
    for (tag, family) in deny {
        seat.deny_tags
            .insert(tag.to_string(), vec![family.to_string()]);
    }
    spec.settings.floor.seats = vec![seat];
    spec
}

/// Regression: plan steps had no tags, so a seat's `deny_tags` never applied to a run.
/// A `credentials` step never goes to the denied family (though its pool is the one
/// picked first); the untagged step after it may.
#[test]
fn a_credentials_step_is_never_seated_on_the_denied_family_and_an_untagged_one_may_be() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = tagged_spec(
        &["Rotate the database password", "Document the endpoints"],
        &[("credentials", "fa")],
    );
    spec.step_tags = vec![StepTag::list("credentials").unwrap()];
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(workers_of(&store, &id), ["w2", "w1"]);
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.plan[0].tags, StepTag::list("credentials").unwrap());
    assert!(state.plan[1].tags.is_empty());
    // The briefing of the tagged step says so; the untagged one's line is as before.
    let turns = store.turns(&id).unwrap();
    assert!(
        turns[0]
            .package
            .text
            .contains("Step T1 (tagged credentials) is pending."),
        "{}",
        turns[0].package.text
    );
    assert!(turns[1].package.text.contains("Step T2 is pending."));
}

/// Tags that leave nobody (each family denied one of them): the run stops with the
/// router's question, naming each worker's reason, and nobody works the step.
#[test]
fn tags_that_deny_every_family_stop_the_run_with_the_routers_question() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = tagged_spec(
        &["Migrate the credentials table"],
        &[("credentials", "fa"), ("db", "fb")],
    );
    spec.step_tags = vec![StepTag::list("credentials,db").unwrap()];
    let (id, end) = run_all(&engine, &spec);
    let RunEnd::Blocked { question } = end else {
        panic!("the run should stop: {end:?}")
    };
    assert!(
        question.contains("Nobody can take seat build.step"),
        "{question}"
    );
    assert!(
        question.contains("w1 (its family may not see steps tagged credentials)"),
        "{question}"
    );
    assert!(
        question.contains("w2 (its family may not see steps tagged db)"),
        "{question}"
    );
    assert!(workers_of(&store, &id).is_empty());
}

/// More tags or scopes than steps are refused before anything is created.
#[test]
fn more_step_tags_or_scopes_than_steps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = tagged_spec(&["One step"], &[]);
    spec.step_tags = vec![Vec::new(), Vec::new()];
    let err = engine.create_run(&spec).unwrap_err().to_string();
    assert!(err.contains("2 step tags for 1 tasks"), "{err}");
    spec.step_tags = Vec::new();
    spec.step_scopes = vec![None, Some(StepScope::Own)];
    let err = engine.create_run(&spec).unwrap_err().to_string();
    assert!(err.contains("2 step scopes for 1 tasks"), "{err}");
    assert!(store.list_runs().unwrap().is_empty());
}

/// The last step's briefing: how many earlier completed-work items it shows, and how
/// many it left out as not relevant.
fn last_briefing(tasks: &[&str], scope: Option<StepScope>) -> (usize, u32) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = mock_spec(tasks, &[("w1", "fa"), ("w2", "fb")]);
    spec.step_scopes = vec![None; tasks.len() - 1];
    spec.step_scopes.push(scope);
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    let last = turns.last().unwrap();
    let p = &last.package;
    let kept = p
        .sections
        .iter()
        .filter(|r| r.section == Section::CompletedWork)
        .map(|r| r.kept.len())
        .sum();
    let not_relevant = p
        .dropped
        .iter()
        .filter(|d| d.section == Section::CompletedWork && d.reason == DropReason::NotRelevant)
        .map(|d| d.count)
        .sum();
    (kept, not_relevant)
}

const EARLIER: [&str; 4] = [
    "Define the requirements and the overall architecture",
    "Design the PostgreSQL schema",
    "Design authentication and authorization",
    "Define the REST endpoints",
];

/// The scope a plan states wins over the title, both ways: an `own` step titled
/// "Review …" is briefed as a step of its own (other steps' work only when relevant),
/// an `earlier` step titled otherwise sees every earlier step's work.
#[test]
fn a_stated_scope_wins_over_the_title_both_ways() {
    let with = |last: &'static str| -> Vec<&'static str> {
        EARLIER.iter().copied().chain([last]).collect()
    };
    let review = with("Review the work so far");
    let (all, none_left) = last_briefing(&review, None);
    assert_eq!(none_left, 0, "a review sees all the earlier work");
    let (own, left_out) = last_briefing(&review, Some(StepScope::Own));
    assert!(
        own < all && left_out > 0,
        "own: {own} shown, {left_out} not relevant; as a review: {all}"
    );

    let guide = with("Write the deployment guide");
    let (default, dropped) = last_briefing(&guide, None);
    assert!(dropped > 0, "a step of its own leaves some out: {default}");
    let (earlier, none) = last_briefing(&guide, Some(StepScope::Earlier));
    assert_eq!(none, 0);
    assert_eq!(earlier, default + dropped as usize);
}
