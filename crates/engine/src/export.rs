//! Exports: the whole record as JSON, a readable Markdown report, and a replay script
//! (JSONL) that the scripted gateway plays back byte for byte.

use std::fmt::Write as _;

use baton_core::ErrorClass;
use baton_core::ids::RunId;
use baton_core::state::{ExecutionState, IssueStatus};
use baton_core::turn::TurnRecord;
use baton_gateway::scripted::{ScriptLine, ScriptedError, ScriptedUsage};
use baton_store::{Store, StoredEvent};
use serde::Serialize;

use crate::report::{self, RunReport};
use crate::{Error, Result};

#[derive(Serialize)]
struct JsonExport<'a> {
    format: &'static str,
    run: &'a baton_store::RunInfo,
    state: &'a ExecutionState,
    turns: &'a [TurnRecord],
    events: &'a [StoredEvent],
    /// A routed run's pins (the key is left out for any other run).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pins: &'a [baton_store::StoredPin],
}

pub fn json(store: &dyn Store, run: &RunId) -> Result<String> {
    let (report, state, turns) = report::build(store, run)?;
    let events = store.events(run, 0)?;
    let doc = JsonExport {
        format: "baton-run/1",
        run: &report.run,
        state: &state,
        turns: &turns,
        events: &events,
        pins: &report.pins,
    };
    serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::Config(format!("cannot serialise run: {e}")))
}

/// The run's archive (`baton-archive/1`): every row the store keeps for it, which
/// `baton import` writes into another database (see `baton_store::RunArchive`).
pub fn archive(store: &dyn Store, run: &RunId) -> Result<String> {
    Ok(store.archive_run(run)?.to_text()?)
}

/// The run's stored event stream, rendered as the CLI renders the live one (the same
/// renderer): what `baton run` printed as the run went, model calls too with `verbose`.
pub fn events(store: &dyn Store, run: &RunId, verbose: bool) -> Result<String> {
    let events = store.events(run, 0)?;
    Ok(baton_protocol::render::lines(
        events.iter().map(|e| &e.event),
        verbose,
    ))
}

