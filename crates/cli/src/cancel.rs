//! `baton cancel`: asks the process that holds a run, a job or itself to stop (see
//! `baton_store::cancel`). The holder notices within a second, ends whatever it waits
//! on, commits nothing half-done and releases its lease.

use std::process::ExitCode;

use anyhow::{Result, bail};
use baton_engine::{Clock, SystemClock};
use baton_store::{CancelOutcome, CancelTarget, Store};

use crate::commands::Context_;

/// Exit status of a command stopped by `baton cancel` (README, "Exit codes").
pub(crate) const EXIT_CANCELLED: u8 = crate::exit::Exit::Cancelled as u8;

pub(crate) fn cancel(ctx: &Context_, id: Option<&str>, process: Option<&str>) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    let target = match (id, process) {
        (Some(id), None) => resolve(store.as_ref(), id)?,
        (None, Some(owner)) => {
            if baton_engine::lease::owner_is_dead(owner) {
                bail!(
                    "no process {owner} runs on this machine: there is nothing to stop (`baton jobs` shows who holds each running job)"
                );
            }
            CancelTarget::Process(owner.to_string())
        }
        _ => bail!(
            "name what to stop: a run or job id (`baton cancel RUN_OR_JOB`), a group being judged (`baton cancel GROUP`), or a whole `baton work` process (`baton cancel --worker-process OWNER`, the owner `baton jobs` shows)"
        ),
    };
    match store.request_cancel(&target, SystemClock.now())? {
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
            println!("asked {holder} to stop {target}; it stops within a second: {next}");
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

/// A run id or a job id (or a unique prefix of either), or a group's id (whole: it
/// stops the group's judge).
fn resolve(store: &dyn Store, id: &str) -> Result<CancelTarget> {
    if store.list_jobs()?.iter().any(|j| j.group == id) {
        return Ok(CancelTarget::Group(id.to_string()));
    }
    let run = store.resolve_run(id);
    let job = store.resolve_job(id);
    match (run, job) {
        (Ok(run), Err(baton_store::Error::JobNotFound { .. })) => Ok(CancelTarget::Run(run)),
        (Err(baton_store::Error::RunNotFound { .. }), Ok(job)) => Ok(CancelTarget::Job(job)),
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
