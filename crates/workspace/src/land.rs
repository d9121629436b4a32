//! Landing a job's branch on its base branch (`baton line --merge`): a final drift check,
//! then a fast-forward; or, when the base branch moved on only files the branch did not
//! touch, a merge commit on the job's branch first and the fast-forward to it. Anything
//! else is refused with the reason, and nothing is changed.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::git::{Git, os};
use crate::repo::Repo;
use crate::workspace::Workspace;

/// What landing the branch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "landed", rename_all = "snake_case")]
pub enum Landing {
    /// The base branch was fast-forwarded from `from` to the branch's head `to`.
    FastForward {
        base_branch: String,
        from: String,
        to: String,
    },
    /// The base branch had moved to `from` since the job started, on files the job did
    /// not change: `to` is a merge commit of the two on the job's branch, and the base
    /// branch was fast-forwarded to it.
    Merged {
        base_branch: String,
        from: String,
        to: String,
    },
    /// The base branch already holds the branch's head (`at`): a landing done before
    /// (by a run killed before it could say so), nothing to do.
    Already { base_branch: String, at: String },
    /// Nothing was changed, for this reason.
    Refused { base_branch: String, why: String },
}

impl Landing {
    /// One line for a person.
    pub fn describe(&self) -> String {
        let short = |s: &str| s[..s.len().min(12)].to_string();
        match self {
            Landing::FastForward {
                base_branch,
                from,
                to,
            } => format!(
                "merged into {base_branch}: fast-forward from {} to {}",
                short(from),
                short(to)
            ),
            Landing::Merged {
                base_branch,
                from,
                to,
            } => format!(
                "merged into {base_branch}: it had moved to {} on other files, so merge commit {} joins both and {base_branch} fast-forwarded to it (the gates ran on the unit's branch, not on the merge)",
                short(from),
                short(to)
            ),
            Landing::Already { base_branch, at } => {
                format!(
                    "{base_branch} already holds the unit's branch (at {})",
                    short(at)
                )
            }
            Landing::Refused { base_branch, why } => {
                format!("not merged into {base_branch}: {why}")
            }
        }
    }
}

