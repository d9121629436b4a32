//! Every op applied through the one entry point (`ops::apply`) on a real SQLite store
//! does what calling the engine directly does: the server and MCP will call it, and
//! the CLI does now.

use baton_engine::jobs::decode_spec;
use baton_engine::ops::{OpContext, OpOutcome, Started, apply};
use baton_engine::{Clock, Error, StepOutcome, SystemClock};
use baton_protocol::{CancelTarget, NewRoster, Op, Sandbox, Settings};
use baton_store::{CancelOutcome, JobStatus, RunStatus};

use super::server::TestServer;
use super::*;

fn context(workers: usize) -> OpContext {
    OpContext::new(
        Roster::mock(workers),
        RunSettings {
            estimator: baton_core::tokens::EstimatorKind::Heuristic,
            ..RunSettings::default()
        },
    )
}

fn create(engine: &Engine, ctx: &OpContext, tasks: &[&str]) -> RunId {
    let op = Op::CreateRun {
        objective: "Build a small service".into(),
        tasks: tasks.iter().map(|t| t.to_string()).collect(),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: None,
        settings: Settings::default(),
    };
    match apply(engine, ctx, op, &mut |_| {}).unwrap() {
        OpOutcome::RunCreated { run } => run,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_run_created_and_resumed_by_ops_ends_as_one_run_by_the_engine_directly() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = ["design the API", "write the handlers", "test them"];
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(3);
    let id = create(&engine, &ctx, &tasks);
    let mut heard = Vec::new();
    let op = Op::Resume {
        run: id.0[..8].to_string(),
        max_turns: None,
        roster: None,
    };
    let outcome = apply(&engine, &ctx, op, &mut |s| heard.push(format!("{s:?}"))).unwrap();
    let OpOutcome::Resumed { run, end, last } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(run, id, "a prefix names the run");
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].contains("was_blocked: false"), "{heard:?}");

    let direct_dir = tempfile::tempdir().unwrap();
    let direct_store = store_in(direct_dir.path());
    let mut direct = spec(&tasks, Roster::mock(3));
    direct.settings.repair_attempts = RunSettings::default().repair_attempts;
    let (direct_id, direct_end) = run_all(&super::engine(&direct_store), &direct);
    assert_eq!(direct_end, RunEnd::Finished);
    let (ours, theirs) = (
        store.load_state(&id).unwrap(),
        direct_store.load_state(&direct_id).unwrap(),
    );
    assert_eq!(ours.turns, theirs.turns);
    let last_direct = direct_store.turns(&direct_id).unwrap().pop().unwrap();
    assert_eq!(last.unwrap().turn, last_direct.turn);
    let done = |s: &baton_core::state::ExecutionState| {
        s.plan
            .iter()
            .map(|p| (p.title.clone(), p.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(done(&ours), done(&theirs));
    // The same stored configuration: the op's defaults are the context's.
    let config = |s: &Arc<dyn Store>, id: &RunId| s.run_info(id).unwrap().config;
    assert_eq!(config(&store, &id), config(&direct_store, &direct_id));

    // A finished run's step says so.
    let op = Op::Step { run: id.0.clone() };
    match apply(&engine, &ctx, op, &mut |_| {}).unwrap() {
        OpOutcome::Stepped {
            step: StepOutcome::Finished,
            status,
            ..
        } => assert_eq!(status, RunStatus::Finished),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_op_carries_its_roster_and_settings_over_the_contexts() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(5);
    let op = Op::CreateRun {
        objective: "o".into(),
        tasks: vec!["one".into(), "two".into()],
        step_budgets: vec![None, Some(700)],
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Some(json!({"workers": [{"id": "solo", "model": "mock/solo"}]})),
        settings: Settings {
            budget: Some(900),
            ..Settings::default()
        },
    };
    let OpOutcome::RunCreated { run } = apply(&engine, &ctx, op, &mut |_| {}).unwrap() else {
        panic!()
    };
    let session = engine.open_for_preview(&run).unwrap();
    assert_eq!(session.config.roster.ids(), "solo");
    assert_eq!(session.config.settings.budget, 900);
    assert_eq!(
        session.config.settings.estimator,
        baton_core::tokens::EstimatorKind::Heuristic,
        "unset in the op: the context's"
    );
    assert_eq!(session.state.plan[1].budget, Some(700));
    assert_eq!(session.state.plan[0].budget, None);

    // A roster the engine refuses is refused through the op, naming where it came from.
    let op = Op::CreateRun {
        objective: "o".into(),
        tasks: vec!["one".into()],
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Some(json!({"workers": [{"id": "x", "modle": "mock/x"}]})),
        settings: Settings::default(),
    };
    let err = apply(&engine, &ctx, op, &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, Error::ConfigFile { ref path, .. } if path == "the op's roster"),
        "{err}"
    );
    assert_eq!(store.list_runs().unwrap().len(), 1, "nothing created");
}

#[test]
fn resume_with_a_new_roster_says_what_changed_and_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(2);
    let id = create(&engine, &ctx, &["a", "b"]);
    let new = json!({"workers": [{"id": "worker-1", "model": "mock/other"}]});
    let op = Op::Resume {
        run: id.0.clone(),
        max_turns: Some(1),
        roster: Some(NewRoster {
            roster: new,
            source: "fixed.toml".into(),
        }),
    };
    let mut changes = None;
    let outcome = apply(&engine, &ctx, op, &mut |s| {
        if let Started::Resuming { roster_changes, .. } = s {
            changes = roster_changes.map(<[String]>::to_vec);
        }
    })
    .unwrap();
    let OpOutcome::Resumed { end, last, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(end, RunEnd::Paused);
    let changes = changes.unwrap();
    assert!(
        changes.iter().any(|c| c.contains("mock/other"))
            && changes.iter().any(|c| c.contains("worker-2 removed")),
        "{changes:?}"
    );
    assert_eq!(last.unwrap().model, "mock/other");
}

#[test]
fn a_jobs_run_is_not_stepped_outside_its_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let repo = super::hardening::repo(dir.path());
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(1);
    let queued = enqueue(&engine, &ctx, &repo, vec!["worker-1".into()], None);
    let job = &queued.jobs[0];
    // Give the job a run, as `baton work` would.
    let fence = match store
        .try_claim_job("test", "tok", SystemClock.now(), 60_000)
        .unwrap()
    {
        baton_store::ClaimOutcome::Claimed { job, token, .. } => {
            baton_store::LeaseFence { job: job.id, token }
        }
        other => panic!("{other:?}"),
    };
    let spec = spec(&["x"], Roster::mock(1));
    let run = engine
        .create_job_run(baton_engine::orchestrator::new_run_id(), &spec, &fence)
        .unwrap();
    let err = apply(&engine, &ctx, Op::Step { run: run.0.clone() }, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&err, Error::RunOfJob { job: j, status: JobStatus::Running, .. } if j == job),
        "{err}"
    );
    assert!(
        err.to_string().contains("`baton work` is running it"),
        "{err}"
    );
}

