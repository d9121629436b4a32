//! The briefing compiler: budget, never-drop rules, trimming order, determinism.

use baton_core::compiler::{
    Assignment, AssignmentKind, CAP_DECISIONS, DropReason, DroppedItem, HandoffPackage,
    MIN_KEEP_CHARS, Section, WorkerProfile, compile,
};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{
    AttemptOutcome, CompletedWork, Decision, ExecutionState, HandoffRecord, Issue, IssueStatus,
    Provenance, ResolutionClaim, Severity, StepAttempt,
};
use baton_core::synthetic;

use super::relevance::below_relevance_floor;
use baton_core::tokens::{BpeEstimator, HeuristicEstimator, TokenEstimator};
use proptest::prelude::*;

/// Counts whitespace-separated words: exactly additive over newline-ended pieces, so
/// budget boundaries can be tested to the token.
struct Words;
impl TokenEstimator for Words {
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    fn name(&self) -> &'static str {
        "words"
    }
}

fn bpe() -> BpeEstimator {
    BpeEstimator
}

pub(super) fn worker() -> WorkerProfile {
    WorkerProfile {
        id: WorkerId::new("w9"),
        model: "mock/zeta".into(),
        family: "zeta".into(),
        role: None,
    }
}

pub(super) fn step(id: &str, task: &str) -> Assignment {
    Assignment {
        kind: AssignmentKind::Step,
        step_id: Some(id.into()),
        task: task.into(),
    }
}

fn prov(who: &str, turn: u32) -> Provenance {
    Provenance {
        recorded_by: WorkerId::new(who),
        model: format!("mock/{who}"),
        turn,
        recorded_at: Timestamp(1_767_225_600_000 + i64::from(turn)),
    }
}

fn decision(n: usize, text: &str, turn: u32) -> Decision {
    Decision {
        id: format!("D{n}"),
        text: text.into(),
        reason: None,
        provenance: prov("w1", turn),
        reaffirmed: vec![],
    }
}

fn small_state() -> ExecutionState {
    let mut s = ExecutionState::new(
        RunId("r1".into()),
        "Build a task management API",
        &["Design the schema".into(), "Add project endpoints".into()],
    );
    s.turns = 3;
    s
}

fn report(p: &HandoffPackage, section: Section) -> &baton_core::compiler::SectionReport {
    &p.sections[Section::ALL
        .iter()
        .position(|s| *s == section)
        .expect("every section")]
}

