//! Model gateways: the only layer that knows providers (invariant 10).
//!
//! A `Gateway` takes one normalised request — exactly a system and a user message — and
//! returns one normalised response. Providers in this crate: `mock` (deterministic,
//! offline, used by the demo), `scripted` (replays recorded responses from a JSONL
//! file keyed by turn and call) and the HTTP providers in [`providers`]: OpenAI-compatible
//! Chat Completions (OpenAI and the servers that speak its dialect), Anthropic Messages
//! and Gemini `generateContent`; and [`command`], a coding-agent CLI (or any program) run
//! in a job's workspace.
//!
//! Retry is a value ([`RetryPolicy`]) applied around any gateway by
//! [`complete_with_retry`]; providers only classify failures and report the delay the
//! server asked for.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use baton_core::ErrorClass;
use baton_core::turn::CallKind;
use thiserror::Error;

pub mod cancel;
pub mod command;
pub mod contain;
mod credential;
mod http;
pub mod mock;
mod options;
pub mod process;
pub mod providers;
pub mod retry;
pub mod retry_after;
pub mod scripted;

pub use cancel::Cancel;
pub use command::CommandGateway;
pub use credential::{Credential, Redactor, credential_for, resolve_credential};
pub use mock::MockGateway;
pub use options::{check_options, fields as struct_fields, known_options};
pub use providers::HttpGateway;
pub use retry::{Attempt, RetryPolicy, complete_with_retry};
pub use scripted::ScriptedGateway;

/// One model call: exactly `[system, user]`, plus what the gateway needs to route it.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The model after its provider prefix (`gpt-4.1-mini`, `demo`).
    pub model: &'a str,
    pub system: &'a str,
    pub user: &'a str,
    /// Which call of the turn this is; scripted replays are keyed on it.
    pub call: CallKind,
    /// The run's turn number; scripted replays are keyed on it.
    pub turn: u32,
    /// The JSON Schema the answer must match.
    pub schema: &'a serde_json::Value,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// The directory a command worker runs in (a job's git worktree); `None` for API
    /// models, which have no workspace.
    pub workspace: Option<&'a std::path::Path>,
    /// Stops the call (an agent run, a wait before a retry) when cancelled.
    pub cancel: Option<&'a Cancel>,
    /// Receives an agent's output lines as they come (`baton -v work`), scrubbed of
    /// its key; API models send none.
    pub output: Option<&'a OutputSink>,
    /// Keeps `pair_hash` once computed, so the caller that built the request and a
    /// gateway that sends it as it was handed hash its bytes once between them; `None`
    /// computes it at every ask.
    pub hashed: Option<&'a PairHashMemo>,
}

impl ModelRequest<'_> {
    /// sha256 (hex) of `system`, NUL, `user`: the request as built, which is what a
    /// gateway with no wire format of its own sends (see `Sent::pair`). Computed once
    /// per `hashed` memo and taken from it only for these same two texts.
    pub fn pair_hash(&self) -> String {
        let Some(memo) = self.hashed else {
            return pair_hash(self.system, self.user);
        };
        let texts = PairHashMemo::key(self.system, self.user);
        let (hashed, hash) = memo
            .0
            .get_or_init(|| (texts, pair_hash(self.system, self.user)));
        if *hashed == texts {
            hash.clone()
        } else {
            pair_hash(self.system, self.user)
        }
    }
}

/// Where a request's `pair_hash` is kept (see `ModelRequest::hashed`): one per request,
/// living no longer than the texts it was made for. It names the texts it hashed by
/// address and length, so a copy of the request with other texts (a gateway that
/// rewrote the user message before handing it on) is hashed on its own; texts that a
/// request borrows cannot change, so the same address and length are the same bytes.
#[derive(Debug, Default)]
pub struct PairHashMemo(std::sync::OnceLock<([usize; 4], String)>);

impl PairHashMemo {
    fn key(system: &str, user: &str) -> [usize; 4] {
        [
            system.as_ptr() as usize,
            system.len(),
            user.as_ptr() as usize,
            user.len(),
        ]
    }
}

