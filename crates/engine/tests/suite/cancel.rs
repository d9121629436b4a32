//! `baton cancel` from outside the process (issue 10, item 3): a request recorded in
//! the store by another connection, as another process would, stops each thing a turn
//! can wait on within a second — a provider's 10-minute delay, an HTTP call that never
//! answers, a 30-minute agent, a gate — commits nothing of the cancelled turn, leaves
//! no process behind, and leaves the work resumable.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_core::ids::Timestamp;
use baton_core::router::PoolId;
use baton_engine::jobs::runner::{Progress, WorkOptions, work};
use baton_engine::jobs::{EnqueueRequest, GateSpec, enqueue};
use baton_engine::{Clock, StepOutcome, SystemClock};
use baton_store::{CancelTarget, JobStatus, RunStatus};

use super::hardening::{WRITE_AND_CLAIM, repo, sh_worker};
use super::providers::{chat, one_worker_spec, openai_worker, process, rate_limited};
use super::server::{Action, TestServer};
use super::*;

/// Generous for a loaded two-core machine; the watch polls every 250 ms.
const STOPPED_WITHIN: Duration = Duration::from_secs(2);

/// Asks for `target` to stop, from a store of its own (another process's connection).
/// Returns when it was asked.
fn cancel_from_outside(dir: &Path, target: CancelTarget) -> Instant {
    let other = store_in(dir);
    let asked = Instant::now();
    let outcome = other.request_cancel(&target, SystemClock.now()).unwrap();
    assert!(
        matches!(outcome, baton_store::CancelOutcome::Requested { .. }),
        "{outcome:?}"
    );
    asked
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pids written one a line to `path` by a script.
fn pids_in(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn assert_all_gone(pids: &[u32]) {
    assert!(!pids.is_empty());
    // Killed, and reaped or re-parented: give the kernel a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|p| !baton_gateway::process::is_gone(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids
        .iter()
        .filter(|p| !baton_gateway::process::is_gone(**p))
        .collect();
    for p in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Steps a foreground run whose last call waits on `server`, cancels it from outside
/// once the server has `requests` requests, and checks the stop: quick, nothing
/// committed.
fn step_and_cancel(dir: &Path, server: &TestServer, spec: &RunSpec, requests: usize) -> RunId {
    let (store, engine) = process(dir);
    let id = engine.create_run(spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    engine
        .lease(&mut session, baton_engine::lease::DEFAULT_RUN_LEASE)
        .unwrap();
    let (stepped, asked) = std::thread::scope(|s| {
        let asker = s.spawn(|| {
            wait_for("the request", || server.requests().len() >= requests);
            std::thread::sleep(Duration::from_millis(300));
            cancel_from_outside(dir, CancelTarget::Run(id.clone()))
        });
        let stepped = engine.step(&mut session);
        (stepped, asker.join().unwrap())
    });
    let took = asked.elapsed();
    eprintln!("stopped {took:?} after the request");
    assert!(took < STOPPED_WITHIN, "stopped {took:?} after the request");
    assert!(
        matches!(stepped, Err(baton_engine::Error::Cancelled { turn: 0 })),
        "{stepped:?}"
    );
    assert!(session.run_lease.as_ref().unwrap().cancel_requested());
    drop(session);
    assert!(store.turns(&id).unwrap().is_empty(), "nothing committed");
    assert_eq!(store.run_info(&id).unwrap().status, RunStatus::Active);
    id
}

#[test]
fn a_cancel_ends_a_ten_minute_provider_delay_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![rate_limited("600")]);
    // 600 s is within what baton waits (`max_wait`), so it would wait it out.
    let spec = one_worker_spec(openai_worker("w1", &server, 2));
    let id = step_and_cancel(dir.path(), &server, &spec, 1);
    assert_eq!(server.requests().len(), 1, "no retry after the cancel");
    // Resumable: the lease is free and the request does not stop the next holder
    // (which waits out the provider's delay, remembered with the run).
    let (store, engine) = process(dir.path());
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    engine.lease(&mut session, Duration::from_secs(30)).unwrap();
    let token = session.run_lease.as_ref().unwrap().token.clone();
    assert!(
        !store
            .cancel_requested(&CancelTarget::Run(id.clone()), Some(&token))
            .unwrap()
    );
    assert_eq!(store.worker_holds(&id).unwrap()[0].asked_ms, 600_000);
}

#[test]
fn a_cancel_abandons_an_http_call_that_never_answers_and_commits_nothing_of_it() {
    let dir = tempfile::tempdir().unwrap();
    // The first call is accepted and never answered (for longer than the test); the
    // second is the resumed turn's.
    let server = TestServer::start(vec![
        Action::Delay(
            Duration::from_secs(1800),
            Box::new(chat(&ok_result("late"), "stop", 100, 10)),
        ),
        chat(&ok_result("migrated"), "stop", 100, 10),
    ]);
    let mut worker = openai_worker("w1", &server, 0);
    worker.options.insert("timeout_s".into(), json!(300));
    let spec = one_worker_spec(worker);
    let id = step_and_cancel(dir.path(), &server, &spec, 1);
    // Resumed in a new process: the next turn is turn 0 again, committed once.
    let (store, engine) = process(dir.path());
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    engine.lease(&mut session, Duration::from_secs(30)).unwrap();
    match engine.step(&mut session).unwrap() {
        StepOutcome::Turn(t) => assert_eq!((t.turn, t.error), (0, None)),
        other => panic!("{other:?}"),
    }
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].calls.len(), 1, "the abandoned call left no record");
}

