use proptest::prelude::*;

use super::*;
use crate::ids::RunId;
use crate::line::test_fixtures::as_seat;
use crate::line::{DraftStep, FindingClaim, FindingSeverity, PlanDraft};
use crate::reconciler::ReconcileOutcome;
use crate::reconciler::line::{
    claim_fixed, confirm_fixed, lock_plan, propose_plan, raise_findings,
};
use crate::tokens::HeuristicEstimator;

fn draft(titles: &[&str]) -> PlanDraft {
    PlanDraft {
        steps: titles
            .iter()
            .map(|t| DraftStep {
                title: t.to_string(),
                tags: vec!["standard".into()],
            })
            .collect(),
        rationale: Some(format!("{} steps", titles.len())),
    }
}

fn finding(severity: FindingSeverity, what: &str, at: &str) -> FindingClaim {
    FindingClaim {
        severity,
        what: what.into(),
        location: at.into(),
    }
}

/// Two blind co-drafts, merged and locked by the lead at turn 3.
fn planned() -> ExecutionState {
    let mut s = ExecutionState::new(RunId("r".into()), "add rate limiting", &[]);
    let mut out = ReconcileOutcome::default();
    as_seat("gpt", "plan.co-draft", "plan", 1, None, |t| {
        propose_plan(
            &mut s,
            t,
            &draft(&["token bucket per API key", "429 with Retry-After"]),
            &[],
            &mut out,
        )
    });
    as_seat("opus", "plan.co-draft", "plan", 1, None, |t| {
        propose_plan(
            &mut s,
            t,
            &draft(&["sliding window in Redis", "load test"]),
            &[],
            &mut out,
        )
    });
    as_seat("opus", "lead.plan", "plan", 2, None, |t| {
        propose_plan(
            &mut s,
            t,
            &draft(&[
                "token bucket per API key",
                "429 with Retry-After",
                "load test",
            ]),
            &["P1".into(), "P2".into()],
            &mut out,
        )
    });
    as_seat("opus", "lead.plan", "plan-loop", 3, None, |t| {
        lock_plan(&mut s, t.ctx, "P3", &mut out)
    });
    assert!(out.refusals.is_empty(), "{out:?}");
    s
}

fn view<'a>(
    kind: StationKind,
    station: &'a str,
    seat: &'a SeatId,
    worker: &'a WorkerId,
    step: Option<&'a str>,
    blind: bool,
) -> LineView<'a> {
    LineView {
        kind,
        station,
        seat,
        worker,
        step,
        blind,
    }
}

#[test]
fn a_blind_co_drafts_briefing_holds_none_of_the_other_draft() {
    let s = planned();
    let seat = SeatId::new("plan.co-draft");
    for (me, mine, theirs) in [
        ("gpt", "token bucket per API key", "sliding window in Redis"),
        (
            "opus",
            "sliding window in Redis",
            "token bucket per API key",
        ),
    ] {
        let me = WorkerId::new(me);
        let b = brief(
            &s,
            &view(StationKind::Plan, "plan", &seat, &me, None, true),
            10_000,
            &HeuristicEstimator,
        );
        assert!(b.text.contains(mine), "{}", b.text);
        assert!(
            !b.text.contains(theirs),
            "{me} saw the other draft:\n{}",
            b.text
        );
        // The lead's merge (P3, by opus as lead.plan) is another lane's output too, even
        // for opus: it holds gpt's draft.
        assert!(!b.text.contains("P3"), "{}", b.text);
        assert_eq!(b.omitted.len(), 2, "{:?}", b.omitted);
        assert!(b.omitted.iter().all(|o| o.reason == OmitReason::Blind));
        assert!(
            b.text.ends_with(
                "## Not shown\n- 2 records by other lanes, withheld: this lane works blind\n"
            ),
            "{}",
            b.text
        );
    }
}

