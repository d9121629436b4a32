//! What a coding agent's turn claims. An agent is not asked for a JSON claim: the
//! commit of its worktree is the evidence (the engine turns every file it changed into
//! a verified artifact), its final message is the summary, and an optional notes file
//! adds what a commit cannot say — decisions, issues, failed attempts, warnings.
//!
//! The command gateway reports what the agent left as an [`AgentOutput`]; this module
//! turns it into the turn's `WorkerResult` and `HandoffReport`. Nothing is re-asked:
//! a notes file that does not parse, or a field of the wrong shape, is set aside with a
//! warning, and the rest of the turn stands.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::claims::{
    ArtifactClaim, DecisionClaim, ENGINE_ONLY_FIELDS, FailedAttemptClaim, HandoffReport,
    IssueClaim, Parsed, Refusal, ResolutionClaimInput, WorkerResult,
};
use crate::reconciler::clip;
use crate::{Error, Result};

/// What an agent left after its run, as the command gateway reports it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentOutput {
    /// The agent's final message: its CLI's result field, its last-message file, or the
    /// end of its standard output.
    pub final_message: String,
    /// Where the final message was read from.
    #[serde(default)]
    pub source: String,
    /// The notes the agent left: its notes file's JSON object, a JSON claim or the
    /// worker-contract sections of its final message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Value>,
    /// Why notes the agent wrote could not be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes_error: Option<String>,
}

/// An agent turn's claims, and what the engine should say about how they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentClaim {
    pub result: Parsed<WorkerResult>,
    pub report: Parsed<HandoffReport>,
    /// Engine warnings: fields set aside, a notes file that did not parse.
    pub warnings: Vec<String>,
}

/// The longest summary taken from a final message; the whole message stays in the
/// turn's output files.
const SUMMARY_CHARS: usize = 1200;
const ACTION_CHARS: usize = 240;

/// What the next worker is told to do when the agent named nothing.
pub const DEFAULT_NEXT_ACTION: &str =
    "Review this turn's commit against the assignment and continue from it";

/// Reads an agent turn's output (the JSON text of an [`AgentOutput`]).
pub fn parse_agent_output(raw: &str) -> Result<AgentClaim> {
    let output: AgentOutput = serde_json::from_str(raw).map_err(|e| Error::Unparseable {
        claim: "AgentOutput",
        detail: e.to_string(),
    })?;
    Ok(agent_claim(&output))
}

