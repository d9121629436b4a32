//! Greedy fill against the budget, in section priority order, and assembly of the
//! package with its report.
//!
//! Priority: header, assigned task and objective (shortened only as a last resort), the
//! predecessor's warnings in their shortest form (always delivered), then the warnings
//! in full; then every section's floor, Progress … Next action and the predecessor's
//! notes in their shortest form (so a long plan cannot starve what the next worker must
//! not repeat or ignore); then each section grows, in the same order, and the notes
//! last, and what does not bear on the task after them. Within a section items are taken best-ranked first and the first that does not
//! fit ends the section, so a trimmed section loses its least relevant items and never a
//! better one.

use std::fmt::Write as _;

use super::render::{Arena, Piece, shorten};
use super::sections::{self, Block, Context};
use super::{
    Assignment, AssignmentKind, DropReason, DroppedItem, HandoffPackage, KeptItem, Section,
    SectionReport, WorkerProfile,
};
use crate::line::brief::LineBrief;
use crate::state::{ExecutionState, StepScope};
use crate::tokens::{TokenEstimator, count_segments};

/// The order in which sections get their floors: what the next worker must not
/// contradict, ignore or repeat first, then where the work stands; then the notes'
/// floor; then `LATER_FLOORS`. Sections are still shown, and grow, in their fixed order.
const FIRST_FLOORS: [Section; 7] = [
    Section::Progress,
    Section::CurrentTaskState,
    Section::Decisions,
    Section::UnresolvedIssues,
    Section::FailedAttempts,
    Section::LastAction,
    Section::NextAction,
];
/// Floors taken after the notes' floor.
const LATER_FLOORS: [Section; 3] = [
    Section::CompletedWork,
    Section::Artifacts,
    Section::Assumptions,
];

/// The task and the objective are never shortened below this many chars each.
pub const MIN_KEEP_CHARS: usize = 120;

/// The task or objective section as rendered under a plan.
struct Core {
    text: String,
    tokens: usize,
    shortened: bool,
}

/// What one fill decided.
struct Plan {
    task: Option<Core>,
    objective: Option<Core>,
    /// The task and objective at their shortest, with only the warnings' floor: nothing
    /// is left to take out.
    minimal: bool,
    /// Ranked items kept, per block.
    kept: Vec<usize>,
    /// Leading kept items shown in full, per block (the rest in their compact form);
    /// the notes block uses `full_warnings` and `full_notes` instead.
    full: Vec<usize>,
    /// Some section's floor did not fit (with the records in full, unless `compact`).
    floors_short: bool,
    /// Notes block: leading warnings shown in full (the rest of the kept ones are short).
    full_warnings: usize,
    /// Notes block: the notes themselves shown in full (else in their shortest form).
    full_notes: bool,
}

/// Takes block items `kept..upto` while they fit `remaining` (with the heading when the
/// block had none yet), in their compact form when `compact` (else in full, and only
/// when every kept item is, so that the items shown in full stay a prefix).
fn take(
    kept: &mut usize,
    full: &mut usize,
    block: &Block,
    upto: usize,
    remaining: &mut usize,
    compact: bool,
) {
    if !compact && *full < *kept {
        return;
    }
    let mut cost = if *kept == 0 { block.heading.tokens } else { 0 };
    let mut k = *kept;
    for item in &block.items[k..upto.min(block.items.len())] {
        let tokens = match item.compact {
            Some(short) if compact => short.tokens,
            _ => item.piece.tokens,
        };
        if cost + tokens > *remaining {
            break;
        }
        cost += tokens;
        k += 1;
    }
    if k > *kept {
        *remaining -= cost;
        *kept = k;
        if !compact {
            *full = k;
        }
    }
}

/// Shows kept items in full instead of compact, best-ranked first, while they fit.
fn upgrade(full: &mut usize, kept: usize, block: &Block, remaining: &mut usize) {
    while *full < kept {
        let item = &block.items[*full];
        let extra = (item.compact).map_or(0, |c| item.piece.tokens.saturating_sub(c.tokens));
        if extra > *remaining {
            break;
        }
        *remaining -= extra;
        *full += 1;
    }
}