#[test]
fn the_lead_merging_the_drafts_sees_every_draft() {
    let s = planned();
    let (seat, lead) = (SeatId::new("lead.plan"), WorkerId::new("opus"));
    let b = brief(
        &s,
        &view(StationKind::Plan, "plan", &seat, &lead, None, false),
        10_000,
        &HeuristicEstimator,
    );
    assert_eq!(b.shown, ["P1", "P2", "P3"]);
    assert!(b.text.starts_with("## Plan drafts\n### P1 by gpt (plan.co-draft)\n1. [standard] token bucket per API key\n"), "{}", b.text);
    assert!(b.omitted.is_empty());
}

#[test]
fn a_build_step_sees_the_locked_plan_and_its_own_open_findings() {
    let mut s = planned();
    let mut out = ReconcileOutcome::default();
    as_seat("glm", "checkpoint.find", "build", 4, Some("T1"), |t| {
        raise_findings(
            &mut s,
            t,
            &[
                finding(
                    FindingSeverity::Minor,
                    "bucket size is a magic number",
                    "src/limit.rs:12",
                ),
                finding(
                    FindingSeverity::Major,
                    "buckets of expired keys are never freed",
                    "src/limit.rs",
                ),
            ],
            &mut out,
        )
    });
    as_seat("glm", "checkpoint.find", "build", 5, Some("T2"), |t| {
        raise_findings(
            &mut s,
            t,
            &[finding(
                FindingSeverity::Major,
                "Retry-After is in ms, not seconds",
                "src/http.rs",
            )],
            &mut out,
        )
    });
    as_seat("opus", "build.rote-step", "build", 6, Some("T1"), |t| {
        claim_fixed(&mut s, t, "N1", None, &mut out)
    });
    as_seat("gpt", "checkpoint.confirm", "build", 7, Some("T1"), |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    as_seat("opus", "build.hard-step", "build", 8, Some("T1"), |t| {
        claim_fixed(&mut s, t, "N2", None, &mut out)
    });
    assert!(out.refusals.is_empty(), "{out:?}");

    let (seat, me) = (SeatId::new("build.hard-step"), WorkerId::new("opus"));
    let b = brief(
        &s,
        &view(StationKind::Build, "build", &seat, &me, Some("T1"), false),
        10_000,
        &HeuristicEstimator,
    );
    let hash = &s.plan_lock.as_ref().unwrap().content_hash[..12];
    assert_eq!(
        b.text,
        format!(
            "## The locked plan (P3, sha256 {hash})\n1. [standard] token bucket per API key  ← this step\n2. [standard] 429 with Retry-After\n3. [standard] load test\n\n## Open findings\n- N2 MAJOR at src/limit.rs: buckets of expired keys are never freed (raised by glm at checkpoint.find; fix claimed by opus at turn 8, not yet confirmed)\n"
        )
    );
    assert_eq!(b.shown, ["P3 step 1", "P3 step 2", "P3 step 3", "N2"]);
}

#[test]
fn a_fresh_eyes_reviewer_sees_the_plan_and_no_other_reviewers_findings() {
    let mut s = planned();
    let mut out = ReconcileOutcome::default();
    as_seat("glm", "review.breadth", "review", 9, None, |t| {
        raise_findings(
            &mut s,
            t,
            &[finding(
                FindingSeverity::Major,
                "no test covers a burst",
                "tests/",
            )],
            &mut out,
        )
    });
    let (seat, me) = (SeatId::new("review.fresh-eyes"), WorkerId::new("gpt"));
    let blind = brief(
        &s,
        &view(StationKind::Review, "review", &seat, &me, None, true),
        10_000,
        &HeuristicEstimator,
    );
    assert!(blind.text.contains("## The locked plan"));
    assert!(!blind.text.contains("burst"), "{}", blind.text);
    assert_eq!(
        blind.omitted,
        [Omitted {
            item: "N1".into(),
            reason: OmitReason::Blind
        }]
    );
    let deep = SeatId::new("review.deep-rounds");
    let b = brief(
        &s,
        &view(StationKind::Review, "review", &deep, &me, None, false),
        10_000,
        &HeuristicEstimator,
    );
    assert!(
        b.text
            .contains("- N1 MAJOR at tests/: no test covers a burst"),
        "{}",
        b.text
    );
}

#[test]
fn stations_without_line_records_to_show_get_an_empty_block() {
    let s = planned();
    let (seat, me) = (SeatId::new("lead.intake"), WorkerId::new("opus"));
    let b = brief(
        &s,
        &view(StationKind::Intake, "intake", &seat, &me, None, false),
        100,
        &HeuristicEstimator,
    );
    assert_eq!((b.text.as_str(), b.tokens), ("", 0));
}

/// A locked plan and `n` open review findings of mixed severity.
fn with_findings(n: usize) -> ExecutionState {
    let mut s = planned();
    let mut out = ReconcileOutcome::default();
    for i in 0..n {
        let severity = FindingSeverity::ALL[i % 4];
        as_seat(
            "glm",
            "review.breadth",
            "review",
            10 + i as u32,
            None,
            |t| {
                raise_findings(
                    &mut s,
                    t,
                    &[finding(
                        severity,
                        &format!("problem number {i} in module {i}"),
                        &format!("src/m{i}.rs"),
                    )],
                    &mut out,
                )
            },
        );
    }
    s
}

#[test]
fn over_the_budget_the_strictest_findings_stay_and_the_rest_are_reported() {
    let s = with_findings(12);
    let (seat, me) = (SeatId::new("review.deep-rounds"), WorkerId::new("gpt"));
    let v = view(StationKind::Review, "review", &seat, &me, None, false);
    let full = brief(&s, &v, 100_000, &HeuristicEstimator);
    let b = brief(&s, &v, full.tokens / 2, &HeuristicEstimator);
    assert!(b.tokens <= full.tokens / 2);
    assert!(!b.omitted.is_empty());
    assert!(b.omitted.iter().all(|o| o.reason == OmitReason::Budget));
    assert!(b.text.contains("over the budget, from "), "{}", b.text);
    // Strictest first: every BLOCKER shown is before every MAJOR, and none is dropped
    // while a milder one is kept.
    let severity = |id: &str| s.findings.iter().find(|f| f.id == id).map(|f| f.severity);
    let kept: Vec<_> = b.shown.iter().filter_map(|id| severity(id)).collect();
    let dropped: Vec<_> = b.omitted.iter().filter_map(|o| severity(&o.item)).collect();
    if let (Some(least_kept), Some(worst_dropped)) = (kept.iter().min(), dropped.iter().max()) {
        assert!(
            least_kept >= worst_dropped,
            "kept {kept:?}, dropped {dropped:?}"
        );
    }
}

proptest! {
    #[test]
    fn the_block_fits_its_budget_and_reports_every_record_it_leaves_out(
        n in 0usize..30,
        budget in 20usize..1500,
    ) {
        let s = with_findings(n);
        let (seat, me) = (SeatId::new("review.deep-rounds"), WorkerId::new("gpt"));
        let v = view(StationKind::Review, "review", &seat, &me, None, false);
        let b = brief(&s, &v, budget, &HeuristicEstimator);
        prop_assert_eq!(b.tokens, HeuristicEstimator.count(&b.text));
        if !b.over_budget {
            prop_assert!(b.tokens <= budget, "{} > {budget}", b.tokens);
        }
        // Every plan step and open finding is shown or reported, once.
        let mut all: Vec<String> = b.shown.clone();
        all.extend(b.omitted.iter().map(|o| o.item.clone()));
        all.sort();
        let mut expected: Vec<String> = (1..=3).map(|i| format!("P3 step {i}")).collect();
        expected.extend(s.findings.iter().map(|f| f.id.clone()));
        expected.sort();
        prop_assert_eq!(all, expected);
        // Deterministic (invariant 7).
        prop_assert_eq!(brief(&s, &v, budget, &HeuristicEstimator), b);
    }
}
