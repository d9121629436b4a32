//! A switch policy names the worker of the next turn by id: the engine runs that
//! worker, and refuses an id the roster does not have instead of indexing past it.

use baton_core::ids::WorkerId;
use baton_engine::{PolicyInput, RotatingPolicy, SwitchPolicy, TurnPlan};

use super::*;

/// Every turn to one worker, by id, as the rotating policy would plan it otherwise.
struct Pinned(&'static str);

impl SwitchPolicy for Pinned {
    fn next_turn(&self, input: &PolicyInput<'_>) -> Option<TurnPlan> {
        let plan = RotatingPolicy.next_turn(input)?;
        Some(TurnPlan {
            worker: WorkerId::new(self.0),
            ..plan
        })
    }
}

fn mock_spec() -> RunSpec {
    let mut spec = spec(&["Add a health check", "Document it"], Roster::mock(3));
    spec.objective = baton_gateway::mock::demo::OBJECTIVE.into();
    spec
}

#[test]
fn the_worker_a_policy_names_by_id_takes_every_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store).with_policy(Arc::new(Pinned("worker-3")));
    let (id, end) = run_all(&engine, &mock_spec());
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    assert!(!turns.is_empty());
    assert!(
        turns.iter().all(|t| t.worker.as_str() == "worker-3"),
        "{:?}",
        turns.iter().map(|t| t.worker.as_str()).collect::<Vec<_>>()
    );
}

#[test]
fn a_policy_naming_a_worker_the_roster_lacks_is_an_error_naming_the_roster() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store).with_policy(Arc::new(Pinned("nobody")));
    let id = engine.create_run(&mock_spec()).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let err = engine.step(&mut session).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, baton_engine::Error::NoSuchWorker { .. })
            && text.contains("nobody")
            && text.contains("worker-1, worker-2, worker-3"),
        "{text}"
    );
    assert!(store.turns(&id).unwrap().is_empty(), "nothing was run");
}
