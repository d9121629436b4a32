//! `baton work`: claim jobs and run them, each in its own worktree, `concurrency` at a
//! time, with a heartbeat that keeps each lease and a fence on every write.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use baton_core::ids::RunId;
use baton_gateway::Cancel;
use baton_protocol::{EventKind, EventMsg};
use baton_store::{CancelTarget, ClaimOutcome, JobInfo, JobStatus, LeaseFence, Store};
use baton_workspace::{Exclusion, Repo, Workspace, WorkspaceSpec, branch_for_job};

use super::events;
use super::git_hook::GitHook;
use super::{JobSpec, Outbox, decode_spec, new_id};
use crate::cancel_watch::CancelWatch;
use crate::clock::Clock;
use crate::config::Roster;
use crate::lease::{Heartbeat, LeaseLoss};
use crate::orchestrator::{Engine, RunEnd, RunSpec, TurnSummary, new_run_id};
use crate::policy::{GateFixPolicy, RotatingPolicy, failing_gates, fix_turns_taken};
use crate::publish::Publisher;
use crate::{Error, Result};

#[derive(Clone)]
pub struct WorkOptions {
    /// Names this worker process in leases (`host:pid` by default).
    pub owner: String,
    pub concurrency: usize,
    /// How long a claim holds without a heartbeat.
    pub lease: Duration,
    /// Keep polling for new jobs instead of stopping when none is claimable.
    pub follow: bool,
    pub poll: Duration,
    /// Literal keys from the roster file (never stored).
    pub keys: Option<Roster>,
    /// Stops every job of this `work` (an interrupt): agents and gates are ended, the
    /// turns in flight discarded and the jobs given back to the queue.
    pub cancel: Cancel,
    /// Gets every agent's output lines as they come, with the job's id
    /// (`baton -v work`).
    pub agent_output: Option<AgentOutput>,
    /// Where every job's events are published as they happen (job claimed, each
    /// turn's events, gates, a lost lease).
    pub publisher: Publisher,
}

/// Receives `(job, line)`.
pub type AgentOutputFn = dyn Fn(&str, baton_gateway::OutputLine<'_>) + Send + Sync;

/// Where `work` sends agents' output lines.
#[derive(Clone)]
pub struct AgentOutput(pub Arc<AgentOutputFn>);

impl std::fmt::Debug for AgentOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentOutput")
    }
}

impl WorkOptions {
    /// The lease, bounded: it comes from a flag, and `Instant + Duration` panics on
    /// overflow while a lease in milliseconds must fit the store's `i64`.
    fn bounded_lease(&self) -> Duration {
        baton_gateway::retry_after::bounded(self.lease)
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.bounded_lease().as_millis()).unwrap_or(i64::MAX)
    }
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions {
            owner: crate::lease::this_owner(),
            concurrency: 1,
            lease: Duration::from_secs(30),
            follow: false,
            poll: Duration::from_secs(1),
            keys: None,
            cancel: Cancel::new(),
            agent_output: None,
            publisher: Publisher::default(),
        }
    }
}

/// What `work` reports as it goes.
#[derive(Debug, Clone)]
pub enum Progress {
    Claimed {
        job: String,
        candidate: String,
        reclaimed: bool,
    },
    Turn {
        job: String,
        summary: Box<TurnSummary>,
    },
    Finished {
        job: String,
        status: JobStatus,
        detail: String,
    },
    /// The lease was taken over (or could not be renewed in time): the job's agent was
    /// stopped and another worker continues the job.
    /// `announced` is false when no event could say it (the run is not known without
    /// the database that failed): the caller says it then.
    LeaseLost {
        job: String,
        reason: String,
        announced: bool,
    },
    /// `work` was interrupted: the job's turn in flight was discarded and the job put
    /// back on the queue.
    Released { job: String, turn: Option<u32> },
    /// A following `work` cannot reach the database (said once per outage): it keeps
    /// trying, from `retry_in` and backing off.
    StoreUnavailable { error: String, retry_in: Duration },
    /// The database answers again after an outage that lasted `after`.
    StoreBack { after: Duration },
}