/// A turn stopped after its first call was answered commits nothing, but the provider
/// delivered and bills that call: it counts against the worker's pool. The call cut
/// short does not (nothing says it was delivered), and the resumed turn counts its own.
#[test]
fn a_stopped_turns_answered_call_counts_against_its_pool_and_the_cut_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        chat(&ok_result("migrated"), "stop", 100, 10),
        Action::Delay(
            Duration::from_secs(1800),
            Box::new(chat(&ok_report("late"), "stop", 50, 5)),
        ),
        chat(&ok_result("migrated"), "stop", 200, 20),
        chat(&ok_report("migrated"), "stop", 300, 30),
    ]);
    let mut worker = openai_worker("w1", &server, 0);
    worker.calls = Some(baton_engine::config::Calls::Two);
    worker.pool = Some(PoolId::new("claude"));
    worker.options.insert("timeout_s".into(), json!(300));
    let spec = one_worker_spec(worker);
    let id = step_and_cancel(dir.path(), &server, &spec, 2);
    let used = |store: &dyn baton_store::Store| {
        let u = store
            .pool_usage(
                &PoolId::new("claude"),
                Timestamp(i64::MIN),
                Timestamp(i64::MAX),
            )
            .unwrap();
        (u.tokens, u.requests)
    };
    let (store, engine) = process(dir.path());
    assert_eq!(used(&*store), (110, 1));
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    engine.lease(&mut session, Duration::from_secs(30)).unwrap();
    assert!(matches!(
        engine.step(&mut session).unwrap(),
        StepOutcome::Turn(_)
    ));
    assert_eq!(used(&*store), (110 + 220 + 330, 3));
}

/// Enqueues one job of `worker` (and `gates`) on `repo`.
fn queue(
    store: &dyn baton_store::Store,
    repo: &Path,
    worker: WorkerConfig,
    gates: Vec<GateSpec>,
) -> String {
    enqueue(
        store,
        &SystemClock,
        &EnqueueRequest {
            objective: "Stop when asked".into(),
            tasks: vec!["work".into()],
            repo: repo.to_path_buf(),
            base: None,
            worktree_root: None,
            gates,
            gate_each_turn: false,
            fix_turns: 0,
            candidates: vec![Roster {
                workers: vec![worker],
            }],
            settings: RunSettings {
                estimator: baton_core::tokens::EstimatorKind::Heuristic,
                repair_attempts: 0,
                ..RunSettings::default()
            },
            rubric: None,
            steps: Default::default(),
        },
    )
    .unwrap()
    .jobs
    .remove(0)
}

/// Runs `work` (two jobs at once) until it returns, cancelling `job` from outside
/// once `pids` lists a process; returns how long the job took to stop after the
/// request, and the reports.
fn work_and_cancel(
    dir: &Path,
    store: &Arc<dyn baton_store::Store>,
    job: &str,
    pids: &Path,
) -> (Duration, Vec<baton_engine::jobs::runner::JobReport>) {
    let options = WorkOptions {
        concurrency: 2,
        ..WorkOptions::default()
    };
    let stopped_at = std::sync::Mutex::new(None);
    let (reports, asked) = std::thread::scope(|s| {
        let asker = s.spawn(|| {
            wait_for("the process to start", || !pids_in(pids).is_empty());
            std::thread::sleep(Duration::from_millis(300));
            cancel_from_outside(dir, CancelTarget::Job(job.to_string()))
        });
        let reports = work(store.clone(), Arc::new(SystemClock), &options, &|p| {
            if let Progress::Finished { job: j, .. } = &p
                && j == job
            {
                *stopped_at.lock().unwrap() = Some(Instant::now());
            }
        })
        .unwrap();
        (reports, asker.join().unwrap())
    });
    let stopped = stopped_at.lock().unwrap().expect("the job finished");
    eprintln!(
        "stopped {:?} after the request",
        stopped.duration_since(asked)
    );
    (stopped.duration_since(asked), reports)
}

