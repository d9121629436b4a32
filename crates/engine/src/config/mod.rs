//! Configuration: a raw file struct (TOML or JSON) resolved into a validated roster and
//! run settings. Precedence: defaults < file < `BATON_*` environment < command-line
//! flags; the CLI applies the last two.

use std::path::Path;

use baton_core::compiler::WorkerProfile;
use baton_core::ids::WorkerId;
use baton_core::router::{Glob, PoolId};
use baton_core::tokens::EstimatorKind;
use baton_gateway::{Credential, Redactor};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod pools;

pub use pools::Floor;
pub(crate) use pools::{check as check_floor, check_workers as check_floor_workers};

/// Default package budget in tokens when neither a per-package nor a total budget is set.
pub const DEFAULT_BUDGET: usize = 2000;
/// Default retries for a retryable model error (rate limit, overload, server error).
pub const DEFAULT_MAX_RETRIES: u32 = 2;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    /// SQLite database path.
    db: Option<String>,
    /// Token budget per package.
    budget: Option<usize>,
    /// Token budget for the whole plan, split across steps (later steps get more).
    total_budget: Option<usize>,
    /// `bpe` (default) or `heuristic`.
    estimator: Option<EstimatorKind>,
    /// Repair calls per claim when output fails its schema (default 1; 0 disables).
    repair_attempts: Option<u32>,
    workers: Option<Vec<RawWorker>>,
    /// Subscriptions the workers draw on (`[[pools]]`).
    pools: Option<Vec<pools::RawPool>>,
    /// Seats' narrowing and policy (`[[seats]]`).
    seats: Option<Vec<pools::RawSeat>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorker {
    id: String,
    model: String,
    family: Option<String>,
    role: Option<String>,
    api_key_env: Option<String>,
    api_base: Option<String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    context_window: Option<u64>,
    max_retries: Option<u32>,
    enabled: Option<bool>,
    /// A literal key. Discouraged (baton warns): prefer `api_key_env`. Never stored.
    api_key: Option<String>,
    price: Option<Price>,
    calls: Option<Calls>,
    /// The `[[pools]]` entry whose allowance this worker's calls count against.
    pool: Option<String>,
    /// Globs over seat names this worker may take; absent, every seat.
    qualified: Option<Vec<String>>,
    #[serde(default)]
    options: serde_json::Map<String, serde_json::Value>,
}

/// How many model calls an API worker makes per turn (`calls = "one"` or `"two"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calls {
    /// One call whose answer carries the result and the handoff (the default): the
    /// briefing is sent once per turn.
    One,
    /// An execute call, then a handoff call that repeats the briefing and quotes the
    /// result: two chances to get each claim right, at about twice the input tokens.
    Two,
}

/// A worker's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached prompt tokens; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<f64>,
}

impl Price {
    /// Cost in millionths of a dollar: tokens × dollars per million tokens.
    pub fn cost_micro_usd(&self, input: u64, output: u64, cached: u64) -> u64 {
        let cached = cached.min(input);
        let uncached = (input - cached) as f64 * self.input;
        let cached = cached as f64 * self.cached.unwrap_or(self.input);
        (uncached + cached + output as f64 * self.output).round() as u64
    }
}

/// One worker: configuration plus, at run time, a gateway. Holds no secret: the key is
/// named by `api_key_env` and read by the gateway layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub id: WorkerId,
    /// `provider/model`; the prefix picks the provider.
    pub model: String,
    pub family: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens, as the roster states it: briefings are
    /// compiled to fit it (with a margin for the estimator's error) before they are
    /// sent. Unset, a window the server tells (llama.cpp `/props` …) is used once a
    /// request did not fit or an answer was cut off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    pub max_retries: u32,
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Calls per turn for an API worker; `None` is one. A coding agent always runs
    /// once per turn, and a replay asks the way its script was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
    /// The pool whose allowance this worker's calls count against; `None` in a roster
    /// without pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolId>,
    /// Globs over seat names this worker may take (`lead.*`); empty means every seat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualified: Vec<Glob>,
    /// A literal key from the roster file, or one given in memory for one run. Never
    /// serialised, so it never reaches the store; `Debug` prints `[redacted]`.
    #[serde(skip)]
    pub api_key: Option<Credential>,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, serde_json::Value>,
}

