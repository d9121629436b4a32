//! OpenAI Chat Completions, and the servers that speak its dialect.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ErrorInfo, ProviderKind, Settings, Structured, empty_reply, has_schema, schema_name,
    unparseable,
};
use crate::{Error, ModelRequest, ModelResponse, Result, Usage};

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [Message<'a>; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// OpenAI's own API deprecated `max_tokens` (its reasoning models refuse it);
    /// compatible servers mostly know only `max_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat<'a> {
    JsonSchema { json_schema: JsonSchema<'a> },
    JsonObject,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    name: String,
    schema: &'a Value,
    strict: bool,
}

/// The `response_format` of a request, serialised exactly as the body carries it.
pub(super) fn answer_format(s: &Settings, r: &ModelRequest<'_>) -> Option<String> {
    serde_json::to_string(&response_format(s, r)?).ok()
}

fn response_format<'a>(s: &Settings, r: &ModelRequest<'a>) -> Option<ResponseFormat<'a>> {
    match s.structured {
        Structured::Schema if has_schema(r.schema) => Some(ResponseFormat::JsonSchema {
            json_schema: JsonSchema {
                name: schema_name(r.schema, "claim"),
                schema: r.schema,
                strict: s
                    .strict_schema
                    .unwrap_or_else(|| strict_compatible(r.schema)),
            },
        }),
        Structured::Schema | Structured::JsonObject => Some(ResponseFormat::JsonObject),
        Structured::Instructions => None,
    }
}

pub(super) fn request_body(s: &Settings, r: &ModelRequest<'_>) -> Result<Vec<u8>> {
    let response_format = response_format(s, r);
    let limit = r.max_tokens.or(s.max_tokens);
    let (max_tokens, max_completion_tokens) = if s.kind == ProviderKind::OpenAi {
        (None, limit)
    } else {
        (limit, None)
    };
    let body = ChatRequest {
        model: &s.model,
        messages: [
            Message {
                role: "system",
                content: r.system,
            },
            Message {
                role: "user",
                content: r.user,
            },
        ],
        temperature: r.temperature,
        max_tokens,
        max_completion_tokens,
        response_format,
    };
    serde_json::to_vec(&body).map_err(|e| Error::Config(format!("cannot encode request: {e}")))
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

pub(super) fn parse_response(s: &Settings, body: &str) -> Result<ModelResponse> {
    let parsed: ChatResponse = serde_json::from_str(body).map_err(|e| {
        unparseable(
            s.kind,
            &format!("response is not a chat completion ({e})"),
            body,
        )
    })?;
    let usage = parsed
        .usage
        .map(|u| Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        })
        .unwrap_or_default();
    let Some(choice) = parsed.choices.into_iter().next() else {
        return Err(unparseable(s.kind, "response has no choices", body));
    };
    match choice.finish_reason.as_deref() {
        Some("length") => {
            return Err(Error::Truncated {
                message: format!(
                    "{} finish_reason \"length\" after {} output tokens",
                    s.kind.prefix(),
                    usage.output_tokens
                ),
                usage,
                partial: choice.message.and_then(|m| m.content).unwrap_or_default(),
            });
        }
        Some("content_filter") => {
            return Err(Error::BadRequest {
                message: format!("{} stopped the answer: content_filter", s.kind.prefix()),
            });
        }
        _ => {}
    }
    let message = choice.message.unwrap_or(ChoiceMessage {
        content: None,
        refusal: None,
    });
    match (message.content, message.refusal) {
        (Some(text), _) if !text.is_empty() => Ok(ModelResponse {
            text,
            usage,
            sent: crate::Sent::default(),
        }),
        (_, Some(refusal)) => Err(Error::BadRequest {
            message: format!("{} model refused: {refusal}", s.kind.prefix()),
        }),
        _ => Err(empty_reply(
            s.kind,
            "response has no message content",
            body,
            usage,
        )),
    }
}

/// `{"error": {"message", "type", "code"}}` (OpenAI, Groq, llama.cpp), `{"error": "…"}`
/// (Ollama), or `{"object": "error", "message", "type"}` (vLLM).
pub(super) fn error_info(body: &str) -> ErrorInfo {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return ErrorInfo::raw(body);
    };
    let error = json.get("error").unwrap_or(&json);
    if let Some(text) = error.as_str() {
        return ErrorInfo {
            code: String::new(),
            message: text.to_string(),
            auth: false,
        };
    }
    let field = |k: &str| match error.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let message = field("message");
    ErrorInfo {
        code: format!("{} {}", field("code"), field("type")),
        message: if message.is_empty() {
            super::excerpt(body)
        } else {
            message
        },
        auth: false,
    }
}

/// Whether OpenAI's strict mode accepts `schema`: every object schema lists all its
/// properties as required and sets `additionalProperties: false`.
pub(super) fn strict_compatible(schema: &Value) -> bool {
    match schema {
        Value::Object(node) => {
            if let Some(Value::Object(props)) = node.get("properties") {
                let closed = node.get("additionalProperties") == Some(&Value::Bool(false));
                let required: Vec<&str> = node
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !closed || !props.keys().all(|k| required.contains(&k.as_str())) {
                    return false;
                }
            }
            node.values().all(strict_compatible)
        }
        Value::Array(items) => items.iter().all(strict_compatible),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::strict_compatible;

    #[test]
    fn strict_mode_needs_closed_objects_with_every_property_required() {
        let closed = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert!(strict_compatible(&closed));
        let optional = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string"}}, "required": []});
        assert!(!strict_compatible(&optional));
        let nested_open = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"],
            "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}});
        assert!(!strict_compatible(&nested_open));
    }
}
