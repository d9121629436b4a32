//! A unit of the assembly line that works in a git repository (`baton line --repo`): its
//! own worktree and branch, made when the unit starts and opened again at every resume
//! (put back at the last committed turn's commit, what came after set aside), every
//! lane's turn committed there as a job's turns are, the gates run at the route's gate
//! station on the last turn's commit, and, at its merge station, the branch's patch
//! and a report of the unit written to the outbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::ids::RunId;
use baton_workspace::{Repo, WorkspaceSpec, branch_for_job};
use serde::{Deserialize, Serialize};

use super::gates::GateSpec;
use super::git_hook::GitHook;
use crate::config::Roster;
use crate::orchestrator::{Engine, Session};
use crate::{Error, Result};

/// Where a unit works: the repository, the commit it starts from, and its gates. Kept
/// with the unit's configuration, so a resume on another day starts where it was
/// planned, not at that day's HEAD.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitRepo {
    /// The repository's checkout.
    pub repo: PathBuf,
    /// The commit the unit starts from.
    pub base: String,
    /// The branch `base` was taken from, when it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// Where its worktree goes (`<repo>/.baton/worktrees` by default), and the outbox.
    pub worktree_root: PathBuf,
    /// What the gate station runs.
    #[serde(default)]
    pub gates: Vec<GateSpec>,
    /// The merge station lands the branch on `base_branch` (`--merge`) after a final
    /// drift check, besides writing the outbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge: bool,
}

fn ws(e: baton_workspace::Error) -> Error {
    Error::Workspace(e)
}

impl UnitRepo {
    /// The repository at `repo`, starting from `base` (HEAD when none), with `gates`.
    /// The roster's scratch files are kept out of the repository's status, as a job's.
    pub fn new(
        repo: &Path,
        base: Option<&str>,
        gates: Vec<GateSpec>,
        roster: &Roster,
    ) -> Result<UnitRepo> {
        let opened = Repo::open(repo).map_err(ws)?;
        let base_rev = base.unwrap_or("HEAD");
        let resolved = opened.resolve(base_rev).map_err(ws)?;
        let base_branch = match base {
            Some(b) if opened.resolve(&format!("refs/heads/{b}")).is_ok() => Some(b.to_string()),
            Some(_) => None,
            None => opened.current_branch().map_err(ws)?,
        };
        super::runner::exclude_scratch(&opened, roster)?;
        Ok(UnitRepo {
            repo: opened.workdir().to_path_buf(),
            base: resolved,
            base_branch,
            worktree_root: opened.default_worktree_root(),
            gates,
            merge: false,
        })
    }

    /// The directory the outbox's files go in.
    pub fn outbox_dir(&self) -> PathBuf {
        let root = if self.worktree_root.is_absolute() {
            self.worktree_root.clone()
        } else {
            self.repo.join(&self.worktree_root)
        };
        root.join("outbox")
    }

    /// The unit's branch.
    pub fn branch(unit: &RunId) -> String {
        branch_for_job(&unit.0)
    }
}

/// Opens the unit's worktree for `session` (made on its first open) and puts it back
/// at the last committed turn's commit: a turn that never reached the store left
/// nothing the next one builds on. Returns notes for the user (what was set aside).
/// A unit with no repository is left as it is.
pub fn attach(engine: &Engine, session: &mut Session) -> Result<Vec<String>> {
    let Some(unit) = session.config.unit_repo.clone() else {
        return Ok(Vec::new());
    };
    let id = session.run.0.clone();
    let repo = Repo::open(&unit.repo).map_err(ws)?;
    let existing = repo
        .job_worktree_path(&id, &unit.worktree_root)
        .map_err(ws)?;
    let workspace = if existing.is_dir() {
        repo.open_workspace(
            &id,
            &UnitRepo::branch(&session.run),
            &unit.base,
            &unit.worktree_root,
        )
        .map_err(ws)?
    } else {
        repo.create_workspace(&WorkspaceSpec {
            job_id: id.clone(),
            base: unit.base.clone(),
            base_branch: unit.base_branch.clone(),
            root: unit.worktree_root.clone(),
        })
        .map_err(ws)?
    };
    let last = engine
        .store()
        .turns(&session.run)?
        .iter()
        .rev()
        .find_map(|t| t.workspace.as_ref().map(|w| w.commit.clone()))
        .unwrap_or_else(|| unit.base.clone());
    let root = if unit.worktree_root.is_absolute() {
        unit.worktree_root.clone()
    } else {
        unit.repo.join(&unit.worktree_root)
    };
    let roster = &session.config.roster;
    let hook = GitHook {
        workspace,
        job_id: id.clone(),
        gates: unit.gates.clone(),
        // The gate station runs them, not each turn.
        gate_each_turn: false,
        gate_dir: root.join(format!("{id}-gates")),
        hide: (roster.workers.iter())
            .filter_map(|w| w.api_key_env.clone())
            .collect(),
        keys: session.redactor().clone(),
        // The run's lease guards the unit: `Engine::open` took it.
        fence: None,
        last_commit: std::sync::Mutex::new(last.clone()),
        cancel: session.cancel.clone(),
    };
    let mut notes = Vec::new();
    if let Some(saved) = hook.reset_to(&last, "uncommitted work found when the unit was resumed")? {
        notes.push(format!(
            "work after the last committed turn was set aside at {saved} before resuming"
        ));
    }
    session.workspace = Some(Arc::new(hook));
    Ok(notes)
}

