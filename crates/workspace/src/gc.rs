//! Removing finished jobs' worktrees without ever losing uncommitted work.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::git::{Git, os, same_path};
use crate::repo::Repo;
use crate::workspace::{branch_for_job, dirty_paths};

/// Which finished jobs' worktrees to keep. A worktree is removed only when its job is
/// finished, it is not among the `keep_newest` most recently active finished ones, it
/// has been idle for at least `min_idle`, and it has no uncommitted changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    pub keep_newest: usize,
    pub min_idle: Duration,
}

impl Default for Retention {
    /// Keep the 5 most recent finished worktrees, and any touched in the last 24 hours.
    fn default() -> Self {
        Retention {
            keep_newest: 5,
            min_idle: Duration::from_secs(24 * 60 * 60),
        }
    }
}

/// What [`Repo::gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    pub removed: Vec<RemovedWorktree>,
    pub kept: Vec<KeptWorktree>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedWorktree {
    pub job_id: String,
    pub path: PathBuf,
    /// The branch, which is left in place with all the job's commits.
    pub branch: String,
    /// Where the agents' saved output (`<worktree>/.baton/output`: briefings, stdout,
    /// stderr, final messages, notes) was moved before the worktree was removed:
    /// `<root>/transcripts/<worktree name>`, the same `turn-N-call` directories inside.
    /// `None` when the worktree held none.
    pub transcripts: Option<PathBuf>,
}

/// Where an agent's output lives inside a worktree (the command gateway's default
/// `output_dir`), relative to the worktree.
pub const AGENT_OUTPUT_DIR: &str = ".baton/output";

/// Where `gc` keeps the agent output of the worktree `name` under `root`.
pub fn transcripts_dir(root: &Path, name: &str) -> PathBuf {
    root.join("transcripts").join(name)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptWorktree {
    pub job_id: String,
    pub path: PathBuf,
    pub reason: KeepReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeepReason {
    /// The job is not finished.
    Active,
    /// Among the `keep_newest` most recently active finished worktrees.
    Newest,
    /// Active less than `min_idle` ago.
    Recent { idle: Duration },
    /// Uncommitted changes (tracked, or untracked and not ignored) that removing it
    /// would destroy.
    Dirty { paths: Vec<String> },
    /// Locked with `git worktree lock`.
    Locked { reason: String },
    /// `git worktree remove` refused; git's message.
    RemoveFailed { error: String },
}

impl std::fmt::Display for KeepReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeepReason::Active => f.write_str("its job is not finished"),
            KeepReason::Newest => f.write_str("among the newest finished worktrees (--keep)"),
            KeepReason::Recent { idle } => write!(
                f,
                "used {:.1} h ago (--idle-hours)",
                idle.as_secs_f64() / 3600.0
            ),
            KeepReason::Dirty { paths } => {
                let shown: Vec<&str> = paths.iter().take(5).map(String::as_str).collect();
                write!(
                    f,
                    "uncommitted changes that removing it would destroy: {}{}",
                    shown.join(", "),
                    if paths.len() > shown.len() {
                        format!(" and {} more", paths.len() - shown.len())
                    } else {
                        String::new()
                    }
                )
            }
            KeepReason::Locked { reason } => write!(f, "locked ({reason})"),
            KeepReason::RemoveFailed { error } => write!(f, "git would not remove it: {error}"),
        }
    }
}

struct Candidate {
    job_id: String,
    path: PathBuf,
    branch: String,
    locked: Option<String>,
    last_active: SystemTime,
}

