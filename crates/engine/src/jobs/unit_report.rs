//! A unit's report, in Markdown: every station with its turns, tokens and cost, every
//! pin the router made, every finding and how it was resolved, what was never
//! verified, the gates, tokens and cost per pool, and where the outbox is. Read only
//! from the record (the store's turns and pins, the unit's state).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use baton_core::line::{ClosedBy, FindingStatus};
use baton_core::turn::{TurnRecord, TurnStatus};

use super::unit::UnitOutbox;
use crate::Result;
use crate::orchestrator::{Engine, Session};

/// Tokens and cost of some turns.
#[derive(Default)]
struct Spent {
    turns: u32,
    failed: u32,
    sent: u64,
    received: u64,
    /// Millionths of a US dollar; `None` once any call had no price.
    micro_usd: Option<u64>,
    unpriced: u32,
}

impl Spent {
    fn add(&mut self, t: &TurnRecord) {
        self.turns += 1;
        if t.status == TurnStatus::Failed {
            self.failed += 1;
        }
        for c in &t.calls {
            self.sent += c.tokens_sent as u64;
            self.received += c.tokens_received as u64;
            match c.cost_micro_usd {
                Some(m) => *self.micro_usd.get_or_insert(0) += m,
                None => self.unpriced += 1,
            }
        }
    }

    fn cost(&self) -> String {
        match (self.micro_usd, self.unpriced) {
            (Some(m), 0) => format!("${:.4}", m as f64 / 1e6),
            (Some(m), n) => format!("${:.4} + {n} unpriced call(s)", m as f64 / 1e6),
            (None, 0) => "no calls".into(),
            (None, n) => format!("{n} unpriced call(s)"),
        }
    }
}

/// The station a turn worked at: its lane's, or for the line's own turns the station
/// their task names ("Gates at gate").
fn station_of(t: &TurnRecord) -> String {
    match &t.lane {
        Some(lane) => lane.station.clone(),
        None => (t.assignment.task.split_once(" at "))
            .and_then(|(_, rest)| rest.split([':', ' ']).next())
            .unwrap_or("(the line)")
            .to_string(),
    }
}

