//! Pools: per-call spend written with its turn, declared usage, benches; and the sums
//! that make a pool's usage in a window.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::router::{CallSpend, Pin, PoolId, PoolUsage, SeatId};
use baton_core::turn::TurnRecord;
use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use crate::Error;
use crate::pools::{
    Bench, BenchChange, BenchOutcome, BenchTarget, ManualUsage, PinFilter, SpentBy, SpentCall,
    StoredPin, UsageMode,
};

/// SQLite integers are i64; a spend or a count beyond that is clamped, not wrapped.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Counts every call of `record` against `pool`, in the turn's transaction.
pub(super) fn insert_calls(tx: &Connection, pool: &PoolId, record: &TurnRecord) -> Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd, requests,
                                 exhausted, exhausted_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (i, call) in record.calls.iter().enumerate() {
        let spend = CallSpend::of(call);
        insert.execute(params![
            pool.as_str(),
            record.run_id.0,
            record.turn,
            i as u32,
            call.started_at.0,
            int(spend.tokens),
            int(spend.cost_micro_usd),
            int(spend.requests),
            spend.exhausted,
            spend.exhausted_until.map(|t| t.0),
        ])?;
    }
    Ok(())
}

/// Counts `calls`, which no committed turn carries, against `pool` (see `SpentBy`).
pub(super) fn insert_spend(
    tx: &Connection,
    pool: &PoolId,
    by: &SpentBy,
    calls: &[SpentCall],
    recorded_at: Timestamp,
) -> Result<()> {
    let (of, turn) = match by {
        SpentBy::Judge { group } => (group.as_str(), None),
        SpentBy::Turn { run, turn } => (run.0.as_str(), Some(*turn)),
    };
    let mut insert = tx.prepare_cached(
        "INSERT INTO pool_spend (pool, by_kind, of_id, turn, call, at, tokens, cost_micro_usd,
                                 requests, exhausted, exhausted_until, recorded_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    // A turn whose commit landed but was reported as failed still hands its calls
    // here: a call its committed turn carries (same number, start and spend) was
    // counted with it. A fenced-off turn's calls under a number another process
    // committed started at other times, and count. (Found by pool and start, which
    // `pool_calls_by_pool` serves: the turn's calls count against this same pool.)
    let mut committed = tx.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM pool_calls
                        WHERE pool = ?8 AND at = ?4 AND run_id = ?1 AND turn = ?2 AND call = ?3
                          AND tokens = ?5 AND cost_micro_usd = ?6 AND requests = ?7)",
    )?;
    for (i, SpentCall { at, spend }) in calls.iter().enumerate() {
        if *spend == CallSpend::default() {
            continue;
        }
        if let Some(turn) = turn {
            let counted: bool = committed.query_row(
                params![
                    of,
                    turn,
                    i as u32,
                    at.0,
                    int(spend.tokens),
                    int(spend.cost_micro_usd),
                    int(spend.requests),
                    pool.as_str()
                ],
                |r| r.get(0),
            )?;
            if counted {
                continue;
            }
        }
        insert.execute(params![
            pool.as_str(),
            by.kind(),
            of,
            turn,
            i as u32,
            at.0,
            int(spend.tokens),
            int(spend.cost_micro_usd),
            int(spend.requests),
            spend.exhausted,
            spend.exhausted_until.map(|t| t.0),
            recorded_at.0,
        ])?;
    }
    Ok(())
}

/// Sums of (tokens, micro-dollars, requests).
pub(super) type Sums = (i64, i64, i64);

/// What a pool used in one window, as the store sums it (see `Store::pool_usage`);
/// kept between readings by `super::floor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tally {
    pub start: i64,
    pub end: i64,
    /// Where the sums start: the latest dashboard reading (`Set`) in the window, which
    /// counts everything before it, else the window's start.
    pub from: i64,
    pub sums: Sums,
    pub exhausted_until: Option<i64>,
}

