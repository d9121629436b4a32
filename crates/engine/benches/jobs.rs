//! Engine overhead per turn for a command worker in a git worktree of a 1,000-file
//! repository (compile, spawn and capture bookkeeping, commit, verify, store; the
//! agent's own runtime excluded), and the cost of claiming a job.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::ids::Timestamp;
use baton_engine::config::{Roster, RunSettings, WorkerConfig};
use baton_engine::jobs::git_hook::GitHook;
use baton_engine::{Engine, RunSpec, StepOutcome};
use baton_store::{ClaimOutcome, NewJob, SqliteStore, Store};
use baton_workspace::{Repo, WorkspaceSpec};
use criterion::{Criterion, criterion_group, criterion_main};

/// Writes one file per turn and claims it; nothing else (python's start-up is the
/// agent's own runtime, which the engine time excludes).
const AGENT: &str = r###"
import json, re, sys
claim_file = sys.argv[1]
brief = sys.stdin.read()
m = re.search(r"## Assigned task\n(?:Step T\d+: )?(.*)", brief)
path = m.group(1).split()[1]
open(path, "w").write(path + "\n")
json.dump({"summary": "s", "last_action": "wrote " + path, "artifacts": [{"name": path, "description": "d"}]}, open(claim_file, "w"))
"###;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn command_turn(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let repo_dir = dir.path().join("repo");
    std::fs::create_dir_all(repo_dir.join("src")).unwrap();
    for i in 0..1000 {
        std::fs::write(
            repo_dir.join("src").join(format!("f{i:04}.txt")),
            format!("file {i}\n"),
        )
        .unwrap();
    }
    git(&repo_dir, &["init", "-q", "-b", "main"]);
    git(
        &repo_dir,
        &["-c", "user.email=a@b", "-c", "user.name=a", "add", "."],
    );
    git(
        &repo_dir,
        &[
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    let repo = Repo::open(&repo_dir).unwrap();
    let base = repo.head_commit().unwrap();
    let workspace = repo
        .create_workspace(&WorkspaceSpec {
            job_id: "bench".into(),
            base: base.clone(),
            base_branch: None,
            root: dir.path().join("worktrees"),
        })
        .unwrap();

    let mut worker = WorkerConfig::mock("agent", "agent");
    worker.model = "command/agent".into();
    let options = serde_json::json!({
        "command": format!("python3 {} {{claim_file}}", agent.display()),
        "handoff": "derive",
        "pass_env": ["PATH"],
    });
    worker.options = options.as_object().unwrap().clone();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("b.db")).unwrap());
    let engine = Engine::new(store);
    let tasks: Vec<String> = (0..2000).map(|i| format!("write out{i}.txt")).collect();
    let run = engine
        .create_run(&RunSpec {
            objective: "Write files".into(),
            tasks,
            step_budgets: Vec::new(),
            step_seats: Vec::new(),
            step_tags: Vec::new(),
            step_scopes: Vec::new(),
            roster: Roster {
                workers: vec![worker],
            },
            settings: RunSettings {
                estimator: baton_core::tokens::EstimatorKind::Heuristic,
                ..RunSettings::default()
            },
        })
        .unwrap();
    let mut session = engine.open(&run, None).unwrap();
    session.workspace = Some(Arc::new(GitHook {
        workspace,
        job_id: "bench".into(),
        gates: Vec::new(),
        gate_each_turn: false,
        gate_dir: dir.path().join("gates"),
        hide: Vec::new(),
        keys: Default::default(),
        fence: None,
        last_commit: std::sync::Mutex::new(base),
        cancel: Default::default(),
    }));
    c.bench_function(
        "command-worker turn, engine overhead (1,000-file repo)",
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    match engine.step(&mut session).unwrap() {
                        StepOutcome::Turn(s) => {
                            assert!(s.error.is_none(), "{:?}", s.error);
                            total += s.engine_time;
                        }
                        other => panic!("{other:?}"),
                    }
                }
                total
            })
        },
    );
}

fn claim(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    let mut n = 0u64;
    c.bench_function("claim a job (SQLite, 1,000 queued)", |b| {
        b.iter_custom(|iters| {
            for _ in 0..iters + 1000 {
                n += 1;
                store
                    .enqueue_job(&NewJob {
                        id: format!("job-{n:08}"),
                        group: "g".into(),
                        spec: serde_json::json!({}),
                        created_at: Timestamp(n as i64),
                    })
                    .unwrap();
            }
            let t0 = Instant::now();
            for i in 0..iters {
                let got = store
                    .try_claim_job("bench", &format!("t{i}"), Timestamp(1), 30_000)
                    .unwrap();
                assert!(matches!(got, ClaimOutcome::Claimed { .. }));
            }
            t0.elapsed()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = command_turn, claim
}
criterion_main!(benches);
