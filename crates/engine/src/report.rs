//! A run's account, computed from the store: who did what, what each was handed, what
//! the engine refused, and the measured transfer audit. Shared by the CLI's summaries
//! and the Markdown export.

use std::fmt::Write as _;

use baton_core::claims::Refusal;
use baton_core::compiler::Section;
use baton_core::router::Pin;
use baton_core::state::{ExecutionState, IssueStatus};
use baton_core::turn::{ReportedUsage, TurnRecord, TurnStatus};
use baton_protocol::render::n;
use baton_store::{PinFilter, RunInfo, Store, StoredPin};
use serde::Serialize;

use crate::Result;

#[derive(Debug, Clone, Serialize)]
pub struct TurnRow {
    pub turn: u32,
    pub worker: String,
    pub model: String,
    pub assignment: String,
    pub status: TurnStatus,
    pub package_tokens: usize,
    pub budget: usize,
    pub sections_included: Vec<String>,
    pub sections_omitted: Vec<String>,
    pub items_dropped: usize,
    pub tokens_sent: usize,
    pub tokens_received: usize,
    /// As the provider reported them, summed over the turn's calls.
    pub reported: ReportedUsage,
    /// Millionths of a dollar, when the roster gives prices.
    pub cost_micro_usd: Option<u64>,
    pub refusals: Vec<Refusal>,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    /// The start of what a truncated call's model wrote before it was cut off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_off: Option<String>,
    pub conversations_passed: u32,
    pub messages_per_call: Vec<u32>,
    /// The turn's commit and gate runs, for workers in a workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<baton_core::turn::WorkspaceTurn>,
    /// A routed run's seating of the turn: the pin in force for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat: Option<TurnSeat>,
}

/// The pin a routed turn worked under, and the turn that wrote it (this one for a new
/// seating, an earlier one when the pin held).
#[derive(Debug, Clone, Serialize)]
pub struct TurnSeat {
    pub pinned_at_turn: u32,
    pub pin: Pin,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run: RunInfo,
    pub turns: Vec<TurnRow>,
    pub tokens_sent: usize,
    pub tokens_received: usize,
    pub reported: ReportedUsage,
    pub cost_micro_usd: Option<u64>,
    /// Sum over every turn's measured transfer audit.
    pub conversations_passed: u32,
    /// Requests audited and earlier outputs checked against them.
    pub requests_audited: usize,
    pub prior_outputs_checked: u64,
    pub refusals: usize,
    pub warnings: usize,
    pub failed_turns: usize,
    /// A routed run's pins, in the order written (none for any other run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<StoredPin>,
}

pub fn row(t: &TurnRecord) -> TurnRow {
    let p = &t.package;
    TurnRow {
        turn: t.turn,
        worker: t.worker.to_string(),
        model: t.model.clone(),
        assignment: match &t.assignment.step_id {
            Some(id) => format!("{id} {}", t.assignment.task),
            None => "continuation".into(),
        },
        status: t.status,
        package_tokens: p.tokens,
        budget: p.budget,
        sections_included: p
            .sections
            .iter()
            .filter(|s| s.included && (s.items_included > 0 || is_text_section(s.section)))
            .map(|s| s.section.title().to_string())
            .collect(),
        sections_omitted: p.omitted_titles(),
        items_dropped: p.dropped_count(),
        tokens_sent: t.calls.iter().map(|c| c.tokens_sent).sum(),
        tokens_received: t.calls.iter().map(|c| c.tokens_received).sum(),
        reported: sum_usage(t.calls.iter().filter_map(|c| c.usage)),
        cost_micro_usd: sum_cost(t.calls.iter().map(|c| c.cost_micro_usd)),
        refusals: t.outcome.refusals.clone(),
        warnings: t.outcome.warnings.clone(),
        error: t.error.clone(),
        cut_off: t
            .calls
            .iter()
            .rev()
            .find_map(|c| c.partial_output.as_deref())
            .map(|p| baton_core::reconciler::clip(&p.replace('\n', " "), 160)),
        conversations_passed: t.audit.conversations_passed(),
        messages_per_call: t.audit.messages_per_call.clone(),
        workspace: t.workspace.clone(),
        seat: None,
    }
}