/// The checks every package must pass, whatever the state and budget.
fn check_package(
    p: &HandoffPackage,
    state: &ExecutionState,
    a: &Assignment,
    est: &dyn TokenEstimator,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(p.tokens, est.count(&p.text));
    if p.over_budget {
        prop_assert!(p.tokens > p.budget);
        // Only the irreducible core: nothing from Progress to Next action, no notes
        // beyond warnings, and the task and objective at their shortest.
        for r in &p.sections[2..12] {
            prop_assert_eq!(
                r.items_included,
                0,
                "{:?} in an over-budget package",
                r.section
            );
        }
        let notes = report(p, Section::PreviousWorkerNotes);
        prop_assert!(notes.kept.iter().all(|k| k.item.contains(".warning")));
        for (r, text) in [
            (&p.sections[0], &a.task),
            (&p.sections[1], &state.objective),
        ] {
            prop_assert!(r.shortened || text.chars().count() <= MIN_KEEP_CHARS);
        }
    } else {
        prop_assert!(p.tokens <= p.budget, "{} > {}", p.tokens, p.budget);
    }
    // Task and objective always present, at least their beginning.
    prop_assert!(p.sections[0].included && p.sections[1].included);
    let t = p.text.find("## Assigned task").expect("task heading");
    let o = p.text.find("## Objective").expect("objective heading");
    prop_assert!(t < o);
    let head: String = a.task.chars().take(40).collect();
    prop_assert!(p.text.contains(head.trim_end()), "task start missing");
    let head: String = state.objective.chars().take(40).collect();
    prop_assert!(p.text.contains(head.trim_end()), "objective start missing");

    // Reports: all 13 in order, counts add up, omissions listed.
    let order: Vec<Section> = p.sections.iter().map(|r| r.section).collect();
    prop_assert_eq!(order, Section::ALL.to_vec());
    for r in &p.sections[2..] {
        let dropped: usize = p
            .dropped
            .iter()
            .filter(|d| d.section == r.section)
            .map(|d| d.count as usize)
            .sum();
        prop_assert_eq!(
            r.items_included + dropped,
            r.items_available,
            "{:?}",
            r.section
        );
        prop_assert_eq!(r.kept.len(), r.items_included);
        prop_assert_eq!(r.included, r.items_included > 0);
        let omitted = p.omitted_sections.contains(&r.section);
        prop_assert_eq!(
            omitted,
            r.items_available > 0 && !r.included,
            "{:?}",
            r.section
        );
        // Trimming removes the least relevant first (a record below the relevance floor
        // was never a candidate: it may outrank one that was kept).
        if let Some(min_kept) = r.kept.iter().map(|k| k.score).min() {
            let trimmed = |d: &&DroppedItem| {
                d.section == r.section && matches!(d.reason, DropReason::Budget | DropReason::Cap)
            };
            for d in p.dropped.iter().filter(trimmed) {
                prop_assert!(
                    d.score <= min_kept,
                    "{:?}: dropped {} ({}) outranks a kept item ({})",
                    r.section,
                    d.item,
                    d.score,
                    min_kept
                );
            }
        }
        // Kept record ids are shown; ids dropped from id-led lines are not.
        for k in &r.kept {
            if k.item.starts_with(|c: char| c.is_ascii_uppercase()) && !k.item.contains('.') {
                prop_assert!(p.text.contains(&k.item), "kept {} not in text", k.item);
            }
        }
        if matches!(r.section, Section::Decisions | Section::FailedAttempts) {
            for d in p.dropped.iter().filter(|d| d.section == r.section) {
                let line = format!("- {}:", d.item);
                prop_assert!(!p.text.contains(&line), "dropped {} in text", d.item);
            }
        }
    }
    for d in p
        .dropped
        .iter()
        .filter(|d| d.reason == DropReason::NotRelevant)
    {
        prop_assert!(below_relevance_floor(d, state), "{d:?} is relevant");
    }
    // The predecessor's warnings always arrive (their first words at least).
    if let Some(h) = state.handoffs.last()
        && !h.warnings.is_empty()
    {
        for w in h.warnings.iter().take(baton_core::compiler::FLOOR_WARNINGS) {
            let first: Vec<&str> = w.split_whitespace().take(3).collect();
            let line = format!("- WARNING: {}", first.join(" "));
            prop_assert!(p.text.contains(&line), "warning {:?} missing", w);
        }
    }
    // No wall-clock time in the text (determinism; turns are the clock).
    prop_assert!(!p.text.contains("2026-"));
    Ok(())
}