pub(super) struct Compiler<'a, 'e> {
    arena: Arena<'e>,
    state: &'a ExecutionState,
    assignment: &'a Assignment,
    worker: &'a WorkerProfile,
    header: Piece,
    task_prefix: String,
    task_full: Piece,
    objective_full: Piece,
    /// Progress … Next action, then the notes last.
    blocks: Vec<Block>,
    /// The items' compact forms have been counted.
    compact_counted: bool,
    /// A line seat's block, shown after the objective and paid for first.
    line: Option<&'a LineBrief>,
}

fn task_section(out: &mut String, prefix: &str, task: &str) {
    out.push_str("\n## ");
    out.push_str(Section::AssignedTask.title());
    out.push('\n');
    out.push_str(prefix);
    out.push_str(task);
}

fn objective_section(out: &mut String, objective: &str) {
    out.push_str("\n## ");
    out.push_str(Section::Objective.title());
    out.push('\n');
    out.push_str(objective);
}

impl<'a, 'e> Compiler<'a, 'e> {
    pub fn new(
        state: &'a ExecutionState,
        assignment: &'a Assignment,
        worker: &'a WorkerProfile,
        estimator: &'e dyn TokenEstimator,
    ) -> Self {
        let mut arena = Arena::new(
            estimator,
            4096 + assignment.task.len() + state.objective.len(),
        );
        let out = arena.begin();
        // No run id: the same record, assignment and worker give the same briefing in
        // any run, so a replay or a comparison of two models sees identical bytes.
        let _ = write!(
            out,
            "# Briefing: turn {}, for {} ({})",
            state.turns, worker.id, worker.model
        );
        if let Some(role) = &worker.role {
            let _ = write!(out, " as {role}");
        }
        // Kept word for word: with a shorter "Cite record ids …" line, Qwen2.5-Coder-0.5B's
        // first answer in schema mode looped inside llama.cpp's grammar to its output limit
        // (the live-model suite), and with this one it did not.
        out.push_str(
            "\nRecord ids (D3, I2, F1, …) are stable: cite them when you refer to records.",
        );
        let header = arena.end();

        let task_prefix = match (assignment.kind, &assignment.step_id) {
            (AssignmentKind::Step, Some(id)) => format!("Step {id}: "),
            (AssignmentKind::Step, None) => String::new(),
            (AssignmentKind::Continuation, _) => "Continuation (no step of its own): ".into(),
        };
        task_section(arena.begin(), &task_prefix, &assignment.task);
        let task_full = arena.end();
        objective_section(arena.begin(), &state.objective);
        let objective_full = arena.end();

        let step_index = match (assignment.kind, &assignment.step_id) {
            (AssignmentKind::Step, Some(id)) => state.plan.iter().position(|s| &s.id == id),
            _ => state.cursor(),
        };
        // A step over earlier work (a review) covers every step before it.
        let covered = (assignment.kind == AssignmentKind::Step)
            .then_some(step_index)
            .flatten()
            .filter(|&h| state.plan[h].scope() == StepScope::Earlier)
            .map(|h| state.plan[..h].iter().map(|s| s.id.as_str()).collect());
        let mut cache = state.scoring.lock();
        sections::reserve(&mut cache, state);
        let cx = Context {
            state,
            assignment,
            covered,
            query: state.scoring.query(&assignment.task, &state.objective),
            step_index,
            cache: std::cell::RefCell::new(cache),
        };
        let blocks = sections::blocks(&mut arena, &cx);
        Compiler {
            arena,
            state,
            assignment,
            worker,
            header,
            task_prefix,
            task_full,
            objective_full,
            blocks,
            compact_counted: false,
            line: None,
        }
    }

    fn notes(&self) -> &Block {
        // `sections::blocks` always ends with the notes block.
        &self.blocks[self.blocks.len() - 1]
    }

    /// Warnings with a shortest form, delivered whatever the budget.
    fn floor_warnings(&self) -> usize {
        let notes = self.notes();
        notes.items[..notes.warnings]
            .iter()
            .take_while(|i| i.short.is_some())
            .count()
    }

    fn floor_tokens(&self) -> usize {
        let n = self.floor_warnings();
        if n == 0 {
            return 0;
        }
        let notes = self.notes();
        notes.heading.tokens
            + notes.items[..n]
                .iter()
                .map(|i| i.short.map_or(i.piece.tokens, |s| s.tokens))
                .sum::<usize>()
    }

