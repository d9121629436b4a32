//! The job queue's SQL. Claims run in an IMMEDIATE transaction, so two processes never
//! claim the same job; every later write is fenced with `WHERE id = ? AND lease_token = ?`.

use baton_core::ids::{RunId, Timestamp};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Result, fail};
use crate::codec::{RawJob, from_json, is_suffix_worth_trying, to_json};
use crate::jobs::{ClaimOutcome, JobInfo, JobStatus, JudgementOutcome, JudgementRecord, NewJob};
use crate::{Error, LeaseFence};

const COLUMNS: &str = "id, grp, status, spec, run_id, attempts, lease_owner, lease_expires_at, \
                       created_at, updated_at, outbox, error, judgement";

fn job_from_row(row: &Row<'_>) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        id: row.get(0)?,
        group: row.get(1)?,
        status: row.get(2)?,
        spec: row.get(3)?,
        run_id: row.get(4)?,
        attempts: row.get(5)?,
        lease_owner: row.get(6)?,
        lease_expires_at: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        outbox: row.get(10)?,
        error: row.get(11)?,
        judgement: row.get(12)?,
    })
}

pub(super) fn enqueue(tx: &Connection, job: &NewJob) -> Result<()> {
    let spec = to_json(&job.spec, || format!("spec of job {}", job.id))?;
    tx.prepare_cached(
        "INSERT INTO jobs (id, grp, status, spec, created_at, updated_at)
         VALUES (?1, ?2, 'queued', ?3, ?4, ?4)",
    )?
    .execute(params![job.id, job.group, spec, job.created_at.0])?;
    Ok(())
}

pub(super) fn list(conn: &Connection) -> Result<Vec<JobInfo>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM jobs ORDER BY created_at DESC, id"
    ))?;
    let rows = stmt.query_map([], job_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row?.decode()?);
    }
    Ok(out)
}

pub(super) fn get(conn: &Connection, id: &str) -> Result<JobInfo> {
    Ok(conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row([id], job_from_row)
        .optional()?
        .ok_or_else(|| Error::JobNotFound {
            prefix: id.to_string(),
        })?
        .decode()?)
}