impl Tally {
    /// Counts one spent call made at `at` (of a committed turn, or one outside a turn).
    pub fn add_call(&mut self, at: i64, spend: Sums, exhausted: bool, until: Option<i64>) {
        if (self.from..self.end).contains(&at) {
            self.add(spend);
        }
        // As the query in `tally` reads a mark: one made in an earlier window still
        // holds while its named reset is ahead; one that named no reset holds to the
        // end of the window it was made in.
        let reaches = match until {
            Some(until) => until > self.start,
            None => at >= self.start,
        };
        if exhausted && at < self.end && reaches {
            let until = until.unwrap_or(self.end);
            self.exhausted_until = Some(self.exhausted_until.map_or(until, |u| u.max(until)));
        }
    }

    /// Counts usage declared with `UsageMode::Add`.
    pub fn add_declared(&mut self, at: i64, spend: Sums) {
        if (self.from..self.end).contains(&at) {
            self.add(spend);
        }
    }

    fn add(&mut self, (tokens, usd, requests): Sums) {
        let s = &mut self.sums;
        *s = (
            s.0.saturating_add(tokens),
            s.1.saturating_add(usd),
            s.2.saturating_add(requests),
        );
    }

    pub fn usage(&self, pool: &PoolId) -> PoolUsage {
        PoolUsage {
            pool: pool.clone(),
            tokens: count(self.sums.0),
            usd: count(self.sums.1) as f64 / 1_000_000.0,
            requests: count(self.sums.2),
            exhausted_until: self.exhausted_until.map(Timestamp),
        }
    }
}

/// `pool`'s usage in the window `[start, end)`. See `Store::pool_usage`.
pub(super) fn usage(
    conn: &Connection,
    pool: &PoolId,
    start: Timestamp,
    end: Timestamp,
) -> Result<PoolUsage> {
    Ok(tally(conn, pool, start.0, end.0)?.usage(pool))
}

/// `pool`'s usage in the window `[start, end)`, summed from every row.
pub(super) fn tally(conn: &Connection, pool: &PoolId, start: i64, end: i64) -> Result<Tally> {
    let set: Option<(i64, i64, i64, i64)> = conn
        .prepare_cached(
            "SELECT at, tokens, cost_micro_usd, requests FROM pool_usage
             WHERE pool = ?1 AND mode = 'set' AND at >= ?2 AND at < ?3
             ORDER BY at DESC, seq DESC LIMIT 1",
        )?
        .query_row(params![pool.as_str(), start, end], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    // A dashboard reading counts everything before it; only what follows is added.
    let (from, base) = match set {
        Some((at, tokens, usd, requests)) => (at, (tokens, usd, requests)),
        None => (start, (0, 0, 0)),
    };
    let sums = |sql: &str| -> Result<Sums> {
        Ok(conn
            .prepare_cached(sql)?
            .query_row(params![pool.as_str(), from, end], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?)
    };
    let calls = sums(
        "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost_micro_usd), 0), coalesce(sum(requests), 0)
         FROM (SELECT tokens, cost_micro_usd, requests FROM pool_calls
               WHERE pool = ?1 AND at >= ?2 AND at < ?3
               UNION ALL
               SELECT tokens, cost_micro_usd, requests FROM pool_spend
               WHERE pool = ?1 AND at >= ?2 AND at < ?3)",
    )?;
    let added = sums(
        "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost_micro_usd), 0), coalesce(sum(requests), 0)
         FROM pool_usage WHERE pool = ?1 AND mode = 'add' AND at >= ?2 AND at < ?3",
    )?;
    // A mark made in an earlier window still holds while its named reset is ahead; one
    // that named no reset holds to the end of the window it was made in.
    let exhausted_until: Option<i64> = conn
        .prepare_cached(
            "SELECT max(coalesce(exhausted_until, ?3))
             FROM (SELECT at, exhausted, exhausted_until FROM pool_calls WHERE pool = ?1
                   UNION ALL
                   SELECT at, exhausted, exhausted_until FROM pool_spend WHERE pool = ?1)
             WHERE exhausted = 1 AND at < ?3
               AND ((exhausted_until IS NOT NULL AND exhausted_until > ?2)
                    OR (exhausted_until IS NULL AND at >= ?2))",
        )?
        .query_row(params![pool.as_str(), start, end], |r| r.get(0))?;
    let mut tally = Tally {
        start,
        end,
        from,
        sums: base,
        exhausted_until,
    };
    tally.add(calls);
    tally.add(added);
    Ok(tally)
}

pub(super) fn record_usage(tx: &Connection, usage: &ManualUsage) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO pool_usage (pool, mode, at, tokens, cost_micro_usd, requests, note,
                                 recorded_by, recorded_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        usage.pool.as_str(),
        usage.mode.as_str(),
        usage.at.0,
        int(usage.tokens),
        int(usage.cost_micro_usd),
        int(usage.requests),
        usage.note,
        usage.recorded_by,
        usage.recorded_at.0,
    ])?;
    Ok(())
}

