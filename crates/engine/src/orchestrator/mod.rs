//! run / step / resume. One turn: load → compile → execute → handoff → reconcile →
//! commit, with the commit as a single transaction before the next turn begins.
//!
//! The rooms: `open` (creating and opening runs, gateways, leases), `step` (the
//! step pipeline around one turn), `block` (stopping a run to ask a human), `turn`
//! (the turn itself and its commit), `calls` (model calls with retry and repair).

use std::sync::Arc;
use std::time::Duration;

use baton_core::claims::Refusal;
use baton_core::compiler::Assignment;
use baton_core::ids::{RunId, WorkerId};
use baton_core::reconciler::{NoVerifier, Verifier};
use baton_core::state::ExecutionState;
use baton_core::tokens::TokenEstimator;
use baton_core::turn::TurnStatus;
use baton_gateway::Gateway;
use baton_store::{RunStatus, Store};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SystemClock};
use crate::config::{Roster, RunSettings};
use crate::hook::WorkspaceHook;
use crate::policy::{RotatingPolicy, SwitchPolicy};
use crate::publish::Publisher;

mod block;
pub(crate) mod calls;
mod doomed;
mod events;
mod fallback;
mod holds;
mod line;
mod open;
mod reserve;
pub(crate) mod reshape;
mod roster;
mod seat;
pub(crate) mod station;
mod step;
mod stepping_clock;
mod turn;
mod unbilled;
mod window;

pub use calls::model_called;
pub use line::LineStep;
pub(crate) use open::planned_state;
pub use open::{build_gateway, new_run_id};
pub use roster::{Place, check_roster, with_keys};
pub use stepping_clock::SteppingClock;

/// Failed turns in a row after which the run stops and asks a human.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// What a new run is made of.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub objective: String,
    pub tasks: Vec<String>,
    /// Per-step budgets (same length as `tasks`, or empty).
    pub step_budgets: Vec<Option<usize>>,
    /// Per-step seats (same length as `tasks`, or shorter; `None`: the default seat of a
    /// plan step, see `crate::seating`). Used only by a run with pools or seats.
    pub step_seats: Vec<Option<baton_core::router::SeatId>>,
    /// Per-step tags (as long as `tasks`, or shorter; missing: none), read by a routed
    /// run's seat policy (`deny_tags`).
    pub step_tags: Vec<Vec<baton_core::state::StepTag>>,
    /// Per-step scopes (as long as `tasks`, or shorter; `None`: as the title reads).
    pub step_scopes: Vec<Option<baton_core::state::StepScope>>,
    pub roster: Roster,
    pub settings: RunSettings,
}

/// The configuration a run was created with, stored with the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub roster: Roster,
    pub settings: RunSettings,
    /// A unit of the assembly line: the route it runs (`Engine::create_unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<baton_core::line::Route>,
    /// A unit that works in a git repository (`baton line --repo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_repo: Option<crate::jobs::unit::UnitRepo>,
}

