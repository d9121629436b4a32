//! Gemini `generateContent`. Structured output is `responseSchema`, which takes only
//! Gemini's OpenAPI 3.0 subset of JSON Schema, so the claim's schema is converted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{ErrorInfo, Settings, Structured, empty_reply, has_schema, unparseable};
use crate::{Error, ModelRequest, ModelResponse, Result, Usage};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerateRequest<'a> {
    system_instruction: Content<'a>,
    contents: [Content<'a>; 1],
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
}

/// The `responseSchema` of a request, serialised as the body carries it.
pub(super) fn answer_format(s: &Settings, r: &ModelRequest<'_>) -> Option<String> {
    match s.structured {
        Structured::Schema if has_schema(r.schema) => {
            Some(to_gemini_schema(r.schema).ok()?.to_string())
        }
        _ => None,
    }
}

pub(super) fn request_body(s: &Settings, r: &ModelRequest<'_>) -> Result<Vec<u8>> {
    let (mime, schema) = match s.structured {
        Structured::Schema if has_schema(r.schema) => {
            (Some("application/json"), Some(to_gemini_schema(r.schema)?))
        }
        Structured::Schema | Structured::JsonObject => (Some("application/json"), None),
        Structured::Instructions => (None, None),
    };
    let body = GenerateRequest {
        system_instruction: Content {
            role: None,
            parts: [Part { text: r.system }],
        },
        contents: [Content {
            role: Some("user"),
            parts: [Part { text: r.user }],
        }],
        generation_config: GenerationConfig {
            response_mime_type: mime,
            response_schema: schema,
            temperature: r.temperature,
            max_output_tokens: r.max_tokens.or(s.max_tokens),
        },
    };
    serde_json::to_vec(&body).map_err(|e| Error::Config(format!("cannot encode request: {e}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerateResponse {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<CandidateContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<CandidatePart>,
}

#[derive(Deserialize)]
struct CandidatePart {
    #[serde(default)]
    text: Option<String>,
    /// Thinking models return their thoughts as parts marked `thought: true`.
    #[serde(default)]
    thought: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    /// Billed as output, reported apart from the candidates.
    #[serde(default)]
    thoughts_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

pub(super) fn parse_response(s: &Settings, body: &str) -> Result<ModelResponse> {
    let parsed: GenerateResponse = serde_json::from_str(body).map_err(|e| {
        unparseable(
            s.kind,
            &format!("response is not a generateContent answer ({e})"),
            body,
        )
    })?;
    let usage = parsed
        .usage_metadata
        .map(|u| Usage {
            input_tokens: u.prompt_token_count.unwrap_or(0),
            output_tokens: u
                .candidates_token_count
                .unwrap_or(0)
                .saturating_add(u.thoughts_token_count.unwrap_or(0)),
            cached_tokens: u.cached_content_token_count.unwrap_or(0),
        })
        .unwrap_or_default();
    let Some(candidate) = parsed.candidates.into_iter().next() else {
        let reason = parsed
            .prompt_feedback
            .and_then(|f| f.block_reason)
            .map(|r| format!("gemini blocked the prompt: {r}"));
        return match reason {
            Some(message) => Err(Error::BadRequest { message }),
            None => Err(unparseable(s.kind, "response has no candidates", body)),
        };
    };
    match candidate.finish_reason.as_deref() {
        Some("MAX_TOKENS") => {
            return Err(Error::Truncated {
                message: format!(
                    "gemini finishReason \"MAX_TOKENS\" after {} output tokens",
                    usage.output_tokens
                ),
                usage,
                partial: candidate
                    .content
                    .map(|c| c.parts)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| p.thought != Some(true))
                    .filter_map(|p| p.text)
                    .collect(),
            });
        }
        Some(
            reason @ ("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "LANGUAGE"),
        ) => {
            return Err(Error::BadRequest {
                message: format!("gemini stopped the answer: finishReason \"{reason}\""),
            });
        }
        _ => {}
    }
    let text: String = candidate
        .content
        .map(|c| c.parts)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text)
        .collect();
    if text.is_empty() {
        return Err(empty_reply(
            s.kind,
            "response candidate has no text",
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

/// `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "…",
/// "details": [{"@type": "…ErrorInfo", "reason": "API_KEY_INVALID"}, …]}}`.
pub(super) fn error_info(body: &str) -> ErrorInfo {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return ErrorInfo::raw(body);
    };
    let text = |p: &str| json.pointer(p).and_then(Value::as_str).unwrap_or("");
    let status = text("/error/status");
    let message = text("/error/message");
    let details = json
        .pointer("/error/details")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let reasons: Vec<&str> = details
        .iter()
        .filter_map(|d| d.get("reason").and_then(Value::as_str))
        .collect();
    // Which quotas a RESOURCE_EXHAUSTED broke (`…PerMinute…`, `…PerDay…`): a spent
    // per-day quota is not a rate limit a retry outlasts.
    let quota_ids = details
        .iter()
        .filter_map(|d| d.get("violations").and_then(Value::as_array))
        .flatten()
        .filter_map(|v| v.get("quotaId").and_then(Value::as_str));
    // A bad key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
    let auth = status == "UNAUTHENTICATED"
        || reasons.contains(&"API_KEY_INVALID")
        || message.contains("API key not valid");
    ErrorInfo {
        code: std::iter::once(status)
            .chain(reasons.iter().copied())
            .chain(quota_ids)
            .collect::<Vec<_>>()
            .join(" "),
        message: if message.is_empty() {
            super::excerpt(body)
        } else {
            message.to_string()
        },
        auth,
    }
}

/// Schemas nested deeper than this (through `$ref`s) are taken to be recursive, which
/// Gemini's schema cannot express.
const MAX_DEPTH: usize = 32;

/// Converts a JSON Schema (as `schemars` writes it) to Gemini's OpenAPI 3.0 subset:
/// `$ref`s into `$defs`/`definitions` are inlined; `$schema`, `$id`, `title`,
/// `additionalProperties`, `default`, `examples` and unsupported formats are dropped;
/// `type: [T, "null"]` and `anyOf: [T, {type: null}]` become `nullable`; `oneOf`
/// becomes `anyOf`; `const` becomes a one-value `enum`; types are upper-cased.
pub fn to_gemini_schema(schema: &Value) -> Result<Value> {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object);
    convert(schema, defs, 0)
}

fn convert(node: &Value, defs: Option<&Map<String, Value>>, depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(Error::Config(
            "the answer schema is recursive or nested too deeply for Gemini's responseSchema; set options.structured = \"json_object\"".into(),
        ));
    }
    let Some(obj) = node.as_object() else {
        // `true` (anything) has no Gemini form; a free-form string is the closest.
        return Ok(json!({"type": "STRING"}));
    };
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"))
            .ok_or_else(|| Error::Config(format!("unsupported $ref \"{reference}\" in schema")))?;
        let target = defs.and_then(|d| d.get(name)).ok_or_else(|| {
            Error::Config(format!("schema $ref \"{reference}\" has no definition"))
        })?;
        let mut out = convert(target, defs, depth + 1)?;
        if let (Some(desc), Some(o)) = (obj.get("description"), out.as_object_mut()) {
            o.insert("description".into(), desc.clone());
        }
        return Ok(out);
    }
    let mut out = Map::new();
    let mut nullable = obj
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    // Alternatives: drop the null branch into `nullable`; one branch left is inlined.
    if let Some(alts) = obj
        .get("anyOf")
        .or_else(|| obj.get("oneOf"))
        .and_then(Value::as_array)
    {
        let mut kept = Vec::new();
        for alt in alts {
            if alt.get("type").and_then(Value::as_str) == Some("null") {
                nullable = true;
            } else {
                kept.push(convert(alt, defs, depth + 1)?);
            }
        }
        if kept.len() == 1 {
            if let Some(Value::Object(single)) = kept.pop() {
                out = single;
            }
        } else if !kept.is_empty() {
            out.insert("anyOf".into(), Value::Array(kept));
        }
    }
    if let Some(all) = obj.get("allOf").and_then(Value::as_array)
        && let [only] = all.as_slice()
        && let Value::Object(single) = convert(only, defs, depth + 1)?
    {
        out.extend(single);
    }

    match obj.get("type") {
        Some(Value::String(t)) if t != "null" => {
            out.insert("type".into(), Value::String(t.to_ascii_uppercase()));
        }
        Some(Value::Array(types)) => {
            let real: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            nullable |= real.contains(&"null");
            let real: Vec<&str> = real.into_iter().filter(|t| *t != "null").collect();
            match real.as_slice() {
                [one] => {
                    out.insert("type".into(), Value::String(one.to_ascii_uppercase()));
                }
                [] => {}
                many => {
                    let alts = many
                        .iter()
                        .map(|t| json!({"type": t.to_ascii_uppercase()}))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(alts));
                }
            }
        }
        _ => {}
    }

    if let Some(constant) = obj.get("const") {
        if let Some(s) = constant.as_str() {
            out.insert("type".into(), "STRING".into());
            out.insert("enum".into(), json!([s]));
        }
    } else if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        // Gemini's enums are string-only.
        let strings: Vec<&Value> = values.iter().filter(|v| v.is_string()).collect();
        if !strings.is_empty() && strings.len() == values.len() {
            out.insert("type".into(), "STRING".into());
            out.insert("enum".into(), Value::Array(values.clone()));
        } else if values.iter().any(Value::is_null) {
            nullable = true;
        }
    }

    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let mut converted = Map::new();
        for (name, prop) in props {
            converted.insert(name.clone(), convert(prop, defs, depth + 1)?);
        }
        if let Some(required) = obj.get("required").and_then(Value::as_array) {
            let kept: Vec<Value> = required
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| converted.contains_key(r)))
                .cloned()
                .collect();
            if !kept.is_empty() {
                out.insert("required".into(), Value::Array(kept));
            }
        }
        // Gemini orders its output by `propertyOrdering`; keep the schema's order.
        let order = converted.keys().cloned().map(Value::String).collect();
        out.insert("propertyOrdering".into(), Value::Array(order));
        out.insert("properties".into(), Value::Object(converted));
    }
    if let Some(items) = obj.get("items")
        && items.is_object()
    {
        out.insert("items".into(), convert(items, defs, depth + 1)?);
    }
    for key in [
        "description",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
    ] {
        if let Some(v) = obj.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(format) = obj.get("format").and_then(Value::as_str)
        && matches!(format, "date-time" | "float" | "double" | "int32" | "int64")
    {
        out.insert("format".into(), format.into());
    }
    if nullable {
        out.insert("nullable".into(), true.into());
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemars_output_becomes_gemini_subset() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "WorkerResult",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "summary": {"type": "string", "description": "what was done"},
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
                "note": {"type": ["string", "null"], "default": null},
                "kind": {"$ref": "#/$defs/Kind"},
                "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]},
                "fixed": {"const": "v1"}
            },
            "required": ["summary", "kind", "gone"],
            "$defs": {
                "Kind": {"type": "string", "enum": ["a", "b"]},
                "Item": {"title": "Item", "type": "object", "properties": {"x": {"type": "number", "format": "double"}}, "required": ["x"], "additionalProperties": false}
            }
        });
        let g = to_gemini_schema(&schema).unwrap();
        let text = g.to_string();
        for banned in [
            "$schema",
            "additionalProperties",
            "title",
            "$ref",
            "$defs",
            "uint32",
            "default",
            "const",
        ] {
            assert!(!text.contains(banned), "{banned} left in {text}");
        }
        assert_eq!(g["type"], "OBJECT");
        assert_eq!(g["required"], json!(["summary", "kind"]));
        assert_eq!(
            g["properties"]["note"],
            json!({"type": "STRING", "nullable": true})
        );
        assert_eq!(
            g["properties"]["kind"],
            json!({"type": "STRING", "enum": ["a", "b"]})
        );
        assert_eq!(
            g["properties"]["items"]["items"]["properties"]["x"],
            json!({"type": "NUMBER", "format": "double"})
        );
        assert_eq!(g["properties"]["maybe"]["nullable"], true);
        assert_eq!(g["properties"]["maybe"]["type"], "OBJECT");
        assert_eq!(
            g["properties"]["fixed"],
            json!({"type": "STRING", "enum": ["v1"]})
        );
        assert_eq!(
            g["properties"]["count"],
            json!({"type": "INTEGER", "minimum": 0})
        );
    }

    #[test]
    fn recursive_schemas_are_refused_with_advice() {
        let schema = json!({
            "type": "object",
            "properties": {"child": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}
        });
        let err = to_gemini_schema(&schema).unwrap_err();
        assert!(err.to_string().contains("json_object"), "{err}");
    }
}
