//! The orchestrator: runs turns, switches workers, commits every turn durably.
//!
//! `state = store.load(run)`, `pkg = compile(...)`, two model calls, `reconcile(...)`,
//! `store.commit_turn(...)` — one transaction per turn, before the next one begins.

pub mod audit;
pub mod bench;
pub mod clock;
pub mod config;
pub mod demo;
pub mod export;
pub mod hook;
pub mod jobs;
pub mod lease;
pub mod orchestrator;
pub mod policy;
pub mod publish;
pub mod report;
pub mod verify;

pub use clock::{Clock, SystemClock};
pub use config::{Roster, RunSettings, WorkerConfig};
pub use hook::{HookOutcome, TurnFacts, WorkspaceHook};
pub use orchestrator::{Engine, RunEnd, RunSpec, Session, StepOutcome, TurnSummary};
pub use policy::{RotatingPolicy, SwitchPolicy, TurnPlan};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    #[error(transparent)]
    Core(#[from] baton_core::Error),
    // Not `source`: anyhow would print the gateway's message twice.
    #[error("worker {worker}: {error}")]
    Gateway {
        worker: String,
        error: baton_gateway::Error,
    },
    #[error("{path}: {detail}")]
    ConfigFile { path: String, detail: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("run {run} is {status}; {hint}")]
    NotRunnable {
        run: String,
        status: &'static str,
        hint: &'static str,
    },
    #[error("no worker \"{id}\" in the roster (workers: {known})")]
    NoSuchWorker { id: String, known: String },
    #[error("workspace: {0}")]
    Workspace(String),
    /// The judge answered, but not with a verdict baton could read, even after a
    /// repair call.
    #[error("the judge's answer could not be used: {detail}")]
    JudgeAnswer { detail: String },
    #[error("{0}")]
    Conflict(String),
    /// The turn in flight was stopped (an interrupt, a lost lease) and not committed;
    /// the run continues from its last committed turn.
    #[error(
        "turn {turn} was stopped before it committed; the run continues from its last committed turn"
    )]
    Cancelled { turn: u32 },
    /// Stopped between turns (an interrupt): nothing was in flight, nothing is lost.
    #[error("stopped before turn {next_turn} began")]
    Stopped { next_turn: u32 },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
