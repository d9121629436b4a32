//! Candidates: every record scored against the assignment, cut to its category's cap,
//! and the survivors rendered and counted, ranked best first.

use std::cmp::Ordering;
use std::fmt::Write as _;

use super::current::current_task_state;
use super::floors::{
    FLOOR_ACTION, FLOOR_CURRENT, FLOOR_DECISIONS, FLOOR_FAILED, FLOOR_ISSUES, FLOOR_PROGRESS,
    FLOOR_RECORDS, Optional, cites_earlier_decision,
};
use super::notes::notes;
use super::progress::progress;
use super::render::{Arena, MAX_ITEM_CHARS, Piece, push_by, push_clean};
use super::{Assignment, AssignmentKind, DropReason, DroppedItem, Section};
use crate::state::{
    Artifact, CompletedWork, Decision, ExecutionState, IssueStatus, Severity, Stamped,
};
use crate::text::{AssignmentQuery, ScoringCacheGuard, TermQuery};
use std::cell::RefCell;

/// Per-category caps: candidates beyond them are dropped with `DropReason::Cap`.
pub const CAP_STEP_WORK: usize = 8;
pub const CAP_DECISIONS: usize = 12;
pub const CAP_COMPLETED: usize = 10;
pub const CAP_ARTIFACTS: usize = 10;
pub const CAP_ISSUES: usize = 10;
pub const CAP_FAILED: usize = 8;
pub const CAP_ASSUMPTIONS: usize = 8;
/// The earliest decisions and failed attempts that are always candidates and rank first
/// in their section: founding choices and the first dead ends are what a late worker
/// most easily contradicts or repeats.
pub const ANCHORED: usize = 2;
/// Added to the score of anchored items (and fixed lines), above any relevance score.
pub const ANCHOR_BONUS: u32 = 1_000_000;
/// Added to the score of a decision shown in full that is not anchored: it ranks above
/// every decision shown short, and below the anchored tier.
pub const FULL_DECISION_BONUS: u32 = ANCHOR_BONUS / 2;
/// Warnings that are always delivered, at least in their shortest form.
pub const FLOOR_WARNINGS: usize = 8;

/// Relevance of a record to the assignment, blended with recency: an integer in
/// `0..=10_000` (plus `ANCHOR_BONUS` for anchored items, plus a severity bonus for issues).
///
/// Relevance is `1000·o/(o+2)` for `o` query terms the record's text shares with the
/// assignment task and objective (saturating, so long records gain no edge); recency is
/// `1000·(turn+1)/(turns+1)`. The blend weighs relevance 7 and recency 3. Integers keep
/// the ranking exact and the package byte-identical on every platform.
pub fn relevance(query: &TermQuery, texts: &[&str], turn: u32, state_turns: u32) -> u32 {
    relevance_from_overlap(query.overlap(texts), turn, state_turns)
}

/// `relevance` given the number of shared query terms.
pub(super) fn relevance_from_overlap(overlap: usize, turn: u32, state_turns: u32) -> u32 {
    let o = overlap as u64;
    let rel = 1000 * o / (o + 2);
    let rec = (1000 * (u64::from(turn) + 1) / (u64::from(state_turns) + 1)).min(1000);
    (7 * rel + 3 * rec) as u32
}

pub(super) fn severity_bonus(s: Severity) -> u32 {
    match s {
        Severity::Low => 0,
        Severity::Medium => 500,
        Severity::High => 1000,
        Severity::Critical => 2000,
    }
}

/// One candidate line of a section.
pub(super) struct Item {
    pub id: String,
    pub score: u32,
    /// Display position within the section (the relevance order decides what is kept,
    /// this decides where it is shown).
    pub order: u64,
    pub piece: Piece,
    /// Warnings only: the shortest form, always delivered.
    pub short: Option<Piece>,
    /// Records only: the line without what a tight budget can spare (a decision's reason
    /// and stamp, an issue's detail and stamp, a failed attempt's stamp), shown when the
    /// floors do not all fit in full. Counted only then (`Compiler::count_compact`).
    pub compact: Option<Piece>,
    pub shortened: bool,
}

