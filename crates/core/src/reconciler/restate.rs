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
    Reaffirmation, RecordKind, ResolutionClaim,
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

/// A kind of record that a claim can restate. Decisions, completed work, issues and
/// assumptions share one merge (`merge`), failed attempts its recording of a new record;
/// each kind says only where it differs.
pub(super) trait Restatable: Sized {
    /// What a worker claims, from which the record is made.
    type Claim<'c>;
    const KIND: RecordKind;
    /// The record ids' letter: D1, C1, I1, F1, S1.
    const PREFIX: &'static str;
    /// The scoring-cache slot of this kind's restatement check.
    const SLOT: usize;

    fn records(state: &ExecutionState) -> &[Self];
    fn records_mut(state: &mut ExecutionState) -> &mut Vec<Self>;
    fn id(&self) -> &str;
    fn text(&self) -> &str;
    fn reaffirmed(&mut self) -> &mut Vec<Reaffirmation>;
    /// Who recorded it.
    fn recorded_by(&self) -> &crate::ids::WorkerId;

    /// The claim's text, trimmed; an empty one is no claim.
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str;

    /// Whether a claim made in this turn may restate this record.
    fn comparable(&self, _ctx: &TurnContext<'_>) -> bool {
        true
    }

    /// Whether a record that resembles the claim but differs this way may contradict it.
    fn contradicts(_d: &Difference) -> bool {
        true
    }

    /// Folds a restatement into the record: by default one reaffirmation per worker
    /// per turn.
    fn restated(
        &mut self,
        ctx: &TurnContext<'_>,
        _claim: &Self::Claim<'_>,
        text: &str,
        out: &mut ReconcileOutcome,
        _next: &mut ForNext,
    ) {
        let r = ctx.reaffirmation(self.text(), text);
        if push_reaffirmation(self.reaffirmed(), r) {
            out.push(Self::KIND, self.id(), Action::Reaffirmed);
        }
    }

    /// The new record, under the id the merge gave it.
    fn create(
        id: String,
        text: &str,
        claim: &Self::Claim<'_>,
        ctx: &TurnContext<'_>,
        out: &mut ReconcileOutcome,
    ) -> Self;
}

/// The accessors every restatable record has alike: the state's list of them, its id,
/// its text, its reaffirmations.
macro_rules! record_fields {
    ($list:ident, $text:ident) => {
        fn records(state: &ExecutionState) -> &[Self] {
            &state.$list
        }
        fn records_mut(state: &mut ExecutionState) -> &mut Vec<Self> {
            &mut state.$list
        }
        fn id(&self) -> &str {
            &self.id
        }
        fn text(&self) -> &str {
            &self.$text
        }
        fn reaffirmed(&mut self) -> &mut Vec<Reaffirmation> {
            &mut self.reaffirmed
        }
        fn recorded_by(&self) -> &crate::ids::WorkerId {
            &self.provenance.recorded_by
        }
    };
}

/// Merges one claim into the records of its kind: a restatement reaffirms the record it
/// restates; anything else becomes a new record, with a warning naming the records it
/// resembles but may contradict.
pub(super) fn merge<R: Restatable>(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    claim: &R::Claim<'_>,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let text = R::claimed(claim);
    if text.is_empty() {
        return;
    }
    let stmt = Statement::new(text, &[]);
    let found = {
        let mut cache = state.scoring.lock();
        let records = (R::records(state).iter().enumerate())
            .filter(|(_, r)| r.comparable(ctx))
            .map(|(i, r)| (i, r.text()));
        find(&mut cache, R::SLOT, records, &stmt)
    };
    match found {
        Found::Same(i) => R::records_mut(state)[i].restated(ctx, claim, text, out, next),
        Found::New(near) => {
            let near = near.into_iter().filter(|(_, d)| R::contradicts(d));
            record_new::<R>(state, ctx, claim, text, near, out, next);
        }
    }
}

