//! Anthropic Messages. Structured output is forced tool use: one tool whose
//! `input_schema` is the claim's schema, and `tool_choice` naming it, so the answer
//! arrives as the tool call's `input` object.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, ErrorInfo, Settings, Structured, empty_reply, has_schema,
    unparseable,
};
use crate::{Error, ModelRequest, ModelResponse, Result, Usage};

/// The one tool the model is made to call.
pub(super) const TOOL_NAME: &str = "submit_claim";

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    system: &'a str,
    messages: [Message<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tool<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'static str,
    description: &'static str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct ToolChoice {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'static str,
}

#[derive(Serialize)]
struct ForcedTool<'a> {
    tools: [Tool<'a>; 1],
    tool_choice: ToolChoice,
}

/// The forced tool of a request (`tools` and `tool_choice`), serialised as the body
/// carries them.
pub(super) fn answer_format(s: &Settings, r: &ModelRequest<'_>) -> Option<String> {
    let forced = s.structured == Structured::Schema && has_schema(r.schema);
    forced
        .then(|| {
            serde_json::to_string(&ForcedTool {
                tools: [tool(r)],
                tool_choice: tool_choice(),
            })
            .ok()
        })
        .flatten()
}

fn tool<'a>(r: &ModelRequest<'a>) -> Tool<'a> {
    Tool {
        name: TOOL_NAME,
        description: "Submit your answer. Its input is the complete answer, matching the schema exactly.",
        input_schema: r.schema,
    }
}

fn tool_choice() -> ToolChoice {
    ToolChoice {
        kind: "tool",
        name: TOOL_NAME,
    }
}

pub(super) fn request_body(s: &Settings, r: &ModelRequest<'_>) -> Result<Vec<u8>> {
    // Anthropic has no JSON mode without a schema, so `json_object` falls back to
    // the prompt's instructions; the tool needs an object schema.
    let forced = s.structured == Structured::Schema && has_schema(r.schema);
    let body = MessagesRequest {
        model: &s.model,
        max_tokens: r
            .max_tokens
            .or(s.max_tokens)
            .unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS),
        system: r.system,
        messages: [Message {
            role: "user",
            content: r.user,
        }],
        temperature: r.temperature,
        tools: forced.then(|| [tool(r)]),
        tool_choice: forced.then(tool_choice),
    };
    serde_json::to_vec(&body).map_err(|e| Error::Config(format!("cannot encode request: {e}")))
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        name: String,
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

pub(super) fn parse_response(s: &Settings, body: &str) -> Result<ModelResponse> {
    let parsed: MessagesResponse = serde_json::from_str(body)
        .map_err(|e| unparseable(s.kind, &format!("response is not a message ({e})"), body))?;
    let usage = parsed
        .usage
        .map(|u| {
            let cached = u.cache_read_input_tokens.unwrap_or(0);
            Usage {
                // Anthropic counts cache reads and writes apart from `input_tokens`.
                input_tokens: u
                    .input_tokens
                    .unwrap_or(0)
                    .saturating_add(cached)
                    .saturating_add(u.cache_creation_input_tokens.unwrap_or(0)),
                output_tokens: u.output_tokens.unwrap_or(0),
                cached_tokens: cached,
            }
        })
        .unwrap_or_default();
    if parsed.stop_reason.as_deref() == Some("max_tokens") {
        let partial = parsed
            .content
            .iter()
            .map(|b| match b {
                Block::Text { text } => text.clone(),
                Block::ToolUse { input, .. } => input.to_string(),
                Block::Other => String::new(),
            })
            .collect();
        return Err(Error::Truncated {
            message: format!(
                "anthropic stop_reason \"max_tokens\" after {} output tokens",
                usage.output_tokens
            ),
            usage,
            partial,
        });
    }
    if parsed.stop_reason.as_deref() == Some("refusal") {
        return Err(Error::BadRequest {
            message: "anthropic model refused (stop_reason \"refusal\")".into(),
        });
    }
    let mut text = String::new();
    for block in parsed.content {
        match block {
            Block::ToolUse { name, input } if name == TOOL_NAME => {
                return Ok(ModelResponse {
                    text: input.to_string(),
                    usage,
                    sent: crate::Sent::default(),
                });
            }
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse { .. } | Block::Other => {}
        }
    }
    if text.is_empty() {
        return Err(empty_reply(
            s.kind,
            "response has neither the submit_claim tool call nor text",
            body,
            usage,
        ));
    }
    Ok(ModelResponse {
        text,
        usage,
        sent: crate::Sent::default(),
    })
}

/// `{"type": "error", "error": {"type": "overloaded_error", "message": "…"}}`.
pub(super) fn error_info(body: &str) -> ErrorInfo {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return ErrorInfo::raw(body);
    };
    let text = |p: &str| json.pointer(p).and_then(Value::as_str).unwrap_or("");
    let message = text("/error/message");
    ErrorInfo {
        code: text("/error/type").to_string(),
        message: if message.is_empty() {
            super::excerpt(body)
        } else {
            message.to_string()
        },
        auth: false,
    }
}