/// Checks a cancelled job: `cancelled`, its turn discarded, requeue-able.
fn assert_cancelled_and_requeueable(store: &dyn baton_store::Store, job: &str) {
    let stored = store.job(job).unwrap();
    assert_eq!(stored.status, JobStatus::Cancelled, "{stored:?}");
    assert!(stored.lease_expires_at.is_none(), "no lease left");
    let run = stored.run_id.unwrap();
    assert!(
        store.turns(&run).unwrap().is_empty(),
        "the turn is discarded"
    );
    store.requeue_job(job, SystemClock.now()).unwrap();
    assert_eq!(store.job(job).unwrap().status, JobStatus::Queued);
}

#[test]
fn a_cancel_ends_a_thirty_minute_agent_and_its_process_tree_while_the_other_job_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let store = store_in(dir.path());
    let pids = dir.path().join("agent.pids");
    // The agent and a child of its own, each for 30 minutes.
    let script = format!(
        "sleep 1800 & echo $! >> {p}; echo $$ >> {p}; wait",
        p = pids.display()
    );
    let slow = queue(
        store.as_ref(),
        &repo,
        sh_worker("slow", &script),
        Vec::new(),
    );
    let quick = queue(
        store.as_ref(),
        &repo,
        sh_worker("quick", WRITE_AND_CLAIM),
        Vec::new(),
    );
    let (took, reports) = work_and_cancel(dir.path(), &store, &slow, &pids);
    assert!(took < STOPPED_WITHIN, "stopped {took:?} after the request");
    assert_all_gone(&pids_in(&pids));
    let by_job = |id: &str| reports.iter().find(|r| r.job == id).unwrap().status;
    assert_eq!(by_job(&slow), JobStatus::Cancelled);
    assert_eq!(
        by_job(&quick),
        JobStatus::Outbox,
        "the other job is untouched"
    );
    assert_cancelled_and_requeueable(store.as_ref(), &slow);
}

#[test]
fn a_cancel_ends_a_thirty_minute_gate_and_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let store = store_in(dir.path());
    let pids = dir.path().join("gate.pids");
    let gate = GateSpec {
        name: "slow".into(),
        command: format!(
            "sleep 1800 & echo $! >> {p}; echo $$ >> {p}; wait",
            p = pids.display()
        ),
        timeout_s: 3600,
    };
    let job = queue(
        store.as_ref(),
        &repo,
        sh_worker("w", WRITE_AND_CLAIM),
        vec![gate],
    );
    let (took, _) = work_and_cancel(dir.path(), &store, &job, &pids);
    assert!(took < STOPPED_WITHIN, "stopped {took:?} after the request");
    assert_all_gone(&pids_in(&pids));
    assert_cancelled_and_requeueable(store.as_ref(), &job);
}

#[test]
fn a_cancel_of_the_process_stops_an_idle_follower_and_a_stale_request_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let options = WorkOptions {
        follow: true,
        poll: Duration::from_millis(100),
        owner: "pid-1@cancel-test".into(),
        ..WorkOptions::default()
    };
    // A request left for this owner name before the process started is not for it.
    store
        .request_cancel(
            &CancelTarget::Process(options.owner.clone()),
            SystemClock.now(),
        )
        .unwrap();
    let (reports, asked) = std::thread::scope(|s| {
        let asker = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            cancel_from_outside(dir.path(), CancelTarget::Process(options.owner.clone()))
        });
        let reports = work(store.clone(), Arc::new(SystemClock), &options, &|_| {}).unwrap();
        (reports, asker.join().unwrap())
    });
    assert!(asked.elapsed() < STOPPED_WITHIN, "{:?}", asked.elapsed());
    assert!(reports.is_empty());
    assert!(options.cancel.is_cancelled());
    assert!(
        !store
            .cancel_requested(&CancelTarget::Process(options.owner.clone()), None)
            .unwrap(),
        "honoured and cleared"
    );
}
