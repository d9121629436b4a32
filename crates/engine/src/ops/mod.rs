//! One entry point for every command a client gives ([`Op`]): the CLI today, the
//! server's HTTP API and its MCP tools later. Each surface builds an `Op` and calls
//! [`apply`], so `baton cancel` and a stop button do the same thing, and a run created
//! over HTTP is checked as one created on the command line is.
//!
//! What stays with the client: reading its own input (files, flags, stdin), choosing
//! a default run, how long to wait for a cancelled holder, and what it prints.

mod jobs;

use std::path::PathBuf;

use baton_core::ids::RunId;
use baton_gateway::Cancel;
use baton_protocol::{CancelTarget, Op, Settings};
use baton_store::{CancelOutcome, RunStatus, Store};

use crate::config::{Roster, RunSettings, WorkerConfig};
use crate::jobs::Enqueued;
use crate::jobs::judge::Judgement;
use crate::orchestrator::{Place, check_roster, with_keys};
use crate::{Engine, Error, Result, RunEnd, RunSpec, Session, StepOutcome, TurnSummary};

/// What a client brings besides the op: what an op leaves out, and what is never
/// stored.
#[derive(Clone)]
pub struct OpContext {
    /// The workers of an op that names none (the CLI: its configuration file's, else
    /// five offline mock workers).
    pub roster: Roster,
    /// The settings an op leaves unset.
    pub settings: RunSettings,
    /// Literal keys (from a roster file; never stored), given to workers of the same
    /// id that have none.
    pub keys: Option<Roster>,
    /// Stops what the op waits on: a turn in flight, a retry's delay, a judge's call.
    pub cancel: Cancel,
    /// Files no sandboxed agent may see: baton's database and its WAL files.
    pub hidden: Vec<PathBuf>,
}

impl OpContext {
    pub fn new(roster: Roster, settings: RunSettings) -> Self {
        OpContext {
            roster,
            settings,
            keys: None,
            cancel: Cancel::new(),
            hidden: Vec::new(),
        }
    }

    /// The op's roster, else the context's.
    fn roster(&self, op_roster: Option<&serde_json::Value>, source: &str) -> Result<Roster> {
        match op_roster {
            Some(value) => crate::config::parse_roster(source, value),
            None => Ok(self.roster.clone()),
        }
    }

    /// The op's settings over the context's.
    fn settings(&self, op: &Settings) -> RunSettings {
        RunSettings {
            budget: op.budget.unwrap_or(self.settings.budget),
            total_budget: op.total_budget.or(self.settings.total_budget),
            estimator: op.estimator.unwrap_or(self.settings.estimator),
            repair_attempts: self.settings.repair_attempts,
            floor: self.settings.floor.clone(),
        }
    }
}

/// Said once the work of a long op is about to begin, before any model call: a
/// client tells its user what is happening and how to stop it.
#[derive(Debug)]
pub enum Started<'a> {
    /// A run is about to take turns (`Resume`). `was_blocked`: it had stopped to ask
    /// a human and is re-opened; `roster_changes`: what a new roster changed (empty
    /// when it was the run's roster already).
    Resuming {
        run: &'a RunId,
        was_blocked: bool,
        roster_changes: Option<&'a [String]>,
    },
    /// A judge is about to be asked.
    Judging {
        group: &'a str,
        judge: &'a WorkerConfig,
    },
}

/// What an op did.
#[derive(Debug)]
pub enum OpOutcome {
    RunCreated {
        run: RunId,
    },
    /// One turn (or none: the run was finished or blocked). `was_blocked`: it was
    /// blocked before the step; `status`: after it.
    Stepped {
        run: RunId,
        step: StepOutcome,
        was_blocked: bool,
        status: RunStatus,
    },
    /// Turns ran until `end`; `last` is the last turn this op ran.
    Resumed {
        run: RunId,
        end: RunEnd,
        last: Option<Box<TurnSummary>>,
    },
    /// The run was stopped by the context's cancel or by a cancel op; nothing half-done
    /// is committed and the run is resumable. `requested`: by a cancel op.
    Stopped {
        run: RunId,
        stop: Stop,
        requested: bool,
    },
    /// The holder of `target` was asked to stop (or nothing held it: see `outcome`).
    CancelAsked {
        target: baton_store::CancelTarget,
        outcome: CancelOutcome,
    },
    /// One job per candidate, with each candidate's roster as queued.
    Enqueued {
        queued: Enqueued,
        candidates: Vec<Roster>,
    },
    Judged(Box<Judgement>),
}

