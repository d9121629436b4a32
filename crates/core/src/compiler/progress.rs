//! The Progress section: the plan compressed to the assigned step, the next one and
//! the steps left open behind it, with the rest as ranges of ids by status.

use std::fmt::Write as _;

use super::DropReason;
use super::Section;
use super::render::{Arena, MAX_ITEM_CHARS, push_clean};
use super::sections::{ANCHOR_BONUS, Block, Context, Item, Spec, fixed_item, heading, runs};
use crate::state::StepStatus;

/// Pending steps before the assigned one (left open) shown on a line of their own, the
/// nearest first; the rest are counted in a range.
pub const OPEN_BEHIND: usize = 3;
/// Ranges of steps listed in one range line; the steps of any further ones are counted.
const MAX_RANGES: usize = 4;

/// The plan, compressed: the assigned step and its neighbours on lines of their own,
/// pending steps left open before it, and the rest as ranges of ids by status (`T1–T60
/// done`). Done steps say nothing the completed work and the counts do not; a long plan
/// costs a few lines, not one per step. Steps in a range are reported as summarised.
pub(super) fn progress(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let plan = &cx.state.plan;
    let assigned = cx.assigned_step_id();
    // (score, step index): the assigned step, then the next and the previous, then the
    // open steps behind, nearest first.
    let mut lines: Vec<(u32, usize)> = Vec::new();
    if let Some(h) = cx.step_index.filter(|&h| h < plan.len()) {
        lines.push((ANCHOR_BONUS, h));
        if h + 1 < plan.len() {
            lines.push((9_999, h + 1));
        }
        let behind = (0..h)
            .rev()
            .filter(|&i| plan[i].status == StepStatus::Pending)
            .take(OPEN_BEHIND);
        for (k, i) in behind.enumerate() {
            lines.push((8_000 - k as u32, i));
        }
    }
    let mut on_line = vec![false; plan.len()];
    for &(_, i) in &lines {
        on_line[i] = true;
    }
    let mut items: Vec<Item> = Vec::with_capacity(lines.len() + 2);
    for &(score, i) in &lines {
        let s = &plan[i];
        let out = arena.begin();
        let done = s.status == StepStatus::Done;
        out.push_str(if done { "- [x] " } else { "- [ ] " });
        out.push_str(&s.id);
        // The assigned step's title is the assigned task, shown above.
        let cut = Some(s.id.as_str()) != assigned && {
            out.push(' ');
            push_clean(out, &s.title, MAX_ITEM_CHARS)
        };
        if let (true, Some(by)) = (done, &s.done_by) {
            let _ = write!(out, " (done by {by}");
            if let Some(t) = s.done_at_turn {
                let _ = write!(out, ", turn {t}");
            }
            out.push(')');
        }
        if Some(s.id.as_str()) == assigned {
            out.push_str(" ← your step");
        }
        items.push(Item {
            id: s.id.clone(),
            score,
            order: 1 + i as u64,
            piece: arena.end(),
            short: None,
            compact: None,
            shortened: cut,
        });
    }
    // The steps without a line of their own, as ranges by status.
    let mut summarized: Vec<(u32, u32)> = Vec::new();
    for (done, id, score, order) in [
        (true, "steps.done", 9_000, 0),
        (false, "steps.pending", 8_999, plan.len() as u64 + 1),
    ] {
        let status = if done {
            StepStatus::Done
        } else {
            StepStatus::Pending
        };
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (i, step) in plan.iter().enumerate() {
            if on_line[i] || step.status != status {
                continue;
            }
            summarized.push((0, i as u32));
            match ranges.last_mut() {
                Some((_, last)) if *last + 1 == i => *last = i,
                _ => ranges.push((i, i)),
            }
        }
        if ranges.is_empty() {
            continue;
        }
        let mut line = String::from(if done { "- [x] " } else { "- [ ] " });
        let mut listed = 0;
        for (k, &(first, last)) in ranges.iter().take(MAX_RANGES).enumerate() {
            if k > 0 {
                line.push_str(", ");
            }
            line.push_str(&plan[first].id);
            if last > first {
                line.push('–');
                line.push_str(&plan[last].id);
            }
            listed += last - first + 1;
        }
        let steps: usize = ranges.iter().map(|(f, l)| l - f + 1).sum();
        if steps > listed {
            let _ = write!(line, " and {} more", steps - listed);
        }
        let _ = write!(line, " {}", if done { "done" } else { "pending" });
        // One range counts itself.
        if ranges.len() > 1 {
            let _ = write!(line, " ({steps} steps)");
        }
        let mut item = fixed_item(arena, id, 0, &line);
        item.score = score;
        item.order = order;
        items.push(item);
    }
    items.sort_by(|a, b| b.score.cmp(&a.score).then(a.order.cmp(&b.order)));
    summarized.sort_unstable_by_key(|&(_, i)| i);
    let spec = Spec {
        section: Section::Progress,
        cap: 0,
        records: plan,
        include: &|_| true,
        score: &|_, _| 0,
        relevant: &|_, _| true,
        id: &|s| &s.id,
        render: &|_, _, _| false,
        compact: None,
    };
    let cap_dropped = runs(&spec, &summarized, DropReason::Summarized);
    let block = Block {
        section: Section::Progress,
        heading: heading(arena, Section::Progress, items.is_empty(), None),
        available: items.len() + summarized.len(),
        items,
        cap_dropped,
        warnings: 0,
        floor: 0,
        primary: usize::MAX,
    };
    block.with_heading(arena, |out| {
        let done = plan.iter().filter(|s| s.status == StepStatus::Done).count();
        let _ = write!(out, " ({done} of {} steps done)", plan.len());
    })
}