/// sha256 (hex) of `system`, NUL, `user`, hashed where they lie (nothing is copied).
pub fn pair_hash(system: &str, user: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(system.as_bytes());
    h.update([0u8]);
    h.update(user.as_bytes());
    hex::encode(h.finalize())
}

/// One line an agent printed.
#[derive(Debug, Clone, Copy)]
pub struct OutputLine<'a> {
    pub stderr: bool,
    pub line: &'a str,
}

/// Where an agent's output lines go while it runs.
#[derive(Clone)]
pub struct OutputSink(pub std::sync::Arc<dyn Fn(OutputLine<'_>) + Send + Sync>);

impl OutputSink {
    pub fn new(f: impl Fn(OutputLine<'_>) + Send + Sync + 'static) -> Self {
        OutputSink(std::sync::Arc::new(f))
    }

    pub fn send(&self, line: OutputLine<'_>) {
        (self.0)(line)
    }
}

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink")
    }
}

/// Token usage as the provider reported it (the mock reports its own estimate).
/// Sums saturate: the numbers come from outside.
///
/// Normalised across providers: `input_tokens` counts every prompt token, including
/// those served from the provider's cache; `cached_tokens` is the cached part of it
/// (Anthropic reports cache reads and writes apart from `input_tokens`, so its three
/// numbers are added up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

impl Usage {
    /// Both counts together: every attempt of a call is billed.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cached_tokens: self.cached_tokens.saturating_add(other.cached_tokens),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelResponse {
    pub text: String,
    pub usage: Usage,
    /// What the gateway put on the wire for the call that returned this answer.
    pub sent: Sent,
}

/// A request as the gateway sent it, measured from the bytes it built: the transfer
/// audit's evidence that a call was exactly `[system, user]`, taken where the request
/// leaves baton rather than assumed from how the engine asked. The default (no
/// messages, no hash) is what a gateway that measured nothing reports, and it fails
/// the audit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    /// Messages in the request; a system prompt the wire carries apart from the
    /// conversation (Anthropic's `system`, Gemini's `systemInstruction`) counts as one.
    pub messages: u32,
    /// sha256 (hex) of the request as sent: the HTTP body, or for a gateway with no
    /// wire format of its own (mock, replay, agent CLI) the system and user texts it
    /// was handed, NUL-separated.
    pub request_hash: String,
}