/// Every usage row declared for `pool`, oldest first.
pub(super) fn declared_usage(conn: &Connection, pool: &PoolId) -> Result<Vec<ManualUsage>> {
    let mut select = conn.prepare_cached(
        "SELECT mode, at, tokens, cost_micro_usd, requests, note, recorded_by, recorded_at
         FROM pool_usage WHERE pool = ?1 ORDER BY seq",
    )?;
    let rows = select.query_map([pool.as_str()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            ManualUsage {
                pool: pool.clone(),
                mode: UsageMode::Add,
                at: Timestamp(r.get(1)?),
                tokens: count(r.get(2)?),
                cost_micro_usd: count(r.get(3)?),
                requests: count(r.get(4)?),
                note: r.get(5)?,
                recorded_by: r.get(6)?,
                recorded_at: Timestamp(r.get(7)?),
            },
        ))
    })?;
    rows.map(|row| {
        let (mode, usage) = row?;
        let mode = UsageMode::parse(&mode).ok_or_else(|| Error::Corrupt {
            what: format!("usage declared for pool {pool}"),
            detail: format!("unknown mode {mode:?}"),
        })?;
        Ok(ManualUsage { mode, ..usage })
    })
    .collect()
}

pub(super) fn set_bench(tx: &Connection, change: &BenchChange) -> Result<BenchOutcome> {
    let target = &change.target;
    let benched: Option<bool> = tx
        .prepare_cached(
            "SELECT benched FROM benches WHERE kind = ?1 AND target = ?2 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![target.kind(), target.id()], |r| r.get(0))
        .optional()?;
    if benched.unwrap_or(false) == change.benched {
        return Ok(BenchOutcome::Unchanged);
    }
    tx.prepare_cached(
        "INSERT INTO benches (kind, target, benched, by, at, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        target.kind(),
        target.id(),
        change.benched,
        change.by,
        change.at.0,
        change.reason,
    ])?;
    Ok(BenchOutcome::Changed)
}

/// The benches in force: each target whose latest row benches it, pools first, by id.
pub(super) fn benches(conn: &Connection) -> Result<Vec<Bench>> {
    let mut select = conn.prepare_cached(
        "SELECT kind, target, by, at, reason FROM benches b
         WHERE benched = 1
           AND seq = (SELECT max(seq) FROM benches l WHERE l.kind = b.kind AND l.target = b.target)
         ORDER BY kind, target",
    )?;
    let rows = select.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<String>>(4)?,
        ))
    })?;
    rows.map(|row| {
        let (kind, id, by, at, reason) = row?;
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
            by,
            at: Timestamp(at),
            reason,
        })
    })
    .collect()
}