/// An enqueue of one task in `repo`, with a gate and a rubric.
fn enqueue_op(
    repo: &Path,
    candidates: Vec<String>,
    gates: Vec<String>,
    sandbox: Option<Sandbox>,
) -> Op {
    Op::Enqueue {
        objective: "Add a health check".into(),
        tasks: vec!["add GET /health".into()],
        candidates,
        gates,
        gate_each_turn: false,
        fix_turns: None,
        sandbox,
        repo: Some(repo.to_path_buf()),
        base: None,
        worktrees: None,
        rubric: Some("passes its gate".into()),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: None,
        settings: Settings::default(),
    }
}

fn enqueue(
    engine: &Engine,
    ctx: &OpContext,
    repo: &Path,
    candidates: Vec<String>,
    sandbox: Option<Sandbox>,
) -> baton_engine::jobs::Enqueued {
    let op = enqueue_op(repo, candidates, vec!["test=true".into()], sandbox);
    match apply(engine, ctx, op, &mut |_| {}).unwrap() {
        OpOutcome::Enqueued { queued, .. } => queued,
        other => panic!("{other:?}"),
    }
}

#[test]
fn enqueue_queues_a_job_per_candidate_teams_and_presets_included_confined_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let repo = super::hardening::repo(dir.path());
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(2);
    let queued = enqueue(
        &engine,
        &ctx,
        &repo,
        vec![
            "worker-1".into(),
            "worker-1+worker-2".into(),
            "claude".into(),
        ],
        // bwrap is checked on PATH when queued; its confinement is unit-tested.
        Some(Sandbox::None),
    );
    assert_eq!(queued.jobs.len(), 3);
    let specs: Vec<_> = queued
        .jobs
        .iter()
        .map(|j| decode_spec(&store.job(j).unwrap()).unwrap())
        .collect();
    assert_eq!(specs[0].roster.ids(), "worker-1");
    assert_eq!(specs[1].roster.ids(), "worker-1, worker-2");
    assert!(
        specs
            .iter()
            .all(|s| s.gates[0].name == "test" && s.fix_turns == 2)
    );
    assert_eq!(specs[0].rubric.as_deref(), Some("passes its gate"));
    let agent = &specs[2].roster.workers[0];
    assert_eq!(agent.model, "command/claude");
    assert_eq!(agent.options["sandbox"], "none");
    assert!(
        !agent.options.contains_key("sandbox_hide"),
        "nothing to hide from"
    );
    // API workers are not confined: they run no command.
    assert!(!specs[0].roster.workers[0].options.contains_key("sandbox"));

    let refused = |candidates: Vec<String>, gates: Vec<String>| {
        let op = enqueue_op(&repo, candidates, gates, None);
        apply(&engine, &ctx, op, &mut |_| {}).unwrap_err()
    };
    let err = refused(vec!["nobody".into()], Vec::new());
    assert!(
        matches!(err, Error::UnknownCandidate { ref id, .. } if id == "nobody"),
        "{err}"
    );
    let err = refused(vec!["worker-1".into()], vec!["lint=  ".into()]);
    assert!(matches!(err, Error::GateWithoutCommand { .. }), "{err}");
    assert_eq!(store.list_jobs().unwrap().len(), 3, "nothing more queued");
}

