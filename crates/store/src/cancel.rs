//! Cancel requests: how one process asks another to stop a run, a job or itself.
//!
//! A request is a row the holder's process polls for (every fraction of a second, so
//! it stops within one). A request for a run or a job names the lease it stops: it
//! stops that holder only, so a request that arrives as the holder finishes cannot
//! cancel whoever takes the work up next (`baton resume`, a requeued job).

use serde::{Deserialize, Serialize};

use baton_core::ids::RunId;

/// What a cancel request stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum CancelTarget {
    /// A run advanced in the foreground (`baton run`, `step`, `resume`), under its lease.
    Run(RunId),
    /// One job of a `baton work`, under its lease.
    Job(String),
    /// A whole `baton work` process, by the owner name it takes leases under.
    Process(String),
    /// The judge of a group of candidate jobs (`baton judge GROUP`), whichever process
    /// runs it. A judge holds no lease, so the request names none: a judge forgets the
    /// group's requests when it starts, so one made while no judge ran stops nothing.
    Group(String),
}

impl CancelTarget {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            CancelTarget::Run(_) => "run",
            CancelTarget::Job(_) => "job",
            CancelTarget::Process(_) => "process",
            CancelTarget::Group(_) => "group",
        }
    }

    pub(crate) fn id(&self) -> &str {
        match self {
            CancelTarget::Run(run) => &run.0,
            CancelTarget::Job(id) | CancelTarget::Process(id) | CancelTarget::Group(id) => id,
        }
    }
}

impl std::fmt::Display for CancelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind(), self.id())
    }
}

/// What [`Store::request_cancel`](crate::Store::request_cancel) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CancelOutcome {
    /// Recorded for the process named `holder`, which stops the work when it sees it.
    Requested { holder: String },
    /// A job no live process held (queued, or its lease expired): it is `cancelled`
    /// now, and no worker claims it until it is requeued.
    Cancelled,
    /// Nothing holds it, so there is nothing to stop; `state` says what it is.
    NotRunning { state: String },
}
