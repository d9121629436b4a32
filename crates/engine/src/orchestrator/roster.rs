//! Changing a run's roster after the fact, and checking a roster before a run exists.

use baton_core::ids::RunId;
use baton_protocol::{EventKind, EventMsg as Event};

use super::open::build_gateway;
use super::{Engine, RunConfig};
use crate::config::{Roster, WorkerConfig};
use crate::{Error, Result};

impl Engine {
    /// Replaces a run's roster (a wrong model, provider or base URL fixed in the roster
    /// file): validated first, recorded as a `RosterChanged` event with what changed
    /// and from where (stored and published), and used by every later turn. Returns the changes, one line each
    /// (empty when the roster is the same).
    pub fn change_roster(&self, run: &RunId, roster: &Roster, source: &str) -> Result<Vec<String>> {
        roster.validate()?;
        // A job's run, or a unit's in a repository, may have command workers; any
        // other may not.
        let place = if self
            .store
            .list_jobs()?
            .iter()
            .any(|j| j.run_id.as_ref() == Some(run))
            || self.store.run_info(run)?.config.get("unit_repo").is_some()
        {
            Place::Job
        } else if self.store.run_info(run)?.config.get("line").is_some() {
            Place::Unit
        } else {
            Place::Run
        };
        check_roster(roster, None, false, place)?;
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
        let value =
            serde_json::to_value(&config).map_err(crate::unencodable("a run's configuration"))?;
        let event = Event {
            run_id: run.clone(),
            turn: None,
            at: self.clock.now(),
            kind: EventKind::RosterChanged {
                source: source.to_string(),
                changes: changes.clone(),
            },
        };
        let seqs = self
            .store
            .set_run_config(run, &value, std::slice::from_ref(&event))?;
        // Live too: whoever follows the run (`baton -v`, a subscriber) sees the change.
        self.published(&seqs, std::slice::from_ref(&event));
        Ok(changes)
    }
}

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
pub fn check_roster(
    roster: &Roster,
    keys: Option<&Roster>,
    credentials: bool,
    place: Place,
) -> Result<()> {
    let roster = match keys {
        Some(k) => with_keys(roster.clone(), k),
        None => roster.clone(),
    };
    for w in roster.workers.iter().filter(|w| w.enabled) {
        let gateway = match build_gateway(w) {
            Err(Error::Gateway {
                error: baton_gateway::Error::Auth { .. },
                ..
            }) if !credentials => {
                // The key may come later; every other option is checked now, with a
                // stand-in key that never leaves this function (no call is made).
                let mut w = w.clone();
                let stand_in = baton_gateway::Credential::new("placeholder-key-for-checking");
                w.api_key = Some(stand_in.map_err(|error| Error::Gateway {
                    worker: w.id.to_string(),
                    error,
                })?);
                build_gateway(&w)?
            }
            other => other?,
        };
        if place != Place::Job && gateway.needs_workspace() {
            return Err(Error::Config(match place {
                Place::Unit => format!(
                    "worker {} ({}) works in a git worktree, which a unit has only in a repository: \
                     run the unit with `baton line \"…\" --repo PATH`",
                    w.id, w.model
                ),
                _ => format!(
                    "worker {} ({}) works in a git worktree, which only a job has: queue the work \
                     with `baton enqueue --worker {}` and run it with `baton work`",
                    w.id, w.model, w.id
                ),
            }));
        }
    }
    Ok(())
}

/// Where a roster's workers will work: a plain run (API models only), a unit of the
/// line without a repository (API models only too), or a job or a unit in a repository
/// (a git worktree, where command workers run too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Run,
    Unit,
    Job,
}
