//! The options a command worker reads, as one struct: its fields are the keys
//! (`deny_unknown_fields`), so the list of known keys cannot drift from the reading.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommandOptions {
    /// The command line, with placeholders (`{briefing_file}` …).
    pub command: Option<String>,
    /// A known agent CLI whose command line, environment and scratch paths apply.
    pub preset: Option<String>,
    pub timeout_s: Option<f64>,
    pub silence_s: Option<f64>,
    pub prompt_silence_s: Option<f64>,
    /// Variables set for the agent.
    pub env: Option<BTreeMap<String, EnvValue>>,
    /// Variables passed on from baton's environment.
    pub pass_env: Option<Vec<String>>,
    /// The variable the worker's key is exported under.
    pub api_key_env: Option<String>,
    pub output_dir: Option<String>,
    /// Only `derive` is left (an agent runs once per turn).
    pub handoff: Option<String>,
    /// Paths (globs) the agent writes for itself, never committed.
    pub scratch: Option<Vec<String>>,
    pub sandbox: Option<SandboxMode>,
    pub sandbox_hide: Option<Vec<PathBuf>>,
}

/// A value in `options.env`: TOML gives strings, numbers and booleans alike.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum EnvValue {
    Text(String),
    Number(serde_json::Number),
    Flag(bool),
}

impl EnvValue {
    pub fn into_string(self) -> String {
        match self {
            EnvValue::Text(s) => s,
            EnvValue::Number(n) => n.to_string(),
            EnvValue::Flag(b) => b.to_string(),
        }
    }
}

/// `options.sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SandboxMode {
    None,
    Bwrap,
}

impl crate::options::ProviderOptions for CommandOptions {
    fn expects(key: &str) -> &'static str {
        match key {
            "timeout_s" | "silence_s" | "prompt_silence_s" => "a positive number of seconds",
            "env" => "a table mapping variable names to strings, numbers or booleans",
            "pass_env" => "a list of variable names",
            "scratch" => "a list of paths relative to the worktree (globs allowed)",
            "sandbox" => "a known sandbox (known: none, bwrap)",
            "sandbox_hide" => "a list of paths",
            _ => "a string",
        }
    }
}
