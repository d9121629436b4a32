//! Claims that can restate a record: decisions, completed work, issues (and claimed
//! resolutions of them), failed attempts and assumptions.
//!
//! A claim that says what a record already says becomes a reaffirmation of it. A claim
//! whose wording is as alike as a restatement's but differs in polarity, a number, a
//! unit or a name (`text::guard`) — or, for a failed attempt, gives a contradicting
//! reason — is recorded as its own item, and the turn warns that it may contradict the
//! earlier one; that warning also goes into the turn's handoff record, so the next
//! briefing shows it. Completed work is only ever compared with completed work of the
//! same step, and only a difference in polarity is a contradiction there (a different
//! number or name is more work). Nothing a claim states is dropped without a
//! reaffirmation or a warning.

use crate::claims::{DecisionClaim, IssueClaim};
use crate::state::{
    Assumption, CompletedWork, Decision, ExecutionState, FailedAttempt, Issue, IssueStatus,
    RecordKind, ResolutionClaim,
};
use crate::text::{
    Aspect, Difference, Likeness, ScoringCacheGuard, Statement, difference, normalize, overlap,
    terms,
};

use super::{
    Action, ReconcileOutcome, TurnContext, Verification, Verifier, clip, nonempty,
    push_reaffirmation,
};

/// Scoring-cache slots for the reconciler's restatement checks (the compiler uses 0..6).
const SAME_DECISION: usize = 10;
const SAME_COMPLETED: usize = 11;
const SAME_ISSUE: usize = 12;
const SAME_FAILED_WHAT: usize = 13;
const SAME_FAILED_BOTH: usize = 14;
const SAME_ASSUMPTION: usize = 15;

/// At least this share of the shorter reason's terms must be shared before two reasons
/// for one failed attempt are compared at all: below it they are about different
/// things (a second reason, or a paraphrase), not one reason and its opposite.
const COMPARABLE_REASONS: f64 = 0.5;

/// Warnings for the next worker as well as for the turn's outcome.
#[derive(Debug, Default)]
pub(super) struct ForNext(pub(super) Vec<String>);

impl ForNext {
    fn warn(&mut self, out: &mut ReconcileOutcome, text: String) {
        if !self.0.contains(&text) {
            self.0.push(text.clone());
        }
        out.warnings.push(text);
    }
}

/// What a claim is to the records of its category.
enum Found {
    /// It restates the record at this index.
    Same(usize),
    /// It is new; these records look like it but differ (index, how).
    New(Vec<(usize, Difference)>),
}

/// The first record among `records` (index, text) that `claim` restates, else every
/// record it resembles but differs from.
fn find<'r>(
    cache: &mut ScoringCacheGuard<'_>,
    slot: usize,
    records: impl Iterator<Item = (usize, &'r str)>,
    claim: &Statement<'_>,
) -> Found {
    let mut near = Vec::new();
    for (i, text) in records {
        match cache.likeness(slot, i, text, claim) {
            Likeness::Same => return Found::Same(i),
            Likeness::Apart(d) => near.push((i, d)),
            Likeness::Unrelated => {}
        }
    }
    Found::New(near)
}

/// How many earlier records a contradiction warning names.
const NAMED_NEAR: usize = 3;

/// `possible contradiction of D1: D2 "…" differs from D1 "…" in number (5 vs 3); …`,
/// naming the latest records the new one resembles (`near`: id, text, difference).
fn contradiction(new_id: &str, new_text: &str, near: &[(String, String, Difference)]) -> String {
    let named = &near[near.len().saturating_sub(NAMED_NEAR)..];
    let ids: Vec<&str> = named.iter().map(|(id, _, _)| id.as_str()).collect();
    let (id, text, d) = &named[named.len() - 1];
    format!(
        "possible contradiction of {}: {new_id} \"{}\" differs from {id} \"{}\" in {d}; \
         both are kept, confirm which holds",
        ids.join(", "),
        clip(new_text, 100),
        clip(text, 100),
    )
}