/// Writes the turn's new pins, in the turn's transaction.
pub(super) fn insert_pins(tx: &Connection, run: &RunId, turn: u32, pins: &[Pin]) -> Result<()> {
    if pins.is_empty() {
        return Ok(());
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at,
                           fractions, reason, excluded)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for pin in pins {
        let fractions = crate::codec::to_json(&pin.fractions, || format!("pin of turn {turn}"))?;
        let reason = crate::codec::to_json(&pin.reason, || format!("pin of turn {turn}"))?;
        let excluded = pin
            .excluded
            .as_ref()
            .map(|e| crate::codec::to_json(e, || format!("pin of turn {turn}")))
            .transpose()?;
        insert.execute(params![
            run.0,
            turn,
            pin.seat.as_str(),
            pin.worker.as_str(),
            pin.model,
            pin.family,
            pin.pool.as_str(),
            pin.phase,
            pin.at.0,
            fractions,
            reason,
            excluded,
        ])?;
    }
    Ok(())
}

/// The pins query, its run test spliced in: one run's pins are found through
/// `pins_by_run`, where an `?1 IS NULL OR run_id = ?1` test would read every pin of every
/// run (as a routed run's resume did).
macro_rules! select_pins {
    ($run:literal) => {
        concat!(
            "SELECT run_id, turn, seat, worker, model, family, pool, phase, at, fractions,
                    reason, excluded
             FROM pins
             WHERE ",
            $run,
            " AND (?2 IS NULL OR seat = ?2)
               AND (?3 IS NULL OR pool = ?3) AND (?4 IS NULL OR phase = ?4)
               AND (?5 IS NULL OR at >= ?5)
             ORDER BY seq"
        )
    };
}

/// The pins matching `filter`, in the order they were written.
pub(super) fn pins(conn: &Connection, filter: &PinFilter) -> Result<Vec<StoredPin>> {
    let mut select = conn.prepare_cached(match filter.run {
        Some(_) => select_pins!("run_id = ?1"),
        None => select_pins!("?1 IS NULL"),
    })?;
    let rows = select.query_map(
        params![
            filter.run.as_ref().map(|r| r.0.as_str()),
            filter.seat.as_ref().map(SeatId::as_str),
            filter.pool.as_ref().map(PoolId::as_str),
            filter.phase.as_deref(),
            filter.since.map(|t| t.0),
        ],
        |r| {
            Ok((
                (
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ),
                (
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                ),
                (
                    r.get::<_, i64>(8)?,
                    r.get::<_, String>(9)?,
                    r.get::<_, String>(10)?,
                    r.get::<_, Option<String>>(11)?,
                ),
            ))
        },
    )?;
    rows.map(|row| {
        let (
            (run, turn, seat, worker),
            (model, family, pool, phase),
            (at, fractions, reason, excluded),
        ) = row?;
        let what = || format!("pin of run {run} turn {turn}");
        Ok(StoredPin {
            pin: Pin {
                seat: SeatId::new(seat),
                worker: WorkerId::new(worker),
                model,
                family,
                pool: PoolId::new(pool),
                phase,
                at: Timestamp(at),
                fractions: crate::codec::from_json(&fractions, what)?,
                reason: crate::codec::from_json(&reason, what)?,
                excluded: excluded
                    .map(|e| crate::codec::from_json(&e, what))
                    .transpose()?,
            },
            run_id: RunId(run),
            turn,
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    /// One run's pins are read through `pins_by_run`, not by reading every pin of every
    /// run: what a routed run's resume costs must not grow with the other runs.
    #[test]
    fn one_runs_pins_are_found_through_their_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::migrations::migrate(&mut conn).unwrap();
        let plan = |sql: &str| -> String {
            let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = explain
                .query_map(
                    rusqlite::params![
                        "r",
                        None::<String>,
                        None::<String>,
                        None::<String>,
                        None::<i64>
                    ],
                    |r| r.get::<_, String>(3),
                )
                .unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        let one = plan(select_pins!("run_id = ?1"));
        assert!(one.contains("USING INDEX pins_by_run"), "{one}");
        let all = plan(select_pins!("?1 IS NULL"));
        assert!(all.contains("SCAN pins"), "{all}");
    }
}