impl Sent {
    /// The request handed to a gateway that sends both messages as they are.
    pub fn pair(request: &ModelRequest<'_>) -> Sent {
        Sent {
            messages: 2,
            request_hash: request.pair_hash(),
        }
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Failure classes callers act on.
///
/// No variant ever carries a credential: provider error bodies are scrubbed of the key
/// before their message is kept.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    #[error("rate limited{}{}", show_delay(retry_after), show_message(message))]
    RateLimited {
        retry_after: Option<Duration>,
        /// What the provider said, when it said anything.
        message: String,
    },
    #[error("provider overloaded{}: {message}", show_delay(retry_after))]
    Overloaded {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("authentication failed: {message}")]
    Auth { message: String },
    /// The account's quota or credit is spent; waiting a few seconds will not help.
    /// `resets_after` is how long until the provider said the quota comes back, when
    /// it said so (a reset header, Anthropic's "You will regain access on …"): the
    /// engine records it so the worker's pool is marked exhausted until then.
    #[error("quota exhausted{}: {message}", show_reset(resets_after))]
    QuotaExhausted {
        message: String,
        resets_after: Option<Duration>,
    },
    #[error("request too long for the model's context: {message}")]
    ContextTooLong { message: String },
    #[error("bad request: {message}")]
    BadRequest { message: String },
    /// The provider does not know the model (HTTP 404 on the model).
    #[error("unknown model \"{model}\": {message}")]
    UnknownModel { model: String, message: String },
    #[error("server error: {message}")]
    Server { message: String },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The answer stopped at the output limit (`finish_reason: length`,
    /// `stop_reason: max_tokens`, `finishReason: MAX_TOKENS`): the claim is incomplete.
    /// Not retried: the same request would stop at the same place. `usage` is what the
    /// provider reported (and bills) for the cut-off answer.
    #[error("output truncated: {message}")]
    Truncated {
        message: String,
        usage: Usage,
        /// What the model wrote before it was cut off (scrubbed of the key), so the
        /// record can show it.
        partial: String,
    },
    /// The provider answered, and billed, but the answer holds no content (no text,
    /// no tool call). Retried: a second sample usually has one.
    #[error("empty reply: {detail}")]
    EmptyReply { detail: String, usage: Usage },
    /// The server's answer could not be read: invalid JSON, a body cut short, or a
    /// response missing the fields the wire format promises.
    #[error("unparseable response: {detail}")]
    Unparseable { detail: String },
    /// No HTTP exchange happened or it broke off: connection refused or reset, host
    /// not found, TLS failure. `sent` is false when the request cannot have reached
    /// the provider (refused, unresolved, never connected): nothing was billed, and
    /// baton counts no tokens for it.
    #[error("provider unreachable: {detail}")]
    Unreachable { detail: String, sent: bool },
    /// A scripted replay has no response for this turn and call.
    #[error(
        "{path}: no scripted response for turn {turn}, {call} call; the script has {available} entries — record a longer run or extend the file"
    )]
    ScriptExhausted {
        path: String,
        turn: u32,
        call: &'static str,
        available: usize,
    },
    #[error("script {path}, line {line}: {detail}")]
    BadScript {
        path: String,
        line: usize,
        detail: String,
    },
    #[error("unknown provider \"{provider}\" in model \"{model}\"; this build knows: {known}")]
    UnknownProvider {
        provider: String,
        model: String,
        known: &'static str,
    },
    #[error("model \"{model}\" needs a provider prefix, e.g. \"mock/{model}\"")]
    MissingProvider { model: String },
    #[error("worker configuration: {0}")]
    Config(String),
    /// A worker's `options` hold a key its provider does not read (a typo, or a
    /// setting that belongs on the worker itself).
    #[error(
        "unknown option \"{key}\" for provider {provider}{}; {provider} accepts: {known}",
        suggestion.as_ref().map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default()
    )]
    UnknownOption {
        provider: String,
        key: String,
        /// The known key nearest to `key`, when one is close.
        suggestion: Option<String>,
        known: String,
    },
    /// A command worker's process failed (non-zero exit, a signal, or an error its
    /// own output reports). Not retried: a crashed agent usually crashes again.
    /// `message` is the agent's own word: the error its CLI reported in its output,
    /// else the end of its stderr, else the end of its stdout.
    #[error("the agent failed ({status}): {message} (its output is in {output})")]
    AgentExited {
        status: String,
        message: String,
        output: String,
    },
    /// A command worker ran past its `timeout_s` and was killed.
    #[error(
        "the agent was killed after running {:.0} s, its limit (options.timeout_s); its output is in {output}",
        after.as_secs_f64()
    )]
    AgentTimedOut { after: Duration, output: String },
    /// A command worker printed nothing for too long and was killed.
    #[error(
        "the agent was killed: no output for {:.1} s (its output is in {output})",
        silent_for.as_secs_f64()
    )]
    AgentSilent {
        silent_for: Duration,
        output: String,
    },
    /// A command worker stopped at a question nobody will answer.
    #[error("the agent is waiting for input: {prompt}; run it non-interactively — see the presets")]
    AgentWaitingForInput { prompt: String },
    /// The call was stopped before it finished: baton was interrupted (Ctrl-C,
    /// SIGTERM) or the job's lease was lost. Nothing it did is committed.
    /// An error replayed from a script exported from a run: it behaves as `inner`
    /// (retries, class) and reads as the recorded words, so a replay records exactly
    /// what the original run did.
    #[error("{display}")]
    Replayed { inner: Box<Error>, display: String },
    #[error("cancelled before the call finished")]
    Cancelled,
}

