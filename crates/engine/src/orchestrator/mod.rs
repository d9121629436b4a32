//! run / step / resume. One turn: load → compile → execute → handoff → reconcile →
//! commit, with the commit as a single transaction before the next turn begins.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton_core::claims::Refusal;
use baton_core::compiler::{self, Assignment, HandoffPackage};
use baton_core::events::{Event, EventKind};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::prompt;
use baton_core::reconciler::{NoVerifier, Verifier};
use baton_core::state::{AttemptOutcome, ExecutionState, StepStatus};
use baton_core::tokens::TokenEstimator;
use baton_core::turn::{CallRecord, TurnStatus};
use baton_gateway::Gateway;
use baton_store::{RunInfo, RunStatus, Store};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SystemClock};
use crate::config::{Roster, RunSettings, WorkerConfig};
use crate::hook::WorkspaceHook;
use crate::policy::{RotatingPolicy, SwitchPolicy, TurnPlan};
use crate::{Error, Result};

mod calls;
mod doomed;
mod fallback;
mod holds;
mod reshape;
mod roster;
mod turn;
mod window;

pub use roster::{Place, check_roster, with_keys};
use turn::TurnEnd;

/// The gateway failure class of a provider nothing answered for (see
/// `baton_gateway::Error::class`).
const UNREACHABLE: &str = "unreachable";

/// Failed turns in a row after which the run stops and asks a human.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// What a new run is made of.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub objective: String,
    pub tasks: Vec<String>,
    /// Per-step budgets (same length as `tasks`, or empty).
    pub step_budgets: Vec<Option<usize>>,
    pub roster: Roster,
    pub settings: RunSettings,
}

/// The configuration a run was created with, stored with the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub roster: Roster,
    pub settings: RunSettings,
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

/// Sees every model call as it is recorded (for `--verbose` output).
pub type CallObserver = Arc<dyn Fn(&CallRecord) + Send + Sync>;

/// A model call while it is under way, for a live "waiting" line.
#[derive(Debug, Clone)]
pub enum CallWait {
    /// An attempt went out (`attempt` of at most `attempts`).
    Sent {
        worker: String,
        model: String,
        call: baton_core::turn::CallKind,
        turn: u32,
        attempt: u32,
        attempts: u32,
        /// The gateway's limit on one attempt, when it has one.
        timeout: Option<std::time::Duration>,
    },
    /// Waiting before the next attempt, as the provider asked or by backoff.
    Backoff {
        worker: String,
        after_attempt: u32,
        delay: std::time::Duration,
    },
    /// The call ended (answered or failed).
    Done,
}

/// Receives [`CallWait`]s as a call goes.
pub type CallWatcher = Arc<dyn Fn(CallWait) + Send + Sync>;

pub struct Engine {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    verifier: Arc<dyn Verifier>,
    policy: Arc<dyn SwitchPolicy>,
    observer: Option<CallObserver>,
    watcher: Option<CallWatcher>,
}

