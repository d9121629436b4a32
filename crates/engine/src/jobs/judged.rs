//! The judge's verdict as an event of every candidate's run, so whoever follows a
//! candidate's run (the CLI, export, later the dashboard) sees it was judged and who
//! won.

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
