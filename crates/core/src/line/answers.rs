//! What a line station asks of its seat, and how the answer is read and reconciled: one
//! answer type per kind of work, with its JSON Schema, parsed like every claim (engine-only
//! fields refused, unknown fields dropped with a warning), and folded into the state only
//! through the line's reconciler rules.
//!
//! A model cannot close a finding with its answer: there is no status field to set (a
//! `status` is refused as engine-only), a `fixed` entry records a claim, and a
//! `confirmed` entry closes a finding only when the reconciler accepts the seat and
//! worker as its confirmer.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FindingClaim, PlanDraft};
use crate::Result;
use crate::claims::{Parsed, parse_claim, schema_of};
use crate::reconciler::ReconcileOutcome;
use crate::reconciler::line::{
    LineTurn, claim_fixed, confirm_fixed, dismiss, propose_plan, raise_findings, record_intake,
};
use crate::state::ExecutionState;

/// A claim that an open finding is fixed (by the worker that fixed it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixClaim {
    /// The finding's id (`N3`).
    pub finding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A lead's dismissal of a finding, with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dismissal {
    pub finding: String,
    pub reason: String,
}

/// The answer of a seat that checks work: a scrutiny of the plan, a checkpoint's find or
/// confirm, a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckAnswer {
    /// What was checked and the conclusion, in a few sentences.
    pub summary: String,
    /// Problems found; none is an answer too (the round raised nothing).
    #[serde(default)]
    pub findings: Vec<FindingClaim>,
    /// Findings whose claimed fix this seat checked and confirms (a confirming seat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmed: Vec<String>,
}

/// The answer of a seat that drafts, merges or revises the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanAnswer {
    pub plan: PlanDraft,
    /// The plan versions this one merges or revises (`P1`, `P2`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// Findings of the scrutiny this version answers (a lead's revision).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixed: Vec<FixClaim>,
    /// Findings the lead dismisses, with reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dismissed: Vec<Dismissal>,
}

/// The answer of the intake: what is wanted, or the questions that must be answered
/// first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntakeAnswer {
    /// The objective as the lead understood it.
    pub objective: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance: Vec<String>,
    /// Concrete questions for a human when the description is ambiguous; any stops the
    /// line until they are answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<String>,
}

static CHECK_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<CheckAnswer>);
static PLAN_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<PlanAnswer>);
static INTAKE_SCHEMA: LazyLock<Value> = LazyLock::new(schema_of::<IntakeAnswer>);

pub fn check_schema() -> &'static Value {
    &CHECK_SCHEMA
}
pub fn plan_schema() -> &'static Value {
    &PLAN_SCHEMA
}
pub fn intake_schema() -> &'static Value {
    &INTAKE_SCHEMA
}

pub fn parse_check(raw: &str) -> Result<Parsed<CheckAnswer>> {
    parse_claim(raw, "check", "CheckAnswer", check_schema())
}
pub fn parse_plan(raw: &str) -> Result<Parsed<PlanAnswer>> {
    parse_claim(raw, "plan", "PlanAnswer", plan_schema())
}
pub fn parse_intake(raw: &str) -> Result<Parsed<IntakeAnswer>> {
    parse_claim(raw, "intake", "IntakeAnswer", intake_schema())
}

/// Folds a checking seat's answer into the state; returns the findings it created.
pub fn reconcile_check(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    answer: &CheckAnswer,
    out: &mut ReconcileOutcome,
) -> Vec<String> {
    let created = raise_findings(state, turn, &answer.findings, out);
    for id in &answer.confirmed {
        confirm_fixed(state, turn, id, None, out);
    }
    created
}

