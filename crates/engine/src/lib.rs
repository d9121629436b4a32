//! The orchestrator: runs turns, switches workers, commits every turn durably.
//!
//! `state = store.load(run)`, `pkg = compile(...)`, two model calls, `reconcile(...)`,
//! `store.commit_turn(...)` — one transaction per turn, before the next one begins.

pub mod audit;
pub mod bench;
pub mod cancel_watch;
pub mod clock;
pub mod config;
pub mod demo;
pub mod export;
pub mod hook;
pub mod jobs;
pub mod lease;
pub mod ops;
pub mod orchestrator;
pub mod policy;
pub mod publish;
pub mod report;
pub mod seating;
pub mod verify;

pub use clock::{Clock, SystemClock};
pub use config::{Roster, RunSettings, WorkerConfig};
pub use hook::{HookOutcome, TurnFacts, WorkspaceHook};
pub use orchestrator::{Engine, LineStep, RunEnd, RunSpec, Session, StepOutcome, TurnSummary};
pub use policy::{PolicyInput, RotatingPolicy, SwitchPolicy, TurnPlan};

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
    /// A human's answer for a unit that asked no question (it is running, finished, or
    /// stopped on something an answer cannot fix): nothing was recorded. The message
    /// says what the unit is waiting for instead.
    #[error("{0}")]
    NotAsked(String),
    /// A unit's command (an answer, a step of the line) for a run that is not a unit
    /// of the assembly line: the request names the wrong run. The message says what
    /// continues that run instead.
    #[error("{0}")]
    NotAUnit(String),
    #[error("run {run} is {status}; {hint}")]
    NotRunnable {
        run: String,
        status: &'static str,
        hint: &'static str,
    },
    #[error("no worker \"{id}\" in the roster (workers: {known})")]
    NoSuchWorker { id: String, known: String },
    // Not `source`, for the same reason as `Gateway`.
    #[error("workspace: {0}")]
    Workspace(baton_workspace::Error),
    /// A job's worktree or branch was changed outside baton; baton will not reset over
    /// someone's work. The message says how to put it right.
    #[error("{0}")]
    Drift(String),
    /// The judge answered, but not with a verdict baton could read, even after a
    /// repair call.
    #[error("the judge's answer could not be used: {detail}")]
    JudgeAnswer { detail: String },
    /// Another process committed this turn first (fenced off); its turn stands.
    #[error(
        "another baton process committed turn {turn} of run {run} while this one was working on it; \
         its turn stands and this one was discarded (its model calls are recorded nowhere). \
         Run one `baton resume {run}` at a time."
    )]
    TurnTaken { run: String, turn: u32 },
    /// The judge was asked for a group with fewer than two finished candidates: there
    /// is nothing to compare yet (not a conflict with another process).
    #[error(
        "group {group} has {finished} finished candidate(s); the judge compares two or more: \
         `baton jobs` shows the group's jobs, `baton work` finishes queued ones, and \
         `baton requeue JOB` retries a failed one"
    )]
    TooFewCandidates { group: String, finished: usize },
    /// The judge was stopped (an interrupt, `baton cancel GROUP`) before it had a
    /// verdict: nothing of it was recorded.
    #[error(
        "the judge of group {group} was stopped before it had a verdict; nothing was recorded: `baton judge {group}` judges it again"
    )]
    JudgeCancelled { group: String },
    /// Another process holds the run's lease: it advances the run now.
    #[error(
        "run {run} is being advanced by {owner} (its lease runs until {until}); wait for it to finish — \
         if that process died on another machine or in another container, `baton resume {run}` works once the lease expires"
    )]
    RunBusy {
        run: String,
        owner: String,
        until: String,
    },
    /// This process lost the run's lease between turns (taken over, or it could not be
    /// renewed). Not a job's lease: that is `Store(LeaseLost)`.
    #[error(
        "run {run} lost its lease ({reason}); no further turn was started. `baton resume {run}` continues it"
    )]
    RunLeaseLost { run: String, reason: String },
    /// A bug in baton (a panic inside a job, a record of its own it cannot encode).
    #[error("baton failed inside {place} (a bug; please report it): {detail}")]
    Internal { place: &'static str, detail: String },
    /// The turn in flight was stopped (an interrupt, `baton cancel`, a lost lease) and
    /// not committed;
    /// the run continues from its last committed turn.
    #[error(
        "turn {turn} was stopped before it committed; the run continues from its last committed turn"
    )]
    Cancelled { turn: u32 },
    /// Stopped between turns (an interrupt, `baton cancel`): nothing was in flight,
    /// nothing is lost.
    #[error("stopped before turn {next_turn} began")]
    Stopped { next_turn: u32 },
    /// A run that belongs to a job was asked to take turns outside `baton work`.
    #[error("run {run} is the run of job {job} ({}): its turns run in the job's worktree, not here; {}", status.as_str(), job_next(job, *status, owner.as_deref()))]
    RunOfJob {
        run: String,
        job: String,
        status: baton_store::JobStatus,
        owner: Option<String>,
    },
    /// A candidate of an enqueue names neither a roster worker nor a preset.
    #[error(
        "no worker \"{id}\" in the roster ({known}) and it is not a preset ({presets}); add it to baton.toml"
    )]
    UnknownCandidate {
        id: String,
        known: String,
        presets: String,
    },
    #[error(
        "gate \"{gate}\" has no command; write \"name=command\" or \"command\" (--gate \"cargo test\")"
    )]
    GateWithoutCommand { gate: String },
    /// The judge named is a command worker, which needs a worktree.
    #[error(
        "worker \"{worker}\" is a command worker ({model}); it works in a job's worktree and cannot judge. Pass --judge with an API model from the roster{}",
        if api_models.is_empty() { " (the roster has none: add one to baton.toml)".to_string() } else { format!(" ({})", api_models.join(", ")) }
    )]
    CannotJudge {
        worker: String,
        model: String,
        api_models: Vec<String>,
    },
    #[error(
        "no judge: the roster ({roster}) has no API model, and command workers cannot judge; add one to baton.toml (model = \"<provider>/<model>\", see `baton workers`) and pass --judge ID"
    )]
    NoJudge { roster: String },
    #[error(
        "no process {owner} runs here (this machine, or this container): there is nothing to stop (`baton jobs` shows who holds each running job)"
    )]
    NoSuchProcess { owner: String },
    #[error("no group \"{group}\" in this database; `baton jobs` lists the groups")]
    NoSuchGroup { group: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How a job's run continues, for [`Error::RunOfJob`].
fn job_next(job: &str, status: baton_store::JobStatus, owner: Option<&str>) -> String {
    use baton_store::JobStatus;
    match status {
        JobStatus::Queued => "`baton work` runs it".to_string(),
        JobStatus::Running => format!(
            "`baton work` is running it{}",
            owner.map(|o| format!(" ({o})")).unwrap_or_default()
        ),
        JobStatus::Failed | JobStatus::Cancelled => format!(
            "continue it with `baton requeue {job}` (add --roster <file> to replace its roster), then `baton work`"
        ),
        _ => format!("it is finished: `baton outbox {job}`"),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The gateway's failure class, when a worker's gateway failed.
    pub fn class(&self) -> Option<baton_core::ErrorClass> {
        match self {
            Error::Gateway { error, .. } => Some(error.class()),
            _ => None,
        }
    }
}

/// A record of baton's own that would not encode: a bug, not a fault in the user's
/// configuration.
pub(crate) fn unencodable(place: &'static str) -> impl FnOnce(serde_json::Error) -> Error {
    move |e| Error::Internal {
        place,
        detail: e.to_string(),
    }
}

impl From<baton_workspace::Error> for Error {
    fn from(e: baton_workspace::Error) -> Self {
        Error::Workspace(e)
    }
}