/// The report of `session`'s unit (with its outbox, when the merge station wrote one).
pub fn markdown(engine: &Engine, session: &Session, outbox: Option<&UnitOutbox>) -> Result<String> {
    let store = engine.store();
    let turns = store.turns(&session.run)?;
    let pins = store.pins(&baton_store::PinFilter::run(&session.run))?;
    let state = &session.state;
    let mut out = String::new();
    let _ = writeln!(out, "# Unit {}\n\n{}\n", session.run, state.objective);
    let route = session.config.line.as_ref();
    let _ = writeln!(
        out,
        "Route {}; {} turns; verdict: {}.",
        route.map_or("(none)", |r| r.name.as_str()),
        turns.len(),
        state.verdicts.last().map_or("none".to_string(), |v| {
            let mut s = v.verdict.as_str().to_string();
            if !v.reasons.is_empty() {
                let _ = write!(s, " ({})", v.reasons.join("; "));
            }
            s
        })
    );

    // Stations, in the route's order, then any the route does not name.
    let mut by_station: BTreeMap<String, Spent> = BTreeMap::new();
    for t in &turns {
        by_station.entry(station_of(t)).or_default().add(t);
    }
    let mut order: Vec<String> = route
        .map(|r| r.stations.iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default();
    order.extend(
        by_station
            .keys()
            .filter(|k| !order.contains(k))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let _ = writeln!(out, "\n## Stations\n");
    let _ = writeln!(
        out,
        "| station | turns | failed | tokens sent | tokens received | cost | seats held |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for station in &order {
        let Some(spent) = by_station.get(station) else {
            continue;
        };
        let mut held: Vec<String> = Vec::new();
        for p in pins
            .iter()
            .filter(|p| p.pin.phase.split(" round ").next() == Some(station.as_str()))
        {
            let who = format!(
                "{} {} ({}, pool {})",
                p.pin.seat, p.pin.worker, p.pin.family, p.pin.pool
            );
            if !held.contains(&who) {
                held.push(who);
            }
        }
        let _ = writeln!(
            out,
            "| {station} | {} | {} | {} | {} | {} | {} |",
            spent.turns,
            spent.failed,
            spent.sent,
            spent.received,
            spent.cost(),
            if held.is_empty() {
                "the engine".to_string()
            } else {
                held.join("; ")
            }
        );
    }

    let _ = writeln!(out, "\n## Pins\n");
    if pins.is_empty() {
        let _ = writeln!(out, "None: no seat was filled by the router.");
    }
    for p in &pins {
        let _ = writeln!(
            out,
            "- turn {}: {} held by {} ({}, {}, pool {}) for {}",
            p.turn, p.pin.seat, p.pin.worker, p.pin.model, p.pin.family, p.pin.pool, p.pin.phase
        );
    }

    let _ = writeln!(out, "\n## Findings\n");
    if state.findings.is_empty() {
        let _ = writeln!(out, "None raised.");
    }
    for f in &state.findings {
        let how = match (&f.status, &f.closed) {
            (FindingStatus::Open, _) => match &f.fix_claimed {
                Some(c) => format!(
                    "OPEN: a fix was claimed by {} at turn {}, never confirmed",
                    c.by, c.turn
                ),
                None => "OPEN".to_string(),
            },
            (status, Some(c)) => {
                let by = match &c.by {
                    ClosedBy::Confirmed { seat, worker } => {
                        format!("confirmed by {worker} at {seat}")
                    }
                    ClosedBy::Gate { gate } => format!("gate {gate} passed"),
                    ClosedBy::Lead { seat, worker } => format!("by the lead {worker} at {seat}"),
                    ClosedBy::Human => "by a human".to_string(),
                };
                let note = c
                    .note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default();
                format!("{} at turn {}, {by}{note}", status.as_str(), c.turn)
            }
            (status, None) => status.as_str().to_string(),
        };
        let step = f
            .step
            .as_deref()
            .map(|s| format!(" step {s}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- {} [{}] at {}{step} round {} by {} ({}): {} ({}) — {how}",
            f.id,
            f.severity.as_str(),
            f.station,
            f.round,
            f.provenance.recorded_by,
            f.seat,
            f.what,
            f.location
        );
    }

    let _ = writeln!(out, "\n## Never verified\n");
    let mut unverified = Vec::new();
    for a in &state.artifacts {
        if let Some(v) = a.versions.last().filter(|v| !v.verified) {
            unverified.push(format!(
                "artifact {} `{}` v{} (claimed by {})",
                a.id, a.name, v.version, v.provenance.recorded_by
            ));
        }
    }
    for i in state
        .issues
        .iter()
        .filter(|i| i.status == baton_core::state::IssueStatus::Open)
    {
        unverified.push(format!(
            "issue {} [{}] still open: {}",
            i.id,
            i.severity.as_str(),
            i.title
        ));
    }
    if unverified.is_empty() {
        let _ = writeln!(
            out,
            "Nothing: every artifact was seen on disk and no issue is open."
        );
    }
    for u in unverified {
        let _ = writeln!(out, "- {u}");
    }

    let _ = writeln!(out, "\n## Gates\n");
    let gated: Vec<(u32, &baton_core::turn::GateResult)> = (turns.iter())
        .filter_map(|t| Some((t.turn, &t.workspace.as_ref()?.gates)))
        .flat_map(|(turn, gates)| gates.iter().map(move |g| (turn, g)))
        .collect();
    if gated.is_empty() {
        let _ = writeln!(out, "None ran: nothing was checked mechanically.");
    }
    // Every run, in order: a failure that sent the unit back stays in the report.
    for (turn, g) in gated {
        let _ = writeln!(
            out,
            "- turn {turn}: {} (`{}`) on {}: {} in {} ms",
            g.name,
            g.command,
            &g.commit[..g.commit.len().min(12)],
            if g.passed { "passed" } else { "FAILED" },
            g.duration_ms
        );
    }

    let _ = writeln!(out, "\n## Tokens and cost per pool\n");
    let pool_of: BTreeMap<&str, String> = (session.config.roster.workers.iter())
        .map(|w| {
            (
                w.id.as_str(),
                w.pool
                    .as_ref()
                    .map_or("(no pool)".to_string(), |p| p.to_string()),
            )
        })
        .collect();
    let mut by_pool: BTreeMap<String, Spent> = BTreeMap::new();
    for t in turns.iter().filter(|t| !t.calls.is_empty()) {
        let pool = pool_of
            .get(t.worker.as_str())
            .cloned()
            .unwrap_or_else(|| "(no pool)".into());
        by_pool.entry(pool).or_default().add(t);
    }
    let _ = writeln!(
        out,
        "| pool | turns | tokens sent | tokens received | cost |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (pool, spent) in &by_pool {
        let _ = writeln!(
            out,
            "| {pool} | {} | {} | {} | {} |",
            spent.turns,
            spent.sent,
            spent.received,
            spent.cost()
        );
    }

    if let Some(o) = outbox {
        let _ = writeln!(out, "\n## Outbox\n");
        let _ = writeln!(
            out,
            "Branch `{}` at {} on base {}: {} file(s) changed, +{} -{}.\n\nPatch: `{}`. {}.",
            o.branch,
            &o.head[..o.head.len().min(12)],
            &o.base[..o.base.len().min(12)],
            o.files_changed,
            o.insertions,
            o.deletions,
            o.patch_file.display(),
            match &o.landing {
                Some(landing) => {
                    let said = landing.describe();
                    let mut first = said.chars();
                    first
                        .next()
                        .map(|c| c.to_uppercase().chain(first).collect::<String>())
                        .unwrap_or_default()
                }
                None => "Nothing was merged into the base branch (no `--merge`)".into(),
            }
        );
    }
    Ok(out)
}
