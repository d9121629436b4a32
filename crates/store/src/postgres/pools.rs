//! Pools: per-call spend written with its turn, spend outside a turn, declared usage,
//! benches and pins; and the sums that make a pool's usage in a window (as SQLite's
//! `pools::tally` sums them). Every host's calls land in the same tables, so every host
//! reads one headroom.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::router::{CallSpend, Pin, PoolId, PoolUsage, SeatId};
use baton_core::turn::TurnRecord;

use super::{Result, Tx, get, to_u32};
use crate::Error;
use crate::codec::{from_json, to_json};
use crate::pools::{
    Bench, BenchChange, BenchOutcome, BenchTarget, ManualUsage, PinFilter, SpentBy, SpentCall,
    StoredPin, UsageMode,
};

/// A spend or a count beyond `i64` is clamped, not wrapped.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(super) fn insert_calls(tx: &mut Tx<'_>, pool: &PoolId, record: &TurnRecord) -> Result<()> {
    for (i, call) in record.calls.iter().enumerate() {
        let spend = CallSpend::of(call);
        tx.exec(
            "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &pool.as_str(),
                &record.run_id.0,
                &i64::from(record.turn),
                &(i as i64),
                &call.started_at.0,
                &int(spend.tokens),
                &int(spend.cost_micro_usd),
                &int(spend.requests),
                &spend.exhausted,
                &spend.exhausted_until.map(|t| t.0),
            ],
        )?;
    }
    Ok(())
}

/// See `Store::record_spend`: a call the committed turn of the same number carries
/// (same start and spend) was counted with it and is not counted again.
pub(super) fn insert_spend(
    tx: &mut Tx<'_>,
    pool: &PoolId,
    by: &SpentBy,
    calls: &[SpentCall],
    recorded_at: Timestamp,
) -> Result<()> {
    let (of, turn) = match by {
        SpentBy::Judge { group } => (group.as_str(), None),
        SpentBy::Turn { run, turn } => (run.0.as_str(), Some(i64::from(*turn))),
    };
    for (i, SpentCall { at, spend }) in calls.iter().enumerate() {
        if *spend == CallSpend::default() {
            continue;
        }
        let (call, tokens, usd, requests) = (
            i as i64,
            int(spend.tokens),
            int(spend.cost_micro_usd),
            int(spend.requests),
        );
        if let Some(turn) = turn {
            let counted = tx.opt(
                "SELECT 1 FROM pool_calls
                 WHERE pool = $8 AND at = $4 AND run_id = $1 AND turn = $2 AND call = $3
                   AND tokens = $5 AND cost_micro_usd = $6 AND requests = $7",
                &[
                    &of,
                    &turn,
                    &call,
                    &at.0,
                    &tokens,
                    &usd,
                    &requests,
                    &pool.as_str(),
                ],
            )?;
            if counted.is_some() {
                continue;
            }
        }
        tx.exec(
            "INSERT INTO pool_spend (pool, by_kind, of_id, turn, call, at, tokens,
                                     cost_micro_usd, requests, exhausted, exhausted_until,
                                     recorded_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            &[
                &pool.as_str(),
                &by.kind(),
                &of,
                &turn,
                &call,
                &at.0,
                &tokens,
                &usd,
                &requests,
                &spend.exhausted,
                &spend.exhausted_until.map(|t| t.0),
                &recorded_at.0,
            ],
        )?;
    }
    Ok(())
}