fn show_message(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

fn show_reset(reset: &Option<Duration>) -> String {
    reset
        .map(|d| format!(" (the provider says it resets in {} s)", d.as_secs()))
        .unwrap_or_default()
}

fn show_delay(delay: &Option<Duration>) -> String {
    delay
        .map(|d| format!(" (retry after {:.1}s)", d.as_secs_f64()))
        .unwrap_or_default()
}

impl Error {
    /// Worth retrying with the same request.
    pub fn is_retryable(&self) -> bool {
        if let Error::Replayed { inner, .. } = self {
            return inner.is_retryable();
        }
        // Not a timeout: the call already waited its whole limit, and a hung server
        // hangs again (three retries of 300 s kept a one-worker run waiting 45 minutes
        // before it blocked). The turn fails; the next turn tries again.
        matches!(
            self,
            Error::RateLimited { .. }
                | Error::Overloaded { .. }
                | Error::Server { .. }
                | Error::AgentSilent { .. }
                | Error::Unparseable { .. }
                | Error::EmptyReply { .. }
                | Error::Unreachable { .. }
        )
    }

    /// What the provider reported using for a reply baton rejected: it bills those
    /// tokens, so they count like an accepted reply's.
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Error::Truncated { usage, .. } | Error::EmptyReply { usage, .. } => Some(*usage),
            Error::Replayed { inner, .. } => inner.usage(),
            _ => None,
        }
    }

    /// What a truncated answer held before it was cut off.
    pub fn partial_output(&self) -> Option<&str> {
        match self {
            Error::Truncated { partial, .. } if !partial.is_empty() => Some(partial),
            Error::Replayed { inner, .. } => inner.partial_output(),
            _ => None,
        }
    }

    /// Whether the request may have reached the provider (and been billed). False for
    /// a request that was never sent: a connection that was never made, a request
    /// that could not be built, a replay with no entry, a call cancelled before it.
    pub fn was_sent(&self) -> bool {
        match self {
            Error::Unreachable { sent, .. } => *sent,
            Error::Replayed { inner, .. } => inner.was_sent(),
            Error::ScriptExhausted { .. }
            | Error::BadScript { .. }
            | Error::UnknownProvider { .. }
            | Error::MissingProvider { .. }
            | Error::Config(_)
            | Error::Cancelled => false,
            _ => true,
        }
    }

    /// The delay the provider asked for, when it named one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after, .. } | Error::Overloaded { retry_after, .. } => {
                *retry_after
            }
            Error::Replayed { inner, .. } => inner.retry_after(),
            _ => None,
        }
    }

    /// How long until a spent quota comes back, when the provider named its reset.
    /// Apart from [`retry_after`](Self::retry_after): a quota's reset is days away,
    /// not a delay any retry waits for.
    pub fn quota_reset(&self) -> Option<Duration> {
        match self {
            Error::QuotaExhausted { resets_after, .. } => *resets_after,
            Error::Replayed { inner, .. } => inner.quota_reset(),
            _ => None,
        }
    }

    /// The failure class records store and the engine decides on.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::RateLimited { .. } => ErrorClass::RateLimited,
            Error::Overloaded { .. } => ErrorClass::Overloaded,
            Error::Auth { .. } => ErrorClass::Auth,
            Error::QuotaExhausted { .. } => ErrorClass::QuotaExhausted,
            Error::ContextTooLong { .. } => ErrorClass::ContextTooLong,
            Error::BadRequest { .. } => ErrorClass::BadRequest,
            Error::UnknownModel { .. } => ErrorClass::UnknownModel,
            Error::Server { .. } => ErrorClass::ServerError,
            Error::Timeout(_) | Error::AgentSilent { .. } | Error::AgentTimedOut { .. } => {
                ErrorClass::Timeout
            }
            Error::AgentExited { .. } => ErrorClass::AgentExited,
            Error::AgentWaitingForInput { .. } => ErrorClass::Interactive,
            Error::Cancelled => ErrorClass::Cancelled,
            Error::Replayed { inner, .. } => inner.class(),
            Error::Truncated { .. } => ErrorClass::Truncated,
            Error::Unparseable { .. } => ErrorClass::Unparseable,
            Error::EmptyReply { .. } => ErrorClass::EmptyReply,
            Error::Unreachable { .. } => ErrorClass::Unreachable,
            Error::ScriptExhausted { .. } | Error::BadScript { .. } => ErrorClass::Script,
            Error::UnknownProvider { .. }
            | Error::MissingProvider { .. }
            | Error::Config(_)
            | Error::UnknownOption { .. } => ErrorClass::Config,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A model client. Dyn-compatible; held as `Arc<dyn Gateway>`.