impl WorkerConfig {
    pub fn mock(id: &str, model: &str) -> Self {
        WorkerConfig {
            id: WorkerId::new(id),
            model: format!("mock/{model}"),
            family: "mock".into(),
            role: None,
            api_key_env: None,
            api_base: None,
            temperature: None,
            max_tokens: None,
            context_window: None,
            max_retries: DEFAULT_MAX_RETRIES,
            enabled: true,
            price: None,
            calls: None,
            pool: None,
            qualified: Vec::new(),
            api_key: None,
            options: serde_json::Map::new(),
        }
    }

    /// The provider options with the roster's top-level settings folded in, as the
    /// gateway reads them.
    pub fn gateway_options(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut options = self.options.clone();
        if let Some(env) = &self.api_key_env {
            options.insert("api_key_env".into(), env.clone().into());
        }
        if let Some(base) = &self.api_base {
            options.insert("api_base".into(), base.clone().into());
        }
        options
    }

    /// The key this worker would be given, if any: its literal one, else the one its
    /// options or provider name from the environment. For scrubbing, so an unreadable
    /// variable is no key rather than an error.
    pub fn credential(&self) -> Option<Credential> {
        match &self.api_key {
            Some(key) => Some(key.clone()),
            None => baton_gateway::credential_for(&self.model, &self.gateway_options())
                .ok()
                .flatten(),
        }
    }

    /// Where this worker's key comes from, for `baton workers` (never the value).
    pub fn credential_status(&self) -> String {
        if self.api_key.is_some() {
            return "literal key in the roster (prefer api_key_env)".into();
        }
        match baton_gateway::credential_for(&self.model, &self.gateway_options()) {
            Ok(Some(_)) => match &self.api_key_env {
                Some(env) => format!("set ({env})"),
                None => "set (provider's default variable)".into(),
            },
            Ok(None) if baton_gateway::needs_key(&self.model) => {
                "missing: export the provider's key variable or set api_key_env".into()
            }
            Ok(None) => "not needed".into(),
            Err(e) => format!("missing: {e}"),
        }
    }

    pub fn profile(&self) -> WorkerProfile {
        WorkerProfile {
            id: self.id.clone(),
            model: self.model.clone(),
            family: self.family.clone(),
            role: self.role.clone(),
        }
    }

    /// The model name after the provider prefix.
    pub fn provider(&self) -> &str {
        self.model.split_once('/').map(|(p, _)| p).unwrap_or("")
    }
}

/// Every key `workers` can be given, to scrub from what must not carry one.
pub fn redactor_for<'w>(workers: impl IntoIterator<Item = &'w WorkerConfig>) -> Redactor {
    let mut redactor = Redactor::default();
    for key in workers.into_iter().filter_map(WorkerConfig::credential) {
        redactor.add(&key);
    }
    redactor
}

/// The workers of a run, in rotation order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roster {
    pub workers: Vec<WorkerConfig>,
}

impl Roster {
    /// The offline default: `n` deterministic mock workers.
    pub fn mock(n: usize) -> Roster {
        Roster {
            workers: (1..=n)
                .map(|i| WorkerConfig::mock(&format!("worker-{i}"), &format!("model-{i}")))
                .collect(),
        }
    }

    pub fn enabled(&self) -> impl Iterator<Item = (usize, &WorkerConfig)> {
        self.workers.iter().enumerate().filter(|(_, w)| w.enabled)
    }

    pub fn find(&self, id: &str) -> Result<&WorkerConfig> {
        self.workers
            .iter()
            .find(|w| w.id.as_str() == id)
            .ok_or_else(|| Error::NoSuchWorker {
                id: id.to_string(),
                known: self.ids(),
            })
    }

