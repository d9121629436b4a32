//! HTTP model providers: thin adapters over three wire formats, selected by the
//! `provider/` prefix of a worker's model.
//!
//! | prefix | wire | default `api_base` | key variable | default `structured` |
//! |---|---|---|---|---|
//! | `openai` | Chat Completions | `https://api.openai.com/v1` | `OPENAI_API_KEY` | `schema` |
//! | `groq` | Chat Completions | `https://api.groq.com/openai/v1` | `GROQ_API_KEY` | `json_object` |
//! | `deepseek` | Chat Completions | `https://api.deepseek.com/v1` | `DEEPSEEK_API_KEY` | `json_object` |
//! | `openrouter` | Chat Completions | `https://openrouter.ai/api/v1` | `OPENROUTER_API_KEY` | `schema` |
//! | `together` | Chat Completions | `https://api.together.xyz/v1` | `TOGETHER_API_KEY` | `schema` |
//! | `mistral` | Chat Completions | `https://api.mistral.ai/v1` | `MISTRAL_API_KEY` | `schema` |
//! | `xai` | Chat Completions | `https://api.x.ai/v1` | `XAI_API_KEY` | `schema` |
//! | `ollama` | Chat Completions | `http://127.0.0.1:11434/v1` | none needed | `instructions` |
//! | `vllm` | Chat Completions | `http://127.0.0.1:8000/v1` | none needed | `instructions` |
//! | `llamacpp` | Chat Completions | `http://127.0.0.1:8080/v1` | none needed | `instructions` |
//! | `lmstudio` | Chat Completions | `http://127.0.0.1:1234/v1` | none needed | `instructions` |
//! | `anthropic` | Messages | `https://api.anthropic.com` | `ANTHROPIC_API_KEY` | `schema` (forced tool use) |
//! | `gemini` | generateContent | `https://generativelanguage.googleapis.com` | `GEMINI_API_KEY` | `schema` |
//!
//! Worker options: `api_base` (URL), `structured` (`"schema"`, `"json_object"` or
//! `"instructions"`; the last sends no response format because the prompt already
//! carries the schema), `strict_schema` (bool; OpenAI-style `strict`, by default on
//! exactly when the schema meets strict mode's rules — every object closed with
//! `additionalProperties: false` and every property required — since a strict request
//! with any other schema is refused outright),
//! `max_tokens` (default output limit when a request sets none; Anthropic requires one
//! and defaults to 4096), `connect_timeout_s` (default 10), `timeout_s` (whole call,
//! default 180; a call that times out is not retried), `api_key_env` (read by [`crate::credential_for`], not here).
//!
//! Why our own adapters rather than a multi-provider client crate: the engine is
//! synchronous (one blocking call per model turn, no tokio runtime to own), and the
//! parts that matter here are exactly the parts such crates hide — which header or body
//! field carries the retry delay, how each provider words "context too long", what the
//! error body said — while retry itself must stay a value outside the provider
//! ([`crate::RetryPolicy`]). Three wire formats are a few hundred lines; owning them
//! keeps the request bytes under test.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::credential::{Credential, KeyFamily};
use crate::http::{Reply, Transport};
use crate::{Error, Gateway, ModelRequest, ModelResponse, Options, Result, Usage};

mod anthropic;
mod context;
mod gemini;
mod openai;
mod sent;

pub use gemini::to_gemini_schema;

/// The Anthropic Messages API requires an output limit; this is ours when none is set.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Groq,
    DeepSeek,
    OpenRouter,
    Together,
    Mistral,
    Xai,
    Ollama,
    Vllm,
    LlamaCpp,
    LmStudio,
    Anthropic,
    Gemini,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    ChatCompletions,
    Messages,
    GenerateContent,
}

/// How the answer's shape is enforced (`options.structured`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Structured {
    /// The provider's schema-constrained output (OpenAI `json_schema`, Anthropic forced
    /// tool use, Gemini `responseSchema`).
    Schema,
    /// JSON mode without a schema (OpenAI `json_object`, Gemini JSON mime type).
    JsonObject,
    /// Nothing on the wire: the prompt's own instructions carry the schema.
    Instructions,
}

