//! The seam between a turn and the workspace its workers change: after the model calls
//! and before reconciliation, the workspace is committed, checked and gated, so the
//! reconciler can verify claims against what is actually on disk.

use std::path::Path;
use std::sync::Arc;

use baton_core::claims::{Refusal, WorkerResult};
use baton_core::compiler::Assignment;
use baton_core::ids::RunId;
use baton_core::reconciler::Verifier;
use baton_core::turn::WorkspaceTurn;

use crate::Result;
use crate::config::WorkerConfig;

/// What the engine knows about a turn when its calls are done.
#[derive(Clone, Copy)]
pub struct TurnFacts<'a> {
    pub run: &'a RunId,
    pub turn: u32,
    pub worker: &'a WorkerConfig,
    pub assignment: &'a Assignment,
    /// The parsed result, when the turn's calls succeeded.
    pub result: Option<&'a WorkerResult>,
    /// True when, if this turn commits, the plan has nothing left (gates run at the end).
    pub last: bool,
    /// Says what the hook does as it does it (a gate started, a gate finished): the
    /// engine stamps the event, publishes it live and commits it with the turn.
    pub emit: &'a (dyn Fn(baton_protocol::EventKind) + Sync),
}

/// What the workspace made of the turn.
pub struct HookOutcome {
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
    /// What is checked when a worker finishes (e.g. the job's gates, as
    /// `` `name`: `command` ``), for an agent's briefing.
    fn checks(&self) -> Vec<String> {
        Vec::new()
    }
}