/// The run's stored events, one JSON `Envelope` a line (the shape a live subscriber
/// receives).
pub fn events_jsonl(store: &dyn Store, run: &RunId) -> Result<String> {
    let mut out = String::new();
    for e in store.events(run, 0)? {
        let envelope = baton_protocol::Envelope {
            seq: Some(e.seq),
            event: e.event,
        };
        let line = serde_json::to_string(&envelope)
            .map_err(crate::unencodable("an event of the export"))?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// One line per model call that returned output or a classified error.
pub fn script(store: &dyn Store, run: &RunId) -> Result<String> {
    let mut out = String::new();
    for t in store.turns(run)? {
        for c in &t.calls {
            let line = match (&c.output, &c.error) {
                (Some(output), _) => ScriptLine {
                    turn: t.turn,
                    call: c.call,
                    output: Some(output.clone()),
                    error: None,
                    usage: c.usage.map(|u| ScriptedUsage {
                        input_tokens: u.input_tokens,
                        output_tokens: u.output_tokens,
                        cached_tokens: u.cached_tokens,
                    }),
                },
                (None, Some(err)) => ScriptLine {
                    turn: t.turn,
                    call: c.call,
                    output: None,
                    error: Some(match (&c.error_class, &c.error_message) {
                        // The class and the gateway's own words, kept apart: replayed,
                        // the call fails with exactly the words it failed with.
                        (Some(class), Some(message)) => ScriptedError {
                            class: class.clone(),
                            message: message.clone(),
                            verbatim: true,
                        },
                        // Recorded by an older baton, as "<class>[ after N attempts]: …".
                        _ => ScriptedError {
                            class: err
                                .split([':', ' '])
                                .next()
                                .filter(|c| !c.is_empty())
                                .map_or(ErrorClass::ServerError, ErrorClass::from_name),
                            message: err.clone(),
                            verbatim: false,
                        },
                    }),
                    usage: None,
                },
                (None, None) => continue,
            };
            let text = serde_json::to_string(&line)
                .map_err(crate::unencodable("a line of the replay script"))?;
            out.push_str(&text);
            out.push('\n');
        }
    }
    Ok(out)
}

pub fn markdown(store: &dyn Store, run: &RunId) -> Result<String> {
    let (report, state, turns) = report::build(store, run)?;
    Ok(render_markdown(&report, &state, &turns))
}

fn render_markdown(r: &RunReport, state: &ExecutionState, turns: &[TurnRecord]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# baton run {}\n", r.run.id);
    let _ = writeln!(md, "**Objective:** {}\n", state.objective);
    let _ = writeln!(
        md,
        "Status: {} · turns: {} ({} failed) · steps done: {}/{} · tokens sent: {} · conversations passed between workers: {} (measured over {} requests)\n",
        r.run.status.as_str(),
        r.turns.len(),
        r.failed_turns,
        state.steps_done(),
        state.plan.len(),
        r.tokens_sent,
        r.conversations_passed,
        r.requests_audited
    );
    let _ = writeln!(
        md,
        "Provider-reported tokens: {} input ({} cached), {} output{}\n",
        r.reported.input_tokens,
        r.reported.cached_tokens,
        r.reported.output_tokens,
        r.cost_micro_usd
            .map(|c| format!(" · cost {}", report::dollars(c)))
            .unwrap_or_default()
    );
    md.push_str("## Plan\n\n");
    for s in &state.plan {
        let by = match (&s.done_by, s.done_at_turn) {
            (Some(w), Some(t)) => format!(" — done by {w} at turn {t}"),
            _ => String::new(),
        };
        // Tags and a stated scope only when the plan gives them: an untagged plan's
        // report reads as before.
        let mut marks = Vec::new();
        if !s.tags.is_empty() {
            let tags: Vec<&str> = s.tags.iter().map(|t| t.as_str()).collect();
            marks.push(format!("tags: {}", tags.join(", ")));
        }
        if let Some(scope) = s.scope {
            marks.push(format!("scope: {}", scope.as_str()));
        }
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!(" ({})", marks.join("; "))
        };
        let _ = writeln!(
            md,
            "- [{}] {} {}{marks}{by}",
            if s.done_by.is_some() { "x" } else { " " },
            s.id,
            s.title
        );
    }
    if !state.decisions.is_empty() {
        md.push_str("\n## Decisions\n\n");
    }
    for d in &state.decisions {
        let reason = d.reason.as_deref().unwrap_or("(no reason given)");
        let _ = writeln!(
            md,
            "- **{}** {} — *because* {} ({} via {}, turn {}{})",
            d.id,
            d.text,
            reason,
            d.provenance.recorded_by,
            d.provenance.model,
            d.provenance.turn,
            if d.reaffirmed.is_empty() {
                String::new()
            } else {
                format!("; reaffirmed {}×", d.reaffirmed.len())
            }
        );
    }
    if !state.artifacts.is_empty() {
        md.push_str("\n## Artifacts\n\n");
    }
    for a in &state.artifacts {
        let latest = a.latest();
        let modifiers: Vec<String> = a.modifiers().iter().map(|w| w.to_string()).collect();
        let _ = writeln!(
            md,
            "- **{}** `{}` v{} — {} (created by {}{}; {})",
            a.id,
            a.name,
            latest.version,
            latest.description,
            a.creator(),
            if modifiers.is_empty() {
                String::new()
            } else {
                format!(", modified by {}", modifiers.join(", "))
            },
            if latest.verified {
                "verified"
            } else {
                "NOT verified"
            }
        );
    }
    if !state.issues.is_empty() {
        md.push_str("\n## Issues\n\n");
    }
    for i in &state.issues {
        let status = match i.status {
            IssueStatus::Open => "open",
            IssueStatus::Resolved => "resolved",
        };
        let claim = i
            .resolution_claimed_by
            .as_ref()
            .map(|c| {
                format!(
                    " — resolution claimed by {} at turn {}{}",
                    c.by,
                    c.turn,
                    if i.verified_by.is_some() {
                        ""
                    } else {
                        ", NOT verified"
                    }
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "- **{}** [{}] [{status}] {}{claim}",
            i.id,
            i.severity.as_str(),
            i.title
        );
    }
    if !state.failed_attempts.is_empty() {
        md.push_str("\n## Failed attempts\n\n");
    }
    for f in &state.failed_attempts {
        let _ = writeln!(
            md,
            "- **{}** {} — {} ({}, turn {})",
            f.id, f.what, f.why, f.provenance.recorded_by, f.provenance.turn
        );
    }
    if !state.assumptions.is_empty() {
        md.push_str("\n## Assumptions\n\n");
    }
    for a in &state.assumptions {
        let _ = writeln!(
            md,
            "- **{}** {} ({}, turn {})",
            a.id, a.text, a.provenance.recorded_by, a.provenance.turn
        );
    }
    if let Some(n) = &state.next_action {
        let _ = writeln!(
            md,
            "\n## Next action\n\n{} ({}, turn {})",
            n.text, n.provenance.recorded_by, n.provenance.turn
        );
    }
    md.push_str("\n## Turns\n\n");
    md.push_str(report::MARKDOWN_TURN_HEADER);
    for t in &r.turns {
        md.push_str(&report::render_row(t, report::RowFormat::Markdown));
    }
    if !r.pins.is_empty() {
        md.push_str("\n## Pins\n\n| turn | seat | worker | model | family | pool | phase | at | why | pools used | left out |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for p in &r.pins {
        let pin = &p.pin;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.turn,
            report::cell(pin.seat.as_str()),
            report::cell(pin.worker.as_str()),
            report::cell(&pin.model),
            report::cell(&pin.family),
            report::cell(pin.pool.as_str()),
            report::cell(&pin.phase),
            pin.at,
            report::cell(&pin.reason.to_string()),
            report::fractions(pin),
            report::cell(&report::left_out(pin))
        );
    }
    md.push_str("\n## Model calls\n\n| turn | call | worker | model | sent (estimated) | provider in/cached/out | cost | attempts | ms | error |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for t in turns {
        for c in &t.calls {
            let usage = c
                .usage
                .map(|u| format!("{}/{}/{}", u.input_tokens, u.cached_tokens, u.output_tokens))
                .unwrap_or_else(|| "—".into());
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {usage} | {} | {} | {} | {} |",
                t.turn,
                c.call.as_str(),
                c.worker,
                c.model,
                c.tokens_sent,
                c.cost_micro_usd
                    .map(report::dollars)
                    .unwrap_or_else(|| "—".into()),
                c.attempts.len().max(1),
                c.duration_ms,
                c.error.as_deref().map(report::cell).unwrap_or_default()
            );
        }
    }
    md.push_str("\n## What the engine refused or flagged\n\n");
    for (t, row) in turns.iter().zip(&r.turns) {
        for refusal in &row.refusals {
            let _ = writeln!(
                md,
                "- turn {} ({}): refused `{}` — {}",
                t.turn, t.worker, refusal.claim, refusal.reason
            );
        }
        for w in &row.warnings {
            let _ = writeln!(md, "- turn {} ({}): warning — {w}", t.turn, t.worker);
        }
        if let Some(e) = &row.error {
            let _ = writeln!(md, "- turn {} ({}): turn failed — {e}", t.turn, t.worker);
        }
    }
    md
}