/// Records a claim as new and warns of the records in `near` it may contradict.
fn record_new<R: Restatable>(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    claim: &R::Claim<'_>,
    text: &str,
    near: impl Iterator<Item = (usize, Difference)>,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    let records = R::records_mut(state);
    let near: Vec<_> = near
        .map(|(i, d)| {
            (
                records[i].id().to_string(),
                records[i].text().to_string(),
                d,
                records[i].recorded_by().clone(),
            )
        })
        .collect();
    // A decision another worker recorded, which this one may contradict: two workers
    // disagree, which the line stops on for a human.
    if R::KIND == RecordKind::Decision
        && let Some((of, _, _, by)) = near.iter().rev().find(|n| n.3 != ctx.worker.id)
    {
        out.contradicted.push(super::Contradicted {
            id: format!("{}{}", R::PREFIX, records.len() + 1),
            of: of.clone(),
            by: by.clone(),
        });
    }
    let near: Vec<(String, String, Difference)> =
        near.into_iter().map(|(i, t, d, _)| (i, t, d)).collect();
    let id = format!("{}{}", R::PREFIX, records.len() + 1);
    let record = R::create(id.clone(), text, claim, ctx, out);
    records.push(record);
    out.push(R::KIND, &id, Action::Created);
    if !near.is_empty() {
        next.warn(out, contradiction(&id, text, &near));
    }
}

/// A decision claim and where in the turn's answer it stands (for refusals and warnings).
pub(super) struct DecisionAt<'c> {
    pub(super) claim: &'c DecisionClaim,
    pub(super) path: &'c str,
}

/// A decision with no text is refused (every other kind just skips an empty claim).
pub(super) fn merge_decision(
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    claim: &DecisionAt<'_>,
    out: &mut ReconcileOutcome,
    next: &mut ForNext,
) {
    if Decision::claimed(claim).is_empty() {
        out.refuse(claim.path.to_string(), "a decision needs text".into());
        return;
    }
    merge::<Decision>(state, ctx, claim, out, next);
}

impl Restatable for Decision {
    type Claim<'c> = DecisionAt<'c>;
    const KIND: RecordKind = RecordKind::Decision;
    const PREFIX: &'static str = "D";
    const SLOT: usize = SAME_DECISION;

    record_fields!(decisions, text);
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str {
        claim.claim.text.trim()
    }

    fn restated(
        &mut self,
        ctx: &TurnContext<'_>,
        claim: &DecisionAt<'_>,
        text: &str,
        out: &mut ReconcileOutcome,
        _next: &mut ForNext,
    ) {
        // A restatement may supply the reason the first statement lacked; the
        // original text and provenance stay.
        if self.reason.is_none()
            && let Some(reason) = nonempty(claim.claim.reason.as_deref())
        {
            self.reason = Some(reason.to_string());
        }
        if push_reaffirmation(&mut self.reaffirmed, ctx.reaffirmation(&self.text, text)) {
            out.push(Self::KIND, &self.id, Action::Reaffirmed);
        }
    }

    fn create(
        id: String,
        text: &str,
        claim: &DecisionAt<'_>,
        ctx: &TurnContext<'_>,
        out: &mut ReconcileOutcome,
    ) -> Self {
        let reason = nonempty(claim.claim.reason.as_deref()).map(str::to_string);
        if reason.is_none() {
            out.warnings.push(format!(
                "decision \"{}\" was recorded without a reason ({})",
                clip(text, 80),
                claim.path
            ));
        }
        Decision {
            id,
            text: text.to_string(),
            reason,
            provenance: ctx.provenance(),
            reaffirmed: Vec::new(),
        }
    }
}

impl Restatable for CompletedWork {
    type Claim<'c> = &'c str;
    const KIND: RecordKind = RecordKind::Completed;
    const PREFIX: &'static str = "C";
    const SLOT: usize = SAME_COMPLETED;

    record_fields!(completed, text);
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str {
        claim.trim()
    }

    /// Work done on one step never stands in for another step's: "wrote the tests" on
    /// T3 and on T7 are two pieces of work.
    fn comparable(&self, ctx: &TurnContext<'_>) -> bool {
        self.step.as_deref() == ctx.assignment.step_id.as_deref()
    }

    /// Work that differs in a number or a name ("batch 3", "batch 4") is more work, not
    /// a contradiction; one that reports the opposite ("tests pass", "tests fail") may be.
    fn contradicts(d: &Difference) -> bool {
        d.aspect == Aspect::Polarity
    }

