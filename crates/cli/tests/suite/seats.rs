//! `baton seats` and `baton pins` on a routed run of offline mock workers, and the pins
//! in `baton history` and `baton export`.

use serde_json::Value;

use super::*;

/// Two families in two unmetered pools (pool `a`, w1's, is picked first on a tie); the
/// routed roster `step_flags.rs` extends with a seat.
macro_rules! routed_roster {
    () => {
        r#"estimator = "heuristic"

[[workers]]
id = "w1"
model = "mock/m1"
family = "fa"
pool = "a"

[[workers]]
id = "w2"
model = "mock/m2"
family = "fb"
pool = "b"

[[pools]]
id = "a"

[[pools]]
id = "b"
"#
    };
}
pub(super) use routed_roster;

const ROUTED: &str = routed_roster!();

fn routed_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baton.toml"), ROUTED).unwrap();
    dir
}

fn run(d: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        "--objective",
        "o",
        "--task",
        "draft",
        "--task",
        "review",
    ];
    args.extend_from_slice(extra);
    baton(d).args(&args).output().unwrap()
}

/// A pool benched between the two steps: the review step's seat is re-filled from the
/// other pool; the ledger, the log (filtered), history and both exports say so.
#[test]
fn seats_and_pins_show_who_holds_each_seat_and_every_seating() {
    let dir = routed_dir();
    let d = dir.path();
    let out = run(
        d,
        &[
            "--step-seat",
            "build.step",
            "--step-seat",
            "review.code",
            "--max-turns",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Live, the seating is said before the turn's line.
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("seat build.step: w1 (mock/m1, pool a), at phase start"),
        "{}",
        text(&out)
    );
    assert!(run_ok(d, &["pool", "bench", "b"]).contains("benched"));
    let out = baton(d).arg("resume").output().unwrap();
    // The reviewer may not be the writer's family, and pool b is benched: nobody.
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains("Nobody can take seat review.code"), "{err}");
    assert!(
        err.contains("w1 (same family (fa) as the writer, w1)"),
        "{err}"
    );
    assert!(err.contains("w2 (pool b is benched)"), "{err}");
    assert!(
        err.contains("unbench pool b (baton pool unbench b)"),
        "{err}"
    );
    run_ok(d, &["pool", "unbench", "b"]);
    let out = baton(d).arg("resume").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let ledger = run_ok(d, &["seats"]);
    assert!(
        ledger.contains("build.step: w1 (mock/m1, family fa, pool a) since turn 0 at ")
            && ledger.contains(": at phase start · phase step T1"),
        "{ledger}"
    );
    assert!(
        ledger.contains("review.code: w2 (mock/m2, family fb, pool b) since turn 1 at "),
        "{ledger}"
    );
    let json: Value = serde_json::from_str(&run_ok(d, &["seats", "--json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert_eq!(json[1]["seat"], "review.code");
    assert_eq!(json[1]["since_turn"], 1);

    let log = run_ok(d, &["pins"]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(
        log.contains("turn   1 · ") && log.contains("· review.code · w2"),
        "{log}"
    );
    let only: Value = serde_json::from_str(&run_ok(d, &["pins", "--pool", "b", "--json"])).unwrap();
    assert_eq!(only.as_array().unwrap().len(), 1);
    assert_eq!(only[0]["worker"], "w2");
    assert_eq!(only[0]["turn"], 1);
    let phase: Value =
        serde_json::from_str(&run_ok(d, &["pins", "--phase", "step T1", "--json"])).unwrap();
    assert_eq!(phase[0]["seat"], "build.step");
    assert!(run_ok(d, &["pins", "--since", "2999-01-01"]).contains("no pins match"));
    assert_eq!(run_ok(d, &["pins", "--all"]).lines().count(), 2);
    // Why: the review pin keeps whom the router left out of that seating.
    let why = run_ok(d, &["pins", "--why"]);
    assert!(
        why.contains("    left out: w1 (same family (fa) as the writer, w1)"),
        "{why}"
    );
    assert_eq!(why.matches("left out: nobody").count(), 1, "{why}");
    let review: Value =
        serde_json::from_str(&run_ok(d, &["pins", "--seat", "review.code", "--json"])).unwrap();
    assert_eq!(review[0]["excluded"][0]["worker"], "w1");
    assert_eq!(review[0]["excluded"][0]["reason"], "same_family_as_writer");
    let out = baton(d).args(["pins", "--since", "soon"]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("neither a time"), "{}", text(&out));

    let history = run_ok(d, &["history"]);
    assert!(
        history.contains("seat build.step: seated at phase start, pool a (pools used: a 0%, b 0%)"),
        "{history}"
    );
    assert!(
        history.contains("seat review.code: seated at phase start, pool b"),
        "{history}"
    );
    let md = run_ok(d, &["export", "--format", "md"]);
    assert!(md.contains("## Pins"), "{md}");
    assert!(
        md.contains("| 1 | review.code | w2 | mock/m2 | fb | b | step T2 |")
            && md.contains("| w1: same family (fa) as the writer, w1 |"),
        "{md}"
    );
    let export: Value = serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    assert_eq!(export["pins"].as_array().unwrap().len(), 2);
    assert_eq!(export["pins"][0]["reason"]["kind"], "at_phase_start");
    assert_eq!(
        export["pins"][1]["excluded"][0]["why"],
        "same family (fa) as the writer, w1"
    );
}

/// A run without pools has no pins, and says why rather than printing nothing.
#[test]
fn seats_of_an_unrouted_run_say_that_turns_take_the_roster_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run(d, &[]);
    assert!(out.status.success(), "{}", text(&out));
    for cmd in ["seats", "pins"] {
        let shown = run_ok(d, &[cmd]);
        assert!(
            shown.contains("has no pins: its turns take the roster in order"),
            "{shown}"
        );
    }
    let export: Value = serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    assert!(export.get("pins").is_none());
}

/// A step seat no station asks for is refused before anything is created.
#[test]
fn a_step_seat_with_a_typo_is_refused_with_the_station_names() {
    let dir = routed_dir();
    let d = dir.path();
    let out = run(d, &["--step-seat", "reveiw.code"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("step seat \"reveiw.code\" is not a seat any station asks for"),
        "{}",
        text(&out)
    );
}
