//! The assembly line's pure parts (issue 12): routes as data (`route`, validated at
//! load by `validate`), the line's typed records (`records`: findings, verdicts, plan
//! versions and the plan lock), and synthesis (`synthesis`: reviewers' findings merged
//! into consensus, contradictions and gaps, and a verdict).
//!
//! Only the reconciler writes the records (`reconciler::line`); nothing here does I/O.

pub mod answers;
pub mod ask;
pub mod brief;
pub mod cursor;
mod records;
mod route;
pub mod synthesis;
mod validate;

pub use records::{
    ClosedBy, Closure, DraftStep, Finding, FindingClaim, FindingSeverity, FindingStatus, PlanDraft,
    PlanLock, PlanVersion, Verdict, VerdictKind, Voice, plan_hash, short_hash,
};
pub use route::{
    Checkpoint, Convergence, DEFAULT_ROUTE, Rounds, Route, SeatSpec, Station, StationKind,
};
pub use validate::{Roster, RouteErrors, RouteProblem};

/// Whether round `round` of `station` converged under `rule`: it raised no finding
/// that was not already on record (a voice joining a finding on record is not new), or
/// no new one at MAJOR or stricter.
pub fn round_converged(
    state: &crate::state::ExecutionState,
    station: &str,
    round: u32,
    rule: Convergence,
) -> bool {
    let mut raised = state
        .findings
        .iter()
        .filter(|f| f.station == station && f.round == round);
    match rule {
        Convergence::NothingNew => raised.next().is_none(),
        Convergence::NoNewMajor => !raised.any(|f| f.raised_as >= FindingSeverity::Major),
    }
}

impl crate::state::ExecutionState {
    /// The plan version the lock froze, when the plan is locked.
    pub fn locked_plan(&self) -> Option<&PlanVersion> {
        let lock = self.plan_lock.as_ref()?;
        self.plan_versions.iter().find(|p| p.id == lock.plan)
    }
}

#[cfg(test)]
mod route_tests;
#[cfg(test)]
mod test_fixtures;
