//! `baton judge` like any turn (issue 10): its calls stream on stderr as they happen,
//! a judge with no verdict is recorded and shown by `baton outbox`, `baton cancel
//! GROUP` stops it from another shell, and a group with too few candidates is not
//! "busy".

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use baton_store::{ClaimOutcome, JobStatus, LeaseFence, NewJob, SqliteStore, Store};
use serde_json::json;

use super::server::{Action, TestServer, json as reply};
use super::*;

const KEY: &str = "sk-proj-TESTKEY-cli-judge-0123456789";

const VERDICT: &str = r#"{"scores":[{"candidate":"A","score":3,"reasons":"fails"},{"candidate":"B","score":9,"reasons":"passes"}],"winner":"B","verdict":"B passes its gate"}"#;

fn answer(text: &str) -> Action {
    reply(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50}
        })
        .to_string(),
    )
}

/// A directory whose roster's judge talks to `server`, and whose database holds group
/// `g` with `finished` finished candidates.
fn setup(server: &TestServer, finished: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"referee\"\nmodel = \"openai/gpt-4.1-mini\"\n\
             api_base = \"{}/v1\"\napi_key_env = \"BATON_TEST_JUDGE_KEY\"\nmax_retries = 0\n\
             price = {{ input = 2.0, output = 8.0 }}\noptions = {{ timeout_s = 300 }}\n",
            server.base()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(d.join(".baton")).unwrap();
    let store = SqliteStore::open(&db(d)).unwrap();
    for i in 0..finished {
        candidate(&store, d, i);
    }
    dir
}

fn candidate(store: &dyn Store, dir: &Path, i: usize) {
    let id = format!("job-{i}");
    let spec = json!({
        "objective": "Add a health check",
        "tasks": ["add GET /health"],
        "repo": dir.display().to_string(),
        "base": "0000000",
        "worktree_root": dir.display().to_string(),
        "roster": baton_engine::Roster {
            workers: vec![baton_engine::WorkerConfig::mock(&format!("w{i}"), "m")],
        },
        "settings": baton_engine::RunSettings::default(),
        "candidate": format!("w{i}"),
    });
    store
        .enqueue_job(&NewJob {
            id: id.clone(),
            group: "g".into(),
            spec,
            created_at: baton_core::ids::Timestamp(1 + i as i64),
        })
        .unwrap();
    let token = format!("t{i}");
    let ClaimOutcome::Claimed { job, .. } = store
        .try_claim_job("test", &token, baton_core::ids::Timestamp(10), 60_000)
        .unwrap()
    else {
        panic!("nothing to claim")
    };
    let patch = dir.join(format!("{id}.patch"));
    std::fs::write(&patch, "+fn health() {}\n").unwrap();
    let outbox = json!({
        "run_id": format!("run{i}"), "branch": format!("baton/{id}"), "base": "0000000",
        "head": "1111111", "worktree": dir.display().to_string(),
        "patch_file": patch.display().to_string(),
        "diff": {"files_changed": 1, "insertions": 1, "deletions": 0, "binary_files": 0},
        "turns": 1, "gates": [], "ended": "finished",
    });
    store
        .finish_job(
            &LeaseFence { job: job.id, token },
            JobStatus::Outbox,
            Some(&outbox),
            None,
            baton_core::ids::Timestamp(20),
        )
        .unwrap();
}

fn judge_cmd(dir: &Path, verbose: bool) -> std::process::Command {
    let mut cmd = baton(dir);
    if verbose {
        cmd.arg("-v");
    }
    cmd.args(["judge", "g"]).env("BATON_TEST_JUDGE_KEY", KEY);
    cmd
}

#[test]
fn a_judge_without_a_verdict_is_shown_by_outbox_and_the_next_judge_streams_its_calls() {
    let server = TestServer::start(vec![
        reply(
            401,
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        ),
        answer(VERDICT),
    ]);
    let dir = setup(&server, 2);
    let d = dir.path();
    let out = judge_cmd(d, false).output().unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("recorded as a failed judgement") && err.contains("baton judge g"),
        "{err}"
    );
    let shown = run_ok(d, &["outbox"]);
    assert!(
        shown.contains("judge FAILED (by referee, 1 call): auth:"),
        "{shown}"
    );
    assert!(!shown.contains(KEY));
    // Judged again, with each call streamed on stderr as it returns.
    let out = judge_cmd(d, true).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("call execute · referee (openai/gpt-4.1-mini)") && err.contains("· ok"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("winner: B"));
}

#[test]
fn baton_cancel_group_stops_a_judge_waiting_on_a_model_and_records_nothing() {
    let server = TestServer::start(vec![Action::Delay(
        Duration::from_secs(1800),
        Box::new(answer(VERDICT)),
    )]);
    let dir = setup(&server, 2);
    let d = dir.path();
    let mut judging = judge_cmd(d, false)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "the judge never called");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let said = run_ok(d, &["cancel", "g"]);
    assert!(said.contains("the judge of group g"), "{said}");
    let code = loop {
        if let Some(status) = judging.try_wait().unwrap() {
            break status.code();
        }
        if asked.elapsed() > Duration::from_secs(2) {
            let _ = judging.kill();
            let _ = judging.wait();
            panic!(
                "baton judge still running {:?} after the cancel",
                asked.elapsed()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut judging.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(10), "{err}");
    assert!(err.contains("nothing was recorded"), "{err}");
    let store = SqliteStore::open(&db(d)).unwrap();
    assert!(store.judgements("g").unwrap().is_empty());
    assert_eq!(store.job("job-0").unwrap().status, JobStatus::Outbox);
}

/// Regression: a group with one finished candidate exited 8, "busy", as if another
/// process held it.
#[test]
fn a_group_with_too_few_finished_candidates_is_a_plain_failure_that_says_what_to_do() {
    let server = TestServer::start(vec![]);
    let dir = setup(&server, 1);
    let out = judge_cmd(dir.path(), false).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 finished candidate(s)") && err.contains("baton work"),
        "{err}"
    );
    assert!(server.requests().is_empty());
}
