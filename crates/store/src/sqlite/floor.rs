//! The floor's reading, kept between hand-offs: each pool's usage in its window and the
//! benches in force, brought up to date at every reading from the rows committed since
//! the last one, by this process or any other. A routed turn reads the floor twice (at
//! its hand-off and for the checks after it); summing every pool's window afresh each
//! time cost four queries per pool over every call of the window, and grew with it.
//!
//! Exact, not a cache that may be stale: every reading sees every row committed before
//! it, in the reading's own snapshot. This rests on the tables being append-only
//! (triggers refuse an update or a delete) and on each new row getting a `seq` above
//! every committed one (one writer at a time, and an integer primary key is given
//! `max + 1`: with no row ever deleted, the max never falls), so "what is new" is "what
//! lies past the last row read".

use std::collections::HashMap;

use baton_core::router::{PoolId, PoolUsage};
use rusqlite::Connection;

use super::Result;
use super::pools::{self, Sums, Tally};
use crate::pools::Bench;

/// The last rows a reading saw: the `seq` of `pool_calls`, `pool_spend`, `pool_usage`
/// and `benches` (integer primary keys: never renumbered, not even by a `VACUUM`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Marks {
    /// `None` until a first reading.
    calls: Option<i64>,
    spend: i64,
    usage: i64,
    benches: i64,
}

/// Each pool's tally in the window last asked for, and the benches, as of `marks`.
#[derive(Debug, Default)]
pub(super) struct Floor {
    marks: Marks,
    tallies: HashMap<PoolId, Tally>,
    benches: Vec<Bench>,
}

impl Floor {
    /// Each pool's usage in its window `[start, end)` (as `pools::usage` sums it) and
    /// the benches in force, read in `conn`'s transaction.
    pub fn reading(
        &mut self,
        conn: &Connection,
        windows: &[(PoolId, i64, i64)],
    ) -> Result<(Vec<PoolUsage>, Vec<Bench>)> {
        if !self.catch_up(conn)? {
            *self = Floor::default();
            self.marks = marks(conn)?;
            self.benches = pools::benches(conn)?;
        }
        let mut usage = Vec::with_capacity(windows.len());
        for (pool, start, end) in windows {
            let kept = self
                .tallies
                .get(pool)
                .filter(|t| (t.start, t.end) == (*start, *end));
            let tally = match kept {
                Some(t) => t.clone(),
                // A pool not read yet, or its window has turned over.
                None => {
                    let fresh = pools::tally(conn, pool, *start, *end)?;
                    self.tallies.insert(pool.clone(), fresh.clone());
                    fresh
                }
            };
            usage.push(tally.usage(pool));
        }
        Ok((usage, self.benches.clone()))
    }

    /// Adds what was committed since the last reading to the tallies kept; `false`
    /// when nothing was read yet.
    fn catch_up(&mut self, conn: &Connection) -> Result<bool> {
        let Some(last) = self.marks.calls else {
            return Ok(false);
        };
        let mut calls = conn.prepare_cached(
            "SELECT seq, pool, at, tokens, cost_micro_usd, requests, exhausted, exhausted_until
             FROM pool_calls WHERE seq > ?1 ORDER BY seq",
        )?;
        let mut rows = calls.query([last])?;
        while let Some(r) = rows.next()? {
            self.marks.calls = Some(r.get(0)?);
            if let Some(tally) = self.tallies.get_mut(&PoolId::new(r.get::<_, String>(1)?)) {
                let spend: Sums = (r.get(3)?, r.get(4)?, r.get(5)?);
                tally.add_call(r.get(2)?, spend, r.get(6)?, r.get(7)?);
            }
        }
        let mut spent = conn.prepare_cached(
            "SELECT seq, pool, at, tokens, cost_micro_usd, requests, exhausted, exhausted_until
             FROM pool_spend WHERE seq > ?1 ORDER BY seq",
        )?;
        let mut rows = spent.query([self.marks.spend])?;
        while let Some(r) = rows.next()? {
            self.marks.spend = r.get(0)?;
            if let Some(tally) = self.tallies.get_mut(&PoolId::new(r.get::<_, String>(1)?)) {
                let spend: Sums = (r.get(3)?, r.get(4)?, r.get(5)?);
                tally.add_call(r.get(2)?, spend, r.get(6)?, r.get(7)?);
            }
        }
        let mut declared = conn.prepare_cached(
            "SELECT seq, pool, mode, at, tokens, cost_micro_usd, requests
             FROM pool_usage WHERE seq > ?1 ORDER BY seq",
        )?;
        let mut rows = declared.query([self.marks.usage])?;
        while let Some(r) = rows.next()? {
            self.marks.usage = r.get(0)?;
            let pool = PoolId::new(r.get::<_, String>(1)?);
            let Some(tally) = self.tallies.get_mut(&pool) else {
                continue;
            };
            let at: i64 = r.get(3)?;
            match r.get::<_, String>(2)?.as_str() {
                "add" => tally.add_declared(at, (r.get(4)?, r.get(5)?, r.get(6)?)),
                // A dashboard reading in the window replaces what came before it: the
                // pool is summed afresh (rare: an owner's `baton pool usage --set`).
                _ if (tally.start..tally.end).contains(&at) => {
                    self.tallies.remove(&pool);
                }
                _ => {}
            }
        }
        let benches = bench_mark(conn)?;
        if benches != self.marks.benches {
            self.marks.benches = benches;
            self.benches = pools::benches(conn)?;
        }
        Ok(true)
    }
}

/// The last row of each table, without reading the rest.
fn marks(conn: &Connection) -> Result<Marks> {
    Ok(Marks {
        calls: Some(last_seq(
            conn,
            "SELECT coalesce(max(seq), 0) FROM pool_calls",
        )?),
        spend: last_seq(conn, "SELECT coalesce(max(seq), 0) FROM pool_spend")?,
        usage: last_seq(conn, "SELECT coalesce(max(seq), 0) FROM pool_usage")?,
        benches: bench_mark(conn)?,
    })
}

fn bench_mark(conn: &Connection) -> Result<i64> {
    last_seq(conn, "SELECT coalesce(max(seq), 0) FROM benches")
}

fn last_seq(conn: &Connection, sql: &str) -> Result<i64> {
    Ok(conn.prepare_cached(sql)?.query_row([], |r| r.get(0))?)
}