/// One section's candidates.
pub(super) struct Block {
    pub section: Section,
    /// Heading (with any one-line summary); empty piece when there are no items.
    pub heading: Piece,
    /// Ranked best first.
    pub items: Vec<Item>,
    /// Records the section had, before caps.
    pub available: usize,
    /// Dropped by the cap, in record order.
    pub cap_dropped: Vec<DroppedItem>,
    /// Notes block only: how many leading items are warnings.
    pub warnings: usize,
    /// Leading ranked items every section gets before any section grows (see `with_floor`).
    pub floor: usize,
    /// Leading ranked items that grow before the predecessor's notes in full; the rest
    /// (decisions off the task, in their short form) only after them.
    pub primary: usize,
}

/// Best first; ties go to the earlier record so the ranking is a total order.
fn rank(a: &(u32, u32), b: &(u32, u32)) -> Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

/// The top `cap` of `scored` (`(score, index)`), ranked; a partial selection, so a
/// large category costs O(n), not O(n log n).
fn top(mut scored: Vec<(u32, u32)>, cap: usize) -> Vec<(u32, u32)> {
    if scored.len() > cap {
        if cap == 0 {
            scored.clear();
        } else {
            scored.select_nth_unstable_by(cap - 1, rank);
            scored.truncate(cap);
        }
    }
    scored.sort_unstable_by(rank);
    scored
}

/// Writes one record's line; true when text was clipped (or, for a compact form, when
/// the record has one).
pub(super) type RenderLine<'a, T> = dyn Fn(usize, &T, &mut String) -> bool + 'a;

/// Shared shape of a record section: which records belong, their score, id and line.
pub(super) struct Spec<'s, T> {
    pub section: Section,
    pub cap: usize,
    pub records: &'s [T],
    pub include: &'s dyn Fn(&T) -> bool,
    pub score: &'s dyn Fn(usize, &T) -> u32,
    /// False for a record below the relevance floor: reported, never a candidate.
    pub relevant: &'s dyn Fn(usize, &T) -> bool,
    pub id: &'s dyn Fn(&T) -> &str,
    /// Writes the line (without its final newline); true when text was clipped.
    pub render: &'s dyn Fn(usize, &T, &mut String) -> bool,
    /// Writes the line's compact form; false when it has none shorter than the line.
    pub compact: Option<&'s RenderLine<'s, T>>,
}

pub(super) fn block<T>(arena: &mut Arena<'_>, spec: Spec<'_, T>) -> Block {
    let mut scores: Vec<(u32, u32)> = Vec::with_capacity(spec.records.len());
    let mut below_floor: Vec<(u32, u32)> = Vec::new();
    for (i, r) in spec.records.iter().enumerate() {
        if (spec.include)(r) {
            let scored = ((spec.score)(i, r), i as u32);
            if (spec.relevant)(i, r) {
                scores.push(scored);
            } else {
                below_floor.push(scored);
            }
        }
    }
    let available = scores.len() + below_floor.len();
    let (ranked, capped) = if scores.len() > spec.cap {
        let ranked = top(scores.clone(), spec.cap);
        let mut capped = scores;
        let kept: std::collections::BTreeSet<u32> = ranked.iter().map(|&(_, i)| i).collect();
        capped.retain(|(_, i)| !kept.contains(i));
        (ranked, capped)
    } else {
        (top(scores, spec.cap), Vec::new())
    };
    let mut cap_dropped = Vec::with_capacity(run_count(&capped) + run_count(&below_floor));
    push_runs(&spec, &capped, DropReason::Cap, &mut cap_dropped);
    push_runs(
        &spec,
        &below_floor,
        DropReason::NotRelevant,
        &mut cap_dropped,
    );
    let mut items = Vec::with_capacity(ranked.len());
    for (score, i) in ranked {
        let r = &spec.records[i as usize];
        let shortened = (spec.render)(i as usize, r, arena.begin());
        let piece = arena.end();
        let compact = spec.compact.and_then(|render| {
            if render(i as usize, r, arena.begin()) {
                Some(arena.end_uncounted())
            } else {
                arena.discard();
                None
            }
        });
        items.push(Item {
            id: (spec.id)(r).to_string(),
            score,
            order: u64::from(i),
            piece,
            short: None,
            compact,
            shortened,
        });
    }
    let heading = heading(arena, spec.section, items.is_empty(), None);
    Block {
        section: spec.section,
        heading,
        floor: 0,
        primary: usize::MAX,
        items,
        available,
        cap_dropped,
        warnings: 0,
    }
}

