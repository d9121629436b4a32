//! Synthesis: several reviewers' findings merged into consensus, contradictions and
//! gaps, and the verdict with its reasons. A pure function of the records, so a replayed
//! unit reaches the same verdict.
//!
//! - Findings about the same place saying the same thing are one **point**, whichever
//!   record or reviewer they came from.
//! - An open point is as strict as its open records (a confirmed fix no longer speaks).
//! - A point raised by two or more reviewers at one severity is **consensus**; at
//!   different severities, a **contradiction**, and the stricter severity wins.
//! - A point only one reviewer raised is a **gap** (nobody corroborated it), as is a
//!   reviewer that never reported (its part is unreviewed).
//! - Verdict: an open BLOCKER blocks (a human decides); else any open MAJOR forces a fix
//!   round (NEEDS_CHANGES); else APPROVED. A synthesis with no report at all blocks:
//!   nothing was reviewed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Finding, FindingSeverity, VerdictKind};
use crate::ids::WorkerId;
use crate::router::SeatId;
use crate::text::{normalize, same_statement};

/// A reviewer the synthesis expected a report from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub seat: SeatId,
    pub worker: WorkerId,
    /// Whether its turn committed (a reviewer that found nothing reported too).
    pub done: bool,
}

/// One worker's severity on a point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    pub worker: WorkerId,
    pub severity: FindingSeverity,
}

/// Findings that say the same thing about the same place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// The records merged, in id order; the first one's words name the point.
    pub findings: Vec<String>,
    pub what: String,
    #[serde(rename = "where")]
    pub location: String,
    /// The stricter of everything said.
    pub severity: FindingSeverity,
    /// Each worker once, at the strictest it said, in worker order.
    pub said: Vec<Said>,
    /// Whether any of its records is still open.
    pub open: bool,
}

