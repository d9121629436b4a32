//! DESIGN.md's invariants, checked on real runs over a real SQLite file.

use baton_core::compiler::{self, Assignment, AssignmentKind};
use baton_core::state::ExecutionState;
use baton_core::tokens::HeuristicEstimator;
use baton_engine::{StepOutcome, demo};

use super::*;

/// Runs the demo turn by turn, returning the state after each turn.
fn demo_states() -> (
    tempfile::TempDir,
    Arc<dyn Store>,
    RunId,
    Vec<ExecutionState>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let id = engine.create_run(&demo::spec()).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let mut states = vec![session.state.clone()];
    while let StepOutcome::Turn(_) = engine.step(&mut session).unwrap() {
        states.push(session.state.clone());
    }
    (dir, store, id, states)
}

#[test]
fn artifact_versions_and_failed_attempts_only_grow() {
    let (_dir, _store, _id, states) = demo_states();
    for pair in states.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(after.failed_attempts.len() >= before.failed_attempts.len());
        for (b, a) in before.failed_attempts.iter().zip(&after.failed_attempts) {
            assert_eq!(
                (&b.id, &b.what, &b.why, &b.provenance),
                (&a.id, &a.what, &a.why, &a.provenance)
            );
        }
        for (b, a) in before.artifacts.iter().zip(&after.artifacts) {
            assert_eq!(
                b.versions[..],
                a.versions[..b.versions.len()],
                "versions are appended, never rewritten"
            );
        }
    }
}

#[test]
fn provenance_comes_from_the_engine() {
    let (_dir, store, id, states) = demo_states();
    let last = states.last().unwrap();
    let turns = store.turns(&id).unwrap();
    for d in &last.decisions {
        let turn = &turns[d.provenance.turn as usize];
        assert_eq!(d.provenance.recorded_by, turn.worker, "{}", d.id);
        assert_eq!(d.provenance.model, turn.model);
        assert_eq!(
            d.provenance.recorded_at, turn.finished_at,
            "the engine clock, not the model"
        );
    }
}

#[test]
fn the_stored_state_is_the_state_the_engine_holds() {
    let (_dir, store, id, states) = demo_states();
    let reloaded = store.load_state(&id).unwrap();
    assert_eq!(&reloaded, states.last().unwrap());
}

#[test]
fn task_and_objective_reach_every_worker_even_on_a_tiny_budget() {
    let (_dir, _store, _id, states) = demo_states();
    let state = states.last().unwrap();
    let worker = demo::roster().workers[0].profile();
    for budget in [60, 120, 400, 1500] {
        let assignment = Assignment {
            kind: AssignmentKind::Step,
            step_id: Some("T5".into()),
            task: "Review everything".into(),
        };
        let p = compiler::compile(state, &assignment, &worker, budget, &HeuristicEstimator);
        assert!(
            p.text.contains("Review everything"),
            "budget {budget}:\n{}",
            p.text
        );
        assert!(
            p.text.contains("Task Management REST API") || p.text.contains("shortened"),
            "budget {budget}:\n{}",
            p.text
        );
        assert!(
            p.tokens <= budget || p.over_budget,
            "budget {budget}: {} tokens",
            p.tokens
        );
        let again = compiler::compile(
            &state.clone(),
            &assignment,
            &worker,
            budget,
            &HeuristicEstimator,
        );
        assert_eq!(p, again, "compilation is deterministic");
    }
}

#[test]
fn a_turn_is_never_committed_twice_by_concurrent_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let id = engine.create_run(&demo::spec()).unwrap();
    let mut first = engine.open(&id, None).unwrap();
    let mut second = engine.open(&id, None).unwrap();
    assert!(matches!(
        engine.step(&mut first).unwrap(),
        StepOutcome::Turn(_)
    ));
    // The second session still believes turn 0 is next: its commit is fenced off.
    let err = engine.step(&mut second).unwrap_err();
    assert!(err.to_string().contains("turn 0"), "{err}");
    assert_eq!(store.turns(&id).unwrap().len(), 1);
    // A fresh session continues from the committed turn.
    let mut third = engine.open(&id, None).unwrap();
    match engine.step(&mut third).unwrap() {
        StepOutcome::Turn(s) => assert_eq!(s.turn, 1),
        other => panic!("{other:?}"),
    }
    let turns: Vec<u32> = store.turns(&id).unwrap().iter().map(|t| t.turn).collect();
    assert_eq!(turns, [0, 1]);
}

