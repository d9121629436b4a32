//! Events out: everything that happens to a run, in the one shape the store's event
//! table, the CLI's progress output, `baton export` and (later) the server's live stream
//! share.
//!
//! The stored JSON shape is a contract: rows written by an older baton must still load.
//! So a variant is never renamed and a field added to one is `#[serde(default)]`.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventMsg {
    #[schemars(with = "String")]
    pub run_id: RunId,
    /// The turn the event belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Engine clock, milliseconds since the Unix epoch.
    #[schemars(with = "i64")]
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: EventKind,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What `ModelCalled` says beyond its first fields (absent in events written before).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallDetail {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duration_ms: u64,
    /// Provider-reported `[input, cached, output]` tokens, when it reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<[u64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
    /// Attempts recorded (0 when only the one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    RunCreated {
        objective: String,
        steps: usize,
    },
    /// Published before the turn's first model call.
    TurnStarted {
        worker: WorkerId,
        model: String,
        /// The step id, or "continuation".
        assignment: String,
        /// The step's task text (absent in events written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
    },
    PackageCompiled {
        tokens: usize,
        budget: usize,
        sections_included: usize,
        sections_omitted: Vec<String>,
        items_dropped: usize,
    },
    /// An attempt of a model call went out (`attempt` of at most `attempts`).
    CallSent {
        call: String,
        worker: WorkerId,
        model: String,
        attempt: u32,
        attempts: u32,
        /// The gateway's limit on one attempt, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    /// Waiting before the next attempt, as the provider asked or by backoff.
    RetryWaiting {
        worker: WorkerId,
        after_attempt: u32,
        delay_ms: u64,
    },
    /// A model call returned (answered or failed): the call record's summary.
    ModelCalled {
        call: String,
        worker: WorkerId,
        ok: bool,
        tokens_sent: usize,
        tokens_received: usize,
        #[serde(flatten)]
        detail: CallDetail,
    },
    ClaimRefused {
        worker: WorkerId,
        claim: String,
        reason: String,
    },
    Warning {
        worker: WorkerId,
        text: String,
    },
    /// The turn's last event: everything of the turn before it is committed with it.
    TurnCommitted {
        worker: WorkerId,
        status: String,
        changes: usize,
        /// Why the turn failed, for a failed turn.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Committed without evidence of work: its step stays open.
        #[serde(default, skip_serializing_if = "is_false")]
        step_left_open: bool,
        /// Steps done and planned after the turn (absent in older events).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<(usize, usize)>,
    },
    /// Live only, never stored: a turn that ran but was not committed (cancelled, or
    /// fenced off by another process). Its earlier live events are void.
    TurnAbandoned {
        reason: String,
    },
    StepDone {
        step: String,
        worker: WorkerId,
    },
    RunFinished {
        turns: u32,
    },
    RunBlocked {
        question: String,
    },
    /// The router seated a worker for a routed run's turn (a new pin, written with the
    /// turn: at phase start, or re-seated and why). A pin that holds says nothing.
    Seated {
        seat: String,
        worker: WorkerId,
        model: String,
        pool: String,
        phase: String,
        /// Why, in words: `at phase start`, `pool claude exhausted`, …
        reason: String,
    },
    /// A human replaced the run's roster (e.g. `baton resume --roster`): what changed,
    /// and from which file. Stamped by the engine like every event.
    RosterChanged {
        source: String,
        changes: Vec<String>,
    },
    /// A worker's gateway stopped asking for claims in its configured structured mode
    /// (forced tool use whose answer never ended) and asks in `mode` from now on:
    /// remembered with the run, so a resumed process starts in `mode` too.
    WorkerFellBack {
        worker: WorkerId,
        mode: String,
        reason: String,
    },
    /// A `baton work` process claimed a job whose run this is.
    JobClaimed {
        job: String,
        owner: String,
        attempt: u32,
        /// The candidate the job is (its group's label for it).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        candidate: String,
        /// Taken over from a worker that died or stopped renewing its lease.
        #[serde(default, skip_serializing_if = "is_false")]
        reclaimed: bool,
    },
    /// A gate (a mechanical check: tests, lint) started on the turn's commit.
    GateStarted {
        name: String,
        command: String,
    },
    GateFinished {
        name: String,
        passed: bool,
        duration_ms: u64,
    },
    /// A lease this process held (`what`: "job" or "run") was taken by another.
    LeaseLost {
        what: String,
        id: String,
        reason: String,
    },
    /// The judge compared a group's candidates (or tried to: `error` says why it has
    /// no verdict, and the group can be judged again).
    Judged {
        group: String,
        candidates: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        winner: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunCreated { .. } => "run_created",
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::PackageCompiled { .. } => "package_compiled",
            EventKind::CallSent { .. } => "call_sent",
            EventKind::RetryWaiting { .. } => "retry_waiting",
            EventKind::ModelCalled { .. } => "model_called",
            EventKind::ClaimRefused { .. } => "claim_refused",
            EventKind::Warning { .. } => "warning",
            EventKind::TurnCommitted { .. } => "turn_committed",
            EventKind::TurnAbandoned { .. } => "turn_abandoned",
            EventKind::StepDone { .. } => "step_done",
            EventKind::RunFinished { .. } => "run_finished",
            EventKind::RunBlocked { .. } => "run_blocked",
            EventKind::RosterChanged { .. } => "roster_changed",
            EventKind::Seated { .. } => "seated",
            EventKind::WorkerFellBack { .. } => "worker_fell_back",
            EventKind::JobClaimed { .. } => "job_claimed",
            EventKind::GateStarted { .. } => "gate_started",
            EventKind::GateFinished { .. } => "gate_finished",
            EventKind::LeaseLost { .. } => "lease_lost",
            EventKind::Judged { .. } => "judged",
        }
    }

    /// Whether the event is published live but never stored (see `TurnAbandoned`).
    pub fn is_live_only(&self) -> bool {
        matches!(self, EventKind::TurnAbandoned { .. })
    }
}