pub(super) fn merge_decision(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    claim: &DecisionClaim,
    path: &str,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let text = claim.text.trim();
    if text.is_empty() {
        out.refuse(path.to_string(), "a decision needs text".into());
        return;
    }
    let claim_stmt = Statement::new(text, &[]);
    let found = {
        let mut cache = state.scoring.lock();
        let records = (state.decisions.iter().enumerate()).map(|(i, d)| (i, d.text.as_str()));
        find(&mut cache, SAME_DECISION, records, &claim_stmt)
    };
    let near = match found {
        Found::Same(i) => {
            let d = &mut state.decisions[i];
            // A restatement may supply the reason the first statement lacked; the
            // original text and provenance stay.
            if d.reason.is_none()
                && let Some(reason) = nonempty(claim.reason.as_deref())
            {
                d.reason = Some(reason.to_string());
            }
            let id = d.id.clone();
            if push_reaffirmation(&mut d.reaffirmed, ctx.reaffirmation(&d.text, text)) {
                out.push(RecordKind::Decision, &id, Action::Reaffirmed);
            }
            return;
        }
        Found::New(near) => near,
    };
    let reason = nonempty(claim.reason.as_deref()).map(str::to_string);
    if reason.is_none() {
        out.warnings.push(format!(
            "decision \"{}\" was recorded without a reason ({path})",
            clip(text, 80)
        ));
    }
    let id = format!("D{}", state.decisions.len() + 1);
    let near = named(near, |i| {
        let d = &state.decisions[i];
        (d.id.clone(), d.text.clone())
    });
    state.decisions.push(Decision {
        id: id.clone(),
        text: text.to_string(),
        reason,
        provenance: ctx.provenance(),
        reaffirmed: Vec::new(),
    });
    out.push(RecordKind::Decision, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, text, &near));
    }
}

/// `near` with each record's id and text.
fn named(
    near: Vec<(usize, Difference)>,
    record: impl Fn(usize) -> (String, String),
) -> Vec<(String, String, Difference)> {
    near.into_iter()
        .map(|(i, d)| {
            let (id, text) = record(i);
            (id, text, d)
        })
        .collect()
}

pub(super) fn merge_completed(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    text: &str,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    // Work done on one step never stands in for another step's: "wrote the tests" on T3
    // and on T7 are two pieces of work.
    let step = ctx.assignment.step_id.as_deref();
    let claim = Statement::new(text, &[]);
    let found = {
        let mut cache = state.scoring.lock();
        let records = (state.completed.iter().enumerate())
            .filter(|(_, c)| c.step.as_deref() == step)
            .map(|(i, c)| (i, c.text.as_str()));
        find(&mut cache, SAME_COMPLETED, records, &claim)
    };
    let near = match found {
        Found::Same(i) => {
            let c = &mut state.completed[i];
            let id = c.id.clone();
            if push_reaffirmation(&mut c.reaffirmed, ctx.reaffirmation(&c.text, text)) {
                out.push(RecordKind::Completed, &id, Action::Reaffirmed);
            } else {
                out.warnings.push(format!(
                    "completed work \"{}\" repeats {id}, already restated this turn; recorded once",
                    clip(text, 80)
                ));
            }
            return;
        }
        Found::New(near) => near,
    };
    // Work that differs in a number or a name ("batch 3", "batch 4") is more work, not a
    // contradiction; one that reports the opposite ("tests pass", "tests fail") may be.
    let near: Vec<_> = (near.into_iter())
        .filter(|(_, d)| d.aspect == Aspect::Polarity)
        .collect();
    let id = format!("C{}", state.completed.len() + 1);
    let near = named(near, |i| {
        let c = &state.completed[i];
        (c.id.clone(), c.text.clone())
    });
    state.completed.push(CompletedWork {
        id: id.clone(),
        text: text.to_string(),
        step: ctx.assignment.step_id.clone(),
        provenance: ctx.provenance(),
        reaffirmed: Vec::new(),
    });
    out.push(RecordKind::Completed, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, text, &near));
    }
}

pub(super) fn merge_issue(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    claim: &IssueClaim,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let title = claim.title.trim();
    if title.is_empty() {
        return;
    }
    let claim_stmt = Statement::new(title, &[]);
    let found = {
        let mut cache = state.scoring.lock();
        let records = (state.issues.iter().enumerate())
            .filter(|(_, i)| i.status == IssueStatus::Open)
            .map(|(n, i)| (n, i.title.as_str()));
        find(&mut cache, SAME_ISSUE, records, &claim_stmt)
    };
    let near = match found {
        Found::Same(n) => {
            reaffirm_issue(&mut state.issues[n], ctx, claim, title, out, next);
            return;
        }
        Found::New(near) => near,
    };
    let id = format!("I{}", state.issues.len() + 1);
    let near = named(near, |n| {
        let i = &state.issues[n];
        (i.id.clone(), i.title.clone())
    });
    state.issues.push(Issue {
        id: id.clone(),
        title: title.to_string(),
        detail: claim.detail.clone().unwrap_or_default(),
        severity: claim.severity,
        status: IssueStatus::Open,
        provenance: ctx.provenance(),
        resolution_claimed_by: None,
        verified_by: None,
        gate: claim
            .gate
            .as_deref()
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string),
        reaffirmed: Vec::new(),
    });
    out.push(RecordKind::Issue, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, title, &near));
    }
}

