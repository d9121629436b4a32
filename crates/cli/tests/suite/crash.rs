//! A `baton` process killed at any instant loses at most the turn in flight; a fresh
//! process resumes and finishes with no turn committed twice.

use std::process::Stdio;
use std::time::{Duration, Instant};

use baton_store::{SqliteStore, Store};

use super::*;

const STEPS: usize = 8;

fn turns_committed(store: &SqliteStore, id: &str) -> u32 {
    let rid = store.resolve_run(id).unwrap();
    store.run_info(&rid).unwrap().turns
}

#[test]
fn killed_between_and_inside_turns_resumes_without_losing_or_repeating_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each mock call takes 40 ms, so a turn is ~80 ms of model time plus the commit.
    std::fs::write(
        d.join("baton.toml"),
        "estimator = \"heuristic\"\n[[workers]]\nid = \"a\"\nmodel = \"mock/a\"\noptions = { delay_ms = 40 }\n\
         [[workers]]\nid = \"b\"\nmodel = \"mock/b\"\noptions = { delay_ms = 40 }\n",
    )
    .unwrap();
    let mut args = vec!["run", "--objective", "Survive crashes", "--create-only"];
    let tasks: Vec<String> = (0..STEPS).map(|i| format!("step number {i}")).collect();
    for t in &tasks {
        args.push("--task");
        args.push(t);
    }
    let id = run_ok(d, &args).trim().to_string();
    let store = SqliteStore::open(&db(d)).unwrap();

    let mut kills = 0;
    // Alternate: kill right after a commit is observed (between turns), and kill in the
    // middle of a model call (inside a turn).
    for round in 0..6 {
        let before = turns_committed(&store, &id);
        if before as usize >= STEPS {
            break;
        }
        let mut child = baton(d)
            .args(["resume", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        if round % 2 == 0 {
            while turns_committed(&store, &id) == before && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        } else {
            std::thread::sleep(Duration::from_millis(60));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        let after = turns_committed(&store, &id);
        assert!(
            after >= before && after <= before + 2,
            "round {round}: {before} -> {after}"
        );
    }
    assert!(
        kills >= 4,
        "the run finished before it could be killed enough times"
    );

    let out = baton(d).args(["resume", &id]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let rid = store.resolve_run(&id).unwrap();
    let turns = store.turns(&rid).unwrap();
    let numbers: Vec<u32> = turns.iter().map(|t| t.turn).collect();
    assert_eq!(
        numbers,
        (0..STEPS as u32).collect::<Vec<_>>(),
        "every turn once, in order"
    );
    let state = store.load_state(&rid).unwrap();
    assert_eq!(state.steps_done(), STEPS);
    assert_eq!(state.turns as usize, STEPS);
    let done_at: Vec<Option<u32>> = state.plan.iter().map(|s| s.done_at_turn).collect();
    assert_eq!(done_at, (0..STEPS as u32).map(Some).collect::<Vec<_>>());
    assert_eq!(
        state.handoffs.len(),
        STEPS,
        "one handoff per committed turn, none duplicated"
    );
}
