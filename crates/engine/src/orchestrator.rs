//! run / step / resume. One turn: load → compile → execute → handoff → reconcile →
//! commit, with the commit as a single transaction before the next turn begins.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use baton_core::claims::{self, Parsed, Refusal};
use baton_core::compiler::{self, Assignment, HandoffPackage};
use baton_core::events::{Event, EventKind};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::prompt::{self, Prompt};
use baton_core::reconciler::{self, NoVerifier, ReconcileOutcome, TurnContext, Verifier};
use baton_core::state::{ExecutionState, StepStatus};
use baton_core::tokens::TokenEstimator;
use baton_core::turn::{
    AttemptRecord, CallKind, CallRecord, ReportedUsage, TurnRecord, TurnStatus,
};
use baton_gateway::{Gateway, ModelRequest, RetryPolicy, complete_with_retry};
use baton_store::{RunInfo, RunStatus, Store, TurnCommit};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::audit;
use crate::clock::{Clock, SystemClock};
use crate::config::{Roster, RunSettings, WorkerConfig};
use crate::hook::{HookOutcome, TurnFacts, WorkspaceHook};
use crate::policy::{RotatingPolicy, SwitchPolicy, TurnPlan};
use crate::{Error, Result};

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
    /// Why the run stopped, when this session blocked it.
    blocked: Option<String>,
    gateways: Vec<Option<Arc<dyn Gateway>>>,
    estimator: Arc<dyn TokenEstimator>,
    system_tokens: usize,
    prior_outputs: Vec<String>,
}

impl Session {
    pub fn estimator(&self) -> &dyn TokenEstimator {
        &*self.estimator
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

pub struct Engine {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    verifier: Arc<dyn Verifier>,
    policy: Arc<dyn SwitchPolicy>,
    observer: Option<CallObserver>,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Engine {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Engine {
            store,
            clock: Arc::new(SystemClock),
            verifier: Arc::new(NoVerifier),
            policy: Arc::new(RotatingPolicy),
            observer: None,
        }
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

    /// A new run id: 12 hex digits, unique per process and time.
    fn new_run_id(&self) -> RunId {
        let mut h = Sha256::new();
        h.update(self.clock.now().0.to_le_bytes());
        h.update(std::process::id().to_le_bytes());
        h.update(RUN_COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        h.update(nanos.to_le_bytes());
        RunId(audit::hex(&h.finalize()[..6]))
    }

    /// Creates a run (no turns yet) and returns its id.
    pub fn create_run(&self, spec: &RunSpec) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec)?;
        self.store.create_run(&info, &state, &events)?;
        Ok(info.id)
    }

    /// Creates a job's run and links it to the job in one transaction (fenced).
    pub fn create_job_run(&self, spec: &RunSpec, fence: &baton_store::LeaseFence) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec)?;
        self.store.create_job_run(fence, &info, &state, &events)?;
        Ok(info.id)
    }

