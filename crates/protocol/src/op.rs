//! Commands in: what a client (the CLI today; the server, the dashboard and the MCP
//! server later) asks the engine to do. One vocabulary, carried out by one function
//! (`baton_engine::ops::apply`), so a stop button and `baton cancel` mean the same
//! thing.
//!
//! Not here yet: answering a blocked run's question. A blocked run continues today
//! when a human resumes it (`Op::Resume`, with a new roster when the workers were the
//! problem); recording a human's answer as state the next briefing carries needs its
//! own path through the reconciler, which the assembly line brings (issue 12).

use baton_core::state::{StepScope, StepTag};
use baton_core::tokens::EstimatorKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// A new run of an objective and its plan; no turn runs yet (`Resume` runs them).
    CreateRun {
        objective: String,
        tasks: Vec<String>,
        /// A budget per step, in order (`null` keeps the step's share of the plan's).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_budgets: Vec<Option<usize>>,
        /// A seat per step, in order (`null` keeps the default seat of a plan step), for a
        /// run routed by pools and seats: `review.code` for a step that reviews.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_seats: Vec<Option<String>>,
        /// The tags of each step, in order (`[]`: none): a routed run's seat policy
        /// (`deny_tags`) reads them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_tags: Vec<Vec<StepTag>>,
        /// The work each step covers, in order (`null`: as its title reads): `earlier`
        /// briefs it with every earlier step's work, `own` with its own part.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_scopes: Vec<Option<StepScope>>,
        /// The workers, as a roster file holds them (`{"workers": [...]}`, the fields of
        /// `[[workers]]`); none: the server's roster.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        roster: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Settings::is_empty")]
        settings: Settings,
    },
    /// One turn of a run.
    Step { run: String },
    /// Turns until the run finishes or blocks (or `max_turns` ran). A blocked run is
    /// re-opened: resuming it is a human's decision that it may continue.
    Resume {
        run: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_turns: Option<u32>,
        /// Replaces the run's roster first (a fixed model, provider or base URL),
        /// recorded in the run's history.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        roster: Option<NewRoster>,
    },
    /// Stops what `target` is doing; nothing half-done is committed.
    Cancel { target: CancelTarget },
    /// Queues one job per candidate, each to run in its own git worktree.
    Enqueue {
        objective: String,
        tasks: Vec<String>,
        /// Each a roster worker id, `a+b` for a team taking turns, or a coding agent's
        /// preset name; the candidates are judged blind against each other.
        candidates: Vec<String>,
        /// `name=command` or a bare command, run in the worktree when the tasks are done.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gates: Vec<String>,
        /// Run the gates after every turn too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        gate_each_turn: bool,
        /// Turns given to fixing gates that still fail at the end [default: 2].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fix_turns: Option<u32>,
        /// How command workers are confined (a worker's own `options.sandbox` wins).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Sandbox>,
        /// The repository [default: the server's working directory].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<std::path::PathBuf>,
        /// The branch, tag or commit the jobs start from [default: HEAD].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base: Option<String>,
        /// Where the worktrees go [default: <repo>/.baton/worktrees].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktrees: Option<std::path::PathBuf>,
        /// What the judge scores the candidates against, fixed now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rubric: Option<String>,
        /// A budget per step, in order, as in `CreateRun` (`null` keeps the step's share).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_budgets: Vec<Option<usize>>,
        /// A seat per step, in order, as in `CreateRun`: read when pools or seats are
        /// configured, which route every job's turns.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_seats: Vec<Option<String>>,
        /// The tags of each step, in order, as in `CreateRun`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_tags: Vec<Vec<StepTag>>,
        /// The work each step covers, in order, as in `CreateRun`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_scopes: Vec<Option<StepScope>>,
        /// The workers candidates are looked up in, as in `CreateRun`; none: the
        /// server's roster.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        roster: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Settings::is_empty")]
        settings: Settings,
    },
    /// Compares a group's finished candidate jobs, blind, against its rubric.
    Judge {
        /// The group's id, or any of its jobs' ids.
        group: String,
        /// The judging worker (a roster id) [default: the roster's first API model].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        judge: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum CancelTarget {
    Run(String),
    Job(String),
    /// A whole `baton work` process, by its owner name.
    Worker(String),
    /// The judge of a group of candidate jobs, whichever process runs it.
    Group(String),
}

/// A run's or a job's budgets; each one unset is the server's (the CLI's: its flags,
/// else the configuration file's, else the default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Tokens per briefing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<usize>,
    /// Tokens for the whole plan, split across its steps (later steps get more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_budget: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimator: Option<EstimatorKind>,
}

impl Settings {
    pub fn is_empty(&self) -> bool {
        *self == Settings::default()
    }
}

/// A roster that replaces a run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRoster {
    /// As in `CreateRun`.
    pub roster: serde_json::Value,
    /// Where it came from (a file's path), recorded with the change.
    pub source: String,
}

/// How command workers (coding agents) are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    /// bubblewrap: the worktree writable, the rest read-only, the checkout and baton's
    /// database hidden.
    Bwrap,
    /// No confinement.
    None,
}

impl Sandbox {
    /// The value of a worker's `options.sandbox`.
    pub fn name(self) -> &'static str {
        match self {
            Sandbox::Bwrap => "bwrap",
            Sandbox::None => "none",
        }
    }
}