    fn restated(
        &mut self,
        ctx: &TurnContext<'_>,
        _claim: &&str,
        text: &str,
        out: &mut ReconcileOutcome,
        _next: &mut ForNext,
    ) {
        if push_reaffirmation(&mut self.reaffirmed, ctx.reaffirmation(&self.text, text)) {
            out.push(Self::KIND, &self.id, Action::Reaffirmed);
        } else {
            out.warnings.push(format!(
                "completed work \"{}\" repeats {}, already restated this turn; recorded once",
                clip(text, 80),
                self.id
            ));
        }
    }

    fn create(
        id: String,
        text: &str,
        _claim: &&str,
        ctx: &TurnContext<'_>,
        _out: &mut ReconcileOutcome,
    ) -> Self {
        CompletedWork {
            id,
            text: text.to_string(),
            step: ctx.assignment.step_id.clone(),
            provenance: ctx.provenance(),
            reaffirmed: Vec::new(),
        }
    }
}

impl Restatable for Issue {
    type Claim<'c> = &'c IssueClaim;
    const KIND: RecordKind = RecordKind::Issue;
    const PREFIX: &'static str = "I";
    const SLOT: usize = SAME_ISSUE;

    record_fields!(issues, title);
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str {
        claim.title.trim()
    }

    /// Only an open issue is restated; one raised again after it was resolved is new.
    fn comparable(&self, _ctx: &TurnContext<'_>) -> bool {
        self.status == IssueStatus::Open
    }

    fn restated(
        &mut self,
        ctx: &TurnContext<'_>,
        claim: &&IssueClaim,
        text: &str,
        out: &mut ReconcileOutcome,
        next: &mut ForNext,
    ) {
        reaffirm_issue(self, ctx, claim, text, out, next);
    }

    fn create(
        id: String,
        text: &str,
        claim: &&IssueClaim,
        ctx: &TurnContext<'_>,
        _out: &mut ReconcileOutcome,
    ) -> Self {
        Issue {
            id,
            title: text.to_string(),
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
        }
    }
}

impl Restatable for Assumption {
    type Claim<'c> = &'c str;
    const KIND: RecordKind = RecordKind::Assumption;
    const PREFIX: &'static str = "S";
    const SLOT: usize = SAME_ASSUMPTION;

    record_fields!(assumptions, text);
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str {
        claim.trim()
    }

    fn create(
        id: String,
        text: &str,
        _claim: &&str,
        ctx: &TurnContext<'_>,
        _out: &mut ReconcileOutcome,
    ) -> Self {
        Assumption {
            id,
            text: text.to_string(),
            provenance: ctx.provenance(),
            reaffirmed: Vec::new(),
        }
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
    let claim = FailedClaim {
        what,
        why: why.trim(),
    };
    if let Some(f) = same.map(|i| &mut state.failed_attempts[i]) {
        f.restated(ctx, &claim, what, out, next);
        return;
    }
    record_new::<FailedAttempt>(state, ctx, &claim, what, near.into_iter(), out, next);
}

/// A failed attempt as claimed: what was tried and why it failed.
pub(super) struct FailedClaim<'c> {
    what: &'c str,
    why: &'c str,
}

/// Failed attempts are matched on what was tried *and* why it failed (see
/// `merge_failed_attempt`), so only the recording of a new one is shared.
impl Restatable for FailedAttempt {
    type Claim<'c> = FailedClaim<'c>;
    const KIND: RecordKind = RecordKind::FailedAttempt;
    const PREFIX: &'static str = "F";
    const SLOT: usize = SAME_FAILED_WHAT;

    record_fields!(failed_attempts, what);
    fn claimed<'c>(claim: &Self::Claim<'c>) -> &'c str {
        claim.what
    }

    fn create(
        id: String,
        text: &str,
        claim: &FailedClaim<'_>,
        ctx: &TurnContext<'_>,
        _out: &mut ReconcileOutcome,
    ) -> Self {
        FailedAttempt {
            id,
            what: text.to_string(),
            why: claim.why.to_string(),
            provenance: ctx.provenance(),
            reaffirmed: Vec::new(),
        }
    }
}