/// `pool`'s usage in the window `[start, end)`. See `Store::pool_usage`.
pub(super) fn usage(tx: &mut Tx<'_>, pool: &PoolId, start: i64, end: i64) -> Result<PoolUsage> {
    let id = pool.as_str();
    let set = tx.opt(
        "SELECT at, tokens, cost_micro_usd, requests FROM pool_usage
         WHERE pool = $1 AND mode = 'set' AND at >= $2 AND at < $3
         ORDER BY at DESC, seq DESC LIMIT 1",
        &[&id, &start, &end],
    )?;
    // A dashboard reading counts everything before it; only what follows is added.
    let (from, mut sums) = match set {
        Some(r) => (
            get::<i64>(&r, 0)?,
            [get::<i64>(&r, 1)?, get(&r, 2)?, get(&r, 3)?],
        ),
        None => (start, [0, 0, 0]),
    };
    let mut add = |row: &postgres::Row| -> Result<()> {
        for (i, sum) in sums.iter_mut().enumerate() {
            *sum = sum.saturating_add(get::<i64>(row, i)?);
        }
        Ok(())
    };
    add(&tx.one(
        "SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost_micro_usd), 0)::bigint,
                coalesce(sum(requests), 0)::bigint
         FROM (SELECT tokens, cost_micro_usd, requests FROM pool_calls
               WHERE pool = $1 AND at >= $2 AND at < $3
               UNION ALL
               SELECT tokens, cost_micro_usd, requests FROM pool_spend
               WHERE pool = $1 AND at >= $2 AND at < $3) AS spent",
        &[&id, &from, &end],
    )?)?;
    add(&tx.one(
        "SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost_micro_usd), 0)::bigint,
                coalesce(sum(requests), 0)::bigint
         FROM pool_usage WHERE pool = $1 AND mode = 'add' AND at >= $2 AND at < $3",
        &[&id, &from, &end],
    )?)?;
    // A mark made in an earlier window still holds while its named reset is ahead; one
    // that named no reset holds to the end of the window it was made in.
    let row = tx.one(
        "SELECT max(coalesce(exhausted_until, $3))
         FROM (SELECT at, exhausted, exhausted_until FROM pool_calls WHERE pool = $1
               UNION ALL
               SELECT at, exhausted, exhausted_until FROM pool_spend WHERE pool = $1) AS marks
         WHERE exhausted AND at < $3
           AND ((exhausted_until IS NOT NULL AND exhausted_until > $2)
                OR (exhausted_until IS NULL AND at >= $2))",
        &[&id, &start, &end],
    )?;
    let exhausted_until: Option<i64> = get(&row, 0)?;
    Ok(PoolUsage {
        pool: pool.clone(),
        tokens: count(sums[0]),
        usd: count(sums[1]) as f64 / 1_000_000.0,
        requests: count(sums[2]),
        exhausted_until: exhausted_until.map(Timestamp),
    })
}

pub(super) fn record_usage(tx: &mut Tx<'_>, usage: &ManualUsage) -> Result<()> {
    tx.exec(
        "INSERT INTO pool_usage (pool, mode, at, tokens, cost_micro_usd, requests, note,
                                 recorded_by, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &usage.pool.as_str(),
            &usage.mode.as_str(),
            &usage.at.0,
            &int(usage.tokens),
            &int(usage.cost_micro_usd),
            &int(usage.requests),
            &usage.note,
            &usage.recorded_by,
            &usage.recorded_at.0,
        ],
    )?;
    Ok(())
}

pub(super) fn declared_usage(tx: &mut Tx<'_>, pool: &PoolId) -> Result<Vec<ManualUsage>> {
    let rows = tx.query(
        "SELECT mode, at, tokens, cost_micro_usd, requests, note, recorded_by, recorded_at
         FROM pool_usage WHERE pool = $1 ORDER BY seq",
        &[&pool.as_str()],
    )?;
    rows.iter()
        .map(|r| {
            let mode: String = get(r, 0)?;
            let mode = UsageMode::parse(&mode).ok_or_else(|| Error::Corrupt {
                what: format!("usage declared for pool {pool}"),
                detail: format!("unknown mode {mode:?}"),
            })?;
            Ok(ManualUsage {
                pool: pool.clone(),
                mode,
                at: Timestamp(get(r, 1)?),
                tokens: count(get(r, 2)?),
                cost_micro_usd: count(get(r, 3)?),
                requests: count(get(r, 4)?),
                note: get(r, 5)?,
                recorded_by: get(r, 6)?,
                recorded_at: Timestamp(get(r, 7)?),
            })
        })
        .collect()
}

pub(super) fn set_bench(tx: &mut Tx<'_>, change: &BenchChange) -> Result<BenchOutcome> {
    let target = &change.target;
    // Two hosts benching one target at once: the second waits, then sees the first.
    tx.exec(
        "SELECT pg_advisory_xact_lock(hashtext('baton.bench.' || current_schema() || $1::text))",
        &[&format!("{}:{}", target.kind(), target.id())],
    )?;
    let latest = tx.opt(
        "SELECT benched FROM benches WHERE kind = $1 AND target = $2 ORDER BY seq DESC LIMIT 1",
        &[&target.kind(), &target.id()],
    )?;
    let benched = latest.map(|r| get::<bool>(&r, 0)).transpose()?;
    if benched.unwrap_or(false) == change.benched {
        return Ok(BenchOutcome::Unchanged);
    }
    tx.exec(
        "INSERT INTO benches (kind, target, benched, by, at, reason)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &target.kind(),
            &target.id(),
            &change.benched,
            &change.by,
            &change.at.0,
            &change.reason,
        ],
    )?;
    Ok(BenchOutcome::Changed)
}

