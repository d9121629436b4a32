//! Engine time per turn at a user's defaults (compile at budget 2,000 with the BPE, one
//! combined mock call, parse, reconcile, audit, durable commit) and a fresh open-and-compile of a 100-turn run, on a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_engine::bench::{tasks, three_pools};
use baton_engine::config::{Roster, RunSettings};
use baton_engine::{Engine, RunSpec, StepOutcome};
use baton_gateway::mock::demo;
use baton_store::{SqliteStore, Store};
use criterion::{Criterion, criterion_group, criterion_main};

fn spec(turns: u32) -> RunSpec {
    RunSpec {
        objective: demo::OBJECTIVE.into(),
        tasks: tasks(turns),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        // The settings a run gets by default: the o200k BPE, budget 2,000.
        settings: RunSettings::default(),
    }
}

/// `spec` routed by three pools (`bench::three_pools`).
fn routed(turns: u32) -> RunSpec {
    let mut spec = spec(turns);
    spec.settings.floor = three_pools(&mut spec.roster);
    spec
}

/// Turns of 100-step runs, one run after another: each measured iteration is a real step
/// turn on a record that grows as a real run's does. `whole`: the whole `step` (the
/// seating, the checks before the turn, the policy's look at the next turn), else the
/// turn's own engine time.
fn turns(c: &mut Criterion, name: &str, make: fn(u32) -> RunSpec, whole: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("b.db")).unwrap());
    let engine = Engine::new(store);
    let mut id = engine.create_run(&make(100)).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let t0 = Instant::now();
                let step = engine.step(&mut session).unwrap();
                let elapsed = t0.elapsed();
                match step {
                    StepOutcome::Turn(s) => {
                        total += if whole { elapsed } else { s.engine_time };
                        done += 1;
                    }
                    StepOutcome::Finished => {
                        id = engine.create_run(&make(100)).unwrap();
                        session = engine.open(&id, None).unwrap();
                    }
                    other => panic!("{other:?}"),
                }
            }
            total
        })
    });
}

fn turn(c: &mut Criterion) {
    turns(
        c,
        "engine turn (mock model, bpe, SQLite fsync)",
        spec,
        false,
    );
    turns(c, "engine turn, routed (3 pools)", routed, false);
    turns(c, "engine step, whole (rotating)", spec, true);
    turns(c, "engine step, whole (routed, 3 pools)", routed, true);
}

fn resume(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let engine = Engine::new(store);
    let id = engine.create_run(&spec(101)).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    engine.run(&mut session, Some(100), &mut |_, _| {}).unwrap();
    drop(session);
    c.bench_function("open a 100-turn run and compile the next package", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                let engine = Engine::new(Arc::new(SqliteStore::open(&path).unwrap()));
                let session = engine.open(&id, None).unwrap();
                std::hint::black_box(engine.preview(&session, None, None).unwrap());
            }
            t0.elapsed()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    targets = turn, resume
}
criterion_main!(benches);