impl Repo {
    /// Lands `ws`'s branch on `base_branch` (see the module's comment). A checkout of
    /// `base_branch` in this repository's own worktree is fast-forwarded with its files
    /// (it must have no uncommitted changes to tracked files); one checked out in any
    /// other worktree is refused.
    pub fn land(&self, ws: &Workspace, base_branch: &str) -> Result<Landing> {
        let refuse = |why: String| {
            Ok(Landing::Refused {
                base_branch: base_branch.to_string(),
                why,
            })
        };
        let full = format!("refs/heads/{base_branch}");
        let Some(tip) = self.branch_tip(base_branch)? else {
            return refuse(format!("there is no branch {base_branch} any more"));
        };
        let head = ws.head()?;
        if self.is_ancestor(&head, &tip)? {
            return Ok(Landing::Already {
                base_branch: base_branch.to_string(),
                at: tip,
            });
        }
        if !self.is_ancestor(&ws.base, &tip)? {
            return refuse(format!(
                "{base_branch} no longer contains the commit the unit started from ({}): it was rewound or rewritten; merge by hand",
                &ws.base[..ws.base.len().min(12)]
            ));
        }
        let drift = self.drift(ws, Some(&full))?;
        if let Some(on) = &drift.branch_changed {
            return refuse(format!(
                "the unit's worktree {} is on {on}, not on {}",
                ws.path.display(),
                ws.branch
            ));
        }
        // Commits on the unit's branch neither baton made for it nor the base holds.
        let foreign = foreign_commits(&self.git(), ws, &head, &tip)?;
        if let Some(first) = foreign.first() {
            return refuse(format!(
                "{} commit(s) on {} were not made by baton for this unit (the first {}); look at them, then merge by hand",
                foreign.len(),
                ws.branch,
                &first[..first.len().min(12)]
            ));
        }
        // Where the base branch is checked out, the checkout moves with it.
        let here = self
            .workdir()
            .canonicalize()
            .unwrap_or(self.workdir().to_path_buf());
        let mut checkout = None;
        for w in self.worktrees()? {
            if w.branch.as_deref() == Some(full.as_str()) {
                let at = w.path.canonicalize().unwrap_or(w.path.clone());
                if at != here {
                    return refuse(format!(
                        "{base_branch} is checked out in the worktree {}; merge there by hand: git merge --ff-only {}",
                        w.path.display(),
                        ws.branch
                    ));
                }
                checkout = Some(at);
            }
        }
        if checkout.is_some() {
            let dirty =
                self.git()
                    .run(&[os("status"), os("--porcelain"), os("--untracked-files=no")])?;
            if !dirty.is_empty() {
                return refuse(format!(
                    "{base_branch} is checked out at {} with uncommitted changes; commit or stash them, then merge by hand: git merge --ff-only {}",
                    self.workdir().display(),
                    ws.branch
                ));
            }
        }
        let target = if self.is_ancestor(&tip, &head)? {
            Target::FastForward(head.clone())
        } else {
            let theirs = changed(&self.git(), &ws.base, &tip)?;
            let ours = changed(&self.git(), &ws.base, &head)?;
            let both: Vec<&String> = theirs.intersection(&ours).collect();
            if !both.is_empty() {
                let listed: Vec<&str> = both.iter().take(5).map(|s| s.as_str()).collect();
                return refuse(format!(
                    "{base_branch} moved since the unit started and changed files the unit changed too ({}{}); merge by hand",
                    listed.join(", "),
                    if both.len() > 5 { ", …" } else { "" }
                ));
            }
            match self.merge_commit(ws, &head, &tip, base_branch)? {
                Some(merge) => Target::Merged(merge),
                None => {
                    return refuse(format!(
                        "{base_branch} moved since the unit started and git cannot merge the two without conflicts; merge by hand"
                    ));
                }
            }
        };
        let to = match &target {
            Target::FastForward(to) | Target::Merged(to) => to.clone(),
        };
        let git = self.git();
        let moved = match checkout {
            // The user's checkout: its files move too; git refuses rather than
            // overwrite an untracked file the branch adds.
            Some(_) => git.output(&[os("merge"), os("--ff-only"), os("--quiet"), os(&to)])?,
            None => git.output(&[
                os("update-ref"),
                os("-m"),
                os(&format!("baton: land {}", ws.branch)),
                os(&full),
                os(&to),
                os(&tip),
            ])?,
        };
        if !moved.status.success() {
            // The unit's branch is put back where it was: nothing is changed.
            if let Target::Merged(merge) = &target {
                ws.git().run(&[
                    os("update-ref"),
                    os(&format!("refs/heads/{}", ws.branch)),
                    os(&head),
                    os(merge),
                ])?;
                ws.reset_hard(&head)?;
            }
            return refuse(format!(
                "git would not move {base_branch}: {}",
                String::from_utf8_lossy(&moved.stderr).trim()
            ));
        }
        Ok(match target {
            Target::FastForward(_) => Landing::FastForward {
                base_branch: base_branch.to_string(),
                from: tip,
                to,
            },
            Target::Merged(_) => Landing::Merged {
                base_branch: base_branch.to_string(),
                from: tip,
                to,
            },
        })
    }

    /// A merge of `tip` into the job's branch at `head`, committed there (the worktree
    /// put at it); `None` when git finds conflicts.
    fn merge_commit(
        &self,
        ws: &Workspace,
        head: &str,
        tip: &str,
        base_branch: &str,
    ) -> Result<Option<String>> {
        let git = ws.git();
        let out = git.output(&[os("merge-tree"), os("--write-tree"), os(head), os(tip)])?;
        if out.status.code() == Some(1) {
            return Ok(None);
        }
        let out = git.check(&[os("merge-tree")], out)?;
        let tree = String::from_utf8_lossy(&out)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let message = format!(
            "Merge {base_branch} into {}\n\n{base_branch} moved since the unit started, on other files.\n\nBaton-Job: {}\n",
            ws.branch, ws.job_id
        );
        let merge = ws.commit_tree_of(&git, &[head, tip], &tree, &message)?;
        git.run(&[
            os("update-ref"),
            os(&format!("refs/heads/{}", ws.branch)),
            os(&merge),
            os(head),
        ])?;
        ws.reset_hard(&merge)?;
        Ok(Some(merge))
    }
}

enum Target {
    FastForward(String),
    Merged(String),
}

/// The commits reachable from `head` but from neither the job's base nor `tip` that
/// carry no `Baton-Job` trailer naming the job, oldest first.
fn foreign_commits(git: &Git, ws: &Workspace, head: &str, tip: &str) -> Result<Vec<String>> {
    let (not_base, not_tip) = (format!("^{}", ws.base), format!("^{tip}"));
    crate::drift::commits_not_by(git, &ws.job_id, &[head, &not_base, &not_tip])
}

/// The files changed between two commits.
fn changed(git: &Git, from: &str, to: &str) -> Result<BTreeSet<String>> {
    let out = git.run(&[
        os("diff"),
        os("--name-only"),
        os("-z"),
        os("--no-renames"),
        os(from),
        os(to),
    ])?;
    Ok(out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}
