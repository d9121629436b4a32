//! What changed around a job's workspace while baton was not looking.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::git::{Git, os};
use crate::repo::Repo;
use crate::workspace::Workspace;

/// Differences between a workspace and what baton recorded about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// The base branch moved: `(recorded base, where the branch is now)`.
    pub base_moved: Option<(String, String)>,
    /// HEAD is no longer on the job's branch: the branch it is on, or `detached at <sha>`.
    pub branch_changed: Option<String>,
    /// Commits on the job's branch since its base that baton did not make for this job
    /// (no `Baton-Job` trailer naming it), oldest first.
    pub commits_outside_baton: Vec<String>,
}

impl Drift {
    /// Nothing drifted.
    pub fn is_clean(&self) -> bool {
        self.base_moved.is_none()
            && self.branch_changed.is_none()
            && self.commits_outside_baton.is_empty()
    }
}

impl Repo {
    /// Compares the workspace with its record: has `base_branch` moved past the recorded
    /// base, was the worktree switched to another branch, and did anyone commit on the
    /// job's branch without baton's trailers.
    pub fn drift(&self, ws: &Workspace, base_branch: Option<&str>) -> Result<Drift> {
        let base_moved = match base_branch {
            Some(branch) => {
                let now = self.resolve(branch)?;
                (now != ws.base).then(|| (ws.base.clone(), now))
            }
            None => None,
        };
        let branch_changed = match ws.actual_branch()? {
            Some(actual) if actual == ws.branch => None,
            Some(actual) => Some(actual),
            None => Some(format!("detached at {}", ws.resolve("HEAD")?)),
        };

        let range = format!("{}..refs/heads/{}", ws.base, ws.branch);
        let commits_outside_baton = commits_not_by(&self.git(), &ws.job_id, &[&range])?;
        Ok(Drift {
            base_moved,
            branch_changed,
            commits_outside_baton,
        })
    }
}

/// The commits `revs` name (a range, or revisions and `^`exclusions) that carry no
/// `Baton-Job` trailer naming `job_id`, oldest first.
pub(crate) fn commits_not_by(git: &Git, job_id: &str, revs: &[&str]) -> Result<Vec<String>> {
    let mut args = vec![
        os("rev-list"),
        os("--reverse"),
        os("--no-commit-header"),
        // One line per commit: the sha, then every Baton-Job value, unit-separated.
        os("--format=%H%x1f%(trailers:key=Baton-Job,valueonly,unfold,separator=%x1f)"),
    ];
    args.extend(revs.iter().map(|r| os(r)));
    let out = git.run(&args)?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\x1f');
            let sha = fields.next().filter(|s| !s.is_empty())?;
            let ours = fields.any(|job| job.trim() == job_id);
            (!ours).then(|| sha.to_owned())
        })
        .collect())
}
