use proptest::prelude::*;

use super::*;
use crate::ids::Timestamp;
use crate::line::{FindingStatus, Voice};
use crate::state::Provenance;

fn finding(id: &str, by: &str, severity: FindingSeverity, what: &str, at: &str) -> Finding {
    Finding {
        id: id.into(),
        station: "review".into(),
        seat: SeatId::new("review.breadth"),
        round: 1,
        step: None,
        severity,
        raised_as: severity,
        what: what.into(),
        location: at.into(),
        status: FindingStatus::Open,
        family: "f".into(),
        provenance: Provenance {
            recorded_by: WorkerId::new(by),
            model: "m".into(),
            turn: 1,
            recorded_at: Timestamp(1),
        },
        voices: Vec::new(),
        fix_claimed: None,
        closed: None,
    }
}

fn report(worker: &str, done: bool) -> Report {
    Report {
        seat: SeatId::new("review.fresh-eyes"),
        worker: WorkerId::new(worker),
        done,
    }
}

use FindingSeverity::{Blocker, Major, Minor, Nit};

const LEAK: &str = "the rate limiter never frees a bucket of an expired key";
const NAME: &str = "the handler's name does not say what it limits";

#[test]
fn two_reviewers_saying_the_same_thing_are_consensus() {
    let a = finding("N1", "w1", Minor, NAME, "src/api.rs");
    let b = finding(
        "N2",
        "w2",
        Minor,
        "The handler's name does not say what it limits.",
        "src/api.rs",
    );
    let s = synthesize(&[&a, &b], &[report("w1", true), report("w2", true)]);
    assert_eq!(s.consensus.len(), 1, "{s:#?}");
    assert_eq!(s.consensus[0].findings, ["N1", "N2"]);
    assert_eq!(s.verdict, VerdictKind::Approved);
    assert!(!s.fix_round);
    assert_eq!(
        s.reasons[0],
        "no open MAJOR or BLOCKER finding; 1 minor or nit left open"
    );
}

#[test]
fn on_a_contradiction_the_stricter_severity_wins_and_forces_a_fix_round() {
    let a = finding("N1", "w1", Minor, LEAK, "src/limit.rs");
    let b = finding("N2", "w2", Major, LEAK, "src/limit.rs");
    let s = synthesize(&[&b, &a], &[]);
    assert_eq!(s.contradictions.len(), 1, "{s:#?}");
    assert_eq!(s.contradictions[0].severity, Major);
    assert_eq!(s.verdict, VerdictKind::NeedsChanges);
    assert!(s.fix_round);
    assert_eq!(
        s.reasons,
        [
            format!("MAJOR at src/limit.rs: {LEAK} (N1, N2; raised by w1, w2)"),
            format!(
                "contradiction at src/limit.rs: {LEAK} (w1 MINOR, w2 MAJOR); the stricter, MAJOR, stands"
            ),
        ]
    );
    assert_eq!(s.open_findings(), ["N1", "N2"]);
}

#[test]
fn a_voice_on_one_record_counts_as_a_second_reviewer() {
    let mut a = finding("N1", "w1", Minor, LEAK, "src/limit.rs");
    a.voices.push(Voice {
        by: WorkerId::new("w3"),
        family: "g".into(),
        seat: SeatId::new("review.deep-rounds"),
        turn: 2,
        severity: Major,
        wording: None,
    });
    a.severity = Major;
    let s = synthesize(&[&a], &[]);
    assert_eq!(s.contradictions.len(), 1, "{s:#?}");
    assert_eq!(s.verdict, VerdictKind::NeedsChanges);
}

#[test]
fn a_single_major_forces_a_fix_round_and_is_a_gap() {
    let a = finding("N1", "w1", Major, LEAK, "src/limit.rs");
    let b = finding("N2", "w2", Nit, NAME, "src/api.rs");
    let s = synthesize(&[&a, &b], &[report("w1", true), report("w2", true)]);
    assert_eq!(s.single.len(), 2);
    assert_eq!(s.verdict, VerdictKind::NeedsChanges);
    assert!(s.fix_round);
    assert_eq!(
        s.reasons.last().unwrap(),
        "2 findings raised by one reviewer only (not corroborated)"
    );
}

#[test]
fn a_blocker_blocks_without_a_fix_round() {
    let a = finding(
        "N1",
        "w1",
        Blocker,
        "the objective asks for two contradictory limits",
        "intake",
    );
    let b = finding("N2", "w2", Major, LEAK, "src/limit.rs");
    let s = synthesize(&[&a, &b], &[]);
    assert_eq!(s.verdict, VerdictKind::Blocked);
    assert!(!s.fix_round);
    assert!(
        s.reasons[0].starts_with("BLOCKER at intake"),
        "{:?}",
        s.reasons
    );
}

