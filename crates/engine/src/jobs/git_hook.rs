//! The workspace side of a job's turn: commit the worktree after every turn (a failed
//! turn's edits are thrown away) and check claimed files against that commit; and the
//! gates' station, run on that commit after the reconciler.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::claims::Refusal;
use baton_core::reconciler::{Verification, Verifier};
use baton_core::state::{Artifact, ArtifactVersion, Issue, ResolutionClaim};
use baton_core::turn::WorkspaceTurn;
use baton_workspace::{ChangeStatus, CommitOutcome, TurnCommitInfo, Workspace};
use sha2::{Digest, Sha256};

use baton_protocol::EventKind;

use super::gates::{GateSpec, run_gate};
use crate::hook::{GateInput, GateOutcome, GateStation, HookOutcome, TurnFacts, WorkspaceHook};
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
    /// Every worker's key, scrubbed from the gates' whole output.
    pub keys: baton_gateway::Redactor,
    /// Proves this process still holds the job before anything is committed to git (a
    /// worker whose lease was taken over must not commit, to the store or the branch).
    pub fence: Option<Arc<dyn Fn() -> Result<()> + Send + Sync>>,
    /// The commit of the last turn the record has; the next turn's changes are taken
    /// against it, even when the agent committed on its own.
    pub last_commit: std::sync::Mutex<String>,
    /// Stops the gates when the turn is cancelled.
    pub cancel: baton_gateway::Cancel,
}

fn ws_err(e: baton_workspace::Error) -> Error {
    Error::Workspace(e)
}

impl GitHook {
    /// Puts the worktree back at `commit`, discarding what came after it (a failed
    /// turn's edits, a crashed process's half turn, a gate's side effects). Nothing is
    /// lost: uncommitted changes are first saved as a commit under
    /// `refs/baton/discarded/<job>/…`, whose name is returned. Ignored files, baton's
    /// `.baton/` scratch area among them, stay.
    pub fn reset_to(&self, commit: &str, why: &str) -> Result<Option<String>> {
        let dir = &self.workspace.path;
        let saved = baton_workspace::set_aside(dir, &self.job_id, commit, why).map_err(ws_err)?;
        self.workspace.reset_hard(commit).map_err(ws_err)?;
        *self.last_commit.lock().unwrap_or_else(|p| p.into_inner()) = commit.to_string();
        Ok(saved)
    }

    fn last(&self) -> String {
        self.last_commit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl WorkspaceHook for GitHook {
    fn path(&self) -> &Path {
        &self.workspace.path
    }

    fn after_calls(&self, facts: &TurnFacts<'_>) -> Result<HookOutcome> {
        let _shared = super::GIT_WORKTREES
            .read()
            .unwrap_or_else(|p| p.into_inner());
        // Nothing reaches the branch from a worker whose lease was taken over.
        if let Some(fence) = &self.fence {
            fence()?;
        }
        let last = self.last();
        let Some(result) = facts.result else {
            // Never merged half-formed: a failed turn leaves no trace in the worktree.
            let saved = self.reset_to(&last, &format!("edits of failed turn {}", facts.turn))?;
            let mut warning =
                "the turn failed; its edits in the worktree were discarded".to_string();
            if let Some(r) = saved {
                warning.push_str(&format!(" (kept at {r})"));
            }
            return Ok(HookOutcome {
                workspace: WorkspaceTurn {
                    commit: last.clone(),
                    changed: false,
                    files: Vec::new(),
                    gates: Vec::new(),
                },
                verifier: Arc::new(GitVerifier::unchanged(self.workspace.clone(), last)),
                refusals: Vec::new(),
                changed_files: Vec::new(),
                warnings: vec![warning],
            });
        };
        // An agent that commits its own work (aider does by default) moved HEAD: take
        // its commits back into the index, so the turn's commit holds all of them and
        // carries the turn's trailers.
        if self.workspace.head().map_err(ws_err)? != last {
            self.workspace.reset_soft(&last).map_err(ws_err)?;
        }
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
        *self.last_commit.lock().unwrap_or_else(|p| p.into_inner()) = commit.clone();
        let changed_files: BTreeMap<String, Option<String>> = files
            .iter()
            .filter(|f| f.status != ChangeStatus::Deleted)
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect();
        Ok(HookOutcome {
            workspace: WorkspaceTurn {
                commit: commit.clone(),
                changed,
                files: files.iter().map(|f| f.path.clone()).collect(),
                gates: Vec::new(),
            },
            verifier: Arc::new(GitVerifier {
                workspace: self.workspace.clone(),
                commit,
                changed: changed_files.clone(),
            }),
            refusals,
            changed_files: changed_files.keys().cloned().collect(),
            warnings: Vec::new(),
        })
    }

    fn gates(&self) -> Option<&dyn GateStation> {
        (!self.gates.is_empty()).then_some(self as &dyn GateStation)
    }

    fn last_commit(&self) -> Option<String> {
        Some(self.last())
    }

    fn checks(&self) -> Vec<String> {
        self.gates
            .iter()
            .map(|g| format!("`{}`: `{}`", g.name, g.command))
            .collect()
    }

    fn change(&self) -> Option<Result<crate::hook::Change>> {
        let head = self.last();
        let base = self.workspace.base.clone();
        Some(
            self.workspace
                .patch(&base, &head)
                .map_err(ws_err)
                .map(|patch| crate::hook::Change {
                    base,
                    head,
                    patch: String::from_utf8_lossy(&patch).into_owned(),
                }),
        )
    }
}

impl GateStation for GitHook {
    fn every_turn(&self) -> bool {
        self.gate_each_turn
    }

    fn run(&self, input: &GateInput<'_>) -> Result<GateOutcome> {
        let _shared = super::GIT_WORKTREES
            .read()
            .unwrap_or_else(|p| p.into_inner());
        let mut results = Vec::with_capacity(self.gates.len());
        for gate in &self.gates {
            (input.emit)(EventKind::GateStarted {
                name: gate.name.clone(),
                command: gate.command.clone(),
            });
            let result = run_gate(
                gate,
                &self.workspace.path,
                input.commit,
                &self.gate_dir,
                &self.hide,
                &self.keys,
                Some(&self.cancel),
            );
            (input.emit)(EventKind::GateFinished {
                name: result.name.clone(),
                passed: result.passed,
                duration_ms: result.duration_ms,
            });
            results.push(result);
        }
        // What the gates wrote is not the next worker's turn.
        let mut warnings = Vec::new();
        let why = format!("files the gates changed after turn {}", input.turn);
        if let Some(saved) = self.reset_to(input.commit, &why)? {
            warnings.push(format!(
                "the gates changed files in the worktree; discarded (kept at {saved})"
            ));
        }
        Ok(GateOutcome { results, warnings })
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
                    Ok(Some(bytes)) => Some(hex::encode(Sha256::digest(&bytes))),
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

    fn observed_change(&self, artifact: &Artifact) -> Option<String> {
        let path = normalize_path(&artifact.name);
        match self.changed.get(&path)? {
            Some(hash) => Some(hash.clone()),
            None => self
                .workspace
                .file_at(&self.commit, &path)
                .ok()
                .flatten()
                .map(|bytes| hex::encode(Sha256::digest(&bytes))),
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