impl Repo {
    /// Removes worktrees of finished jobs under `root` as `policy` allows, then prunes
    /// stale registrations. Branches are left, so every turn's commit survives.
    ///
    /// Only directories `<root>/<job>` registered as worktrees on `baton/job-<job>` are
    /// considered; anything else under `root` is not baton's and is left alone.
    pub fn gc(
        &self,
        root: &Path,
        policy: &Retention,
        is_finished: &dyn Fn(&str) -> bool,
    ) -> Result<GcReport> {
        let root = self.absolute(root);
        let mut report = GcReport::default();
        let mut finished = Vec::new();
        for entry in self.worktrees()? {
            if entry.prunable {
                continue;
            }
            let (Some(parent), Some(name)) = (entry.path.parent(), entry.path.file_name()) else {
                continue;
            };
            let name = name.to_string_lossy();
            // A takeover's worktree is `<job>.<attempt>` (see `attempt_dir`); the one it
            // took over from was detached from the branch then.
            let job_id = crate::workspace::split_attempt_dir(&name).0.to_owned();
            let branch = branch_for_job(&job_id);
            let on_branch =
                entry.branch.as_deref() == Some(format!("refs/heads/{branch}").as_str());
            let detached_job_worktree =
                entry.branch.is_none() && crate::workspace::validate_job_id(&job_id).is_ok();
            if !same_path(parent, &root) || !(on_branch || detached_job_worktree) {
                continue;
            }
            if !is_finished(&job_id) {
                report.kept.push(KeptWorktree {
                    job_id,
                    path: entry.path,
                    reason: KeepReason::Active,
                });
                continue;
            }
            let last_active = last_active(&Git::new(&entry.path), &entry.path)?;
            finished.push(Candidate {
                job_id,
                path: entry.path,
                branch,
                locked: entry.locked,
                last_active,
            });
        }
        finished.sort_by_key(|c| std::cmp::Reverse(c.last_active));

        let now = SystemTime::now();
        let mut removed_any = false;
        for (rank, c) in finished.into_iter().enumerate() {
            let idle = now.duration_since(c.last_active).unwrap_or_default();
            let git = Git::new(&c.path);
            let reason = if rank < policy.keep_newest {
                Some(KeepReason::Newest)
            } else if idle < policy.min_idle {
                Some(KeepReason::Recent { idle })
            } else if let Some(reason) = c.locked.clone() {
                Some(KeepReason::Locked { reason })
            } else {
                let paths = dirty_paths(&git)?;
                (!paths.is_empty()).then_some(KeepReason::Dirty { paths })
            };
            if let Some(reason) = reason {
                report.kept.push(KeptWorktree {
                    job_id: c.job_id,
                    path: c.path,
                    reason,
                });
                continue;
            }
            // The agents' transcripts outlive the worktree: they are moved out first,
            // and a worktree whose transcripts cannot be moved is kept.
            let (transcripts, moved_whole) = match keep_transcripts(&root, &c.path) {
                Ok(Some((to, whole))) => (Some(to), whole),
                Ok(None) => (None, false),
                Err(error) => {
                    report.kept.push(KeptWorktree {
                        job_id: c.job_id,
                        path: c.path,
                        reason: KeepReason::RemoveFailed { error },
                    });
                    continue;
                }
            };
            // Without --force git re-checks for modified and untracked files itself, so
            // a file written between our status and this removal still stops it.
            let repo_git = self.git();
            let args = [os("worktree"), os("remove"), c.path.as_os_str()];
            let out = repo_git.output(&args)?;
            if out.status.success() {
                removed_any = true;
                report.removed.push(RemovedWorktree {
                    job_id: c.job_id,
                    path: c.path,
                    branch: c.branch,
                    transcripts,
                });
            } else {
                // The worktree stays, so its transcripts go back where its records say
                // (when merged into an older worktree's, they stay kept there).
                if let (Some(moved), true) = (&transcripts, moved_whole) {
                    let _ = std::fs::rename(moved, c.path.join(AGENT_OUTPUT_DIR));
                }
                // Say "dirty" when that is why git refused; otherwise git's own words.
                let reason = match dirty_paths(&git) {
                    Ok(paths) if !paths.is_empty() => KeepReason::Dirty { paths },
                    _ => KeepReason::RemoveFailed {
                        error: repo_git.failure(&args, &out).to_string(),
                    },
                };
                report.kept.push(KeptWorktree {
                    job_id: c.job_id,
                    path: c.path,
                    reason,
                });
            }
        }
        if removed_any {
            self.git().run(&[os("worktree"), os("prune")])?;
        }
        Ok(report)
    }
}

/// Moves `<worktree>/.baton/output` to [`transcripts_dir`]; `Ok(None)` when there is
/// nothing to keep, else where it went and whether the directory moved whole. An
/// existing destination (a worktree of the same name removed before) is merged into:
/// turn directories already there are not overwritten.
fn keep_transcripts(
    root: &Path,
    worktree: &Path,
) -> std::result::Result<Option<(PathBuf, bool)>, String> {
    let from = worktree.join(AGENT_OUTPUT_DIR);
    if !from.is_dir() {
        return Ok(None);
    }
    let name = worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let to = transcripts_dir(root, &name);
    let fail = |what: &str, e: std::io::Error| {
        format!(
            "could not keep the agents' output {}: {what}: {e}",
            from.display()
        )
    };
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail("creating its new place", e))?;
    }
    if !to.exists() {
        std::fs::rename(&from, &to)
            .map_err(|e| fail(&format!("moving it to {}", to.display()), e))?;
        return Ok(Some((to, true)));
    }
    let entries = std::fs::read_dir(&from).map_err(|e| fail("listing it", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| fail("listing it", e))?;
        let mut dest = to.join(entry.file_name());
        let mut n = 1;
        while dest.exists() {
            dest = to.join(format!("{}.{n}", entry.file_name().to_string_lossy()));
            n += 1;
        }
        std::fs::rename(entry.path(), &dest)
            .map_err(|e| fail(&format!("moving it to {}", dest.display()), e))?;
    }
    Ok(Some((to, false)))
}

/// When git last wrote the worktree's index (every `git add` of a turn does), or its
/// directory's mtime if it has no index. If neither can be read the worktree counts as
/// active now, so doubt keeps it rather than removes it.
fn last_active(git: &Git, path: &Path) -> Result<SystemTime> {
    let index = git.line(&[
        os("rev-parse"),
        os("--path-format=absolute"),
        os("--git-path"),
        os("index"),
    ])?;
    let modified = std::fs::metadata(&index)
        .or_else(|_| std::fs::metadata(path))
        .and_then(|m| m.modified());
    Ok(modified.unwrap_or_else(|_| SystemTime::now()))
}
