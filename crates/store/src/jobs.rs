//! Jobs: queue → claim (lease + heartbeat, fencing token) → outbox → judged.
//!
//! The store keeps a job's specification and outbox as JSON it does not interpret; the
//! engine owns their types. What the store guarantees is the lease: a job is claimed by
//! one worker at a time, a dead worker's job is reclaimed once its lease expires, and
//! every write for a job is fenced with the token of the lease that made it.

use baton_core::ids::{RunId, Timestamp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    /// Finished: its branch, patch, gate results and record wait in the outbox.
    Outbox,
    /// Ended without a result (its error says why).
    Failed,
    /// Compared with its group's other candidates by the judge.
    Judged,
    /// Stopped by `baton cancel`: not failed, and claimed by no worker until requeued,
    /// when it continues from its last committed turn.
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Outbox => "outbox",
            JobStatus::Failed => "failed",
            JobStatus::Judged => "judged",
            JobStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Outbox,
            JobStatus::Failed,
            JobStatus::Judged,
            JobStatus::Cancelled,
        ]
        .into_iter()
        .find(|j| j.as_str() == s)
    }
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    pub id: String,
    /// Jobs enqueued together as candidates for the same work share a group.
    pub group: String,
    pub spec: serde_json::Value,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: String,
    pub group: String,
    pub status: JobStatus,
    pub spec: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// Claims so far (more than one means a worker died or lost the lease).
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<serde_json::Value>,
}

/// The result of trying to claim a job.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// The job is ours until `expires_at` (by the store's clock) unless renewed; every
    /// write carries `token`.
    Claimed {
        job: Box<JobInfo>,
        token: String,
        expires_at: Timestamp,
        /// True when the job was taken over from a worker whose lease expired.
        reclaimed: bool,
        /// Who held the job before, when it was taken over.
        previous_owner: Option<String>,
    },
    Skipped {
        reason: String,
    },
}

/// How a judge of a group ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgementOutcome {
    /// A verdict: the group's jobs are `judged` and carry it.
    Judged,
    /// No usable verdict (the calls failed, or the answers could not be read): the jobs
    /// are untouched, so the group can be judged again.
    Failed,
}

impl JudgementOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            JudgementOutcome::Judged => "judged",
            JudgementOutcome::Failed => "failed",
        }
    }
}

/// One judge of a group as recorded (`body` is the engine's JSON: the judgement, or the
/// failed one with its calls and error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgementRecord {
    /// The store's order of judgements, across groups.
    pub seq: u64,
    pub group: String,
    pub outcome: JudgementOutcome,
    pub recorded_at: Timestamp,
    pub body: serde_json::Value,
}