pub trait Gateway: Send + Sync + fmt::Debug {
    fn complete(&self, request: &ModelRequest<'_>) -> Result<ModelResponse>;

    /// Whether a failed call may simply be made again. False for workers that change
    /// a workspace: a second attempt would build on the first one's half-done edits,
    /// so the turn fails instead and its edits are discarded.
    fn retries_in_place(&self) -> bool {
        true
    }

    /// Whether the worker works in a workspace (a job's git worktree) and cannot work
    /// without one.
    fn needs_workspace(&self) -> bool {
        false
    }

    /// How long one call may take before it is given up, when the gateway has such a
    /// limit (for the live "waiting" line).
    fn call_timeout(&self) -> Option<Duration> {
        None
    }

    /// The model's context window in tokens, where the server says it, with where
    /// that was read (`llama.cpp /props`). `None` when the server does not tell.
    fn context_window(&self) -> Option<(u64, String)> {
        None
    }

    /// The structured mode (as `options.structured` names it) this gateway switches
    /// to when its configured one fails in a way that repeats on every call — forced
    /// tool use whose answer never ends — or `None` when it has no such fallback.
    fn fallback_mode(&self) -> Option<&'static str> {
        None
    }

    /// Whether this gateway has switched to its [`fallback_mode`](Self::fallback_mode).
    fn has_fallen_back(&self) -> bool {
        false
    }

    /// Switches to the fallback mode from the next call on: the run's record says an
    /// earlier process found the configured mode failing.
    fn fall_back(&self) {}

    /// The answer-format part of `request` exactly as this gateway puts it on the wire
    /// besides the two messages (OpenAI `response_format`, Anthropic's forced tool,
    /// Gemini's `responseSchema`), or `None` when it sends none. Providers bill it as
    /// input, so baton counts it with the prompt.
    fn answer_format_sent(&self, _request: &ModelRequest<'_>) -> Option<String> {
        None
    }

    /// How many calls per turn the answers this gateway holds were recorded with
    /// (a replay script), when that is fixed: a replay asks in the recorded way.
    fn recorded_calls_per_turn(&self) -> Option<u32> {
        None
    }
}

/// Provider options for a worker, as the roster gives them.
pub type Options = serde_json::Map<String, serde_json::Value>;

/// The providers this build knows, for error messages.
pub const KNOWN_PROVIDERS: &str = "mock, scripted, command, openai, anthropic, gemini, groq, deepseek, openrouter, together, mistral, xai, ollama, vllm, llamacpp, lmstudio";

/// Splits `provider/model`.
pub fn split_model(model: &str) -> Result<(&str, &str)> {
    match model.split_once('/') {
        Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok((p, m)),
        _ => Err(Error::MissingProvider {
            model: model.to_string(),
        }),
    }
}

/// Builds the gateway for a worker's `provider/model` without a credential: enough for
/// `mock`, `scripted`, replays and local servers (Ollama, vLLM, llama.cpp, LM Studio).
/// A provider that needs a key fails here with an `Auth` error naming the variable to
/// set; use [`for_model_with_credential`] for those.
pub fn for_model(model: &str, options: &Options) -> Result<Arc<dyn Gateway>> {
    for_model_with_credential(model, options, None)
}

