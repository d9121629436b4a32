//! What a briefing leaves out on purpose (issue 9, cost): the budget is a ceiling, not a
//! target. A long plan costs a few lines; completed work, artifacts, assumptions, low
//! and medium issues and later failed attempts arrive only when recent or on the task's
//! own terms; a decision off the task arrives without its reason. Each test failed on
//! the compiler that filled every briefing to its budget.

use baton_core::compiler::{
    DropReason, DroppedItem, HandoffPackage, RECENT_TURNS, Section, compile,
};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{
    CompletedWork, Decision, ExecutionState, FailedAttempt, HandoffRecord, Issue, IssueStatus,
    Provenance, Severity, StepStatus,
};
use baton_core::tokens::{BpeEstimator, TokenEstimator};

use super::compiler::{step, worker};

fn prov(turn: u32) -> Provenance {
    Provenance {
        recorded_by: WorkerId::new(format!("w{}", turn % 5 + 1)),
        model: "mock/m".into(),
        turn,
        recorded_at: Timestamp(1_767_225_600_000 + i64::from(turn)),
    }
}

/// A run of `steps` steps whose first `done` are done, at turn `done`.
fn plan_state(steps: usize, done: usize) -> ExecutionState {
    let titles: Vec<String> = (1..=steps)
        .map(|n| format!("Refine part {n} of the plan and record what changed"))
        .collect();
    let mut s = ExecutionState::new(RunId("r".into()), "Plan a task API", &titles);
    for (n, step) in s.plan.iter_mut().enumerate().take(done) {
        step.status = StepStatus::Done;
        step.done_by = Some(WorkerId::new("w1"));
        step.done_at_turn = Some(n as u32);
    }
    s.turns = done as u32;
    s
}

