//! The assembly line's whole unit at a user's defaults (BPE, budget 2,000): the default
//! route offline with six mock workers of three families, each in a pool of its own
//! (what `baton line` runs without a configuration), on a real SQLite file. The mock
//! answers at once, so the time is the engine's: compiling, seating, parsing,
//! reconciling and committing every turn of the unit, from its creation to its end.
//! Then the wall time of one batch of parallel lanes whose workers take 200 ms a call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::line::Route;
use baton_core::line::cursor::Next;
use baton_engine::bench::three_pools;
use baton_engine::config::{Roster, RunSettings};
use baton_engine::{Engine, LineStep, RunSpec};
use baton_store::{SqliteStore, Store};
use criterion::{Criterion, criterion_group, criterion_main};

const UNIT: &str = "Add rate limiting to the public API";
/// The same unit with a bug the mock workers plant and catch: a checkpoint finding, a
/// review finding, a fix round and a second synthesis (what `baton demo --line` runs).
const PLANTED: &str = "Add rate limiting to the public API, with a planted bug";

fn spec(objective: &str, delay_ms: u64) -> RunSpec {
    let mut roster = Roster::mock(6);
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.family = ["alpha", "beta", "gamma"][i % 3].into();
        if delay_ms > 0 {
            w.options.insert("delay_ms".into(), delay_ms.into());
        }
    }
    let mut spec = RunSpec {
        objective: objective.into(),
        tasks: vec![objective.into()],
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster,
        settings: RunSettings::default(),
    };
    spec.settings.floor = three_pools(&mut spec.roster);
    spec
}

/// One unit from creation to its end: (engine time, seat turns, turns).
fn unit(engine: &Engine, route: &Route, objective: &str) -> (Duration, u32, u32) {
    let t0 = Instant::now();
    let id = engine
        .create_unit(&spec(objective, 0), route, None)
        .unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let mut seats = 0;
    loop {
        match engine.line_step(&mut session, route).unwrap() {
            LineStep::Lanes(turns) => {
                seats += turns
                    .iter()
                    .filter(|t| t.worker.as_str() != "baton")
                    .count() as u32;
            }
            LineStep::Waiting(Next::Done) => break,
            LineStep::Waiting(other) => panic!("the unit stopped: {other:?}"),
        }
    }
    (t0.elapsed(), seats, session.state.turns)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("b.db")).unwrap());
    let engine = Engine::new(store);
    let route = Route::default_route().unwrap();
    for (name, objective) in [("clean", UNIT), ("planted bug", PLANTED)] {
        let (_, seats, turns) = unit(&engine, &route, objective);
        eprintln!(
            "one {name} unit of the default route: {turns} turns, {seats} of them seat turns"
        );
        c.bench_function(
            &format!("line/default route, whole {name} unit (mock workers answer at once)"),
            |b| {
                b.iter_custom(|iters| (0..iters).map(|_| unit(&engine, &route, objective).0).sum());
            },
        );
    }
}

/// The wall time of the discovery station's batch of four lanes, each worker answering
/// after 200 ms (the intake before it is not timed).
fn swarm(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let engine = Engine::new(store);
    let route = Route::default_route().unwrap();
    let batch = || {
        let id = engine.create_unit(&spec(UNIT, 200), &route, None).unwrap();
        let mut session = engine.open(&id, None).unwrap();
        engine.line_step(&mut session, &route).unwrap();
        let t0 = Instant::now();
        let LineStep::Lanes(lanes) = engine.line_step(&mut session, &route).unwrap() else {
            panic!("no lanes")
        };
        assert_eq!(lanes.len(), 4);
        t0.elapsed()
    };
    c.bench_function(
        "line/discovery: 4 lanes at once, mock workers of 200 ms latency (wall time)",
        |b| b.iter_custom(|iters| (0..iters).map(|_| batch()).sum()),
    );
}

criterion_group! {
    name = swarms;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = swarm
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(10));
    targets = bench
}
criterion_main!(benches, swarms);