pub(super) fn benches(tx: &mut Tx<'_>) -> Result<Vec<Bench>> {
    let rows = tx.query(
        "SELECT kind, target, by, at, reason FROM benches b
         WHERE benched
           AND seq = (SELECT max(seq) FROM benches l WHERE l.kind = b.kind AND l.target = b.target)
         ORDER BY kind, target",
        &[],
    )?;
    rows.iter()
        .map(|r| {
            let kind: String = get(r, 0)?;
            let id: String = get(r, 1)?;
            let target = match kind.as_str() {
                "pool" => BenchTarget::Pool(PoolId::new(id)),
                "worker" => BenchTarget::Worker(WorkerId::new(id)),
                _ => {
                    return Err(Error::Corrupt {
                        what: format!("bench of {id}"),
                        detail: format!("unknown kind {kind:?}"),
                    }
                    .into());
                }
            };
            Ok(Bench {
                target,
                by: get(r, 2)?,
                at: Timestamp(get(r, 3)?),
                reason: get(r, 4)?,
            })
        })
        .collect()
}

pub(super) fn insert_pins(tx: &mut Tx<'_>, run: &RunId, turn: u32, pins: &[Pin]) -> Result<()> {
    for pin in pins {
        let what = || format!("pin of turn {turn}");
        let fractions = to_json(&pin.fractions, what)?;
        let reason = to_json(&pin.reason, what)?;
        let excluded = pin
            .excluded
            .as_ref()
            .map(|e| to_json(e, what))
            .transpose()?;
        tx.exec(
            "INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at,
                               fractions, reason, excluded)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            &[
                &run.0,
                &i64::from(turn),
                &pin.seat.as_str(),
                &pin.worker.as_str(),
                &pin.model,
                &pin.family,
                &pin.pool.as_str(),
                &pin.phase,
                &pin.at.0,
                &fractions,
                &reason,
                &excluded,
            ],
        )?;
    }
    Ok(())
}

pub(super) fn pins(tx: &mut Tx<'_>, filter: &PinFilter) -> Result<Vec<StoredPin>> {
    let rows = tx.query(
        "SELECT run_id, turn, seat, worker, model, family, pool, phase, at, fractions,
                reason, excluded
         FROM pins
         WHERE ($1::text IS NULL OR run_id = $1) AND ($2::text IS NULL OR seat = $2)
           AND ($3::text IS NULL OR pool = $3) AND ($4::text IS NULL OR phase = $4)
           AND ($5::bigint IS NULL OR at >= $5)
         ORDER BY seq",
        &[
            &filter.run.as_ref().map(|r| r.0.as_str()),
            &filter.seat.as_ref().map(SeatId::as_str),
            &filter.pool.as_ref().map(PoolId::as_str),
            &filter.phase.as_deref(),
            &filter.since.map(|t| t.0),
        ],
    )?;
    rows.iter()
        .map(|r| {
            let run: String = get(r, 0)?;
            let turn = to_u32(get(r, 1)?, || format!("turn of a pin of run {run}"))?;
            let what = || format!("pin of run {run} turn {turn}");
            let fractions: String = get(r, 9)?;
            let reason: String = get(r, 10)?;
            let excluded: Option<String> = get(r, 11)?;
            Ok(StoredPin {
                pin: Pin {
                    seat: SeatId::new(get::<String>(r, 2)?),
                    worker: WorkerId::new(get::<String>(r, 3)?),
                    model: get(r, 4)?,
                    family: get(r, 5)?,
                    pool: PoolId::new(get::<String>(r, 6)?),
                    phase: get(r, 7)?,
                    at: Timestamp(get(r, 8)?),
                    fractions: from_json(&fractions, what)?,
                    reason: from_json(&reason, what)?,
                    excluded: excluded.map(|e| from_json(&e, what)).transpose()?,
                },
                run_id: RunId(run),
                turn,
            })
        })
        .collect()
}