/// `dropped` (`(score, index)`, in record order) as runs of consecutive records: a
/// record not in `dropped` ends a run, so a large record costs its briefing report a
/// few entries rather than one per record.
pub(super) fn runs<T>(
    spec: &Spec<'_, T>,
    dropped: &[(u32, u32)],
    reason: DropReason,
) -> Vec<DroppedItem> {
    let mut out = Vec::with_capacity(run_count(dropped));
    push_runs(spec, dropped, reason, &mut out);
    out
}

/// How many entries `runs` makes of `dropped`: a list of a 10,000-item state's records
/// grown entry by entry was copied a dozen times over.
fn run_count(dropped: &[(u32, u32)]) -> usize {
    let starts = dropped.windows(2).filter(|w| w[1].1 != w[0].1 + 1).count();
    starts + usize::from(!dropped.is_empty())
}

/// `runs`, appended to `out`.
fn push_runs<T>(
    spec: &Spec<'_, T>,
    dropped: &[(u32, u32)],
    reason: DropReason,
    out: &mut Vec<DroppedItem>,
) {
    let mut run: Option<(usize, usize, u32)> = None;
    let flush = |run: Option<(usize, usize, u32)>, out: &mut Vec<DroppedItem>| {
        if let Some((first, last, best)) = run {
            out.push(DroppedItem {
                section: spec.section,
                item: (spec.id)(&spec.records[first]).to_string(),
                through: (last > first).then(|| (spec.id)(&spec.records[last]).to_string()),
                count: (last - first + 1) as u32,
                reason,
                score: best,
            });
        }
    };
    for &(score, i) in dropped {
        let i = i as usize;
        run = Some(match run {
            Some((first, last, best)) if last + 1 == i => (first, i, best.max(score)),
            other => {
                flush(other, out);
                (i, i, score)
            }
        });
    }
    flush(run, out);
}

pub(super) fn heading(
    arena: &mut Arena<'_>,
    section: Section,
    empty: bool,
    extra: Option<&str>,
) -> Piece {
    if empty {
        return Piece::default();
    }
    let out = arena.begin();
    out.push_str("\n## ");
    out.push_str(section.title());
    if let Some(extra) = extra {
        out.push_str(extra);
    }
    arena.end()
}

/// A block of fixed lines, in the given order (they rank in that order, above records).
pub(super) fn fixed_item(arena: &mut Arena<'_>, id: &str, pos: usize, line: &str) -> Item {
    let out = arena.begin();
    let shortened = push_clean(out, line, MAX_ITEM_CHARS * 2);
    Item {
        id: id.to_string(),
        score: 2 * ANCHOR_BONUS - pos as u32,
        order: pos as u64,
        piece: arena.end(),
        short: None,
        compact: None,
        shortened,
    }
}

pub(super) struct Context<'s> {
    pub state: &'s ExecutionState,
    pub assignment: &'s Assignment,
    /// The task and objective's terms, and the task's own (the objective is shared by
    /// every record, so it cannot tell one step's area from another's).
    pub query: std::sync::Arc<AssignmentQuery>,
    /// Index of the assigned plan step (or, for a continuation, the cursor).
    pub step_index: Option<usize>,
    /// The ids of the steps before the assigned one, when it covers their work (a
    /// review: `StepScope::Earlier`): their completed work and every artifact are
    /// relevant to it, whatever its words.
    pub covered: Option<std::collections::BTreeSet<&'s str>>,
    /// The state's memoised overlaps, locked for this compile.
    pub cache: RefCell<ScoringCacheGuard<'s>>,
}

/// Terms a failed attempt must share with the assigned task to count as the same area
/// (fewer when the task has fewer terms).
pub const AREA_TERMS: usize = 2;

/// Slots of the scoring cache, one per record category.
pub(super) const KIND_DECISION: usize = 0;
pub(super) const KIND_COMPLETED: usize = 1;
pub(super) const KIND_ARTIFACT: usize = 2;
pub(super) const KIND_ISSUE: usize = 3;
pub(super) const KIND_FAILED: usize = 4;
pub(super) const KIND_ASSUMPTION: usize = 5;