    /// Everything a new run is made of, validated: nothing is created on a bad spec.
    fn new_run(&self, spec: &RunSpec) -> Result<(RunInfo, ExecutionState, Vec<Event>)> {
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
        check_roster(&spec.roster, None, false)?;
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
        for w in &config.roster.workers {
            gateways.push(if w.enabled && with_gateways {
                Some(build_gateway(w)?)
            } else {
                None
            });
        }
        Ok(Session {
            lease: None,
            workspace: None,
            run_lease: None,
            cancel: baton_gateway::Cancel::new(),
            blocked: None,
            run: run.clone(),
            prior_outputs: self.store.prior_outputs(run, state.turns)?,
            state,
            status: info.status,
            config,
            gateways,
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
        let (summary, fatal) = self.run_turn(session, &plan)?;
        // A failure no retry can fix (a bad key, an unknown model), about to be met again
        // by the same worker: stop now instead of failing the same way twice more.
        let again = fatal.is_some()
            && self
                .policy
                .next_turn(
                    &session.state,
                    &session.config.roster,
                    &session.config.settings,
                )
                .is_some_and(|next| next.worker == plan.worker);
        if let (true, Some(error)) = (again, &fatal) {
            let worker = &session.config.roster.workers[plan.worker].id;
            let question = format!(
                "worker {worker} cannot work: {error}. Fix its key in the environment, or its \
                 model, provider or base URL in the roster file, then {} \
                 (a run keeps the roster it was created with until you replace it).",
                continue_hint(session, true)
            );
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
        } else if summary.status == TurnStatus::Failed
            && session.state.consecutive_failures >= MAX_CONSECUTIVE_FAILURES
            && session
                .state
                .consecutive_failures
                .is_multiple_of(MAX_CONSECUTIVE_FAILURES)
        {
            let question = blocked_question(session);
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
        }
        Ok(StepOutcome::Turn(Box::new(summary)))
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
            let token = crate::jobs::new_id("run-lease-", &*self.clock, &session.run.0);
            session.run_lease = Some(crate::lease::acquire(
                self.store.clone(),
                self.clock.clone(),
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

    /// Replaces a run's roster (a wrong model, provider or base URL fixed in the roster
    /// file): validated first, recorded as a `RosterChanged` event with what changed
    /// and from where, and used by every later turn. Returns the changes, one line each
    /// (empty when the roster is the same).
    pub fn change_roster(&self, run: &RunId, roster: &Roster, source: &str) -> Result<Vec<String>> {
        roster.validate()?;
        check_roster(roster, None, false)?;
        let info = self.store.run_info(run)?;
        let mut config: RunConfig =
            serde_json::from_value(info.config).map_err(|e| baton_store::Error::Corrupt {
                what: format!("configuration of run {run}"),
                detail: e.to_string(),
            })?;
        let changes = roster_changes(&config.roster, roster);
        if changes.is_empty() {
            return Ok(changes);
        }
        config.roster = roster.clone();
        let value = serde_json::to_value(&config).map_err(|e| Error::Config(e.to_string()))?;
        let event = Event {
            run_id: run.clone(),
            turn: None,
            at: self.clock.now(),
            kind: EventKind::RosterChanged {
                source: source.to_string(),
                changes: changes.clone(),
            },
        };
        self.store.set_run_config(run, &value, &[event])?;
        Ok(changes)
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

    fn call_model(
        &self,
        session: &Session,
        worker_index: usize,
        prompt: &Prompt,
        call: CallKind,
        turn: u32,
    ) -> (CallRecord, std::result::Result<String, String>) {
        let worker = &session.config.roster.workers[worker_index];
        let schema = match call {
            CallKind::Execute | CallKind::ExecuteRepair => claims::worker_result_schema(),
            CallKind::Handoff | CallKind::HandoffRepair => claims::handoff_report_schema(),
        };
        let model_name = worker
            .model
            .split_once('/')
            .map(|(_, m)| m)
            .unwrap_or(&worker.model);
        let request = ModelRequest {
            model: model_name,
            system: &prompt.system,
            user: &prompt.user,
            call,
            turn,
            schema,
            max_tokens: worker.max_tokens,
            temperature: worker.temperature,
            workspace: session.workspace.as_ref().map(|w| w.path()),
            cancel: Some(&session.cancel),
        };
        let started_at = self.clock.now();
        let t0 = Instant::now();
        let retries = match &session.gateways[worker_index] {
            Some(g) if !g.retries_in_place() => 0,
            _ => worker.max_retries,
        };
        let retry = RetryPolicy::new(retries);
        let mut error_class = None;
        let (outcome, attempts) = match &session.gateways[worker_index] {
            None => (Err(format!("worker {} is disabled", worker.id)), Vec::new()),
            Some(gateway) => {
                // A wait the provider asked for ends early on an interrupt.
                let mut sleep = |d: Duration| {
                    session.cancel.sleep(d);
                };
                let (result, attempts) =
                    complete_with_retry(&**gateway, &request, &retry, &mut sleep);
                let tries = attempts.len();
                if let Err(e) = &result {
                    error_class = Some(e.class().to_string());
                }
                let result = result.map_err(|e| {
                    let after = if tries > 1 {
                        format!(" after {tries} attempts")
                    } else {
                        String::new()
                    };
                    format!("{}{after}: {e}", e.class())
                });
                (result, attempts)
            }
        };
        // All zeros means the gateway had nothing to report (an agent CLI without usage).
        let usage = outcome
            .as_ref()
            .ok()
            .filter(|r| r.usage != baton_gateway::Usage::default())
            .map(|r| ReportedUsage {
                input_tokens: r.usage.input_tokens,
                output_tokens: r.usage.output_tokens,
                cached_tokens: r.usage.cached_tokens,
            });
        let tokens_sent = session.system_tokens + session.estimator.count(&prompt.user);
        let record = CallRecord {
            call,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            messages: Prompt::MESSAGES,
            request_hash: audit::request_hash(prompt),
            tokens_sent,
            tokens_received: outcome
                .as_ref()
                .map(|r| session.estimator.count(&r.text))
                .unwrap_or(0),
            output: outcome.as_ref().ok().map(|r| r.text.clone()),
            error: outcome.as_ref().err().cloned(),
            error_class,
            started_at,
            duration_ms: t0.elapsed().as_millis() as u64,
            cost_micro_usd: match (&worker.price, usage) {
                (Some(price), Some(u)) => {
                    Some(price.cost_micro_usd(u.input_tokens, u.output_tokens, u.cached_tokens))
                }
                _ => None,
            },
            usage,
            attempts: if attempts.len() > 1 {
                attempts
                    .iter()
                    .map(|a| AttemptRecord {
                        error: a.error_class.map(str::to_string),
                        retry_after_ms: a.retry_after.map(|d| d.as_millis() as u64),
                        waited_ms: a.delay.map(|d| d.as_millis() as u64),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        };
        if let Some(observer) = &self.observer {
            observer(&record);
        }
        (record, outcome.map(|r| r.text))
    }

    /// One call and the parsing of its claim, with the configured repair calls when the
    /// output does not parse or fails its schema. Every call is pushed to `calls` and
    /// its prompt to `prompts`. Returns the claim and the raw text it came from.
    #[allow(clippy::too_many_arguments)]
    fn call_for_claim<T>(
        &self,
        session: &Session,
        worker_index: usize,
        prompt: Prompt,
        call: CallKind,
        turn: u32,
        parse: fn(&str) -> baton_core::Result<Parsed<T>>,
        calls: &mut Vec<CallRecord>,
        prompts: &mut Vec<Prompt>,
    ) -> std::result::Result<(Parsed<T>, String), String> {
        let mut repairs_left = session.config.settings.repair_attempts;
        let mut kind = call;
        let mut current = prompt;
        loop {
            let (record, out) = self.call_model(session, worker_index, &current, kind, turn);
            calls.push(record);
            let base_user = current.user.clone();
            prompts.push(current);
            let raw = out.map_err(|e| format!("{} call failed: {e}", kind.as_str()))?;
            match parse(&raw) {
                Ok(parsed) => return Ok((parsed, raw)),
                Err(e) => {
                    if let Some(last) = calls.last_mut() {
                        last.error = Some(e.to_string());
                    }
                    let repair = call
                        .repair()
                        .filter(|_| e.is_model_output_error() && repairs_left > 0);
                    let Some(repair) = repair else {
                        return Err(format!("{} output rejected: {e}", kind.as_str()));
                    };
                    repairs_left -= 1;
                    kind = repair;
                    current = prompt::repair_prompt(&base_user, &raw, &e.to_string());
                }
            }
        }
    }

    /// Runs and commits one turn. Also returns the failure, when a call failed in a way
    /// no retry can fix (see `FATAL_CLASSES`).
    fn run_turn(
        &self,
        session: &mut Session,
        plan: &TurnPlan,
    ) -> Result<(TurnSummary, Option<String>)> {
        let t0 = Instant::now();
        let turn = session.state.turns;
        let worker: WorkerConfig = session.config.roster.workers[plan.worker].clone();
        let profile = worker.profile();
        let started_at = self.clock.now();
        let package = compiler::compile(
            &session.state,
            &plan.assignment,
            &profile,
            plan.budget,
            &*session.estimator,
        );

        let mut calls = Vec::with_capacity(2);
        let mut prompts: Vec<Prompt> = Vec::with_capacity(2);
        let mut own_outputs: Vec<String> = Vec::new();
        let mut error: Option<String> = None;
        let mut claims_ok = None;
        let executed = self.call_for_claim(
            session,
            plan.worker,
            prompt::execute_prompt(&package),
            CallKind::Execute,
            turn,
            claims::parse_worker_result,
            &mut calls,
            &mut prompts,
        );
        match executed {
            Err(e) => error = Some(e),
            Ok((result, raw1)) => {
                let handed = self.call_for_claim(
                    session,
                    plan.worker,
                    prompt::handoff_prompt(&package, &raw1),
                    CallKind::Handoff,
                    turn,
                    claims::parse_handoff_report,
                    &mut calls,
                    &mut prompts,
                );
                own_outputs.push(raw1);
                match handed {
                    Err(e) => error = Some(e),
                    Ok((report, _)) => claims_ok = Some((result, report)),
                }
            }
        }
        let model_time: Duration = calls
            .iter()
            .map(|c| Duration::from_millis(c.duration_ms))
            .sum();
        // Every output of this turn may be quoted by its own later calls.
        own_outputs.extend(calls.iter().filter_map(|c| c.output.clone()));
        let own: Vec<&str> = own_outputs.iter().map(String::as_str).collect();
        let prompt_refs: Vec<&Prompt> = prompts.iter().collect();
        let transfer = audit::audit(&package, &prompt_refs, &own, &session.prior_outputs);

        let now = self.clock.now();
        let mut next = session.state.clone();
        let mut events = vec![Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: started_at,
            kind: EventKind::TurnStarted {
                worker: worker.id.clone(),
                model: worker.model.clone(),
                assignment: plan
                    .assignment
                    .step_id
                    .clone()
                    .unwrap_or_else(|| "continuation".into()),
            },
        }];
        events.push(Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: started_at,
            kind: EventKind::PackageCompiled {
                tokens: package.tokens,
                budget: package.budget,
                sections_included: package.sections.iter().filter(|s| s.included).count(),
                sections_omitted: package
                    .omitted_sections
                    .iter()
                    .map(|s| s.title().to_string())
                    .collect(),
                items_dropped: package.dropped_count(),
            },
        });
        for c in &calls {
            events.push(Event {
                run_id: session.run.clone(),
                turn: Some(turn),
                at: c.started_at,
                kind: EventKind::ModelCalled {
                    call: c.call.as_str().into(),
                    worker: worker.id.clone(),
                    ok: c.error.is_none(),
                    tokens_sent: c.tokens_sent,
                    tokens_received: c.tokens_received,
                },
            });
        }

        // A turn whose call was cut short is not committed: it did not fail, it was
        // stopped. (One whose calls all finished commits as usual, cancel or not.)
        if calls
            .iter()
            .any(|c| c.error_class.as_deref() == Some("cancelled"))
        {
            return Err(Error::Cancelled { turn });
        }
        // The workspace sees the turn before the reconciler does, so claims about files
        // are checked against the turn's commit.
        let hooked: Option<HookOutcome> = match &session.workspace {
            None => None,
            Some(hook) => {
                let last = claims_ok.is_some() && self.is_last_turn(session, plan);
                Some(
                    hook.after_calls(&TurnFacts {
                        run: &session.run,
                        turn,
                        worker: &worker,
                        assignment: &plan.assignment,
                        result: claims_ok
                            .as_ref()
                            .map(|(r, _): &(Parsed<_>, Parsed<_>)| &r.claim),
                        last,
                    })?,
                )
            }
        };
        // Gates stopped half-way prove nothing either way.
        if session.cancel.is_cancelled()
            && hooked
                .as_ref()
                .is_some_and(|h| !h.workspace.gates.is_empty())
        {
            return Err(Error::Cancelled { turn });
        }
        let verifier: Arc<dyn Verifier> = match &hooked {
            Some(h) => h.verifier.clone(),
            None => self.verifier.clone(),
        };
        let (status, mut outcome, result_json, report_json) = match claims_ok {
            Some((result, report)) => {
                let ctx = TurnContext {
                    worker: &profile,
                    turn,
                    at: now,
                    assignment: &plan.assignment,
                };
                let mut refusals = result.refusals;
                refusals.extend(report.refusals);
                let outcome = reconciler::reconcile(
                    &mut next,
                    &ctx,
                    &result.claim,
                    &report.claim,
                    refusals,
                    &*verifier,
                );
                // The plan cursor belongs to the orchestrator: the step is done because
                // its turn commits, whatever the claims said about completion.
                if let Some(step_id) = &plan.assignment.step_id
                    && let Some(step) = next.plan.iter_mut().find(|s| &s.id == step_id)
                {
                    step.status = StepStatus::Done;
                    step.done_by = Some(worker.id.clone());
                    step.done_at_turn = Some(turn);
                    events.push(Event {
                        run_id: session.run.clone(),
                        turn: Some(turn),
                        at: now,
                        kind: EventKind::StepDone {
                            step: step_id.clone(),
                            worker: worker.id.clone(),
                        },
                    });
                }
                next.consecutive_failures = 0;
                // Plain data structs: serialising them cannot fail.
                let rj =
                    Some(serde_json::to_value(&result.claim).unwrap_or(serde_json::Value::Null));
                let pj =
                    Some(serde_json::to_value(&report.claim).unwrap_or(serde_json::Value::Null));
                (TurnStatus::Committed, outcome, rj, pj)
            }
            None => {
                next.consecutive_failures += 1;
                (TurnStatus::Failed, ReconcileOutcome::default(), None, None)
            }
        };
        if let Some(h) = &hooked {
            outcome.refusals.extend(h.refusals.iter().cloned());
            outcome.warnings.extend(h.warnings.iter().cloned());
            if !h.workspace.gates.is_empty() {
                let ctx = TurnContext {
                    worker: &profile,
                    turn,
                    at: now,
                    assignment: &plan.assignment,
                };
                reconciler::apply_gates(&mut next, &ctx, &h.workspace.gates, &mut outcome);
            }
        }
        next.turns += 1;
        for r in &outcome.refusals {
            events.push(Event {
                run_id: session.run.clone(),
                turn: Some(turn),
                at: now,
                kind: EventKind::ClaimRefused {
                    worker: worker.id.clone(),
                    claim: r.claim.clone(),
                    reason: r.reason.clone(),
                },
            });
        }
        for w in &outcome.warnings {
            events.push(Event {
                run_id: session.run.clone(),
                turn: Some(turn),
                at: now,
                kind: EventKind::Warning {
                    worker: worker.id.clone(),
                    text: w.clone(),
                },
            });
        }
        let changes = next.diff(&session.state);
        events.push(Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: now,
            kind: EventKind::TurnCommitted {
                worker: worker.id.clone(),
                status: status.as_str().into(),
                changes: changes.len(),
            },
        });

        let summary = TurnSummary {
            turn,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            assignment: plan.assignment.clone(),
            status,
            package_tokens: package.tokens,
            budget: package.budget,
            sections_omitted: package
                .omitted_sections
                .iter()
                .map(|s| s.title().to_string())
                .collect(),
            items_dropped: package.dropped_count(),
            tokens_sent: calls.iter().map(|c| c.tokens_sent).sum(),
            tokens_received: calls.iter().map(|c| c.tokens_received).sum(),
            warnings: outcome.warnings.clone(),
            refusals: outcome.refusals.clone(),
            error: error.clone(),
            changes: changes.len(),
            conversations_passed: transfer.conversations_passed(),
            engine_time: Duration::ZERO,
        };
        let new_outputs: Vec<String> = calls.iter().filter_map(|c| c.output.clone()).collect();
        let fatal = calls
            .iter()
            .rev()
            .find(|c| {
                c.error_class
                    .as_deref()
                    .is_some_and(|k| FATAL_CLASSES.contains(&k))
            })
            .and_then(|c| c.error.clone());
        let record = TurnRecord {
            run_id: session.run.clone(),
            turn,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            family: worker.family.clone(),
            assignment: plan.assignment.clone(),
            status,
            package,
            calls,
            result: result_json,
            report: report_json,
            outcome,
            audit: transfer,
            error,
            workspace: hooked.map(|h| h.workspace),
            started_at,
            finished_at: now,
        };
        let commit = TurnCommit {
            record,
            header: next.header(),
            changes,
            events,
            status: RunStatus::Active,
            lease: session.lease.clone(),
            run_lease: session.run_lease.as_ref().map(|l| l.token.clone()),
        };
        match self.store.commit_turn(&commit) {
            Ok(()) => {}
            // Fenced off: another process committed this turn first. Its turn stands.
            Err(baton_store::Error::TurnConflict { run, turn, .. }) => {
                return Err(Error::Conflict(format!(
                    "another baton process committed turn {turn} of run {run} while this one was working on it; \
                     its turn stands and this one was discarded (its model calls are recorded nowhere). \
                     Run one `baton resume {run}` at a time."
                )));
            }
            Err(e) => return Err(e.into()),
        }
        session.state = next;
        session.prior_outputs.extend(new_outputs);
        let engine_time = t0.elapsed().saturating_sub(model_time);
        Ok((
            TurnSummary {
                engine_time,
                ..summary
            },
            fatal,
        ))
    }
}

/// Gateway failure classes that the same worker will meet again on the next try.
const FATAL_CLASSES: &[&str] = &["auth", "config", "unknown_model", "quota_exhausted"];

/// What differs between two rosters, one human line per worker (never a key).
fn roster_changes(old: &Roster, new: &Roster) -> Vec<String> {
    let describe = |w: &WorkerConfig| {
        let mut options: Vec<String> = w
            .gateway_options()
            .iter()
            .filter(|(k, _)| !k.contains("key"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        options.sort();
        format!(
            "{}{}{}",
            w.model,
            if w.enabled { "" } else { " (disabled)" },
            if options.is_empty() {
                String::new()
            } else {
                format!(" [{}]", options.join(", "))
            }
        )
    };
    let mut changes = Vec::new();
    for w in &new.workers {
        match old.workers.iter().find(|o| o.id == w.id) {
            None => changes.push(format!("worker {} added: {}", w.id, describe(w))),
            Some(o) if describe(o) != describe(w) || o.api_key_env != w.api_key_env => changes
                .push(format!(
                    "worker {}: {} → {}",
                    w.id,
                    describe(o),
                    describe(w)
                )),
            Some(_) => {}
        }
    }
    for o in &old.workers {
        if !new.workers.iter().any(|w| w.id == o.id) {
            changes.push(format!("worker {} removed", o.id));
        }
    }
    changes
}

/// `roster` with the in-memory keys of `keys` (literal keys from a roster file, never
/// stored) given to workers of the same id that have none.
pub fn with_keys(mut roster: Roster, keys: &Roster) -> Roster {
    for w in &mut roster.workers {
        if w.api_key.is_none() {
            w.api_key = keys
                .workers
                .iter()
                .find(|k| k.id == w.id)
                .and_then(|k| k.api_key.clone());
        }
    }
    roster
}

/// Builds every enabled worker's gateway once, so a bad option (`timeout_s = -3`, an
/// `api_base` that is not HTTP) is refused before a run is created; with
/// `credentials`, a missing key is refused too.
pub fn check_roster(roster: &Roster, keys: Option<&Roster>, credentials: bool) -> Result<()> {
    let roster = match keys {
        Some(k) => with_keys(roster.clone(), k),
        None => roster.clone(),
    };
    for w in roster.workers.iter().filter(|w| w.enabled) {
        match build_gateway(w) {
            Err(Error::Gateway {
                error: baton_gateway::Error::Auth { .. },
                ..
            }) if !credentials => {
                // The key may come later; every other option is checked now, with a
                // stand-in key that never leaves this function (no call is made).
                let mut w = w.clone();
                w.api_key = Some(crate::config::Secret::new("placeholder-key-for-checking"));
                build_gateway(&w)?;
            }
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// The worker's gateway, with only its own credential (invariant 9).
pub fn build_gateway(worker: &WorkerConfig) -> Result<Arc<dyn Gateway>> {
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
    baton_gateway::for_model_with_credential(&worker.model, &options, credential).map_err(wrap)
}

fn blocked_question(session: &Session) -> String {
    if let Some(reason) = &session.blocked {
        return reason.clone();
    }
    let step = session
        .state
        .cursor()
        .map(|i| {
            format!(
                "step {} (\"{}\")",
                session.state.plan[i].id, session.state.plan[i].title
            )
        })
        .unwrap_or_else(|| "the continuation turns".into());
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
