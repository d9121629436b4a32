//! The job ops: queueing candidates and judging them.

use std::path::PathBuf;

use baton_protocol::Op;

use super::{OpContext, OpOutcome, Started};
use crate::Engine;
use crate::config::{Floor, Roster, WorkerConfig};
use crate::jobs::{self as engine_jobs, EnqueueRequest, GateSpec, StepFlags};
use crate::{Error, Result};

pub(super) fn enqueue(engine: &Engine, ctx: &OpContext, op: Op) -> Result<OpOutcome> {
    let Op::Enqueue {
        objective,
        tasks,
        candidates,
        gates,
        gate_each_turn,
        fix_turns,
        sandbox,
        repo,
        base,
        worktrees,
        rubric,
        step_budgets,
        step_seats,
        step_tags,
        step_scopes,
        roster,
        settings,
    } = op
    else {
        return Err(Error::Internal {
            place: "ops::enqueue",
            detail: "called with another op".into(),
        });
    };
    let roster = ctx.roster(roster.as_ref(), "the op's roster")?;
    let settings = ctx.settings(&settings);
    let mut rosters = candidates
        .iter()
        .map(|spec| candidate(&roster, spec, &settings.floor))
        .collect::<Result<Vec<_>>>()?;
    for r in &mut rosters {
        confine(r, sandbox.map(baton_protocol::Sandbox::name), &ctx.hidden);
    }
    let request = EnqueueRequest {
        objective,
        tasks,
        repo: repo.unwrap_or_else(|| PathBuf::from(".")),
        base,
        worktree_root: worktrees,
        gates: gates
            .iter()
            .map(|g| {
                GateSpec::try_parse(g).ok_or_else(|| Error::GateWithoutCommand { gate: g.clone() })
            })
            .collect::<Result<_>>()?,
        gate_each_turn,
        fix_turns: fix_turns.unwrap_or(engine_jobs::DEFAULT_FIX_TURNS),
        candidates: rosters.clone(),
        // With pools or seats configured, the router seats every job's turns from its
        // candidate's workers (see `crate::seating`).
        settings,
        rubric,
        steps: StepFlags {
            budgets: step_budgets,
            seats: step_seats
                .into_iter()
                .map(|s| s.map(baton_core::router::SeatId::new))
                .collect(),
            tags: step_tags,
            scopes: step_scopes,
        },
    };
    let queued = engine_jobs::enqueue(engine.store().as_ref(), engine.clock(), &request)?;
    Ok(OpOutcome::Enqueued {
        queued,
        candidates: rosters,
    })
}

/// A candidate's roster from `a` or `a+b`, by roster id or preset name.
fn candidate(roster: &Roster, spec: &str, floor: &Floor) -> Result<Roster> {
    let mut workers = Vec::new();
    for id in spec.split('+').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(w) = roster.workers.iter().find(|w| w.id.as_str() == id) {
            workers.push(w.clone());
        } else if baton_gateway::command::preset(id).is_some() && !floor.pools.is_empty() {
            // A preset has no pool, and a routed job's every worker needs one.
            return Err(Error::Config(format!(
                "candidate {id} is a coding agent's preset with no [[workers]] entry, but pools are defined ({}), so its calls would count against no allowance; add [[workers]] id = \"{id}\", model = \"command/{id}\", family = \"{id}\", pool = \"…\", options = {{ preset = \"{id}\", handoff = \"derive\" }} to the configuration",
                floor.pool_ids()
            )));
        } else if baton_gateway::command::preset(id).is_some() {
            let mut w = WorkerConfig::mock(id, id);
            w.model = format!("command/{id}");
            w.family = id.to_string();
            w.options.insert("preset".into(), id.into());
            // One agent run per turn: its handoff report is derived from its claim.
            w.options.insert("handoff".into(), "derive".into());
            workers.push(w);
        } else {
            return Err(Error::UnknownCandidate {
                id: id.to_string(),
                known: roster.ids(),
                presets: baton_gateway::command::preset_names(),
            });
        }
    }
    if workers.is_empty() {
        return Err(Error::UnknownCandidate {
            id: spec.to_string(),
            known: roster.ids(),
            presets: baton_gateway::command::preset_names(),
        });
    }
    Ok(Roster { workers })
}