impl ProviderKind {
    pub fn from_prefix(prefix: &str) -> Option<Self> {
        use ProviderKind::*;
        Some(match prefix {
            "openai" => OpenAi,
            "groq" => Groq,
            "deepseek" => DeepSeek,
            "openrouter" => OpenRouter,
            "together" => Together,
            "mistral" => Mistral,
            "xai" => Xai,
            "ollama" => Ollama,
            "vllm" => Vllm,
            "llamacpp" => LlamaCpp,
            "lmstudio" => LmStudio,
            "anthropic" => Anthropic,
            "gemini" => Gemini,
            _ => return None,
        })
    }

    pub fn prefix(self) -> &'static str {
        use ProviderKind::*;
        match self {
            OpenAi => "openai",
            Groq => "groq",
            DeepSeek => "deepseek",
            OpenRouter => "openrouter",
            Together => "together",
            Mistral => "mistral",
            Xai => "xai",
            Ollama => "ollama",
            Vllm => "vllm",
            LlamaCpp => "llamacpp",
            LmStudio => "lmstudio",
            Anthropic => "anthropic",
            Gemini => "gemini",
        }
    }

    pub(crate) fn wire(self) -> Wire {
        match self {
            ProviderKind::Anthropic => Wire::Messages,
            ProviderKind::Gemini => Wire::GenerateContent,
            _ => Wire::ChatCompletions,
        }
    }

    pub fn default_api_base(self) -> &'static str {
        use ProviderKind::*;
        match self {
            OpenAi => "https://api.openai.com/v1",
            Groq => "https://api.groq.com/openai/v1",
            DeepSeek => "https://api.deepseek.com/v1",
            OpenRouter => "https://openrouter.ai/api/v1",
            Together => "https://api.together.xyz/v1",
            Mistral => "https://api.mistral.ai/v1",
            Xai => "https://api.x.ai/v1",
            Ollama => "http://127.0.0.1:11434/v1",
            Vllm => "http://127.0.0.1:8000/v1",
            LlamaCpp => "http://127.0.0.1:8080/v1",
            LmStudio => "http://127.0.0.1:1234/v1",
            Anthropic => "https://api.anthropic.com",
            Gemini => "https://generativelanguage.googleapis.com",
        }
    }

    /// The conventional environment variable for the key; `None` for local servers,
    /// which need no key (one given is still sent as a bearer token).
    pub fn default_key_env(self) -> Option<&'static str> {
        use ProviderKind::*;
        match self {
            OpenAi => Some("OPENAI_API_KEY"),
            Groq => Some("GROQ_API_KEY"),
            DeepSeek => Some("DEEPSEEK_API_KEY"),
            OpenRouter => Some("OPENROUTER_API_KEY"),
            Together => Some("TOGETHER_API_KEY"),
            Mistral => Some("MISTRAL_API_KEY"),
            Xai => Some("XAI_API_KEY"),
            Anthropic => Some("ANTHROPIC_API_KEY"),
            Gemini => Some("GEMINI_API_KEY"),
            Ollama | Vllm | LlamaCpp | LmStudio => None,
        }
    }

    fn default_structured(self) -> Structured {
        use ProviderKind::*;
        match self {
            // DeepSeek has only JSON mode; Groq's schema mode covers few models.
            DeepSeek | Groq => Structured::JsonObject,
            Ollama | Vllm | LlamaCpp | LmStudio => Structured::Instructions,
            _ => Structured::Schema,
        }
    }

    /// Whether a key of this shape can belong to this provider. Providers whose keys
    /// have no distinctive shape accept none of the distinctive ones.
    fn accepts(self, family: KeyFamily) -> bool {
        use ProviderKind::*;
        match self {
            OpenAi | DeepSeek => family == KeyFamily::OpenAi,
            Anthropic => family == KeyFamily::Anthropic,
            Gemini => family == KeyFamily::Google,
            Groq => family == KeyFamily::Groq,
            OpenRouter => family == KeyFamily::OpenRouter,
            Xai => family == KeyFamily::Xai,
            Together | Mistral => false,
            // A local server or proxy may take any key.
            Ollama | Vllm | LlamaCpp | LmStudio => true,
        }
    }
}

