//! The judge's calls go the way a turn's do: against a local server speaking the
//! OpenAI wire format, a malformed verdict is repaired, a 429 is waited out as the
//! provider asked, and every call is recorded with the judgement, tokens and cost
//! included, in the store (so it is still there for the next process) — a judge with
//! no verdict too. Its calls are published live like a turn's, and `baton cancel
//! GROUP` stops it.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_core::ErrorClass;
use baton_core::ids::Timestamp;
use baton_core::router::PoolId;
use baton_core::turn::CallKind;
use baton_engine::config::Price;
use baton_engine::jobs::judge::{
    FailedJudgement, JudgeRun, Judgement, judge, judge_with, watch_cancel,
};
use baton_engine::publish::Recorder;
use baton_engine::{Clock, SystemClock};
use baton_gateway::Credential;
use baton_protocol::{EventKind, EventMsg};
use baton_store::{
    CancelOutcome, CancelTarget, ClaimOutcome, JobStatus, JudgementOutcome, LeaseFence, NewJob,
};

use super::server::{Action, TestServer, json as reply, json_with};
use super::*;

const KEY: &str = "sk-proj-TESTKEY-judge-0123456789";

/// Two finished candidates of group `g`, each with a patch file and a gate.
pub(super) fn two_candidates(dir: &Path, store: &dyn Store) {
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

pub(super) fn judge_worker(server: &TestServer, max_retries: u32) -> WorkerConfig {
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

pub(super) fn answer(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Action {
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

pub(super) const VERDICT: &str = r#"{"scores":[{"candidate":"A","score":3,"reasons":"fails"},{"candidate":"B","score":9,"reasons":"passes"}],"winner":"B","verdict":"B passes its gate"}"#;

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

/// A judge's calls are billed like a turn's: they count against the judge's pool,
/// whether a verdict came of them or not.
#[test]
fn a_judges_calls_count_against_its_pool_with_a_verdict_or_without() {
    let used = |store: &dyn Store| {
        store
            .pool_usage(
                &PoolId::new("judges"),
                Timestamp(i64::MIN),
                Timestamp(i64::MAX),
            )
            .unwrap()
    };
    for verdict in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let second = if verdict { VERDICT } else { "Truly, B." };
        let server = TestServer::start(vec![
            answer("B is better.", 1200, 40),
            answer(second, 1300, 60),
        ]);
        let mut worker = judge_worker(&server, 0);
        worker.pool = Some(PoolId::new("judges"));
        let store = store_in(dir.path());
        two_candidates(dir.path(), &*store);
        let judged = judge(&*store, &SystemClock, "g", &worker, &*build(&worker));
        assert_eq!(judged.is_ok(), verdict, "{judged:?}");
        let judges = used(&*store);
        assert_eq!((judges.tokens, judges.requests), (1240 + 1360, 2));
        // $2 and $8 per million tokens, as the judgement records them.
        assert!(
            (judges.usd - (2720.0 + 3080.0) / 1e6).abs() < 1e-12,
            "{}",
            judges.usd
        );
    }
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

/// Was "records nothing": a judge whose calls failed lost them (and what they cost).
#[test]
fn a_judge_whose_key_is_refused_fails_as_a_provider_error_and_is_recorded_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        reply(
            401,
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        ),
        answer(VERDICT, 1000, 50),
    ]);
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
    // Recorded as a failed judgement, read back by a new process: its call, its class.
    let history = store_in(dir.path()).judgements("g").unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, JudgementOutcome::Failed);
    let failed: FailedJudgement = serde_json::from_value(history[0].body.clone()).unwrap();
    assert_eq!(failed.error_class, ErrorClass::Auth);
    assert!(
        failed.error.contains("Incorrect API key"),
        "{}",
        failed.error
    );
    assert_eq!(failed.calls.len(), 1);
    assert_eq!(failed.calls[0].error_class, Some(ErrorClass::Auth));
    assert!(!failed.request.contains(KEY) && !history[0].body.to_string().contains(KEY));
    // The group can be judged again, and both judges stay in its history.
    let judgement = judge(&*store, &SystemClock, "g", &worker, &*build(&worker)).unwrap();
    assert_eq!(judgement.winner_job, judgement.labels["B"]);
    let outcomes: Vec<_> = store
        .judgements("g")
        .unwrap()
        .iter()
        .map(|j| j.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [JudgementOutcome::Failed, JudgementOutcome::Judged]
    );
}

/// An answer that cannot be read, even after the repair call: both calls and their
/// cost are kept, with the class `unparseable`.
#[test]
fn a_judge_whose_answers_cannot_be_read_records_both_calls_and_their_cost() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        answer("B is better.", 1200, 40),
        answer("Truly, B.", 1300, 60),
    ]);
    let worker = judge_worker(&server, 0);
    let store = store_in(dir.path());
    two_candidates(dir.path(), &*store);
    let err = judge(&*store, &SystemClock, "g", &worker, &*build(&worker)).unwrap_err();
    assert!(
        matches!(err, baton_engine::Error::JudgeAnswer { .. }),
        "{err:?}"
    );
    let history = store.judgements("g").unwrap();
    let failed: FailedJudgement = serde_json::from_value(history[0].body.clone()).unwrap();
    assert_eq!(failed.error_class, ErrorClass::Unparseable);
    assert!(
        failed.error.contains("after one repair call"),
        "{}",
        failed.error
    );
    let kinds: Vec<CallKind> = failed.calls.iter().map(|c| c.call).collect();
    assert_eq!(kinds, [CallKind::Execute, CallKind::ExecuteRepair]);
    assert_eq!(failed.cost_micro_usd(), Some(2720 + 3080));
    assert_eq!(store.job("job-1").unwrap().status, JobStatus::Outbox);
}

