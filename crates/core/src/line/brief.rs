//! What a station's seat is shown of the line's records: the locked plan (or the plan
//! under scrutiny), the drafts a lead merges, the open findings it must act on. Bounded
//! by a token budget counted on the rendered text, deterministic, and honest about what
//! it left out: every record withheld is reported, in the text and in `omitted`.
//!
//! A blind lane (a co-draft, a fresh-eyes review) sees nothing another lane of its
//! station produced: no draft, no finding. That is a rule of what is rendered, not of
//! the budget, so no budget can let a blind lane see another's draft.
//!
//! This block is the station-specific part of a seat's assignment;
//! `compiler::compile_with_line` puts it into the compiled briefing, after the objective.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{Finding, PlanVersion, StationKind};
use crate::ids::WorkerId;
use crate::router::SeatId;
use crate::state::ExecutionState;
use crate::tokens::TokenEstimator;

/// Who is being briefed, where in the line.
#[derive(Debug, Clone, Copy)]
pub struct LineView<'a> {
    pub kind: StationKind,
    pub station: &'a str,
    pub seat: &'a SeatId,
    pub worker: &'a WorkerId,
    /// The plan step a build or checkpoint turn works on.
    pub step: Option<&'a str>,
    /// This lane must not see the other lanes' output.
    pub blind: bool,
}

