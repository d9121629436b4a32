//! Commands in: what a client (the CLI today; the server, the dashboard and the MCP
//! server later) asks the engine to do. One vocabulary, so a stop button and
//! `baton cancel` mean the same thing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// A new run: an objective and its plan, worked by `roster` (a roster file's
    /// contents, as the engine validates them).
    CreateRun {
        objective: String,
        tasks: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step_budgets: Vec<Option<usize>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        roster: Option<serde_json::Value>,
    },
    /// One turn of a run.
    Step { run: String },
    /// Turns until the run finishes or blocks (or `max_turns` ran).
    Resume {
        run: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_turns: Option<u32>,
    },
    /// Stops what `target` is doing; nothing half-done is committed.
    Cancel { target: CancelTarget },
    /// Puts a job on the queue.
    Enqueue {
        objective: String,
        tasks: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
    },
    /// Compares a group's candidate jobs.
    Judge { group: String },
    /// A human's answer to the question a blocked run asked; the run continues.
    Answer { run: String, text: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum CancelTarget {
    Run(String),
    Job(String),
    /// A whole `baton work` process, by its owner name.
    Worker(String),
}