/// How one job ended in this process.
#[derive(Debug, Clone, PartialEq)]
pub struct JobReport {
    pub job: String,
    pub status: JobStatus,
    pub detail: String,
    /// Set when this process could not record how the job ended (the database failed):
    /// the job stays `running` under a lease that will expire.
    pub unrecorded: Option<String>,
    /// The lease was lost: another worker has the job (or finished it).
    pub lost: bool,
}

/// Runs jobs until none is claimable (or forever with `follow`).
pub fn work(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: &WorkOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Vec<JobReport>> {
    // `baton cancel --worker-process` of this process. A request left for the owner
    // name by a process that is gone (pids are reused) is not for this one.
    let process = CancelTarget::Process(options.owner.clone());
    store.clear_cancel(&process)?;
    let watch = CancelWatch::start(store.clone(), process.clone(), None, options.cancel.clone());
    let reports = std::sync::Mutex::new(Vec::new());
    let first_error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    tracing::info!(
        owner = %options.owner,
        concurrency = options.concurrency.max(1),
        follow = options.follow,
        lease_ms = options.lease_ms(),
        "work started"
    );
    // Another process's enqueue wakes an idle worker at once where the backend can hear
    // it (PostgreSQL's LISTEN/NOTIFY); polling is the fallback.
    let signal = if options.follow {
        store.job_signal()
    } else {
        None
    };
    let outage = Outage::default();
    std::thread::scope(|s| {
        for _ in 0..options.concurrency.max(1) {
            s.spawn(|| {
                let mut backoff = RETRY_START;
                loop {
                    if options.cancel.is_cancelled() {
                        return;
                    }
                    let seen = signal.as_ref().map(|s| s.generation());
                    let token = new_id("lease-");
                    let lease_ms = options.lease_ms();
                    let claimed = store
                        .try_claim_job(&options.owner, &token, clock.now(), lease_ms)
                        .map_err(Error::from)
                        .and_then(|outcome| match outcome {
                            // A job whose holder died in this pid space (this machine or
                            // container) is taken now, not once its lease runs out.
                            ClaimOutcome::Skipped { .. } => expire_dead_owners(&*store, &*clock)
                                .map(|expired| (outcome, expired)),
                            claimed => Ok((claimed, false)),
                        });
                    match claimed {
                        // A following worker outlives a database that is away for a while
                        // (a server restart, a network cut): it says so and tries again.
                        Err(Error::Store(e)) if options.follow && e.is_transient() => {
                            outage.report(&e, backoff, progress);
                            options.cancel.sleep(backoff);
                            backoff = (backoff * 2).min(RETRY_MAX);
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "claiming a job failed; this worker stops");
                            first_error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                            return;
                        }
                        Ok((ClaimOutcome::Skipped { .. }, expired)) => {
                            outage.ended(progress);
                            backoff = RETRY_START;
                            if expired {
                                continue;
                            }
                            if !options.follow {
                                tracing::debug!("no job to claim; this worker stops");
                                return;
                            }
                            tracing::trace!(poll = ?options.poll, "no job to claim; waiting");
                            match (&signal, seen) {
                                (Some(signal), Some(seen)) => {
                                    wait_for_work(signal, seen, options.poll, &options.cancel)
                                }
                                _ => {
                                    options.cancel.sleep(options.poll);
                                }
                            }
                        }
                        Ok((
                            ClaimOutcome::Claimed {
                                job,
                                token,
                                reclaimed,
                                previous_owner,
                                ..
                            },
                            _,
                        )) => {
                            outage.ended(progress);
                            backoff = RETRY_START;
                            let fence = LeaseFence {
                                job: job.id.clone(),
                                token,
                            };
                            let taken = match (reclaimed, previous_owner) {
                                (false, _) => Takeover::No,
                                (true, Some(o)) if crate::lease::owner_is_dead(&o) => {
                                    Takeover::FromTheDead
                                }
                                (true, _) => Takeover::FromAnExpiredLease,
                            };
                            tracing::info!(job = %job.id, takeover = ?taken, "job claimed");
                            let report =
                                run_claimed(&store, &clock, options, &job, &fence, taken, progress);
                            tracing::info!(
                                job = %report.job,
                                status = report.status.as_str(),
                                detail = %report.detail,
                                "job left"
                            );
                            // Given back because this process was interrupted: it claims no more.
                            let stop =
                                report.status == JobStatus::Queued && options.cancel.is_cancelled();
                            reports
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(report);
                            if stop {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    if watch.requested() {
        let _ = store.clear_cancel(&process);
    }
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let reports = reports.into_inner().unwrap_or_else(|p| p.into_inner());
    tracing::info!(jobs = reports.len(), "work ended");
    Ok(reports)
}

/// The first wait after the database could not be reached, doubling up to `RETRY_MAX`.
const RETRY_START: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Whether the database is away, shared by a process's claimers so an outage is said
/// once when it starts and once when it ends, not by every thread at every retry.
#[derive(Default)]
struct Outage {
    since: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Outage {
    fn report(
        &self,
        error: &baton_store::Error,
        retry_in: Duration,
        progress: &(dyn Fn(Progress) + Sync),
    ) {
        let mut since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        tracing::warn!(error = %error, retry_in = ?retry_in, "the database cannot be reached; retrying");
        if since.is_none() {
            *since = Some(std::time::Instant::now());
            progress(Progress::StoreUnavailable {
                error: error.to_string(),
                retry_in,
            });
        }
    }

    fn ended(&self, progress: &(dyn Fn(Progress) + Sync)) {
        let mut since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(start) = since.take() {
            tracing::info!(after = ?start.elapsed(), "the database is reachable again");
            progress(Progress::StoreBack {
                after: start.elapsed(),
            });
        }
    }
}

/// Waits up to `poll` for a wake-up past `seen`, in slices so a cancel is seen at once.
fn wait_for_work(signal: &baton_store::JobSignal, seen: u64, poll: Duration, cancel: &Cancel) {
    const SLICE: Duration = Duration::from_millis(100);
    let until = std::time::Instant::now() + poll;
    while !cancel.is_cancelled() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || signal.wait_past(seen, left.min(SLICE)) {
            return;
        }
    }
}

/// Leases of running jobs whose holder is a process in this pid space that is gone
/// (killed, or a zombie) are ended, so the next claim takes the job at once.
/// Returns whether any was.
fn expire_dead_owners(store: &dyn Store, clock: &dyn Clock) -> Result<bool> {
    let mut expired = false;
    for job in store.list_jobs()? {
        if job.status == JobStatus::Running
            && let Some(owner) = &job.lease_owner
            && crate::lease::owner_is_dead(owner)
        {
            expired |= store.expire_job_lease(&job.id, owner, clock.now())?;
        }
    }
    Ok(expired)
}

/// How a job came to this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takeover {
    /// Queued (first claim, or given back).
    No,
    /// From a holder known to be dead (a process in this pid space that is gone): its
    /// agent died with it, so its worktree can be reused.
    FromTheDead,
    /// From a lease that ran out: the holder may only be stopped, its agent still
    /// writing, so the job continues in a fresh worktree.
    FromAnExpiredLease,
}

/// Runs one claimed job and always leaves it finished, failed, back on the queue
/// (interrupted) or (lease lost) to its new owner.
fn run_claimed(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    options: &WorkOptions,
    job: &JobInfo,
    fence: &LeaseFence,
    taken: Takeover,
    progress: &(dyn Fn(Progress) + Sync),
) -> JobReport {
    let candidate = decode_spec(job).map(|s| s.candidate).unwrap_or_default();
    progress(Progress::Claimed {
        job: job.id.clone(),
        candidate,
        reclaimed: taken != Takeover::No,
    });
    // Cancelled with the whole `work`, or alone when this job's lease is lost.
    let cancel = options.cancel.child();
    let mut heartbeat = {
        let (store, clock, fence) = (store.clone(), clock.clone(), fence.clone());
        let lease_ms = options.lease_ms();
        Heartbeat::start(
            options.bounded_lease(),
            Some(cancel.clone()),
            Box::new(move || store.renew_lease(&fence, clock.now(), lease_ms)),
        )
    };
    // `baton cancel` of this job, under this lease.
    let watch = CancelWatch::start(
        store.clone(),
        CancelTarget::Job(job.id.clone()),
        Some(fence.token.clone()),
        cancel.clone(),
    );
    // A panic in a job is a failed job, and must stop the heartbeat: otherwise the
    // lease would be renewed forever for a job nobody runs.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_job(store, clock, options, job, fence, taken, &cancel, progress)
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::Internal {
            place: "the job",
            detail: what,
        })
    });
    heartbeat.stop();
    let lost = heartbeat.lost();
    let report = |status: JobStatus, detail: String, unrecorded: Option<String>| {
        progress(Progress::Finished {
            job: job.id.clone(),
            status,
            detail: detail.clone(),
        });
        JobReport {
            job: job.id.clone(),
            status,
            detail,
            unrecorded,
            lost: false,
        }
    };
    let lease_lost = |reason: String| {
        // Say what became of the job: another worker may have finished it already.
        let now = store.job(&job.id).map(|j| j.status).ok();
        let next = match now {
            Some(s @ (JobStatus::Outbox | JobStatus::Judged | JobStatus::Failed)) => {
                format!("another worker finished it meanwhile ({})", s.as_str())
            }
            _ => "another worker continues it".to_string(),
        };
        let reason = format!("{reason}; its agent was stopped and {next}");
        // Durable in the job's run too, so whoever follows the run sees why this
        // process stopped (best effort: the store may be what failed; the event is
        // then published live only).
        let run = (store.job(&job.id).ok().and_then(|j| j.run_id)).or_else(|| job.run_id.clone());
        if let Some(run) = &run {
            let lost = EventKind::LeaseLost {
                what: "job".into(),
                id: job.id.clone(),
                reason: reason.clone(),
            };
            let _ = events::record(&**store, &**clock, &options.publisher, run, lost);
        }
        progress(Progress::LeaseLost {
            job: job.id.clone(),
            reason: reason.clone(),
            announced: run.is_some(),
        });
        JobReport {
            job: job.id.clone(),
            status: now.unwrap_or(JobStatus::Running),
            detail: format!("lease lost ({reason})"),
            unrecorded: None,
            lost: true,
        }
    };
    match outcome {
        Ok(()) => {
            let finished = store.job(&job.id).ok();
            let status = finished.as_ref().map_or(JobStatus::Outbox, |j| j.status);
            let detail = match (status, finished.and_then(|j| j.error)) {
                (JobStatus::Failed, Some(e)) => {
                    format!("failed, with what it did in the outbox: {e}")
                }
                _ => "in the outbox".to_string(),
            };
            report(status, detail, None)
        }
        Err(Error::Store(baton_store::Error::LeaseLost { reason, .. })) => lease_lost(match lost {
            Some(LeaseLoss::Unrenewable(why)) => why,
            _ => reason,
        }),
        Err(Error::Cancelled { .. }) if lost.is_some() => {
            lease_lost(lost.map(|l| l.to_string()).unwrap_or_default())
        }
        // `baton cancel` of this job: it ends `cancelled` (not failed: nothing went
        // wrong), claimed by no worker until `baton requeue`, which continues it from
        // its last committed turn.
        Err(e) if watch.requested() => {
            let (_, what) = stopped_where(e);
            let detail = format!("cancelled (`baton cancel`) {what}");
            let done = store.finish_job(
                fence,
                JobStatus::Cancelled,
                None,
                Some(&detail),
                clock.now(),
            );
            match done {
                Ok(()) => {
                    // Honoured; the request named this lease only.
                    let _ = store.clear_cancel(&CancelTarget::Job(job.id.clone()));
                    report(
                        JobStatus::Cancelled,
                        format!("{detail}; `baton requeue {}` continues it", job.id),
                        None,
                    )
                }
                Err(baton_store::Error::LeaseLost { reason, .. }) => lease_lost(reason),
                Err(e) => report(
                    JobStatus::Running,
                    detail,
                    Some(format!(
                        "could not record the cancel ({e}); the job is reclaimed when its lease expires"
                    )),
                ),
            }
        }
        // Interrupted: whatever stopped the job (a turn cut short, or a git step the
        // interrupt reached), it goes back to the queue, never to `failed`.
        Err(e) if options.cancel.is_cancelled() => {
            let (turn, what) = stopped_where(e);
            // Interrupted: give the job back now, so a restart continues it at once
            // instead of waiting out the lease.
            match store.release_job(fence, clock.now()) {
                Ok(()) => {
                    progress(Progress::Released {
                        job: job.id.clone(),
                        turn,
                    });
                    JobReport {
                        job: job.id.clone(),
                        status: JobStatus::Queued,
                        detail: format!("interrupted {what}; the job is queued again"),
                        unrecorded: None,
                        lost: false,
                    }
                }
                Err(e) => report(
                    JobStatus::Running,
                    format!("interrupted {what}"),
                    Some(format!(
                        "could not give the job back ({e}); it is reclaimed when its lease expires"
                    )),
                ),
            }
        }
        // The database was away for a moment (a restart, a network cut): nothing is
        // wrong with the job, whose turn in flight committed whole or not at all. It
        // goes back to the queue, never to `failed`, and continues from its last
        // committed turn; when even that cannot be written, its lease runs out.
        Err(Error::Store(e)) if e.is_transient() => {
            let detail = format!(
                "the database was away ({e}); the job continues from its last committed turn"
            );
            match store.release_job(fence, clock.now()) {
                Ok(()) => report(JobStatus::Queued, format!("{detail}, queued again"), None),
                Err(baton_store::Error::LeaseLost { reason, .. }) => lease_lost(reason),
                Err(_) => report(
                    JobStatus::Running,
                    format!("{detail}, once its lease expires"),
                    None,
                ),
            }
        }
        Err(e) => {
            let message = e.to_string();
            match store.finish_job(fence, JobStatus::Failed, None, Some(&message), clock.now()) {
                Ok(()) => report(JobStatus::Failed, message, None),
                Err(baton_store::Error::LeaseLost { reason, .. }) => lease_lost(reason),
                // The real error is the job's; the database failing to record it is
                // said too (once, when it is the same failure).
                Err(store_error) => {
                    let same = matches!(&e, Error::Store(first)
                        if std::mem::discriminant(first) == std::mem::discriminant(&store_error));
                    let why = if same {
                        "for the same reason".to_string()
                    } else {
                        format!("({store_error})")
                    };
                    report(
                        JobStatus::Running,
                        message,
                        Some(format!(
                            "the failure could not be recorded {why}; the job stays running until its lease expires, then `baton work` continues it from its last committed turn"
                        )),
                    )
                }
            }
        }
    }
}

/// Which turn a stopped job stopped at, and how to say so.
fn stopped_where(e: Error) -> (Option<u32>, String) {
    match e {
        Error::Cancelled { turn } => (
            Some(turn),
            format!("during turn {turn}; that turn was discarded"),
        ),
        Error::Stopped { next_turn } => (Some(next_turn), format!("before turn {next_turn}")),
        other => (None, format!("({other}); the turn in flight was discarded")),
    }
}

/// Lists baton's scratch directory, and the paths the roster's agents write for
/// themselves (aider's `.aider*`), in the repository's shared exclude file (see
/// `Repo::exclude`), so neither the user's checkout nor any worktree ever commits them.
pub(crate) fn exclude_scratch(repo: &Repo, roster: &Roster) -> Result<()> {
    let mut patterns = vec![".baton/".to_string()];
    for w in &roster.workers {
        let paths =
            baton_gateway::scratch_paths(&w.model, &w.options).map_err(|error| Error::Gateway {
                worker: w.id.to_string(),
                error,
            })?;
        for p in paths {
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
    }
    let wanted: Vec<Exclusion> = (patterns.into_iter())
        .map(|pattern| Exclusion {
            why: if pattern == ".baton/" {
                "baton's scratch area (database, worktrees, agent output)".into()
            } else {
                "written by a coding agent for itself (baton's preset)".into()
            },
            pattern,
        })
        .collect();
    repo.exclude(&wanted).map_err(ws)?;
    Ok(())
}

fn ws(e: baton_workspace::Error) -> Error {
    Error::Workspace(e)
}

/// The worktree for a job: created on the first claim, re-opened afterwards, and made
/// anew (a new path) when the job is taken over from a worker whose lease ran out —
/// that worker's agent may still be writing in the old one. baton never falls back to
/// the user's checkout: a worktree that vanished fails the job.
fn workspace_for(
    store: &dyn Store,
    repo: &Repo,
    job: &JobInfo,
    spec: &JobSpec,
    fresh: bool,
    notes: &mut Vec<String>,
) -> Result<Workspace> {
    let ws_spec = WorkspaceSpec {
        job_id: job.id.clone(),
        base: spec.base.clone(),
        base_branch: spec.base_branch.clone(),
        root: spec.worktree_root.clone(),
    };
    if let (true, Some(run)) = (fresh, &job.run_id) {
        // What the worker that lost the job left in its worktree is kept by name before
        // that worktree lets go of the branch (its agent may still be writing there).
        let old = repo
            .job_worktree_path(&job.id, &spec.worktree_root)
            .map_err(ws)?;
        if old.is_dir() {
            let last = last_turn_commit(store, run, spec)?;
            match baton_workspace::set_aside(
                &old,
                &job.id,
                &last,
                "left by the worker that lost the job",
            ) {
                Ok(Some(saved)) => notes.push(format!(
                    "what the previous worker left in {} was set aside at {saved}",
                    old.display()
                )),
                Ok(None) => {}
                Err(e) => notes.push(format!(
                    "what the previous worker left in {} could not be set aside: {e}",
                    old.display()
                )),
            }
        }
        return repo.take_over_workspace(&ws_spec, job.attempts).map_err(ws);
    }
    if job.run_id.is_some() {
        return repo
            .open_workspace(
                &job.id,
                &branch_for_job(&job.id),
                &spec.base,
                &spec.worktree_root,
            )
            .map_err(ws);
    }
    repo.create_workspace(&ws_spec).map_err(ws)
}

/// A claimed job's spec, repository, worktree and run, made ready to run turns.
struct Opened {
    spec: JobSpec,
    repo: Repo,
    workspace: Workspace,
    takeover_notes: Vec<String>,
    engine: Engine,
    run: RunId,
}

/// Everything before a job's first turn that can fail (a corrupt spec, a repository or
/// worktree that cannot be used, a roster refused): the job's run is created as
/// `planned` when it has none yet.
fn open_job(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    options: &WorkOptions,
    job: &JobInfo,
    fence: &LeaseFence,
    taken: Takeover,
    planned: RunId,
) -> Result<Opened> {
    let spec = decode_spec(job)?;
    let repo = Repo::open(&spec.repo).map_err(ws)?;
    exclude_scratch(&repo, &spec.roster)?;
    // A job taken from a holder that is known dead continues in its worktree (its agent
    // died with it); one taken from a lease that merely expired gets a fresh one, for
    // the holder may only be stopped and its agent still writing.
    let mut takeover_notes = Vec::new();
    let workspace = workspace_for(
        &**store,
        &repo,
        job,
        &spec,
        taken == Takeover::FromAnExpiredLease,
        &mut takeover_notes,
    )?;
    let engine = Engine::new(store.clone())
        .with_clock(clock.clone())
        .with_publisher(options.publisher.clone())
        .with_policy(Arc::new(GateFixPolicy {
            inner: RotatingPolicy,
            fix_turns: spec.fix_turns,
        }));
    let run = match &job.run_id {
        Some(run) => run.clone(),
        None => engine.create_job_run(
            planned,
            &RunSpec {
                objective: spec.objective.clone(),
                tasks: spec.tasks.clone(),
                step_budgets: spec.steps.budgets.clone(),
                step_seats: spec.steps.seats.clone(),
                step_tags: spec.steps.tags.clone(),
                step_scopes: spec.steps.scopes.clone(),
                roster: spec.roster.clone(),
                settings: spec.settings.clone(),
            },
            fence,
        )?,
    };
    Ok(Opened {
        spec,
        repo,
        workspace,
        takeover_notes,
        engine,
        run,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    options: &WorkOptions,
    job: &JobInfo,
    fence: &LeaseFence,
    taken: Takeover,
    cancel: &Cancel,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<()> {
    // The claim is said before anything can fail, so a failure has its context: in
    // the run's record when the run exists; when it is not made yet, once it is, or
    // live only when making it fails (there is no run to store it in).
    let claimed = EventKind::JobClaimed {
        job: job.id.clone(),
        owner: options.owner.clone(),
        attempt: job.attempts,
        candidate: decode_spec(job).map(|s| s.candidate).unwrap_or_default(),
        reclaimed: taken != Takeover::No,
    };
    if let Some(run) = &job.run_id {
        events::record(&**store, &**clock, &options.publisher, run, claimed.clone())?;
    }
    let planned = job.run_id.clone().unwrap_or_else(new_run_id);
    let Opened {
        spec,
        repo,
        workspace,
        takeover_notes,
        engine,
        run,
    } = match open_job(store, clock, options, job, fence, taken, planned.clone()) {
        Ok(opened) => opened,
        Err(e) => {
            if job.run_id.is_none() {
                options.publisher.live(&EventMsg {
                    run_id: planned,
                    turn: None,
                    at: clock.now(),
                    kind: claimed,
                });
            }
            return Err(e);
        }
    };
    if job.run_id.is_none() {
        events::record(&**store, &**clock, &options.publisher, &run, claimed)?;
    }
    let gate_dir = spec.worktree_root.join(format!("{}-gates", job.id));
    let gate_dir = if gate_dir.is_absolute() {
        gate_dir
    } else {
        repo.workdir().join(gate_dir)
    };
    // Drift first: a reset must never destroy work someone did by hand.
    let mut drift = drift_notes(&repo, &workspace, &spec)?;
    drift.extend(takeover_notes);
    // Resume exactly where the record is: the last committed turn's commit. A commit or
    // edits left by a turn that never reached the store belong to the turn in flight.
    let last_commit = last_turn_commit(&**store, &run, &spec)?;
    let fence_store = store.clone();
    let fence_clock = clock.clone();
    let fence_token = fence.clone();
    let lease_ms = options.lease_ms();
    let hook = GitHook {
        workspace: workspace.clone(),
        job_id: job.id.clone(),
        gates: spec.gates.clone(),
        gate_each_turn: spec.gate_each_turn,
        gate_dir,
        hide: spec
            .roster
            .workers
            .iter()
            .filter_map(|w| w.api_key_env.clone())
            .collect(),
        // Literal keys come from the roster file, never from the stored spec.
        keys: crate::config::redactor_for(&match options.keys.as_ref() {
            Some(keys) => crate::orchestrator::with_keys(spec.roster.clone(), keys).workers,
            None => spec.roster.workers.clone(),
        }),
        // Renewing is the check: it fails unless this process still holds the job.
        fence: Some(Arc::new(move || {
            fence_store
                .renew_lease(&fence_token, fence_clock.now(), lease_ms)
                .map_err(Error::from)
        })),
        last_commit: std::sync::Mutex::new(last_commit.clone()),
        cancel: cancel.clone(),
    };
    if let Some(saved) = hook.reset_to(
        &last_commit,
        "uncommitted work found when the job was resumed",
    )? {
        drift.push(format!(
            "work after the last committed turn (uncommitted edits, or a commit the record never got) was set aside at {saved} before resuming"
        ));
    }

    let mut session = engine.open_with_keys(&run, None, options.keys.as_ref())?;
    // The run's lease too, so `baton resume`/`step` of this run is refused while the job
    // runs. Holding the job's lease makes this process the run's rightful owner: a
    // worker that lost the job may still hold the run's lease, and is taken over.
    session.run_lease = Some(crate::lease::acquire_owned(
        store.clone(),
        &run,
        new_id("run-lease-"),
        options.lease,
    )?);
    session.cancel = cancel.clone();
    // Every worker's key is scrubbed from every agent's lines (the gateway scrubs only
    // the agent's own).
    let redactor = session.redactor().clone();
    session.agent_output = options.agent_output.clone().map(|sink| {
        let job = job.id.clone();
        baton_gateway::OutputSink::new(move |l| {
            let line = redactor.scrub(l.line);
            (sink.0)(
                &job,
                baton_gateway::OutputLine {
                    stderr: l.stderr,
                    line: &line,
                },
            )
        })
    });
    session.lease = Some(fence.clone());
    session.workspace = Some(Arc::new(hook));
    if session.status == baton_store::RunStatus::Blocked {
        engine.unblock(&mut session)?;
    }
    let end = engine.run(&mut session, None, &mut |summary, _| {
        progress(Progress::Turn {
            job: job.id.clone(),
            summary: Box::new(summary.clone()),
        });
    })?;

    // Drift while the job ran (the base moved, someone committed on its branch).
    for note in drift_notes(&repo, &workspace, &spec).unwrap_or_else(|e| vec![e.to_string()]) {
        if !drift.contains(&note) {
            drift.push(note);
        }
    }
    let head = workspace.head().map_err(ws)?;
    let diff = workspace.diff_stat(&spec.base, &head).map_err(ws)?;
    let patch = workspace.patch(&spec.base, &head).map_err(ws)?;
    let patch_file = outbox_dir(&repo, &spec).join(format!("{}.patch", job.id));
    if let Some(dir) = patch_file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&patch_file, patch)?;
    let turns = store.turns(&run)?;
    let gates = turns
        .iter()
        .rev()
        .filter_map(|t| t.workspace.as_ref())
        .find(|w| !w.gates.is_empty())
        .map(|w| w.gates.clone())
        .unwrap_or_default();
    let (status, ended, error) = match end {
        RunEnd::Finished => {
            let failing = failing_gates(&session.state);
            let ended = if failing.is_empty() {
                "finished".to_string()
            } else {
                format!(
                    "finished with failing gate(s) {} after {} fix turn(s)",
                    failing.join(", "),
                    fix_turns_taken(&session.state, first_pass(&spec))
                )
            };
            (baton_store::JobStatus::Outbox, ended, None)
        }
        RunEnd::Blocked { question } => (
            baton_store::JobStatus::Failed,
            format!("blocked: {question}"),
            Some(question),
        ),
        RunEnd::Paused => (
            baton_store::JobStatus::Failed,
            "paused".to_string(),
            Some("paused".to_string()),
        ),
    };
    let outbox = Outbox {
        run_id: run,
        branch: workspace.branch.clone(),
        base: spec.base.clone(),
        head,
        worktree: workspace.path.clone(),
        patch_file,
        diff,
        turns: turns.len() as u32,
        gates,
        ended,
        drift,
    };
    let value = serde_json::to_value(&outbox).map_err(crate::unencodable("a job's outbox"))?;
    store.finish_job(fence, status, Some(&value), error.as_deref(), clock.now())?;
    Ok(())
}

/// The turns of the roster's first pass before a job's gate fixes: none in a routed
/// job (seats, not the roster's order, decide its turns).
fn first_pass(spec: &JobSpec) -> usize {
    if spec.settings.floor.is_empty() {
        spec.roster.enabled().count()
    } else {
        0
    }
}

/// The commit of the run's last committed turn, or the job's base before its first.
fn last_turn_commit(
    store: &dyn Store,
    run: &baton_core::ids::RunId,
    spec: &JobSpec,
) -> Result<String> {
    Ok(store
        .turns(run)?
        .iter()
        .rev()
        .find_map(|t| t.workspace.as_ref().map(|w| w.commit.clone()))
        .unwrap_or_else(|| spec.base.clone()))
}

fn outbox_dir(repo: &Repo, spec: &JobSpec) -> std::path::PathBuf {
    let root: &Path = &spec.worktree_root;
    let base = if root.is_absolute() {
        root.to_path_buf()
    } else {
        repo.workdir().join(root)
    };
    base.join("outbox")
}

/// What moved under the job, as notes; an error when the worktree was switched to
/// another branch or someone committed on the job's branch (baton will not reset over
/// their work).
fn drift_notes(repo: &Repo, workspace: &Workspace, spec: &JobSpec) -> Result<Vec<String>> {
    let d = repo
        .drift(workspace, spec.base_branch.as_deref())
        .map_err(ws)?;
    if let Some(branch) = &d.branch_changed {
        return Err(Error::Drift(format!(
            "the worktree {} is on {branch}, not {}: it was switched outside baton; switch it back, then `baton work` again",
            workspace.path.display(),
            workspace.branch
        )));
    }
    if !d.commits_outside_baton.is_empty() {
        let list: Vec<&str> = d.commits_outside_baton.iter().map(|c| short(c)).collect();
        return Err(Error::Drift(format!(
            "someone committed on {} outside baton ({}); baton will not reset over that work. \
             Move it to a branch of your own (e.g. `git branch keep {}`), reset {} to its last baton commit, then `baton work` again",
            workspace.branch,
            list.join(", "),
            list[0],
            workspace.branch
        )));
    }
    let mut notes = Vec::new();
    if let Some((old, new)) = &d.base_moved {
        notes.push(format!(
            "the base branch moved from {} to {} since the job was queued",
            short(old),
            short(new)
        ));
    }
    Ok(notes)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