#[test]
fn a_second_process_is_refused_the_run_before_it_spends_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let id = engine.create_run(&demo::spec()).unwrap();
    let mut first = engine.open(&id, None).unwrap();
    engine
        .lease(&mut first, std::time::Duration::from_secs(30))
        .unwrap();
    let mut second = engine.open(&id, None).unwrap();
    let err = engine
        .lease(&mut second, std::time::Duration::from_secs(30))
        .unwrap_err();
    assert!(
        err.to_string().contains("is being advanced by pid-"),
        "{err}"
    );
    assert!(matches!(
        engine.step(&mut first).unwrap(),
        StepOutcome::Turn(_)
    ));
    // Releasing (the first process ends) lets the next one in.
    drop(first);
    engine
        .lease(&mut second, std::time::Duration::from_secs(30))
        .unwrap();
    let mut third = engine.open(&id, None).unwrap();
    assert!(
        engine
            .lease(&mut third, std::time::Duration::from_secs(30))
            .is_err()
    );
    drop(second);
    engine
        .lease(&mut third, std::time::Duration::from_secs(30))
        .unwrap();
    match engine.step(&mut third).unwrap() {
        StepOutcome::Turn(s) => assert_eq!(s.turn, 1),
        other => panic!("{other:?}"),
    }
}

/// A run lease lost between turns (another process took the run over) is reported
/// as the run's lease, never as a job's, and no further turn starts.
#[test]
fn a_run_lease_taken_over_stops_the_run_as_a_run_lease_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let id = engine.create_run(&demo::spec()).unwrap();
    let mut first = engine.open(&id, None).unwrap();
    // Renewed every 200 ms, so the take-over is noticed quickly.
    engine
        .lease(&mut first, std::time::Duration::from_millis(600))
        .unwrap();
    let taken = store
        .try_lease_run(&id, "pid-other", "other-token", 60_000, true)
        .unwrap();
    assert!(taken.is_ok());
    std::thread::sleep(std::time::Duration::from_millis(900));
    let err = engine.step(&mut first).unwrap_err();
    match &err {
        baton_engine::Error::RunLeaseLost { run, .. } => assert_eq!(run, &id.0),
        other => panic!("not a run lease lost: {other:?}"),
    }
    assert!(
        err.to_string()
            .contains(&format!("run {id} lost its lease")),
        "{err}"
    );
    assert!(store.turns(&id).unwrap().is_empty());
    // And the run's stream says why this process stopped.
    let last = store.events(&id, 0).unwrap().pop().unwrap().event.kind;
    assert!(
        matches!(&last, baton_protocol::EventKind::LeaseLost { what, .. } if what == "run"),
        "{last:?}"
    );
}

/// Regression (issue 9, item 2): on the mock's 100-turn run (the `baton bench` plan:
/// "Refine part N of the plan…" steps whose completion claims differ only in N),
/// completed-work claims that resembled an earlier step's were discarded without a
/// word. Every step now keeps its own completed work.
#[test]
fn a_hundred_turn_mock_run_keeps_every_steps_completed_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = RunSpec {
        objective: baton_gateway::mock::demo::OBJECTIVE.into(),
        tasks: baton_engine::bench::tasks(100),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        settings: RunSettings {
            budget: 3000,
            ..RunSettings::default()
        },
    };
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    let state = engine.open(&id, None).unwrap().state;
    for step in &state.plan {
        assert!(
            state
                .completed
                .iter()
                .any(|c| c.step.as_deref() == Some(step.id.as_str())),
            "{} has no completed work on record ({} records)",
            step.id,
            state.completed.len()
        );
    }
}