/// A worker's resolved provider settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub kind: ProviderKind,
    pub model: String,
    pub url: String,
    pub structured: Structured,
    /// `None`: strict exactly when the schema meets OpenAI's strict-mode rules.
    pub strict_schema: Option<bool>,
    pub max_tokens: Option<u32>,
}

/// A model behind one of the HTTP wire formats.
pub struct HttpGateway {
    settings: Settings,
    credential: Option<Credential>,
    transport: Transport,
    timeout: Duration,
    /// Where the server lives (`api_base` without the wire format's version prefix).
    root: String,
    /// Set after forced tool use ran to the output limit once: some servers' tool-use
    /// answers never end (llama.cpp's Messages endpoint with small models), so later
    /// calls ask for the claim in the prompt instead.
    tool_use_failed: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for HttpGateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpGateway")
            .field("provider", &self.settings.kind.prefix())
            .field("model", &self.settings.model)
            .field("url", &self.settings.url)
            .field("credential", &self.credential)
            .finish()
    }
}

/// The options an HTTP provider reads (`replay` is taken before any provider is).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpOptions {
    api_base: Option<String>,
    /// Read by the credential lookup, before the gateway is built.
    #[allow(dead_code)]
    api_key_env: Option<String>,
    structured: Option<Structured>,
    strict_schema: Option<bool>,
    max_tokens: Option<u32>,
    connect_timeout_s: Option<f64>,
    timeout_s: Option<f64>,
}

impl crate::options::ProviderOptions for HttpOptions {
    fn expects(key: &str) -> &'static str {
        match key {
            "api_base" => "an http:// or https:// URL",
            "api_key_env" => "the name of an environment variable",
            "structured" => "\"schema\", \"json_object\" or \"instructions\"",
            "strict_schema" => "true or false",
            "max_tokens" => "a positive integer",
            _ => "a positive number of seconds",
        }
    }
}

impl HttpGateway {
    /// Validates the options and the credential; no request is made. A provider that
    /// needs a key and has none fails here with an `Auth` error.
    pub fn new(
        kind: ProviderKind,
        model: &str,
        options: &Options,
        credential: Option<Credential>,
    ) -> Result<Self> {
        // The options first: a typo is reported whether or not the key is set.
        let gateway = Self::from_options(kind, model, options, credential)?;
        if gateway.credential.is_none()
            && let Some(var) = kind.default_key_env()
        {
            return Err(Error::Auth {
                message: format!(
                    "{}/{model} needs an API key: export {var}, or set the worker's api_key_env to the variable that holds it",
                    kind.prefix()
                ),
            });
        }
        Ok(gateway)
    }

    /// Checks the options as [`new`](Self::new) does, without needing the key.
    pub(crate) fn check(kind: ProviderKind, model: &str, options: &Options) -> Result<()> {
        Self::from_options(kind, model, options, None).map(drop)
    }

