//! `baton cancel`: asks the process that holds a run, a job or itself to stop (see
//! `baton_store::cancel`). The holder notices within a second, ends whatever it waits
//! on, commits nothing half-done and releases its lease; `baton cancel` waits until it
//! did (the lease released, the job ended, the process gone), so the user knows.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use baton_engine::ops::{self, OpOutcome};
use baton_store::{CancelOutcome, CancelTarget, JobStatus, Store};

use crate::commands::Context_;
use crate::exit::{Exit, Refusal};

/// How long `baton cancel` waits for the holder to stop unless told (`--wait-s`): a
/// holder stops within a second, so ten mean it is stuck (or its machine is).
pub(crate) const DEFAULT_WAIT_S: u64 = 10;

/// How often the store (or `/proc`) is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);

/// Exit status of a command stopped by `baton cancel` (README, "Exit codes").
pub(crate) const EXIT_CANCELLED: u8 = crate::exit::Exit::Cancelled as u8;

/// `wait`: how long to wait for the holder to stop (`None`: ask and return at once).
pub(crate) fn cancel(
    ctx: &Context_,
    id: Option<&str>,
    process: Option<&str>,
    wait: Option<Duration>,
) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    let target = match (id, process) {
        (Some(id), None) => resolve(store.as_ref(), id)?,
        (None, Some(owner)) => {
            baton_protocol::CancelTarget::Worker(in_this_space(store.as_ref(), owner)?)
        }
        _ => bail!(
            "name what to stop: a run or job id (`baton cancel RUN_OR_JOB`), a group being judged (`baton cancel GROUP`), or a whole `baton work` process (`baton cancel --worker-process OWNER`, the owner `baton jobs` shows)"
        ),
    };
    let engine = baton_engine::Engine::new(store.clone());
    let op = baton_protocol::Op::Cancel { target };
    let (target, outcome) = match ops::apply(&engine, &ctx.op_context(), op, &mut |_| {})? {
        OpOutcome::CancelAsked { target, outcome } => (target, outcome),
        other => {
            return Err(baton_engine::Error::Internal {
                place: "baton cancel",
                detail: format!("unexpected outcome {other:?}"),
            }
            .into());
        }
    };
    match outcome {
        CancelOutcome::Requested { holder } => {
            let next = match &target {
                CancelTarget::Run(run) => format!(
                    "the turn in flight is discarded and the run stays resumable: `baton resume {run}` continues it"
                ),
                CancelTarget::Job(job) => format!(
                    "the turn in flight is discarded and the job ends `cancelled`: `baton requeue {job}` continues it"
                ),
                CancelTarget::Process(_) => {
                    "its jobs' turns in flight are discarded and the jobs go back to the queue"
                        .to_string()
                }
                CancelTarget::Group(group) => format!(
                    "if a `baton judge` is judging it, nothing of that judge is recorded: `baton judge {group}` judges it again"
                ),
            };
            // A judge holds no lease to watch: it clears the request as it stops, but
            // with no judge running the request would stay, so there is nothing to wait on.
            let limit = match (wait, &target) {
                (
                    Some(limit),
                    CancelTarget::Run(_) | CancelTarget::Job(_) | CancelTarget::Process(_),
                ) => Some(limit),
                _ => None,
            };
            let Some(limit) = limit else {
                println!("asked {holder} to stop {target}; it stops within a second: {next}");
                return Ok(ExitCode::SUCCESS);
            };
            let asked = Instant::now();
            if !stopped_within(store.as_ref(), &target, &holder, limit)? {
                return Err(still_running(&target, &holder, limit));
            }
            println!(
                "{target} stopped ({holder} let go of it {:.1} s after the request): {}",
                asked.elapsed().as_secs_f64(),
                next.replacen("is discarded", "was discarded", 1)
            );
        }
        CancelOutcome::Cancelled => {
            println!(
                "{target} is cancelled (no worker held it): no worker claims it until `baton requeue {}`",
                match &target {
                    CancelTarget::Job(job) => job.as_str(),
                    _ => "",
                }
            );
        }
        CancelOutcome::NotRunning { state } => {
            println!("{target} is {state}: there is nothing to stop");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `owner` as workers name themselves. One written as before owners named their pid
/// space (`pid-N@host`, from an old script or typed from memory) is looked up among the
/// holders of jobs: a worker of an older baton goes by that very name, a newer one by
/// that name and its space (`pid-N@host#…`; more than one such is refused, naming
/// them). Else, on this host, it is process N of this pid space, running or not (one
/// that is gone then has nothing to stop). Anything else is taken as written.
fn in_this_space(store: &dyn Store, owner: &str) -> Result<String> {
    let Some((pid, host)) = (owner.strip_prefix("pid-")).and_then(|rest| rest.split_once('@'))
    else {
        return Ok(owner.to_string());
    };
    if host.contains('#') || pid.parse::<u32>().is_err() {
        return Ok(owner.to_string());
    }
    let mut holders: Vec<String> = (store.list_jobs()?.into_iter())
        .filter_map(|j| j.lease_owner)
        .filter(|o| o == owner || o.strip_prefix(owner).is_some_and(|s| s.starts_with('#')))
        .collect();
    holders.sort();
    holders.dedup();
    if holders.iter().any(|o| o == owner) {
        return Ok(owner.to_string());
    }
    match holders.as_slice() {
        [one] => return Ok(one.clone()),
        [] => {}
        many => bail!(
            "{owner} names {} workers (one per pid space of host {host}): give the whole owner, one of {}",
            many.len(),
            many.join(", ")
        ),
    }
    let this = baton_engine::lease::this_owner();
    let here = (this.split_once('@'))
        .and_then(|(_, rest)| rest.split_once('#'))
        .filter(|(this_host, _)| *this_host == host);
    Ok(match here {
        Some((_, space)) => format!("{owner}#{space}"),
        None => owner.to_string(),
    })
}

/// Whether the holder let go of `target` within `limit`: polls until it did.
fn stopped_within(
    store: &dyn Store,
    target: &CancelTarget,
    holder: &str,
    limit: Duration,
) -> Result<bool> {
    // A job's run is stopped as its job is (the store asked the job's holder).
    let job_of_run = match target {
        CancelTarget::Run(run) => store
            .list_jobs()?
            .into_iter()
            .find(|j| j.run_id.as_ref() == Some(run))
            .map(|j| j.id),
        _ => None,
    };
    // No deadline past what `Instant` can hold (`--wait-s` is the user's number).
    let deadline = Instant::now().checked_add(limit);
    loop {
        let holds = match (target, &job_of_run) {
            (_, Some(job)) | (CancelTarget::Job(job), None) => {
                let info = store.job(job)?;
                info.status == JobStatus::Running && info.lease_owner.as_deref() == Some(holder)
            }
            (CancelTarget::Run(run), None) => store
                .run_lease_holder(run)?
                .is_some_and(|h| h.owner == holder),
            // Not waited on (see `cancel`).
            (CancelTarget::Group(_), None) => false,
            // In this pid space, until the process is gone; elsewhere, until it cleared
            // the request (it does as it stops).
            (CancelTarget::Process(owner), None) => {
                if baton_engine::lease::owner_is_here(owner) {
                    !baton_engine::lease::owner_is_dead(owner)
                } else {
                    store.cancel_requested(target, None)?
                }
            }
        };
        if !holds {
            return Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        std::thread::sleep(POLL);
    }
}

/// What to do when the holder did not stop in time. The request stays: the holder
/// still stops when it notices.
fn still_running(target: &CancelTarget, holder: &str, waited: Duration) -> anyhow::Error {
    let kill = holder
        .strip_prefix("pid-")
        .and_then(|rest| rest.split_once('@'))
        .filter(|_| baton_engine::lease::owner_is_here(holder))
        .map(|(pid, _)| format!("`kill {pid}` ends it"))
        .unwrap_or_else(|| format!("end it on the machine it runs on ({holder})"));
    let again = match target {
        CancelTarget::Process(owner) => format!("baton cancel --worker-process {owner}"),
        CancelTarget::Run(run) => format!("baton cancel {run}"),
        CancelTarget::Job(job) => format!("baton cancel {job}"),
        CancelTarget::Group(group) => format!("baton cancel {group}"),
    };
    let release = match target {
        CancelTarget::Process(_) => "its jobs' leases then expire and `baton work` continues them",
        _ => "its lease then expires and the work can be continued",
    };
    Refusal {
        exit: Exit::Busy,
        message: format!(
            "{target} is still held by {holder} {} s after the request (it is asked to stop, \
             and still stops when it notices): `{again} --wait-s 60` waits longer; if the \
             process is stuck, {kill} ({release})",
            waited.as_secs()
        ),
    }
    .into()
}

/// A run id or a job id (or a unique prefix of either), or a group's id (whole: it
/// stops the group's judge).
fn resolve(store: &dyn Store, id: &str) -> Result<baton_protocol::CancelTarget> {
    use baton_protocol::CancelTarget as Op;
    if store.list_jobs()?.iter().any(|j| j.group == id) {
        return Ok(Op::Group(id.to_string()));
    }
    let run = store.resolve_run(id);
    let job = store.resolve_job(id);
    match (run, job) {
        (Ok(run), Err(baton_store::Error::JobNotFound { .. })) => Ok(Op::Run(run.0)),
        (Err(baton_store::Error::RunNotFound { .. }), Ok(job)) => Ok(Op::Job(job)),
        (Ok(run), Ok(job)) => {
            bail!("\"{id}\" matches run {run} and job {job}; type more of the id")
        }
        (
            Err(baton_store::Error::RunNotFound { .. }),
            Err(baton_store::Error::JobNotFound { .. }),
        ) => {
            bail!("no run or job matches \"{id}\"; `baton runs` and `baton jobs` list them")
        }
        (Err(e), _) | (_, Err(e)) => Err(e.into()),
    }
}