    pub fn ids(&self) -> String {
        self.workers
            .iter()
            .map(|w| w.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks what can be checked without running: ids, models, numbers.
    pub fn validate(&self) -> Result<()> {
        if self.enabled().next().is_none() {
            return Err(Error::Config(
                "the roster has no enabled worker; add one or set enabled = true".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for w in &self.workers {
            let id = w.id.as_str();
            if id.trim().is_empty() {
                return Err(Error::Config("a worker has an empty id".into()));
            }
            if !seen.insert(id) {
                return Err(Error::Config(format!("worker id \"{id}\" appears twice")));
            }
            baton_gateway::validate_model(&w.model)
                .map_err(|e| Error::Config(format!("worker {id}: {e}")))?;
            if w.calls == Some(Calls::Two) && w.provider() == "command" {
                return Err(Error::Config(format!(
                    "worker {id}: calls = \"two\" applies to API models; a coding agent runs once per turn and its handoff is derived from its commit and notes (remove `calls`)"
                )));
            }
            if let Some(t) = w.temperature
                && !(0.0..=2.0).contains(&t)
            {
                return Err(Error::Config(format!(
                    "worker {id}: temperature {t} is outside 0..2"
                )));
            }
            // Not left to the first call, which would look for a variable named "".
            if let Some(var) = w
                .gateway_options()
                .get("api_key_env")
                .and_then(|v| v.as_str())
                && var.trim().is_empty()
            {
                let usual = baton_gateway::providers::ProviderKind::from_prefix(w.provider())
                    .and_then(|k| k.default_key_env())
                    .unwrap_or("PROVIDER_API_KEY");
                return Err(Error::Config(format!(
                    "worker {id}: api_key_env is empty; write the name of the environment variable that holds its key (api_key_env = \"{usual}\"), or remove the line to use the provider's usual variable"
                )));
            }
            if w.context_window == Some(0) {
                return Err(Error::Config(format!(
                    "worker {id}: context_window = 0; give the model's context size in tokens (llama-server -c, Ollama num_ctx), or remove it"
                )));
            }
            baton_gateway::check_options(&w.model, &w.gateway_options())
                .map_err(|e| Error::Config(format!("worker {id}: {e}{}", misplaced(w, &e))))?;
        }
        Ok(())
    }
}

/// Whether `key` is a setting of the worker itself, which a roster may put in `options`
/// by mistake: a field of `[[workers]]`, read from `RawWorker` so it cannot drift from
/// what the roster accepts beside `model`. Left out: `api_key_env` and `api_base`, which
/// are folded into the options anyway (moving them changes nothing), `api_key` (refused
/// in options before this is asked, and discouraged beside `model`) and `options`.
fn is_worker_setting(key: &str) -> bool {
    !matches!(key, "api_key_env" | "api_base" | "api_key" | "options")
        && baton_gateway::struct_fields::<RawWorker>().contains(&key)
}

/// A hint when an unknown option is one of the worker's own settings, or one of them
/// folded into the options (`api_key_env`, `api_base`) that its provider does not use.
fn misplaced(worker: &WorkerConfig, error: &baton_gateway::Error) -> String {
    let baton_gateway::Error::UnknownOption { key, provider, .. } = error else {
        return String::new();
    };
    if !worker.options.contains_key(key) {
        format!(
            "; `{key}` is set on the worker, and provider {provider} does not use it: remove it"
        )
    } else if is_worker_setting(key) {
        format!(
            "; `{key}` is a setting of the worker itself: put it beside `model`, outside `options`"
        )
    } else {
        String::new()
    }
}

/// Budget and estimator settings of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Tokens per package, when no total is set.
    pub budget: usize,
    /// Tokens for the whole plan, split across steps with later steps getting more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_budget: Option<usize>,
    pub estimator: EstimatorKind,
    /// Repair calls allowed when a call's output fails its schema (each quotes the
    /// validation error); after them the turn fails.
    #[serde(default = "default_repairs")]
    pub repair_attempts: u32,
    /// The pools and seats turns are routed by (see `crate::seating`); empty: turns take
    /// the roster in order, and the run's stored configuration is what it always was.
    #[serde(default, skip_serializing_if = "Floor::is_empty")]
    pub floor: Floor,
}

fn default_repairs() -> u32 {
    DEFAULT_REPAIR_ATTEMPTS
}

/// The smallest budget accepted before the run's own briefings are measured: a briefing
/// whose task and objective run to `MIN_KEEP_CHARS` (120) characters or more needs
/// about 113 tokens at its shortest with either estimator (header and both cut to 120
/// characters). `policy::check_budgets` then refuses, at run creation, any budget below
/// the smallest briefing of one of the run's own steps.
pub const MIN_BUDGET: usize = 120;

/// Repair calls per claim by default.
pub const DEFAULT_REPAIR_ATTEMPTS: u32 = 1;

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            budget: DEFAULT_BUDGET,
            total_budget: None,
            estimator: EstimatorKind::Bpe,
            repair_attempts: DEFAULT_REPAIR_ATTEMPTS,
            floor: Floor::default(),
        }
    }
}

impl RunSettings {
    pub fn validate(&self) -> Result<()> {
        if self.budget < MIN_BUDGET {
            return Err(Error::Config(format!(
                "budget {} is too small to brief anyone: a briefing's header, task and \
                 objective at their shortest need about {MIN_BUDGET} tokens; set budget to \
                 at least {MIN_BUDGET} (--budget, BATON_BUDGET or `budget =` in baton.toml)",
                self.budget
            )));
        }
        if let Some(total) = self.total_budget
            && total < MIN_BUDGET
        {
            return Err(Error::Config(format!(
                "total budget {total} is too small to brief anyone: a briefing's header, task and objective at their shortest need about {MIN_BUDGET} tokens; set total_budget to at least {MIN_BUDGET} tokens per step"
            )));
        }
        Ok(())
    }
}

/// A configuration file after parsing: optional roster, settings and database path.
#[derive(Debug, Clone, Default)]
pub struct FileConfig {
    pub db: Option<String>,
    pub roster: Option<Roster>,
    pub budget: Option<usize>,
    pub total_budget: Option<usize>,
    pub estimator: Option<EstimatorKind>,
    pub repair_attempts: Option<u32>,
    /// `[[pools]]` and `[[seats]]`, checked against the roster; empty when the file
    /// defines neither, and runs take turns in roster order as they always have.
    pub floor: Floor,
    /// Things the user should fix (e.g. a literal key in the file).
    pub warnings: Vec<String>,
}

/// Reads a TOML or JSON configuration file (by extension; `.json` is JSON).
pub fn load_file(path: &Path) -> Result<FileConfig> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::ConfigFile {
        path: shown.clone(),
        detail: format!("cannot read: {e}"),
    })?;
    parse_file(&shown, &text)
}

