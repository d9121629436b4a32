//! `baton line`: what exists of the assembly line is its route, validated with
//! `--check` (as data, and against the configuration's workers when there are some).

use super::*;

/// A roster of mock workers of the given families, one worker each.
fn roster(families: &[&str]) -> String {
    families
        .iter()
        .enumerate()
        .map(|(i, family)| {
            format!("[[workers]]\nid = \"w{i}\"\nmodel = \"mock/m{i}\"\nfamily = \"{family}\"\n\n")
        })
        .collect()
}

#[test]
fn the_default_route_checks_and_prints_every_station() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(dir.path(), &["line", "--check"]);
    assert!(
        out.starts_with("route default: 9 stations, 18 seat lanes\n"),
        "{out}"
    );
    for station in [
        "intake",
        "discovery",
        "plan-loop",
        "build",
        "review",
        "synthesis",
        "gate",
        "merge",
    ] {
        assert!(
            out.contains(&format!(" {station} ")),
            "{station} missing:\n{out}"
        );
    }
    assert!(out.ends_with("not checked against a roster (give --config with [[workers]] to check who can take each seat)\n"), "{out}");
}

#[test]
fn a_route_file_with_problems_lists_each_with_what_to_fix_and_fails_as_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let route = baton_core::line::DEFAULT_ROUTE
        .replace("limit = 4", "limit = 0")
        .replace("review.breadth", "reveiw.breadth");
    std::fs::write(dir.path().join("route.toml"), route).unwrap();
    let out = baton(dir.path())
        .args(["line", "--route", "route.toml", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "error: route.toml: 2 problems in the route\n  - station plan-loop: a round limit of 0 runs no round; give limit = 1 or more (reaching it without converging asks a human)\n  - station review: \"reveiw.breadth\" is not a seat this station asks for; a review station's seats are named review.* (e.g. review.fresh-eyes)\n"
    );
}

#[test]
fn a_roster_of_one_family_cannot_staff_the_reviews() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baton.toml"), roster(&["mock", "mock"])).unwrap();
    let err = run_err(dir.path(), &["line", "--check"]);
    assert!(err.starts_with("error: the built-in default route, against the roster in baton.toml: 7 problems in the route"), "{err}");
    assert!(err.contains("seat review.deep-rounds could only be filled by family mock, which can also write the work it reviews (build.hard-step, build.rote-step)"), "{err}");
}

#[test]
fn a_roster_of_three_families_staffs_the_default_route() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        roster(&["anthropic", "openai", "zhipu"]),
    )
    .unwrap();
    let out = run_ok(dir.path(), &["line", "--check"]);
    assert!(out.ends_with("valid: every seat can be staffed from the 3 workers in baton.toml within the cross-family rule\n"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(dir.path(), &["line", "--check", "--json"])).unwrap();
    assert_eq!(json["roster_checked"], true);
    assert_eq!(json["route"]["stations"].as_array().unwrap().len(), 9);
}

#[test]
fn running_a_unit_says_the_line_does_not_run_yet() {
    let dir = tempfile::tempdir().unwrap();
    let err = run_err(dir.path(), &["line", "Add rate limiting"]);
    assert!(
        err.contains("the assembly line cannot run a unit \"Add rate limiting\" yet"),
        "{err}"
    );
}
