//! `baton pools` (each pool's allowance, use and headroom in its current window, from
//! the store), `baton pool bench|unbench ID`, `baton pool usage ID`, `baton worker
//! bench|unbench ID`, and `baton route SEAT`, the router's dry run on all of them.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use baton_core::ids::{Timestamp, WorkerId};
use baton_core::router::{
    Allowance, Candidate, Pick, Pool, PoolId, PoolUsage, RouteInput, SEAT_GROUPS, Seat, SeatId,
};
use baton_engine::{Clock, SystemClock};
use baton_protocol::render::n as grouped;
use baton_store::{
    Bench, BenchChange, BenchOutcome, BenchTarget, LiveReservation, ManualUsage, Store, UsageMode,
};
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
    /// What turns in flight hold of the pool now, in any process on any host sharing
    /// the database (reservations, released when they commit or expire).
    held: Held,
    /// What is left of each metered dimension once what is used and what is held are
    /// taken off (never below zero): the headroom every process routes on.
    headroom: Allowance,
    /// The largest fraction over the metered dimensions of what is used and held (0
    /// when unmetered).
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

#[derive(Debug, Default, Serialize)]
struct Held {
    /// Turns in flight holding part of the pool.
    turns: usize,
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
    exit::config(no_pools_said(ctx))
}

fn no_pools_said(ctx: &Context_) -> String {
    format!(
        "no pools are configured{}; add [[pools]] entries (id, allowance, window) and give each worker pool = \"…\" (README: \"Seats, pools and the router\")",
        ctx.config_shown()
    )
}

/// `baton pools`.
/// What `baton pools --json` prints (and the server's `/api/pools`): each configured
/// pool's window, allowance, used and headroom, and the benches in force. No pools
/// configured: an empty list.
pub(crate) fn floor_json(ctx: &Context_) -> Result<serde_json::Value> {
    reading(ctx, |rows, workers, gone, _| {
        Ok(serde_json::json!({
            "pools": rows,
            "benched_workers": workers,
            "benched_pools_not_configured": gone,
        }))
    })
}