/// An open run: its canonical state as last committed, and its workers' gateways.
pub struct Session {
    pub run: RunId,
    pub state: ExecutionState,
    pub status: RunStatus,
    pub config: RunConfig,
    /// For a job's run: the lease every turn commit must still hold.
    pub lease: Option<baton_store::LeaseFence>,
    /// For a job's run: the worktree the workers work in, committed after every turn.
    pub workspace: Option<Arc<dyn WorkspaceHook>>,
    /// The run's own lease, when this process took it (see `Engine::lease`).
    pub run_lease: Option<crate::lease::RunLease>,
    /// Stops the turn in flight: its agent, its gates, a wait before a retry. A
    /// cancelled turn is not committed.
    pub cancel: baton_gateway::Cancel,
    /// Where agents' output lines go as they come (`baton -v work`).
    pub agent_output: Option<baton_gateway::OutputSink>,
    /// Why the run stopped, when this session blocked it.
    blocked: Option<String>,
    gateways: Vec<Option<Arc<dyn Gateway>>>,
    /// Every worker's key, scrubbed from whatever any model returns.
    redactor: baton_gateway::Redactor,
    estimator: Arc<dyn TokenEstimator>,
    system_tokens: usize,
    prior_outputs: Vec<String>,
    /// The run's provider holds as committed (read at open, kept current by each turn,
    /// so a step asks the store nothing more).
    holds: Vec<baton_store::WorkerHold>,
    /// Each worker's context window as its server told it, once asked.
    windows: Vec<std::sync::OnceLock<Option<(u64, String)>>>,
    /// How the turn under way differs from its worker's last failed one.
    reshape: reshape::Reshape,
    /// Per worker: the cut-off answers it gave in this process, whose short-answer
    /// request and raised limit its later turns keep (a model that ran past the limit
    /// once runs past it again on the next step's first answer).
    remembered_cuts: Vec<reshape::Reshape>,
    /// Per worker: its gateway is in its fallback mode, as the run records.
    fallen_back: Vec<bool>,
    /// What to say once about a worker that starts in its fallback mode.
    fallback_notices: Vec<(usize, String)>,
    /// Per worker: its briefings were said to be shrunk to fit its context window.
    window_noticed: Vec<bool>,
    /// How the turn under way differs from what its worker was configured to do (a
    /// short answer asked for, a fallback mode, a smaller budget): recorded as the
    /// turn's warnings.
    notices: Vec<String>,
    /// A routed run's pins and history of who wrote what (empty for any other run).
    seats: seat::Seats,
    /// The events of the turn under way, published live as they happen and committed
    /// with the turn (a Mutex: the calls see the session shared).
    turn_events: std::sync::Mutex<Vec<baton_protocol::EventMsg>>,
}

impl Session {
    pub fn estimator(&self) -> &dyn TokenEstimator {
        &*self.estimator
    }

    /// Scrubs every key of the run's roster (for output that leaves the gateway).
    pub(crate) fn redactor(&self) -> &baton_gateway::Redactor {
        &self.redactor
    }
}

/// What one turn did, for progress lines and summaries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnSummary {
    pub turn: u32,
    pub worker: WorkerId,
    pub model: String,
    pub assignment: Assignment,
    pub status: TurnStatus,
    pub package_tokens: usize,
    pub budget: usize,
    pub sections_omitted: Vec<String>,
    pub items_dropped: usize,
    pub tokens_sent: usize,
    pub tokens_received: usize,
    pub warnings: Vec<String>,
    pub refusals: Vec<Refusal>,
    pub error: Option<String>,
    /// The turn committed but left its step open: no evidence of work (its warnings
    /// say why). It counts towards the failure breaker like a failed turn.
    pub step_left_open: bool,
    pub changes: usize,
    pub conversations_passed: u32,
    /// Time spent in the engine, model calls excluded.
    pub engine_time: Duration,
}

/// How `Engine::run` stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    Finished,
    Blocked {
        question: String,
    },
    /// `max_turns` ran; the run has more to do.
    Paused,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    Turn(Box<TurnSummary>),
    Finished,
    Blocked { question: String },
}

pub struct Engine {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    verifier: Arc<dyn Verifier>,
    policy: Arc<dyn SwitchPolicy>,
    /// Where every event is published as it happens (see `crate::publish`).
    publisher: Publisher,
}

impl Engine {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Engine {
            store,
            clock: Arc::new(SystemClock),
            verifier: Arc::new(NoVerifier),
            policy: Arc::new(RotatingPolicy),
            publisher: Publisher::default(),
        }
    }

    /// Publishes through `publisher` (shared with whoever else holds it, e.g. every
    /// job of a `baton work`).
    pub fn with_publisher(mut self, publisher: Publisher) -> Self {
        self.publisher = publisher;
        self
    }

    /// Adds a subscriber to this engine's live event stream.
    pub fn subscribe(&self, subscriber: Arc<dyn crate::publish::Subscriber>) {
        self.publisher.subscribe(subscriber);
    }

    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn with_verifier(mut self, verifier: Arc<dyn Verifier>) -> Self {
        self.verifier = verifier;
        self
    }

    pub fn with_policy(mut self, policy: Arc<dyn SwitchPolicy>) -> Self {
        self.policy = policy;
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    pub(crate) fn now(&self) -> baton_core::ids::Timestamp {
        self.clock.now()
    }
}