#[test]
fn cancel_resolves_each_target_and_refuses_what_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let repo = super::hardening::repo(dir.path());
    let store = store_in(dir.path());
    let engine = engine(&store);
    let ctx = context(1);
    let run = create(&engine, &ctx, &["a"]);
    let queued = enqueue(&engine, &ctx, &repo, vec!["worker-1".into()], None);
    let cancel = |target| apply(&engine, &ctx, Op::Cancel { target }, &mut |_| {});

    match cancel(CancelTarget::Run(run.0[..10].to_string())).unwrap() {
        OpOutcome::CancelAsked { target, outcome } => {
            assert_eq!(target, baton_store::CancelTarget::Run(run.clone()));
            assert!(
                matches!(outcome, CancelOutcome::NotRunning { .. }),
                "{outcome:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A queued job no one holds is cancelled at once.
    match cancel(CancelTarget::Job(queued.jobs[0].clone())).unwrap() {
        OpOutcome::CancelAsked { outcome, .. } => assert_eq!(outcome, CancelOutcome::Cancelled),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store.job(&queued.jobs[0]).unwrap().status,
        JobStatus::Cancelled
    );
    match cancel(CancelTarget::Group(queued.group.clone())).unwrap() {
        OpOutcome::CancelAsked { target, .. } => {
            assert_eq!(
                target,
                baton_store::CancelTarget::Group(queued.group.clone())
            )
        }
        other => panic!("{other:?}"),
    }
    let err = cancel(CancelTarget::Group("g-nope".into())).unwrap_err();
    assert!(matches!(err, Error::NoSuchGroup { .. }), "{err}");
    // Beyond Linux's largest pid: no such process here.
    let dead = format!(
        "pid-4194304999@{}",
        baton_engine::lease::this_owner().split('@').nth(1).unwrap()
    );
    let err = cancel(CancelTarget::Worker(dead)).unwrap_err();
    assert!(matches!(err, Error::NoSuchProcess { .. }), "{err}");
}

#[test]
fn judge_through_the_op_names_its_judge_before_calling_and_records_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![super::judge::answer(super::judge::VERDICT, 1200, 40)]);
    let store = store_in(dir.path());
    super::judge::two_candidates(dir.path(), &*store);
    let engine = engine(&store);
    let mut agent = WorkerConfig::mock("agent", "x");
    agent.model = "command/claude".into();
    let referee = super::judge::judge_worker(&server, 0);
    let ctx = OpContext::new(
        Roster {
            workers: vec![agent, referee],
        },
        RunSettings::default(),
    );
    let judge = |group: &str, judge: Option<&str>, heard: &mut Vec<String>| {
        let op = Op::Judge {
            group: group.into(),
            judge: judge.map(str::to_string),
        };
        apply(&engine, &ctx, op, &mut |s| {
            if let Started::Judging { group, judge } = s {
                heard.push(format!("{group} {}", judge.id));
            }
        })
    };
    let mut heard = Vec::new();
    let err = judge("g", Some("agent"), &mut heard).unwrap_err();
    assert!(
        matches!(&err, Error::CannotJudge { api_models, .. } if api_models == &["referee".to_string()]),
        "{err}"
    );
    assert!(heard.is_empty(), "refused before it started");
    // A job's id names its group; the default judge skips the command worker.
    let judged = judge("job-1", None, &mut heard).unwrap();
    assert_eq!(heard, ["g referee"]);
    let OpOutcome::Judged(j) = judged else {
        panic!("{judged:?}")
    };
    assert_eq!(j.winner_job, "job-1");
    assert_eq!(j.calls.len(), 1);
    assert_eq!(store.job("job-0").unwrap().status, JobStatus::Judged);
}