/// The pin `t` worked under: the latest pin of its worker in its step's phase written
/// at or before it.
fn seat_of_turn(t: &TurnRecord, pins: &[StoredPin]) -> Option<TurnSeat> {
    let phase = crate::seating::phase_of_step(t.assignment.step_id.as_deref()?);
    pins.iter()
        .rev()
        .find(|p| p.turn <= t.turn && p.pin.phase == phase && p.pin.worker == t.worker)
        .map(|p| TurnSeat {
            pinned_at_turn: p.turn,
            pin: p.pin.clone(),
        })
}

/// "a 25%, b 100%": every pool's used share as a pin recorded it.
pub fn fractions(pin: &Pin) -> String {
    pin.fractions
        .iter()
        .map(|(pool, f)| format!("{pool} {:.0}%", f * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Who the router left out of `pin`'s seating and why, `worker: why` joined by `; `
/// (`-` when nobody was, `not recorded` for a pin written before baton kept them).
pub fn left_out(pin: &Pin) -> String {
    let Some(excluded) = &pin.excluded else {
        return "not recorded".into();
    };
    if excluded.is_empty() {
        return "-".into();
    }
    excluded
        .iter()
        .map(|e| format!("{}: {}", e.worker, e.why))
        .collect::<Vec<_>>()
        .join("; ")
}

/// How a turn's row is written. One renderer for both, so `baton history` and the
/// export say the same thing about a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// `baton history`: one line, then a line each for its error, what the model had
    /// written before a cut-off, its commit and gates, refusals and warnings.
    Text,
    /// A row of the Markdown export's turn table (under [`MARKDOWN_TURN_HEADER`]); its
    /// refusals, warnings and error are listed after the table.
    Markdown,
}

/// The head of the Markdown export's turn table, whose rows [`render_row`] writes.
pub const MARKDOWN_TURN_HEADER: &str = "| turn | worker | model | assignment | status | package tokens | sent | reported in/cached/out | cost | omitted sections | dropped | refused | warnings |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";

impl TurnRow {
    pub fn status_word(&self) -> &'static str {
        match self.status {
            TurnStatus::Committed => "committed",
            TurnStatus::Failed => "FAILED",
        }
    }
}

/// A turn's row in `format`, ending in a line break.
pub fn render_row(t: &TurnRow, format: RowFormat) -> String {
    let mut out = String::new();
    match format {
        RowFormat::Text => {
            let _ = writeln!(
                out,
                "turn {:>3} · {} ({}) · {} · {} · briefing {}/{} · sent {} · received {}",
                t.turn,
                t.worker,
                t.model,
                t.assignment,
                t.status_word(),
                n(t.package_tokens as u64),
                n(t.budget as u64),
                n(t.tokens_sent as u64),
                n(t.tokens_received as u64)
            );
            text_details(t, &mut out);
        }
        RowFormat::Markdown => {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {}/{} | {} | {}/{}/{} | {} | {} | {} | {} | {} |",
                t.turn,
                cell(&t.worker),
                cell(&t.model),
                cell(&t.assignment),
                t.status_word(),
                t.package_tokens,
                t.budget,
                t.tokens_sent,
                t.reported.input_tokens,
                t.reported.cached_tokens,
                t.reported.output_tokens,
                t.cost_micro_usd.map(dollars).unwrap_or_else(|| "—".into()),
                if t.sections_omitted.is_empty() {
                    "—".to_string()
                } else {
                    cell(&t.sections_omitted.join(", "))
                },
                t.items_dropped,
                t.refusals.len(),
                t.warnings.len()
            );
        }
    }
    out
}

