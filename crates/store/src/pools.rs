//! Pools in the store: what their workers' calls spent, usage the owner declares for
//! work done outside baton, and benches. The store sums; the router (core) decides.

use std::fmt;

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::router::{Allowance, Benches, CallSpend, Pin, PoolId, PoolUsage, SeatId};
use baton_core::turn::CallRecord;
use serde::{Deserialize, Serialize};

/// What the owner takes off the floor.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum BenchTarget {
    Pool(PoolId),
    Worker(WorkerId),
}

impl BenchTarget {
    pub fn kind(&self) -> &'static str {
        match self {
            BenchTarget::Pool(_) => "pool",
            BenchTarget::Worker(_) => "worker",
        }
    }

    pub fn id(&self) -> &str {
        match self {
            BenchTarget::Pool(p) => p.as_str(),
            BenchTarget::Worker(w) => w.as_str(),
        }
    }
}

impl fmt::Display for BenchTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.id())
    }
}

/// A bench or an unbench, as the owner asked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchChange {
    pub target: BenchTarget,
    /// `true` benches, `false` puts it back on the floor.
    pub benched: bool,
    /// Who asked (a user name, or `baton` for the engine's own changes).
    pub by: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether a `BenchChange` changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchOutcome {
    Changed,
    /// Already benched (or already on the floor): nothing was recorded.
    Unchanged,
}

/// A bench in force: who benched what, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bench {
    pub target: BenchTarget,
    pub by: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The router's view of the benches in force.
pub fn bench_set(benches: &[Bench]) -> Benches {
    let mut set = Benches::default();
    for bench in benches {
        match &bench.target {
            BenchTarget::Pool(pool) => set.pools.insert(pool.clone()),
            BenchTarget::Worker(worker) => set.workers.insert(worker.clone()),
        };
    }
    set
}

/// How a declared usage row counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageMode {
    /// Work done outside baton: added to what the pool used in the window holding `at`.
    Add,
    /// What the provider's own dashboard says the pool used in its window as of `at`:
    /// it replaces every call and declared row before `at` in that window (the
    /// dashboard counted them), and what comes from `at` on is added to it.
    Set,
}

impl UsageMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UsageMode::Add => "add",
            UsageMode::Set => "set",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<UsageMode> {
        match text {
            "add" => Some(UsageMode::Add),
            "set" => Some(UsageMode::Set),
            _ => None,
        }
    }
}

/// Usage the owner declares for a pool (imported, or set by hand). Append-only: a
/// correction is a new row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManualUsage {
    pub pool: PoolId,
    pub mode: UsageMode,
    /// When the work was done (`Add`) or the dashboard read (`Set`).
    pub at: Timestamp,
    pub tokens: u64,
    pub cost_micro_usd: u64,
    pub requests: u64,
    /// Where the numbers come from, in the owner's words.
    #[serde(default)]
    pub note: String,
    pub recorded_by: String,
    pub recorded_at: Timestamp,
}

/// Who spent calls that no committed turn carries: the provider delivered them and
/// bills them all the same, so they count against the pool of whoever made them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SpentBy {
    /// A judge of a group of candidates (judges belong to no run).
    Judge { group: String },
    /// A turn that was not committed: stopped by a cancel after some of its calls were
    /// answered, fenced off by another process, or failed before its commit.
    Turn { run: RunId, turn: u32 },
}

impl SpentBy {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SpentBy::Judge { .. } => "judge",
            SpentBy::Turn { .. } => "turn",
        }
    }
}

/// What one call spent and when it started (the window it counts in), kept apart from
/// its record: a turn in flight holds these until it commits (see `Store::record_spend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpentCall {
    pub at: Timestamp,
    pub spend: CallSpend,
}

impl SpentCall {
    pub fn of(call: &CallRecord) -> SpentCall {
        SpentCall {
            at: call.started_at,
            spend: CallSpend::of(call),
        }
    }
}

/// A pin as stored: the run and the turn it seated (the turn it was committed with).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPin {
    pub run_id: RunId,
    pub turn: u32,
    #[serde(flatten)]
    pub pin: Pin,
}

/// Which pins to read; every field left out matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinFilter {
    pub run: Option<RunId>,
    pub seat: Option<SeatId>,
    pub pool: Option<PoolId>,
    pub phase: Option<String>,
    /// Pins made at or after this time.
    pub since: Option<Timestamp>,
}

impl PinFilter {
    /// Every pin of `run`.
    pub fn run(run: &RunId) -> Self {
        PinFilter {
            run: Some(run.clone()),
            ..PinFilter::default()
        }
    }
}

/// What a turn may spend, held against its pool's headroom while the turn is in flight
/// (see `Store::try_reserve`): an estimate made before its calls, replaced by what the
/// calls really spent when the turn commits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimate {
    pub tokens: u64,
    pub cost_micro_usd: u64,
    pub requests: u64,
}

/// A live reservation, as `Store::try_reserve` numbered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReservationId(pub i64);

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One turn's request for headroom.
#[derive(Debug, Clone, PartialEq)]
pub struct ReserveRequest {
    pub pool: PoolId,
    /// The pool's current window `[start, end)` (`Window::bounds`): what it used in it,
    /// and the reservations made in it, are what the allowance is checked against.
    pub window: (Timestamp, Timestamp),
    pub allowance: Allowance,
    pub estimate: Estimate,
    /// The turn that will spend it.
    pub run: RunId,
    pub turn: u32,
    /// The run lease of the process that holds the turn, when it holds one: its
    /// heartbeat keeps the reservation alive (`Store::renew_run_lease`), and giving the
    /// lease up releases it.
    pub lease_token: Option<String>,
    /// Engine clock: the window the reservation counts in.
    pub at: Timestamp,
    /// How long the reservation holds past the store's now without a renewal; a
    /// process that dies holding one blocks nobody for longer.
    pub ttl_ms: i64,
}

/// What `Store::try_reserve` answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReserveOutcome {
    /// The headroom is held for the turn until its commit, its release or its expiry.
    Reserved { id: ReservationId },
    /// The pool has no headroom left once what other turns in flight hold is counted:
    /// `usage` is what it used in the window plus those reservations, the reading the
    /// router should have seen (on it, the pool is out of headroom).
    Short { usage: PoolUsage },
}

/// A reservation that still holds (not released, not expired), for `baton pools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveReservation {
    pub id: ReservationId,
    pub pool: PoolId,
    pub run: RunId,
    pub turn: u32,
    pub estimate: Estimate,
    /// Engine clock, when it was taken.
    pub at: Timestamp,
    /// By the store's clock.
    pub expires_at: Timestamp,
}

/// Whether a pool whose usage, reservations of turns in flight included, is `usage`
/// still has headroom for one more turn: the router's own rule (every metered
/// dimension under its allowance), read on the same number every host sees. The
/// estimate of the turn asking is not added: a pool takes a turn while it is under its
/// allowance, as it did before reservations; what the estimate does is keep the next
/// turn out while this one is in flight.
pub(crate) fn has_headroom(allowance: &Allowance, usage: &PoolUsage) -> bool {
    allowance.spent_dimension(usage).is_none()
}

/// `usage` with `reserved` (tokens, micro-dollars, requests) added.
pub(crate) fn with_reserved(
    mut usage: PoolUsage,
    (tokens, usd, requests): (u64, u64, u64),
) -> PoolUsage {
    usage.tokens = usage.tokens.saturating_add(tokens);
    usage.usd += usd as f64 / 1_000_000.0;
    usage.requests = usage.requests.saturating_add(requests);
    usage
}