/// Builds the turn's claims from what the agent left.
pub fn agent_claim(output: &AgentOutput) -> AgentClaim {
    let mut warnings = Vec::new();
    let mut refusals = Vec::new();
    if let Some(e) = &output.notes_error {
        warnings.push(format!(
            "the agent's notes could not be used ({e}); its commit and final message stand"
        ));
    }
    let mut notes = match &output.notes {
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            warnings.push(format!(
                "the agent's notes are not a JSON object (got {}); set aside",
                kind_of(other)
            ));
            Map::new()
        }
        None => Map::new(),
    };
    strip_engine_fields(&mut notes, &mut refusals);

    let message = output.final_message.trim();
    let mut take = Taker {
        notes: &mut notes,
        warnings: &mut warnings,
    };
    let claimed_summary = take.text("summary");
    let summary = match (claimed_summary, message.is_empty()) {
        (Some(s), _) => s,
        (None, false) => clip(message, SUMMARY_CHARS),
        (None, true) => {
            take.warnings.push(
                "the agent left no final message; the turn is described by its commit alone".into(),
            );
            "The agent left no final message; its changes are in this turn's commit.".into()
        }
    };
    let last_action = take
        .text("last_action")
        .unwrap_or_else(|| clip(first_sentence(&summary), ACTION_CHARS));
    let next_action = take.text("next_action");
    let result = WorkerResult {
        summary: summary.clone(),
        completed: take.list("completed"),
        steps_completed: take.list("steps_completed"),
        decisions: take.list::<DecisionClaim>("decisions"),
        artifacts: take.list::<ArtifactClaim>("artifacts"),
        issues: take.list::<IssueClaim>("issues"),
        resolved_issues: take.list::<ResolutionClaimInput>("resolved_issues"),
        failed_attempts: take.list::<FailedAttemptClaim>("failed_attempts"),
        assumptions: take.list("assumptions"),
        last_action: last_action.clone(),
        next_action: next_action.clone(),
    };
    let report = HandoffReport {
        notes: take.text("notes").unwrap_or_default(),
        warnings: take.list("warnings"),
        last_action,
        next_action: next_action.unwrap_or_else(|| DEFAULT_NEXT_ACTION.into()),
        ..HandoffReport::default()
    };
    let mut ignored: Vec<&String> = notes.keys().collect();
    ignored.sort();
    if !ignored.is_empty() {
        warnings.push(format!(
            "the agent's notes carry field(s) no claim has, set aside: {}",
            ignored
                .iter()
                .map(|k| format!("`{}`", clip(k, 40)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    AgentClaim {
        result: Parsed {
            claim: result,
            refusals,
            warnings: Vec::new(),
        },
        report: Parsed {
            claim: report,
            refusals: Vec::new(),
            warnings: Vec::new(),
        },
        warnings,
    }
}

/// Takes fields out of the notes one by one, so one field of the wrong shape costs
/// that field only.
struct Taker<'a> {
    notes: &'a mut Map<String, Value>,
    warnings: &'a mut Vec<String>,
}

impl Taker<'_> {
    fn text(&mut self, key: &str) -> Option<String> {
        match self.notes.remove(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Value::String(_) | Value::Null => None,
            other => {
                self.warnings.push(format!(
                    "the agent's notes field `{key}` should be text, got {}; set aside",
                    kind_of(&other)
                ));
                None
            }
        }
    }

    fn list<T: for<'de> Deserialize<'de>>(&mut self, key: &str) -> Vec<T> {
        let items = match self.notes.remove(key) {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(items)) => items,
            // One item where a list was meant.
            Some(one) => vec![one],
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match serde_json::from_value::<T>(item) {
                Ok(v) => out.push(v),
                Err(e) => self.warnings.push(format!(
                    "the agent's notes `{key}[{i}]` is not a valid entry ({}); set aside",
                    clip(&e.to_string(), 160)
                )),
            }
        }
        out
    }
}

/// Engine-only fields are refused wherever they appear (invariant 5).
fn strip_engine_fields(map: &mut Map<String, Value>, refusals: &mut Vec<Refusal>) {
    fn walk(value: &mut Value, path: &str, refusals: &mut Vec<Refusal>) {
        match value {
            Value::Object(map) => {
                for field in ENGINE_ONLY_FIELDS {
                    if map.remove(*field).is_some() {
                        refusals.push(Refusal {
                            claim: format!("{path}.{field}"),
                            reason: format!(
                                "`{field}` is written only by the engine; an agent cannot set it"
                            ),
                        });
                    }
                }
                for (k, v) in map.iter_mut() {
                    walk(v, &format!("{path}.{k}"), refusals);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter_mut().enumerate() {
                    walk(v, &format!("{path}[{i}]"), refusals);
                }
            }
            _ => {}
        }
    }
    let mut value = Value::Object(std::mem::take(map));
    walk(&mut value, "result", refusals);
    if let Value::Object(m) = value {
        *map = m;
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The first sentence (or line) of a message.
fn first_sentence(text: &str) -> &str {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    match line.find(". ") {
        Some(i) => &line[..=i],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn output(message: &str, notes: Option<Value>) -> AgentOutput {
        AgentOutput {
            final_message: message.into(),
            source: "stdout".into(),
            notes,
            notes_error: None,
        }
    }

    #[test]
    fn the_final_message_is_the_summary_when_no_notes_were_left() {
        let c = agent_claim(&output(
            "Fixed the off-by-one in calc/core.py. The tests pass now.",
            None,
        ));
        assert_eq!(
            c.result.claim.summary,
            "Fixed the off-by-one in calc/core.py. The tests pass now."
        );
        assert_eq!(
            c.result.claim.last_action,
            "Fixed the off-by-one in calc/core.py."
        );
        assert_eq!(c.report.claim.next_action, DEFAULT_NEXT_ACTION);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn a_schema_title_copied_into_the_notes_costs_nothing_but_a_warning() {
        // Observed: aider, Codex and Claude Code all copied `"title": "WorkerResult"`.
        let c = agent_claim(&output(
            "done",
            Some(json!({
                "title": "WorkerResult",
                "summary": "Fixed add()",
                "decisions": [{"text": "Keep the API", "reason": "callers depend on it"}],
                "issues": [{"title": "No test for negatives", "severity": "medium"},
                           {"title": "bad", "severity": "enormous"}],
                "warnings": ["The CI image lacks python3.12"],
                "next_action": "Add a test for negative numbers",
            })),
        ));
        let r = &c.result.claim;
        assert_eq!(r.summary, "Fixed add()");
        assert_eq!(r.decisions.len(), 1);
        assert_eq!(r.issues.len(), 1, "the malformed issue alone is set aside");
        assert_eq!(
            c.report.claim.warnings,
            vec!["The CI image lacks python3.12"]
        );
        assert_eq!(
            c.report.claim.next_action,
            "Add a test for negative numbers"
        );
        let w = c.warnings.join("\n");
        assert!(w.contains("`title`"), "{w}");
        assert!(w.contains("issues[1]"), "{w}");
    }

    #[test]
    fn engine_only_fields_in_the_notes_are_refused() {
        let c = agent_claim(&output(
            "done",
            Some(json!({"artifacts": [{"name": "a.py", "description": "d", "verified": true}]})),
        ));
        assert_eq!(c.result.refusals.len(), 1);
        assert_eq!(c.result.refusals[0].claim, "result.artifacts[0].verified");
        assert_eq!(c.result.claim.artifacts.len(), 1);
    }

    #[test]
    fn an_agent_that_said_nothing_still_has_a_turn() {
        let c = agent_claim(&output("  \n", None));
        assert!(c.result.claim.summary.contains("no final message"));
        assert!(!c.result.claim.last_action.is_empty());
        assert_eq!(c.warnings.len(), 1);
    }

    #[test]
    fn the_output_round_trips_through_its_json_text() {
        let o = output("hi", Some(json!({"summary": "s"})));
        let text = serde_json::to_string(&o).unwrap();
        let c = parse_agent_output(&text).unwrap();
        assert_eq!(c.result.claim.summary, "s");
        assert!(parse_agent_output("{\"summary\": \"x\"}").is_err());
    }
}