impl Engine {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Engine {
            store,
            clock: Arc::new(SystemClock),
            verifier: Arc::new(NoVerifier),
            policy: Arc::new(RotatingPolicy),
            observer: None,
            watcher: None,
        }
    }

    /// Tells `watcher` when each attempt of a call goes out and when the call ends.
    pub fn with_watcher(mut self, watcher: CallWatcher) -> Self {
        self.watcher = Some(watcher);
        self
    }

    pub fn with_observer(mut self, observer: CallObserver) -> Self {
        self.observer = Some(observer);
        self
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

    /// A new run id: a UUIDv7 in 32 hex digits (see `jobs::new_id`).
    fn new_run_id(&self) -> RunId {
        RunId(crate::jobs::new_id(""))
    }

    /// Creates a run (no turns yet) and returns its id.
    pub fn create_run(&self, spec: &RunSpec) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec, Place::Run)?;
        self.store.create_run(&info, &state, &events)?;
        Ok(info.id)
    }

    /// Creates a job's run and links it to the job in one transaction (fenced).
    pub fn create_job_run(&self, spec: &RunSpec, fence: &baton_store::LeaseFence) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec, Place::Job)?;
        self.store.create_job_run(fence, &info, &state, &events)?;
        Ok(info.id)
    }

    /// Everything a new run is made of, validated: nothing is created on a bad spec.
    fn new_run(
        &self,
        spec: &RunSpec,
        place: Place,
    ) -> Result<(RunInfo, ExecutionState, Vec<Event>)> {
        if spec.objective.trim().is_empty() {
            return Err(Error::Config(
                "the objective is empty; pass --objective \"…\"".into(),
            ));
        }
        if let Some(i) = spec.tasks.iter().position(|t| t.trim().is_empty()) {
            return Err(Error::Config(format!(
                "task {} is blank; every --task needs text (the plan has {} tasks)",
                i + 1,
                spec.tasks.len()
            )));
        }
        if spec.tasks.is_empty() {
            return Err(Error::Config(
                "the plan has no steps; pass at least one --task \"…\"".into(),
            ));
        }
        spec.roster.validate()?;
        spec.settings.validate()?;
        // Every worker's options, before anything exists that a bad one would strand
        // (credentials are checked when the run is opened: they may come later).
        check_roster(&spec.roster, None, false, place)?;
        let id = self.new_run_id();
        let tasks: Vec<String> = spec
            .tasks
            .iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        if let Some(b) = spec
            .step_budgets
            .iter()
            .flatten()
            .find(|b| **b < crate::config::MIN_BUDGET)
        {
            return Err(Error::Config(format!(
                "step budget {b} is too small to brief anyone; use at least {} tokens",
                crate::config::MIN_BUDGET
            )));
        }
        let mut state = ExecutionState::new(id.clone(), spec.objective.trim(), &tasks);
        for (step, budget) in state.plan.iter_mut().zip(&spec.step_budgets) {
            step.budget = *budget;
        }
        let estimator = spec.settings.estimator_kind()?.build();
        crate::policy::check_budgets(&state, &spec.settings, &spec.roster, &*estimator)?;
        let now = self.clock.now();
        let config = RunConfig {
            roster: spec.roster.clone(),
            settings: spec.settings.clone(),
        };
        let info = RunInfo {
            id: id.clone(),
            objective: state.objective.clone(),
            status: RunStatus::Active,
            turns: 0,
            created_at: now,
            updated_at: now,
            config: serde_json::to_value(&config).map_err(|e| Error::Config(e.to_string()))?,
        };
        let event = Event {
            run_id: id.clone(),
            turn: None,
            at: now,
            kind: EventKind::RunCreated {
                objective: state.objective.clone(),
                steps: state.plan.len(),
            },
        };
        Ok((info, state, vec![event]))
    }

    /// Opens a run from its last committed turn. `roster` replaces the stored roster
    /// (e.g. a roster file edited since); otherwise the run's own roster is used.
    pub fn open(&self, run: &RunId, roster: Option<Roster>) -> Result<Session> {
        self.open_with_keys(run, roster, None)
    }

    /// `open`, taking in-memory keys (literal keys from a roster file, which are never
    /// stored) from `keys` for workers with the same id that have none.
    pub fn open_with_keys(
        &self,
        run: &RunId,
        roster: Option<Roster>,
        keys: Option<&Roster>,
    ) -> Result<Session> {
        self.open_inner(run, roster, keys, true)
    }

    /// Opens a run to read and compile, without building its workers' gateways (so no
    /// credentials are needed): `preview` works, `step` does not.
    pub fn open_for_preview(&self, run: &RunId) -> Result<Session> {
        self.open_inner(run, None, None, false)
    }

    fn open_inner(
        &self,
        run: &RunId,
        roster: Option<Roster>,
        keys: Option<&Roster>,
        with_gateways: bool,
    ) -> Result<Session> {
        let info = self.store.run_info(run)?;
        let mut config: RunConfig = serde_json::from_value(info.config.clone()).map_err(|e| {
            baton_store::Error::Corrupt {
                what: format!("configuration of run {run}"),
                detail: e.to_string(),
            }
        })?;
        if let Some(r) = roster {
            r.validate()?;
            config.roster = r;
        }
        if let Some(keys) = keys {
            config.roster = with_keys(config.roster, keys);
        }
        let state = self.store.load_state(run)?;
        let estimator = config.settings.estimator_kind()?.build();
        let system_tokens = estimator.count(prompt::SYSTEM_PROMPT);
        let mut gateways = Vec::with_capacity(config.roster.workers.len());
        let mut redactor = baton_gateway::Redactor::default();
        for w in &config.roster.workers {
            gateways.push(if w.enabled && with_gateways {
                let (gateway, key) = build_gateway_with_key(w)?;
                if let Some(key) = &key {
                    redactor.add(key);
                }
                Some(gateway)
            } else {
                None
            });
        }
        let (fallen_back, fallback_notices) =
            self.restore_fallbacks(run, &config.roster, &gateways)?;
        Ok(Session {
            fallen_back,
            fallback_notices,
            lease: None,
            workspace: None,
            run_lease: None,
            cancel: baton_gateway::Cancel::new(),
            agent_output: None,
            // Why a blocked run stopped, as it said then (a provider's hold, a doomed
            // request), not a generic guess.
            blocked: if info.status == RunStatus::Blocked {
                self.store
                    .events(run, 0)?
                    .into_iter()
                    .rev()
                    .find_map(|e| match e.event.kind {
                        EventKind::RunBlocked { question } => Some(question),
                        _ => None,
                    })
            } else {
                None
            },
            run: run.clone(),
            prior_outputs: self.store.prior_outputs(run, state.turns)?,
            holds: self.store.worker_holds(run)?,
            windows: config
                .roster
                .workers
                .iter()
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            reshape: reshape::Reshape::default(),
            remembered_cuts: vec![reshape::Reshape::default(); config.roster.workers.len()],
            window_noticed: vec![false; config.roster.workers.len()],
            notices: Vec::new(),
            state,
            status: info.status,
            config,
            gateways,
            redactor,
            estimator,
            system_tokens,
        })
    }

    /// Compiles the package `worker` would get for the next turn, without running it.
    pub fn preview(
        &self,
        session: &Session,
        worker: Option<&str>,
        budget: Option<usize>,
    ) -> Result<HandoffPackage> {
        let plan = self.policy.next_turn(
            &session.state,
            &session.config.roster,
            &session.config.settings,
        );
        let (index, assignment, planned_budget) = match plan {
            Some(p) => (p.worker, p.assignment, p.budget),
            None => (
                0,
                Assignment {
                    kind: baton_core::compiler::AssignmentKind::Continuation,
                    step_id: None,
                    task: "The run is finished: review the record.".into(),
                },
                session.config.settings.budget,
            ),
        };
        let worker = match worker {
            Some(id) => session.config.roster.find(id)?,
            None => &session.config.roster.workers[index],
        };
        Ok(compiler::compile(
            &session.state,
            &assignment,
            &worker.profile(),
            budget.unwrap_or(planned_budget),
            &*session.estimator,
        ))
    }

    /// Runs exactly one turn (or reports that the run is finished or blocked).
    pub fn step(&self, session: &mut Session) -> Result<StepOutcome> {
        match session.status {
            RunStatus::Finished => return Ok(StepOutcome::Finished),
            RunStatus::Blocked => {
                return Ok(StepOutcome::Blocked {
                    question: blocked_question(session),
                });
            }
            RunStatus::Active => {}
        }
        if session.cancel.is_cancelled() {
            return Err(Error::Stopped {
                next_turn: session.state.turns,
            });
        }
        if let Some(loss) = session.run_lease.as_ref().and_then(|l| l.lost()) {
            return Err(Error::Conflict(format!(
                "run {} lost its lease ({loss}); no further turn was started. `baton resume {}` continues it",
                session.run, session.run
            )));
        }
        let Some(plan) = self.policy.next_turn(
            &session.state,
            &session.config.roster,
            &session.config.settings,
        ) else {
            let event = Event {
                run_id: session.run.clone(),
                turn: None,
                at: self.clock.now(),
                kind: EventKind::RunFinished {
                    turns: session.state.turns,
                },
            };
            self.store
                .update_run(&session.run, RunStatus::Finished, &[event])?;
            session.status = RunStatus::Finished;
            return Ok(StepOutcome::Finished);
        };
        // A provider that asked for a delay (in an earlier turn or process) is not
        // called before it has passed; one that asked for too long blocks the run.
        if let Some(question) = self.wait_for_hold(session, plan.worker) {
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        if session.cancel.is_cancelled() {
            return Err(Error::Stopped {
                next_turn: session.state.turns,
            });
        }
        // A bad request this worker made a few (failed) turns ago, about to be sent again
        // unchanged because other workers failed in between: stop instead.
        if let Some(d) = self.last_bad_request(session, &plan)?
            && self.sends_again(session, &plan, &d)?
        {
            let worker = session.config.roster.workers[plan.worker].id.clone();
            let question = d.question(worker.as_str(), &continue_hint(session, true), true);
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        // A context window too small for any briefing is said before anything is sent.
        let fit = self.window_fit(session, plan.worker, false);
        if let Some(fit) = fit
            .as_ref()
            .filter(|f| f.budget < crate::config::MIN_BUDGET)
        {
            let worker = &session.config.roster.workers[plan.worker].id;
            let question = format!(
                "worker {worker}'s model cannot take a turn: {}, less than the {} tokens baton                  needs to brief anyone, so nothing was sent. Lower the worker's max_tokens, or                  give the model a larger context (llama-server -c 8192, Ollama num_ctx) and                  set the worker's context_window to it, then {}.",
                fit.explain(),
                crate::config::MIN_BUDGET,
                continue_hint(session, true)
            );
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        let window_notice = fit
            .filter(|f| f.budget < plan.budget && !session.window_noticed[plan.worker])
            .map(|f| {
                session.window_noticed[plan.worker] = true;
                format!(
                    "worker {}'s briefings are compiled at a budget of {} tokens instead of {}: {}",
                    session.config.roster.workers[plan.worker].id,
                    f.budget,
                    plan.budget,
                    f.explain()
                )
            });
        let fresh = self.reshape(session, plan.worker)?;
        session.reshape = if fresh.is_empty() {
            session.remembered_cuts[plan.worker].clone()
        } else {
            session.remembered_cuts[plan.worker] = fresh.remembered();
            fresh
        };
        let mut notices = session.reshape.notices().to_vec();
        notices.extend(Self::fallback_notices(session, plan.worker));
        notices.extend(window_notice);
        session.notices = notices;
        let TurnEnd {
            mut summary,
            fatal,
            doomed,
        } = self.run_turn(session, &plan)?;
        session.reshape = reshape::Reshape::default();
        let next = self.policy.next_turn(
            &session.state,
            &session.config.roster,
            &session.config.settings,
        );
        let same_worker_next = next.as_ref().is_some_and(|n| n.worker == plan.worker);
        let worker = session.config.roster.workers[plan.worker].id.clone();
        let unreachable = match same_worker_next && summary.status == TurnStatus::Failed {
            true => self.unreachable(session, summary.turn)?,
            false => None,
        };
        if let (Some(f), Some(n), false) = (&fatal, &next, same_worker_next)
            && f.agent
        {
            summary.warnings.push(format!(
                "agent {worker} is not run again on this briefing; worker {} takes the next turn",
                session.config.roster.workers[n.worker].id
            ));
        }
        if let (true, Some(fatal)) = (same_worker_next, &fatal) {
            // A failure no retry can fix (a bad key, an unknown model, a hung agent),
            // about to be met again by the same worker: stop now instead of failing the
            // same way twice more.
            let error = &fatal.error;
            let question = if fatal.agent {
                format!(
                    "agent {worker} failed: {error}. baton did not run it again: the same agent \
                     on the same briefing fails the same way (a hang costs its whole timeout \
                     each time). Look at its output, then fix its command or preset, raise its \
                     options.timeout_s, or add another worker to the roster, and {}.",
                    continue_hint(session, true)
                )
            } else {
                format!(
                    "worker {worker} cannot work: {error}. Fix its key in the environment, or its \
                     model, provider or base URL in the roster file, then {} \
                     (a run keeps the roster it was created with until you replace it).",
                    continue_hint(session, true)
                )
            };
            self.block(session, question)?;
        } else if let Some(error) = unreachable {
            // Nothing answers (a server not started, a wrong api_base): the next turn
            // would fail the same way within milliseconds, using up turn numbers.
            let retries = session.config.roster.workers[plan.worker].max_retries;
            let question = format!(
                "worker {worker} cannot reach its model: {error}. baton stopped rather than                  fail the next turns the same way (each call is tried {} time{}: max_retries =                  {retries}). Start the server, or fix the worker's api_base in the roster                  file, then {}.",
                retries + 1,
                if retries == 0 { "" } else { "s" },
                continue_hint(session, true)
            );
            self.block(session, question)?;
        } else if let (Some(d), Some(next)) = (&doomed, next.as_ref().filter(|_| same_worker_next))
            && self.sends_again(session, next, d)?
        {
            let question = d.question(worker.as_str(), &continue_hint(session, true), true);
            self.block(session, question)?;
        } else if (summary.status == TurnStatus::Failed || summary.step_left_open)
            && session.state.consecutive_failures >= MAX_CONSECUTIVE_FAILURES
            && session
                .state
                .consecutive_failures
                .is_multiple_of(MAX_CONSECUTIVE_FAILURES)
        {
            let question = match &doomed {
                Some(d) if d.is_too_long() => {
                    d.question(worker.as_str(), &continue_hint(session, true), false)
                }
                _ => blocked_question(session),
            };
            self.block(session, question)?;
        }
        Ok(StepOutcome::Turn(Box::new(summary)))
    }

    /// The error of `turn`'s last call, when its provider could not be reached at all
    /// (after the call's retries).
    fn unreachable(&self, session: &Session, turn: u32) -> Result<Option<String>> {
        let Some(record) = self.store.turn(&session.run, turn)? else {
            return Ok(None);
        };
        Ok(record
            .calls
            .last()
            .filter(|c| c.error_class.as_deref() == Some(UNREACHABLE))
            .and_then(|c| c.error.clone()))
    }

    /// Stops the run to ask a human `question`.
    fn block(&self, session: &mut Session, question: String) -> Result<()> {
        let event = Event {
            run_id: session.run.clone(),
            turn: None,
            at: self.clock.now(),
            kind: EventKind::RunBlocked {
                question: question.clone(),
            },
        };
        self.store
            .update_run(&session.run, RunStatus::Blocked, &[event])?;
        session.status = RunStatus::Blocked;
        session.blocked = Some(question);
        Ok(())
    }

    /// Runs turns until the run finishes or blocks, or `max_turns` have run.
    pub fn run(
        &self,
        session: &mut Session,
        max_turns: Option<u32>,
        progress: &mut dyn FnMut(&TurnSummary, &Session),
    ) -> Result<RunEnd> {
        let mut ran = 0;
        loop {
            if max_turns.is_some_and(|m| ran >= m) {
                return Ok(RunEnd::Paused);
            }
            match self.step(session)? {
                StepOutcome::Turn(summary) => {
                    ran += 1;
                    progress(&summary, session);
                    if session.status == RunStatus::Blocked {
                        return Ok(RunEnd::Blocked {
                            question: blocked_question(session),
                        });
                    }
                }
                StepOutcome::Finished => return Ok(RunEnd::Finished),
                StepOutcome::Blocked { question } => return Ok(RunEnd::Blocked { question }),
            }
        }
    }

    /// Takes the run's lease for this process (refused, before any model call, when
    /// another live process advances the run); every turn is then fenced with it.
    pub fn lease(&self, session: &mut Session, lease: Duration) -> Result<()> {
        if session.run_lease.is_none() {
            let token = crate::jobs::new_id("run-lease-");
            session.run_lease = Some(crate::lease::acquire(
                self.store.clone(),
                &session.run,
                token,
                lease,
            )?);
        }
        Ok(())
    }

    /// Whether the plan has nothing left once `plan`'s turn commits.
    fn is_last_turn(&self, session: &Session, plan: &TurnPlan) -> bool {
        let mut after = session.state.clone();
        if let Some(id) = &plan.assignment.step_id
            && let Some(step) = after.plan.iter_mut().find(|s| &s.id == id)
        {
            step.status = StepStatus::Done;
        }
        // Participation as the reconciler would record it.
        let worker = &session.config.roster.workers[plan.worker];
        if !after.workers.iter().any(|w| w.id == worker.id) {
            after.workers.push(baton_core::state::WorkerRecord {
                id: worker.id.clone(),
                model: worker.model.clone(),
                family: worker.family.clone(),
                turns: vec![after.turns],
            });
        }
        after.turns += 1;
        self.policy
            .next_turn(&after, &session.config.roster, &session.config.settings)
            .is_none()
    }

    /// Re-opens a blocked run so it can continue (a human has looked at it).
    pub fn unblock(&self, session: &mut Session) -> Result<()> {
        if session.status == RunStatus::Blocked {
            self.store
                .update_run(&session.run, RunStatus::Active, &[])?;
            session.status = RunStatus::Active;
            session.blocked = None;
        }
        Ok(())
    }
}

/// The worker's gateway, with only its own credential (invariant 9).
pub fn build_gateway(worker: &WorkerConfig) -> Result<Arc<dyn Gateway>> {
    build_gateway_with_key(worker).map(|(gateway, _)| gateway)
}

/// [`build_gateway`], and the key it was given, for scrubbing model output.
fn build_gateway_with_key(
    worker: &WorkerConfig,
) -> Result<(Arc<dyn Gateway>, Option<baton_gateway::Credential>)> {
    let wrap = |error| Error::Gateway {
        worker: worker.id.to_string(),
        error,
    };
    let options = worker.gateway_options();
    // A replay calls no model, so it needs no key.
    let credential = match &worker.api_key {
        _ if options.contains_key("replay") => None,
        Some(secret) => Some(baton_gateway::Credential::new(secret.expose()).map_err(wrap)?),
        None => baton_gateway::credential_for(&worker.model, &options).map_err(wrap)?,
    };
    let gateway =
        baton_gateway::for_model_with_credential(&worker.model, &options, credential.clone())
            .map_err(wrap)?;
    Ok((gateway, credential))
}

fn blocked_question(session: &Session) -> String {
    if let Some(reason) = &session.blocked {
        return reason.clone();
    }
    let failures = session.state.consecutive_failures;
    let cursor = session.state.cursor().map(|i| &session.state.plan[i]);
    let step = cursor
        .map(|s| format!("step {} (\"{}\")", s.id, s.title))
        .unwrap_or_else(|| "the continuation turns".into());
    // The attempts of this streak: the step's last `failures` attempts.
    let recent = cursor.map_or(&[][..], |s| {
        let n = s.attempts.len().min(failures as usize);
        &s.attempts[s.attempts.len() - n..]
    });
    let idle = recent
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::NoEvidence)
        .count();
    if let (Some(last), true) = (recent.last(), idle > 0) {
        let failed = recent.len() - idle;
        let how = if failed == 0 {
            "none of them left evidence of work".to_string()
        } else {
            format!("{failed} failed and {idle} left no evidence of work")
        };
        return format!(
            "{failures} turns in a row did not complete {step}: {how} (the last, turn {} by \
             {}: {} — {}). Look at `baton history {}` \
             for what each worker said; make the step doable (reword or split it, or supply \
             what the workers say is missing) or give it to other workers in the roster \
             file, then {} to continue.",
            last.turn,
            last.worker,
            last.outcome.as_str(),
            last.detail,
            session.run,
            continue_hint(session, true)
        );
    }
    format!(
        "{} turns in a row failed on {step}. Look at `baton history {}` for the errors, fix the \
         workers in the roster file, then {} to continue (without --roster if the workers were \
         not the problem).",
        session.state.consecutive_failures,
        session.run,
        continue_hint(session, true)
    )
}

/// How a human continues this run once they fixed what stopped it: a job's run is
/// continued by requeueing the job (it needs its worktree), any other by resuming it.
fn continue_hint(session: &Session, new_roster: bool) -> String {
    let roster = if new_roster { " --roster <file>" } else { "" };
    match &session.lease {
        Some(fence) => format!(
            "run `baton requeue {}{roster}` and `baton work` (it is a job's run: it continues in its worktree)",
            fence.job
        ),
        None => format!("run `baton resume {}{roster}`", session.run),
    }
}

/// A clock that advances one second per reading from a fixed start: deterministic
/// timestamps for tests and reproducible exports.
#[derive(Debug)]
pub struct SteppingClock {
    next: AtomicU64,
}

impl SteppingClock {
    pub fn new(start: Timestamp) -> Self {
        SteppingClock {
            next: AtomicU64::new(start.0 as u64),
        }
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.next.fetch_add(1000, Ordering::Relaxed) as i64)
    }
}