/// Sizes `cache`'s overlaps for every category of `state` the compiler scores, before it
/// scores them (`ScoringCacheGuard::reserve`).
pub(super) fn reserve(cache: &mut ScoringCacheGuard<'_>, state: &ExecutionState) {
    for (kind, records) in [
        (KIND_DECISION, state.decisions.len()),
        (KIND_COMPLETED, state.completed.len()),
        (KIND_ARTIFACT, state.artifacts.len()),
        (KIND_ISSUE, state.issues.len()),
        (KIND_FAILED, state.failed_attempts.len()),
        (KIND_ASSUMPTION, state.assumptions.len()),
    ] {
        cache.reserve(kind, records);
    }
    // Whether a decision revises an earlier one (see `decisions`).
    cache.reserve_facts(KIND_DECISION, state.decisions.len());
}

impl Context<'_> {
    /// `relevance` of record `index` of a state category, with its overlaps memoised.
    /// `stamp` must change whenever `texts` can have changed (see the call sites).
    pub(super) fn score_cached(
        &self,
        kind: usize,
        index: usize,
        stamp: u32,
        texts: &[&str],
        turn: u32,
    ) -> u32 {
        self.score_and_task_overlap(kind, index, stamp, texts, turn)
            .0
    }

    /// `score_cached`, and how many terms the record shares with the assigned task.
    pub(super) fn score_and_task_overlap(
        &self,
        kind: usize,
        index: usize,
        stamp: u32,
        texts: &[&str],
        turn: u32,
    ) -> (u32, usize) {
        let (all, task) = self
            .cache
            .borrow_mut()
            .overlaps(&self.query, kind, index, stamp, texts);
        (relevance_from_overlap(all, turn, self.state.turns), task)
    }

    /// True when a record sharing `overlap` terms with the task is in the task's area.
    pub(super) fn same_area(&self, overlap: usize) -> bool {
        let need = AREA_TERMS.min(self.query.task.terms().len());
        need > 0 && overlap >= need
    }

    /// True when the assigned step covers the work of `step` (a record of no step is
    /// earlier work too).
    pub(super) fn covers(&self, step: Option<&str>) -> bool {
        self.covered
            .as_ref()
            .is_some_and(|c| step.is_none_or(|s| c.contains(s)))
    }

    pub(super) fn assigned_step_id(&self) -> Option<&str> {
        match self.assignment.kind {
            AssignmentKind::Step => self.assignment.step_id.as_deref(),
            AssignmentKind::Continuation => None,
        }
    }
}

/// Every section from Progress to Next action, in section order, then the notes.
pub(super) fn blocks(arena: &mut Arena<'_>, cx: &Context<'_>) -> Vec<Block> {
    vec![
        progress(arena, cx).with_floor(FLOOR_PROGRESS),
        current_task_state(arena, cx).with_floor(FLOOR_CURRENT),
        decisions(arena, cx).with_floor(FLOOR_DECISIONS),
        completed(arena, cx).with_floor(FLOOR_RECORDS),
        artifacts(arena, cx).with_floor(FLOOR_RECORDS),
        issues(arena, cx).with_floor(FLOOR_ISSUES),
        failed(arena, cx).with_floor(FLOOR_FAILED),
        assumptions(arena, cx).with_floor(FLOOR_RECORDS),
        stamped(arena, cx, Section::LastAction).with_floor(FLOOR_ACTION),
        stamped(arena, cx, Section::NextAction).with_floor(FLOOR_ACTION),
        notes(arena, cx),
    ]
}

impl Block {
    /// Replaces the heading with one that carries a summary, when the block has items.
    pub(super) fn with_heading(
        mut self,
        arena: &mut Arena<'_>,
        extra: impl FnOnce(&mut String),
    ) -> Block {
        if !self.items.is_empty() {
            let mut s = String::new();
            extra(&mut s);
            self.heading = heading(arena, self.section, false, Some(&s));
        }
        self
    }
}