/// The judge's calls are published as they happen, to the same publisher and in the
/// same protocol as a turn's, and the renderer the CLI uses (`baton -v judge`) shows
/// them; what was published is what the judgement keeps.
#[test]
fn a_subscriber_sees_the_judges_calls_live_and_the_judgement_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        json_with(
            429,
            &[("retry-after", "1")],
            r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        ),
        answer("Candidate B is clearly better.", 1200, 40),
        answer(VERDICT, 1300, 60),
    ]);
    let worker = judge_worker(&server, 2);
    let store = store_in(dir.path());
    two_candidates(dir.path(), &*store);
    let recorder = Recorder::new();
    let run = JudgeRun::default();
    run.publisher.subscribe(recorder.clone());
    let judgement =
        judge_with(&*store, &SystemClock, "g", &worker, &*build(&worker), &run).unwrap();
    let seen = recorder.events();
    let names: Vec<&str> = seen.iter().map(|e| e.event.kind.name()).collect();
    assert_eq!(
        names,
        [
            "call_sent",
            "retry_waiting",
            "call_sent",
            "model_called",
            "call_sent",
            "model_called"
        ]
    );
    for e in &seen {
        assert!(e.is_provisional(), "{e:?}");
        assert_eq!((e.event.run_id.0.as_str(), e.event.turn), ("g", None));
    }
    assert!(matches!(
        &seen[1].event.kind,
        EventKind::RetryWaiting {
            delay_ms: 1000,
            after_attempt: 1,
            ..
        }
    ));
    assert!(matches!(
        &seen[3].event.kind,
        EventKind::ModelCalled { ok: false, call, .. } if call == "execute"
    ));
    assert!(matches!(
        &seen[5].event.kind,
        EventKind::ModelCalled { ok: true, call, detail, .. }
            if call == "execute_repair" && detail.cost_micro_usd == Some(3080)
    ));
    let live: Vec<EventMsg> = seen.iter().map(|e| e.event.clone()).collect();
    assert_eq!(judgement.events, live);
    assert_eq!(recorded(&*store).events, live, "stored with the judgement");
    let out = baton_protocol::render::lines(&live, true);
    assert!(
        out.contains("call execute · referee (openai/gpt-4.1-mini)")
            && out.contains("call execute_repair · referee")
            && out.contains("· ok"),
        "{out}"
    );
}

/// `baton cancel GROUP` from another process stops a judge waiting on a provider that
/// never answers within a second, and nothing of it is recorded.
#[test]
fn a_judge_waiting_on_a_slow_provider_stops_within_a_second_of_a_cancel_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![Action::Delay(
        Duration::from_secs(1800),
        Box::new(answer(VERDICT, 1000, 50)),
    )]);
    let mut worker = judge_worker(&server, 0);
    worker.options.insert("timeout_s".into(), json!(300));
    let store = store_in(dir.path());
    two_candidates(dir.path(), &*store);
    // A request made while no judge ran is for none: it does not stop this one.
    assert!(matches!(
        store.request_cancel(&CancelTarget::Group("g".into()), SystemClock.now()),
        Ok(CancelOutcome::Requested { .. })
    ));
    let recorder = Recorder::new();
    let run = JudgeRun::default();
    run.publisher.subscribe(recorder.clone());
    let watch = watch_cancel(store.clone(), "g", run.cancel.clone()).unwrap();
    let gateway = build(&worker);
    let (asked, stopped, result) = std::thread::scope(|s| {
        let judging = s.spawn(|| {
            let out = judge_with(&*store, &SystemClock, "g", &worker, &*gateway, &run);
            (Instant::now(), out)
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while server.requests().is_empty() {
            assert!(Instant::now() < deadline, "the judge never called");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Still waiting on the provider, a while after the stale request was forgotten.
        std::thread::sleep(Duration::from_millis(600));
        assert!(!run.cancel.is_cancelled());
        let other = store_in(dir.path());
        let asked = Instant::now();
        other
            .request_cancel(&CancelTarget::Group("g".into()), SystemClock.now())
            .unwrap();
        let (stopped, out) = judging.join().unwrap();
        (asked, stopped, out)
    });
    let took = stopped.duration_since(asked);
    assert!(
        took < Duration::from_secs(1),
        "stopped {took:?} after the cancel"
    );
    assert!(watch.requested());
    assert!(
        matches!(result, Err(baton_engine::Error::JudgeCancelled { .. })),
        "{result:?}"
    );
    drop(watch);
    // Nothing half-recorded: no judgement, no verdict, jobs as they were, and the
    // request forgotten.
    assert!(store.judgements("g").unwrap().is_empty());
    for id in ["job-0", "job-1"] {
        let job = store.job(id).unwrap();
        assert_eq!((job.status, job.judgement), (JobStatus::Outbox, None));
    }
    assert!(
        !store
            .cancel_requested(&CancelTarget::Group("g".into()), None)
            .unwrap()
    );
    // The stream said so: its provisional events are void.
    let names: Vec<&str> = recorder
        .events()
        .iter()
        .map(|e| e.event.kind.name())
        .collect();
    assert_eq!(names.first(), Some(&"call_sent"));
    assert_eq!(names.last(), Some(&"turn_abandoned"));
    assert!(recorder.durable().is_empty());
}

fn build(worker: &WorkerConfig) -> Arc<dyn baton_gateway::Gateway> {
    baton_engine::orchestrator::build_gateway(worker).unwrap()
}
