//! The tools' arguments: each a JSON object, its schema (from these types' doc
//! comments) listed with the tool.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartUnit {
    /// What the unit is to do, e.g. "Add rate limiting to the public API".
    pub(crate) description: String,
    /// `default` (the built-in route) or the path of a route file on the server's disk.
    #[serde(default)]
    pub(crate) route: Option<String>,
    /// Use the offline mock workers of three families whatever the configuration says.
    #[serde(default)]
    pub(crate) offline: bool,
    /// How long to wait for the unit to stop before answering that it goes on
    /// [default 30, at most 240].
    #[serde(default)]
    pub(crate) wait_seconds: Option<u64>,
    /// A git repository on the server's machine (relative: to where the server was
    /// started) to build in: the unit works on a branch of its own in a worktree of it.
    #[serde(default)]
    pub(crate) repo: Option<String>,
    /// With `repo`: the branch, tag or commit to start from [default: what is checked
    /// out].
    #[serde(default)]
    pub(crate) base: Option<String>,
    /// With `repo`: gates run in the worktree at the gate station, each `name=command`
    /// or `command` (e.g. `tests=cargo test`).
    #[serde(default)]
    pub(crate) gates: Vec<String>,
    /// With `repo`: land the branch on its base branch at the merge station.
    #[serde(default)]
    pub(crate) merge: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UnitArgs {
    /// The unit's id (or a unique prefix of it).
    pub(crate) unit: String,
    /// Wait up to this long for a unit this server is advancing to stop [default 0,
    /// at most 240].
    #[serde(default)]
    pub(crate) wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerArgs {
    /// The unit's id (or a unique prefix of it).
    pub(crate) unit: String,
    /// The human's answer to the question the unit stopped on: a decision, "accept",
    /// "2 more rounds", or guidance.
    pub(crate) answer: String,
    /// Continue the unit at once [default true].
    #[serde(default)]
    pub(crate) resume: Option<bool>,
    /// How long to wait for the continued unit to stop [default 30, at most 240].
    #[serde(default)]
    pub(crate) wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateRun {
    /// What the run is for.
    pub(crate) objective: String,
    /// The plan: one task per step, in order.
    pub(crate) tasks: Vec<String>,
    /// Tokens per briefing [default: the configuration's].
    #[serde(default)]
    pub(crate) budget: Option<usize>,
    /// The workers, as a roster file holds them (`{"workers": [...]}`); none: the
    /// server's configuration's (else offline mock workers).
    #[serde(default)]
    pub(crate) roster: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// The run's (or unit's) id, or a unique prefix of it.
    pub(crate) run: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeArgs {
    /// The run's (or unit's) id, or a unique prefix of it.
    pub(crate) run: String,
    /// At most this many turns (a plain run only; a unit runs until it stops).
    #[serde(default)]
    pub(crate) max_turns: Option<u32>,
    /// How long to wait for it to stop [default 30, at most 240].
    #[serde(default)]
    pub(crate) wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompileArgs {
    /// The run's id, or a unique prefix of it.
    pub(crate) run: String,
    /// The worker the briefing is for [default: the next turn's].
    #[serde(default)]
    pub(crate) worker: Option<String>,
    /// Tokens [default: the run's budget].
    #[serde(default)]
    pub(crate) budget: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnqueueArgs {
    /// What the jobs are for.
    pub(crate) objective: String,
    /// The plan: one task per step, in order.
    pub(crate) tasks: Vec<String>,
    /// One job each: a roster worker id, `a+b` for a team taking turns, or a coding
    /// agent's preset name; judged blind against each other.
    pub(crate) candidates: Vec<String>,
    /// `name=command` or a bare command, run in the worktree when the tasks are done.
    #[serde(default)]
    pub(crate) gates: Vec<String>,
    /// Run the gates after every turn too.
    #[serde(default)]
    pub(crate) gate_each_turn: bool,
    /// Turns given to fixing gates that still fail at the end [default 2].
    #[serde(default)]
    pub(crate) fix_turns: Option<u32>,
    /// The repository [default: the server's working directory].
    #[serde(default)]
    pub(crate) repo: Option<std::path::PathBuf>,
    /// The branch, tag or commit the jobs start from [default HEAD].
    #[serde(default)]
    pub(crate) base: Option<String>,
    /// What the judge scores the candidates against.
    #[serde(default)]
    pub(crate) rubric: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutboxArgs {
    /// One job (its id or a unique prefix) [default: every job with a result].
    #[serde(default)]
    pub(crate) job: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JudgeArgs {
    /// The group's id, or any of its jobs' ids.
    pub(crate) group: String,
    /// The judging worker (a roster id) [default: the roster's first API model].
    #[serde(default)]
    pub(crate) judge: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BenchArgs {
    /// The pool's id, as the configuration names it.
    pub(crate) pool: String,
    /// Why, for whoever reads it later.
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolArgs {
    /// The pool's id, as the configuration names it.
    pub(crate) pool: String,
}