fn arb_case() -> impl Strategy<Value = (ExecutionState, Assignment, usize)> {
    (
        0usize..300,
        any::<u64>(),
        0usize..4,
        prop::collection::vec("[a-z]{2,9}( [a-z]{2,9}){0,14}", 0..5),
        50usize..4000,
        any::<bool>(),
    )
        .prop_map(|(n, seed, task_kind, warnings, budget, continuation)| {
            let mut s = synthetic::state_with_items(n, seed);
            if let Some(h) = s.handoffs.last_mut() {
                h.warnings = warnings
                    .into_iter()
                    .map(|w| format!("Do not assume {w}"))
                    .collect();
            }
            let task = match task_kind {
                0 => "Add cursor pagination to the tasks list endpoint".to_string(),
                1 => "Fix the open issues about refresh tokens and rate limits".to_string(),
                2 => "Implement the projects endpoints. ".repeat(40),
                _ => format!("Rewrite everything {}", "and then some more ".repeat(2000)),
            };
            let a = if continuation {
                Assignment {
                    kind: AssignmentKind::Continuation,
                    step_id: None,
                    task,
                }
            } else {
                let id = format!("T{}", 1 + seed % 6);
                Assignment {
                    kind: AssignmentKind::Step,
                    step_id: Some(id),
                    task,
                }
            };
            (s, a, budget)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn heuristic_packages_keep_every_rule((state, a, budget) in arb_case()) {
        let p = compile(&state, &a, &worker(), budget, &HeuristicEstimator);
        check_package(&p, &state, &a, &HeuristicEstimator)?;
        let again = compile(&state.clone(), &a.clone(), &worker(), budget, &HeuristicEstimator);
        prop_assert_eq!(p, again);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn bpe_packages_keep_every_rule((state, a, budget) in arb_case()) {
        let est = bpe();
        let p = compile(&state, &a, &worker(), budget, &est);
        check_package(&p, &state, &a, &est)?;
        prop_assert_eq!(p, compile(&state.clone(), &a, &worker(), budget, &est));
    }
}

#[test]
fn budget_boundaries_are_exact() {
    let state = synthetic::demo_sized_state();
    let a = step("T4", "Add CRUD endpoints for projects");
    let full = compile(&state, &a, &worker(), 1_000_000, &Words);
    // All that is left out of an unbounded briefing is below the relevance floor, or
    // plan steps counted in a range.
    let on_purpose =
        |d: &DroppedItem| matches!(d.reason, DropReason::NotRelevant | DropReason::Summarized);
    assert!(full.dropped.iter().all(on_purpose), "{:?}", full.dropped);

    // Exactly the full size: everything fits.
    let at = compile(&state, &a, &worker(), full.tokens, &Words);
    assert_eq!(at.text, full.text);
    assert_eq!(at.dropped, full.dropped);

    // One token less: exactly something goes, and it is a least relevant item.
    let below = compile(&state, &a, &worker(), full.tokens - 1, &Words);
    assert!(below.tokens < full.tokens);
    assert!(!below.over_budget);
    assert!(below.dropped.iter().any(|d| d.reason == DropReason::Budget));

    // The core alone: header, task, objective and the warnings' floor.
    let core = compile(&state, &a, &worker(), 0, &Words);
    assert!(core.over_budget || core.tokens == 0);
    let needed = {
        let mut b = 1;
        loop {
            let p = compile(&state, &a, &worker(), b, &Words);
            if !p.over_budget && !p.sections[1].shortened {
                break b;
            }
            b += 1;
        }
    };
    let p = compile(&state, &a, &worker(), needed, &Words);
    assert!(p.tokens <= needed);
    let p = compile(&state, &a, &worker(), needed - 1, &Words);
    assert!(p.sections[1].shortened || p.over_budget);
    assert!(p.text.contains("… [shortened to fit budget]") || p.over_budget);
}

#[test]
fn huge_task_is_shortened_not_dropped() {
    let state = synthetic::state_with_items(500, 3);
    let task = format!(
        "Implement the projects endpoints {}",
        "with careful validation of every field ".repeat(5000)
    );
    let a = step("T2", &task);
    for est in [&HeuristicEstimator as &dyn TokenEstimator, &bpe()] {
        let p = compile(&state, &a, &worker(), 600, est);
        assert!(!p.over_budget);
        assert!(p.tokens <= 600, "{}", p.tokens);
        assert!(p.sections[0].included && p.sections[0].shortened);
        assert!(!p.sections[1].shortened, "objective is short: kept whole");
        assert!(
            p.text
                .contains("Step T2: Implement the projects endpoints with careful")
        );
        assert!(p.text.contains("… [shortened to fit budget]"));
        assert!(p.text.contains(&state.objective));
    }
}

#[test]
fn resolution_claimed_issue_renders_as_not_verified_and_open() {
    let mut s = small_state();
    s.issues.push(Issue {
        id: "I1".into(),
        title: "Pagination cursor breaks on malformed input".into(),
        detail: String::new(),
        severity: Severity::High,
        status: IssueStatus::Open,
        provenance: prov("w1", 1),
        resolution_claimed_by: Some(ResolutionClaim {
            by: WorkerId::new("w3"),
            turn: 2,
            at: Timestamp(5),
            note: Some("fixed".into()),
        }),
        verified_by: None,
        gate: None,
        reaffirmed: vec![],
    });
    let mut resolved = s.issues[0].clone();
    resolved.id = "I2".into();
    resolved.status = IssueStatus::Resolved;
    resolved.verified_by = Some("gate:tests".into());
    s.issues.push(resolved);
    let p = compile(&s, &step("T2", "x"), &worker(), 2000, &HeuristicEstimator);
    assert!(p.text.contains(
        "- I1 [high] Pagination cursor breaks on malformed input (raised by w1, turn 1) — \
         resolution claimed by w3 at turn 2 — NOT verified, still open"
    ));
    assert!(
        !p.text.contains("- I2 ["),
        "resolved issues are not unresolved"
    );
    assert_eq!(report(&p, Section::UnresolvedIssues).items_available, 1);
}

#[test]
fn compilation_is_deterministic_across_clones() {
    let state = synthetic::state_with_items(2000, 11);
    let a = step(
        "T3",
        "Implement token authentication with refresh token rotation",
    );
    for est in [&HeuristicEstimator as &dyn TokenEstimator, &bpe()] {
        let one = compile(&state, &a, &worker(), 1500, est);
        let two = compile(&state.clone(), &a.clone(), &worker(), 1500, est);
        assert_eq!(one, two);
        assert_eq!(
            serde_json::to_string(&one).expect("serialises"),
            serde_json::to_string(&two).expect("serialises")
        );
    }
}

#[test]
fn relevant_old_decision_beats_newer_unrelated_one_under_pressure() {
    let mut s = small_state();
    s.turns = 40;
    s.decisions
        .push(decision(1, "Founding: monorepo layout", 0));
    s.decisions.push(decision(2, "Founding: MIT licence", 0));
    s.decisions.push(decision(
        3,
        "Paginate list endpoints with opaque cursors",
        2,
    ));
    for n in 4..=12 {
        s.decisions.push(decision(
            n,
            &format!("Colour scheme variant {n} for docs site"),
            39,
        ));
    }
    let a = step("T2", "Add cursor pagination to the list endpoints");
    let full = compile(&s, &a, &worker(), 100_000, &Words);
    let decisions_tokens = report(&full, Section::Decisions).tokens;
    // Room for the heading and about four decisions.
    let budget = full.tokens - decisions_tokens + decisions_tokens / 3;
    let p = compile(&s, &a, &worker(), budget, &Words);
    let kept: Vec<&str> = report(&p, Section::Decisions)
        .kept
        .iter()
        .map(|k| k.item.as_str())
        .collect();
    // Anchors first, then relevance beats recency; shown in record order.
    assert_eq!(&kept[..3], ["D1", "D2", "D3"], "{kept:?}");
    assert!(kept.len() < 12);
    let dropped_newest = p.dropped.iter().any(|d| d.item == "D12");
    assert!(
        dropped_newest,
        "trimming drops irrelevant items, even the newest"
    );
}

#[test]
fn caps_drop_the_lowest_ranked_and_anchor_the_founding_records() {
    let mut s = small_state();
    s.turns = 60;
    for n in 1..=50 {
        s.decisions.push(decision(
            n,
            &format!("Unrelated choice number {n}"),
            n as u32,
        ));
    }
    let p = compile(
        &s,
        &step("T1", "Design the schema"),
        &worker(),
        100_000,
        &HeuristicEstimator,
    );
    let r = report(&p, Section::Decisions);
    assert_eq!(r.items_included, CAP_DECISIONS);
    // Cap drops come as runs of consecutive records: expand them to ids.
    let mut capped: Vec<String> = Vec::new();
    for d in p.dropped.iter().filter(|d| d.reason == DropReason::Cap) {
        let first: u32 = d.item[1..].parse().unwrap();
        let last: u32 = d
            .through
            .as_deref()
            .map_or(first, |t| t[1..].parse().unwrap());
        assert_eq!(last - first + 1, d.count);
        capped.extend((first..=last).map(|n| format!("D{n}")));
    }
    let capped: Vec<&str> = capped.iter().map(String::as_str).collect();
    assert_eq!(capped.len(), 50 - CAP_DECISIONS);
    assert!(
        !capped.contains(&"D1") && !capped.contains(&"D2"),
        "anchors kept"
    );
    assert!(!capped.contains(&"D50"), "recent kept");
    assert!(capped.contains(&"D3"));
    // Shown in record order.
    let shown: Vec<&str> = r.kept.iter().map(|k| k.item.as_str()).collect();
    assert_eq!(&shown[..3], ["D1", "D2", "D41"]);
}

#[test]
fn warnings_reach_the_next_worker_with_a_tight_budget_and_a_large_record() {
    let mut s = synthetic::state_with_items(5000, 9);
    s.handoffs.push(HandoffRecord {
        id: "H999".into(),
        notes: "Long notes ".repeat(500),
        warnings: vec![
            "Do not assume the migration ran on staging; nobody checked it".into(),
            "Do not assume I3 is fixed: the claim was never verified".into(),
        ],
        engine_warnings: vec![],
        provenance: prov("w4", 600),
    });
    for est in [&HeuristicEstimator as &dyn TokenEstimator, &bpe()] {
        let p = compile(
            &s,
            &step("T2", "Add project endpoints"),
            &worker(),
            160,
            est,
        );
        assert!(!p.over_budget, "{}", p.text);
        assert!(
            p.text
                .contains("- WARNING: Do not assume the migration ran")
        );
        assert!(p.text.contains("- WARNING: Do not assume I3 is fixed"));
        assert!(p.dropped.iter().any(|d| d.item == "H999.notes"));
    }
}

#[test]
fn step_attempted_before_shows_its_recorded_work() {
    let mut s = small_state();
    s.completed.push(CompletedWork {
        id: "C1".into(),
        text: "Drafted the projects table".into(),
        step: Some("T2".into()),
        provenance: prov("w2", 1),
        reaffirmed: vec![],
    });
    s.completed.push(CompletedWork {
        id: "C2".into(),
        text: "Wrote the schema of the project endpoints".into(),
        step: Some("T1".into()),
        provenance: prov("w1", 0),
        reaffirmed: vec![],
    });
    let p = compile(
        &s,
        &step("T2", "Add project endpoints"),
        &worker(),
        4000,
        &Words,
    );
    let cts = &p.text[p.text.find("## Current task state").expect("section")..];
    assert!(cts.contains("attempted before"));
    assert!(cts.contains("- C1: Drafted the projects table (by w2, turn 1)"));
    let completed = &p.text[p.text.find("## Completed work").expect("section")..];
    assert!(completed.contains("C2") && !completed.contains("C1"));

    let p = compile(
        &s,
        &step("T1", "Design the schema"),
        &worker(),
        4000,
        &Words,
    );
    assert!(p.text.contains("first attempt") || p.text.contains("attempted before"));
}

/// Regression (issue 9, item 4): the briefing of a step whose earlier turns failed said
/// "this is its first attempt". It says which attempt this is and what happened to the
/// last three, one line each, with the older ones counted.
#[test]
fn a_retried_step_says_which_attempt_it_is_and_what_happened_before() {
    let mut s = synthetic::state_with_items(400, 7);
    let id = s.plan[s.cursor().unwrap()].id.clone();
    let title = s.plan[s.cursor().unwrap()].title.clone();
    let long = format!(
        "execute call failed: bad_request: Invalid value for 'temperature': must be at most 2. {}",
        "Provider context that goes on and on. ".repeat(30)
    );
    let attempts = [
        (AttemptOutcome::Failed, "execute call failed: rate_limited: slow down".to_string()),
        (AttemptOutcome::Failed, "execute output rejected: missing field `summary`".to_string()),
        (
            AttemptOutcome::NoEvidence,
            "no completed work, new artifact or new decision; said \"I could not do it\"; raised I4"
                .to_string(),
        ),
        (AttemptOutcome::Failed, long),
        (AttemptOutcome::NoEvidence, "no completed work; said \"nothing was done\"".to_string()),
    ];
    let cursor = s.cursor().unwrap();
    for (n, (outcome, detail)) in attempts.into_iter().enumerate() {
        s.plan[cursor].attempts.push(StepAttempt {
            turn: 40 + n as u32,
            worker: WorkerId::new(format!("w{n}")),
            outcome,
            detail,
        });
    }
    let a = step(&id, &title);
    let p = compile(&s, &a, &worker(), 1600, &HeuristicEstimator);
    let cts = &p.text[p.text.find("## Current task state").expect("section")..];
    let cts = &cts[..cts[3..].find("\n## ").map_or(cts.len(), |e| e + 3)];
    assert!(!cts.contains("first attempt"), "{cts}");
    assert!(cts.contains("This is attempt 6 of this step"), "{cts}");
    // The last three, oldest first, after a count of the two before them.
    let older = cts.find(
        "- 2 earlier attempt(s) not shown (turns 40–41: 2 failed, 0 without evidence of work)",
    );
    let third = cts.find("- turn 42 (w2): no evidence of work — ");
    let fourth = cts.find(
        "- turn 43 (w3): failed — execute call failed: bad_request: Invalid value for \
         'temperature': must be at most 2.",
    );
    let fifth = cts.find("- turn 44 (w4): no evidence of work — ");
    assert!(
        older.is_some() && third.is_some() && fourth.is_some() && fifth.is_some(),
        "{cts}"
    );
    assert!(older < third && third < fourth && fourth < fifth, "{cts}");
    assert!(
        !cts.contains("turn 40 (w0)") && !cts.contains("turn 41 (w1)"),
        "{cts}"
    );
    // One line each: a long error is shortened, its actionable head kept.
    for line in cts.lines().filter(|l| l.starts_with("- turn ")) {
        assert!(line.chars().count() < 220, "{line}");
    }
    assert!(p.tokens <= p.budget);

    // Within the budget, the section trims the completed work first, then the oldest
    // attempt line: whatever is kept, the step line and the latest attempt are.
    let mut trimmed = 0;
    for budget in (300..900).step_by(20) {
        let t = compile(&s, &a, &worker(), budget, &HeuristicEstimator);
        assert!(t.tokens <= t.budget, "{} > {}", t.tokens, t.budget);
        let Some(at) = t.text.find("## Current task state") else {
            continue;
        };
        let c = &t.text[at..];
        let c = &c[..c[3..].find("\n## ").map_or(c.len(), |e| e + 3)];
        let has = |turn: u32| c.contains(&format!("- turn {turn} ("));
        assert!(c.contains("This is attempt 6 of this step"), "{c}");
        assert!(!has(42) || has(43), "{c}");
        assert!(!has(43) || has(44), "{c}");
        assert!(!c.contains("not shown") || has(42), "{c}");
        trimmed += usize::from(!has(42));
    }
    assert!(trimmed > 0, "some budget trims the attempt lines");

    // Same state, same package.
    assert_eq!(
        compile(&s, &a, &worker(), 1600, &HeuristicEstimator).text,
        p.text
    );
}

#[test]
fn continuation_reports_plan_and_open_issues() {
    let s = synthetic::state_with_items(200, 5);
    let open = s.open_issues().count();
    let a = Assignment {
        kind: AssignmentKind::Continuation,
        step_id: None,
        task: "Close the remaining open issues".into(),
    };
    let p = compile(&s, &a, &worker(), 4000, &HeuristicEstimator);
    assert!(p.text.contains(&format!("Open issues: {open} (")));
    assert!(p.text.contains("plan steps"));
}

#[test]
fn empty_state_renders_only_what_exists() {
    let s = small_state();
    let p = compile(
        &s,
        &step("T1", "Design the schema"),
        &worker(),
        4000,
        &HeuristicEstimator,
    );
    assert!(p.omitted_sections.is_empty() && p.dropped.is_empty());
    assert!(!p.text.contains("## Decisions"));
    assert!(p.text.contains("## Progress (0 of 2 steps done)"));
    assert!(!report(&p, Section::Decisions).included);
}

#[test]
fn demo_package_snapshot() {
    let s = synthetic::demo_sized_state();
    let a = step("T4", "Add CRUD endpoints for projects");
    insta::assert_snapshot!(
        "demo_full",
        compile(&s, &a, &worker(), 4000, &HeuristicEstimator).text
    );
    insta::assert_snapshot!(
        "demo_tight",
        compile(&s, &a, &worker(), 450, &HeuristicEstimator).text
    );
}

/// The scoring cache is derived data: a warm state and a freshly decoded copy of it
/// must compile to the same package, including after the reconciler changed a scored
/// text (a reason supplied later, a new artifact version).
#[test]
fn memoised_scores_never_change_a_package() {
    use baton_core::claims::{ArtifactClaim, DecisionClaim, HandoffReport, WorkerResult};
    use baton_core::reconciler::{NoVerifier, TurnContext, reconcile};

    let mut state = synthetic::state_with_items(400, 11);
    let a = step("T1", "Design the schema and the authentication tokens");
    let warm = compile(&state, &a, &worker(), 1500, &HeuristicEstimator);
    let cold_state: ExecutionState =
        serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
    assert_eq!(
        warm,
        compile(&cold_state, &a, &worker(), 1500, &HeuristicEstimator)
    );

    // Change scored texts of existing records through the reconciler.
    let d = state.decisions.iter().position(|d| d.reason.is_none());
    let result = WorkerResult {
        summary: "s".into(),
        last_action: "x".into(),
        decisions: d
            .map(|i| DecisionClaim {
                text: state.decisions[i].text.clone(),
                reason: Some("schema authentication tokens rotation design".into()),
            })
            .into_iter()
            .collect(),
        artifacts: vec![ArtifactClaim {
            name: state.artifacts[0].name.clone(),
            kind: None,
            description: "the schema of authentication tokens, redesigned".into(),
            content: None,
        }],
        ..WorkerResult::default()
    };
    let report = HandoffReport {
        notes: "n".into(),
        last_action: "x".into(),
        next_action: "y".into(),
        ..HandoffReport::default()
    };
    let w = worker();
    let ctx = TurnContext {
        worker: &w,
        turn: state.turns,
        at: Timestamp(1),
        assignment: &a,
        seen: Default::default(),
    };
    reconcile(&mut state, &ctx, &result, &report, Vec::new(), &NoVerifier);
    let warm = compile(&state, &a, &worker(), 1500, &HeuristicEstimator);
    let cold_state: ExecutionState =
        serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
    assert_eq!(
        warm,
        compile(&cold_state, &a, &worker(), 1500, &HeuristicEstimator)
    );
}

/// A record is scored by a scan of its text the first time and through its term set
/// when a later assignment scores it again: every path gives the package a freshly
/// decoded state gets, whichever assignment came before.
#[test]
fn scores_do_not_depend_on_the_assignments_compiled_before() {
    let state = synthetic::state_with_items(600, 5);
    let assignments = [
        step("T1", "Design the schema and the authentication tokens"),
        step("T2", "Implement token rotation for the refresh endpoint"),
        Assignment {
            kind: AssignmentKind::Continuation,
            step_id: None,
            task: "Résumé: close the open issues on the schema".into(),
        },
    ];
    for a in assignments
        .iter()
        .chain(&assignments)
        .chain(assignments.iter().rev())
    {
        let fresh: ExecutionState =
            serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
        assert_eq!(
            compile(&state, a, &worker(), 1500, &bpe()),
            compile(&fresh, a, &worker(), 1500, &bpe()),
            "{}",
            a.task
        );
    }
}

/// Issue 9 item 5: a warning cut to its first eight words lost what it asked for
/// ("… so run the migrations gate before trusting any endpoint test").
#[test]
fn a_shortened_warning_keeps_what_it_asks_the_next_worker_to_do() {
    let mut s = synthetic::state_with_items(2000, 3);
    s.handoffs.push(HandoffRecord {
        id: "H999".into(),
        notes: "Notes.".into(),
        warnings: vec![
            "The staging database was restored from an old backup during turn 40 and the \
             migrations were never applied there, so run the migrations gate before \
             trusting any endpoint test"
                .into(),
        ],
        provenance: prov("w4", 300),
        engine_warnings: Vec::new(),
    });
    for est in [&HeuristicEstimator as &dyn TokenEstimator, &bpe()] {
        let p = compile(
            &s,
            &step("T2", "Add project endpoints"),
            &worker(),
            130,
            est,
        );
        assert!(
            p.text
                .contains("run the migrations gate before trusting any endpoint test"),
            "{}",
            p.text
        );
        assert!(p.text.contains("- WARNING: The staging database was"));
    }
}
