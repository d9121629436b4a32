//! `baton run --step-tags` and `--step-scope`: the tags reach a routed run's seat
//! policy and show in `baton tasks`, `baton seats`, `baton export` and `baton route`;
//! a bad flag is refused before anything is created, saying what to write.

use super::*;

/// Two families in two unmetered pools (pool `a`, w1's, is picked first on a tie), and
/// a `build.step` seat that keeps family `fa` from steps tagged `credentials`.
const TAGGED: &str = concat!(
    super::seats::routed_roster!(),
    r#"
[[seats]]
id = "build.step"
deny_tags = { credentials = ["fa"] }
"#
);

fn tagged_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baton.toml"), TAGGED).unwrap();
    dir
}

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--objective",
        "o",
        "--task",
        "Rotate the API keys",
        "--task",
        "Review it",
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_tagged_step_skips_the_denied_family_and_every_view_shows_its_tags_and_scope() {
    let dir = tagged_dir();
    let d = dir.path();
    run_ok(
        d,
        &run_args(&[
            "--step-tags",
            "credentials",
            "--step-tags",
            "",
            "--step-seat",
            "build.step",
            "--step-seat",
            "review.code",
            "--step-scope",
            "own",
        ]),
    );
    let tasks = run_ok(d, &["tasks"]);
    assert!(
        tasks.contains("T1 Rotate the API keys  (by w2, turn 0)  [tags credentials]  [scope own]"),
        "{tasks}"
    );
    assert!(tasks.contains("T2 Review it  (by w1, turn 1)\n"), "{tasks}");
    let seats = run_ok(d, &["seats"]);
    assert!(
        seats.contains("build.step: w2 (mock/m2, family fb, pool b)"),
        "{seats}"
    );
    assert!(
        seats.contains("phase step T1 (tagged credentials)"),
        "{seats}"
    );
    let json: serde_json::Value = serde_json::from_str(&run_ok(d, &["seats", "--json"])).unwrap();
    assert_eq!(json[0]["tags"], serde_json::json!(["credentials"]));
    assert!(json[1].get("tags").is_none(), "{json}");
    let md = run_ok(d, &["export", "--format", "md"]);
    assert!(
        md.contains("T1 Rotate the API keys (tags: credentials; scope: own) — done by w2"),
        "{md}"
    );
    let record: serde_json::Value =
        serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    let plan = &record["state"]["plan"];
    assert_eq!(plan[0]["tags"], serde_json::json!(["credentials"]));
    assert_eq!(plan[0]["scope"], "own");
    assert!(plan[1].get("tags").is_none() && plan[1].get("scope").is_none());
    // The dry run says why w1 is out of a tagged step, and takes it for an untagged one.
    let route = run_ok(d, &["route", "build.step", "--tags", "credentials"]);
    assert!(route.contains("seat build.step: w2"), "{route}");
    assert!(
        route.contains("excluded  w1: its family may not see steps tagged credentials"),
        "{route}"
    );
    assert!(run_ok(d, &["route", "build.step"]).contains("seat build.step: w1"));
    let err = run_err(d, &["route", "build.step", "--tags", "Credentials"]);
    assert!(err.contains(r#"write "credentials""#), "{err}");
}

#[test]
fn bad_step_flags_are_refused_with_what_to_write_and_create_nothing() {
    let dir = tagged_dir();
    let d = dir.path();
    for (extra, says) in [
        (
            &["--step-tags", "a", "--step-tags", "b", "--step-tags", "c"][..],
            "3 --step-tags values for 2 tasks; give at most one per --task",
        ),
        (
            &[
                "--step-scope",
                "own",
                "--step-scope",
                "own",
                "--step-scope",
                "own",
            ][..],
            "3 --step-scope values for 2 tasks",
        ),
        (
            &["--step-tags", "", "--step-tags", "db,Credentials"][..],
            r#"--step-tags of step 2: step tag "Credentials": it starts with 'C' (write "credentials")"#,
        ),
        (&["--step-tags", "db creds"][..], r#"write "db-creds""#),
        (
            &["--step-scope", "all"][..],
            r#"--step-scope of step 1: step scope "all" is not one: write "own""#,
        ),
    ] {
        let out = baton(d).args(run_args(extra)).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    assert!(!db(d).exists(), "a refused run creates no database");
}