pub fn parse_file(path: &str, text: &str) -> Result<FileConfig> {
    let bad = |detail: String| Error::ConfigFile {
        path: path.to_string(),
        detail,
    };
    let raw: RawFile = if path.ends_with(".json") {
        serde_json::from_str(text).map_err(|e| bad(e.to_string()))?
    } else {
        toml::from_str(text).map_err(|e| bad(e.to_string()))?
    };
    let warnings: Vec<String> = raw
        .workers
        .iter()
        .flatten()
        .filter(|w| w.api_key.is_some())
        .map(|w| {
            format!(
                "{path}: worker {} has a literal api_key; prefer api_key_env = \"VARIABLE\" so the key stays out of files",
                w.id
            )
        })
        .collect();
    if raw.workers.as_ref().is_some_and(Vec::is_empty) {
        return Err(bad(
            "the roster is empty; add at least one [[workers]] entry (or remove `workers` to use the offline mock workers)".into(),
        ));
    }
    let raw_workers = raw.workers.unwrap_or_default();
    let roster = if raw_workers.is_empty() {
        None
    } else {
        Some(roster_of(path, raw_workers)?)
    };
    let floor = pools::resolve(raw.pools.unwrap_or_default(), raw.seats.unwrap_or_default())
        .map_err(|e| bad(e.to_string()))?;
    match &roster {
        Some(roster) => pools::check(roster, &floor).map_err(|e| bad(e.to_string()))?,
        None if !floor.is_empty() => {
            return Err(bad(
                "pools or seats are defined but there are no [[workers]] to fill them; add workers, each with pool = \"…\"".into(),
            ));
        }
        None => {}
    }
    Ok(FileConfig {
        db: raw.db,
        roster,
        budget: raw.budget,
        total_budget: raw.total_budget,
        estimator: raw.estimator,
        repair_attempts: raw.repair_attempts,
        floor,
        warnings,
    })
}

