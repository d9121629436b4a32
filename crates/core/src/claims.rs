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

/// One call per turn: the work and the handoff in one answer. The engine splits it
/// into the turn's `WorkerResult` and `HandoffReport` (see [`TurnAnswer::split`]), so
/// the model never repeats itself and the briefing is sent once.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnAnswer {
    pub summary: String,
    #[serde(default)]
    pub completed: Vec<String>,
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
    pub last_action: String,
    /// Required, as in a handoff report: the next worker starts from it.
    pub next_action: String,
    /// What the next worker must know that the record does not say.
    #[serde(default)]
    pub notes: String,
    /// What the next worker must not assume, or must check first.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl TurnAnswer {
    /// The turn's two claims: the work as the result, the notes, warnings and actions
    /// as the report (which restates nothing, so nothing is reconciled twice).
    pub fn split(self) -> (WorkerResult, HandoffReport) {
        let report = HandoffReport {
            notes: self.notes,
            warnings: self.warnings,
            last_action: self.last_action.clone(),
            next_action: self.next_action.clone(),
            ..HandoffReport::default()
        };
        let result = WorkerResult {
            summary: self.summary,
            completed: self.completed,
            steps_completed: self.steps_completed,
            decisions: self.decisions,
            artifacts: self.artifacts,
            issues: self.issues,
            resolved_issues: self.resolved_issues,
            failed_attempts: self.failed_attempts,
            assumptions: self.assumptions,
            last_action: self.last_action,
            next_action: Some(self.next_action),
        };
        (result, report)
    }
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
static TURN_ANSWER_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<TurnAnswer>);

/// The type's schema as compact as providers take it: it rides in every request that
/// enforces one (and is billed as input there), so the `$schema` URL, the doc-comment
/// descriptions and the defaults are left out. The prompt's filled-in example already
/// says what each field is for; the structure (types, required fields, closed
/// objects) is all a schema-constrained decoder needs.
///
/// Each definition is used once or twice, so it is written in place rather than behind a
/// `$ref` (the `$defs` names and paths cost more than the repetition), and an optional
/// field is typed `"string"`, not `["string","null"]`: it is left out when there is
/// nothing to say, never sent as null.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    let defs = schema
        .as_object_mut()
        .and_then(|root| {
            root.remove("$schema");
            root.remove("$defs")
        })
        .unwrap_or(Value::Null);
    inline_refs(&mut schema, &defs, 0);
    strip_annotations(&mut schema);
    schema
}

/// Replaces every `{"$ref": "#/$defs/X"}` with the definition of `X`, and `[T, "null"]`
/// types with `T`. The claim types are not recursive; the depth bound keeps a mistaken
/// one from looping.
fn inline_refs(value: &mut Value, defs: &Value, depth: usize) {
    if depth > 16 {
        return;
    }
    match value {
        Value::Object(map) => {
            let target = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name));
            if let Some(target) = target {
                *value = target.clone();
                inline_refs(value, defs, depth + 1);
                return;
            }
            if let Some(Value::Array(types)) = map.get("type")
                && let [one, Value::String(null)] = types.as_slice()
                && null == "null"
            {
                let one = one.clone();
                map.insert("type".into(), one);
            }
            map.values_mut()
                .for_each(|v| inline_refs(v, defs, depth + 1));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| inline_refs(v, defs, depth + 1)),
        _ => {}
    }
}

/// Removes `description` and `default` at any depth, except as property names.
fn strip_annotations(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "properties" {
                    if let Some(props) = v.as_object_mut() {
                        props.values_mut().for_each(strip_annotations);
                    }
                } else {
                    strip_annotations(v);
                }
            }
            map.remove("description");
            map.remove("default");
        }
        Value::Array(items) => items.iter_mut().for_each(strip_annotations),
        _ => {}
    }
}

