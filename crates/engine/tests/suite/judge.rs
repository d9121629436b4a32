//! The judge's calls go the way a turn's do: against a local server speaking the
//! OpenAI wire format, a malformed verdict is repaired, a 429 is waited out as the
//! provider asked, and every call is recorded with the judgement, tokens and cost
//! included, in the store (so it is still there for the next process).

use std::path::Path;
use std::time::Duration;

use baton_core::turn::CallKind;
use baton_engine::config::Price;
use baton_engine::jobs::judge::{Judgement, judge};
use baton_engine::{Clock, SystemClock};
use baton_gateway::Credential;
use baton_store::{ClaimOutcome, JobStatus, LeaseFence, NewJob};

use super::server::{Action, TestServer, json as reply, json_with};
use super::*;

const KEY: &str = "sk-proj-TESTKEY-judge-0123456789";

/// Two finished candidates of group `g`, each with a patch file and a gate.
fn two_candidates(dir: &Path, store: &dyn Store) {
    let clock = SystemClock;
    for (i, who) in ["alpha", "beta"].iter().enumerate() {
        let roster = Roster {
            workers: vec![WorkerConfig::mock(who, "m")],
        };
        let spec = json!({
            "objective": "Add a health check",
            "tasks": ["add GET /health"],
            "repo": dir.display().to_string(),
            "base": "0000000",
            "worktree_root": dir.display().to_string(),
            "roster": roster,
            "settings": RunSettings::default(),
            "candidate": who,
        });
        let id = format!("job-{i}");
        store
            .enqueue_job(&NewJob {
                id: id.clone(),
                group: "g".into(),
                spec,
                created_at: clock.now(),
            })
            .unwrap();
        let token = format!("t{i}");
        let ClaimOutcome::Claimed { job, .. } = store
            .try_claim_job("test", &token, clock.now(), 60_000)
            .unwrap()
        else {
            panic!("nothing to claim")
        };
        let patch = dir.join(format!("{id}.patch"));
        std::fs::write(&patch, format!("+fn health() {{ /* by {who} */ }}\n")).unwrap();
        let outbox = json!({
            "run_id": format!("run{i}"),
            "branch": format!("baton/{id}"),
            "base": "0000000",
            "head": "1111111",
            "worktree": dir.display().to_string(),
            "patch_file": patch.display().to_string(),
            "diff": {"files_changed": 1, "insertions": 1, "deletions": 0, "binary_files": 0},
            "turns": 1,
            "gates": [{"name": "test", "command": "true", "commit": "1111111",
                       "exit_code": if i == 0 { 1 } else { 0 }, "passed": i == 1,
                       "duration_ms": 5, "output_tail": ""}],
            "ended": "finished",
        });
        store
            .finish_job(
                &LeaseFence {
                    job: job.id.clone(),
                    token,
                },
                JobStatus::Outbox,
                Some(&outbox),
                None,
                clock.now(),
            )
            .unwrap();
    }
}

fn judge_worker(server: &TestServer, max_retries: u32) -> WorkerConfig {
    let mut w = WorkerConfig::mock("referee", "x");
    w.model = "openai/gpt-4.1-mini".into();
    w.family = "openai".into();
    w.api_base = Some(format!("{}/v1", server.base()));
    w.api_key = Some(Credential::new(KEY).unwrap());
    w.max_retries = max_retries;
    w.price = Some(Price {
        input: 2.0,
        output: 8.0,
        cached: None,
    });
    w
}

fn answer(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Action {
    reply(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        })
        .to_string(),
    )
}

const VERDICT: &str = r#"{"scores":[{"candidate":"A","score":3,"reasons":"fails"},{"candidate":"B","score":9,"reasons":"passes"}],"winner":"B","verdict":"B passes its gate"}"#;

fn recorded(store: &dyn Store) -> Judgement {
    let job = store.job("job-0").unwrap();
    assert_eq!(job.status, JobStatus::Judged);
    serde_json::from_value(job.judgement.unwrap()).unwrap()
}

#[test]
fn a_malformed_verdict_is_repaired_and_both_judge_calls_are_recorded_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        answer("Candidate B is clearly better.", 1200, 40),
        answer(VERDICT, 1300, 60),
    ]);
    let worker = judge_worker(&server, 0);
    let judgement = {
        let store = store_in(dir.path());
        two_candidates(dir.path(), &*store);
        judge(&*store, &SystemClock, "g", &worker, &*build(&worker)).unwrap()
    };
    assert_eq!(server.requests().len(), 2);
    let kinds: Vec<CallKind> = judgement.calls.iter().map(|c| c.call).collect();
    assert_eq!(kinds, [CallKind::Execute, CallKind::ExecuteRepair]);
    let first = &judgement.calls[0];
    assert!(
        first.error.as_deref().unwrap().contains("no JSON object"),
        "{first:?}"
    );
    assert_eq!(first.usage.unwrap().input_tokens, 1200);
    assert!(first.tokens_sent > 0 && first.tokens_received > 0);
    // The repair quotes the unusable answer.
    assert!(
        server.requests()[1]
            .body
            .contains("Candidate B is clearly better.")
    );
    // $2 and $8 per million tokens: 1200 × 2 + 40 × 8, then 1300 × 2 + 60 × 8.
    assert_eq!(judgement.cost_micro_usd(), Some(2720 + 3080));
    assert_eq!(judgement.winner_job, judgement.labels["B"]);
    // A new process reads the same calls back from the store.
    let store = store_in(dir.path());
    let again = recorded(&*store);
    assert_eq!(again.calls, judgement.calls);
    assert_eq!(again, judgement);
}

#[test]
fn a_judge_call_that_hits_a_429_is_retried_after_the_delay_the_provider_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        json_with(
            429,
            &[("retry-after", "1")],
            r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        ),
        answer(VERDICT, 1000, 50),
    ]);
    let worker = judge_worker(&server, 2);
    let store = store_in(dir.path());
    two_candidates(dir.path(), &*store);
    let judgement = judge(&*store, &SystemClock, "g", &worker, &*build(&worker)).unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at.duration_since(requests[0].at);
    assert!(
        gap >= Duration::from_secs(1),
        "retried {gap:?} after a 429 asking for 1 s"
    );
    assert_eq!(judgement.calls.len(), 1, "one call, two attempts");
    let call = &judgement.calls[0];
    assert_eq!(call.attempts.len(), 2, "{call:?}");
    assert_eq!(call.attempts[0].retry_after_ms, Some(1000));
    assert!(call.error.is_none());
    assert_eq!(recorded(&*store).calls, judgement.calls);
}

#[test]
fn a_judge_whose_key_is_refused_fails_as_a_provider_error_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![reply(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    )]);
    let worker = judge_worker(&server, 2);
    let store = store_in(dir.path());
    two_candidates(dir.path(), &*store);
    let err = judge(&*store, &SystemClock, "g", &worker, &*build(&worker)).unwrap_err();
    assert!(
        matches!(err, baton_engine::Error::Gateway { .. }),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1, "an auth failure is not retried");
    assert_eq!(store.job("job-0").unwrap().status, JobStatus::Outbox);
}

fn build(worker: &WorkerConfig) -> Arc<dyn baton_gateway::Gateway> {
    baton_engine::orchestrator::build_gateway(worker).unwrap()
}