/// What the merge station wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitOutbox {
    pub branch: String,
    pub base: String,
    pub head: String,
    /// What `--merge` did (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<baton_workspace::Landing>,
    pub patch_file: PathBuf,
    pub report_file: PathBuf,
    pub files_changed: usize,
    pub insertions: u64,
    pub deletions: u64,
}

/// The merge station of a unit with a repository: the branch's patch against the base
/// and the unit's report in the outbox, then the station's turn (worker `baton`) with
/// where they are. With `--merge` the branch is landed on its base branch too
/// (`Repo::land`: a final drift check, then a fast-forward, or a merge commit when the
/// base moved on other files); otherwise the branch and the patch are the result, for a
/// human to take.
pub fn merge(engine: &Engine, session: &mut Session, station: &str) -> Result<UnitOutbox> {
    let Some(unit) = session.config.unit_repo.clone() else {
        return Err(Error::Config(format!(
            "unit {} has no repository; its record is the result",
            session.run
        )));
    };
    let repo = Repo::open(&unit.repo).map_err(ws)?;
    let branch = UnitRepo::branch(&session.run);
    let workspace = repo
        .open_workspace(&session.run.0, &branch, &unit.base, &unit.worktree_root)
        .map_err(ws)?;
    let head = workspace.head().map_err(ws)?;
    let stat = workspace.diff_stat(&unit.base, &head).map_err(ws)?;
    let patch = workspace.patch(&unit.base, &head).map_err(ws)?;
    let dir = unit.outbox_dir();
    std::fs::create_dir_all(&dir)?;
    let patch_file = dir.join(format!("{}.patch", session.run));
    std::fs::write(&patch_file, patch)?;
    let landing = match (&unit.base_branch, unit.merge) {
        (_, false) => None,
        (Some(b), true) => Some(repo.land(&workspace, b).map_err(ws)?),
        (None, true) => Some(baton_workspace::Landing::Refused {
            base_branch: short(&unit.base).to_string(),
            why: "the unit started from a commit, not a branch (`--base REV`), so there is no branch to merge into".into(),
        }),
    };
    let outbox = UnitOutbox {
        branch,
        base: unit.base.clone(),
        head,
        landing,
        patch_file,
        report_file: dir.join(format!("{}.md", session.run)),
        files_changed: stat.files_changed,
        insertions: stat.insertions,
        deletions: stat.deletions,
    };
    let mut task = format!(
        "Merge at {station}: branch {} at {} ({} file(s), +{} -{}), patch {}, report {}",
        outbox.branch,
        short(&outbox.head),
        outbox.files_changed,
        outbox.insertions,
        outbox.deletions,
        outbox.patch_file.display(),
        outbox.report_file.display()
    );
    if let Some(landing) = &outbox.landing {
        task.push_str("; ");
        task.push_str(&landing.describe());
    }
    // The merge turn's commit is where the unit's branch is now (a merge commit when
    // the landing made one), so a resume puts the worktree there.
    let at = match &outbox.landing {
        Some(baton_workspace::Landing::Merged { to, .. }) => to.clone(),
        _ => outbox.head.clone(),
    };
    engine.record_merge(session, task, &at)?;
    // The report is written after the merge's turn, so it has every turn of the unit.
    let report = super::unit_report::markdown(engine, session, Some(&outbox))?;
    std::fs::write(&outbox.report_file, report)?;
    Ok(outbox)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
