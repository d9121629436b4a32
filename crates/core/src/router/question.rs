//! The question a run stops with when nobody may take a seat: which seat, why every
//! worker was excluded, and what would unblock it.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use super::{Excluded, Exclusion, RouteInput};

pub(super) fn nobody(input: &RouteInput<'_>, excluded: &[Excluded]) -> String {
    let seat = &input.seat.id;
    let mut question = format!("Nobody can take seat {seat}");
    if let Some(step) = input.step {
        let _ = write!(question, " for {step}");
    }
    let _ = write!(question, " (phase {}). ", input.phase);
    if excluded.is_empty() {
        let _ = write!(
            question,
            "The roster has no workers. To unblock it: add a worker whose qualified globs match {seat}."
        );
        return question;
    }
    let _ = write!(
        question,
        "All {} {} excluded: ",
        excluded.len(),
        if excluded.len() == 1 {
            "worker is"
        } else {
            "workers are"
        }
    );
    let reasons: Vec<String> = excluded
        .iter()
        .map(|e| format!("{} ({})", e.worker, e.reason))
        .collect();
    question.push_str(&reasons.join("; "));
    // Each remedy once, in the order of the reasons' severity.
    let mut by_kind: Vec<&Excluded> = excluded.iter().collect();
    by_kind.sort_by_key(|e| rank(&e.reason));
    let mut seen = BTreeSet::new();
    let remedies: Vec<String> = by_kind
        .iter()
        .map(|e| remedy(input, excluded, e))
        .filter(|r| seen.insert(r.clone()))
        .collect();
    let _ = write!(question, ". To unblock it: {}.", remedies.join("; or "));
    question
}

impl fmt::Display for Exclusion<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::NotQualified => f.write_str("not qualified for this seat"),
            Exclusion::PolicyDenied { tag } => {
                write!(f, "its family may not see steps tagged {tag}")
            }
            Exclusion::SameFamilyAsWriter { family, writer } => {
                write!(f, "same family ({family}) as the writer, {writer}")
            }
            Exclusion::HeldFind => f.write_str("it found this checkpoint, so it cannot confirm it"),
            Exclusion::Disabled => f.write_str("switched off in the config"),
            Exclusion::Benched { pool: Some(pool) } => write!(f, "pool {pool} is benched"),
            Exclusion::Benched { pool: None } => f.write_str("benched"),
            Exclusion::PoolExhausted { pool, until } => {
                write!(f, "pool {pool} is exhausted until {until}")
            }
            Exclusion::NoHeadroom {
                pool, dimension, ..
            } => write!(
                f,
                "pool {pool} has spent its {dimension} allowance for this window"
            ),
            Exclusion::UnknownPool { pool } => write!(f, "its pool {pool} is not configured"),
        }
    }
}

impl Exclusion<'_> {
    /// The kind's name, as it is serialized (`not_qualified`, `no_headroom`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Exclusion::NotQualified => "not_qualified",
            Exclusion::PolicyDenied { .. } => "policy_denied",
            Exclusion::SameFamilyAsWriter { .. } => "same_family_as_writer",
            Exclusion::HeldFind => "held_find",
            Exclusion::Disabled => "disabled",
            Exclusion::Benched { .. } => "benched",
            Exclusion::PoolExhausted { .. } => "pool_exhausted",
            Exclusion::NoHeadroom { .. } => "no_headroom",
            Exclusion::UnknownPool { .. } => "unknown_pool",
        }
    }
}

fn rank(reason: &Exclusion) -> u8 {
    match reason {
        Exclusion::NotQualified => 0,
        Exclusion::PolicyDenied { .. } => 1,
        Exclusion::SameFamilyAsWriter { .. } => 2,
        Exclusion::HeldFind => 3,
        Exclusion::Disabled => 4,
        Exclusion::Benched { .. } => 5,
        Exclusion::PoolExhausted { .. } => 6,
        Exclusion::NoHeadroom { .. } => 7,
        Exclusion::UnknownPool { .. } => 8,
    }
}

fn remedy(input: &RouteInput<'_>, all: &[Excluded], excluded: &Excluded) -> String {
    let seat = &input.seat.id;
    let worker = &excluded.worker;
    match &excluded.reason {
        Exclusion::NotQualified => format!(
            "qualify a worker for {seat} (its qualified globs, and the seat's own narrowing if set, must match)"
        ),
        Exclusion::PolicyDenied { tag } => format!(
            "qualify a worker of a family the seat's deny_tags allow for {tag}, or change that policy"
        ),
        Exclusion::SameFamilyAsWriter { .. } => {
            let families: BTreeSet<&str> = all
                .iter()
                .filter_map(|e| match &e.reason {
                    Exclusion::SameFamilyAsWriter { family, .. } => Some(*family),
                    _ => None,
                })
                .collect();
            let families: Vec<&str> = families.into_iter().collect();
            format!(
                "qualify a worker of another family than {} for {seat} (reviews are cross-family; the rule is not waived)",
                families.join(", ")
            )
        }
        Exclusion::HeldFind => format!(
            "qualify a second worker for {seat}: the worker that found a checkpoint never confirms it"
        ),
        Exclusion::Disabled => format!("switch worker {worker} back on in the config"),
        Exclusion::Benched { pool: Some(pool) } => {
            format!("unbench pool {pool} (baton pool unbench {pool})")
        }
        Exclusion::Benched { pool: None } => {
            format!("unbench worker {worker} (baton worker unbench {worker})")
        }
        Exclusion::PoolExhausted { pool, until } => {
            format!("wait until {until}, when pool {pool}'s quota resets")
        }
        Exclusion::NoHeadroom {
            pool,
            dimension,
            resets_at,
        } => match resets_at {
            Some(at) => format!(
                "wait until {at}, when pool {pool}'s window resets, or raise its {dimension} allowance"
            ),
            None => format!("raise pool {pool}'s {dimension} allowance"),
        },
        Exclusion::UnknownPool { pool } => {
            format!("add pool {pool} to [[pools]] or give worker {worker} a configured pool")
        }
    }
}