/// The workers of an op (`baton_protocol::Op`), written as a roster file's
/// `[[workers]]` are (`{"workers": [...]}`); `source` names where it came from in errors.
pub fn parse_roster(source: &str, value: &serde_json::Value) -> Result<Roster> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawRoster {
        workers: Vec<RawWorker>,
    }
    let raw = RawRoster::deserialize(value).map_err(|e| Error::ConfigFile {
        path: source.to_string(),
        detail: e.to_string(),
    })?;
    roster_of(source, raw.workers)
}

/// `[[workers]]` resolved and validated; errors name `path`.
fn roster_of(path: &str, raw_workers: Vec<RawWorker>) -> Result<Roster> {
    let bad = |detail: String| Error::ConfigFile {
        path: path.to_string(),
        detail,
    };
    if raw_workers.is_empty() {
        return Err(bad(
            "the roster is empty; add at least one [[workers]] entry (or remove `workers` to use the offline mock workers)".into(),
        ));
    }
    let workers = raw_workers
        .into_iter()
        .map(|w| {
            let api_key = (w.api_key.map(Credential::new).transpose())
                .map_err(|e| bad(format!("worker {}: {e}", w.id)))?;
            let family = w.family.unwrap_or_else(|| {
                w.model
                    .split_once('/')
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default()
            });
            Ok(WorkerConfig {
                id: WorkerId::new(w.id),
                model: w.model,
                family,
                role: w.role,
                api_key_env: w.api_key_env,
                api_base: w.api_base,
                temperature: w.temperature,
                max_tokens: w.max_tokens,
                context_window: w.context_window,
                max_retries: w.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
                enabled: w.enabled.unwrap_or(true),
                price: w.price,
                calls: w.calls,
                pool: w.pool.map(PoolId::new),
                qualified: w
                    .qualified
                    .unwrap_or_default()
                    .into_iter()
                    .map(Glob::new)
                    .collect(),
                api_key,
                options: w.options,
            })
        })
        .collect::<Result<_>>()?;
    let roster = Roster { workers };
    roster.validate().map_err(|e| bad(e.to_string()))?;
    Ok(roster)
}

/// The roster file `baton init` writes: commented, valid, offline.
pub fn scaffold(workers: usize) -> String {
    let mut out = String::from(
        "# baton roster and settings. Precedence: defaults < this file < BATON_* env < flags.\n\
         # db = \".baton/baton.db\"     # SQLite file (BATON_DB)\n\
         # budget = 2000               # tokens per briefing (BATON_BUDGET)\n\
         # total_budget = 12000        # or: tokens for the whole plan, later steps get more\n\
         # estimator = \"bpe\"           # or \"heuristic\" (BATON_ESTIMATOR)\n\n\
         # Workers take turns in this order. model = \"provider/model\"; the prefix picks the\n\
         # provider: openai, anthropic, gemini, groq, deepseek, openrouter, together, mistral,\n\
         # xai, ollama, llamacpp, lmstudio, vllm, command (a coding-agent CLI), mock (offline,\n\
         # deterministic) or scripted (replays a JSONL file). See the README.\n",
    );
    for i in 1..=workers.max(1) {
        out.push_str(&format!(
            "\n[[workers]]\nid = \"worker-{i}\"\nmodel = \"mock/model-{i}\"\nfamily = \"mock\"\n\
             # role = \"drafter\"\n# temperature = 0.2\n# max_tokens = 4096\n# context_window = 8192   # the model's context, if known\n# max_retries = 2\n\
             # calls = \"one\"               # or \"two\": a separate handoff call per turn\n\
             # enabled = true\n# api_key_env = \"PROVIDER_API_KEY\"   # for real providers\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests;
