//! The seam between a turn and the workspace its workers change: after the model calls
//! and before reconciliation, the workspace is committed and checked, so the reconciler
//! can verify claims against what is actually on disk. Its gates are a station of their
//! own ([`GateStation`]), run after the reconciler on that commit.

use std::path::Path;
use std::sync::Arc;

use baton_core::claims::{Refusal, WorkerResult};
use baton_core::compiler::Assignment;
use baton_core::ids::RunId;
use baton_core::reconciler::Verifier;
use baton_core::turn::WorkspaceTurn;

use crate::Result;
use crate::config::WorkerConfig;
pub use crate::orchestrator::station::{GateInput, GateOutcome, GateStation};

/// What the engine knows about a turn when its calls are done.
#[derive(Clone, Copy)]
pub struct TurnFacts<'a> {
    pub run: &'a RunId,
    pub turn: u32,
    pub worker: &'a WorkerConfig,
    pub assignment: &'a Assignment,
    /// The parsed result, when the turn's calls succeeded.
    pub result: Option<&'a WorkerResult>,
}

/// What the workspace made of the turn.
pub struct HookOutcome {
    /// The turn's commit (its gates are filled in later, when they ran).
    pub workspace: WorkspaceTurn,
    /// Checks the turn's claims against its commit.
    pub verifier: Arc<dyn Verifier>,
    /// Claims the workspace disproves (changes claimed, diff empty).
    pub refusals: Vec<Refusal>,
    /// Files the turn's commit added or modified: artifacts of the turn, claimed or not.
    pub changed_files: Vec<String>,
    pub warnings: Vec<String>,
}

pub trait WorkspaceHook: Send + Sync {
    /// Where the workers run.
    fn path(&self) -> &Path;
    /// Called once per turn after its model calls. A failed turn's changes are thrown
    /// away (never merged half-formed); a successful turn's are committed.
    fn after_calls(&self, facts: &TurnFacts<'_>) -> Result<HookOutcome>;
    /// The workspace's gates, when it has any.
    fn gates(&self) -> Option<&dyn GateStation> {
        None
    }
    /// The commit of the last turn the record has, when the workspace knows it.
    fn last_commit(&self) -> Option<String> {
        None
    }
    /// What is checked when a worker finishes (e.g. the job's gates, as
    /// `` `name`: `command` ``), for an agent's briefing.
    fn checks(&self) -> Vec<String> {
        Vec::new()
    }
    /// The change so far: the patch from the workspace's base to the last turn the
    /// record has, with the two commits, for a checking seat's briefing.
    fn change(&self) -> Option<Result<Change>> {
        None
    }
}

/// A workspace's change so far.
#[derive(Debug, Clone)]
pub struct Change {
    pub base: String,
    pub head: String,
    /// `git diff base head`, as text.
    pub patch: String,
}
