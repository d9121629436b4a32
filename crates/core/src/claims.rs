//! What a worker may claim. These types are the whole vocabulary a model has: they have
//! no field for provenance or verification, and parsing refuses any attempt to supply one
//! (invariant 5). Their JSON Schemas are generated from the types, once per process.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::Severity;
use crate::{Error, Result};

/// A decision and, ideally, the reason for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionClaim {
    /// The decision, stated so a later worker can act on it.
    pub text: String,
    /// Why: the constraint, evidence or trade-off behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An artifact produced or changed this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactClaim {
    /// Name or path: the artifact's identity across versions.
    pub name: String,
    /// What kind of artifact (document, schema, code, diagram, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// What it contains now.
    pub description: String,
    /// The content itself, when it is small enough to carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// An artifact named in a handoff report (a mention, never a change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactMention {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A problem that is not solved yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueClaim {
    pub title: String,
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The name of a configured gate (e.g. `tests`) whose passing run resolves this
    /// issue. Only a gate's actual run closes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// A claim that an existing issue is resolved. The engine records it; only a verifier
/// or gate closes the issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolutionClaimInput {
    /// The issue's id (e.g. `I2`) or its title.
    pub issue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Something tried that did not work, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailedAttemptClaim {
    pub what: String,
    pub why: String,
}

/// Model call 1: what the worker did for its assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerResult {
    /// Two or three sentences: what was done this turn.
    pub summary: String,
    /// Pieces of work finished this turn.
    #[serde(default)]
    pub completed: Vec<String>,
    /// Plan step ids (e.g. `T2`) the worker claims to have completed.
    #[serde(default)]
    pub steps_completed: Vec<String>,
    #[serde(default)]
    pub decisions: Vec<DecisionClaim>,
    #[serde(default)]
    pub artifacts: Vec<ArtifactClaim>,
    #[serde(default)]
    pub issues: Vec<IssueClaim>,
    #[serde(default)]
    pub resolved_issues: Vec<ResolutionClaimInput>,
    #[serde(default)]
    pub failed_attempts: Vec<FailedAttemptClaim>,
    #[serde(default)]
    pub assumptions: Vec<String>,
    /// The last thing done, concretely.
    pub last_action: String,
    /// The next concrete action for whoever continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<String>,
}

/// Model call 2: what the worker hands to the next one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffReport {
    /// Notes for the next worker: context it cannot get from the record.
    #[serde(default)]
    pub notes: String,
    /// Things the next worker must not assume or must check first.
    #[serde(default)]
    pub warnings: Vec<String>,
    pub last_action: String,
    pub next_action: String,
    /// Decisions restated for emphasis (recognised, not duplicated).
    #[serde(default)]
    pub decisions: Vec<DecisionClaim>,
    /// Artifacts the report refers to. A mention never changes an artifact.
    #[serde(default)]
    pub artifacts: Vec<ArtifactMention>,
    #[serde(default)]
    pub issues: Vec<IssueClaim>,
    #[serde(default)]
    pub resolved_issues: Vec<ResolutionClaimInput>,
    #[serde(default)]
    pub failed_attempts: Vec<FailedAttemptClaim>,
    #[serde(default)]
    pub assumptions: Vec<String>,
}

/// Field names only the engine may write. A claim that contains one anywhere is
/// refused for that field (and the rest of the claim still has to be valid).
pub const ENGINE_ONLY_FIELDS: &[&str] = &[
    "recorded_by",
    "recorded_at",
    "verified",
    "verified_by",
    "provenance",
    "status",
    "version",
];

static WORKER_RESULT_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<WorkerResult>);
static HANDOFF_REPORT_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<HandoffReport>);
static WORKER_RESULT_SCHEMA_TEXT: LazyLock<String> =
    LazyLock::new(|| serde_json::to_string(&*WORKER_RESULT_SCHEMA).unwrap_or_default());
static HANDOFF_REPORT_SCHEMA_TEXT: LazyLock<String> =
    LazyLock::new(|| serde_json::to_string(&*HANDOFF_REPORT_SCHEMA).unwrap_or_default());

fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// The JSON Schema of `WorkerResult`, computed once per process.
pub fn worker_result_schema() -> &'static Value {
    &WORKER_RESULT_SCHEMA
}

/// The JSON Schema of `HandoffReport`, computed once per process.
pub fn handoff_report_schema() -> &'static Value {
    &HANDOFF_REPORT_SCHEMA
}

/// Compact JSON text of the `WorkerResult` schema (for prompts).
pub fn worker_result_schema_text() -> &'static str {
    &WORKER_RESULT_SCHEMA_TEXT
}

/// Compact JSON text of the `HandoffReport` schema (for prompts).
pub fn handoff_report_schema_text() -> &'static str {
    &HANDOFF_REPORT_SCHEMA_TEXT
}

/// A part of a claim the engine refused before merging, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Which claim and where, e.g. `result.artifacts[0].verified`.
    pub claim: String,
    pub reason: String,
}

/// A parsed claim plus what parsing refused from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    pub claim: T,
    pub refusals: Vec<Refusal>,
}

