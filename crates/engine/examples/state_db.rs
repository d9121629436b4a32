//! Writes a SQLite database holding one run whose state has about ITEMS records (the
//! synthetic state the compile benchmarks use), to measure what a fresh `baton compile`
//! (or a resume) pays on a large record:
//!
//! ```sh
//! cargo run --release -p baton-engine --example state_db -- /tmp/10k.db 10000
//! baton --db /tmp/10k.db compile            # default estimator (bpe)
//! BATON_ESTIMATOR=heuristic baton --db /tmp/10k.db compile
//! ```

use std::error::Error;
use std::sync::Arc;

use baton_core::synthetic;
use baton_engine::config::{Roster, RunSettings};
use baton_engine::orchestrator::{Engine, RunSpec};
use baton_store::{SqliteStore, Store};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: state_db PATH [ITEMS]")?;
    let items: usize = args.next().map_or(Ok(10_000), |n| n.parse())?;
    if std::fs::exists(&path)? {
        return Err(format!("{path} exists; give a new path").into());
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path.as_ref())?);
    let mut state = synthetic::state_with_items(items, 1);
    // Created through the engine, so the run's stored configuration is a real one; its
    // state is then the synthetic one, written as a new run with that configuration.
    let engine = Engine::new(store.clone());
    let template = engine.create_run(&RunSpec {
        objective: state.objective.clone(),
        tasks: state.plan.iter().map(|s| s.title.clone()).collect(),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        settings: RunSettings::default(),
    })?;
    let mut info = store.run_info(&template)?;
    info.id = baton_core::ids::RunId(format!("{}-{items}", template.0));
    info.turns = state.turns;
    state.run_id = info.id.clone();
    store.create_run(&info, &state, &[])?;
    println!("{}", info.id.0);
    Ok(())
}
