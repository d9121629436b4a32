//! The workspace side of a job's turn: commit the worktree after every turn (a failed
//! turn's edits are thrown away), check claimed files against that commit, and run the
//! gates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::claims::Refusal;
use baton_core::reconciler::{Verification, Verifier};
use baton_core::state::{Artifact, ArtifactVersion, Issue, ResolutionClaim};
use baton_core::turn::WorkspaceTurn;
use baton_workspace::{ChangeStatus, CommitOutcome, TurnCommitInfo, Workspace};
use sha2::{Digest, Sha256};

use super::gates::{GateSpec, run_gate};
use crate::audit::hex;
use crate::hook::{HookOutcome, TurnFacts, WorkspaceHook};
use crate::{Error, Result};

pub struct GitHook {
    pub workspace: Workspace,
    pub job_id: String,
    pub gates: Vec<GateSpec>,
    pub gate_each_turn: bool,
    /// Where gate output files go.
    pub gate_dir: PathBuf,
    /// Variables gates must not see (every worker's key variable).
    pub hide: Vec<String>,
}

fn ws_err(e: baton_workspace::Error) -> Error {
    Error::Workspace(e.to_string())
}

impl GitHook {
    /// Throws away everything since `commit` in the worktree (a failed turn's edits, or
    /// a crashed process's half turn). Ignored files, baton's `.baton/` scratch area
    /// among them, stay.
    pub fn reset_to(&self, commit: &str) -> Result<()> {
        git(
            &self.workspace.path,
            &["reset", "--hard", "--quiet", commit],
        )?;
        git(&self.workspace.path, &["clean", "-fd", "--quiet"])?;
        Ok(())
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .map_err(|e| Error::Workspace(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(Error::Workspace(format!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl WorkspaceHook for GitHook {
    fn path(&self) -> &Path {
        &self.workspace.path
    }

    fn after_calls(&self, facts: &TurnFacts<'_>) -> Result<HookOutcome> {
        let _shared = super::GIT_WORKTREES
            .read()
            .unwrap_or_else(|p| p.into_inner());
        let Some(result) = facts.result else {
            let head = self.workspace.head().map_err(ws_err)?;
            // Never merged half-formed: a failed turn leaves no trace in the worktree.
            self.reset_to(&head)?;
            return Ok(HookOutcome {
                workspace: WorkspaceTurn {
                    commit: head.clone(),
                    changed: false,
                    files: Vec::new(),
                    gates: Vec::new(),
                },
                verifier: Arc::new(GitVerifier::unchanged(self.workspace.clone(), head)),
                refusals: Vec::new(),
                warnings: vec!["the turn failed; its edits in the worktree were discarded".into()],
            });
        };
        let task = match &facts.assignment.step_id {
            Some(id) => format!("{id} {}", facts.assignment.task),
            None => "continuation".to_string(),
        };
        let subject = format!(
            "turn {} ({}): {}",
            facts.turn,
            facts.worker.id,
            clip(&task, 60)
        );
        let body = format!(
            "{} decision(s), {} artifact(s), {} issue(s) claimed; summary: {}",
            result.decisions.len(),
            result.artifacts.len(),
            result.issues.len(),
            clip(&result.summary, 200)
        );
        let outcome = self
            .workspace
            .commit_turn(&TurnCommitInfo {
                run_id: facts.run.0.clone(),
                job_id: self.job_id.clone(),
                turn: facts.turn,
                worker: facts.worker.id.to_string(),
                model: facts.worker.model.clone(),
                family: facts.worker.family.clone(),
                subject,
                body: Some(body),
            })
            .map_err(ws_err)?;
        let mut refusals = Vec::new();
        let (commit, changed, files) = match outcome {
            CommitOutcome::Committed { sha, files } => (sha, true, files),
            CommitOutcome::NoChanges { head } => {
                if !result.artifacts.is_empty() {
                    let names: Vec<&str> =
                        result.artifacts.iter().map(|a| a.name.as_str()).collect();
                    refusals.push(Refusal {
                        claim: "result.artifacts".into(),
                        reason: format!(
                            "claims changes to {} but the turn's diff is empty",
                            names.join(", ")
                        ),
                    });
                }
                (head, false, Vec::new())
            }
        };
        let changed_files: BTreeMap<String, Option<String>> = files
            .iter()
            .filter(|f| f.status != ChangeStatus::Deleted)
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect();
        let mut gates = Vec::new();
        if facts.last || self.gate_each_turn {
            for gate in &self.gates {
                gates.push(run_gate(
                    gate,
                    &self.workspace.path,
                    &commit,
                    &self.gate_dir,
                    &self.hide,
                ));
            }
        }
        Ok(HookOutcome {
            workspace: WorkspaceTurn {
                commit: commit.clone(),
                changed,
                files: files.iter().map(|f| f.path.clone()).collect(),
                gates,
            },
            verifier: Arc::new(GitVerifier {
                workspace: self.workspace.clone(),
                commit,
                changed: changed_files,
            }),
            refusals,
            warnings: Vec::new(),
        })
    }
}

/// Verifies artifacts against the turn's commit: a claimed file counts only when the
/// commit changed it ("written is not persisted until seen"), and its version records
/// the hash of the committed bytes.
pub struct GitVerifier {
    workspace: Workspace,
    commit: String,
    /// Paths the commit added or modified, with their content hash.
    changed: BTreeMap<String, Option<String>>,
}

impl GitVerifier {
    fn unchanged(workspace: Workspace, commit: String) -> Self {
        GitVerifier {
            workspace,
            commit,
            changed: BTreeMap::new(),
        }
    }
}

fn normalize_path(name: &str) -> String {
    name.trim().trim_start_matches("./").to_string()
}

impl Verifier for GitVerifier {
    fn verify_artifact(&self, artifact: &Artifact, _: &ArtifactVersion) -> Verification {
        let path = normalize_path(&artifact.name);
        let short = &self.commit[..self.commit.len().min(12)];
        if let Some(hash) = self.changed.get(&path) {
            let content_hash = match hash {
                Some(h) => Some(h.clone()),
                None => match self.workspace.file_at(&self.commit, &path) {
                    Ok(Some(bytes)) => Some(hex(&Sha256::digest(&bytes))),
                    _ => None,
                },
            };
            return Verification::Verified {
                by: format!("git:{short}"),
                content_hash,
            };
        }
        match self.workspace.file_at(&self.commit, &path) {
            Ok(Some(_)) => Verification::Rejected {
                reason: format!(
                    "claims {path} changed this turn, but commit {short} did not change it"
                ),
            },
            Ok(None) => Verification::Rejected {
                reason: format!(
                    "claimed file {path} is not in the turn's commit {short} (written is not persisted until seen)"
                ),
            },
            Err(e) => Verification::Rejected {
                reason: format!("could not read {path} at {short}: {e}"),
            },
        }
    }

    fn verify_resolution(&self, _: &Issue, _: &ResolutionClaim) -> Verification {
        // Only gates close issues (see `reconciler::apply_gates`).
        Verification::Unverified
    }
}

fn clip(s: &str, max: usize) -> String {
    baton_core::reconciler::clip(s.trim(), max)
}