/// Builds the gateway for a worker's `provider/model`. The prefix picks the provider.
///
/// `options.replay = "run.jsonl"` replays recorded responses for any provider: the worker
/// keeps its model identity (so a replayed run's packages and provenance are identical to
/// the recorded run's) but no model is called, and no credential is needed.
///
/// Options of the HTTP providers are described in [`providers`].
pub fn for_model_with_credential(
    model: &str,
    options: &Options,
    credential: Option<Credential>,
) -> Result<Arc<dyn Gateway>> {
    let (provider, name) = split_model(model)?;
    // Every key is checked, a replay's too: a typo beside `replay` would otherwise go
    // unnoticed until the worker runs for real.
    options::refuse_unknown(
        provider,
        options,
        &[options::known_options(model)?, &[options::REPLAY]].concat(),
    )?;
    if let Some(path) = options::replay(options)? {
        return Ok(Arc::new(ScriptedGateway::open(std::path::Path::new(
            &path,
        ))?));
    }
    match provider {
        "mock" => Ok(Arc::new(MockGateway::from_options(options)?)),
        "scripted" => Ok(Arc::new(ScriptedGateway::open(std::path::Path::new(
            &scripted::script_path(model, options)?,
        ))?)),
        "command" => Ok(Arc::new(CommandGateway::new(name, options, credential)?)),
        other => match providers::ProviderKind::from_prefix(other) {
            Some(kind) => Ok(Arc::new(HttpGateway::new(kind, name, options, credential)?)),
            None => Err(Error::UnknownProvider {
                provider: other.to_string(),
                model: model.to_string(),
                known: KNOWN_PROVIDERS,
            }),
        },
    }
}

/// Paths (git pathspec globs relative to the worktree) a worker's agent writes for
/// itself — history, caches — that must never be committed: its preset's, plus
/// `options.scratch`. Empty for workers that do not run in a workspace.
pub fn scratch_paths(model: &str, options: &Options) -> Result<Vec<String>> {
    match split_model(model)? {
        ("command", name) => Ok(CommandGateway::new(name, options, None)?.scratch().to_vec()),
        _ => Ok(Vec::new()),
    }
}

/// Whether the provider of `model` needs a key (hosted APIs do; local servers, the
/// mock and replays do not).
pub fn needs_key(model: &str) -> bool {
    split_model(model)
        .ok()
        .and_then(|(p, _)| providers::ProviderKind::from_prefix(p))
        .and_then(|k| k.default_key_env())
        .is_some()
}

/// Checks a worker's model string without building anything.
pub fn validate_model(model: &str) -> Result<()> {
    let (provider, _) = split_model(model)?;
    if KNOWN_PROVIDERS.split(", ").any(|p| p == provider) {
        Ok(())
    } else {
        Err(Error::UnknownProvider {
            provider: provider.to_string(),
            model: model.to_string(),
            known: KNOWN_PROVIDERS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(user: &'a str, memo: Option<&'a PairHashMemo>) -> ModelRequest<'a> {
        ModelRequest {
            model: "demo",
            system: "sys",
            user,
            call: CallKind::Combined,
            turn: 0,
            schema: &serde_json::Value::Null,
            max_tokens: None,
            temperature: None,
            workspace: None,
            cancel: None,
            output: None,
            hashed: memo,
        }
    }

    /// The memo saves a second hash of the same request, and never answers for a copy
    /// whose texts differ (a gateway that rewrote the user message and handed it on).
    #[test]
    fn a_memoised_pair_hash_is_the_hash_of_the_requests_own_texts() {
        let memo = PairHashMemo::default();
        let built = request("the briefing", Some(&memo));
        let expected = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"sys\0the briefing"));
        assert_eq!(Sent::pair(&built).request_hash, expected);
        assert_eq!(built.pair_hash(), expected);
        let longer = String::from("the briefing and an earlier answer");
        let rewritten = ModelRequest {
            user: &longer,
            ..built
        };
        assert_eq!(
            Sent::pair(&rewritten).request_hash,
            pair_hash("sys", &longer)
        );
        assert_ne!(rewritten.pair_hash(), expected);
        assert_eq!(request("the briefing", None).pair_hash(), expected);
    }
}
