//! Opening a run: creating it from a spec, reading it back with its configuration,
//! keys and gateways, and taking its lease.

use std::sync::Arc;
use std::time::Duration;

use baton_core::ids::RunId;
use baton_core::prompt;
use baton_core::state::ExecutionState;
use baton_core::tokens::{Remembering, TokenEstimator};
use baton_gateway::Gateway;
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::{RunInfo, RunStatus};

use super::roster::{Place, check_roster, with_keys};
use super::{Engine, RunConfig, RunSpec, Session, reshape};
use crate::config::{Roster, WorkerConfig};
use crate::{Error, Result};

/// A new run's state from `spec`, every part of it validated: the one place a run's
/// spec is checked, so a job's is refused when queued, not when a worker claims it.
pub(crate) fn planned_state(spec: &RunSpec, place: Place, id: RunId) -> Result<ExecutionState> {
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
    let tasks: Vec<String> = spec
        .tasks
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    if spec.step_budgets.len() > tasks.len() {
        return Err(Error::Config(format!(
            "{} step budgets for {} tasks; give at most one per task, in the tasks' order",
            spec.step_budgets.len(),
            tasks.len()
        )));
    }
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
    crate::seating::check_step_seats(&spec.step_seats, tasks.len())?;
    for (step, seat) in state.plan.iter_mut().zip(&spec.step_seats) {
        step.seat = seat.clone();
    }
    for (what, given) in [
        ("step tags", spec.step_tags.len()),
        ("step scopes", spec.step_scopes.len()),
    ] {
        if given > tasks.len() {
            return Err(Error::Config(format!(
                "{given} {what} for {} tasks; give at most one per task, in the tasks' order",
                tasks.len()
            )));
        }
    }
    for (step, tags) in state.plan.iter_mut().zip(&spec.step_tags) {
        step.tags = tags.clone();
    }
    for (step, scope) in state.plan.iter_mut().zip(&spec.step_scopes) {
        step.scope = *scope;
    }
    if !spec.settings.floor.is_empty() {
        match place {
            // A job's roster is its candidate's workers: the seats were checked against
            // the whole roster when the configuration was read.
            Place::Job => crate::config::check_floor_workers(&spec.roster, &spec.settings.floor)?,
            Place::Run | Place::Unit => {
                crate::config::check_floor(&spec.roster, &spec.settings.floor)?
            }
        }
    }
    let estimator = spec.settings.estimator.build();
    crate::policy::check_budgets(&state, &spec.settings, &spec.roster, &*estimator)?;
    Ok(state)
}

/// A new run id: a UUIDv7 in 32 hex digits (see `jobs::new_id`).
pub fn new_run_id() -> RunId {
    RunId(crate::jobs::new_id(""))
}