/// Applies `sandbox` to a candidate's command workers, and hides `hidden` (baton's
/// database and its WAL files) from every sandboxed one: the agent must not read the
/// other candidates' records.
fn confine(roster: &mut Roster, sandbox: Option<&str>, hidden: &[PathBuf]) {
    for w in &mut roster.workers {
        if !w.model.starts_with("command/") {
            continue;
        }
        if let Some(mode) = sandbox
            && !w.options.contains_key("sandbox")
        {
            w.options.insert("sandbox".into(), mode.into());
        }
        if w.options.get("sandbox").and_then(|v| v.as_str()) != Some("bwrap") {
            continue;
        }
        let mut hide = match w.options.remove("sandbox_hide") {
            Some(serde_json::Value::Array(items)) => items,
            Some(other) => vec![other],
            None => Vec::new(),
        };
        for path in hidden {
            let path = path.display().to_string();
            if !hide.iter().any(|h| h.as_str() == Some(path.as_str())) {
                hide.push(path.into());
            }
        }
        w.options.insert("sandbox_hide".into(), hide.into());
    }
}

pub(super) fn judge(
    engine: &Engine,
    ctx: &OpContext,
    target: &str,
    judge: Option<&str>,
    started: &mut dyn FnMut(Started<'_>),
) -> Result<OpOutcome> {
    let store = engine.store();
    let group = if store.list_jobs()?.iter().any(|j| j.group == target) {
        target.to_string()
    } else {
        store.job(&store.resolve_job(target)?)?.group
    };
    let mut worker = judging_worker(&ctx.roster, judge)?;
    if worker.api_key.is_none()
        && let Some(keys) = &ctx.keys
    {
        worker.api_key = keys
            .workers
            .iter()
            .find(|k| k.id == worker.id)
            .and_then(|k| k.api_key.clone());
    }
    let gateway = crate::orchestrator::build_gateway(&worker)?;
    let run = engine_jobs::judge::JudgeRun {
        publisher: engine.publisher().clone(),
        cancel: ctx.cancel.clone(),
    };
    let watch = engine_jobs::judge::watch_cancel(store.clone(), &group, run.cancel.clone())?;
    started(Started::Judging {
        group: &group,
        judge: &worker,
    });
    let judged = engine_jobs::judge::judge_with(
        store.as_ref(),
        engine.clock(),
        &group,
        &worker,
        gateway.as_ref(),
        &run,
    );
    drop(watch);
    Ok(OpOutcome::Judged(Box::new(judged?)))
}

/// The roster's worker `id`, or its first enabled API model: a command worker needs
/// a worktree to run in, and the judge reads patches.
fn judging_worker(roster: &Roster, id: Option<&str>) -> Result<WorkerConfig> {
    let can_judge = |w: &WorkerConfig| !w.model.starts_with("command/");
    let api_models = || {
        roster
            .workers
            .iter()
            .filter(|w| can_judge(w))
            .map(|w| w.id.to_string())
            .collect::<Vec<_>>()
    };
    match id {
        Some(id) => {
            let w = roster.find(id)?;
            if !can_judge(w) {
                return Err(Error::CannotJudge {
                    worker: id.to_string(),
                    model: w.model.clone(),
                    api_models: api_models(),
                });
            }
            Ok(w.clone())
        }
        None => roster
            .workers
            .iter()
            .find(|w| w.enabled && can_judge(w))
            .cloned()
            .ok_or_else(|| Error::NoJudge {
                roster: roster.ids(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bwrap-confined agent is kept from baton's database; an unconfined one and an
    /// API worker are left as they are, and a worker's own sandbox wins.
    #[test]
    fn confine_hides_the_database_from_sandboxed_agents_only() {
        let roster = Roster {
            workers: vec![WorkerConfig::mock("api", "m")],
        };
        let mut team = candidate(&roster, "api+claude+codex", &Floor::default()).unwrap();
        team.workers[2]
            .options
            .insert("sandbox".into(), "none".into());
        let hidden = [
            PathBuf::from("/db/baton.db"),
            PathBuf::from("/db/baton.db-wal"),
        ];
        confine(&mut team, Some("bwrap"), &hidden);
        confine(&mut team, Some("bwrap"), &hidden);
        let [api, claude, codex] = &team.workers[..] else {
            panic!("{team:?}")
        };
        assert!(!api.options.contains_key("sandbox"));
        assert_eq!(claude.options["sandbox"], "bwrap");
        assert_eq!(
            claude.options["sandbox_hide"],
            serde_json::json!(["/db/baton.db", "/db/baton.db-wal"]),
            "each path once, however often confined"
        );
        assert_eq!(codex.options["sandbox"], "none");
        assert!(!codex.options.contains_key("sandbox_hide"));
    }
}