/// A restated issue is reaffirmed with the severity it was claimed at. The stricter
/// severity wins: a higher one raises the record's, a lower one leaves it, and either
/// change of mind is a warning, never silent.
fn reaffirm_issue(
    issue: &mut Issue,
    ctx: &TurnContext<'_>,
    claim: &IssueClaim,
    title: &str,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let id = issue.id.clone();
    let mut r = ctx.reaffirmation(&issue.title, title);
    let (was, now) = (issue.severity, claim.severity);
    if now != was {
        r.severity = Some(now);
    }
    if now > was {
        issue.severity = now;
        next.warn(
            out,
            format!(
                "{id} severity raised from {} to {}: {} restated \"{}\" as {}",
                was.as_str(),
                now.as_str(),
                ctx.worker.id,
                clip(&issue.title, 80),
                now.as_str()
            ),
        );
    } else if now < was {
        next.warn(
            out,
            format!(
                "{id} restated as {} by {}; its severity stays {} (a claim never lowers an \
                 issue's severity: resolve it through a verifier or gate, or ask a human)",
                now.as_str(),
                ctx.worker.id,
                was.as_str()
            ),
        );
    }
    if push_reaffirmation(&mut issue.reaffirmed, r) {
        out.push(RecordKind::Issue, &id, Action::Reaffirmed);
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn merge_resolution(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    reference: &str,
    note: Option<&str>,
    from: &str,
    index: usize,
    verifier: &dyn Verifier,
    out: &mut ReconcileOutcome,
) {
    let reference = reference.trim();
    let by_id = state
        .issues
        .iter()
        .position(|i| i.id.eq_ignore_ascii_case(reference));
    let found = match by_id {
        Some(n) => Found::Same(n),
        None => {
            let claim = Statement::new(reference, &[]);
            let mut cache = state.scoring.lock();
            let records = (state.issues.iter().enumerate()).map(|(n, i)| (n, i.title.as_str()));
            find(&mut cache, SAME_ISSUE, records, &claim)
        }
    };
    let idx = match found {
        Found::Same(n) => n,
        Found::New(near) => {
            // "X is rate limited" resolved is not "X is not rate limited" resolved.
            let like: Vec<String> = (near.iter())
                .map(|(n, d)| format!("{} is alike but differs in {d}", state.issues[*n].id))
                .collect();
            let hint = if like.is_empty() {
                String::new()
            } else {
                format!(" ({}; name the issue by its id)", like.join("; "))
            };
            out.refuse(
                format!("{from}.resolved_issues"),
                format!("no issue matches \"{}\"{hint}", clip(reference, 80)),
            );
            return;
        }
    };
    if state.issues[idx].status == IssueStatus::Resolved {
        return;
    }
    let claim = ResolutionClaim {
        by: ctx.worker.id.clone(),
        turn: ctx.turn,
        at: ctx.at,
        note: nonempty(note).map(str::to_string),
    };
    let verification = verifier.verify_resolution(&state.issues[idx], &claim);
    let issue = &mut state.issues[idx];
    let id = issue.id.clone();
    if issue
        .resolution_claimed_by
        .as_ref()
        .map(|c| (&c.by, c.turn))
        != Some((&claim.by, claim.turn))
    {
        issue.resolution_claimed_by = Some(claim);
        out.push(RecordKind::Issue, &id, Action::ResolutionClaimed);
    }
    match verification {
        Verification::Verified { by, .. } => {
            issue.status = IssueStatus::Resolved;
            issue.verified_by = Some(by);
            out.push(RecordKind::Issue, &id, Action::Verified);
        }
        Verification::Unverified => out.warnings.push(format!(
            "{id} claimed resolved by {} but nothing verified it; it stays open ({from}.resolved_issues[{index}])",
            ctx.worker.id
        )),
        Verification::Rejected { reason } => {
            out.refuse(format!("{from}.resolved_issues[{index}]"), reason);
        }
    }
}

/// Two reasons for the same failed attempt that say opposite things: they share most of
/// their terms (see `COMPARABLE_REASONS`) and the guard sets them apart by polarity, or
/// by a number, unit or name each side has and the other lacks. A restated reason often
/// adds a detail ("switched to a task_statuses table"); that alone is no contradiction.
fn contradicting_reason(claim: &str, record: &str) -> Option<Difference> {
    let (claim, record) = (claim.trim(), record.trim());
    if claim.is_empty() || record.is_empty() || normalize(claim) == normalize(record) {
        return None;
    }
    let (a, b) = (terms(claim), terms(record));
    let shorter = a.len().min(b.len());
    if shorter == 0 || (overlap(&a, &b) as f64) < COMPARABLE_REASONS * shorter as f64 {
        return None;
    }
    let d = difference(claim, record)?;
    (d.aspect == Aspect::Polarity || d.on_both_sides()).then(|| Difference {
        aspect: Aspect::Reason,
        claim: format!("\"{}\"", clip(claim, 80)),
        record: format!("\"{}\"", clip(record, 80)),
    })
}

pub(super) fn merge_failed_attempt(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    what: &str,
    why: &str,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let what = what.trim();
    if what.is_empty() {
        return;
    }
    let claim_what = Statement::new(what, &[]);
    let claim_both = Statement::new(what, &[why]);
    let mut near = Vec::new();
    let mut same = None;
    {
        let mut cache = state.scoring.lock();
        for (i, f) in state.failed_attempts.iter().enumerate() {
            let alike = cache.similar(SAME_FAILED_WHAT, i, &[&f.what], &claim_what)
                || cache.similar(SAME_FAILED_BOTH, i, &[&f.what, &f.why], &claim_both);
            if !alike {
                continue;
            }
            let apart = (normalize(what) != normalize(&f.what))
                .then(|| difference(what, &f.what))
                .flatten()
                .or_else(|| contradicting_reason(why, &f.why));
            match apart {
                Some(d) => near.push((i, d)),
                None => {
                    same = Some(i);
                    break;
                }
            }
        }
    }
    if let Some(f) = same.map(|i| &mut state.failed_attempts[i]) {
        let id = f.id.clone();
        if push_reaffirmation(&mut f.reaffirmed, ctx.reaffirmation(&f.what, what)) {
            out.push(RecordKind::FailedAttempt, &id, Action::Reaffirmed);
        }
        return;
    }
    let id = format!("F{}", state.failed_attempts.len() + 1);
    let near = named(near, |i| {
        let f = &state.failed_attempts[i];
        (f.id.clone(), f.what.clone())
    });
    state.failed_attempts.push(FailedAttempt {
        id: id.clone(),
        what: what.to_string(),
        why: why.trim().to_string(),
        provenance: ctx.provenance(),
        reaffirmed: Vec::new(),
    });
    out.push(RecordKind::FailedAttempt, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, what, &near));
    }
}

pub(super) fn merge_assumption(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    text: &str,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let claim_stmt = Statement::new(text, &[]);
    let found = {
        let mut cache = state.scoring.lock();
        let records = (state.assumptions.iter().enumerate()).map(|(i, a)| (i, a.text.as_str()));
        find(&mut cache, SAME_ASSUMPTION, records, &claim_stmt)
    };
    let near = match found {
        Found::Same(i) => {
            let a = &mut state.assumptions[i];
            let id = a.id.clone();
            if push_reaffirmation(&mut a.reaffirmed, ctx.reaffirmation(&a.text, text)) {
                out.push(RecordKind::Assumption, &id, Action::Reaffirmed);
            }
            return;
        }
        Found::New(near) => near,
    };
    let id = format!("S{}", state.assumptions.len() + 1);
    let near = named(near, |i| {
        let a = &state.assumptions[i];
        (a.id.clone(), a.text.clone())
    });
    state.assumptions.push(Assumption {
        id: id.clone(),
        text: text.to_string(),
        provenance: ctx.provenance(),
        reaffirmed: Vec::new(),
    });
    out.push(RecordKind::Assumption, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, text, &near));
    }
}
