//! What happens to a job outside its turns, as events of its run: claimed, its lease
//! lost, judged (every candidate's run), so whoever follows a run (the CLI, export,
//! later the dashboard) sees it.

use baton_core::ids::RunId;
use baton_protocol::{EventKind, EventMsg};
use baton_store::Store;

use super::judge::Judgement;
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
    let at = clock.now();
    for job in judgement.labels.values() {
        let Some(run) = store.job(job)?.run_id else {
            continue;
        };
        let event = EventMsg {
            run_id: run.clone(),
            turn: None,
            at,
            kind: EventKind::Judged {
                group: judgement.group.clone(),
                candidates: judgement.labels.len(),
                winner: Some(judgement.winner_job.clone()),
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