/// Where a stopped run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Turn `turn` was in flight and is discarded.
    InFlight { turn: u32 },
    /// Between turns, before `next_turn` began.
    BeforeTurn { next_turn: u32 },
}

impl From<Stop> for Error {
    fn from(stop: Stop) -> Error {
        match stop {
            Stop::InFlight { turn } => Error::Cancelled { turn },
            Stop::BeforeTurn { next_turn } => Error::Stopped { next_turn },
        }
    }
}

/// Carries out `op` on `engine`'s store, publishing its events to the engine's
/// subscribers as they happen; `started` hears when a long op's work begins.
pub fn apply(
    engine: &Engine,
    ctx: &OpContext,
    op: Op,
    started: &mut dyn FnMut(Started<'_>),
) -> Result<OpOutcome> {
    match op {
        Op::CreateRun {
            objective,
            tasks,
            step_budgets,
            step_seats,
            step_tags,
            step_scopes,
            roster,
            settings,
        } => {
            if step_budgets.len() > tasks.len() {
                return Err(Error::Config(format!(
                    "{} step budgets for {} tasks; give at most one per task",
                    step_budgets.len(),
                    tasks.len()
                )));
            }
            let spec = RunSpec {
                step_budgets: (0..tasks.len())
                    .map(|i| step_budgets.get(i).copied().flatten())
                    .collect(),
                step_seats: step_seats
                    .into_iter()
                    .map(|s| s.map(baton_core::router::SeatId::new))
                    .collect(),
                step_tags,
                step_scopes,
                objective,
                tasks,
                roster: ctx.roster(roster.as_ref(), "the op's roster")?,
                settings: ctx.settings(&settings),
            };
            Ok(OpOutcome::RunCreated {
                run: engine.create_run(&spec)?,
            })
        }
        Op::Step { run } => step(engine, ctx, &run),
        Op::Resume {
            run,
            max_turns,
            roster,
        } => resume(engine, ctx, &run, max_turns, roster, started),
        Op::Cancel { target } => cancel(engine, target),
        Op::Enqueue { .. } => jobs::enqueue(engine, ctx, op),
        Op::Judge { group, judge } => jobs::judge(engine, ctx, &group, judge.as_deref(), started),
    }
}

/// The run `id` (or unique prefix) names, when it is not a job's: a job's run takes
/// its turns in the job's worktree, through `baton work`.
fn own_run(store: &dyn Store, id: &str) -> Result<RunId> {
    let run = store.resolve_run(id)?;
    if let Some(job) = store
        .list_jobs()?
        .into_iter()
        .find(|j| j.run_id.as_ref() == Some(&run))
    {
        return Err(Error::RunOfJob {
            run: run.to_string(),
            job: job.id,
            status: job.status,
            owner: job.lease_owner,
        });
    }
    Ok(run)
}

/// Opens `run` with the context's keys and cancel, under this process's lease.
fn open_leased(engine: &Engine, ctx: &OpContext, run: &RunId, gateways: bool) -> Result<Session> {
    let mut session = if gateways {
        engine.open_with_keys(run, None, ctx.keys.as_ref())?
    } else {
        engine.open_for_preview(run)?
    };
    // Before the lease: a cancel op for the run cancels this token.
    session.cancel = ctx.cancel.clone();
    engine.lease(&mut session, crate::lease::DEFAULT_RUN_LEASE)?;
    Ok(session)
}

fn step(engine: &Engine, ctx: &OpContext, run: &str) -> Result<OpOutcome> {
    let run = own_run(engine.store().as_ref(), run)?;
    let mut session = open_leased(engine, ctx, &run, true)?;
    let was_blocked = session.status == RunStatus::Blocked;
    match engine.step(&mut session) {
        Ok(step) => Ok(OpOutcome::Stepped {
            run,
            step,
            was_blocked,
            status: session.status,
        }),
        Err(e) => stopped(run, e, &session),
    }
}

fn resume(
    engine: &Engine,
    ctx: &OpContext,
    run: &str,
    max_turns: Option<u32>,
    roster: Option<baton_protocol::NewRoster>,
    started: &mut dyn FnMut(Started<'_>),
) -> Result<OpOutcome> {
    let run = own_run(engine.store().as_ref(), run)?;
    // With a new roster, the old one's workers are not built (a missing key may be the
    // very thing being fixed); the lease comes first either way: a run another process
    // advances keeps its roster.
    let mut session = open_leased(engine, ctx, &run, roster.is_none())?;
    let mut changes = None;
    if let Some(new) = roster {
        let roster = crate::config::parse_roster(&new.source, &new.roster)?;
        let (changed, keys) =
            engine.replace_roster(&run, roster, ctx.keys.as_ref(), &new.source, Place::Run)?;
        changes = Some(changed);
        let (lease, cancel) = (session.run_lease.take(), session.cancel.clone());
        session = engine.open_with_keys(&run, None, Some(&keys))?;
        session.run_lease = lease;
        session.cancel = cancel;
    }
    let was_blocked = session.status == RunStatus::Blocked;
    started(Started::Resuming {
        run: &run,
        was_blocked,
        roster_changes: changes.as_deref(),
    });
    if was_blocked {
        engine.unblock(&mut session)?;
    }
    let mut last = None;
    match engine.run(&mut session, max_turns, &mut |summary, _| {
        last = Some(Box::new(summary.clone()));
    }) {
        Ok(end) => Ok(OpOutcome::Resumed { run, end, last }),
        Err(e) => stopped(run, e, &session),
    }
}

/// A run's error as the op's outcome when it was a stop someone asked for (the
/// context's cancel, a cancel op); any other error as it is.
fn stopped(run: RunId, error: Error, session: &Session) -> Result<OpOutcome> {
    let stop = match error {
        Error::Cancelled { turn } => Stop::InFlight { turn },
        Error::Stopped { next_turn } => Stop::BeforeTurn { next_turn },
        other => return Err(other),
    };
    let requested = session
        .run_lease
        .as_ref()
        .is_some_and(|l| l.cancel_requested());
    if !requested && !session.cancel.is_cancelled() {
        return Err(stop.into());
    }
    Ok(OpOutcome::Stopped {
        run,
        stop,
        requested,
    })
}

fn cancel(engine: &Engine, target: CancelTarget) -> Result<OpOutcome> {
    use baton_store::CancelTarget as Target;
    let store = engine.store();
    let target = match target {
        CancelTarget::Run(id) => Target::Run(store.resolve_run(&id)?),
        CancelTarget::Job(id) => Target::Job(store.resolve_job(&id)?),
        CancelTarget::Worker(owner) => {
            if crate::lease::owner_is_dead(&owner) {
                return Err(Error::NoSuchProcess { owner });
            }
            Target::Process(owner)
        }
        CancelTarget::Group(group) => {
            if !store.list_jobs()?.iter().any(|j| j.group == group) {
                return Err(Error::NoSuchGroup { group });
            }
            Target::Group(group)
        }
    };
    let outcome = store.request_cancel(&target, engine.now())?;
    Ok(OpOutcome::CancelAsked { target, outcome })
}

impl Engine {
    /// Replaces `run`'s roster with `roster` (checked with `keys`, every credential
    /// included, before anything changes), recording the change as from `source`.
    /// Returns what changed and the roster with its keys, to open the run with.
    pub fn replace_roster(
        &self,
        run: &RunId,
        roster: Roster,
        keys: Option<&Roster>,
        source: &str,
        place: Place,
    ) -> Result<(Vec<String>, Roster)> {
        let with = match keys {
            Some(k) => with_keys(roster.clone(), k),
            None => roster.clone(),
        };
        check_roster(&roster, Some(&with), true, place)?;
        let changes = self.change_roster(run, &roster, source)?;
        Ok((changes, with))
    }
}
