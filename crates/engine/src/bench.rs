//! `baton bench`: what briefings cost against replaying transcripts, and how fast the
//! engine is, on runs of the offline mock model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::claims;
use baton_core::tokens::{EstimatorKind, TokenEstimator};
use baton_core::turn::{CallKind, TurnRecord};
use baton_gateway::mock::demo;
use baton_store::{SqliteStore, Store};
use serde::Serialize;

use baton_core::router::{Allowance, Pool, PoolId, Window};

use crate::config::{Floor, Roster, RunSettings};
use crate::orchestrator::{Engine, RunEnd, RunSpec};
use crate::{Error, Result};

#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub turns: u32,
    /// Tokens per package.
    pub budget: usize,
    /// Tokens baton actually sent (every call of every turn, system prompts included).
    pub tokens_sent: u64,
    /// Tokens the same turns would send if each call carried every earlier worker's raw
    /// output instead of a compiled briefing (a lower bound: instructions are counted
    /// once per call, as baton sends them).
    pub transcript_tokens: u64,
    /// What the claim schemas add when every call also carries its schema, as the
    /// providers that enforce one send it (OpenAI `response_format`, Anthropic's
    /// tool, Gemini's `responseSchema`; the mock sends none, so `tokens_sent` has none).
    pub schema_tokens: u64,
    pub engine_time_per_turn: Duration,
    pub engine_time_max: Duration,
    /// Opening the run from the database and compiling the next package.
    pub resume_to_package: Duration,
    pub db_bytes: u64,
}

/// The reference engine's input tokens on the same 100-turn work (issue 9), measured
/// outside this repository: `baton bench` cannot run it, so this is the recorded figure,
/// not a measurement.
pub const REFERENCE_INPUT_TOKENS_100_TURNS: u64 = 246_000;

/// The plan for an `n`-turn run: the demo's five steps, then refinement steps.
pub fn tasks(n: u32) -> Vec<String> {
    (0..n as usize)
        .map(|i| match demo::STEPS.get(i) {
            Some(s) => s.to_string(),
            None => format!(
                "Refine part {} of the plan: tighten one component and record what changed",
                i - 4
            ),
        })
        .collect()
}

/// Routes `roster` by three pools metered by requests (so their used shares move with
/// every call and the coldest pool changes), its workers spread over them: the routed
/// variants of the turn benchmark and of `examples/turns.rs`.
pub fn three_pools(roster: &mut Roster) -> Floor {
    let pools = ["a", "b", "c"];
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.pool = Some(PoolId::new(pools[i % pools.len()]));
    }
    Floor {
        pools: pools
            .iter()
            .enumerate()
            .map(|(i, id)| Pool {
                id: PoolId::new(*id),
                allowance: Allowance {
                    requests: Some(1_000_000 + i as u64 * 1_000),
                    ..Allowance::default()
                },
                window: Window::default(),
            })
            .collect(),
        seats: Vec::new(),
    }
}

/// Tokens of a run's turns, read one turn at a time: what was sent, what replaying
/// transcripts would send instead, and what the claim schemas would add.
#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    transcript: u64,
    schemas: u64,
    /// Tokens every earlier turn's workers returned: what a replayed call re-sends.
    received_so_far: u64,
}

impl Tally {
    fn add(&mut self, t: &TurnRecord, counter: &dyn TokenEstimator) {
        let package = t.package.tokens as u64;
        for c in &t.calls {
            let sent = c.tokens_sent as u64;
            self.sent += sent;
            self.transcript += sent.saturating_sub(package) + self.received_so_far;
            let schema = match c.call {
                CallKind::Execute | CallKind::ExecuteRepair => claims::worker_result_schema(),
                CallKind::Handoff | CallKind::HandoffRepair => claims::handoff_report_schema(),
                CallKind::Combined | CallKind::CombinedRepair => claims::turn_answer_schema(),
            };
            self.schemas += counter.count(&schema.to_string()) as u64;
        }
        self.received_so_far += t
            .calls
            .iter()
            .map(|c| c.tokens_received as u64)
            .sum::<u64>();
    }
}

/// The package budget `baton bench` measures at unless told otherwise: the budget the
/// reference engine's recorded figure was compared at, above a run's default
/// (`config::DEFAULT_BUDGET`).
pub const BENCH_BUDGET: usize = 3000;

/// Runs an `n`-turn mock run in `dir` with `budget`-token packages and measures it.
pub fn run_one(
    dir: &std::path::Path,
    n: u32,
    estimator: EstimatorKind,
    budget: usize,
) -> Result<BenchRow> {
    let path = dir.join(format!("bench-{n}.db"));
    let _ = std::fs::remove_file(&path);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path)?);
    let engine = Engine::new(store.clone());
    let spec = RunSpec {
        objective: demo::OBJECTIVE.into(),
        tasks: tasks(n),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        settings: RunSettings {
            budget,
            total_budget: None,
            estimator,
            ..RunSettings::default()
        },
    };
    let id = engine.create_run(&spec)?;
    let mut session = engine.open(&id, None)?;
    let mut times = Vec::new();
    let end = engine.run(&mut session, None, &mut |s, _| times.push(s.engine_time))?;
    if end != RunEnd::Finished {
        return Err(Error::Config(format!("bench run ended as {end:?}")));
    }
    // Turn by turn rather than `store.turns`: holding every turn's package and prompts
    // at once would make the measurement, not the run, set the peak memory.
    let counter = estimator.build();
    let mut tally = Tally::default();
    // One committed turn per `times` entry, numbered consecutively from 0 or 1.
    for turn in 0..=times.len() as u32 {
        if let Some(t) = store.turn(&id, turn)? {
            tally.add(&t, &*counter);
        }
    }
    // Close every connection so SQLite checkpoints its write-ahead log into the file:
    // the size measured is the database's, not a transient log's.
    drop(session);
    drop(engine);
    drop(store);
    let db_bytes = ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum();
    let t0 = Instant::now();
    let reopened = Engine::new(Arc::new(SqliteStore::open(&path)?));
    let session = reopened.open(&id, None)?;
    reopened.preview(&session, None, None)?;
    let resume_to_package = t0.elapsed();
    let count = times.len().max(1) as u32;
    Ok(BenchRow {
        turns: n,
        budget,
        tokens_sent: tally.sent,
        transcript_tokens: tally.transcript,
        schema_tokens: tally.schemas,
        engine_time_per_turn: times.iter().sum::<Duration>() / count,
        engine_time_max: times.iter().max().copied().unwrap_or_default(),
        resume_to_package,
        db_bytes,
    })
}