/// The JSON Schema of `WorkerResult`, computed once per process.
pub fn worker_result_schema() -> &'static Value {
    &WORKER_RESULT_SCHEMA
}

/// The JSON Schema of `HandoffReport`, computed once per process.
pub fn handoff_report_schema() -> &'static Value {
    &HANDOFF_REPORT_SCHEMA
}

/// The JSON Schema of `TurnAnswer`, computed once per process.
pub fn turn_answer_schema() -> &'static Value {
    &TURN_ANSWER_SCHEMA
}

/// A part of a claim the engine refused before merging, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Which claim and where, e.g. `result.artifacts[0].verified`.
    pub claim: String,
    pub reason: String,
}

/// A parsed claim plus what parsing refused from it and what it set aside.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    pub claim: T,
    pub refusals: Vec<Refusal>,
    /// Fields the claim type does not have (dropped), stamps copied from the briefing
    /// (removed): recorded with the turn, never silently lost.
    pub warnings: Vec<String>,
}

/// Parses model output into a `WorkerResult`.
pub fn parse_worker_result(raw: &str) -> Result<Parsed<WorkerResult>> {
    parse_claim(raw, "result", "WorkerResult", worker_result_schema())
}

/// Parses model output into a `HandoffReport`.
pub fn parse_handoff_report(raw: &str) -> Result<Parsed<HandoffReport>> {
    parse_claim(raw, "report", "HandoffReport", handoff_report_schema())
}

/// Parses the answer of a one-call turn into the turn's two claims. What parsing
/// refused or set aside (paths under `answer.`) goes with the result.
pub fn parse_turn_answer(raw: &str) -> Result<(Parsed<WorkerResult>, Parsed<HandoffReport>)> {
    let parsed: Parsed<TurnAnswer> =
        parse_claim(raw, "answer", "TurnAnswer", turn_answer_schema())?;
    let (result, report) = parsed.claim.split();
    Ok((
        Parsed {
            claim: result,
            refusals: parsed.refusals,
            warnings: parsed.warnings,
        },
        Parsed {
            claim: report,
            refusals: Vec::new(),
            warnings: Vec::new(),
        },
    ))
}

pub(crate) fn parse_claim<T: for<'de> Deserialize<'de>>(
    raw: &str,
    prefix: &str,
    claim: &'static str,
    schema: &Value,
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
    let mut warnings = Vec::new();
    drop_unknown_fields(&mut value, schema, schema, prefix, claim, &mut warnings);
    strip_echoed_stamps(&mut value, prefix, &mut warnings);
    // A misnamed required field (`lastAction`) is both dropped and missing: the error
    // names what was dropped, so a repair call can see the mistake.
    let claim_value = serde_json::from_value(value).map_err(|e| Error::SchemaViolation {
        claim,
        detail: if warnings.is_empty() {
            e.to_string()
        } else {
            format!("{e} ({})", warnings.join("; "))
        },
    })?;
    Ok(Parsed {
        claim: claim_value,
        refusals,
        warnings,
    })
}

