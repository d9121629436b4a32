//! `baton seats [RUN]` (the ledger: who holds each seat of a routed run now, since when
//! and why) and `baton pins [RUN|--all]` (the pin log, filtered by seat, pool, phase and
//! time). Both read the pins the engine wrote with the turns they seated.

use std::process::ExitCode;

use anyhow::{Context, Result};
use baton_core::ids::{RunId, Timestamp};
use baton_core::router::{PoolId, SeatId};
use baton_core::state::{ExecutionState, StepTag};
use baton_engine::report::fractions;
use baton_engine::seating::phase_of;
use baton_store::{PinFilter, StoredPin};
use clap::Args;
use serde::Serialize;

use crate::commands::{Context_, resolve};

/// One seat as `baton seats` shows it: its latest pin.
#[derive(Debug, Serialize)]
struct SeatRow<'a> {
    seat: &'a SeatId,
    /// The turn whose commit wrote the pin: the seat is held since then.
    since_turn: u32,
    #[serde(flatten)]
    pin: &'a baton_core::router::Pin,
    /// The tags of the step the pin's phase is, which the seat's deny_tags read.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tags: &'a [StepTag],
}

/// What `baton seats RUN --json` prints (and the server's seat ledger): the latest pin
/// of each seat of run `id`.
pub(crate) fn seats_json(store: &dyn baton_store::Store, id: &RunId) -> Result<serde_json::Value> {
    let pins = store.pins(&PinFilter::run(id))?;
    let state = store.load_state(id)?;
    Ok(serde_json::to_value(ledger(&pins, &state))?)
}

/// `baton seats [RUN]`.
pub(crate) fn seats(ctx: &Context_, run: Option<&str>, json: bool) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let id = resolve(store.as_ref(), run)?;
    let pins = store.pins(&PinFilter::run(&id))?;
    let state = store.load_state(&id)?;
    let rows = ledger(&pins, &state);
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("{}", unrouted(&id));
        return Ok(ExitCode::SUCCESS);
    }
    for r in &rows {
        let tags: Vec<&str> = r.tags.iter().map(|t| t.as_str()).collect();
        println!(
            "{}: {} ({}, family {}, pool {}) since turn {} at {}: {} · phase {}{}",
            r.seat,
            r.pin.worker,
            r.pin.model,
            r.pin.family,
            r.pin.pool,
            r.since_turn,
            r.pin.at,
            r.pin.reason,
            r.pin.phase,
            if tags.is_empty() {
                String::new()
            } else {
                format!(" (tagged {})", tags.join(", "))
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The latest pin of each seat, seats by name, with the tags of its phase's step.
fn ledger<'a>(pins: &'a [StoredPin], state: &'a ExecutionState) -> Vec<SeatRow<'a>> {
    let mut latest: std::collections::BTreeMap<&SeatId, &StoredPin> = Default::default();
    for p in pins {
        latest.insert(&p.pin.seat, p);
    }
    latest
        .into_values()
        .map(|p| SeatRow {
            seat: &p.pin.seat,
            since_turn: p.turn,
            pin: &p.pin,
            tags: state
                .plan
                .iter()
                .find(|s| phase_of(s) == p.pin.phase)
                .map_or(&[], |s| s.tags.as_slice()),
        })
        .collect()
}

fn unrouted(run: &RunId) -> String {
    format!(
        "run {run} has no pins: its turns take the roster in order (seats are filled by the router only when the configuration has [[pools]] or [[seats]]; README: \"Seats, pools and the router\")"
    )
}

/// What `baton pins` selects.
#[derive(Args, Debug)]
pub struct PinsArgs {
    #[arg(conflicts_with = "all")]
    run: Option<String>,
    /// Every run's pins
    #[arg(long)]
    all: bool,
    /// Only this seat's
    #[arg(long)]
    seat: Option<String>,
    /// Only this pool's
    #[arg(long)]
    pool: Option<String>,
    /// Only this phase's (`step T2`)
    #[arg(long)]
    phase: Option<String>,
    /// Only pins made from this time (2026-12-02T09:00:00Z) or date (2026-12-02, midnight
    /// UTC) on
    #[arg(long)]
    since: Option<String>,
    /// Under each pin, every worker the router left out of that seating and why
    #[arg(long)]
    why: bool,
    #[arg(long)]
    json: bool,
}

/// `baton pins [RUN|--all]`.
pub(crate) fn pins(ctx: &Context_, q: &PinsArgs) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let run = if q.all {
        None
    } else {
        Some(resolve(store.as_ref(), q.run.as_deref())?)
    };
    let filter = PinFilter {
        run: run.clone(),
        seat: q.seat.as_deref().map(SeatId::new),
        pool: q.pool.as_deref().map(PoolId::new),
        phase: q.phase.clone(),
        since: q.since.as_deref().map(parse_since).transpose()?,
    };
    let pins = store.pins(&filter)?;
    if q.json {
        println!("{}", serde_json::to_string_pretty(&pins)?);
        return Ok(ExitCode::SUCCESS);
    }
    if pins.is_empty() {
        match (
            &run,
            filter == PinFilter::run(run.as_ref().unwrap_or(&RunId(String::new()))),
        ) {
            (Some(id), true) => println!("{}", unrouted(id)),
            _ => println!("no pins match"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for p in &pins {
        let pin = &p.pin;
        let run = if q.all {
            format!("run {} ", p.run_id)
        } else {
            String::new()
        };
        println!(
            "{run}turn {:>3} · {} · {} · {} ({}, family {}, pool {}) · {} · pools used: {} · {}",
            p.turn,
            pin.at,
            pin.seat,
            pin.worker,
            pin.model,
            pin.family,
            pin.pool,
            pin.phase,
            fractions(pin),
            pin.reason
        );
        if q.why {
            match &pin.excluded {
                None => println!(
                    "    left out: not recorded (the pin was written before baton kept exclusions)"
                ),
                Some(excluded) if excluded.is_empty() => println!("    left out: nobody"),
                Some(excluded) => {
                    for e in excluded {
                        println!("    left out: {} ({})", e.worker, e.why);
                    }
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_since(text: &str) -> Result<Timestamp> {
    // A date alone is its midnight UTC.
    let at: jiff::Timestamp = text
        .parse()
        .or_else(|_| format!("{text}T00:00:00Z").parse())
        .with_context(|| {
            format!(
                "--since {text:?} is neither a time (2026-12-02T09:00:00Z) nor a date (2026-12-02)"
            )
        })?;
    Ok(Timestamp(at.as_millisecond()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_a_date_and_says_what_it_wants_otherwise() {
        assert_eq!(
            parse_since("1970-01-01T00:00:01Z").unwrap(),
            Timestamp(1_000)
        );
        assert_eq!(parse_since("1970-01-02").unwrap(), Timestamp(86_400_000));
        let err = parse_since("yesterday").unwrap_err().to_string();
        assert!(err.contains("neither a time"), "{err}");
    }
}