fn text_details(t: &TurnRow, out: &mut String) {
    if let Some(seat) = &t.seat {
        let pin = &seat.pin;
        if seat.pinned_at_turn == t.turn {
            let _ = writeln!(
                out,
                "      seat {}: seated {}, pool {} (pools used: {})",
                pin.seat,
                pin.reason,
                pin.pool,
                fractions(pin)
            );
        } else {
            let _ = writeln!(
                out,
                "      seat {}: pin of turn {} held (pool {})",
                pin.seat, seat.pinned_at_turn, pin.pool
            );
        }
    }
    if let Some(e) = &t.error {
        let _ = writeln!(out, "      error: {e}");
    }
    if let Some(cut) = &t.cut_off {
        let _ = writeln!(out, "      the model had written: {cut}");
    }
    if let Some(w) = &t.workspace {
        let short = &w.commit[..w.commit.len().min(12)];
        if w.changed {
            let _ = writeln!(
                out,
                "      commit {short}: {} file(s): {}",
                w.files.len(),
                w.files.join(", ")
            );
        } else {
            let _ = writeln!(out, "      no changes (head {short})");
        }
        for g in &w.gates {
            let _ = writeln!(
                out,
                "      gate {}: {} (exit {})",
                g.name,
                if g.passed { "passed" } else { "FAILED" },
                g.exit_code.map_or("none".into(), |c| c.to_string())
            );
        }
    }
    for x in &t.refusals {
        let _ = writeln!(out, "      refused {}: {}", x.claim, x.reason);
    }
    for w in &t.warnings {
        let _ = writeln!(out, "      warning: {w}");
    }
}

/// Text for one Markdown table cell: a `|` would end the cell and a line break the row.
pub fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn sum_usage(usages: impl Iterator<Item = ReportedUsage>) -> ReportedUsage {
    usages.fold(ReportedUsage::default(), |a, u| ReportedUsage {
        input_tokens: a.input_tokens + u.input_tokens,
        output_tokens: a.output_tokens + u.output_tokens,
        cached_tokens: a.cached_tokens + u.cached_tokens,
    })
}

/// The total when any part is priced.
fn sum_cost(costs: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    costs.fold(None, |a, c| match (a, c) {
        (None, None) => None,
        (a, c) => Some(a.unwrap_or(0) + c.unwrap_or(0)),
    })
}

/// `$0.012345` from millionths of a dollar.
pub fn dollars(micro: u64) -> String {
    format!("${}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

fn is_text_section(s: Section) -> bool {
    matches!(s, Section::AssignedTask | Section::Objective)
}

pub fn build(
    store: &dyn Store,
    run: &baton_core::ids::RunId,
) -> Result<(RunReport, ExecutionState, Vec<TurnRecord>)> {
    let info = store.run_info(run)?;
    let state = store.load_state(run)?;
    let turns = store.turns(run)?;
    let pins = store.pins(&PinFilter::run(run))?;
    let rows: Vec<TurnRow> = turns
        .iter()
        .map(|t| TurnRow {
            seat: seat_of_turn(t, &pins),
            ..row(t)
        })
        .collect();
    let report = RunReport {
        run: info,
        tokens_sent: rows.iter().map(|r| r.tokens_sent).sum(),
        tokens_received: rows.iter().map(|r| r.tokens_received).sum(),
        reported: sum_usage(rows.iter().map(|r| r.reported)),
        cost_micro_usd: sum_cost(rows.iter().map(|r| r.cost_micro_usd)),
        conversations_passed: rows.iter().map(|r| r.conversations_passed).sum(),
        requests_audited: turns.iter().map(|t| t.audit.messages_per_call.len()).sum(),
        prior_outputs_checked: turns
            .iter()
            .map(|t| u64::from(t.audit.prior_outputs_checked))
            .sum(),
        refusals: rows.iter().map(|r| r.refusals.len()).sum(),
        warnings: rows.iter().map(|r| r.warnings.len()).sum(),
        failed_turns: rows
            .iter()
            .filter(|r| r.status == TurnStatus::Failed)
            .count(),
        turns: rows,
        pins,
    };
    Ok((report, state, turns))
}

/// Open issues whose resolution was claimed but never verified.
pub fn unverified_resolutions(state: &ExecutionState) -> Vec<String> {
    state
        .issues
        .iter()
        .filter(|i| i.status == IssueStatus::Open)
        .filter_map(|i| {
            i.resolution_claimed_by.as_ref().map(|c| {
                format!(
                    "{} \"{}\" — resolution claimed by {} at turn {}, not verified: still open",
                    i.id, i.title, c.by, c.turn
                )
            })
        })
        .collect()
}