impl Point {
    fn contradicted(&self) -> bool {
        self.said.iter().any(|s| s.severity != self.severity)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Synthesis {
    /// Open points two or more reviewers raised at one severity.
    pub consensus: Vec<Point>,
    /// Open points reviewers raised at different severities (the stricter wins).
    pub contradictions: Vec<Point>,
    /// Open points one reviewer raised.
    pub single: Vec<Point>,
    /// Points whose every record is closed (fixed or dismissed).
    pub closed: Vec<Point>,
    /// Reviewers that did not report.
    pub missing: Vec<Report>,
    pub verdict: VerdictKind,
    pub fix_round: bool,
    pub reasons: Vec<String>,
}

impl Synthesis {
    /// Every open point, strictest first (then in the order found).
    pub fn open(&self) -> Vec<&Point> {
        let mut out: Vec<&Point> = self
            .consensus
            .iter()
            .chain(&self.contradictions)
            .chain(&self.single)
            .collect();
        out.sort_by_key(|p| std::cmp::Reverse(p.severity));
        out
    }

    /// The ids of the open findings the verdict rests on, in id order.
    pub fn open_findings(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .open()
            .into_iter()
            .flat_map(|p| p.findings.iter().cloned())
            .collect();
        ids.sort_by(|a, b| id_order(a, b));
        ids
    }
}

/// Record ids (`N2`, `N10`) in number order.
fn id_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

/// Merges `findings` (any order) and `reports` into a synthesis.
pub fn synthesize(findings: &[&Finding], reports: &[Report]) -> Synthesis {
    let mut sorted: Vec<&Finding> = findings.to_vec();
    sorted.sort_by(|a, b| id_order(&a.id, &b.id));

    // Each finding joins the first point whose first record says the same of the same
    // place: comparing with the first record (not any member) keeps the grouping
    // independent of the input's order once sorted.
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in sorted {
        let place = normalize(&f.location);
        match groups
            .iter_mut()
            .find(|g| normalize(&g[0].location) == place && same_statement(&g[0].what, &f.what))
        {
            Some(group) => group.push(f),
            None => groups.push(vec![f]),
        }
    }

    let mut out = Synthesis {
        consensus: Vec::new(),
        contradictions: Vec::new(),
        single: Vec::new(),
        closed: Vec::new(),
        missing: reports.iter().filter(|r| !r.done).cloned().collect(),
        verdict: VerdictKind::Approved,
        fix_round: false,
        reasons: Vec::new(),
    };
    for group in groups {
        let point = point(&group);
        if !point.open {
            out.closed.push(point);
        } else if point.said.len() == 1 {
            out.single.push(point);
        } else if point.contradicted() {
            out.contradictions.push(point);
        } else {
            out.consensus.push(point);
        }
    }
    decide(&mut out, reports);
    out
}

fn point(group: &[&Finding]) -> Point {
    // An open point is as strict as its open records: a record whose fix was confirmed
    // (or that was dismissed) no longer speaks for it.
    let open = group.iter().any(|f| f.is_open());
    let live: Vec<&Finding> = group
        .iter()
        .copied()
        .filter(|f| !open || f.is_open())
        .collect();
    let mut said: BTreeMap<&WorkerId, FindingSeverity> = BTreeMap::new();
    let mut say = |worker, severity| {
        let entry = said.entry(worker).or_insert(severity);
        *entry = (*entry).max(severity);
    };
    for f in &live {
        say(&f.provenance.recorded_by, f.raised_as);
        for v in &f.voices {
            say(&v.by, v.severity);
        }
    }
    let said: Vec<Said> = said
        .into_iter()
        .map(|(worker, severity)| Said {
            worker: worker.clone(),
            severity,
        })
        .collect();
    // The record's own severity counts too: it only rises, also on a restatement by
    // the first reviewer itself.
    let severity = said
        .iter()
        .map(|s| s.severity)
        .chain(live.iter().map(|f| f.severity))
        .max()
        .unwrap_or(FindingSeverity::Nit);
    Point {
        findings: group.iter().map(|f| f.id.clone()).collect(),
        what: group[0].what.clone(),
        location: group[0].location.clone(),
        severity,
        said,
        open,
    }
}

fn decide(out: &mut Synthesis, reports: &[Report]) {
    let strictest = out.open().first().map(|p| p.severity);
    let mut reasons = Vec::new();
    let nobody = !reports.is_empty() && reports.iter().all(|r| !r.done);
    out.verdict = if nobody {
        reasons.push("no reviewer reported: nothing was reviewed".to_string());
        VerdictKind::Blocked
    } else {
        match strictest {
            Some(FindingSeverity::Blocker) => VerdictKind::Blocked,
            Some(FindingSeverity::Major) => VerdictKind::NeedsChanges,
            _ => VerdictKind::Approved,
        }
    };
    out.fix_round = out.verdict == VerdictKind::NeedsChanges;
    for p in out.open() {
        if p.severity >= FindingSeverity::Major {
            reasons.push(reason(p));
        }
    }
    for p in &out.contradictions {
        let said: Vec<String> = p
            .said
            .iter()
            .map(|s| format!("{} {}", s.worker, s.severity))
            .collect();
        reasons.push(format!(
            "contradiction at {}: {} ({}); the stricter, {}, stands",
            p.location,
            p.what,
            said.join(", "),
            p.severity
        ));
    }
    let minor: Vec<&Point> = out
        .open()
        .into_iter()
        .filter(|p| p.severity < FindingSeverity::Major)
        .collect();
    if out.verdict == VerdictKind::Approved {
        reasons.insert(
            0,
            match minor.len() {
                0 => "no open finding".to_string(),
                n => format!("no open MAJOR or BLOCKER finding; {n} minor or nit left open"),
            },
        );
    }
    for r in &out.missing {
        reasons.push(format!(
            "{} ({}) did not report: its part is unreviewed",
            r.seat, r.worker
        ));
    }
    let single = out.single.len();
    if single > 0 {
        reasons.push(format!(
            "{single} finding{} raised by one reviewer only (not corroborated)",
            if single == 1 { "" } else { "s" }
        ));
    }
    out.reasons = reasons;
}

fn reason(p: &Point) -> String {
    let by: Vec<&str> = p.said.iter().map(|s| s.worker.as_str()).collect();
    format!(
        "{} at {}: {} ({}; raised by {})",
        p.severity,
        p.location,
        p.what,
        p.findings.join(", "),
        by.join(", ")
    )
}

#[cfg(test)]
#[path = "synthesis_tests.rs"]
mod tests;