    /// Task and objective each cut to at most `max_chars` chars.
    fn core_at(&self, max_chars: usize) -> (Core, Core) {
        let estimator = self.arena.estimator();
        let (task, task_cut) = shorten(&self.assignment.task, max_chars);
        let mut t = String::with_capacity(task.len() + 64);
        task_section(&mut t, &self.task_prefix, &task);
        t.push('\n');
        let (objective, objective_cut) = shorten(&self.state.objective, max_chars);
        let mut o = String::with_capacity(objective.len() + 32);
        objective_section(&mut o, &objective);
        o.push('\n');
        (
            Core {
                tokens: estimator.count(&t),
                text: t,
                shortened: task_cut,
            },
            Core {
                tokens: estimator.count(&o),
                text: o,
                shortened: objective_cut,
            },
        )
    }

    /// The longest task and objective that fit `avail` tokens together, and whether even
    /// the shortest did not fit.
    fn shortened_core(&self, avail: usize) -> (Core, Core, bool) {
        let longest = self
            .assignment
            .task
            .chars()
            .count()
            .max(self.state.objective.chars().count());
        let fits = |(t, o): &(Core, Core)| t.tokens + o.tokens <= avail;
        let shortest = self.core_at(MIN_KEEP_CHARS);
        if longest <= MIN_KEEP_CHARS || !fits(&shortest) {
            return (shortest.0, shortest.1, true);
        }
        // Invariant: `lo` fits, `hi` (the full texts, which did not fit) does not.
        let (mut lo, mut hi, mut best) = (MIN_KEEP_CHARS, longest, shortest);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let probe = self.core_at(mid);
            if fits(&probe) {
                lo = mid;
                best = probe;
            } else {
                hi = mid;
            }
        }
        (best.0, best.1, false)
    }

    /// Counts the compact forms, once: a fill needs them only when the floors do not
    /// fit in full, and most briefings are not that tight.
    fn count_compact(&mut self) {
        if self.compact_counted {
            return;
        }
        self.compact_counted = true;
        for block in &mut self.blocks {
            for item in &mut block.items {
                if let Some(piece) = &mut item.compact {
                    self.arena.count(piece);
                }
            }
        }
    }

    /// One fill within `limit`; with `compact`, every floor is taken with its records in
    /// their compact form, then shown in full again, in section order, as far as the
    /// budget allows, before any section grows.
    fn plan(&self, limit: usize, compact: bool) -> Plan {
        let notes_at = self.blocks.len() - 1;
        let floor_n = self.floor_warnings();
        let mut plan = Plan {
            task: None,
            objective: None,
            minimal: false,
            kept: vec![0; self.blocks.len()],
            full: vec![0; self.blocks.len()],
            floors_short: false,
            full_warnings: 0,
            full_notes: false,
        };
        plan.kept[notes_at] = floor_n;
        let fixed = self.header.tokens + self.floor_tokens();
        let full_core = self.task_full.tokens + self.objective_full.tokens;
        let mut remaining = if fixed + full_core <= limit {
            limit - fixed - full_core
        } else {
            let (task, objective, minimal) = self.shortened_core(limit.saturating_sub(fixed));
            let used = fixed + task.tokens + objective.tokens;
            plan.task = Some(task);
            plan.objective = Some(objective);
            if minimal {
                plan.minimal = true;
                return plan;
            }
            limit.saturating_sub(used)
        };

        // The predecessor's warnings in full, right after the task and objective.
        let notes = self.notes();
        for (k, w) in notes.items[..notes.warnings].iter().enumerate() {
            let extra = match w.short {
                Some(short) => w.piece.tokens.saturating_sub(short.tokens),
                None => w.piece.tokens,
            };
            if extra > remaining {
                break;
            }
            remaining -= extra;
            plan.full_warnings = k + 1;
            plan.kept[notes_at] = plan.kept[notes_at].max(k + 1);
        }

        // Every section's floor, in `FIRST_FLOORS` order, the notes' shortest form (only
        // after every warning in full), then `LATER_FLOORS`, before any section grows.
        let sections = &self.blocks[..notes_at];
        let floor_of = |section: Section| sections.iter().position(|b| b.section == section);
        for section in FIRST_FLOORS {
            if let Some(b) = floor_of(section) {
                take(
                    &mut plan.kept[b],
                    &mut plan.full[b],
                    &sections[b],
                    sections[b].floor,
                    &mut remaining,
                    compact,
                );
            }
        }
        let kept = plan.kept[notes_at];
        if let Some(item) = notes.items.get(kept)
            && kept == notes.warnings
            && kept == plan.full_warnings
        {
            let heading = if kept == 0 { notes.heading.tokens } else { 0 };
            let (cost, full) = match item.short {
                Some(short) => (short.tokens, false),
                None => (item.piece.tokens, true),
            };
            if heading + cost <= remaining {
                remaining -= heading + cost;
                plan.kept[notes_at] = kept + 1;
                plan.full_notes = full;
            }
        }
        let notes_short =
            notes.items.len() > notes.warnings && plan.kept[notes_at] <= notes.warnings;
        for section in LATER_FLOORS {
            if let Some(b) = floor_of(section) {
                take(
                    &mut plan.kept[b],
                    &mut plan.full[b],
                    &sections[b],
                    sections[b].floor,
                    &mut remaining,
                    compact,
                );
            }
        }
        plan.floors_short = notes_short
            || (sections.iter().enumerate()).any(|(b, block)| plan.kept[b] < block.floor);
        if compact {
            for (b, block) in sections.iter().enumerate() {
                upgrade(&mut plan.full[b], plan.kept[b], block, &mut remaining);
            }
        }

        // Then each section grows, in priority order, with what bears on the task; the
        // notes in full; and last what does not (decisions off the task, short).
        for (b, block) in sections.iter().enumerate() {
            take(
                &mut plan.kept[b],
                &mut plan.full[b],
                block,
                block.primary,
                &mut remaining,
                false,
            );
        }
        if plan.kept[notes_at] > notes.warnings
            && !plan.full_notes
            && let Some(item) = notes.items.get(notes.warnings)
        {
            let extra = item
                .piece
                .tokens
                .saturating_sub(item.short.map_or(item.piece.tokens, |s| s.tokens));
            if extra <= remaining {
                remaining -= extra;
                plan.full_notes = true;
            }
        }
        for (b, block) in sections.iter().enumerate() {
            take(
                &mut plan.kept[b],
                &mut plan.full[b],
                block,
                block.items.len(),
                &mut remaining,
                false,
            );
        }
        plan
    }

    /// The kept items of block `b`, in display order, with the piece each is shown as.
    fn shown(&self, plan: &Plan, b: usize) -> Vec<(usize, Piece)> {
        let block = &self.blocks[b];
        let notes = b == self.blocks.len() - 1;
        let mut shown: Vec<(usize, Piece)> = (0..plan.kept[b])
            .map(|i| {
                let item = &block.items[i];
                let piece = if notes {
                    let full = if i < block.warnings {
                        i < plan.full_warnings
                    } else {
                        plan.full_notes
                    };
                    match item.short {
                        Some(short) if !full => short,
                        _ => item.piece,
                    }
                } else if i < plan.full[b] {
                    item.piece
                } else {
                    item.compact.unwrap_or(item.piece)
                };
                (i, piece)
            })
            .collect();
        shown.sort_unstable_by_key(|&(i, _)| (block.items[i].order, i));
        shown
    }

    /// The briefing's text, and its segments for `count_segments`: every piece with its
    /// count (the line seat's block, counted with its own budget's rules, uncounted).
    fn assemble(&self, plan: &Plan) -> (String, Vec<(usize, Option<usize>)>) {
        let mut text = String::with_capacity(self.arena.buf.len().min(1 << 16) + 256);
        let mut segments = Vec::with_capacity(8 + plan.kept.iter().sum::<usize>() * 2);
        let mut push = |text: &mut String, part: &str, tokens: Option<usize>| {
            text.push_str(part);
            // A piece's count is 0 until it is counted (a compact form no fill needed).
            let tokens = tokens.filter(|&n| n > 0 || part.is_empty());
            segments.push((text.len(), tokens));
        };
        push(
            &mut text,
            self.arena.text(self.header),
            Some(self.header.tokens),
        );
        match &plan.task {
            Some(core) => push(&mut text, &core.text, Some(core.tokens)),
            None => push(
                &mut text,
                self.arena.text(self.task_full),
                Some(self.task_full.tokens),
            ),
        }
        match &plan.objective {
            Some(core) => push(&mut text, &core.text, Some(core.tokens)),
            None => push(
                &mut text,
                self.arena.text(self.objective_full),
                Some(self.objective_full.tokens),
            ),
        }
        if let Some(line) = self.line.filter(|l| !l.text.is_empty()) {
            text.push('\n');
            push(&mut text, line.text.trim_end(), None);
        }
        for (b, block) in self.blocks.iter().enumerate() {
            if plan.kept[b] == 0 {
                continue;
            }
            push(
                &mut text,
                self.arena.text(block.heading),
                Some(block.heading.tokens),
            );
            for (_, piece) in self.shown(plan, b) {
                push(&mut text, self.arena.text(piece), Some(piece.tokens));
            }
        }
        (text, segments)
    }

    /// Fills, checks the assembled text against the budget, and fills again with less
    /// room when a non-additive estimator counted the whole above the sum of its pieces.
    /// Shows `line` after the objective; the records get what it leaves of the budget.
    pub fn with_line(mut self, line: &'a LineBrief) -> Self {
        self.line = Some(line);
        self
    }

    pub fn compile(mut self, budget: usize) -> HandoffPackage {
        let estimator = self.arena.estimator();
        let mut limit = budget.saturating_sub(self.line.map_or(0, |l| l.tokens));
        loop {
            let mut plan = self.plan(limit, false);
            if plan.floors_short && !plan.minimal {
                self.count_compact();
                plan = self.plan(limit, true);
            }
            let (text, segments) = self.assemble(&plan);
            let tokens = count_segments(estimator, &text, &segments);
            if tokens <= budget || plan.minimal || limit == 0 {
                return self.package(plan, text, tokens, budget);
            }
            limit = limit.saturating_sub(tokens - budget);
        }
    }

    fn package(self, plan: Plan, text: String, tokens: usize, budget: usize) -> HandoffPackage {
        let mut sections = Vec::with_capacity(Section::ALL.len());
        let mut omitted = Vec::new();
        // Sized once: a 10,000-item state drops over a thousand entries.
        let mut dropped = Vec::with_capacity(
            (self.blocks.iter().zip(&plan.kept))
                .map(|(block, &k)| block.items.len().saturating_sub(k) + block.cap_dropped.len())
                .sum(),
        );
        let core = [
            (Section::AssignedTask, &plan.task, self.task_full),
            (Section::Objective, &plan.objective, self.objective_full),
        ];
        for (section, shortened, full) in core {
            sections.push(SectionReport {
                section,
                items_available: 1,
                items_included: 1,
                tokens: shortened.as_ref().map_or(full.tokens, |c| c.tokens),
                included: true,
                shortened: shortened.as_ref().is_some_and(|c| c.shortened),
                kept: Vec::new(),
            });
        }
        let shown: Vec<Vec<(usize, Piece)>> = (0..self.blocks.len())
            .map(|b| self.shown(&plan, b))
            .collect();
        for ((b, block), shown) in self.blocks.into_iter().enumerate().zip(shown) {
            let k = plan.kept[b];
            let mut report = SectionReport {
                section: block.section,
                items_available: block.available,
                items_included: k,
                tokens: 0,
                included: k > 0,
                shortened: false,
                kept: Vec::with_capacity(k),
            };
            if k > 0 {
                report.tokens = block.heading.tokens;
                for &(i, piece) in &shown {
                    let item = &block.items[i];
                    report.tokens += piece.tokens;
                    report.shortened |= item.shortened || piece.start != item.piece.start;
                    report.kept.push(KeptItem {
                        item: item.id.clone(),
                        score: item.score,
                    });
                }
            } else if block.available > 0 {
                omitted.push(block.section);
            }
            for item in &block.items[k..] {
                dropped.push(DroppedItem {
                    section: block.section,
                    item: item.id.clone(),
                    through: None,
                    count: 1,
                    reason: DropReason::Budget,
                    score: item.score,
                });
            }
            dropped.extend(block.cap_dropped);
            sections.push(report);
        }
        HandoffPackage {
            run_id: self.state.run_id.clone(),
            turn: self.state.turns,
            worker: self.worker.id.clone(),
            assignment: self.assignment.clone(),
            budget,
            tokens,
            estimator: self.arena.estimator().name().to_string(),
            text,
            sections,
            omitted_sections: omitted,
            dropped,
            over_budget: tokens > budget,
            line: None,
        }
    }
}