pub(super) fn resolve(conn: &Connection, prefix: &str) -> Result<String> {
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM jobs WHERE id = ?1 OR substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT 11",
    )?;
    let mut ids: Vec<String> = stmt
        .query_map([prefix], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if ids.iter().any(|i| i == prefix) {
        return Ok(prefix.to_string());
    }
    if ids.is_empty() && is_suffix_worth_trying(prefix) {
        ids = conn
            .prepare_cached(
                "SELECT id FROM jobs WHERE substr(id, -length(?1)) = ?1 ORDER BY id LIMIT 11",
            )?
            .query_map([prefix], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
    }
    match ids.len() {
        0 => fail(Error::JobNotFound {
            prefix: prefix.to_string(),
        }),
        1 => Ok(ids.into_iter().next().unwrap_or_default()),
        _ => fail(Error::AmbiguousJob {
            prefix: prefix.to_string(),
            candidates: ids,
        }),
    }
}

pub(super) fn try_claim(
    tx: &Connection,
    owner: &str,
    token: &str,
    now: Timestamp,
    db_now: i64,
    lease_ms: i64,
) -> Result<ClaimOutcome> {
    // Queued jobs first (oldest first), then running jobs whose worker stopped renewing.
    let candidate: Option<(String, String, Option<String>)> = tx
        .prepare_cached(
            "SELECT id, status, lease_owner FROM jobs
             WHERE status = 'queued' OR (status = 'running' AND lease_expires_at < ?1)
             ORDER BY status = 'running', created_at, id LIMIT 1",
        )?
        .query_row([db_now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let Some((id, status, previous_owner)) = candidate else {
        return Ok(ClaimOutcome::Skipped {
            reason: "no queued job and no expired lease".into(),
        });
    };
    let expires_at = Timestamp(db_now.saturating_add(lease_ms));
    tx.prepare_cached(
        "UPDATE jobs SET status = 'running', lease_token = ?1, lease_owner = ?2,
                lease_expires_at = ?3, attempts = attempts + 1, updated_at = ?4
         WHERE id = ?5",
    )?
    .execute(params![token, owner, expires_at.0, now.0, id])?;
    let job = get(tx, &id)?;
    Ok(ClaimOutcome::Claimed {
        job: Box::new(job),
        token: token.to_string(),
        expires_at,
        reclaimed: status == "running",
        previous_owner: (status == "running").then_some(previous_owner).flatten(),
    })
}

/// Fails with `LeaseLost` unless `fence` holds the job's lease and the job is running.
pub(super) fn check_fence(conn: &Connection, fence: &LeaseFence) -> Result<()> {
    let row: Option<(Option<String>, String)> = conn
        .prepare_cached("SELECT lease_token, status FROM jobs WHERE id = ?1")?
        .query_row([&fence.job], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        None => fail(Error::JobNotFound {
            prefix: fence.job.clone(),
        }),
        Some((Some(token), status)) if token == fence.token && status == "running" => Ok(()),
        Some((_, status)) if status != "running" => fail(Error::LeaseLost {
            job: fence.job.clone(),
            reason: format!("the job is {status}"),
        }),
        Some(_) => fail(Error::LeaseLost {
            job: fence.job.clone(),
            reason: "another worker claimed it after this lease expired".into(),
        }),
    }
}

pub(super) fn renew(
    tx: &Connection,
    fence: &LeaseFence,
    now: Timestamp,
    db_now: i64,
    lease_ms: i64,
) -> Result<()> {
    check_fence(tx, fence)?;
    tx.prepare_cached(
        "UPDATE jobs SET lease_expires_at = ?1, updated_at = ?2 WHERE id = ?3 AND lease_token = ?4",
    )?
    .execute(params![
        db_now.saturating_add(lease_ms),
        now.0,
        fence.job,
        fence.token
    ])?;
    Ok(())
}

pub(super) fn set_run(
    tx: &Connection,
    fence: &LeaseFence,
    run: &RunId,
    now: Timestamp,
) -> Result<()> {
    check_fence(tx, fence)?;
    tx.prepare_cached(
        "UPDATE jobs SET run_id = ?1, updated_at = ?2 WHERE id = ?3 AND lease_token = ?4",
    )?
    .execute(params![run.0, now.0, fence.job, fence.token])?;
    Ok(())
}

pub(super) fn finish(
    tx: &Connection,
    fence: &LeaseFence,
    status: JobStatus,
    outbox: Option<&serde_json::Value>,
    error: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    check_fence(tx, fence)?;
    let outbox = match outbox {
        Some(v) => Some(to_json(v, || format!("outbox of job {}", fence.job))?),
        None => None,
    };
    tx.prepare_cached(
        "UPDATE jobs SET status = ?1, outbox = ?2, error = ?3, lease_token = NULL,
                lease_expires_at = NULL, updated_at = ?4
         WHERE id = ?5 AND lease_token = ?6",
    )?
    .execute(params![
        status.as_str(),
        outbox,
        error,
        now.0,
        fence.job,
        fence.token
    ])?;
    Ok(())
}

pub(super) fn release(tx: &Connection, fence: &LeaseFence, now: Timestamp) -> Result<()> {
    check_fence(tx, fence)?;
    tx.prepare_cached(
        "UPDATE jobs SET status = 'queued', lease_token = NULL, lease_owner = NULL,
                lease_expires_at = NULL, updated_at = ?1
         WHERE id = ?2 AND lease_token = ?3",
    )?
    .execute(params![now.0, fence.job, fence.token])?;
    Ok(())
}

pub(super) fn requeue(tx: &Connection, id: &str, now: Timestamp) -> Result<()> {
    let job = get(tx, id)?;
    if !matches!(job.status, JobStatus::Failed | JobStatus::Cancelled) {
        return fail(Error::JobNotRequeueable {
            job: id.to_string(),
            status: job.status.as_str(),
        });
    }
    tx.prepare_cached(
        "UPDATE jobs SET status = 'queued', error = NULL, outbox = NULL, lease_token = NULL,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
         WHERE id = ?2 AND status IN ('failed', 'cancelled')",
    )?
    .execute(params![now.0, id])?;
    Ok(())
}

pub(super) fn expire_lease(
    tx: &Connection,
    id: &str,
    owner: &str,
    now: Timestamp,
    db_now: i64,
) -> Result<bool> {
    let changed = tx
        .prepare_cached(
            "UPDATE jobs SET lease_expires_at = ?1, updated_at = ?4
             WHERE id = ?2 AND status = 'running' AND lease_owner = ?3",
        )?
        // One millisecond in the past: `try_claim` takes leases that expired before now.
        .execute(params![db_now.saturating_sub(1), id, owner, now.0])?;
    Ok(changed > 0)
}

pub(super) fn judge(
    tx: &Connection,
    group: &str,
    judgement: &serde_json::Value,
    now: Timestamp,
) -> Result<()> {
    let text = to_json(judgement, || format!("judgement of group {group}"))?;
    let changed = tx
        .prepare_cached(
            "UPDATE jobs SET judgement = ?1, status = 'judged', updated_at = ?2
             WHERE grp = ?3 AND status IN ('outbox', 'judged')",
        )?
        .execute(params![text, now.0, group])?;
    if changed == 0 {
        return fail(Error::JobNotFound {
            prefix: format!("group {group} (no finished candidates)"),
        });
    }
    append_judgement(tx, group, JudgementOutcome::Judged, &text, now)
}

/// Records a judge of `group` that has no verdict; the group's jobs are untouched.
pub(super) fn judge_failed(
    tx: &Connection,
    group: &str,
    failed: &serde_json::Value,
    now: Timestamp,
) -> Result<()> {
    let text = to_json(failed, || format!("failed judgement of group {group}"))?;
    let known: Option<i64> = tx
        .prepare_cached("SELECT 1 FROM jobs WHERE grp = ?1 LIMIT 1")?
        .query_row([group], |r| r.get(0))
        .optional()?;
    if known.is_none() {
        return fail(Error::JobNotFound {
            prefix: format!("group {group}"),
        });
    }
    append_judgement(tx, group, JudgementOutcome::Failed, &text, now)
}

fn append_judgement(
    tx: &Connection,
    group: &str,
    outcome: JudgementOutcome,
    body: &str,
    now: Timestamp,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO judgements (grp, outcome, recorded_at, body) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![group, outcome.as_str(), now.0, body])?;
    Ok(())
}

/// Every judge of `group`, oldest first.
pub(super) fn judgements(conn: &Connection, group: &str) -> Result<Vec<JudgementRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, outcome, recorded_at, body FROM judgements WHERE grp = ?1 ORDER BY seq",
    )?;
    let rows = stmt
        .query_map([group], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for (seq, outcome, recorded_at, body) in rows {
        let what = || format!("judgement {seq} of group {group}");
        let outcome = match outcome.as_str() {
            "judged" => JudgementOutcome::Judged,
            "failed" => JudgementOutcome::Failed,
            other => {
                return fail(Error::Corrupt {
                    what: what(),
                    detail: format!("unknown outcome \"{other}\""),
                });
            }
        };
        out.push(JudgementRecord {
            seq: u64::try_from(seq).unwrap_or_default(),
            group: group.to_string(),
            outcome,
            recorded_at: Timestamp(recorded_at),
            body: from_json(&body, what)?,
        });
    }
    Ok(out)
}
