//! What happens to a job outside its turns, as events of its run: claimed, its lease
//! lost, judged (every candidate's run), so whoever follows a run (the CLI, export,
//! later the dashboard) sees it.

use baton_core::ids::RunId;
use baton_protocol::{EventKind, EventMsg};
use baton_store::Store;

use super::judge::{FailedJudgement, Judgement};
use crate::Result;
use crate::clock::Clock;
use crate::publish::Publisher;

/// Appends a `Judged` event to each candidate's run and publishes it.
pub fn announce(
    store: &dyn Store,
    clock: &dyn Clock,
    publisher: &Publisher,
    judgement: &Judgement,
) -> Result<()> {
    judged(
        store,
        clock,
        publisher,
        &judgement.group,
        judgement.labels.values(),
        Some(&judgement.winner_job),
        None,
    )
}

/// Appends a `Judged` event saying why the judge has no verdict to each candidate's
/// run, and publishes it.
pub fn announce_failure(
    store: &dyn Store,
    clock: &dyn Clock,
    publisher: &Publisher,
    failed: &FailedJudgement,
) -> Result<()> {
    judged(
        store,
        clock,
        publisher,
        &failed.group,
        failed.labels.values(),
        None,
        Some(&failed.error),
    )
}

fn judged<'a>(
    store: &dyn Store,
    clock: &dyn Clock,
    publisher: &Publisher,
    group: &str,
    jobs: impl ExactSizeIterator<Item = &'a String>,
    winner: Option<&String>,
    error: Option<&String>,
) -> Result<()> {
    let at = clock.now();
    let candidates = jobs.len();
    for job in jobs {
        let Some(run) = store.job(job)?.run_id else {
            continue;
        };
        let event = EventMsg {
            run_id: run.clone(),
            turn: None,
            at,
            kind: EventKind::Judged {
                group: group.to_string(),
                candidates,
                winner: winner.cloned(),
                error: error.cloned(),
            },
        };
        let seqs = store.append_events(&run, std::slice::from_ref(&event))?;
        publisher.stored(&seqs, std::slice::from_ref(&event));
    }
    Ok(())
}

/// Stores `kind` as an event of `run` and publishes it with its `seq`.
pub(crate) fn record(
    store: &dyn Store,
    clock: &dyn Clock,
    publisher: &Publisher,
    run: &RunId,
    kind: EventKind,
) -> Result<()> {
    let event = EventMsg {
        run_id: run.clone(),
        turn: None,
        at: clock.now(),
        kind,
    };
    match store.append_events(run, std::slice::from_ref(&event)) {
        Ok(seqs) => {
            publisher.stored(&seqs, std::slice::from_ref(&event));
            Ok(())
        }
        // Still said live: the store may be what failed.
        Err(e) => {
            publisher.live(&event);
            Err(e.into())
        }
    }
}