fn decisions(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let decisions = &cx.state.decisions;
    let scored = Optional::new(
        (decisions.iter().enumerate())
            .map(|(i, d)| {
                let texts = [d.text.as_str(), d.reason.as_deref().unwrap_or("")];
                // A restatement may supply a missing reason later: that changes the text.
                let stamp = u32::from(d.reason.is_some());
                let (s, on_task) =
                    cx.score_and_task_overlap(KIND_DECISION, i, stamp, &texts, d.provenance.turn);
                // A decision that names an earlier one revises it: a later worker that
                // misses it follows the decision it replaced.
                // Memoised: every decision is scanned for ids otherwise, each compile.
                let revises = || {
                    (cx.cache.borrow_mut())
                        .fact(KIND_DECISION, i, 0, || cites_earlier_decision(&d.text, i))
                };
                Some(if i < ANCHORED || revises() {
                    (s + ANCHOR_BONUS, on_task)
                } else {
                    (s, on_task)
                })
            })
            .collect(),
    );
    // Every decision in force binds every worker, so none is left out for relevance;
    // one that bears on neither the task nor the last turns is shown without its
    // reason and stamp: what it says is what a worker must not contradict.
    let full = |i: usize, d: &Decision| {
        let restated = d.reaffirmed.last().map_or(0, |r| r.turn);
        scored.score(i) >= ANCHOR_BONUS || scored.relevant(cx, i, d.provenance.turn.max(restated))
    };
    // The short ones rank below every full one, and are the last thing a briefing grows.
    let score = |i: usize, d: &Decision| {
        let s = scored.score(i);
        if s < ANCHOR_BONUS && full(i, d) {
            s + FULL_DECISION_BONUS
        } else {
            s
        }
    };
    let mut block = block(
        arena,
        Spec {
            section: Section::Decisions,
            cap: CAP_DECISIONS,
            records: decisions,
            include: &|_| true,
            score: &score,
            relevant: &|_, _| true,
            id: &|d| &d.id,
            // What the decision says, without its reason and stamp.
            compact: Some(&|i, d, out| {
                let _ = write!(out, "- {}: ", d.id);
                push_clean(out, &d.text, MAX_ITEM_CHARS);
                full(i, d)
            }),
            render: &|i, d, out| {
                let _ = write!(out, "- {}: ", d.id);
                if !full(i, d) {
                    push_clean(out, &d.text, MAX_ITEM_CHARS / 2);
                    return true;
                }
                let mut cut = push_clean(out, &d.text, MAX_ITEM_CHARS);
                if let Some(reason) = &d.reason {
                    out.push_str(" — because ");
                    cut |= push_clean(out, reason, MAX_ITEM_CHARS);
                }
                let p = &d.provenance;
                let _ = write!(out, " (by {}, turn {}", p.recorded_by, p.turn);
                if !d.reaffirmed.is_empty() {
                    let _ = write!(out, "; reaffirmed {}×", d.reaffirmed.len());
                }
                out.push(')');
                cut
            },
        },
    );
    block.primary = (block.items.iter())
        .take_while(|i| i.score >= FULL_DECISION_BONUS)
        .count();
    block
}

fn completed(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    // Work for the assigned step is listed under the current task state instead.
    let assigned = cx.assigned_step_id();
    let include = &|c: &CompletedWork| assigned.is_none() || c.step.as_deref() != assigned;
    let scored = Optional::new(
        (cx.state.completed.iter().enumerate())
            .map(|(i, c)| {
                include(c).then(|| {
                    let texts = [c.text.as_str()];
                    cx.score_and_task_overlap(KIND_COMPLETED, i, 0, &texts, c.provenance.turn)
                })
            })
            .collect(),
    );
    block(
        arena,
        Spec {
            section: Section::CompletedWork,
            cap: CAP_COMPLETED,
            records: &cx.state.completed,
            include,
            score: &|i, _| scored.score(i),
            relevant: &|i, c| {
                cx.covers(c.step.as_deref()) || scored.relevant(cx, i, c.provenance.turn)
            },
            id: &|c| &c.id,
            compact: None,
            render: &|_, c, out| {
                let _ = write!(out, "- {}", c.id);
                if let Some(step) = &c.step {
                    let _ = write!(out, " [{step}]");
                }
                out.push_str(": ");
                let cut = push_clean(out, &c.text, MAX_ITEM_CHARS);
                out.push(' ');
                push_by(out, &c.provenance.recorded_by, c.provenance.turn);
                cut
            },
        },
    )
}