/// An event as a live subscriber receives it.
///
/// `seq` is the event's per-run sequence number once it is durable. The events of a
/// turn are published as they happen with `seq: None` (provisional) and are committed
/// with the turn; the turn's `TurnCommitted` event is published only after the commit,
/// with its `seq`, and confirms every provisional event of its turn before it. A turn
/// that is not committed ends with a live `TurnAbandoned` instead, and none of its events
/// are stored. (A turn whose calls failed is committed as a failed turn: its events are
/// durable.) Events outside turns are stored first and published with their `seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(flatten)]
    pub event: EventMsg,
}

impl Envelope {
    pub fn is_provisional(&self) -> bool {
        self.seq.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows written by the baton before this protocol (fields as they were then) load.
    #[test]
    fn events_stored_by_an_older_baton_still_load() {
        let rows = [
            r#"{"run_id":"abc","at":5,"type":"run_created","objective":"o","steps":2}"#,
            r#"{"run_id":"abc","turn":0,"at":6,"type":"turn_started","worker":"w1","model":"mock","assignment":"s1"}"#,
            r#"{"run_id":"abc","turn":0,"at":6,"type":"model_called","call":"execute","worker":"w1","ok":true,"tokens_sent":10,"tokens_received":3}"#,
            r#"{"run_id":"abc","turn":0,"at":7,"type":"turn_committed","worker":"w1","status":"committed","changes":4}"#,
            r#"{"run_id":"abc","at":8,"type":"run_blocked","question":"why?"}"#,
        ];
        let loaded: Vec<EventMsg> = rows
            .iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        assert!(matches!(
            &loaded[1].kind,
            EventKind::TurnStarted { task: None, assignment, .. } if assignment == "s1"
        ));
        assert!(matches!(
            &loaded[2].kind,
            EventKind::ModelCalled { ok: true, tokens_sent: 10, detail, .. } if *detail == CallDetail::default()
        ));
        assert!(matches!(
            &loaded[3].kind,
            EventKind::TurnCommitted {
                steps: None,
                step_left_open: false,
                changes: 4,
                ..
            }
        ));
        // And they are written back as they were read: nothing new appears in old rows.
        for (row, ev) in rows.iter().zip(&loaded) {
            assert_eq!(serde_json::to_string(ev).unwrap(), *row);
        }
    }
}
