//! A structured mode a worker's gateway gave up on (forced tool use whose answers
//! never end, as llama.cpp's Messages endpoint does with small models) is remembered
//! with the run as an event, so a resumed or later process starts in the fallback mode
//! instead of paying the whole output limit again on its first call, and says so once.

use std::sync::Arc;

use baton_core::ids::{RunId, Timestamp};
use baton_gateway::Gateway;
use baton_protocol::{EventKind, EventMsg as Event};

use super::{Engine, Session};
use crate::Result;
use crate::config::Roster;

/// Per worker, whether it is in its fallback mode; and, per worker that is, what to
/// say about it once.
pub(super) type Restored = (Vec<bool>, Vec<(usize, String)>);

impl Engine {
    /// Puts every worker whose gateway fell back in an earlier process of `run` back
    /// in its fallback mode. Returns, per worker, whether it is in it, and what to say
    /// once about each one that is.
    pub(super) fn restore_fallbacks(
        &self,
        run: &RunId,
        roster: &Roster,
        gateways: &[Option<Arc<dyn Gateway>>],
    ) -> Result<Restored> {
        let mut fallen = vec![false; gateways.len()];
        let mut notices = Vec::new();
        // Only a run with a worker that can fall back reads its events for it.
        if gateways
            .iter()
            .flatten()
            .all(|g| g.fallback_mode().is_none())
        {
            return Ok((fallen, notices));
        }
        for stored in self.store.events(run, 0)? {
            let EventKind::WorkerFellBack {
                worker,
                mode,
                reason,
            } = &stored.event.kind
            else {
                continue;
            };
            let Some(i) = roster.workers.iter().position(|w| &w.id == worker) else {
                continue;
            };
            // A roster replaced since (another model, `structured` set) has no such
            // fallback, or has made it its configured mode.
            let Some(gateway) = gateways[i].as_ref() else {
                continue;
            };
            if fallen[i] || gateway.fallback_mode() != Some(mode.as_str()) {
                continue;
            }
            gateway.fall_back();
            fallen[i] = true;
            let since = stored
                .event
                .turn
                .map(|t| format!(" since turn {t}"))
                .unwrap_or_default();
            notices.push((
                i,
                format!(
                    "worker {worker} asks for its claim with structured = \"{mode}\", as it has{since} of this run, when {reason}; set structured = \"{mode}\" in the roster to make it the worker's mode"
                ),
            ));
        }
        Ok((fallen, notices))
    }

    /// The event recording that `worker`'s gateway fell back during this turn's calls,
    /// once per run.
    pub(super) fn fell_back(
        &self,
        session: &mut Session,
        worker: usize,
        turn: u32,
        at: Timestamp,
    ) -> Option<Event> {
        let gateway = session.gateways[worker].as_ref()?;
        let mode = gateway.fallback_mode()?;
        if session.fallen_back[worker] || !gateway.has_fallen_back() {
            return None;
        }
        session.fallen_back[worker] = true;
        Some(Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at,
            kind: EventKind::WorkerFellBack {
                worker: session.config.roster.workers[worker].id.clone(),
                mode: mode.to_string(),
                reason: "a forced tool call ran to the output limit".into(),
            },
        })
    }

    /// What to say, once, about `worker` starting in a fallback mode.
    pub(super) fn fallback_notices(session: &mut Session, worker: usize) -> Vec<String> {
        let (said, kept) = std::mem::take(&mut session.fallback_notices)
            .into_iter()
            .partition(|(w, _)| *w == worker);
        session.fallback_notices = kept;
        said.into_iter().map(|(_, text)| text).collect()
    }
}