/// Folds a plan answer into the state; returns the new version's id, if accepted.
pub fn reconcile_plan(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    answer: &PlanAnswer,
    out: &mut ReconcileOutcome,
) -> Option<String> {
    let id = propose_plan(state, turn, &answer.plan, &answer.from, out);
    // A revision that was refused (a locked plan) fixes nothing.
    if id.is_some() {
        for fix in &answer.fixed {
            claim_fixed(state, turn, &fix.finding, fix.note.as_deref(), out);
        }
    }
    for d in &answer.dismissed {
        dismiss(state, turn, &d.finding, &d.reason, out);
    }
    id
}

/// Folds the intake's answer into the state (see `reconciler::line::record_intake`);
/// returns the question the line must stop on, when the intake asked any.
pub fn reconcile_intake(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    answer: &IntakeAnswer,
    out: &mut ReconcileOutcome,
) -> Option<String> {
    record_intake(
        state,
        turn,
        &answer.objective,
        &answer.constraints,
        &answer.acceptance,
        &answer.questions,
        out,
    )
}

/// Folds the fixes a build turn claims (beside its usual claims) into the state.
pub fn reconcile_fixes(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    fixed: &[FixClaim],
    out: &mut ReconcileOutcome,
) {
    for fix in fixed {
        claim_fixed(state, turn, &fix.finding, fix.note.as_deref(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RunId;
    use crate::line::{FindingSeverity, FindingStatus};

    fn with_turn<R>(who: &str, seat: &str, f: impl FnOnce(&LineTurn<'_>) -> R) -> R {
        crate::line::test_fixtures::as_seat(who, seat, "review", 1, None, f)
    }

    #[test]
    fn an_intake_records_what_is_wanted_or_asks_and_records_nothing() {
        let mut s = ExecutionState::new(RunId("u".into()), "Add rate limiting", &[]);
        let clear = parse_intake(
            r#"{"objective": "Rate-limit the public API per key", "constraints": ["No new dependency", " "], "acceptance": ["A burst over the limit gets 429"]}"#,
        )
        .unwrap()
        .claim;
        let mut out = ReconcileOutcome::default();
        let asked = with_turn("opus", "lead.intake", |t| {
            reconcile_intake(&mut s, t, &clear, &mut out)
        });
        assert_eq!(asked, None);
        let texts: Vec<&str> = s.decisions.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Objective as the intake reads it: Rate-limit the public API per key",
                "Constraint: No new dependency",
                "Acceptance: A burst over the limit gets 429"
            ]
        );
        assert!(
            s.decisions
                .iter()
                .all(|d| d.provenance.recorded_by.as_str() == "opus")
        );
        with_turn("opus", "lead.intake", |t| {
            reconcile_intake(&mut s, t, &clear, &mut out)
        });
        assert_eq!(s.decisions.len(), 3);

        let mut fresh = ExecutionState::new(RunId("v".into()), "Fix it", &[]);
        let vague = parse_intake(
            r#"{"objective": "Fix it", "constraints": ["Keep the API"], "questions": ["Fix what?", "By when?"]}"#,
        )
        .unwrap()
        .claim;
        let asked = with_turn("opus", "lead.intake", |t| {
            reconcile_intake(&mut fresh, t, &vague, &mut out)
        })
        .unwrap();
        assert!(asked.contains("lead.intake held by opus"), "{asked}");
        assert!(asked.ends_with("1) Fix what? 2) By when?"), "{asked}");
        assert!(fresh.decisions.is_empty());
    }

    #[test]
    fn a_checking_answer_parses_and_an_engine_field_in_it_is_refused() {
        let raw = r#"Here is my review:
{"summary": "one leak", "findings": [{"severity": "MAJOR", "what": "buckets leak", "where": "src/limit.rs", "status": "fixed", "recorded_by": "me"}], "mood": "grim"}"#;
        let parsed = parse_check(raw).unwrap();
        assert_eq!(parsed.claim.findings[0].severity, FindingSeverity::Major);
        let refused: Vec<&str> = parsed.refusals.iter().map(|r| r.claim.as_str()).collect();
        assert_eq!(
            refused,
            ["check.findings[0].recorded_by", "check.findings[0].status"]
        );
        assert!(
            parsed.warnings.iter().any(|w| w.contains("mood")),
            "{:?}",
            parsed.warnings
        );
    }

    #[test]
    fn a_malformed_answer_is_an_error_a_repair_can_fix() {
        let err = parse_check(
            r#"{"summary": "x", "findings": [{"severity": "HUGE", "what": "a", "where": "b"}]}"#,
        )
        .unwrap_err();
        assert!(err.is_model_output_error(), "{err}");
        assert!(
            parse_plan("no json here")
                .unwrap_err()
                .is_model_output_error()
        );
    }

    #[test]
    fn the_schemas_are_closed_objects_with_their_required_fields() {
        let s = check_schema();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], serde_json::json!(["summary"]));
        assert_eq!(
            s["properties"]["findings"]["items"]["properties"]["severity"]["enum"],
            serde_json::json!(["NIT", "MINOR", "MAJOR", "BLOCKER"])
        );
        assert_eq!(plan_schema()["required"], serde_json::json!(["plan"]));
        assert_eq!(
            intake_schema()["required"],
            serde_json::json!(["objective"])
        );
    }

    #[test]
    fn an_answer_confirming_its_own_fix_closes_nothing() {
        let mut s = ExecutionState::new(RunId("r".into()), "o", &[]);
        let mut out = ReconcileOutcome::default();
        let answer = parse_check(r#"{"summary": "s", "findings": [{"severity": "MAJOR", "what": "buckets leak", "where": "src/limit.rs"}]}"#).unwrap().claim;
        with_turn("glm", "review.breadth", |t| {
            reconcile_check(&mut s, t, &answer, &mut out)
        });
        with_turn("opus", "build.step", |t| {
            reconcile_fixes(
                &mut s,
                t,
                &[FixClaim {
                    finding: "N1".into(),
                    note: None,
                }],
                &mut out,
            )
        });
        let confirm = CheckAnswer {
            summary: "fixed".into(),
            findings: vec![],
            confirmed: vec!["N1".into()],
        };
        with_turn("opus", "checkpoint.confirm", |t| {
            reconcile_check(&mut s, t, &confirm, &mut out)
        });
        assert_eq!(s.findings[0].status, FindingStatus::Open);
        with_turn("gpt", "checkpoint.confirm", |t| {
            reconcile_check(&mut s, t, &confirm, &mut out)
        });
        assert_eq!(s.findings[0].status, FindingStatus::Fixed);
    }

    #[test]
    fn a_revision_claims_fixes_and_a_lead_dismisses() {
        let mut s = ExecutionState::new(RunId("r".into()), "o", &[]);
        let mut out = ReconcileOutcome::default();
        let scrutiny = CheckAnswer {
            summary: "s".into(),
            findings: vec![
                FindingClaim {
                    severity: FindingSeverity::Major,
                    what: "no limit for internal callers".into(),
                    location: "step 1".into(),
                },
                FindingClaim {
                    severity: FindingSeverity::Nit,
                    what: "step names are long".into(),
                    location: "step 2".into(),
                },
            ],
            confirmed: vec![],
        };
        with_turn("glm", "plan.scrutiny", |t| {
            reconcile_check(&mut s, t, &scrutiny, &mut out)
        });
        let raw = r#"{"plan": {"steps": [{"title": "limit every caller", "tags": ["heavy"]}]}, "fixed": [{"finding": "N1"}], "dismissed": [{"finding": "N2", "reason": "names are fine"}]}"#;
        let answer = parse_plan(raw).unwrap().claim;
        let id = with_turn("opus", "lead.plan", |t| {
            reconcile_plan(&mut s, t, &answer, &mut out)
        });
        assert_eq!(id.as_deref(), Some("P1"));
        assert!(s.findings[0].fix_claimed.is_some() && s.findings[0].is_open());
        assert_eq!(s.findings[1].status, FindingStatus::Dismissed);
        assert!(out.refusals.is_empty(), "{out:?}");
    }
}
