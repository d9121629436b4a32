//! Creating and reopening a job's worktree, and the questions asked of it directly.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::git::{Git, nul_records, os, same_path, utf8_path};
use crate::repo::{Repo, current_branch_in, resolve_in};

/// What the job runner records to create a job's workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSpec {
    /// The job's id; names the worktree directory and the branch.
    pub job_id: String,
    /// The commit the job starts from, recorded when the job was queued (so a job that
    /// is resumed days later still starts where it was planned, not at today's HEAD).
    pub base: String,
    /// The branch `base` was taken from, for [`Repo::drift`].
    pub base_branch: Option<String>,
    /// Directory that holds worktrees, one subdirectory per job. Relative paths are
    /// relative to the repository's checkout.
    pub root: PathBuf,
}

/// A job's worktree. Obtained only from [`Repo::create_workspace`] or
/// [`Repo::open_workspace`], which check that it really is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    pub job_id: String,
    /// The worktree's top directory, absolute.
    pub path: PathBuf,
    /// Short branch name, `baton/job-<id>`.
    pub branch: String,
    /// Full sha of the base commit.
    pub base: String,
    #[serde(skip)]
    pub(crate) identity: IdentityCache,
}

/// The directory name of a job's worktree for its `attempt`-th claim: the first
/// claims use `<job_id>`, a takeover `<job_id>.<attempt>`.
pub fn attempt_dir(job_id: &str, attempt: u32) -> String {
    if attempt <= 1 {
        job_id.to_owned()
    } else {
        format!("{job_id}.{attempt}")
    }
}