impl LineView<'_> {
    /// Whether a record by `worker` in `seat` is this lane's own output. By seat too: a
    /// worker that drafted and then merged as the lead wrote the merge in another lane,
    /// and the merge holds the other drafts.
    fn own(&self, worker: &WorkerId, seat: &SeatId) -> bool {
        worker == self.worker && seat == self.seat
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OmitReason {
    /// Another lane's output, withheld from a blind lane.
    Blind,
    /// It did not fit the budget.
    Budget,
}

/// A record left out of the block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    /// A record id (`N4`, `P2`), or `P3 step 7` for a step of a plan.
    pub item: String,
    pub reason: OmitReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineBrief {
    /// Markdown; empty when the station has nothing of the line to show.
    pub text: String,
    pub tokens: usize,
    /// The items shown, in the order shown.
    pub shown: Vec<String>,
    pub omitted: Vec<Omitted>,
    /// Even the block's headings and its list of what was left out exceed the budget.
    pub over_budget: bool,
}

/// One renderable item, in priority order.
struct Item {
    id: String,
    /// The heading it goes under; items of one heading are contiguous.
    heading: String,
    line: String,
}

/// The line block for `view` within `budget` tokens.
pub fn brief(
    state: &ExecutionState,
    view: &LineView<'_>,
    budget: usize,
    estimator: &dyn TokenEstimator,
) -> LineBrief {
    let (items, withheld) = items(state, view);
    let mut omitted: Vec<Omitted> = withheld
        .into_iter()
        .map(|item| Omitted {
            item,
            reason: OmitReason::Blind,
        })
        .collect();
    // Greedy in priority order, measured on the whole rendered block each time (with
    // its list of what is still left out), so the block that is returned fits.
    let mut shown = vec![false; items.len()];
    let over_budget = estimator.count(&render(&items, &shown, &omitted)) > budget;
    if !over_budget {
        for i in 0..items.len() {
            shown[i] = true;
            if estimator.count(&render(&items, &shown, &omitted)) > budget {
                shown[i] = false;
            }
        }
    }
    for (item, shown) in items.iter().zip(&shown) {
        if !shown {
            omitted.push(Omitted {
                item: item.id.clone(),
                reason: OmitReason::Budget,
            });
        }
    }
    // What is left out for the budget is rendered from `shown`: this is the text of
    // the last item accepted.
    let text = render(&items, &shown, &omitted);
    LineBrief {
        tokens: estimator.count(&text),
        text,
        shown: items
            .iter()
            .zip(&shown)
            .filter(|(_, s)| **s)
            .map(|(i, _)| i.id.clone())
            .collect(),
        omitted,
        over_budget,
    }
}

/// What the station shows, in priority order, and what a blind lane is not shown.
fn items(state: &ExecutionState, view: &LineView<'_>) -> (Vec<Item>, Vec<String>) {
    let mut items = Vec::new();
    let mut withheld = Vec::new();
    match view.kind {
        StationKind::Plan => {
            for p in state
                .plan_versions
                .iter()
                .filter(|p| p.station == view.station)
            {
                if view.blind && !view.own(&p.provenance.recorded_by, &p.seat) {
                    withheld.push(p.id.clone());
                } else {
                    items.push(draft(p));
                }
            }
        }
        StationKind::PlanLoop => {
            let current = state.locked_plan().or(state.plan_versions.last());
            if let Some(plan) = current {
                plan_steps(plan, state.plan_lock.is_some(), None, &mut items);
            }
            findings(
                state,
                view,
                |f| f.station == view.station,
                &mut items,
                &mut withheld,
            );
        }
        StationKind::Build => {
            if let Some(plan) = state.locked_plan() {
                plan_steps(plan, true, view.step, &mut items);
            }
            // The step's own checkpoint findings, and a fix round's: those raised without
            // a step after the lock (the plan loop's came before it and are about the
            // plan, which no longer changes).
            let locked_at = state.plan_lock.as_ref().map(|l| l.provenance.turn);
            let after_lock = |f: &Finding| locked_at.is_some_and(|t| f.provenance.turn > t);
            findings(
                state,
                view,
                |f| match &f.step {
                    Some(step) => Some(step.as_str()) == view.step,
                    None => after_lock(f),
                },
                &mut items,
                &mut withheld,
            );
        }
        StationKind::Review => {
            if let Some(plan) = state.locked_plan() {
                plan_steps(plan, true, None, &mut items);
            }
            findings(
                state,
                view,
                |f| f.station == view.station,
                &mut items,
                &mut withheld,
            );
        }
        StationKind::Intake
        | StationKind::Discovery
        | StationKind::Synthesis
        | StationKind::Gate
        | StationKind::Merge => {}
    }
    (items, withheld)
}

fn plan_steps(plan: &PlanVersion, locked: bool, step: Option<&str>, items: &mut Vec<Item>) {
    let heading = if locked {
        format!(
            "The locked plan ({}, sha256 {})",
            plan.id,
            super::short_hash(&plan.content_hash)
        )
    } else {
        format!(
            "The plan under scrutiny ({}, version {})",
            plan.id, plan.version
        )
    };
    for (i, s) in plan.steps.iter().enumerate() {
        let n = i + 1;
        let mut line = format!("{n}. ");
        if !s.tags.is_empty() {
            let _ = write!(line, "[{}] ", s.tags.join(", "));
        }
        line.push_str(&s.title);
        // Build steps are numbered as the plan is; `T3` is the locked plan's step 3.
        if step == Some(format!("T{n}").as_str()) {
            line.push_str("  ← this step");
        }
        items.push(Item {
            id: format!("{} step {n}", plan.id),
            heading: heading.clone(),
            line,
        });
    }
}

fn draft(p: &PlanVersion) -> Item {
    let mut line = format!(
        "### {} by {} ({})\n",
        p.id, p.provenance.recorded_by, p.seat
    );
    for (i, s) in p.steps.iter().enumerate() {
        let _ = write!(line, "{}. ", i + 1);
        if !s.tags.is_empty() {
            let _ = write!(line, "[{}] ", s.tags.join(", "));
        }
        let _ = writeln!(line, "{}", s.title);
    }
    if let Some(r) = &p.rationale {
        let _ = writeln!(line, "Rationale: {r}");
    }
    Item {
        id: p.id.clone(),
        heading: "Plan drafts".into(),
        line: line.trim_end().to_string(),
    }
}

/// Open findings `keep` admits, strictest first, then in record order.
fn findings(
    state: &ExecutionState,
    view: &LineView<'_>,
    keep: impl Fn(&Finding) -> bool,
    items: &mut Vec<Item>,
    withheld: &mut Vec<String>,
) {
    let mut open: Vec<&Finding> = state
        .findings
        .iter()
        .filter(|f| f.is_open() && keep(f))
        .collect();
    open.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for f in open {
        // A blind lane sees its own findings (it raised them), never another lane's.
        if view.blind && !view.own(&f.provenance.recorded_by, &f.seat) {
            withheld.push(f.id.clone());
            continue;
        }
        items.push(Item {
            id: f.id.clone(),
            heading: "Open findings".into(),
            line: finding_line(f),
        });
    }
}

fn finding_line(f: &Finding) -> String {
    let mut line = format!(
        "- {} {} at {}: {} (raised by {} at {}",
        f.id, f.severity, f.location, f.what, f.provenance.recorded_by, f.seat
    );
    for v in &f.voices {
        let _ = write!(line, "; also {} {}", v.by, v.severity);
    }
    if let Some(claim) = &f.fix_claimed {
        let _ = write!(
            line,
            "; fix claimed by {} at turn {}, not yet confirmed",
            claim.by, claim.turn
        );
    }
    line.push(')');
    line
}

fn render(items: &[Item], shown: &[bool], omitted: &[Omitted]) -> String {
    let mut out = String::new();
    let mut heading: Option<&str> = None;
    for (item, _) in items.iter().zip(shown).filter(|(_, s)| **s) {
        if heading != Some(&item.heading) {
            if heading.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "## {}", item.heading);
            heading = Some(&item.heading);
        }
        let _ = writeln!(out, "{}", item.line);
    }
    let not_shown: Vec<&Item> = items
        .iter()
        .zip(shown)
        .filter(|(_, s)| !**s)
        .map(|(i, _)| i)
        .collect();
    let blind = omitted
        .iter()
        .filter(|o| o.reason == OmitReason::Blind)
        .count();
    if not_shown.is_empty() && blind == 0 {
        return out;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str("## Not shown\n");
    if !not_shown.is_empty() {
        // A count and the first id keep this list a fixed size, so that it cannot
        // itself crowd out what it reports; every id is in the package's report.
        let _ = writeln!(
            out,
            "- {} item{} over the budget, from {}",
            not_shown.len(),
            if not_shown.len() == 1 { "" } else { "s" },
            not_shown[0].id
        );
    }
    if blind > 0 {
        let _ = writeln!(
            out,
            "- {blind} record{} by other lanes, withheld: this lane works blind",
            if blind == 1 { "" } else { "s" }
        );
    }
    out
}

#[cfg(test)]
#[path = "brief_tests.rs"]
mod tests;
