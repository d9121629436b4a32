//! Reservations of headroom (`Store::try_reserve`): taken inside the single writer's
//! `BEGIN IMMEDIATE` transaction, so two reservers of one pool, in this process or
//! another on the same file, are serialised by SQLite's write lock: the second reads
//! what the first held.

use baton_core::ids::{RunId, Timestamp};
use baton_core::router::{PoolId, PoolUsage};
use rusqlite::{Connection, params};

use super::Result;
use crate::pools::{
    Estimate, LiveReservation, ReservationId, ReserveOutcome, ReserveRequest, has_headroom,
    with_reserved,
};

/// SQLite integers are i64; an estimate beyond that is clamped, not wrapped.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// What the live reservations of `pool` made in `[start, end)` hold, at `db_now`:
/// (tokens, micro-dollars, requests).
pub(super) fn held(
    conn: &Connection,
    pool: &PoolId,
    start: i64,
    end: i64,
    db_now: i64,
) -> Result<(u64, u64, u64)> {
    let (tokens, usd, requests): (i64, i64, i64) = conn
        .prepare_cached(
            "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost_micro_usd), 0),
                    coalesce(sum(requests), 0)
             FROM pool_reservations
             WHERE pool = ?1 AND expires_at > ?4 AND at >= ?2 AND at < ?3",
        )?
        .query_row(params![pool.as_str(), start, end, db_now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    Ok((count(tokens), count(usd), count(requests)))
}

/// Reserves `request.estimate` when `used` (the pool's usage in the window, read in
/// this same write transaction) plus what others hold leaves headroom. Expired rows
/// (a process that died holding them) are swept first: they hold nothing any more.
pub(super) fn try_reserve(
    tx: &Connection,
    used: PoolUsage,
    request: &ReserveRequest,
    db_now: i64,
) -> Result<ReserveOutcome> {
    tx.prepare_cached("DELETE FROM pool_reservations WHERE expires_at <= ?1")?
        .execute([db_now])?;
    let (start, end) = (request.window.0.0, request.window.1.0);
    let others = held(tx, &request.pool, start, end, db_now)?;
    let usage = with_reserved(used, others);
    if !has_headroom(&request.allowance, &usage) {
        return Ok(ReserveOutcome::Short { usage });
    }
    let Estimate {
        tokens,
        cost_micro_usd,
        requests,
    } = request.estimate;
    tx.prepare_cached(
        "INSERT INTO pool_reservations (pool, run_id, turn, lease_token, at, tokens,
                                        cost_micro_usd, requests, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        request.pool.as_str(),
        request.run.0,
        request.turn,
        request.lease_token,
        request.at.0,
        int(tokens),
        int(cost_micro_usd),
        int(requests),
        db_now,
        db_now.saturating_add(request.ttl_ms.max(0)),
    ])?;
    Ok(ReserveOutcome::Reserved {
        id: ReservationId(tx.last_insert_rowid()),
    })
}

/// Drops a reservation: its turn committed (in the turn's transaction) or ended
/// without committing.
pub(super) fn release(tx: &Connection, id: ReservationId) -> Result<()> {
    tx.prepare_cached("DELETE FROM pool_reservations WHERE id = ?1")?
        .execute([id.0])?;
    Ok(())
}

/// Extends the reservations held under a run lease with the lease.
pub(super) fn renew_with_lease(tx: &Connection, token: &str, expires_at: i64) -> Result<()> {
    tx.prepare_cached(
        "UPDATE pool_reservations SET expires_at = max(expires_at, ?2) WHERE lease_token = ?1",
    )?
    .execute(params![token, expires_at])?;
    Ok(())
}

/// Drops the reservations held under a run lease given up.
pub(super) fn release_with_lease(tx: &Connection, token: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM pool_reservations WHERE lease_token = ?1")?
        .execute([token])?;
    Ok(())
}

pub(super) fn live(conn: &Connection, db_now: i64) -> Result<Vec<LiveReservation>> {
    let mut select = conn.prepare_cached(
        "SELECT id, pool, run_id, turn, at, tokens, cost_micro_usd, requests, expires_at
         FROM pool_reservations WHERE expires_at > ?1 ORDER BY id",
    )?;
    let rows = select.query_map([db_now], |r| {
        Ok(LiveReservation {
            id: ReservationId(r.get(0)?),
            pool: PoolId::new(r.get::<_, String>(1)?),
            run: RunId(r.get(2)?),
            turn: r.get(3)?,
            at: Timestamp(r.get(4)?),
            estimate: Estimate {
                tokens: count(r.get(5)?),
                cost_micro_usd: count(r.get(6)?),
                requests: count(r.get(7)?),
            },
            expires_at: Timestamp(r.get(8)?),
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}
