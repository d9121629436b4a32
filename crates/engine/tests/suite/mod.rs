mod adversarial;
mod calls;
mod cancel;
mod demo;
mod events;
mod export;
mod failures;
mod hardening;
mod headroom;
mod invariants;
mod jobs;
mod judge;
mod line;
mod ops;
mod policy;
mod pools;
mod providers;
mod replay;
mod seats;
mod step_flags;
// The gateway suite's wire-format server, shared rather than copied.
#[allow(dead_code)]
#[path = "../../../gateway/tests/suite/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::ids::{RunId, Timestamp};
use baton_engine::config::{Roster, RunSettings, WorkerConfig};
use baton_engine::orchestrator::SteppingClock;
use baton_engine::{Engine, RunEnd, RunSpec};
use baton_store::{SqliteStore, Store};
use serde_json::{Value, json};

pub fn store_in(dir: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.join("baton.db")).unwrap())
}

pub fn engine(store: &Arc<dyn Store>) -> Engine {
    Engine::new(store.clone())
        .with_clock(Arc::new(SteppingClock::new(Timestamp(1_796_000_000_000))))
}

pub fn run_all(engine: &Engine, spec: &RunSpec) -> (RunId, RunEnd) {
    let id = engine.create_run(spec).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let end = engine.run(&mut session, None, &mut |_, _| {}).unwrap();
    (id, end)
}

/// `n` workers that replay `script`.
pub fn scripted_roster(n: usize, script: &Path) -> Roster {
    Roster {
        workers: (1..=n)
            .map(|i| {
                let mut w = WorkerConfig::mock(&format!("w{i}"), &format!("m{i}"));
                w.model = format!("scripted/m{i}");
                w.family = "scripted".into();
                w.max_retries = 0;
                w.options
                    .insert("script".into(), Value::String(script.display().to_string()));
                w
            })
            .collect(),
    }
}

pub fn spec(tasks: &[&str], roster: Roster) -> RunSpec {
    RunSpec {
        objective: "Build a small service".into(),
        tasks: tasks.iter().map(|t| t.to_string()).collect(),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster,
        // No repair calls unless a test asks for them: most tests script each call.
        settings: RunSettings {
            estimator: baton_core::tokens::EstimatorKind::Heuristic,
            repair_attempts: 0,
            ..RunSettings::default()
        },
    }
}

/// A script line that returns `output` (a JSON value, or raw text).
pub fn line(turn: u32, call: &str, output: impl Into<Output>) -> String {
    let out = match output.into() {
        Output::Json(v) => v.to_string(),
        Output::Raw(s) => s,
    };
    json!({"turn": turn, "call": call, "output": out}).to_string()
}

pub fn error_line(turn: u32, call: &str, class: &str) -> String {
    json!({"turn": turn, "call": call, "error": {"class": class, "message": "scripted failure"}})
        .to_string()
}

pub enum Output {
    Json(Value),
    Raw(String),
}

impl From<Value> for Output {
    fn from(v: Value) -> Self {
        Output::Json(v)
    }
}

impl From<&str> for Output {
    fn from(s: &str) -> Self {
        Output::Raw(s.to_string())
    }
}

pub fn write_script(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join("script.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// A minimal valid result and report.
pub fn ok_result(last: &str) -> Value {
    json!({"summary": "did the step", "last_action": last, "next_action": "continue"})
}

pub fn ok_report(last: &str) -> Value {
    json!({"notes": "see the record", "last_action": last, "next_action": "continue"})
}
