//! What a user types, and what they see.

use baton_store::{SqliteStore, Store};

use super::*;

fn demo_run_id(stdout: &str) -> String {
    let first = stdout.lines().next().unwrap();
    first
        .split("run ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn the_demo_explains_itself() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(dir.path(), &["demo"]);
    assert!(
        out.contains("conversations passed between workers: 0 (measured"),
        "{out}"
    );
    assert!(out.contains("claimed resolved, kept open"), "{out}");
    assert!(
        out.contains("resolution claimed by reviewer at turn 4, not verified"),
        "{out}"
    );
    assert!(out.contains("architecture.md at v3"), "{out}");
    assert!(out.contains("what each worker was handed"), "{out}");
    assert!(out.contains("was recorded without a reason"), "{out}");
    assert!(db(dir.path()).exists());

    let id = demo_run_id(&out);
    let mut snapshot = out.replace(&id, "RUN").replace(&id[..6], "RUN");
    let cut = snapshot.find("finished in").unwrap();
    snapshot.truncate(cut);
    insta::assert_snapshot!("demo_output", snapshot);
}

#[test]
fn run_ids_can_be_abbreviated_and_bad_ones_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = run_err(d, &["state"]);
    assert!(err.contains("no baton database at"), "{err}");

    let mut ids = Vec::new();
    for i in 0..17 {
        let out = run_ok(
            d,
            &[
                "run",
                "--objective",
                "o",
                "--task",
                &format!("t{i}"),
                "--create-only",
            ],
        );
        ids.push(out.trim().to_string());
    }
    // Ids are UUIDv7s, which begin with their creation time: runs made a moment apart
    // share their first dozen digits, and the shortest prefix no other run shares
    // resolves.
    let id = &ids[0];
    assert_eq!(id.len(), 32, "{id}");
    let unique = (1..=id.len())
        .find(|&n| ids[1..].iter().all(|other| !other.starts_with(&id[..n])))
        .unwrap();
    let tasks = run_ok(d, &["tasks", &id[..unique]]);
    assert!(tasks.contains("T1 t0"), "{tasks}");

    let err = run_err(d, &["state", "zzzz"]);
    assert!(err.contains("no run matches \"zzzz\""), "{err}");
    // Seventeen ids over sixteen hex digits: two share a first character.
    let shared = ids
        .iter()
        .find_map(|a| {
            ids.iter()
                .find(|b| *b != a && b[..1] == a[..1])
                .map(|_| a[..1].to_string())
        })
        .unwrap();
    let err = run_err(d, &["state", &shared]);
    assert!(err.contains("type more of the id"), "{err}");
}

#[test]
fn step_advances_exactly_one_turn_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let id = run_ok(
        d,
        &[
            "run",
            "--objective",
            "Write a guide",
            "--task",
            "outline",
            "--task",
            "draft",
            "--task",
            "edit",
            "--create-only",
        ],
    );
    let id = id.trim();
    run_ok(d, &["step", id]);
    let store = SqliteStore::open(&db(d)).unwrap();
    let rid = store.resolve_run(id).unwrap();
    assert_eq!(store.turns(&rid).unwrap().len(), 1);
    let history = run_ok(d, &["history", id]);
    assert!(history.contains("turn   0"), "{history}");

    run_ok(d, &["resume", id]);
    // Five mock workers, three steps: two continuation turns.
    assert_eq!(store.turns(&rid).unwrap().len(), 5);
    let out = run_ok(d, &["step", id]);
    assert!(out.contains("is finished"), "{out}");
    assert_eq!(store.turns(&rid).unwrap().len(), 5);

    let workers = run_ok(d, &["workers", id]);
    assert!(
        workers.contains("worker-5") && workers.contains("mock/model-5"),
        "{workers}"
    );
    let compiled = run_ok(
        d,
        &["compile", id, "--worker", "worker-2", "--budget", "300"],
    );
    assert!(compiled.contains("Write a guide"), "{compiled}");
    let err = run_err(d, &["compile", id, "--worker", "nobody"]);
    assert!(
        err.contains("no worker \"nobody\"") && err.contains("worker-1"),
        "{err}"
    );
}

