//! Reservations of headroom (`Store::try_reserve`) on a server many hosts share.
//!
//! Every reserver of a pool takes one transaction-scoped advisory lock on the pool's
//! key first, and so does a turn's commit that releases a reservation (`lock_pool`).
//! Under READ COMMITTED each statement reads a fresh snapshot, so once the lock is
//! held, the reads see everything committed by the last holder; and since a commit
//! swaps its reservation for its calls while holding the same lock, no reserver's reads
//! can fall between the two halves of that swap (which would count the turn nowhere).

use baton_core::ids::{RunId, Timestamp};
use baton_core::router::{PoolId, PoolUsage};

use super::{Result, Tx, get, to_u32};
use crate::pools::{
    Estimate, LiveReservation, ReservationId, ReserveOutcome, ReserveRequest, has_headroom,
    with_reserved,
};

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Serialises, across hosts, everything that changes what a pool holds or has spent
/// against a reserver reading it; held to the end of the transaction.
pub(super) fn lock_pool(tx: &mut Tx<'_>, pool: &PoolId) -> Result<()> {
    tx.exec(
        "SELECT pg_advisory_xact_lock(hashtext('baton.pool.' || current_schema() || $1::text))",
        &[&pool.as_str()],
    )?;
    Ok(())
}

/// What the live reservations of `pool` made in `[start, end)` hold at `db_now`.
pub(super) fn held(
    tx: &mut Tx<'_>,
    pool: &PoolId,
    start: i64,
    end: i64,
    db_now: i64,
) -> Result<(u64, u64, u64)> {
    let row = tx.one(
        "SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost_micro_usd), 0)::bigint,
                coalesce(sum(requests), 0)::bigint
         FROM pool_reservations
         WHERE pool = $1 AND expires_at > $4 AND at >= $2 AND at < $3",
        &[&pool.as_str(), &start, &end, &db_now],
    )?;
    Ok((
        count(get(&row, 0)?),
        count(get(&row, 1)?),
        count(get(&row, 2)?),
    ))
}

/// See `Store::try_reserve`. The caller holds the pool's lock (`lock_pool`) and read
/// `used` after taking it.
pub(super) fn try_reserve(
    tx: &mut Tx<'_>,
    used: PoolUsage,
    request: &ReserveRequest,
    db_now: i64,
) -> Result<ReserveOutcome> {
    // Expired rows (a process that died holding them) hold nothing any more.
    tx.exec(
        "DELETE FROM pool_reservations WHERE pool = $1 AND expires_at <= $2",
        &[&request.pool.as_str(), &db_now],
    )?;
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
    let row = tx.one(
        "INSERT INTO pool_reservations (pool, run_id, turn, lease_token, at, tokens,
                                        cost_micro_usd, requests, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         RETURNING id",
        &[
            &request.pool.as_str(),
            &request.run.0,
            &i64::from(request.turn),
            &request.lease_token,
            &request.at.0,
            &int(tokens),
            &int(cost_micro_usd),
            &int(requests),
            &db_now,
            &db_now.saturating_add(request.ttl_ms.max(0)),
        ],
    )?;
    Ok(ReserveOutcome::Reserved {
        id: ReservationId(get(&row, 0)?),
    })
}

pub(super) fn release(tx: &mut Tx<'_>, id: ReservationId) -> Result<()> {
    tx.exec("DELETE FROM pool_reservations WHERE id = $1", &[&id.0])?;
    Ok(())
}

pub(super) fn renew_with_lease(tx: &mut Tx<'_>, token: &str, expires_at: i64) -> Result<()> {
    tx.exec(
        "UPDATE pool_reservations SET expires_at = greatest(expires_at, $2)
         WHERE lease_token = $1",
        &[&token, &expires_at],
    )?;
    Ok(())
}

pub(super) fn release_with_lease(tx: &mut Tx<'_>, token: &str) -> Result<()> {
    tx.exec(
        "DELETE FROM pool_reservations WHERE lease_token = $1",
        &[&token],
    )?;
    Ok(())
}

pub(super) fn live(tx: &mut Tx<'_>, db_now: i64) -> Result<Vec<LiveReservation>> {
    let rows = tx.query(
        "SELECT id, pool, run_id, turn, at, tokens, cost_micro_usd, requests, expires_at
         FROM pool_reservations WHERE expires_at > $1 ORDER BY id",
        &[&db_now],
    )?;
    rows.iter()
        .map(|r| {
            let run: String = get(r, 2)?;
            let turn = to_u32(get(r, 3)?, || format!("turn of a reservation of run {run}"))?;
            Ok(LiveReservation {
                id: ReservationId(get(r, 0)?),
                pool: PoolId::new(get::<String>(r, 1)?),
                run: RunId(run),
                turn,
                at: Timestamp(get(r, 4)?),
                estimate: Estimate {
                    tokens: count(get(r, 5)?),
                    cost_micro_usd: count(get(r, 6)?),
                    requests: count(get(r, 7)?),
                },
                expires_at: Timestamp(get(r, 8)?),
            })
        })
        .collect()
}
