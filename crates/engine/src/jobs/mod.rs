//! Jobs: queue → claim → isolate → converse → commit → outbox → judge.
//!
//! A job is one candidate's attempt at a plan in its own git worktree. `enqueue` records
//! the plan, the repository's base commit, the gates and the candidate's roster;
//! `work` claims jobs under a lease renewed by a heartbeat and runs them, every turn a
//! commit on the job's branch, every store write fenced by the lease token, so a worker
//! whose lease was taken over cannot commit. A killed worker's job is reclaimed once its
//! lease expires and resumes from its last committed turn.

pub mod events;
pub mod gates;
pub mod git_hook;
pub mod judge;
pub mod runner;
pub mod unit;
pub mod unit_report;

use std::path::PathBuf;

use baton_core::ids::RunId;
use baton_core::router::SeatId;
use baton_core::step_scope::StepScope;
use baton_core::step_tag::StepTag;
use baton_core::turn::GateResult;
use baton_store::{NewJob, Store};
use baton_workspace::{DiffStat, Repo};
use serde::{Deserialize, Serialize};

pub use gates::GateSpec;

/// Held shared by git work inside a job's worktree, exclusively while a worktree is
/// created: `git worktree add` fails when it reads another worktree's administrative
/// files mid-write.
pub(crate) static GIT_WORKTREES: std::sync::RwLock<()> = std::sync::RwLock::new(());

use crate::clock::Clock;
use crate::config::{Roster, RunSettings};
use crate::{Error, Result};

/// What `enqueue` records for a job (the store keeps it as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub objective: String,
    pub tasks: Vec<String>,
    /// The repository's checkout.
    pub repo: PathBuf,
    /// The commit the job starts from, recorded at enqueue time.
    pub base: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// Where its worktree goes (one directory per job).
    pub worktree_root: PathBuf,
    #[serde(default)]
    pub gates: Vec<GateSpec>,
    /// Run the gates after every turn, not only after the last.
    #[serde(default)]
    pub gate_each_turn: bool,
    /// Turns given to fixing gates that fail at the end of the job.
    #[serde(default = "default_fix_turns")]
    pub fix_turns: u32,
    /// The candidate's workers (no secrets: keys are named, never stored).
    pub roster: Roster,
    pub settings: RunSettings,
    /// What the judge scores candidates against, fixed at enqueue time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
    /// A label for humans (the candidate's worker ids); never shown to the judge.
    pub candidate: String,
    /// Each step's seat, tags and scope, in the tasks' order (see `RunSpec`).
    #[serde(default, skip_serializing_if = "StepFlags::is_empty")]
    pub steps: StepFlags,
}

/// What a plan's steps say beyond their titles, in the tasks' order: each one's budget,
/// the seat it fills when the run is routed, its tags and its scope (as `RunSpec` has
/// them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepFlags {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Option<usize>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<Option<SeatId>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Vec<StepTag>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<Option<StepScope>>,
}

impl StepFlags {
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty()
            && self.seats.is_empty()
            && self.tags.is_empty()
            && self.scopes.is_empty()
    }
}

/// What a finished job leaves in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outbox {
    pub run_id: RunId,
    pub branch: String,
    pub base: String,
    pub head: String,
    pub worktree: PathBuf,
    /// `git diff --binary base head`, written next to the worktrees.
    pub patch_file: PathBuf,
    pub diff: DiffStat,
    pub turns: u32,
    /// The gates' last runs.
    #[serde(default)]
    pub gates: Vec<GateResult>,
    /// How the run ended (`finished`, or the question it stopped on).
    pub ended: String,
    /// Drift noticed while the job ran (base moved, commits made outside baton).
    #[serde(default)]
    pub drift: Vec<String>,
}

/// A request to queue work: one job per candidate.
#[derive(Debug, Clone)]
pub struct EnqueueRequest {
    pub objective: String,
    pub tasks: Vec<String>,
    pub repo: PathBuf,
    /// A branch, tag or commit; `HEAD` by default.
    pub base: Option<String>,
    pub worktree_root: Option<PathBuf>,
    pub gates: Vec<GateSpec>,
    pub gate_each_turn: bool,
    /// Turns given to fixing gates that fail at the end of the job.
    pub fix_turns: u32,
    /// Each candidate's roster (one job each).
    pub candidates: Vec<Roster>,
    pub settings: RunSettings,
    pub rubric: Option<String>,
    pub steps: StepFlags,
}

/// Gate-fix turns a job gets by default.
pub const DEFAULT_FIX_TURNS: u32 = 2;

fn default_fix_turns() -> u32 {
    DEFAULT_FIX_TURNS
}

/// Ids of what `enqueue` created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    pub group: String,
    pub jobs: Vec<String>,
    pub base: String,
}