#[test]
fn exports_cover_the_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run_ok(d, &["demo"]);
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    assert_eq!(json["turns"].as_array().unwrap().len(), 5);
    assert!(json["events"].as_array().unwrap().len() > 20);
    assert_eq!(json["state"]["plan"].as_array().unwrap().len(), 5);
    let md = run_ok(d, &["export", "--format", "md"]);
    assert!(md.starts_with("# baton run"), "{md}");
    assert!(md.contains("NOT verified"), "{md}");
    let script = run_ok(d, &["export", "--format", "script"]);
    assert_eq!(script.lines().count(), 5, "one call per turn");
    let err = run_err(d, &["export", "--format", "pdf"]);
    assert!(err.contains("use json, md or script"), "{err}");

    // The script replays the demo exactly.
    std::fs::write(d.join("demo.jsonl"), &script).unwrap();
    let replayed = run_ok(d, &["demo", "--replay", "demo.jsonl"]);
    let first = run_ok(d, &["export", "--format", "script"]);
    assert_eq!(first, script);
    assert!(replayed.contains("conversations passed between workers: 0"));
}

#[test]
fn init_scaffolds_a_roster_that_run_uses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run_ok(d, &["init", "--workers", "2"]);
    assert!(out.contains("wrote baton.toml"), "{out}");
    let err = run_err(d, &["init"]);
    assert!(err.contains("--force"), "{err}");
    let workers = run_ok(d, &["workers"]);
    assert!(
        workers.contains("roster from baton.toml") && workers.contains("worker-2"),
        "{workers}"
    );
    run_ok(
        d,
        &[
            "run",
            "--objective",
            "o",
            "--task",
            "a",
            "--task",
            "b",
            "--task",
            "c",
        ],
    );
    let history = run_ok(d, &["history"]);
    assert_eq!(
        history.lines().filter(|l| l.starts_with("turn")).count(),
        3,
        "{history}"
    );
    assert!(history.contains("worker-1") && history.contains("worker-2"));

    std::fs::write(
        d.join("bad.toml"),
        "[[workers]]\nid = \"x\"\nmodel = \"nope\"\n",
    )
    .unwrap();
    let err = run_err(d, &["--config", "bad.toml", "workers"]);
    assert!(
        err.contains("bad.toml") && err.contains("provider prefix"),
        "{err}"
    );
}

#[test]
fn workers_refuses_a_roster_with_a_misspelt_option_and_names_the_key_meant() {
    // Regression: `baton workers` listed a worker whose `timeuot_s` no provider reads;
    // only creating a run found it, without saying which key was meant.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        "[[workers]]\nid = \"gpt\"\nmodel = \"openai/gpt-4.1-mini\"\noptions = { timeuot_s = 10 }\n",
    )
    .unwrap();
    let err = run_err(d, &["workers"]);
    assert!(
        err.contains("baton.toml")
            && err.contains("worker gpt")
            && err.contains("unknown option \"timeuot_s\" for provider openai")
            && err.contains("did you mean \"timeout_s\"?"),
        "{err}"
    );
}

#[test]
fn settings_follow_file_then_environment_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        "budget = 700\nestimator = \"heuristic\"\n",
    )
    .unwrap();
    let id = run_ok(
        d,
        &["run", "--objective", "o", "--task", "a", "--create-only"],
    );
    let package: serde_json::Value =
        serde_json::from_str(&run_ok(d, &["compile", id.trim(), "--json"])).unwrap();
    assert_eq!(package["budget"], 700);
    assert_eq!(package["estimator"], "heuristic");

    let out = baton(d)
        .args(["run", "--objective", "o", "--task", "a", "--create-only"])
        .env("BATON_BUDGET", "800")
        .output()
        .unwrap();
    let id = String::from_utf8(out.stdout).unwrap();
    let package: serde_json::Value =
        serde_json::from_str(&run_ok(d, &["compile", id.trim(), "--json"])).unwrap();
    assert_eq!(package["budget"], 800);

    let out = baton(d)
        .args([
            "run",
            "--objective",
            "o",
            "--task",
            "a",
            "--create-only",
            "--budget",
            "900",
        ])
        .env("BATON_BUDGET", "800")
        .output()
        .unwrap();
    let id = String::from_utf8(out.stdout).unwrap();
    let package: serde_json::Value =
        serde_json::from_str(&run_ok(d, &["compile", id.trim(), "--json"])).unwrap();
    assert_eq!(package["budget"], 900);
}
