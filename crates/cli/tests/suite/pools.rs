//! `baton pools` and `baton pool bench|unbench`: headroom falls by exactly the usage
//! the providers reported on a run against local servers speaking their wire formats.

use serde_json::Value;

use super::providers::{roster, run_args, serve, with_keys};
use super::*;

/// The providers' roster, its workers in two pools.
fn roster_with_pools(base: &str) -> String {
    let mut toml = roster(base);
    for (worker, pool) in [
        ("drafter", "openai"),
        ("reviewer", "others"),
        ("checker", "others"),
    ] {
        let id = format!("id = \"{worker}\"\n");
        toml = toml.replacen(&id, &format!("{id}pool = \"{pool}\"\n"), 1);
    }
    toml.push_str(
        r#"
[[pools]]
id = "openai"
allowance = { tokens = 1_000_000, usd = 10 }
window = "weekly"
reset = "mon 00:00"

[[pools]]
id = "others"
allowance = { requests = 100 }
window = "daily"
"#,
    );
    toml
}

/// A directory whose baton.toml has the two pools (its servers never called).
fn configured() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        roster_with_pools("http://127.0.0.1:9"),
    )
    .unwrap();
    dir
}

fn pools_json(d: &Path) -> Vec<Value> {
    let out: Value = serde_json::from_str(&run_ok(d, &["pools", "--json"])).unwrap();
    out["pools"].as_array().unwrap().clone()
}

/// What the providers reported, per pool, read back from the run's record (the export):
/// tokens, micro-dollars and requests of the openai pool ([0]) and the others ([1]).
fn reported(d: &Path) -> ([u64; 2], [u64; 2], [u64; 2], Value) {
    let export: Value = serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    let (mut tokens, mut micro_usd, mut requests) = ([0u64; 2], [0u64; 2], [0u64; 2]);
    for turn in export["turns"].as_array().unwrap() {
        let pool = usize::from(turn["worker"] != "drafter");
        for call in turn["calls"].as_array().unwrap() {
            tokens[pool] += call["usage"]["input_tokens"].as_u64().unwrap()
                + call["usage"]["output_tokens"].as_u64().unwrap();
            micro_usd[pool] += call["cost_micro_usd"].as_u64().unwrap_or(0);
            requests[pool] += 1;
        }
    }
    (tokens, micro_usd, requests, export)
}

/// `baton pools` says exactly what the record says was reported.
fn headroom_is_what_was_reported(d: &Path) -> ([u64; 2], Value) {
    let (tokens, micro_usd, requests, export) = reported(d);
    let after = pools_json(d);
    let openai = &after[0];
    assert_eq!(openai["used"]["tokens"], tokens[0]);
    assert_eq!(openai["used"]["requests"], requests[0]);
    assert_eq!(openai["headroom"]["tokens"], 1_000_000 - tokens[0]);
    let usd = micro_usd[0] as f64 / 1e6;
    assert!((openai["used"]["usd"].as_f64().unwrap() - usd).abs() < 1e-9);
    assert!((openai["headroom"]["usd"].as_f64().unwrap() - (10.0 - usd)).abs() < 1e-9);
    let others = &after[1];
    assert_eq!(others["used"]["tokens"], tokens[1]);
    assert_eq!(others["headroom"]["requests"], 100 - requests[1]);
    let share = requests[1] as f64 / 100.0;
    assert!((others["used_fraction"].as_f64().unwrap() - share).abs() < 1e-12);
    // Requests are not metered in openai's allowance: no headroom is invented for them.
    assert!(openai["headroom"].get("requests").is_none());
    (requests, export)
}

