//! Cancel requests' SQL (see `crate::cancel`).

use baton_core::ids::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, fail};
use crate::Error;
use crate::cancel::{CancelOutcome, CancelTarget};

/// A lease's token, owner and expiry, as stored (all `NULL` when nobody holds it).
type Lease = (Option<String>, Option<String>, Option<i64>);

/// `now` stamps the request (the engine's time); `db_now` decides whether a lease still
/// holds (the database's clock, as every lease decision).
pub(super) fn request(
    tx: &Connection,
    target: &CancelTarget,
    now: Timestamp,
    db_now: i64,
) -> Result<CancelOutcome> {
    let token = match target {
        CancelTarget::Process(owner) => {
            record(tx, target, None, now)?;
            return Ok(CancelOutcome::Requested {
                holder: owner.clone(),
            });
        }
        CancelTarget::Group(group) => {
            let known: Option<i64> = tx
                .prepare_cached("SELECT 1 FROM jobs WHERE grp = ?1 LIMIT 1")?
                .query_row([group], |r| r.get(0))
                .optional()?;
            if known.is_none() {
                return fail(Error::JobNotFound {
                    prefix: format!("group {group}"),
                });
            }
            record(tx, target, None, now)?;
            return Ok(CancelOutcome::Requested {
                holder: format!("the judge of group {group}"),
            });
        }
        CancelTarget::Run(run) => {
            // A job's run is stopped as its job is: the job's worker watches the job.
            let job: Option<String> = tx
                .prepare_cached("SELECT id FROM jobs WHERE run_id = ?1")?
                .query_row([&run.0], |r| r.get(0))
                .optional()?;
            if let Some(job) = job {
                return request(tx, &CancelTarget::Job(job), now, db_now);
            }
            let lease: Option<Lease> = tx
                .prepare_cached(
                    "SELECT lease_token, lease_owner, lease_expires_at FROM runs WHERE id = ?1",
                )?
                .query_row([&run.0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            let Some(lease) = lease else {
                return fail(Error::RunNotFound {
                    prefix: run.0.clone(),
                });
            };
            match lease {
                (Some(token), Some(owner), Some(until)) if until >= db_now => (token, owner),
                _ => {
                    return Ok(CancelOutcome::NotRunning {
                        state: "not being advanced by any process".into(),
                    });
                }
            }
        }
        CancelTarget::Job(id) => {
            let row: Option<(String, Lease)> = tx
                .prepare_cached(
                    "SELECT status, lease_token, lease_owner, lease_expires_at FROM jobs WHERE id = ?1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
                .optional()?;
            let Some(row) = row else {
                return fail(Error::JobNotFound { prefix: id.clone() });
            };
            match row {
                (status, (Some(token), Some(owner), Some(until)))
                    if status == "running" && until >= db_now =>
                {
                    (token, owner)
                }
                // Nobody would stop it: a queued job, or one whose worker stopped
                // renewing (a later claim would continue it). Cancelled here, and any
                // old holder that comes back is fenced off (its token is cleared).
                (status, ..) if status == "queued" || status == "running" => {
                    tx.prepare_cached(
                        "UPDATE jobs SET status = 'cancelled', error = ?1, lease_token = NULL,
                                lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2
                         WHERE id = ?3",
                    )?
                    .execute(params![CANCELLED_BEFORE_IT_RAN, now.0, id])?;
                    return Ok(CancelOutcome::Cancelled);
                }
                (status, ..) => return Ok(CancelOutcome::NotRunning { state: status }),
            }
        }
    };
    let (token, owner) = token;
    record(tx, target, Some(&token), now)?;
    Ok(CancelOutcome::Requested { holder: owner })
}

/// The error a job cancelled while no process held it carries.
const CANCELLED_BEFORE_IT_RAN: &str = "cancelled (`baton cancel`) while no worker held it";

fn record(
    tx: &Connection,
    target: &CancelTarget,
    token: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO cancel_requests (kind, target, lease_token, requested_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (kind, target) DO UPDATE
         SET lease_token = excluded.lease_token, requested_at = excluded.requested_at",
    )?
    .execute(params![target.kind(), target.id(), token, now.0])?;
    Ok(())
}

pub(super) fn requested(
    conn: &Connection,
    target: &CancelTarget,
    token: Option<&str>,
) -> Result<bool> {
    // `IS`: a process's request has no token, and NULL = NULL is not true.
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM cancel_requests WHERE kind = ?1 AND target = ?2 AND lease_token IS ?3",
        )?
        .query_row(params![target.kind(), target.id(), token], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(super) fn clear(tx: &Connection, target: &CancelTarget) -> Result<()> {
    tx.prepare_cached("DELETE FROM cancel_requests WHERE kind = ?1 AND target = ?2")?
        .execute(params![target.kind(), target.id()])?;
    Ok(())
}