/// Removes, at any depth, fields that the claim type does not have, with a warning
/// each. Models mix up the two claim types and copy schema keywords (`title`); the rest
/// of such a claim is still good. Engine-only fields are refused before this runs.
fn drop_unknown_fields(
    value: &mut Value,
    schema: &Value,
    root: &Value,
    path: &str,
    claim: &str,
    warnings: &mut Vec<String>,
) {
    let schema = resolve_schema(schema, root);
    match value {
        Value::Object(map) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let unknown: Vec<String> = map
                .keys()
                .filter(|k| !props.contains_key(k.as_str()))
                .cloned()
                .collect();
            for key in unknown {
                map.remove(&key);
                warnings.push(format!(
                    "{path}.{key}: a {claim} has no such field; dropped (known: {})",
                    props
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for (key, v) in map.iter_mut() {
                if let Some(sub) = props.get(key) {
                    drop_unknown_fields(v, sub, root, &format!("{path}.{key}"), claim, warnings);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    drop_unknown_fields(v, sub, root, &format!("{path}[{i}]"), claim, warnings);
                }
            }
        }
        _ => {}
    }
}

/// Follows `$ref`s into the root's definitions and, for `anyOf`/`oneOf` (how an
/// optional struct is written), takes the first alternative that describes an object
/// or an array.
fn resolve_schema<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut current = schema;
    for _ in 0..8 {
        if let Some(reference) = current.get("$ref").and_then(Value::as_str) {
            let pointer = reference.trim_start_matches('#');
            match root.pointer(pointer) {
                Some(target) => current = target,
                None => return current,
            }
            continue;
        }
        let alternatives = current
            .get("anyOf")
            .or_else(|| current.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(alternatives) = alternatives
            && let Some(found) = alternatives.iter().find(|a| {
                a.get("$ref").is_some() || a.get("properties").is_some() || a.get("items").is_some()
            })
        {
            current = found;
            continue;
        }
        return current;
    }
    current
}

/// Removes provenance stamps a model copied back from its briefing (`(by w1, turn 3)`,
/// `(raised by w1, turn 3; still failing at turn 5)`, `(done by w1, turn 2)`) from every
/// text of a claim except file contents, with a warning per field. The engine stamps
/// what it records; a copied stamp would be recorded under the wrong turn.
fn strip_echoed_stamps(value: &mut Value, path: &str, warnings: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            let (clean, removed) = crate::text::strip_stamps(text);
            if !removed.is_empty() {
                warnings.push(format!(
                    "{path}: removed {} copied from the briefing ({})",
                    if removed.len() == 1 {
                        "a provenance stamp".to_string()
                    } else {
                        format!("{} provenance stamps", removed.len())
                    },
                    removed.join(" ")
                ));
                *text = clean;
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k != "content" {
                    strip_echoed_stamps(v, &format!("{path}.{k}"), warnings);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                strip_echoed_stamps(v, &format!("{path}[{i}]"), warnings);
            }
        }
        _ => {}
    }
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
        // A field the claim type lacks is dropped with a warning; the rest stands.
        let parsed =
            parse_worker_result(r#"{"summary":"s","last_action":"a","delete":"F1"}"#).unwrap();
        assert_eq!(parsed.claim.summary, "s");
        assert!(
            parsed.warnings[0].starts_with("result.delete: "),
            "{:?}",
            parsed.warnings
        );
    }

    #[test]
    fn fields_of_the_other_claim_type_and_schema_keywords_are_dropped_with_a_warning() {
        // What real models sent: a handoff carrying the result's fields, a claim with
        // the schema's `title`, a nested unknown field.
        let raw = r#"{"title":"HandoffReport","summary":"did it","completed":["x"],
            "last_action":"a","next_action":"b",
            "decisions":[{"text":"use x","reason":"fast","confidence":"high"}]}"#;
        let parsed = parse_handoff_report(raw).unwrap();
        assert_eq!(parsed.claim.next_action, "b");
        assert_eq!(parsed.claim.decisions[0].reason.as_deref(), Some("fast"));
        let fields: Vec<&str> = parsed
            .warnings
            .iter()
            .map(|w| w.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            fields,
            [
                "report.completed",
                "report.summary",
                "report.title",
                "report.decisions[0].confidence"
            ]
        );
        assert!(parsed.refusals.is_empty());
        // Provenance stays refused, not merely dropped.
        let raw = r#"{"last_action":"a","next_action":"b","verified_by":"me"}"#;
        let parsed = parse_handoff_report(raw).unwrap();
        assert_eq!(parsed.refusals[0].claim, "report.verified_by");
    }

    #[test]
    fn stamps_copied_from_the_briefing_are_removed_from_claims_but_not_from_file_contents() {
        let raw = r#"{"summary":"s","last_action":"T2 (by oai, turn 1) (by oai, turn 4)",
            "artifacts":[{"name":"a.md","description":"notes (by w1, turn 2)",
                          "content":"kept (by w1, turn 2)"}]}"#;
        let parsed = parse_worker_result(raw).unwrap();
        assert_eq!(parsed.claim.last_action, "T2");
        assert_eq!(parsed.claim.artifacts[0].description, "notes");
        assert_eq!(
            parsed.claim.artifacts[0].content.as_deref(),
            Some("kept (by w1, turn 2)")
        );
        assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    }

    #[test]
    fn a_turn_answer_is_split_into_the_result_and_the_report() {
        let raw = r#"{"summary":"s","last_action":"a","next_action":"n","notes":"read x",
            "warnings":["w"],"decisions":[{"text":"d"}],"verified":true,"mood":"ok"}"#;
        let (result, report) = parse_turn_answer(raw).unwrap();
        assert_eq!(result.claim.decisions[0].text, "d");
        assert_eq!(result.claim.next_action.as_deref(), Some("n"));
        assert_eq!(report.claim.notes, "read x");
        assert_eq!(report.claim.warnings, ["w"]);
        assert_eq!(report.claim.last_action, "a");
        assert!(
            report.claim.decisions.is_empty(),
            "nothing is reconciled twice"
        );
        assert_eq!(result.refusals[0].claim, "answer.verified");
        assert!(
            result.warnings[0].starts_with("answer.mood: "),
            "{:?}",
            result.warnings
        );
        // The handoff's next action is required, as in a handoff report.
        assert!(parse_turn_answer(r#"{"summary":"s","last_action":"a"}"#).is_err());
    }

    #[test]
    fn schemas_are_compact_but_keep_their_structure() {
        for s in [
            worker_result_schema(),
            handoff_report_schema(),
            turn_answer_schema(),
        ] {
            let text = s.to_string();
            assert!(!text.contains("\"description\":\""), "{text}");
            assert!(!text.contains("$schema"), "{text}");
            assert_eq!(s["additionalProperties"], Value::Bool(false));
        }
        // `description` the field (of an artifact) stays; only the annotation goes.
        let t = turn_answer_schema();
        assert!(t.to_string().contains("\"description\":{"), "{t}");
        assert_eq!(t["title"], "TurnAnswer");
    }

    /// The definitions are written in place and optional fields are plain strings: the
    /// schema rides in every request that enforces one. Nested objects stay closed and a
    /// nested unknown field is still dropped by name.
    #[test]
    fn schemas_have_no_references_or_null_types() {
        for s in [
            worker_result_schema(),
            handoff_report_schema(),
            turn_answer_schema(),
        ] {
            let text = s.to_string();
            assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
            assert!(!text.contains("null"), "{text}");
        }
        let t = turn_answer_schema();
        let issue = &t["properties"]["issues"]["items"];
        assert_eq!(issue["additionalProperties"], Value::Bool(false));
        assert_eq!(issue["properties"]["detail"]["type"], "string");
        assert_eq!(issue["properties"]["severity"]["enum"][3], "critical");
        let raw = r#"{"summary":"s","last_action":"a","issues":[{"title":"t",
            "severity":"high","mood":"x"}]}"#;
        let parsed = parse_worker_result(raw).unwrap();
        assert!(parsed.warnings.iter().any(|w| w.contains("issues[0].mood")));
    }

    #[test]
    fn json_is_found_in_fences_and_after_prose() {
        let fenced = "Here you go:\n```json\n{\"summary\":\"s\",\"last_action\":\"a\"}\n```\n";
        assert_eq!(parse_worker_result(fenced).unwrap().claim.summary, "s");
        let prose = "Sure! {\"summary\":\"t\",\"last_action\":\"a\"} hope that helps";
        assert_eq!(parse_worker_result(prose).unwrap().claim.summary, "t");
    }
}