fn artifacts(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let turn_of = |a: &Artifact| a.versions.last().map_or(0, |v| v.provenance.turn);
    let scored = Optional::new(
        (cx.state.artifacts.iter().enumerate())
            .map(|(i, a)| {
                let latest = a.versions.last()?;
                // A new version is the only way the scored description changes.
                let stamp = a.versions.len() as u32;
                let texts = [a.name.as_str(), latest.description.as_str()];
                Some(cx.score_and_task_overlap(KIND_ARTIFACT, i, stamp, &texts, turn_of(a)))
            })
            .collect(),
    );
    block(
        arena,
        Spec {
            section: Section::Artifacts,
            cap: CAP_ARTIFACTS,
            // An artifact always has a version; one without is a corrupt record the
            // compiler skips rather than panics on.
            records: &cx.state.artifacts,
            include: &|a| !a.versions.is_empty(),
            score: &|i, _| scored.score(i),
            // An artifact names no step: a step over earlier work covers every one.
            relevant: &|i, a| cx.covered.is_some() || scored.relevant(cx, i, turn_of(a)),
            id: &|a| &a.id,
            compact: None,
            render: &|_, a, out| {
                let Some(latest) = a.versions.last() else {
                    return false;
                };
                let _ = write!(out, "- {} `", a.id);
                let mut cut = push_clean(out, &a.name, MAX_ITEM_CHARS / 2);
                let _ = write!(out, "` ({})", a.kind);
                // A first version says so by "created by" with no "modified by".
                if a.versions.len() > 1 {
                    let _ = write!(out, " v{}", latest.version);
                }
                out.push_str(": ");
                cut |= push_clean(out, &latest.description, MAX_ITEM_CHARS);
                let _ = write!(out, " — created by {}", a.creator());
                let modifiers = a.modifiers();
                if !modifiers.is_empty() {
                    out.push_str(", modified by ");
                    for (k, m) in modifiers.iter().enumerate() {
                        if k > 0 {
                            out.push_str(", ");
                        }
                        out.push_str(m.as_str());
                    }
                }
                match (latest.verified, &latest.verified_by) {
                    (true, Some(by)) => {
                        let _ = write!(out, " — verified ({by})");
                    }
                    (true, None) => out.push_str(" — verified"),
                    (false, _) => out.push_str(" — NOT verified"),
                }
                cut
            },
        },
    )
}

fn issues(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let scored = Optional::new(
        (cx.state.issues.iter().enumerate())
            .map(|(n, i)| {
                (i.status == IssueStatus::Open).then(|| {
                    let texts = [i.title.as_str(), i.detail.as_str()];
                    let (s, on_task) =
                        cx.score_and_task_overlap(KIND_ISSUE, n, 0, &texts, i.provenance.turn);
                    let s = s + severity_bonus(i.severity);
                    // Open high and critical issues are what the next worker must not
                    // ignore, whatever its task: they rank with the anchored records.
                    if i.severity >= Severity::High {
                        (s + ANCHOR_BONUS, on_task)
                    } else {
                        (s, on_task)
                    }
                })
            })
            .collect(),
    );
    block(
        arena,
        Spec {
            section: Section::UnresolvedIssues,
            cap: CAP_ISSUES,
            records: &cx.state.issues,
            include: &|i| i.status == IssueStatus::Open,
            score: &|n, _| scored.score(n),
            relevant: &|n, i| {
                i.severity >= Severity::High || scored.relevant(cx, n, i.provenance.turn)
            },
            id: &|i| &i.id,
            // What is wrong and how bad, without the detail and the stamp.
            compact: Some(&|_, i, out| {
                let _ = write!(out, "- {} [{}] ", i.id, i.severity.as_str());
                push_clean(out, &i.title, MAX_ITEM_CHARS);
                if i.resolution_claimed_by.is_some() {
                    out.push_str(" — resolution claimed, NOT verified, still open");
                }
                true
            }),
            render: &|_, i, out| {
                let _ = write!(out, "- {} [{}] ", i.id, i.severity.as_str());
                let mut cut = push_clean(out, &i.title, MAX_ITEM_CHARS);
                // A gate that keeps failing reaffirms its issue with each run's output:
                // the newest run is the fact the next worker needs.
                let latest = i
                    .reaffirmed
                    .last()
                    .filter(|r| i.gate.is_some() && r.by == i.provenance.recorded_by)
                    .and_then(|r| r.wording.as_deref().map(|w| (w, r.turn)));
                let detail = latest.map_or(i.detail.as_str(), |(w, _)| w);
                if !detail.is_empty() {
                    out.push_str(": ");
                    cut |= push_clean(out, detail, MAX_ITEM_CHARS);
                }
                let p = &i.provenance;
                let _ = write!(out, " (raised by {}, turn {}", p.recorded_by, p.turn);
                if let Some((_, turn)) = latest {
                    let _ = write!(out, "; still failing at turn {turn}");
                }
                out.push(')');
                if let Some(claim) = &i.resolution_claimed_by {
                    let _ = write!(
                        out,
                        " — resolution claimed by {} at turn {} — NOT verified, still open",
                        claim.by, claim.turn
                    );
                }
                cut
            },
        },
    )
}

