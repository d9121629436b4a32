//! The one event protocol: the CLI, the store's append-only event table and (later) the
//! server's live stream and dashboard all use `Event`.

use serde::{Deserialize, Serialize};

use crate::ids::{RunId, Timestamp, WorkerId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub run_id: RunId,
    /// The turn the event belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    RunCreated {
        objective: String,
        steps: usize,
    },
    TurnStarted {
        worker: WorkerId,
        model: String,
        assignment: String,
    },
    PackageCompiled {
        tokens: usize,
        budget: usize,
        sections_included: usize,
        sections_omitted: Vec<String>,
        items_dropped: usize,
    },
    ModelCalled {
        call: String,
        worker: WorkerId,
        ok: bool,
        tokens_sent: usize,
        tokens_received: usize,
    },
    ClaimRefused {
        worker: WorkerId,
        claim: String,
        reason: String,
    },
    Warning {
        worker: WorkerId,
        text: String,
    },
    TurnCommitted {
        worker: WorkerId,
        status: String,
        changes: usize,
    },
    StepDone {
        step: String,
        worker: WorkerId,
    },
    RunFinished {
        turns: u32,
    },
    RunBlocked {
        question: String,
    },
    /// A human replaced the run's roster (e.g. `baton resume --roster`): what changed,
    /// and from which file. Stamped by the engine like every event.
    RosterChanged {
        source: String,
        changes: Vec<String>,
    },
    /// A worker's gateway stopped asking for claims in its configured structured mode
    /// (forced tool use whose answer never ended) and asks in `mode` from now on:
    /// remembered with the run, so a resumed process starts in `mode` too.
    WorkerFellBack {
        worker: WorkerId,
        mode: String,
        reason: String,
    },
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunCreated { .. } => "run_created",
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::PackageCompiled { .. } => "package_compiled",
            EventKind::ModelCalled { .. } => "model_called",
            EventKind::ClaimRefused { .. } => "claim_refused",
            EventKind::Warning { .. } => "warning",
            EventKind::TurnCommitted { .. } => "turn_committed",
            EventKind::StepDone { .. } => "step_done",
            EventKind::RunFinished { .. } => "run_finished",
            EventKind::RunBlocked { .. } => "run_blocked",
            EventKind::RosterChanged { .. } => "roster_changed",
            EventKind::WorkerFellBack { .. } => "worker_fell_back",
        }
    }
}