fn section<'p>(p: &'p HandoffPackage, title: &str) -> &'p str {
    let Some(start) = p.text.find(&format!("## {title}")) else {
        return "";
    };
    let rest = &p.text[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

fn dropped(p: &HandoffPackage, reason: DropReason) -> Vec<String> {
    p.dropped
        .iter()
        .filter(|d| d.reason == reason)
        .map(|d| d.label())
        .collect()
}

/// Regression (issue 9, cost): at turn 40 of 60 the Progress section listed 40 plan
/// lines, done ones included, about 1,000 tokens that said nothing the counts do not.
#[test]
fn a_long_plan_costs_a_few_lines_not_one_per_step() {
    let s = plan_state(60, 40);
    let p = compile(
        &s,
        &step("T41", "Refine part 41 of the plan"),
        &worker(),
        100_000,
        &BpeEstimator,
    );
    let progress = section(&p, "Progress");
    assert_eq!(
        progress,
        "## Progress (40 of 60 steps done)\n\
         - [x] T1–T40 done\n\
         - [ ] T41 ← your step\n\
         - [ ] T42 Refine part 42 of the plan and record what changed\n\
         - [ ] T43–T60 pending\n"
    );
    // Every step is accounted for: on a line of its own or in a range.
    assert_eq!(dropped(&p, DropReason::Summarized), ["T1–T40", "T43–T60"]);
    assert!(BpeEstimator.count(progress) < 60, "{progress}");
}

#[test]
fn a_step_left_open_behind_the_assigned_one_keeps_its_own_line() {
    let mut s = plan_state(12, 9);
    s.plan[4].status = StepStatus::Pending;
    let p = compile(
        &s,
        &step("T10", "Refine part 10 of the plan"),
        &worker(),
        100_000,
        &BpeEstimator,
    );
    let progress = section(&p, "Progress");
    assert!(
        progress.contains("- [x] T1–T4, T6–T9 done (8 steps)\n"),
        "{progress}"
    );
    assert!(
        progress.contains("- [ ] T5 Refine part 5 of the plan"),
        "{progress}"
    );
    assert!(progress.contains("- [ ] T11 Refine part 11"), "{progress}");
    assert!(progress.contains("- [ ] T12 pending\n"), "{progress}");
}

fn completed(n: usize, step: &str, text: &str, turn: u32) -> CompletedWork {
    CompletedWork {
        id: format!("C{n}"),
        text: text.into(),
        step: Some(step.into()),
        provenance: prov(turn),
        reaffirmed: vec![],
    }
}

/// Regression (issue 9, cost): every briefing was filled to its budget with completed
/// work of unrelated earlier steps, whatever its relevance.
#[test]
fn completed_work_of_other_steps_arrives_only_when_recent_or_on_the_task() {
    let mut s = plan_state(30, 25);
    for n in 1..=20 {
        s.completed.push(completed(
            n,
            &format!("T{n}"),
            &format!("Wrote up the colour scheme variant {n} of the docs site"),
            n as u32,
        ));
    }
    s.completed.push(completed(
        21,
        "T3",
        "Drafted cursor pagination for the list endpoints",
        3,
    ));
    s.completed
        .push(completed(22, "T25", "Wrote the OpenAPI file", 24));
    let a = step("T26", "Add cursor pagination to the list endpoints");
    let p = compile(&s, &a, &worker(), 100_000, &BpeEstimator);
    let work = section(&p, "Completed work");
    assert!(
        work.contains("- C21 [T3]: Drafted cursor pagination"),
        "{work}"
    );
    assert!(
        work.contains("- C22 [T25]: Wrote the OpenAPI file"),
        "{work}"
    );
    assert_eq!(work.lines().count(), 3, "{work}");
    assert_eq!(dropped(&p, DropReason::NotRelevant), ["C1–C20"]);
    // A ceiling, not a target: nothing was trimmed for the budget.
    assert!(p.tokens < 400, "{}", p.tokens);
    assert!(dropped(&p, DropReason::Budget).is_empty());
}

/// A term that every record shares (a plan of "Refine part N of the plan" steps) does
/// not make a record relevant.
#[test]
fn terms_every_record_shares_do_not_make_one_relevant() {
    let mut s = plan_state(30, 25);
    for n in 1..=20 {
        s.completed.push(completed(
            n,
            &format!("T{n}"),
            &format!("Wrote up part {n} of the plan"),
            n as u32,
        ));
    }
    let p = compile(
        &s,
        &step("T26", "Refine part 26 of the plan"),
        &worker(),
        100_000,
        &BpeEstimator,
    );
    assert_eq!(section(&p, "Completed work"), "");
    assert_eq!(dropped(&p, DropReason::NotRelevant), ["C1–C20"]);
    assert_eq!(p.omitted_sections, [Section::CompletedWork]);
}

fn issue(n: usize, title: &str, severity: Severity, turn: u32) -> Issue {
    Issue {
        id: format!("I{n}"),
        title: title.into(),
        detail: String::new(),
        severity,
        status: IssueStatus::Open,
        provenance: prov(turn),
        resolution_claimed_by: None,
        verified_by: None,
        gate: None,
        reaffirmed: vec![],
    }
}

fn failed(n: usize, what: &str, turn: u32) -> FailedAttempt {
    FailedAttempt {
        id: format!("F{n}"),
        what: what.into(),
        why: "it did not work".into(),
        provenance: prov(turn),
        reaffirmed: vec![],
    }
}

#[test]
fn high_issues_and_the_first_dead_ends_always_arrive_the_rest_when_relevant() {
    let mut s = plan_state(30, 25);
    s.issues = vec![
        issue(1, "The docs site has no dark mode", Severity::Low, 2),
        issue(2, "Tokens are never revoked", Severity::High, 3),
        issue(
            3,
            "Cursor pagination skips rows on ties",
            Severity::Medium,
            4,
        ),
        issue(4, "The changelog is out of date", Severity::Medium, 24),
    ];
    s.failed_attempts = vec![
        failed(1, "A GraphQL schema", 0),
        failed(2, "An ENUM status type", 1),
        failed(3, "Colour scheme variants for the docs site", 5),
        failed(4, "Offset pagination of the list endpoints", 6),
    ];
    let a = step("T26", "Add cursor pagination to the list endpoints");
    let p = compile(&s, &a, &worker(), 100_000, &BpeEstimator);
    let issues = section(&p, "Unresolved issues");
    for id in ["I2 [high]", "I3 [medium]", "I4 [medium]"] {
        assert!(issues.contains(id), "{id}: {issues}");
    }
    let failures = section(&p, "Failed attempts");
    for id in ["F1:", "F2:", "F4:"] {
        assert!(failures.contains(id), "{id}: {failures}");
    }
    assert_eq!(dropped(&p, DropReason::NotRelevant), ["I1", "F3"]);
}

fn decision(n: usize, text: &str, reason: &str, turn: u32) -> Decision {
    Decision {
        id: format!("D{n}"),
        text: text.into(),
        reason: Some(reason.into()),
        provenance: prov(turn),
        reaffirmed: vec![],
    }
}

/// Every decision in force binds the next worker, so none is left out for relevance;
/// one that bears on neither the task nor the last turn comes without its reason.
#[test]
fn a_decision_off_the_task_arrives_without_its_reason() {
    let mut s = plan_state(30, 25);
    s.decisions = vec![
        decision(1, "Use PostgreSQL 16", "the objective names it", 0),
        decision(
            2,
            "Version the API under /api/v1",
            "clients keep working",
            0,
        ),
        decision(3, "Use a dark theme for the docs site", "users asked", 5),
        decision(
            4,
            "Paginate list endpoints with cursors",
            "offsets skip rows",
            6,
        ),
        decision(5, "Reverse D3: use a light theme", "contrast", 7),
        decision(6, "Log in JSON", "the collector parses it", 24),
    ];
    let a = step("T26", "Add cursor pagination to the list endpoints");
    let p = compile(&s, &a, &worker(), 100_000, &BpeEstimator);
    let decisions = section(&p, "Decisions");
    assert!(
        decisions.contains("- D3: Use a dark theme for the docs site\n"),
        "{decisions}"
    );
    for reason in [
        "because the objective names it",
        "because clients keep working",
        "because offsets skip rows",
        "because contrast",
        "because the collector parses it",
    ] {
        assert!(decisions.contains(reason), "{reason}: {decisions}");
    }
    assert!(
        p.dropped.iter().all(|d| d.section != Section::Decisions),
        "{:?}",
        p.dropped
    );
}

/// What does not bear on the task is the last thing a briefing grows: a decision off the
/// task, in its short form, gives way to the predecessor's notes in full.
#[test]
fn decisions_off_the_task_give_way_to_the_predecessors_notes() {
    let mut s = plan_state(30, 25);
    for n in 1..=8 {
        s.decisions.push(decision(
            n,
            &format!("Use colour scheme variant {n} for the docs site"),
            "the designers asked",
            n as u32,
        ));
    }
    let notes = "Read the pagination notes first: ".repeat(12);
    s.handoffs.push(HandoffRecord {
        id: "H25".into(),
        notes: notes.clone(),
        warnings: Vec::new(),
        engine_warnings: Vec::new(),
        provenance: prov(24),
    });
    let a = step("T26", "Add cursor pagination to the list endpoints");
    let full = compile(&s, &a, &worker(), 100_000, &BpeEstimator);
    assert!(full.text.contains(notes.trim_end()));
    let p = compile(&s, &a, &worker(), full.tokens - 1, &BpeEstimator);
    assert!(p.text.contains(notes.trim_end()), "{}", p.text);
    let trimmed = dropped(&p, DropReason::Budget);
    assert!(trimmed.iter().any(|d| d.starts_with('D')), "{trimmed:?}");
    // The founding decisions, anchored, stay.
    assert!(section(&p, "Decisions").contains("- D1: "));
}

/// True when every record of `d` is one the relevance floor may leave out: completed
/// work, an artifact, an assumption, a low or medium issue or a failed attempt (not one
/// of the first) that was recorded before the last `RECENT_TURNS` turns.
pub(super) fn below_relevance_floor(d: &DroppedItem, state: &ExecutionState) -> bool {
    fn span<T>(records: &[T], id: impl Fn(&T) -> &str, d: &DroppedItem) -> Vec<usize> {
        let at = |want: &str| records.iter().position(|r| id(r) == want);
        match (at(&d.item), at(d.through.as_deref().unwrap_or(&d.item))) {
            (Some(first), Some(last)) if last - first + 1 == d.count as usize => {
                (first..=last).collect()
            }
            _ => Vec::new(),
        }
    }
    let old = |turn: u32| turn + RECENT_TURNS < state.turns;
    let s = state;
    let ok = |span: Vec<usize>, each: &dyn Fn(usize) -> bool| {
        !span.is_empty() && span.into_iter().all(each)
    };
    match d.section {
        Section::CompletedWork => ok(span(&s.completed, |c| &c.id, d), &|i| {
            old(s.completed[i].provenance.turn)
        }),
        Section::Artifacts => ok(span(&s.artifacts, |a| &a.id, d), &|i| {
            s.artifacts[i]
                .versions
                .last()
                .is_some_and(|v| old(v.provenance.turn))
        }),
        Section::Assumptions => ok(span(&s.assumptions, |a| &a.id, d), &|i| {
            old(s.assumptions[i].provenance.turn)
        }),
        Section::UnresolvedIssues => ok(span(&s.issues, |i| &i.id, d), &|i| {
            s.issues[i].severity < Severity::High && old(s.issues[i].provenance.turn)
        }),
        Section::FailedAttempts => ok(span(&s.failed_attempts, |f| &f.id, d), &|i| {
            i >= baton_core::compiler::ANCHORED && old(s.failed_attempts[i].provenance.turn)
        }),
        _ => false,
    }
}