fn failed(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let scored = Optional::new(
        (cx.state.failed_attempts.iter().enumerate())
            .map(|(i, f)| {
                let texts = [f.what.as_str(), f.why.as_str()];
                let (s, on_task) =
                    cx.score_and_task_overlap(KIND_FAILED, i, 0, &texts, f.provenance.turn);
                // Every dead end in the assigned task's area, then the first ones, are
                // what the next worker must not repeat.
                Some(if cx.same_area(on_task) {
                    (s + ANCHOR_BONUS + ANCHOR_BONUS / 2, on_task)
                } else if i < ANCHORED {
                    (s + ANCHOR_BONUS, on_task)
                } else {
                    (s, on_task)
                })
            })
            .collect(),
    );
    block(
        arena,
        Spec {
            section: Section::FailedAttempts,
            cap: CAP_FAILED,
            records: &cx.state.failed_attempts,
            include: &|_| true,
            score: &|i, _| scored.score(i),
            relevant: &|i, f| {
                scored.score(i) >= ANCHOR_BONUS || scored.relevant(cx, i, f.provenance.turn)
            },
            id: &|f| &f.id,
            // What was tried and why it failed, without the stamp.
            compact: Some(&|_, f, out| {
                let _ = write!(out, "- {}: ", f.id);
                push_clean(out, &f.what, MAX_ITEM_CHARS);
                out.push_str(" — failed because ");
                push_clean(out, &f.why, MAX_ITEM_CHARS);
                true
            }),
            render: &|_, f, out| {
                let _ = write!(out, "- {}: ", f.id);
                let mut cut = push_clean(out, &f.what, MAX_ITEM_CHARS);
                out.push_str(" — failed because ");
                cut |= push_clean(out, &f.why, MAX_ITEM_CHARS);
                out.push(' ');
                push_by(out, &f.provenance.recorded_by, f.provenance.turn);
                cut
            },
        },
    )
}

fn assumptions(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let scored = Optional::new(
        (cx.state.assumptions.iter().enumerate())
            .map(|(i, a)| {
                let texts = [a.text.as_str()];
                Some(cx.score_and_task_overlap(KIND_ASSUMPTION, i, 0, &texts, a.provenance.turn))
            })
            .collect(),
    );
    block(
        arena,
        Spec {
            section: Section::Assumptions,
            cap: CAP_ASSUMPTIONS,
            records: &cx.state.assumptions,
            include: &|_| true,
            score: &|i, _| scored.score(i),
            relevant: &|i, a| scored.relevant(cx, i, a.provenance.turn),
            id: &|a| &a.id,
            compact: None,
            render: &|_, a, out| {
                let _ = write!(out, "- {}: ", a.id);
                let cut = push_clean(out, &a.text, MAX_ITEM_CHARS);
                out.push(' ');
                push_by(out, &a.provenance.recorded_by, a.provenance.turn);
                cut
            },
        },
    )
}

fn stamped(arena: &mut Arena<'_>, cx: &Context<'_>, section: Section) -> Block {
    let (record, id) = match section {
        Section::LastAction => (&cx.state.last_action, "last_action"),
        _ => (&cx.state.next_action, "next_action"),
    };
    let records: &[_] = record.as_slice();
    block(
        arena,
        Spec {
            section,
            cap: 1,
            records,
            include: &|_| true,
            relevant: &|_, _| true,
            score: &|_, _| ANCHOR_BONUS,
            id: &|_| id,
            compact: None,
            render: &|_, s, out| {
                let cut = push_clean(out, &s.text, MAX_ITEM_CHARS);
                // The next action stated with the last one needs no stamp of its own.
                let p = &s.provenance;
                let same = |l: &Stamped| {
                    l.provenance.recorded_by == p.recorded_by && l.provenance.turn == p.turn
                };
                if section == Section::LastAction
                    || !cx.state.last_action.as_ref().is_some_and(same)
                {
                    out.push(' ');
                    push_by(out, &p.recorded_by, p.turn);
                }
                cut
            },
        },
    )
}
