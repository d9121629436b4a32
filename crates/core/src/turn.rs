//! What a turn leaves behind: its model calls, transfer audit and status. The store
//! persists a `TurnRecord` together with the state changes in one transaction.

use serde::{Deserialize, Serialize};

use crate::compiler::{Assignment, HandoffPackage};
use crate::error_class::ErrorClass;
use crate::ids::{RunId, Timestamp, WorkerId};
use crate::reconciler::ReconcileOutcome;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Execute,
    Handoff,
    /// A second chance after the execute call's output failed its schema: the same
    /// request plus the validation error.
    ExecuteRepair,
    /// The same for the handoff call.
    HandoffRepair,
    /// One call per turn (the default for API workers): the work and the handoff in
    /// one answer, a `TurnAnswer`.
    Combined,
    /// A second chance after the combined call's output failed its schema.
    CombinedRepair,
}

impl CallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Execute => "execute",
            CallKind::Handoff => "handoff",
            CallKind::ExecuteRepair => "execute_repair",
            CallKind::HandoffRepair => "handoff_repair",
            CallKind::Combined => "combined",
            CallKind::CombinedRepair => "combined_repair",
        }
    }

    /// The repair call that follows this one, if it is a first call.
    pub fn repair(self) -> Option<CallKind> {
        match self {
            CallKind::Execute => Some(CallKind::ExecuteRepair),
            CallKind::Handoff => Some(CallKind::HandoffRepair),
            CallKind::Combined => Some(CallKind::CombinedRepair),
            _ => None,
        }
    }
}

/// Tokens as the provider reported them for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// Every prompt token, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` served from the provider's prompt cache.
    pub cached_tokens: u64,
}

/// One attempt of a call that was retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The failure class, or `None` for the attempt that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorClass>,
    /// The delay the provider asked for, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// How long the engine waited before the next attempt, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
}

/// One model call as it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    pub call: CallKind,
    pub worker: WorkerId,
    pub model: String,
    /// Messages the gateway reported putting on the wire (`[system, user]` is 2). A
    /// call that failed before answering reports nothing, so its request is counted
    /// as built.
    pub messages: u32,
    /// sha256 of the request as the engine built it (system, NUL, user).
    pub request_hash: String,
    /// sha256 of the request as the gateway put it on the wire (an HTTP provider's
    /// body), when the call answered; calls recorded before baton measured it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_hash: Option<String>,
    /// Tokens sent: both messages and the answer format (a schema) when the gateway
    /// sends one, once for every attempt that may have reached the provider (retries
    /// included; an attempt that never connected counts nothing).
    pub tokens_sent: usize,
    pub tokens_received: usize,
    /// The model's raw output, when the call returned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What went wrong, when the call or its parsing failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The gateway's failure class (`auth`, `rate_limited`, …) when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// The failure in the gateway's own words, without the class and attempt count
    /// `error` begins with: what an exported script replays word for word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// What a truncated answer held before it was cut off: kept so `baton history`
    /// can show what the model wrote (never parsed, never replayed as an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_output: Option<String>,
    pub started_at: Timestamp,
    pub duration_ms: u64,
    /// Tokens as the provider reported them (the offline mock reports estimates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ReportedUsage>,
    /// Cost in millionths of a US dollar, when the roster gives the worker's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
    /// Every attempt, when the call was retried (empty when the first attempt decided).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptRecord>,
    /// The delay the provider asked for with the call's final failure, in
    /// milliseconds: the worker is not called again before it has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// When the provider said a spent quota comes back (engine clock), when the call
    /// failed with `quota_exhausted` and the provider named its reset: the worker's
    /// pool is exhausted until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_reset_at: Option<Timestamp>,
}

/// Measured evidence that no conversation crossed the handoff.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TransferAudit {
    /// Messages per call, as sent.
    pub messages_per_call: Vec<u32>,
    /// Hashes of each request, as sent.
    pub request_hashes: Vec<String>,
    /// Earlier turns' raw outputs found verbatim in this turn's requests outside the
    /// compiled package. Must be 0.
    pub prior_outputs_leaked: u32,
    /// Earlier raw outputs checked against this turn's requests.
    pub prior_outputs_checked: u32,
    /// True when every request was `[system, user]` built from this turn's package.
    pub package_only: bool,
}

impl TransferAudit {
    /// Conversations that crossed the handoff, as measured: calls that were not exactly
    /// `[system, user]` from the package, plus leaked prior outputs.
    pub fn conversations_passed(&self) -> u32 {
        let non_pair = self.messages_per_call.iter().filter(|m| **m != 2).count() as u32;
        non_pair + self.prior_outputs_leaked + u32::from(!self.package_only)
    }
}

/// One run of a gate: a mechanical pass/fail command (tests, lint, migrations).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateResult {
    pub name: String,
    pub command: String,
    /// The commit the gate ran against.
    pub commit: String,
    /// `None` when the command could not start or was killed (timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub passed: bool,
    pub duration_ms: u64,
    /// The end of its combined output; the whole output is in `output_file`.
    pub output_tail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

/// What happened in the turn's workspace (command workers in a git worktree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceTurn {
    /// The commit that holds this turn's changes, or the unchanged head.
    pub commit: String,
    /// False when the turn changed nothing (no commit was made).
    pub changed: bool,
    /// Paths the turn's commit changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// Both claims parsed and were reconciled.
    Committed,
    /// A call failed or its output was unusable; nothing was merged.
    Failed,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Committed => "committed",
            TurnStatus::Failed => "failed",
        }
    }
}

/// Everything about one turn except the state changes it made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub run_id: RunId,
    pub turn: u32,
    pub worker: WorkerId,
    pub model: String,
    pub family: String,
    pub assignment: Assignment,
    pub status: TurnStatus,
    pub package: HandoffPackage,
    pub calls: Vec<CallRecord>,
    /// The parsed claims as merged (engine-only fields already refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
    pub outcome: ReconcileOutcome,
    pub audit: TransferAudit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The turn's git commit and gate runs, for workers that work in a workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceTurn>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// The lane of the assembly line this turn ran, if it ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneRecord>,
}

/// Which lane of the assembly line a turn ran: where, and on what unit of work (what a
/// later checking seat's cross-family rule compares against, also after a resume).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneRecord {
    pub station: String,
    pub seat: crate::router::SeatId,
    /// Which of the seat's lanes (from 0).
    pub index: u32,
    pub round: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The unit of work the lane wrote or checked (`plan`, a build step's id).
    pub work: String,
}