    fn from_options(
        kind: ProviderKind,
        model: &str,
        options: &Options,
        credential: Option<Credential>,
    ) -> Result<Self> {
        // An option nobody reads is a typo or a misplaced setting (`max_retries` belongs
        // on the worker, not in its options): refused, naming what is known.
        let read: HttpOptions = crate::options::parse(kind.prefix(), options)?;
        let api_base = match read.api_base {
            None => kind.default_api_base().to_string(),
            Some(s) if s.starts_with("http://") || s.starts_with("https://") => {
                normalize_api_base(kind.wire(), &s)
            }
            Some(s) => {
                return Err(Error::Config(format!(
                    "options.api_base must be an http:// or https:// URL, got {}",
                    Value::String(s)
                )));
            }
        };
        let structured = read.structured.unwrap_or(kind.default_structured());
        let strict_schema = read.strict_schema;
        let max_tokens = match read.max_tokens {
            Some(0) => {
                return Err(Error::Config(
                    "options.max_tokens must be a positive integer, got 0".into(),
                ));
            }
            n => n,
        };
        let connect_timeout = seconds_option("connect_timeout_s", read.connect_timeout_s, 10.0)?;
        let timeout = seconds_option("timeout_s", read.timeout_s, DEFAULT_TIMEOUT_S)?;
        let model = model.to_string();
        let url = match kind.wire() {
            Wire::ChatCompletions => format!("{api_base}/chat/completions"),
            Wire::Messages => format!("{api_base}/v1/messages"),
            Wire::GenerateContent => format!(
                "{api_base}/v1beta/models/{}:generateContent",
                model.strip_prefix("models/").unwrap_or(&model)
            ),
        };
        Ok(HttpGateway {
            settings: Settings {
                kind,
                model,
                url,
                structured,
                strict_schema,
                max_tokens,
            },
            credential,
            transport: Transport::new(connect_timeout, timeout),
            timeout,
            root: api_base
                .strip_suffix("/v1")
                .unwrap_or(&api_base)
                .to_string(),
            tool_use_failed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The endpoint this gateway posts to.
    pub fn url(&self) -> &str {
        &self.settings.url
    }

    /// The request body this gateway would send, for inspection and benchmarks.
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Vec<u8>> {
        let s = &self.settings;
        match s.kind.wire() {
            Wire::ChatCompletions => openai::request_body(s, request),
            Wire::Messages if self.falls_back() => {
                let s = Settings {
                    structured: Structured::Instructions,
                    ..s.clone()
                };
                anthropic::request_body(&s, request)
            }
            Wire::Messages => anthropic::request_body(s, request),
            Wire::GenerateContent => gemini::request_body(s, request),
        }
    }

    /// Whether calls force tool use, which some servers never end (see
    /// `tool_use_failed`).
    fn can_fall_back(&self) -> bool {
        self.settings.kind.wire() == Wire::Messages
            && self.settings.structured == Structured::Schema
    }

    fn falls_back(&self) -> bool {
        self.tool_use_failed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The output limit a request was sent with (`None`: none was sent, the server's
    /// own applies).
    fn sent_limit(&self, request: &ModelRequest<'_>) -> Option<u32> {
        let limit = request.max_tokens.or(self.settings.max_tokens);
        match self.settings.kind.wire() {
            Wire::Messages => Some(limit.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS)),
            _ => limit,
        }
    }

    /// Says which limit ended a truncated answer, and on the Messages wire stops
    /// forcing tool use after a tool-use answer ran out.
    fn explain_truncation(&self, request: &ModelRequest<'_>, error: Error) -> Error {
        let Error::Truncated {
            message,
            usage,
            partial,
        } = error
        else {
            return error;
        };
        let (input, output) = (usage.input_tokens, usage.output_tokens);
        let which = match self.sent_limit(request) {
            Some(limit) if output == 0 || output >= u64::from(limit) => format!(
                "it reached max_tokens = {limit}{} (raise the worker's max_tokens)",
                if request.max_tokens.or(self.settings.max_tokens).is_none() {
                    ", baton's default for this wire format"
                } else {
                    ""
                }
            ),
            Some(limit) => format!(
                "it stopped at {output} output tokens, below max_tokens = {limit}: the model's context window filled ({input} prompt + {output} output tokens; give the server a larger context or the worker a smaller budget)"
            ),
            None => format!(
                "no max_tokens was sent, so the server's own limit ended it: its context window ({input} prompt + {output} output tokens) or its default output length (llama.cpp: --n-predict); set max_tokens on the worker to choose"
            ),
        };
        let mut message = format!("{message}; {which}");
        if self.can_fall_back() && !self.falls_back() {
            self.fall_back();
            message.push_str(
                "; the answer was a forced tool call that did not end, so this worker's next calls ask for the claim in the prompt instead (structured = \"instructions\"; set it in the roster to keep it)",
            );
        }
        Error::Truncated {
            message,
            usage,
            partial,
        }
    }

    /// Reads a reply of any status into a response or a classified error.
    pub fn read_reply(
        &self,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> Result<ModelResponse> {
        let s = &self.settings;
        if (200..300).contains(&status) {
            let parsed = match s.kind.wire() {
                Wire::ChatCompletions => openai::parse_response(s, body),
                Wire::Messages => anthropic::parse_response(s, body),
                Wire::GenerateContent => gemini::parse_response(s, body),
            };
            // A reply that echoes the key (a model quoting its request headers, a proxy
            // reflecting them) must not carry it into the record or the next briefing.
            return match (parsed, &self.credential) {
                (Ok(mut response), Some(c)) => {
                    response.text = c.scrub(&response.text);
                    Ok(response)
                }
                (parsed, _) => parsed.map_err(|e| self.scrub(e)),
            };
        }
        let body = match &self.credential {
            Some(c) => c.scrub(body),
            None => body.to_string(),
        };
        let info = match s.kind.wire() {
            Wire::ChatCompletions => openai::error_info(&body),
            Wire::Messages => anthropic::error_info(&body),
            Wire::GenerateContent => gemini::error_info(&body),
        };
        Err(self.classify(status, headers, &body, info))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let secret = self.credential.as_ref().map(Credential::secret);
        match self.settings.kind.wire() {
            Wire::ChatCompletions => secret
                .map(|k| vec![("authorization", format!("Bearer {k}"))])
                .unwrap_or_default(),
            Wire::Messages => {
                let mut h = vec![("anthropic-version", "2023-06-01".to_string())];
                h.extend(secret.map(|k| ("x-api-key", k.to_string())));
                h
            }
            Wire::GenerateContent => secret
                .map(|k| vec![("x-goog-api-key", k.to_string())])
                .unwrap_or_default(),
        }
    }

    fn classify(
        &self,
        status: u16,
        headers: &[(String, String)],
        body: &str,
        info: ErrorInfo,
    ) -> Error {
        let s = &self.settings;
        let provider = s.kind.prefix();
        let message = format!("{provider} HTTP {status}: {}", info.message);
        let retry_after =
            || crate::retry_after::retry_delay(headers, body, std::time::SystemTime::now());
        let lower = info.message.to_ascii_lowercase();
        let code = info.code.to_ascii_lowercase();
        if status == 401 || status == 403 || info.auth {
            return Error::Auth {
                message: self.key_hint(message),
            };
        }
        if status == 529 || code.contains("overloaded") {
            return Error::Overloaded {
                message,
                retry_after: retry_after(),
            };
        }
        // Spent credit is not a malformed request, whatever its status: OpenAI says
        // 429 `insufficient_quota`; Anthropic says 400 `invalid_request_error` "Your
        // credit balance is too low to access the Anthropic API".
        // The reset, when named: the provider's words first ("You will regain access
        // on 2026-04-01 at 00:00 UTC"), else a delay beyond any rate limit's bucket
        // (Gemini's per-day quota answers with a `retryDelay` of seconds, which is no
        // reset at all, so a short delay names none).
        let reset = || {
            crate::retry_after::quota_reset(&info.message, std::time::SystemTime::now())
                .or_else(|| retry_after().filter(|d| *d > QUOTA_HORIZON))
        };
        if is_quota_exhausted(&code, &lower) && matches!(status, 400 | 402 | 429) {
            return Error::QuotaExhausted {
                message,
                resets_after: reset(),
            };
        }
        // A 429 that says come back in a day or a week is a window's quota spent, not
        // a bucket refilling: no retry waits that long, and the pool is out until then.
        if status == 429
            && let Some(resets_after) = retry_after().filter(|d| *d > QUOTA_HORIZON)
        {
            return Error::QuotaExhausted {
                message,
                resets_after: Some(resets_after),
            };
        }
        if status == 429 {
            return Error::RateLimited {
                retry_after: retry_after(),
                message,
            };
        }
        if is_context_too_long(&code, &lower) && (400..500).contains(&status) {
            return Error::ContextTooLong { message };
        }
        if status == 404 {
            // A wrong path answers 404 too: say where baton called, so a doubled
            // `/v1` or a wrong host shows.
            return Error::UnknownModel {
                model: format!("{provider}/{}", s.model),
                message: format!(
                    "{message} (POST {}; check the model name and the worker's api_base)",
                    s.url
                ),
            };
        }
        if status == 503 && lower.contains("overloaded") {
            return Error::Overloaded {
                message,
                retry_after: retry_after(),
            };
        }
        if status == 408 {
            return Error::Server { message };
        }
        // A server error that says when to come back is honoured like a rate limit.
        if (500..600).contains(&status)
            && let Some(delay) = retry_after()
        {
            return Error::Overloaded {
                message,
                retry_after: Some(delay),
            };
        }
        if (400..500).contains(&status) {
            return Error::BadRequest { message };
        }
        Error::Server { message }
    }

    /// Adds "this looks like an X key offered to the Y provider" when the key's shape
    /// says so — the usual cause of an auth failure after copying a roster entry.
    fn key_hint(&self, message: String) -> String {
        let kind = self.settings.kind;
        match self.credential.as_ref().and_then(Credential::family) {
            Some(family) if !kind.accepts(family) => format!(
                "{message} — this looks like {} key offered to the {} provider",
                family.article_name(),
                kind.prefix()
            ),
            _ => message,
        }
    }

    fn scrub(&self, error: Error) -> Error {
        let Some(c) = &self.credential else {
            return error;
        };
        match error {
            Error::Unparseable { detail } => Error::Unparseable {
                detail: c.scrub(&detail),
            },
            Error::BadRequest { message } => Error::BadRequest {
                message: c.scrub(&message),
            },
            Error::Truncated {
                message,
                usage,
                partial,
            } => Error::Truncated {
                message: c.scrub(&message),
                usage,
                partial: c.scrub(&partial),
            },
            Error::EmptyReply { detail, usage } => Error::EmptyReply {
                detail: c.scrub(&detail),
                usage,
            },
            other => other,
        }
    }
}

/// The default limit on one whole call (`options.timeout_s`): long enough for a few
/// thousand tokens from a slow model, short enough that a hung server is noticed
/// within minutes.
pub const DEFAULT_TIMEOUT_S: f64 = 180.0;

impl Gateway for HttpGateway {
    fn call_timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    fn context_window(&self) -> Option<(u64, String)> {
        context::window(self)
    }

    fn fallback_mode(&self) -> Option<&'static str> {
        self.can_fall_back().then_some("instructions")
    }

    fn has_fallen_back(&self) -> bool {
        self.falls_back()
    }

    fn fall_back(&self) {
        if self.can_fall_back() {
            self.tool_use_failed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Serialised by the same code that builds the body, so what is counted is what
    /// is sent.
    fn answer_format_sent(&self, request: &ModelRequest<'_>) -> Option<String> {
        let s = &self.settings;
        match s.kind.wire() {
            Wire::ChatCompletions => openai::answer_format(s, request),
            Wire::Messages if self.falls_back() => None,
            Wire::Messages => anthropic::answer_format(s, request),
            Wire::GenerateContent => gemini::answer_format(s, request),
        }
    }

    fn complete(&self, request: &ModelRequest<'_>) -> Result<ModelResponse> {
        let body = self.request_body(request)?;
        // Measured on the bytes about to be posted; the parsers above leave it empty.
        let sent = sent::measure(self.settings.kind.wire(), &body);
        let owned = self.headers();
        let headers: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply: Reply = self
            .transport
            .post(&self.settings.url, &headers, body, request.cancel)
            .map_err(|e| match e {
                // Which endpoint, so a server not started or a wrong api_base shows.
                Error::Unreachable { detail, sent } => Error::Unreachable {
                    detail: format!("{detail} (POST {})", self.settings.url),
                    sent,
                },
                other => other,
            })?;
        self.read_reply(reply.status, &reply.headers, &reply.body)
            .map(|response| ModelResponse { sent, ..response })
            .map_err(|e| self.explain_truncation(request, e))
    }
}

/// What a provider's error body said, in the provider's own words.
#[derive(Debug, Default)]
pub(crate) struct ErrorInfo {
    /// The machine-readable kind: OpenAI `code`/`type`, Anthropic `error.type`, Gemini
    /// `status` and detail reasons.
    pub code: String,
    pub message: String,
    /// The body says the key is invalid even though the status is not 401/403
    /// (Gemini answers a bad key with 400 `API_KEY_INVALID`).
    pub auth: bool,
}

impl ErrorInfo {
    /// A body that is not the provider's error JSON (a proxy's HTML page): keep a
    /// bounded excerpt as the message.
    pub fn raw(body: &str) -> Self {
        ErrorInfo {
            code: String::new(),
            message: excerpt(body),
            auth: false,
        }
    }
}

/// A rate limit whose reset lies further away than this is a window's quota spent
/// (per day, per week, per month), not a per-minute bucket refilling: rate limits
/// reset within seconds to minutes, and an hour is beyond any retry baton waits for
/// (`RetryPolicy::max_wait` is ten minutes by default).
pub const QUOTA_HORIZON: Duration = Duration::from_secs(3600);

fn is_quota_exhausted(code: &str, message: &str) -> bool {
    // Not "exceeded your current quota": Gemini words its per-minute rate limit so;
    // its per-day quota is told apart by the violated quota's id
    // (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`), which `code` carries.
    // Anthropic says "credit balance is too low" for spent credit and "You have
    // reached your specified API usage limits" for the owner's monthly spend limit.
    code.contains("insufficient_quota")
        || code.contains("perday")
        || message.contains("credit balance")
        || message.contains("api usage limits")
}

/// `api_base` as the wire format's paths expect it: baton appends `/v1/messages`
/// (Anthropic) and `/v1beta/models/…` (Gemini) itself, so a base copied with that
/// prefix (`http://127.0.0.1:8080/v1`, as for OpenAI-style servers) would call
/// `/v1/v1/messages`. Chat Completions bases keep their `/v1`: the path is appended
/// after it.
fn normalize_api_base(wire: Wire, base: &str) -> String {
    let base = base.trim_end_matches('/');
    let prefix = match wire {
        Wire::Messages => "/v1",
        Wire::GenerateContent => "/v1beta",
        Wire::ChatCompletions => return base.to_string(),
    };
    base.strip_suffix(prefix)
        .filter(|b| b.contains("://") && !b.ends_with(':') && !b.ends_with('/'))
        .unwrap_or(base)
        .to_string()
}

fn is_context_too_long(code: &str, message: &str) -> bool {
    // Hosted APIs, then the local servers: llama.cpp (`exceed_context_size_error`,
    // "request (13014 tokens) exceeds the available context size (2048 tokens)"),
    // vLLM ("maximum context length", "longer than the maximum model length"),
    // Ollama and LM Studio ("context length", "context overflow").
    code.contains("context_length_exceeded")
        || code.contains("exceed_context_size")
        || message.contains("context size")
        || message.contains("maximum model length")
        || message.contains("context overflow")
        || message.contains("the context is full")
        || code.contains("context_length_exhausted")
        || code.contains("request_too_large")
        || message.contains("maximum context length")
        || message.contains("context length")
        || message.contains("context window")
        || message.contains("prompt is too long")
        || message.contains("exceeds the maximum number of tokens")
        || message.contains("too many tokens")
}

/// At most 300 characters of `text`, on a character boundary.
pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A well-formed answer without content; `usage` is what the provider billed for it.
pub(crate) fn empty_reply(provider: ProviderKind, what: &str, body: &str, usage: Usage) -> Error {
    Error::EmptyReply {
        detail: format!("{} {what}: {}", provider.prefix(), excerpt(body)),
        usage,
    }
}

/// A body that did not parse as the wire format promised.
pub(crate) fn unparseable(provider: ProviderKind, what: &str, body: &str) -> Error {
    Error::Unparseable {
        detail: format!("{} {what}: {}", provider.prefix(), excerpt(body)),
    }
}

fn seconds_option(key: &str, value: Option<f64>, default: f64) -> Result<Duration> {
    let secs = match value {
        None => default,
        Some(v) => Some(v)
            .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e7)
            .ok_or_else(|| {
                Error::Config(format!(
                    "options.{key} must be a positive number of seconds, got {v}"
                ))
            })?,
    };
    Ok(Duration::from_secs_f64(secs))
}

/// The schema's `title` as an identifier providers accept for a schema or tool name
/// (`[a-zA-Z0-9_-]{1,64}`), or `fallback`.
pub(crate) fn schema_name(schema: &Value, fallback: &str) -> String {
    let name: String = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(64)
        .collect();
    if name.is_empty() {
        fallback.to_string()
    } else {
        name
    }
}

/// Whether the request carries a schema worth sending.
pub(crate) fn has_schema(schema: &Value) -> bool {
    schema.is_object()
}