/// The job id and attempt a worktree directory name stands for (see [`attempt_dir`]).
pub fn split_attempt_dir(name: &str) -> (&str, u32) {
    match name.rsplit_once('.') {
        Some((id, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (id, n.parse().unwrap_or(u32::MAX))
        }
        _ => (name, 1),
    }
}

/// The branch a job's turns are committed on.
pub fn branch_for_job(job_id: &str) -> String {
    format!("baton/job-{job_id}")
}

/// Checks that a job id can be both a directory name and part of a branch name.
pub fn validate_job_id(job_id: &str) -> Result<()> {
    let reason = if job_id.is_empty() {
        Some("it is empty")
    } else if job_id.len() > 128 {
        Some("it is longer than 128 bytes")
    } else if !job_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("it contains a character other than letters, digits, '.', '_' and '-'")
    } else if job_id.starts_with(['.', '-']) {
        Some("it starts with '.' or '-'")
    } else if job_id.contains("..") || job_id.ends_with(".lock") || job_id.ends_with('.') {
        Some("git forbids '..', a trailing '.' and a '.lock' suffix in branch names")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidJobId {
            job_id: job_id.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

impl Repo {
    /// Creates the job's worktree at `<root>/<job_id>` on a new branch
    /// `baton/job-<job_id>` starting at `spec.base`.
    ///
    /// Idempotent for resuming after a crash: if the worktree already exists for this job
    /// and branch it is returned as is; if only the branch exists (its worktree was
    /// collected, or creation died half-way) it is checked out again with its turns
    /// intact. Anything else in the way is an error; the job is never pointed at the main
    /// checkout instead.
    pub fn create_workspace(&self, spec: &WorkspaceSpec) -> Result<Workspace> {
        // `git worktree add` reads every other worktree's administrative files and fails
        // ("failed to read .git/worktrees/<id>/commondir") when it meets one that a
        // concurrent `add` is still writing. Creations in this process take turns; a
        // creation racing another process is retried.
        static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = CREATING.lock().unwrap_or_else(|p| p.into_inner());
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.create_workspace_once(spec) {
                Err(Error::CreateWorkspace { .. }) if attempt < 3 => {
                    std::thread::sleep(std::time::Duration::from_millis(50 * attempt));
                }
                other => return other,
            }
        }
    }

    fn create_workspace_once(&self, spec: &WorkspaceSpec) -> Result<Workspace> {
        validate_job_id(&spec.job_id)?;
        let branch = branch_for_job(&spec.job_id);
        let full_ref = format!("refs/heads/{branch}");
        let root = self.absolute(&spec.root);
        let path = root.join(&spec.job_id);
        if same_path(&path, self.workdir()) || self.workdir().starts_with(&path) {
            return Err(Error::PathOccupied {
                job_id: spec.job_id.clone(),
                path,
                reason: "it is (or contains) the main checkout".to_owned(),
            });
        }
        let base = self.resolve(&spec.base)?;
        let workspace = Workspace {
            job_id: spec.job_id.clone(),
            path: path.clone(),
            branch: branch.clone(),
            base: base.clone(),
            identity: IdentityCache::default(),
        };

        let git = self.git();
        if let Some(entry) = self.worktree_at(&path)? {
            let half_made = entry.locked.as_deref() == Some("initializing");
            if entry.prunable || half_made {
                // A registration whose directory is gone, or a `worktree add` that died
                // before checkout finished: neither holds work, so clear it and recreate.
                if half_made {
                    git.run(&[
                        os("worktree"),
                        os("remove"),
                        os("--force"),
                        os("--force"),
                        path.as_os_str(),
                    ])?;
                }
                git.run(&[os("worktree"), os("prune")])?;
            } else if entry.branch.as_deref() == Some(full_ref.as_str()) {
                if !self.is_ancestor(&base, &full_ref)? {
                    return Err(Error::BranchDoesNotContainBase { branch, base });
                }
                // Same job, same branch: resume. Make sure git in that directory really
                // resolves to the worktree (its `.git` file may have been deleted).
                workspace.verify_toplevel()?;
                return Ok(workspace);
            } else {
                return Err(Error::PathOccupied {
                    job_id: spec.job_id.clone(),
                    path,
                    reason: format!(
                        "it is a worktree on {}",
                        entry.branch.as_deref().unwrap_or("a detached HEAD")
                    ),
                });
            }
        }
        if path.exists() && !is_empty_dir(&path)? {
            return Err(Error::PathOccupied {
                job_id: spec.job_id.clone(),
                path,
                reason: "it exists and is not a worktree of this repository".to_owned(),
            });
        }
        self.ignore_root_inside_checkout(&root)?;

        let existing = self.branch_tip(&branch)?;
        let mut args = vec![os("worktree"), os("add"), os("--quiet")];
        if existing.is_some() {
            if let Some(other) = self
                .worktrees()?
                .into_iter()
                .find(|w| w.branch.as_deref() == Some(full_ref.as_str()))
            {
                return Err(Error::BranchCheckedOutElsewhere {
                    branch,
                    elsewhere: other.path,
                });
            }
            if !self.is_ancestor(&base, &full_ref)? {
                return Err(Error::BranchDoesNotContainBase { branch, base });
            }
            args.extend([os("--end-of-options"), path.as_os_str(), os(&branch)]);
        } else {
            args.extend([
                os("--no-track"),
                os("-b"),
                os(&branch),
                os("--end-of-options"),
                path.as_os_str(),
                os(&base),
            ]);
        }
        let out = git.output(&args)?;
        if !out.status.success() {
            return Err(Error::CreateWorkspace {
                job_id: spec.job_id.clone(),
                path,
                branch,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        workspace.verify_toplevel()?;
        Ok(workspace)
    }

    /// A fresh worktree for a job taken over from a worker whose lease ran out, at
    /// `<root>/<job_id>.<attempt>`, on the job's branch as it is.
    ///
    /// The old worktree is left alone: the worker that lost the job may still be
    /// stopped, not dead (Ctrl-Z), and its agent would go on writing there. The new
    /// owner's turns never see those writes. The branch is checked out in both (git's
    /// `--force`); only the lease holder commits to it, fenced.
    pub fn take_over_workspace(&self, spec: &WorkspaceSpec, attempt: u32) -> Result<Workspace> {
        static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = CREATING.lock().unwrap_or_else(|p| p.into_inner());
        // A creation racing another process's is retried, as `create_workspace`'s is.
        let mut tries = 0;
        loop {
            tries += 1;
            match self.take_over_workspace_once(spec, attempt) {
                Err(Error::CreateWorkspace { .. }) if tries < 3 => {
                    std::thread::sleep(std::time::Duration::from_millis(50 * tries));
                }
                other => return other,
            }
        }
    }

    fn take_over_workspace_once(&self, spec: &WorkspaceSpec, attempt: u32) -> Result<Workspace> {
        validate_job_id(&spec.job_id)?;
        let branch = branch_for_job(&spec.job_id);
        let root = self.absolute(&spec.root);
        let path = root.join(attempt_dir(&spec.job_id, attempt));
        let workspace = Workspace {
            job_id: spec.job_id.clone(),
            path: path.clone(),
            branch: branch.clone(),
            base: self.resolve(&spec.base)?,
            identity: IdentityCache::default(),
        };
        if self.branch_tip(&branch)?.is_none() {
            // Nothing was ever committed for the job: an ordinary creation.
            return self.create_workspace(spec);
        }
        // The worktree taken over from lets go of the branch: whatever the worker that
        // lost the job (or its agent) still does there, commits included, never moves
        // the branch the new owner commits to. Its files stay as they are.
        let full_ref = format!("refs/heads/{branch}");
        for old in self.worktrees()?.into_iter().filter(|w| {
            !w.prunable && w.branch.as_deref() == Some(full_ref.as_str()) && w.path != path
        }) {
            // Best effort: an agent holding the old index's lock makes it fail, and the
            // branch is then shared (`--force` below) as before; the store and git fences
            // still keep the old worker from committing a turn.
            let _ = Git::new(&old.path).run(&[os("checkout"), os("--quiet"), os("--detach")]);
        }
        if let Some(entry) = self.worktree_at(&path)? {
            if !entry.prunable && entry.branch.as_deref() == Some(&*format!("refs/heads/{branch}"))
            {
                workspace.verify_toplevel()?;
                return Ok(workspace);
            }
            self.git().run(&[os("worktree"), os("prune")])?;
        }
        if path.exists() && !is_empty_dir(&path)? {
            return Err(Error::PathOccupied {
                job_id: spec.job_id.clone(),
                path,
                reason: "it exists and is not a worktree of this repository".to_owned(),
            });
        }
        self.ignore_root_inside_checkout(&root)?;
        let args = [
            os("worktree"),
            os("add"),
            os("--quiet"),
            os("--force"),
            os("--end-of-options"),
            path.as_os_str(),
            os(&branch),
        ];
        let out = self.git().output(&args)?;
        if !out.status.success() {
            return Err(Error::CreateWorkspace {
                job_id: spec.job_id.clone(),
                path,
                branch,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        workspace.verify_toplevel()?;
        Ok(workspace)
    }

    /// The job's newest worktree directory under `root` (`<job_id>`, or
    /// `<job_id>.<n>` after takeovers), whether or not it still exists on disk.
    pub fn job_worktree_path(&self, job_id: &str, root: &Path) -> Result<PathBuf> {
        let root = self.absolute(root);
        let full_ref = format!("refs/heads/{}", branch_for_job(job_id));
        let newest = self
            .worktrees()?
            .into_iter()
            .filter(|w| w.branch.as_deref() == Some(full_ref.as_str()))
            .filter(|w| w.path.parent().is_some_and(|p| same_path(p, &root)))
            .filter_map(|w| {
                let name = w.path.file_name()?.to_str()?.to_owned();
                let (id, attempt) = split_attempt_dir(&name);
                (id == job_id).then_some((attempt, w.path))
            })
            .max_by_key(|(attempt, _)| *attempt);
        Ok(newest.map_or_else(|| root.join(job_id), |(_, path)| path))
    }

    /// Reopens an existing job worktree, failing loudly if its directory is gone, is not
    /// a worktree of this repository, or is not on `expected_branch`. Never returns the
    /// main checkout.
    pub fn open_workspace(
        &self,
        job_id: &str,
        expected_branch: &str,
        base: &str,
        root: &Path,
    ) -> Result<Workspace> {
        validate_job_id(job_id)?;
        let path = self.job_worktree_path(job_id, root)?;
        let workspace = Workspace {
            job_id: job_id.to_owned(),
            path: path.clone(),
            branch: expected_branch.to_owned(),
            base: self.resolve(base)?,
            identity: IdentityCache::default(),
        };
        if !path.is_dir() {
            return Err(workspace.vanished());
        }
        match self.worktree_at(&path)? {
            None => {
                return Err(Error::NotAWorktree {
                    path,
                    reason: format!(
                        "it is not registered as a worktree of {}",
                        self.workdir().display()
                    ),
                });
            }
            Some(entry) if entry.prunable => return Err(workspace.vanished()),
            Some(_) => {}
        }
        workspace.checked_head()?;
        Ok(workspace)
    }

    /// When the worktree root lies inside the checkout, a `.gitignore` of `*` in it keeps
    /// the worktrees out of the checkout's `git status` and `git add -A`.
    fn ignore_root_inside_checkout(&self, root: &Path) -> Result<()> {
        let inside = root.starts_with(self.workdir())
            || root
                .canonicalize()
                .ok()
                .zip(self.workdir().canonicalize().ok())
                .is_some_and(|(r, w)| r.starts_with(w));
        if !inside {
            return Ok(());
        }
        std::fs::create_dir_all(root).map_err(|source| Error::Io {
            action: "creating the worktree root",
            path: root.to_path_buf(),
            source,
        })?;
        let ignore = root.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "# baton job worktrees\n*\n").map_err(|source| Error::Io {
                action: "writing",
                path: ignore.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl Workspace {
    pub(crate) fn git(&self) -> Git {
        Git::new(&self.path)
    }

    fn vanished(&self) -> Error {
        Error::WorkspaceVanished {
            job_id: self.job_id.clone(),
            path: self.path.clone(),
        }
    }

    /// Git run in this directory must resolve to this worktree; if its `.git` file were
    /// gone, git would walk up and act on an enclosing checkout instead.
    fn verify_toplevel(&self) -> Result<()> {
        self.checked(&[os("rev-parse"), os("--show-toplevel")])
            .map(|_| ())
    }

    /// Runs `rev-parse --show-toplevel <extra...>` after checking the directory exists,
    /// and returns the lines after the toplevel once it is confirmed to be this worktree.
    fn checked(&self, args: &[&std::ffi::OsStr]) -> Result<Vec<String>> {
        if !self.path.is_dir() {
            return Err(self.vanished());
        }
        let git = self.git();
        let out = git.output(args)?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let top = lines.next().unwrap_or_default();
        if top.is_empty() || !same_path(Path::new(top), &self.path) {
            let reason = if top.is_empty() {
                "git finds no repository there".to_owned()
            } else {
                format!("git resolves it to the checkout at {top}")
            };
            return Err(Error::NotAWorktree {
                path: self.path.clone(),
                reason,
            });
        }
        if !out.status.success() {
            return Err(git.failure(args, &out));
        }
        Ok(lines.map(str::to_owned).collect())
    }

    /// HEAD's commit and tree after checking that this is the worktree and HEAD is on
    /// its branch; one git call, since every turn pays for it.
    pub(crate) fn checked_head(&self) -> Result<CheckedHead> {
        let lines = self.checked(&[
            os("rev-parse"),
            os("--show-toplevel"),
            os("HEAD"),
            os("HEAD^{tree}"),
            os("--symbolic-full-name"),
            os("HEAD"),
        ])?;
        let [commit, tree, symbolic] = lines.as_slice() else {
            return Err(self.git().unexpected(
                &[os("rev-parse"), os("HEAD")],
                format!("expected HEAD's commit, tree and ref, got {lines:?}"),
            ));
        };
        let expected = format!("refs/heads/{}", self.branch);
        if *symbolic != expected {
            return Err(Error::BranchSwitched {
                path: self.path.clone(),
                expected: self.branch.clone(),
                actual: symbolic
                    .strip_prefix("refs/heads/")
                    .map(str::to_owned)
                    .or_else(|| (symbolic != "HEAD").then(|| symbolic.clone())),
            });
        }
        Ok(CheckedHead {
            commit: commit.clone(),
            tree: tree.clone(),
        })
    }

    /// The worktree's HEAD commit (full sha), after checking it is still on its branch.
    pub fn head(&self) -> Result<String> {
        self.checked_head().map(|h| h.commit)
    }

    /// Paths with uncommitted changes: modified or deleted tracked files, staged
    /// changes, and untracked files that are not ignored.
    pub fn dirty(&self) -> Result<Vec<String>> {
        self.verify_toplevel()?;
        dirty_paths(&self.git())
    }

    /// The branch HEAD is on, `None` when detached. Does not require it to be ours.
    pub(crate) fn actual_branch(&self) -> Result<Option<String>> {
        self.verify_toplevel()?;
        current_branch_in(&self.git())
    }

    pub(crate) fn resolve(&self, rev: &str) -> Result<String> {
        resolve_in(&self.git(), rev)
    }
}

pub(crate) struct CheckedHead {
    pub commit: String,
    pub tree: String,
}

/// Which `user.*` settings the repository lacks, looked up once per workspace: the
/// answer does not change during a job, and every turn would otherwise pay a git call.
/// Never part of a workspace's identity (equality, serialization).
#[derive(Debug, Clone, Default)]
pub(crate) struct IdentityCache(pub(crate) OnceLock<Vec<&'static str>>);

impl PartialEq for IdentityCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for IdentityCache {}

/// `git status --porcelain -z` paths, untracked files listed one by one.
pub(crate) fn dirty_paths(git: &Git) -> Result<Vec<String>> {
    let args = [
        os("status"),
        os("--porcelain=v1"),
        os("-z"),
        os("--untracked-files=all"),
        os("--ignore-submodules=none"),
    ];
    let out = git.run(&args)?;
    let mut paths = Vec::new();
    let mut records = nul_records(&out);
    while let Some(record) = records.next() {
        if record.len() < 4 || record[2] != b' ' {
            return Err(git.unexpected(&args, "status record shorter than `XY path`"));
        }
        paths.push(utf8_path(&record[3..])?);
        // A rename or copy is followed by a record with its source path.
        if matches!(record[0], b'R' | b'C') {
            records.next();
        }
    }
    Ok(paths)
}

fn is_empty_dir(path: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(path).map_err(|source| Error::Io {
        action: "reading",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(entries.next().is_none())
}