/// Parses model output into a `WorkerResult`.
pub fn parse_worker_result(raw: &str) -> Result<Parsed<WorkerResult>> {
    parse_claim(raw, "result", "WorkerResult")
}

/// Parses model output into a `HandoffReport`.
pub fn parse_handoff_report(raw: &str) -> Result<Parsed<HandoffReport>> {
    parse_claim(raw, "report", "HandoffReport")
}

fn parse_claim<T: for<'de> Deserialize<'de>>(
    raw: &str,
    prefix: &str,
    claim: &'static str,
) -> Result<Parsed<T>> {
    let json = extract_json_object(raw).ok_or_else(|| Error::Unparseable {
        claim,
        detail: format!("no JSON object found in {} bytes of output", raw.len()),
    })?;
    let mut value: Value = serde_json::from_str(json).map_err(|e| Error::Unparseable {
        claim,
        detail: e.to_string(),
    })?;
    if !value.is_object() {
        return Err(Error::SchemaViolation {
            claim,
            detail: "expected a JSON object".into(),
        });
    }
    let mut refusals = Vec::new();
    strip_engine_fields(&mut value, prefix, &mut refusals);
    let claim_value = serde_json::from_value(value).map_err(|e| Error::SchemaViolation {
        claim,
        detail: e.to_string(),
    })?;
    Ok(Parsed {
        claim: claim_value,
        refusals,
    })
}

/// Removes engine-only fields at any depth, recording a refusal for each.
fn strip_engine_fields(value: &mut Value, path: &str, refusals: &mut Vec<Refusal>) {
    match value {
        Value::Object(map) => {
            for field in ENGINE_ONLY_FIELDS {
                if map.remove(*field).is_some() {
                    refusals.push(Refusal {
                        claim: format!("{path}.{field}"),
                        reason: format!(
                            "`{field}` is written only by the engine; a model cannot set it"
                        ),
                    });
                }
            }
            for (k, v) in map.iter_mut() {
                strip_engine_fields(v, &format!("{path}.{k}"), refusals);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                strip_engine_fields(v, &format!("{path}[{i}]"), refusals);
            }
        }
        _ => {}
    }
}

/// Finds the JSON object in model output: the whole text, a fenced ```json block, or
/// the span from the first `{` to the last `}` (models like leading prose).
pub fn extract_json_object(raw: &str) -> Option<&str> {
    let trimmed = raw.trim();
    if trimmed.starts_with('{') && trimmed.ends_with('}') {
        return Some(trimmed);
    }
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        if let Some(end) = body.find("```") {
            let inner = body[..end].trim();
            // A fence holding half an object (found by the property test in
            // `tests/suite/claims.rs`) is not the claim; the brace span below may be.
            if inner.starts_with('{') && inner.ends_with('}') {
                return Some(inner);
            }
        }
    }
    let first = trimmed.find('{')?;
    let last = trimmed.rfind('}')?;
    (last > first).then(|| &trimmed[first..=last])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_generated_from_the_types_and_forbid_extra_fields() {
        let s = worker_result_schema();
        assert_eq!(s["additionalProperties"], Value::Bool(false));
        assert!(s["properties"]["decisions"].is_object());
        assert!(s["properties"].get("verified").is_none());
        let h = handoff_report_schema();
        assert!(h["properties"]["warnings"].is_object());
        assert!(std::ptr::eq(worker_result_schema(), worker_result_schema()));
    }

    #[test]
    fn engine_only_fields_are_refused_anywhere_in_a_claim() {
        let raw = r#"{"summary":"s","last_action":"a","verified":true,
            "artifacts":[{"name":"x","description":"d","verified":true,"recorded_by":"me"}]}"#;
        let parsed = parse_worker_result(raw).unwrap();
        let fields: Vec<_> = parsed.refusals.iter().map(|r| r.claim.as_str()).collect();
        assert_eq!(
            fields,
            [
                "result.verified",
                "result.artifacts[0].recorded_by",
                "result.artifacts[0].verified"
            ]
        );
        assert_eq!(parsed.claim.artifacts[0].name, "x");
    }

    #[test]
    fn malformed_and_schema_violating_output_are_distinct_errors() {
        assert!(matches!(
            parse_worker_result("not json at all"),
            Err(Error::Unparseable { .. })
        ));
        assert!(matches!(
            parse_worker_result(r#"{"summary": "s"}"#),
            Err(Error::SchemaViolation { .. })
        ));
        assert!(matches!(
            parse_worker_result(r#"{"summary":"s","last_action":"a","delete":"F1"}"#),
            Err(Error::SchemaViolation { .. })
        ));
    }

    #[test]
    fn json_is_found_in_fences_and_after_prose() {
        let fenced = "Here you go:\n```json\n{\"summary\":\"s\",\"last_action\":\"a\"}\n```\n";
        assert_eq!(parse_worker_result(fenced).unwrap().claim.summary, "s");
        let prose = "Sure! {\"summary\":\"t\",\"last_action\":\"a\"} hope that helps";
        assert_eq!(parse_worker_result(prose).unwrap().claim.summary, "t");
    }
}