/// With pools configured the run is routed (each turn's worker is the router's pick,
/// coldest pool first), and headroom falls by exactly what the providers reported:
/// half-way through the run (its first two turns) and at its end.
#[test]
fn pools_headroom_falls_by_exactly_the_usage_providers_reported_during_a_routed_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, _) = serve();
    std::fs::write(d.join("baton.toml"), roster_with_pools(&base)).unwrap();

    // Before any run: nothing used, and reading creates no database.
    let before = pools_json(d);
    assert_eq!(before[0]["id"], "openai");
    assert_eq!(before[0]["used"]["tokens"], 0);
    assert_eq!(before[0]["headroom"]["tokens"], 1_000_000);
    assert_eq!(before[1]["headroom"]["requests"], 100);
    assert_eq!(before[0]["window"], "weekly mon 00:00");
    assert!(!db(d).exists());

    let out = with_keys(&mut baton(d))
        .args(run_args(&["--max-turns", "2"]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let (requests, _) = headroom_is_what_was_reported(d);
    assert_eq!(requests[0] + requests[1], 2);
    // Both pools untouched at the first step: the tie goes to openai, by id; the second
    // step goes to the colder pool, the others.
    assert_eq!(requests, [1, 1]);

    let out = with_keys(&mut baton(d)).arg("resume").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let (requests, export) = headroom_is_what_was_reported(d);
    assert_eq!(
        requests[0] + requests[1],
        5,
        "one call per turn, five steps"
    );
    // Every turn was seated by a pin of the export, one per step (nothing ran out).
    let pins = export["pins"].as_array().unwrap();
    assert_eq!(pins.len(), 5, "{pins:?}");
    assert!(pins.iter().all(|p| p["reason"]["kind"] == "at_phase_start"));
    for (turn, pin) in export["turns"].as_array().unwrap().iter().zip(pins) {
        assert_eq!(turn["worker"], pin["worker"]);
    }

    let shown = run_ok(d, &["pools"]);
    let others = format!("{:.1}% used · daily 00:00", requests[1] as f64);
    assert!(shown.contains(&others), "{others}: {shown}");
    let left = format!(
        "requests              {} of 100, {} left",
        requests[1],
        100 - requests[1]
    );
    assert!(shown.contains(&left), "{left}: {shown}");
    assert!(shown.contains("(not metered)"), "{shown}");
}

#[test]
fn a_pool_is_benched_and_unbenched_by_name_and_an_unknown_one_is_refused() {
    let dir = configured();
    let d = dir.path();
    let out = baton(d)
        .env("BATON_USER", "ada")
        .args([
            "pool",
            "bench",
            "openai",
            "--reason",
            "over budget this week",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pool openai is benched; recorded as by ada")
    );
    assert!(
        run_ok(d, &["pool", "bench", "openai"]).contains("was already benched; nothing recorded")
    );
    let shown = run_ok(d, &["pools"]);
    assert!(
        shown.contains("benched by ada at ")
            && shown.contains(": over budget this week (`baton pool unbench openai`)"),
        "{shown}"
    );
    assert_eq!(pools_json(d)[0]["benched"]["by"], "ada");
    assert!(pools_json(d)[1].get("benched").is_none());

    let out = baton(d).args(["pool", "bench", "opnai"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no pool named \"opnai\" in baton.toml; the pools are: openai, others"),
        "{err}"
    );

    assert!(run_ok(d, &["pool", "unbench", "openai"]).contains("pool openai is back on the floor"));
    assert!(pools_json(d)[0].get("benched").is_none());
    assert!(!run_ok(d, &["pools"]).contains("benched"));
}

#[test]
fn a_bench_of_a_pool_the_configuration_dropped_is_shown_and_can_be_lifted() {
    let dir = configured();
    let d = dir.path();
    run_ok(d, &["pool", "bench", "openai", "--reason", "over budget"]);
    run_ok(d, &["worker", "bench", "checker"]);
    // The owner drops the pool from the configuration and renames a worker; their
    // benches stay on record.
    let toml = roster_with_pools("http://127.0.0.1:9")
        .replace("pool = \"openai\"", "pool = \"others\"")
        .replace("id = \"checker\"", "id = \"checker-2\"");
    let start = toml.find("[[pools]]\nid = \"openai\"").unwrap();
    let end = start + toml[start..].find("[[pools]]\nid = \"others\"").unwrap();
    let dropped = format!("{}{}", &toml[..start], &toml[end..]);
    std::fs::write(d.join("baton.toml"), dropped).unwrap();

    let shown = run_ok(d, &["pools"]);
    let gone = "pool openai benched by ";
    let why = ": over budget; no such pool in the configuration now, the bench holds if it comes back (`baton pool unbench openai`)";
    assert!(shown.contains(gone) && shown.contains(why), "{shown}");
    let left = "; no such worker in the roster now, the bench holds if it comes back (`baton worker unbench checker`)";
    assert!(shown.contains(left), "{shown}");
    let json: Value = serde_json::from_str(&run_ok(d, &["pools", "--json"])).unwrap();
    let benched = &json["benched_pools_not_configured"][0]["target"]["id"];
    assert_eq!(benched, "openai");
    assert_eq!(json["pools"].as_array().unwrap().len(), 1);

    // Benching it again, or lifting a bench that was never made, names the pools.
    for args in [["pool", "bench", "openai"], ["pool", "unbench", "opnai"]] {
        let out = baton(d).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("the pools are: others"));
    }
    let back = run_ok(d, &["pool", "unbench", "openai"]);
    assert!(back.contains("pool openai is back on the floor"), "{back}");
    let back = run_ok(d, &["worker", "unbench", "checker"]);
    assert!(
        back.contains("worker checker is back on the floor"),
        "{back}"
    );
    assert!(!run_ok(d, &["pools"]).contains("benched"));

    // With no pool configured at all, the benches still on record are named.
    run_ok(d, &["pool", "bench", "others"]);
    std::fs::write(d.join("baton.toml"), roster("http://127.0.0.1:9")).unwrap();
    let out = baton(d).arg("pools").output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let named =
        "benches of pools no longer configured are still on record: `baton pool unbench others`";
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(named),
        "{}",
        text(&out)
    );
    let back = run_ok(d, &["pool", "unbench", "others"]);
    assert!(back.contains("pool others is back on the floor"), "{back}");
}

