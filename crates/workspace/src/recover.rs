//! Putting a worktree back at a commit without losing what came after it: a failed
//! turn's edits, a crashed process's half turn, a gate's side effects, or what a worker
//! that lost its job left behind are saved under `refs/baton/discarded/…` first.

use std::path::Path;

use crate::error::Result;
use crate::git::{Git, os};
use crate::workspace::Workspace;

/// Saves what `dir` holds beyond `commit` — uncommitted edits, or commits after it — as
/// a commit under `refs/baton/discarded/<job>/<time>`, whose name is returned (`None`
/// when there is nothing beyond `commit`). Nothing in the worktree changes, except its
/// index (which `git add -A` refreshes). `dir` need not be a [`Workspace`] this process
/// opened: it may be the worktree of a worker that lost the job.
pub fn set_aside(dir: &Path, job_id: &str, commit: &str, why: &str) -> Result<Option<String>> {
    let git = Git::new(dir);
    let head = git.line(&[os("rev-parse"), os("HEAD")])?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let name = format!("refs/baton/discarded/{job_id}/{stamp}");
    let status = git.run(&[os("status"), os("--porcelain")])?;
    if status.trim_ascii().is_empty() {
        // A clean worktree ahead of `commit`: a turn whose git commit was made but
        // whose store commit never was (killed during its gates). Kept, by name.
        if head == commit {
            return Ok(None);
        }
        git.run(&[os("update-ref"), os(&name), os(&head)])?;
        return Ok(Some(name));
    }
    git.run(&[os("add"), os("-A")])?;
    let tree = git.line(&[os("write-tree")])?;
    let message = format!("baton: {why} (job {job_id}), kept for recovery");
    let sha = git.line(&[
        os("-c"),
        os("user.name=baton"),
        os("-c"),
        os("user.email=baton@localhost"),
        os("commit-tree"),
        os(&tree),
        os("-p"),
        os("HEAD"),
        os("-m"),
        os(&message),
    ])?;
    git.run(&[os("update-ref"), os(&name), os(&sha)])?;
    Ok(Some(name))
}

impl Workspace {
    /// Puts the worktree's files, index and HEAD at `commit` and removes untracked
    /// files; ignored ones (baton's `.baton/` scratch area among them) stay. Call
    /// [`set_aside`] first to keep what this discards.
    pub fn reset_hard(&self, commit: &str) -> Result<()> {
        let git = self.git();
        git.run(&[os("reset"), os("--hard"), os("--quiet"), os(commit)])?;
        git.run(&[os("clean"), os("-fd"), os("--quiet")])?;
        Ok(())
    }

    /// Moves HEAD back to `commit`, keeping the index and the files: commits an agent
    /// made on its own become part of the turn's one commit.
    pub fn reset_soft(&self, commit: &str) -> Result<()> {
        let args = [os("reset"), os("--soft"), os("--quiet"), os(commit)];
        self.git().run(&args).map(|_| ())
    }
}