/// The floor now, given to `f`: a row per configured pool, the workers benched, and the
/// benches of pools no longer configured (kept, and shown, so that it is no surprise
/// when a pool of that id comes back), as of the time given.
fn reading<R>(
    ctx: &Context_,
    f: impl FnOnce(&[PoolRow<'_>], &[&Bench], &[&Bench], Timestamp) -> Result<R>,
) -> Result<R> {
    let pools = &ctx.floor().pools;
    let store = ctx.try_reader()?;
    let (benches, reservations) = match &store {
        Some(store) => (store.benches()?, store.live_reservations()?),
        None => (Vec::new(), Vec::new()),
    };
    let now = SystemClock.now();
    let mut rows = Vec::with_capacity(pools.len());
    for pool in pools {
        rows.push(row(store.as_deref(), pool, &benches, &reservations, now)?);
    }
    let workers: Vec<&Bench> = benches
        .iter()
        .filter(|b| matches!(b.target, BenchTarget::Worker(_)))
        .collect();
    let gone: Vec<&Bench> = benches
        .iter()
        .filter(|b| matches!(&b.target, BenchTarget::Pool(p) if !pools.iter().any(|q| &q.id == p)))
        .collect();
    f(&rows, &workers, &gone, now)
}

pub(crate) fn list(ctx: &Context_, json: bool) -> Result<ExitCode> {
    if ctx.floor().pools.is_empty() {
        let benches = match ctx.try_reader()? {
            Some(store) => store.benches()?,
            None => Vec::new(),
        };
        let benched: Vec<String> = benches
            .iter()
            .filter(|b| matches!(b.target, BenchTarget::Pool(_)))
            .map(|b| format!("`baton pool unbench {}`", b.target.id()))
            .collect();
        if benched.is_empty() {
            return Err(no_pools(ctx));
        }
        return Err(exit::config(format!(
            "{}; benches of pools no longer configured are still on record: {}",
            no_pools_said(ctx),
            benched.join(", ")
        )));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&floor_json(ctx)?)?);
        return Ok(ExitCode::SUCCESS);
    }
    reading(ctx, |rows, workers, gone, now| {
        print!("{}", render(rows, now));
        for b in gone.iter().chain(workers) {
            let gone = match &b.target {
                BenchTarget::Pool(_) => {
                    "; no such pool in the configuration now, the bench holds if it comes back"
                }
                BenchTarget::Worker(w) if ctx.roster().0.find(w.as_str()).is_err() => {
                    "; no such worker in the roster now, the bench holds if it comes back"
                }
                BenchTarget::Worker(_) => "",
            };
            let why = b
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            println!(
                "{} benched by {} at {}{why}{gone} (`baton {} unbench {}`)",
                b.target,
                b.by,
                b.at,
                b.target.kind(),
                b.target.id()
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn row<'a>(
    store: Option<&dyn Store>,
    pool: &'a Pool,
    benches: &[Bench],
    reservations: &[LiveReservation],
    now: Timestamp,
) -> Result<PoolRow<'a>> {
    let (start, end) = pool.window.bounds(now)?;
    let used = match store {
        Some(store) => store.pool_usage(&pool.id, start, end)?,
        None => PoolUsage::none(pool.id.clone()),
    };
    let mut held = Held::default();
    for r in reservations
        .iter()
        .filter(|r| r.pool == pool.id && (start..end).contains(&r.at))
    {
        held.turns += 1;
        held.tokens = held.tokens.saturating_add(r.estimate.tokens);
        held.usd += r.estimate.cost_micro_usd as f64 / 1_000_000.0;
        held.requests = held.requests.saturating_add(r.estimate.requests);
    }
    // The router's reading: what is held counts as used until it commits or expires.
    let routed = PoolUsage {
        tokens: used.tokens.saturating_add(held.tokens),
        usd: used.usd + held.usd,
        requests: used.requests.saturating_add(held.requests),
        ..used.clone()
    };
    Ok(PoolRow {
        id: &pool.id,
        window: pool.window.to_string(),
        window_start: start,
        resets_at: end,
        allowance: &pool.allowance,
        headroom: headroom(&pool.allowance, &routed),
        used_fraction: pool.allowance.used_fraction(&routed),
        exhausted_until: used.exhausted_at(now),
        used: Used {
            tokens: used.tokens,
            usd: used.usd,
            requests: used.requests,
        },
        held,
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
        if r.held.turns > 0 {
            let _ = writeln!(
                out,
                "{pad}held by {} turn{} in flight: {} tokens, {}, {} requests (counted as used until they commit)",
                r.held.turns,
                if r.held.turns == 1 { "" } else { "s" },
                grouped(r.held.tokens),
                usd(r.held.usd),
                grouped(r.held.requests),
            );
        }
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
        "as of {now}; used = provider-reported usage of baton's calls in the window, plus usage declared with `baton pool usage`; what turns in flight hold is left out of what is left"
    );
    out
}

/// The configured pool named `id`, or a refusal naming the configured ones.
fn configured_pool(ctx: &Context_, id: &str) -> Result<PoolId> {
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
    Ok(pool)
}

/// `baton pool bench|unbench ID`.
pub(crate) fn bench_pool(
    ctx: &Context_,
    id: &str,
    benched: bool,
    reason: Option<String>,
) -> Result<ExitCode> {
    println!("{}", bench_pool_as(ctx, id, benched, reason, who())?);
    Ok(ExitCode::SUCCESS)
}

/// `bench_pool`, recorded as by `by`: what was done, in a sentence.
pub(crate) fn bench_pool_as(
    ctx: &Context_,
    id: &str,
    benched: bool,
    reason: Option<String>,
    by: String,
) -> Result<String> {
    // A pool benched before the configuration dropped it can still be put back (its
    // bench would hold again if a pool of that id came back); nothing else unknown is.
    let target = BenchTarget::Pool(PoolId::new(id));
    if benched || !in_force(ctx, &target)? {
        configured_pool(ctx, id)?;
    }
    set_bench(ctx, target, benched, reason, by)
}

/// Whether `target` has a bench in force in the store.
fn in_force(ctx: &Context_, target: &BenchTarget) -> Result<bool> {
    Ok(match ctx.try_reader()? {
        Some(store) => store.benches()?.iter().any(|b| &b.target == target),
        None => false,
    })
}

/// `baton worker bench|unbench ID`: a worker of the configured roster.
pub(crate) fn bench_worker(
    ctx: &Context_,
    id: &str,
    benched: bool,
    reason: Option<String>,
) -> Result<ExitCode> {
    let (roster, note) = ctx.roster();
    let target = BenchTarget::Worker(WorkerId::new(id));
    // As for a pool: a worker benched before it left the roster can be put back.
    if benched || !in_force(ctx, &target)? {
        roster.find(id).map_err(|_| {
            exit::config(format!(
                "no worker named \"{id}\" ({note}); the workers are: {} (`baton workers` shows them)",
                roster.ids()
            ))
        })?;
    }
    bench(ctx, target, benched, reason)
}

fn bench(
    ctx: &Context_,
    target: BenchTarget,
    benched: bool,
    reason: Option<String>,
) -> Result<ExitCode> {
    println!("{}", set_bench(ctx, target, benched, reason, who())?);
    Ok(ExitCode::SUCCESS)
}

/// Benches `target` (or puts it back) as `by`: what was done, in a sentence.
pub(crate) fn set_bench(
    ctx: &Context_,
    target: BenchTarget,
    benched: bool,
    reason: Option<String>,
    by: String,
) -> Result<String> {
    let store = ctx.store()?;
    let change = BenchChange {
        target,
        benched,
        by,
        at: SystemClock.now(),
        reason,
    };
    let what = if benched {
        "benched"
    } else {
        "back on the floor"
    };
    Ok(match store.set_bench(&change)? {
        BenchOutcome::Changed => format!(
            "{} is {what}; recorded as by {} at {}",
            change.target, change.by, change.at
        ),
        BenchOutcome::Unchanged => {
            format!("{} was already {what}; nothing recorded", change.target)
        }
    })
}

/// `baton pool usage ID`: usage of work done outside baton, or a dashboard's reading.
pub(crate) fn declare_usage(ctx: &Context_, args: &crate::UsageArgs) -> Result<ExitCode> {
    let pool = configured_pool(ctx, &args.pool)?;
    let micro_usd = match args.usd {
        None => 0,
        Some(usd) if (0.0..1e12).contains(&usd) => (usd * 1e6).round() as u64,
        Some(usd) => {
            return Err(exit::usage(format!(
                "--usd {usd}: give the dollars spent as a number of 0 or more, e.g. --usd 12.40"
            )));
        }
    };
    if !args.set && args.tokens.is_none() && args.usd.is_none() && args.requests.is_none() {
        return Err(exit::usage(
            "say what was used: --tokens N, --usd X and/or --requests N (with --set, what the provider's dashboard shows for this window)",
        ));
    }
    let now = SystemClock.now();
    let usage = ManualUsage {
        pool,
        mode: if args.set {
            UsageMode::Set
        } else {
            UsageMode::Add
        },
        at: now,
        tokens: args.tokens.unwrap_or(0),
        cost_micro_usd: micro_usd,
        requests: args.requests.unwrap_or(0),
        note: args.note.clone().unwrap_or_default(),
        recorded_by: who(),
        recorded_at: now,
    };
    ctx.store()?.record_usage(&usage)?;
    println!(
        "{} for pool {}: {} tokens, {}, {} requests; `baton pools` shows the pool now",
        if args.set {
            "set the window's usage"
        } else {
            "added usage"
        },
        usage.pool,
        grouped(usage.tokens),
        usd(micro_usd as f64 / 1e6),
        grouped(usage.requests)
    );
    Ok(ExitCode::SUCCESS)
}

/// Who benched: the login name, as the shell knows it.
fn who() -> String {
    ["BATON_USER", "USER", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

/// `baton route SEAT [--tags …]`: who the router would seat now, from the configured
/// pools, seats and roster and the store's usage and benches; no run, so no pins and
/// no history of who wrote what (the cross-family rule has nothing to compare).
pub(crate) fn route(ctx: &Context_, seat: &str, tags: &[String], json: bool) -> Result<ExitCode> {
    let floor = ctx.floor();
    if floor.pools.is_empty() {
        return Err(no_pools(ctx));
    }
    let tags = tags
        .iter()
        .map(|t| baton_core::state::StepTag::new(t.trim()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| exit::usage(format!("--tags: {e}")))?;
    let id = SeatId::new(seat);
    if !id.in_known_group() {
        return Err(exit::usage(format!(
            "\"{seat}\" is not a seat any station asks for: a seat's name starts with one of {}",
            SEAT_GROUPS.join(", ")
        )));
    }
    let seat = floor
        .seats
        .iter()
        .find(|s| s.id == id)
        .cloned()
        .unwrap_or_else(|| Seat::new(id));
    let (roster, _) = ctx.roster();
    let candidates: Vec<Candidate> = roster.workers.iter().map(|w| w.candidate()).collect();
    let now = SystemClock.now();
    let store = ctx.try_reader()?;
    let mut usage = Vec::with_capacity(floor.pools.len());
    let mut benches = Vec::new();
    if let Some(store) = &store {
        // As a run reads it: what turns in flight hold counts as used.
        let windows = floor
            .pools
            .iter()
            .map(|pool| {
                let (start, end) = pool.window.bounds(now)?;
                Ok((pool.id.clone(), start, end))
            })
            .collect::<Result<Vec<_>>>()?;
        (usage, benches) = store.floor_reading(&windows)?;
    }
    let benches = baton_store::bench_set(&benches);
    let input = RouteInput {
        seat: &seat,
        phase: "dry run",
        handoff: 0,
        now,
        tags: &tags,
        candidates: &candidates,
        pools: &floor.pools,
        usage: &usage,
        benches: &benches,
        pins: &[],
        step: None,
        history: &[],
        inherit_from: None,
    };
    let routed = baton_core::router::route(&input);
    if json {
        println!("{}", serde_json::to_string_pretty(&routed)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &routed.pick {
        Pick::Seated { pin } | Pick::Held { pin } => println!(
            "seat {}: {} ({}, pool {}), the coldest eligible pool",
            seat.id, pin.worker, pin.model, pin.pool
        ),
        Pick::Nobody { question, .. } => println!("{question}"),
    }
    let fraction = |id: &PoolId| {
        let used = usage.iter().find(|u| &u.pool == id);
        floor
            .pool(id)
            .zip(used)
            .map_or(0.0, |(p, u)| p.allowance.used_fraction(u))
    };
    for worker in &routed.eligible {
        if let Some(c) = candidates.iter().find(|c| &c.id == *worker) {
            println!(
                "  eligible  {} (pool {}, {:.1}% used)",
                c.id,
                c.pool,
                fraction(&c.pool) * 100.0
            );
        }
    }
    for e in &routed.excluded {
        println!("  excluded  {}: {}", e.worker, e.reason);
    }
    Ok(ExitCode::SUCCESS)
}