#[test]
fn pools_without_pools_configured_says_how_to_configure_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = baton(d).arg("pools").output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no pools are configured; add [[pools]] entries"),
        "{err}"
    );
}

#[test]
fn a_worker_is_benched_by_name_and_usage_is_declared_by_hand() {
    let dir = configured();
    let d = dir.path();
    assert!(
        run_ok(d, &["worker", "bench", "reviewer", "--reason", "flaky"])
            .contains("worker reviewer is benched")
    );
    let shown = run_ok(d, &["pools"]);
    assert!(
        shown.contains("worker reviewer benched by ")
            && shown.contains(": flaky (`baton worker unbench reviewer`)"),
        "{shown}"
    );
    let json: Value = serde_json::from_str(&run_ok(d, &["pools", "--json"])).unwrap();
    assert_eq!(json["benched_workers"][0]["target"]["id"], "reviewer");
    let out = baton(d)
        .args(["worker", "bench", "revewer"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the workers are: drafter, reviewer, checker")
    );
    assert!(run_ok(d, &["worker", "unbench", "reviewer"]).contains("back on the floor"));

    // Work done outside baton adds to the window; a dashboard's reading replaces it.
    run_ok(
        d,
        &[
            "pool",
            "usage",
            "openai",
            "--tokens",
            "1000",
            "--usd",
            "0.5",
            "--note",
            "playground",
        ],
    );
    run_ok(
        d,
        &[
            "pool",
            "usage",
            "openai",
            "--tokens",
            "500",
            "--requests",
            "2",
        ],
    );
    let openai = &pools_json(d)[0];
    assert_eq!(openai["used"]["tokens"], 1_500);
    assert_eq!(openai["used"]["requests"], 2);
    assert_eq!(openai["headroom"]["tokens"], 1_000_000 - 1_500);
    assert!((openai["used"]["usd"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    run_ok(
        d,
        &[
            "pool", "usage", "openai", "--set", "--tokens", "400000", "--usd", "4",
        ],
    );
    let openai = &pools_json(d)[0];
    assert_eq!(openai["used"]["tokens"], 400_000);
    assert!((openai["used_fraction"].as_f64().unwrap() - 0.4).abs() < 1e-12);
    let err = run_err(d, &["pool", "usage", "openai"]);
    assert!(err.contains("say what was used"), "{err}");
    let err = run_err(d, &["pool", "usage", "openai", "--usd=-3"]);
    assert!(err.contains("a number of 0 or more"), "{err}");
}

#[test]
fn route_dry_runs_the_router_on_the_configured_floor_and_the_stores_usage() {
    let dir = configured();
    let d = dir.path();
    // Nothing used: both pools are at 0 %, and the tie goes to the first pool id.
    let out = run_ok(d, &["route", "review.deep-rounds"]);
    assert!(
        out.starts_with("seat review.deep-rounds: drafter (openai/gpt-test, pool openai)"),
        "{out}"
    );
    // openai at 40 %: the colder pool's workers come first, by worker id.
    run_ok(
        d,
        &["pool", "usage", "openai", "--set", "--tokens", "400000"],
    );
    let out = run_ok(d, &["route", "review.deep-rounds"]);
    assert!(
        out.starts_with("seat review.deep-rounds: checker (gemini/gemini-test, pool others)"),
        "{out}"
    );
    assert!(
        out.contains("  eligible  drafter (pool openai, 40.0% used)"),
        "{out}"
    );
    // Benching others leaves openai; benching drafter too leaves nobody, with a question.
    run_ok(d, &["pool", "bench", "others"]);
    let out = run_ok(d, &["route", "review.deep-rounds"]);
    assert!(
        out.contains("  excluded  checker: pool others is benched"),
        "{out}"
    );
    assert!(out.starts_with("seat review.deep-rounds: drafter"), "{out}");
    run_ok(d, &["worker", "bench", "drafter"]);
    let out = run_ok(d, &["route", "review.deep-rounds"]);
    assert!(
        out.starts_with(
            "Nobody can take seat review.deep-rounds (phase dry run). All 3 workers are excluded"
        ),
        "{out}"
    );
    assert!(
        out.contains("unbench pool others (baton pool unbench others)"),
        "{out}"
    );
    let json: Value =
        serde_json::from_str(&run_ok(d, &["route", "review.deep-rounds", "--json"])).unwrap();
    assert_eq!(json["pick"]["kind"], "nobody");
    assert_eq!(json["excluded"][0]["worker"], "checker");
    assert_eq!(json["excluded"][0]["reason"]["reason"], "benched");
    let err = run_err(d, &["route", "reveiw.deep-rounds"]);
    assert!(err.contains("is not a seat any station asks for"), "{err}");
}

/// What a turn in flight holds (another process's reservation) is shown apart, and
/// taken off the headroom every process routes on; `baton route` reads it the same way.
/// Once released, the headroom is back.
#[test]
fn pools_show_what_turns_in_flight_hold_and_route_reads_it_as_used() {
    use baton_core::ids::{RunId, Timestamp};
    use baton_core::router::{Allowance, PoolId, Window};
    use baton_store::{Estimate, ReserveOutcome, ReserveRequest, SqliteStore, Store};

    let dir = configured();
    let d = dir.path();
    run_ok(d, &["pool", "usage", "others", "--requests", "99"]);
    let store = SqliteStore::open(&db(d)).unwrap();
    let now = Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    let window: Window = "daily".parse().unwrap();
    let ReserveOutcome::Reserved { id } = store
        .try_reserve(&ReserveRequest {
            pool: PoolId::new("others"),
            window: window.bounds(now).unwrap(),
            allowance: Allowance {
                requests: Some(100),
                ..Allowance::default()
            },
            estimate: Estimate {
                tokens: 3_000,
                cost_micro_usd: 0,
                requests: 1,
            },
            run: RunId("elsewhere".into()),
            turn: 0,
            lease_token: None,
            at: now,
            ttl_ms: 600_000,
        })
        .unwrap()
    else {
        panic!("one request is left")
    };
    let others = &pools_json(d)[1];
    assert_eq!(others["used"]["requests"], 99);
    assert_eq!(others["held"]["turns"], 1);
    assert_eq!(others["held"]["requests"], 1);
    assert_eq!(others["headroom"]["requests"], 0);
    let shown = run_ok(d, &["pools"]);
    assert!(shown.contains("held by 1 turn in flight"), "{shown}");
    // The others' workers are out of headroom while it is held.
    let route = run_ok(d, &["route", "review.code"]);
    assert!(
        route.contains("excluded  reviewer: pool others has spent its requests allowance"),
        "{route}"
    );

    store.release_reservation(id).unwrap();
    let others = &pools_json(d)[1];
    assert_eq!(others["held"]["turns"], 0);
    assert_eq!(others["headroom"]["requests"], 1);
}
