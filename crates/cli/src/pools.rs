//! `baton pools` (each pool's allowance, use and headroom in its current window, from
//! the store) and `baton pool bench|unbench ID`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use baton_core::ids::Timestamp;
use baton_core::router::{Allowance, Pool, PoolId, PoolUsage};
use baton_engine::{Clock, SystemClock};
use baton_protocol::render::n as grouped;
use baton_store::{Bench, BenchChange, BenchOutcome, BenchTarget, Store};
use serde::Serialize;

use crate::commands::Context_;
use crate::exit;

/// One pool as `baton pools` shows it.
#[derive(Debug, Serialize)]
struct PoolRow<'a> {
    id: &'a PoolId,
    window: String,
    /// The current window, engine clock (milliseconds since the epoch).
    window_start: Timestamp,
    resets_at: Timestamp,
    allowance: &'a Allowance,
    used: Used,
    /// What is left of each metered dimension (never below zero).
    headroom: Allowance,
    /// The largest used fraction over the metered dimensions (0 when unmetered).
    used_fraction: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    exhausted_until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    benched: Option<Bench>,
}

#[derive(Debug, Serialize)]
struct Used {
    tokens: u64,
    usd: f64,
    requests: u64,
}

fn headroom(allowance: &Allowance, used: &PoolUsage) -> Allowance {
    Allowance {
        tokens: allowance.tokens.map(|t| t.saturating_sub(used.tokens)),
        usd: allowance.usd.map(|u| (u - used.usd).max(0.0)),
        requests: allowance.requests.map(|r| r.saturating_sub(used.requests)),
    }
}

fn no_pools(ctx: &Context_) -> anyhow::Error {
    exit::config(format!(
        "no pools are configured{}; add [[pools]] entries (id, allowance, window) and give each worker pool = \"…\" (README: \"Seats, pools and the router\")",
        ctx.config_shown()
    ))
}

/// `baton pools`.
pub(crate) fn list(ctx: &Context_, json: bool) -> Result<ExitCode> {
    let pools = &ctx.floor().pools;
    if pools.is_empty() {
        return Err(no_pools(ctx));
    }
    let now = SystemClock.now();
    let store = ctx.try_reader()?;
    let benches = match &store {
        Some(store) => store.benches()?,
        None => Vec::new(),
    };
    let mut rows = Vec::with_capacity(pools.len());
    for pool in pools {
        rows.push(row(store.as_deref(), pool, &benches, now)?);
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "pools": rows }))?
        );
    } else {
        print!("{}", render(&rows, now));
    }
    Ok(ExitCode::SUCCESS)
}

fn row<'a>(
    store: Option<&dyn Store>,
    pool: &'a Pool,
    benches: &[Bench],
    now: Timestamp,
) -> Result<PoolRow<'a>> {
    let (start, end) = pool.window.bounds(now)?;
    let used = match store {
        Some(store) => store.pool_usage(&pool.id, start, end)?,
        None => PoolUsage::none(pool.id.clone()),
    };
    Ok(PoolRow {
        id: &pool.id,
        window: pool.window.to_string(),
        window_start: start,
        resets_at: end,
        allowance: &pool.allowance,
        headroom: headroom(&pool.allowance, &used),
        used_fraction: pool.allowance.used_fraction(&used),
        exhausted_until: used.exhausted_at(now),
        used: Used {
            tokens: used.tokens,
            usd: used.usd,
            requests: used.requests,
        },
        benched: benches
            .iter()
            .find(|b| b.target == BenchTarget::Pool(pool.id.clone()))
            .cloned(),
    })
}

/// Dollars to the cent, or to the micro-dollar when less than a cent would show as 0.
fn usd(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 0.01 {
        format!("${amount:.6}")
    } else {
        format!("${amount:.2}")
    }
}

const BAR: usize = 20;

fn render(rows: &[PoolRow<'_>], now: Timestamp) -> String {
    let width = rows.iter().map(|r| r.id.as_str().len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in rows {
        let filled = ((r.used_fraction.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
        let _ = writeln!(
            out,
            "{:width$}  [{}{}] {:>5.1}% used · {} · resets {}",
            r.id.as_str(),
            "#".repeat(filled),
            "-".repeat(BAR - filled),
            r.used_fraction * 100.0,
            r.window,
            r.resets_at,
        );
        let pad = " ".repeat(width + 2);
        let line = |name: &str, used: String, limit: Option<(String, String)>| match limit {
            Some((limit, left)) => format!("{pad}{name:<9}{used:>14} of {limit}, {left} left\n"),
            None => format!("{pad}{name:<9}{used:>14} (not metered)\n"),
        };
        out.push_str(&line(
            "tokens",
            grouped(r.used.tokens),
            r.allowance
                .tokens
                .zip(r.headroom.tokens)
                .map(|(l, h)| (grouped(l), grouped(h))),
        ));
        out.push_str(&line(
            "usd",
            usd(r.used.usd),
            r.allowance
                .usd
                .zip(r.headroom.usd)
                .map(|(l, h)| (usd(l), usd(h))),
        ));
        out.push_str(&line(
            "requests",
            grouped(r.used.requests),
            r.allowance
                .requests
                .zip(r.headroom.requests)
                .map(|(l, h)| (grouped(l), grouped(h))),
        ));
        if let Some(until) = r.exhausted_until {
            let _ = writeln!(
                out,
                "{pad}exhausted until {until}: a provider said the quota is spent"
            );
        }
        if let Some(b) = &r.benched {
            let why = b
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{pad}benched by {} at {}{why} (`baton pool unbench {}`)",
                b.by, b.at, r.id
            );
        }
    }
    let _ = writeln!(
        out,
        "as of {now}; used = provider-reported usage of baton's calls in the window, plus usage declared by hand"
    );
    out
}

/// `baton pool bench|unbench ID`.
pub(crate) fn bench(
    ctx: &Context_,
    id: &str,
    benched: bool,
    reason: Option<String>,
) -> Result<ExitCode> {
    let pools = &ctx.floor().pools;
    if pools.is_empty() {
        return Err(no_pools(ctx));
    }
    let pool = PoolId::new(id);
    if !pools.iter().any(|p| p.id == pool) {
        let known: Vec<&str> = pools.iter().map(|p| p.id.as_str()).collect();
        return Err(exit::config(format!(
            "no pool named \"{id}\"{}; the pools are: {} (`baton pools` shows them)",
            ctx.config_shown(),
            known.join(", ")
        )));
    }
    let store = ctx.store()?;
    let change = BenchChange {
        target: BenchTarget::Pool(pool),
        benched,
        by: who(),
        at: SystemClock.now(),
        reason,
    };
    let outcome = store.set_bench(&change)?;
    let what = if benched {
        "benched"
    } else {
        "back on the floor"
    };
    match outcome {
        BenchOutcome::Changed => println!(
            "pool {id} is {what}; recorded as by {} at {}",
            change.by, change.at
        ),
        BenchOutcome::Unchanged => println!("pool {id} was already {what}; nothing recorded"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Who benched: the login name, as the shell knows it.
fn who() -> String {
    ["BATON_USER", "USER", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}