/// A new id with a prefix (`j…` a job, `g…` a group, `lease-…` a lease token): a
/// UUIDv7 in 32 lowercase hex digits. Its 74 random bits make it unique across
/// processes and machines sharing one database (a hash of time, pid and a counter
/// collided between machines); its leading 48-bit millisecond time keeps ids in
/// creation order, so the store's index on them stays append-mostly.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::now_v7().simple())
}

pub fn enqueue(store: &dyn Store, clock: &dyn Clock, req: &EnqueueRequest) -> Result<Enqueued> {
    if req.objective.trim().is_empty() {
        return Err(Error::Config(
            "the objective is empty; pass --objective \"…\"".into(),
        ));
    }
    if req.tasks.iter().all(|t| t.trim().is_empty()) {
        return Err(Error::Config(
            "the plan has no steps; pass at least one --task \"…\"".into(),
        ));
    }
    if req.candidates.is_empty() {
        return Err(Error::Config(
            "no candidate: pass --worker ID (from the roster) at least once".into(),
        ));
    }
    req.settings.validate()?;
    for c in &req.candidates {
        // Every option, step flag and seat now, not when a worker claims the job and
        // fails it for good.
        crate::orchestrator::planned_state(
            &crate::orchestrator::RunSpec {
                objective: req.objective.clone(),
                tasks: req.tasks.clone(),
                step_budgets: req.steps.budgets.clone(),
                step_seats: req.steps.seats.clone(),
                step_tags: req.steps.tags.clone(),
                step_scopes: req.steps.scopes.clone(),
                roster: c.clone(),
                settings: req.settings.clone(),
            },
            crate::orchestrator::Place::Job,
            RunId("queued".into()),
        )?;
    }
    let ws = Error::Workspace;
    let repo = Repo::open(&req.repo).map_err(ws)?;
    let base_rev = req.base.clone().unwrap_or_else(|| "HEAD".into());
    let base = repo.resolve(&base_rev).map_err(ws)?;
    let base_branch = match &req.base {
        Some(b) if repo.resolve(&format!("refs/heads/{b}")).is_ok() => Some(b.clone()),
        Some(_) => None,
        None => repo.current_branch().map_err(ws)?,
    };
    // Keep baton's directory (database, worktrees) and the agents' own files out of
    // the checkout's `git status`.
    for roster in &req.candidates {
        runner::exclude_scratch(&repo, roster)?;
    }
    let root = req
        .worktree_root
        .clone()
        .unwrap_or_else(|| repo.default_worktree_root());
    let group = new_id("g");
    let mut jobs = Vec::new();
    for roster in &req.candidates {
        let label = roster.ids();
        let spec = JobSpec {
            objective: req.objective.trim().to_string(),
            tasks: req
                .tasks
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect(),
            repo: repo.workdir().to_path_buf(),
            base: base.clone(),
            base_branch: base_branch.clone(),
            worktree_root: root.clone(),
            gates: req.gates.clone(),
            gate_each_turn: req.gate_each_turn,
            fix_turns: req.fix_turns,
            roster: roster.clone(),
            settings: req.settings.clone(),
            rubric: req.rubric.clone(),
            candidate: label.clone(),
            steps: req.steps.clone(),
        };
        let id = new_id("j");
        let spec = serde_json::to_value(&spec).map_err(crate::unencodable("a job's spec"))?;
        store.enqueue_job(&NewJob {
            id: id.clone(),
            group: group.clone(),
            spec,
            created_at: clock.now(),
        })?;
        jobs.push(id);
    }
    Ok(Enqueued { group, jobs, base })
}

pub fn decode_spec(job: &baton_store::JobInfo) -> Result<JobSpec> {
    serde_json::from_value(job.spec.clone()).map_err(|e| {
        Error::Store(baton_store::Error::Corrupt {
            what: format!("spec of job {}", job.id),
            detail: e.to_string(),
        })
    })
}

pub fn decode_outbox(job: &baton_store::JobInfo) -> Result<Option<Outbox>> {
    match &job.outbox {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| {
            Error::Store(baton_store::Error::Corrupt {
                what: format!("outbox of job {}", job.id),
                detail: e.to_string(),
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: ids were 40 (jobs) or 48 (runs) bits of a hash of the time, the pid
    /// and a per-process counter, so processes on two machines sharing a database could
    /// mint the same id. They are UUIDv7 now: random enough to never collide, and in
    /// creation order.
    #[test]
    fn ids_are_uuidv7_unique_across_threads_and_in_creation_order() {
        let ids: Vec<String> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..2_000).map(|_| new_id("j")).collect::<Vec<_>>()))
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "an id was minted twice");
        for id in &ids {
            let hex = id.strip_prefix('j').unwrap();
            assert_eq!(hex.len(), 32, "{id}");
            let parsed = uuid::Uuid::parse_str(hex).unwrap();
            assert_eq!(parsed.get_version_num(), 7, "{id}");
        }
        let first = new_id("");
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(first < new_id(""), "later ids sort after earlier ones");
    }
}
