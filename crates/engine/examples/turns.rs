//! Engine time per turn over many turns, in CPU time and in a form a profiler can
//! count: runs `N` step turns of the offline mock with the user's defaults (the o200k
//! BPE estimator, budget 2,000, the default mock roster) on a real SQLite file, in runs
//! of 100 steps as the `turn` benchmark does.
//!
//! ```sh
//! cargo run --release -p baton-engine --example turns -- [N] [BUDGET] [routed]
//! valgrind --tool=callgrind --toggle-collect='*run_turn*' target/release/examples/turns 200
//! ```
//!
//! `routed` routes the run by three pools (`bench::three_pools`), as the routed
//! variants of the `turn` benchmark do.
//!
//! Prints the summed engine time and the process's CPU time (`/proc/self/stat`), which a
//! loaded machine inflates less than wall time.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use baton_engine::bench::{tasks, three_pools};
use baton_engine::config::{DEFAULT_BUDGET, Roster, RunSettings};
use baton_engine::{Engine, RunSpec, StepOutcome};
use baton_gateway::mock::demo;
use baton_store::{SqliteStore, Store};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(300), |s| s.parse())?;
    let budget: usize = args.next().map_or(Ok(DEFAULT_BUDGET), |s| s.parse())?;
    let routed = args.next().is_some_and(|s| s == "routed");
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db"))?);
    let engine = Engine::new(store);
    let mut spec = RunSpec {
        objective: demo::OBJECTIVE.into(),
        tasks: tasks(100),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        settings: RunSettings {
            budget,
            total_budget: None,
            ..RunSettings::default()
        },
    };
    if routed {
        spec.settings.floor = three_pools(&mut spec.roster);
    }
    let mut session = engine.open(&engine.create_run(&spec)?, None)?;
    let (mut engine_time, mut done) = (Duration::ZERO, 0);
    let cpu0 = cpu_ticks()?;
    while done < n {
        match engine.step(&mut session)? {
            StepOutcome::Turn(s) => {
                engine_time += s.engine_time;
                done += 1;
            }
            StepOutcome::Finished => {
                session = engine.open(&engine.create_run(&spec)?, None)?;
            }
            other => return Err(format!("unexpected step outcome {other:?}").into()),
        }
    }
    let cpu = (cpu_ticks()? - cpu0) as f64 * 10.0 / n as f64;
    println!(
        "{n} turns, budget {budget}: engine time {:.3} ms per turn; process CPU {cpu:.3} ms per step",
        engine_time.as_secs_f64() * 1e3 / n as f64
    );
    Ok(())
}

/// User plus system CPU time of this process, in clock ticks (100 per second on Linux).
fn cpu_ticks() -> Result<u64, Box<dyn Error>> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').ok_or("no ) in /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11).ok_or("no utime")?.parse()?;
    let stime: u64 = fields.get(12).ok_or("no stime")?.parse()?;
    Ok(utime + stime)
}