#[test]
fn closed_findings_do_not_hold_the_verdict() {
    let mut a = finding("N1", "w1", Major, LEAK, "src/limit.rs");
    a.status = FindingStatus::Fixed;
    let mut b = finding("N2", "w2", Major, NAME, "src/api.rs");
    b.status = FindingStatus::Dismissed;
    let s = synthesize(&[&a, &b], &[report("w1", true)]);
    assert_eq!(s.closed.len(), 2);
    assert_eq!(s.verdict, VerdictKind::Approved);
    assert_eq!(s.reasons, ["no open finding"]);
}

#[test]
fn the_same_words_about_different_places_are_two_points() {
    let a = finding("N1", "w1", Major, LEAK, "src/limit.rs");
    let b = finding("N2", "w2", Major, LEAK, "src/other.rs");
    let s = synthesize(&[&a, &b], &[]);
    assert_eq!(s.single.len(), 2, "{s:#?}");
}

#[test]
fn a_reviewer_that_did_not_report_is_a_gap_and_nobody_reporting_blocks() {
    let s = synthesize(&[], &[report("w1", true), report("w2", false)]);
    assert_eq!(s.verdict, VerdictKind::Approved);
    assert_eq!(s.missing.len(), 1);
    assert!(
        s.reasons
            .contains(&"review.fresh-eyes (w2) did not report: its part is unreviewed".to_string())
    );
    let s = synthesize(&[], &[report("w1", false)]);
    assert_eq!(s.verdict, VerdictKind::Blocked);
    assert_eq!(s.reasons[0], "no reviewer reported: nothing was reviewed");
}

// Properties: findings drawn from a small vocabulary of places and statements, so
// that points do merge.
const PLACES: [&str; 3] = ["src/a.rs", "src/b.rs", "README.md"];
const STATEMENTS: [&str; 3] = [LEAK, NAME, "the retry loop sleeps while holding the lock"];

fn arb_severity() -> impl Strategy<Value = FindingSeverity> {
    prop::sample::select(FindingSeverity::ALL.to_vec())
}

fn arb_findings() -> impl Strategy<Value = Vec<Finding>> {
    prop::collection::vec(
        (
            0..3usize,
            0..3usize,
            0..4usize,
            arb_severity(),
            any::<bool>(),
        ),
        0..12,
    )
    .prop_map(|rows| {
        rows.into_iter()
            .enumerate()
            .map(|(i, (place, said, by, severity, open))| {
                let mut f = finding(
                    &format!("N{}", i + 1),
                    &format!("w{by}"),
                    severity,
                    STATEMENTS[said],
                    PLACES[place],
                );
                if !open {
                    f.status = FindingStatus::Fixed;
                }
                f
            })
            .collect()
    })
}

fn points(s: &Synthesis) -> Vec<&Point> {
    s.consensus
        .iter()
        .chain(&s.contradictions)
        .chain(&s.single)
        .chain(&s.closed)
        .collect()
}

proptest! {
    #[test]
    fn every_finding_lands_in_exactly_one_point(findings in arb_findings()) {
        let refs: Vec<&Finding> = findings.iter().collect();
        let s = synthesize(&refs, &[]);
        let mut seen: Vec<&String> = points(&s).iter().flat_map(|p| &p.findings).collect();
        seen.sort();
        let mut ids: Vec<&String> = findings.iter().map(|f| &f.id).collect();
        ids.sort();
        prop_assert_eq!(seen, ids);
    }

    #[test]
    fn a_points_severity_is_the_strictest_its_open_records_said(findings in arb_findings()) {
        let refs: Vec<&Finding> = findings.iter().collect();
        let s = synthesize(&refs, &[]);
        for p in points(&s) {
            let strictest = p
                .findings
                .iter()
                .filter_map(|id| findings.iter().find(|f| &f.id == id))
                .filter(|f| !p.open || f.is_open())
                .map(|f| f.severity)
                .max();
            prop_assert_eq!(Some(p.severity), strictest);
        }
    }

    #[test]
    fn the_verdict_follows_the_strictest_open_finding(findings in arb_findings()) {
        let refs: Vec<&Finding> = findings.iter().collect();
        let s = synthesize(&refs, &[]);
        let strictest = findings.iter().filter(|f| f.is_open()).map(|f| f.severity).max();
        let expected = match strictest {
            Some(Blocker) => VerdictKind::Blocked,
            Some(Major) => VerdictKind::NeedsChanges,
            _ => VerdictKind::Approved,
        };
        prop_assert_eq!(s.verdict, expected);
        // Any open MAJOR forces a fix round, unless a BLOCKER stops the line first.
        prop_assert_eq!(s.fix_round, expected == VerdictKind::NeedsChanges);
        if s.verdict != VerdictKind::Approved {
            prop_assert!(!s.open_findings().is_empty());
        }
    }

    #[test]
    fn the_order_of_the_findings_does_not_matter(
        findings in arb_findings(),
        seed in any::<u64>(),
    ) {
        let refs: Vec<&Finding> = findings.iter().collect();
        let mut shuffled = refs.clone();
        // A deterministic shuffle from the seed (no rand in core's dev-dependencies).
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(synthesize(&refs, &[]), synthesize(&shuffled, &[]));
    }
}