impl Engine {
    /// Creates a run (no turns yet) and returns its id.
    pub fn create_run(&self, spec: &RunSpec) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec, Place::Run, new_run_id())?;
        self.store.create_run(&info, &state, &events)?;
        self.published(&first_seqs(&events), &events);
        Ok(info.id)
    }

    /// Creates a unit of the assembly line: a run that keeps `route` with its
    /// configuration, so any process can resume it (`Engine::line_step` on
    /// `session.config.line`). The route is validated first.
    pub fn create_unit(
        &self,
        spec: &RunSpec,
        route: &baton_core::line::Route,
        repo: Option<&crate::jobs::unit::UnitRepo>,
    ) -> Result<RunId> {
        route
            .check(None)
            .map_err(|e| Error::Config(format!("route {}: {e}", route.name)))?;
        // A unit in a repository works in a worktree, where command workers run too.
        let place = if repo.is_some() {
            Place::Job
        } else {
            Place::Unit
        };
        let (mut info, state, events) = self.new_run(spec, place, new_run_id())?;
        info.config["line"] =
            serde_json::to_value(route).map_err(crate::unencodable("a unit's route"))?;
        if let Some(repo) = repo {
            info.config["unit_repo"] =
                serde_json::to_value(repo).map_err(crate::unencodable("a unit's repository"))?;
        }
        self.store.create_run(&info, &state, &events)?;
        self.published(&first_seqs(&events), &events);
        Ok(info.id)
    }

    /// Creates a job's run as `id` and links it to the job in one transaction (fenced).
    /// The id is chosen before (`new_run_id`), so the job's claim can name its run
    /// even when the run is never made.
    pub fn create_job_run(
        &self,
        id: RunId,
        spec: &RunSpec,
        fence: &baton_store::LeaseFence,
    ) -> Result<RunId> {
        let (info, state, events) = self.new_run(spec, Place::Job, id)?;
        self.store.create_job_run(fence, &info, &state, &events)?;
        self.published(&first_seqs(&events), &events);
        Ok(info.id)
    }

    /// Everything a new run is made of, validated: nothing is created on a bad spec.
    fn new_run(
        &self,
        spec: &RunSpec,
        place: Place,
        id: RunId,
    ) -> Result<(RunInfo, ExecutionState, Vec<Event>)> {
        let state = planned_state(spec, place, id.clone())?;
        let now = self.clock.now();
        let config = RunConfig {
            roster: spec.roster.clone(),
            settings: spec.settings.clone(),
            line: None,
            unit_repo: None,
        };
        let info = RunInfo {
            id: id.clone(),
            objective: state.objective.clone(),
            status: RunStatus::Active,
            turns: 0,
            created_at: now,
            updated_at: now,
            config: serde_json::to_value(&config)
                .map_err(crate::unencodable("a run's configuration"))?,
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
            if !config.settings.floor.is_empty() {
                crate::config::check_floor(&r, &config.settings.floor)?;
            }
            config.roster = r;
        }
        if let Some(keys) = keys {
            config.roster = with_keys(config.roster, keys);
        }
        let state = self.store.load_state(run)?;
        // Every turn's briefing counts mostly the pieces the last one counted.
        let estimator: Arc<dyn TokenEstimator> =
            Arc::new(Remembering::new(config.settings.estimator.build()));
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
            seats: super::seat::Seats::open(&*self.store, run, &config, &state)?,
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
            turn_events: Default::default(),
            state,
            status: info.status,
            config,
            gateways,
            redactor,
            estimator,
            system_tokens,
        })
    }

    /// Takes the run's lease for this process (refused, before any model call, when
    /// another live process advances the run); every turn is then fenced with it, and
    /// `baton cancel` of the run cancels `session.cancel` within a second.
    pub fn lease(&self, session: &mut Session, lease: Duration) -> Result<()> {
        if session.run_lease.is_none() {
            let token = crate::jobs::new_id("run-lease-");
            let mut held = crate::lease::acquire(self.store.clone(), &session.run, token, lease)?;
            // `baton cancel` of the run stops whatever the session waits on: set
            // `session.cancel` before taking the lease.
            held.watch_cancel(session.cancel.clone());
            session.run_lease = Some(held);
        }
        Ok(())
    }
}

/// The worker's gateway, with only its own credential (invariant 9).
pub fn build_gateway(worker: &WorkerConfig) -> Result<Arc<dyn Gateway>> {
    build_gateway_with_key(worker).map(|(gateway, _)| gateway)
}

/// [`build_gateway`], and the key it was given, for scrubbing model output.
pub(super) fn build_gateway_with_key(
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
        Some(key) => Some(key.clone()),
        None => baton_gateway::credential_for(&worker.model, &options).map_err(wrap)?,
    };
    let gateway =
        baton_gateway::for_model_with_credential(&worker.model, &options, credential.clone())
            .map_err(wrap)?;
    Ok((gateway, credential))
}

/// A new run's events are its first: numbered from 1 by the store.
fn first_seqs(events: &[Event]) -> Vec<u64> {
    (1..=events.len() as u64).collect()
}
