//! The user's repository: opening it, reading revisions, and listing its worktrees.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::{Git, fs_path, os, same_path};

/// The user's repository, addressed through the checkout baton was pointed at.
///
/// All workspaces share its object database and refs; none of its files, index or HEAD
/// are changed by anything in this crate.
#[derive(Debug, Clone)]
pub struct Repo {
    workdir: PathBuf,
}

/// One entry of `git worktree list --porcelain -z`.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorktreeEntry {
    pub path: PathBuf,
    /// Full ref name (`refs/heads/...`), `None` when detached or bare.
    pub branch: Option<String>,
    /// `Some(reason)` when locked; the reason may be empty.
    pub locked: Option<String>,
    /// The directory is gone and git would prune the registration.
    pub prunable: bool,
}

impl Repo {
    /// Opens the repository containing `path`. It must be a working tree (not a bare
    /// repository) with at least one commit.
    pub fn open(path: &Path) -> Result<Repo> {
        let git = Git::new(path);
        let args = [
            os("rev-parse"),
            os("--path-format=absolute"),
            os("--show-toplevel"),
        ];
        let out = git.output(&args)?;
        if !out.status.success() {
            return Err(Error::NotARepository {
                path: path.to_path_buf(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        let top = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
        if top.is_empty() {
            return Err(Error::NotARepository {
                path: path.to_path_buf(),
                stderr: "it is a bare repository or a .git directory, not a checkout".to_owned(),
            });
        }
        let repo = Repo {
            workdir: fs_path(top)?,
        };
        let head = repo.git().output(&[
            os("rev-parse"),
            os("--verify"),
            os("-q"),
            os("HEAD^{commit}"),
        ])?;
        if !head.status.success() {
            return Err(Error::NoCommits {
                path: repo.workdir.clone(),
            });
        }
        Ok(repo)
    }

    /// The top directory of the checkout this repository was opened through.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Where worktrees go when the user configured nothing: `<repo>/.baton/worktrees`,
    /// next to baton's database. [`Repo::create_workspace`] keeps it out of the
    /// checkout's `git status` with a `.gitignore` inside it.
    pub fn default_worktree_root(&self) -> PathBuf {
        self.workdir.join(".baton").join("worktrees")
    }

    /// The full sha of the checkout's HEAD commit.
    pub fn head_commit(&self) -> Result<String> {
        self.resolve("HEAD")
    }

    /// Resolves a branch, tag or (abbreviated) sha to a full commit sha.
    pub fn resolve(&self, rev: &str) -> Result<String> {
        resolve_in(&self.git(), rev)
    }

    /// The checkout's current branch (short name), `None` when HEAD is detached.
    pub fn current_branch(&self) -> Result<Option<String>> {
        current_branch_in(&self.git())
    }

    pub(crate) fn git(&self) -> Git {
        Git::new(&self.workdir)
    }

    /// All worktrees registered with the repository, the main one first.
    pub(crate) fn worktrees(&self) -> Result<Vec<WorktreeEntry>> {
        let git = self.git();
        let args = [os("worktree"), os("list"), os("--porcelain"), os("-z")];
        let mut wait = std::time::Duration::from_millis(20);
        let out = loop {
            let out = git.output(&args)?;
            // Another process's `git worktree add` writes a worktree's administrative
            // files one by one, and git fails on an entry read mid-write ("failed to
            // read .git/worktrees/ID/commondir: Success"); it is whole a moment
            // later. Git says so only in words, so its words are read. An entry that
            // stays half-written (an `add` killed mid-write) is reported after ≈1.3 s.
            let mid_write = !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains(".git/worktrees/");
            if mid_write && wait <= std::time::Duration::from_millis(640) {
                std::thread::sleep(wait);
                wait *= 2;
                continue;
            }
            break git.check(&args, out)?;
        };
        let mut entries = Vec::new();
        let mut current: Option<WorktreeEntry> = None;
        // Each attribute is one NUL-terminated record; an empty record ends a worktree.
        for record in out.split(|b| *b == 0) {
            if record.is_empty() {
                entries.extend(current.take());
                continue;
            }
            let (key, value) = match record.iter().position(|b| *b == b' ') {
                Some(i) => (&record[..i], Some(&record[i + 1..])),
                None => (record, None),
            };
            if key == b"worktree" {
                entries.extend(current.take());
                let Some(value) = value else {
                    return Err(git.unexpected(&args, "worktree record without a path"));
                };
                current = Some(WorktreeEntry {
                    path: fs_path(value)?,
                    ..WorktreeEntry::default()
                });
                continue;
            }
            let Some(entry) = current.as_mut() else {
                return Err(git.unexpected(&args, "attribute before the first worktree"));
            };
            match key {
                b"branch" => {
                    entry.branch = value.map(|v| String::from_utf8_lossy(v).into_owned());
                }
                b"locked" => {
                    entry.locked = Some(
                        value
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default(),
                    );
                }
                b"prunable" => entry.prunable = true,
                _ => {}
            }
        }
        entries.extend(current);
        Ok(entries)
    }

    pub(crate) fn worktree_at(&self, path: &Path) -> Result<Option<WorktreeEntry>> {
        Ok(self
            .worktrees()?
            .into_iter()
            .find(|w| same_path(&w.path, path)))
    }

    /// The commit a local branch points at, `None` if there is no such branch.
    pub(crate) fn branch_tip(&self, branch: &str) -> Result<Option<String>> {
        let full = format!("refs/heads/{branch}");
        let args = [os("rev-parse"), os("--verify"), os("-q"), os(&full)];
        let out = self.git().output(&args)?;
        if out.status.success() {
            Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
        } else if out.status.code() == Some(1) {
            Ok(None)
        } else {
            Err(self.git().failure(&args, &out))
        }
    }

    /// Whether `ancestor` is reachable from `descendant` (or equal to it).
    pub(crate) fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        let git = self.git();
        let args = [
            os("merge-base"),
            os("--is-ancestor"),
            os(ancestor),
            os(descendant),
        ];
        let out = git.output(&args)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(git.failure(&args, &out)),
        }
    }

    /// `path` made absolute against the checkout (a relative worktree root in the
    /// user's configuration means relative to the repository, not to baton's cwd).
    pub(crate) fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.workdir.join(path)
        }
    }
}

pub(crate) fn resolve_in(git: &Git, rev: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    let args = [
        os("rev-parse"),
        os("--verify"),
        os("--end-of-options"),
        os(&spec),
    ];
    let out = git.output(&args)?;
    if !out.status.success() {
        return Err(Error::RevisionNotFound {
            rev: rev.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if sha.is_empty() || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(git.unexpected(&args, format!("not a sha: {sha:?}")));
    }
    Ok(sha)
}

pub(crate) fn current_branch_in(git: &Git) -> Result<Option<String>> {
    let args = [os("symbolic-ref"), os("-q"), os("HEAD")];
    let out = git.output(&args)?;
    match out.status.code() {
        Some(0) => {
            let full = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            Ok(Some(
                full.strip_prefix("refs/heads/")
                    .map_or(full.clone(), str::to_owned),
            ))
        }
        Some(1) => Ok(None),
        _ => Err(git.failure(&args, &out)),
    }
}
