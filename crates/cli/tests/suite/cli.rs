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
    assert!(
        err.contains("[possible values: json, md, script, events, events-jsonl, archive]"),
        "{err}"
    );
    // The old spellings still work.
    assert_eq!(run_ok(d, &["export", "--format", "jsonl"]), script);

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

/// Each kind of failure has its own exit status (README, "Exit codes"), decided by the
/// error's type: a script can tell a wrong command line from a wrong roster.
#[test]
fn exit_statuses_tell_usage_and_configuration_failures_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let code = |args: &[&str]| {
        let out = baton(d).args(args).output().unwrap();
        (out.status.code(), text(&out))
    };
    // Usage: clap's own refusals, and the ones baton finds in the arguments.
    let (status, out) = code(&["runs", "--no-such-flag"]);
    assert_eq!(status, Some(2), "{out}");
    let (status, out) = code(&[
        "run",
        "--objective",
        "o",
        "--task",
        "t",
        "--step-budget",
        "500",
        "--step-budget",
        "600",
    ]);
    assert_eq!(status, Some(2), "{out}");
    assert!(out.contains("give at most one per --task"), "{out}");
    // Configuration: a configuration file that is not there, a misspelt option.
    let (status, out) = code(&["--config", "missing.toml", "workers"]);
    assert_eq!(status, Some(5), "{out}");
    std::fs::write(
        d.join("baton.toml"),
        "[[workers]]\nid = \"gpt\"\nmodel = \"openai/gpt-4.1-mini\"\noptions = { timeuot_s = 10 }\n",
    )
    .unwrap();
    for args in [
        &["workers"][..],
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    ] {
        let (status, out) = code(args);
        assert_eq!(status, Some(5), "{args:?}: {out}");
        assert!(out.contains("timeuot_s"), "{out}");
    }
    assert!(!db(d).exists(), "a refused roster creates no database");
}

/// An enumerated flag refuses a value outside its set before anything runs, listing
/// the ones it takes (a usage error, exit 2) — from the flag, or from its variable.
#[test]
fn enumerated_flags_refuse_other_values_and_list_the_allowed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The arguments, the environment, and the values the refusal lists.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &["export", "--format", "pdf"],
            &[],
            "json, md, script, events, events-jsonl, archive",
        ),
        (&["bench", "--estimator", "words"], &[], "bpe, heuristic"),
        (
            &[
                "run",
                "--objective",
                "o",
                "--task",
                "t",
                "--estimator",
                "words",
            ],
            &[],
            "bpe, heuristic",
        ),
        (
            &["run", "--objective", "o", "--task", "t"],
            &[("BATON_ESTIMATOR", "words")],
            "bpe, heuristic",
        ),
        (
            &[
                "enqueue",
                "--objective",
                "o",
                "--task",
                "t",
                "--worker",
                "w",
                "--sandbox",
                "docker",
            ],
            &[],
            "bwrap, none",
        ),
    ];
    for (args, env, allowed) in cases {
        let out = baton(d)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("invalid value") && err.contains(&format!("[possible values: {allowed}]")),
            "{args:?}: {err}"
        );
    }
    assert!(!db(d).exists(), "a refused command line creates nothing");
}

/// What `baton run` prints as it goes is its event stream, rendered: `export --format
/// events` renders the stored stream with the same renderer and says the same.
#[test]
fn run_progress_is_the_event_stream_that_export_shows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = baton(d)
        .args([
            "-v",
            "run",
            "--objective",
            "o",
            "--task",
            "draft",
            "--task",
            "polish",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let (created, progress) = stderr.split_once('\n').unwrap();
    assert!(created.contains("created"), "{stderr}");
    let exported = run_ok(d, &["-v", "export", "--format", "events"]);
    assert_eq!(progress, exported);
    assert!(
        exported.contains("turn   0 · worker-1 (mock/model-1) · T1 draft"),
        "{exported}"
    );
    assert!(
        exported.contains("  call combined · worker-1"),
        "{exported}"
    );
    // Without -v, the turn lines only, as `baton run` prints them.
    let quiet = run_ok(d, &["export", "--format", "events"]);
    assert!(!quiet.contains("  call "), "{quiet}");
    assert_eq!(quiet.lines().count(), 5);
    // And the stream itself, one envelope a line, numbered 1, 2, 3 …
    let jsonl = run_ok(d, &["export", "--format", "events-jsonl"]);
    for (i, line) in jsonl.lines().enumerate() {
        let e: baton_protocol::Envelope = serde_json::from_str(line).unwrap();
        assert_eq!(e.seq, Some(i as u64 + 1));
    }
}
