//! Jobs under faults from outside (issue 7): a panic inside a job, an interrupt, a
//! lease taken over while the old worker's agent still runs. Each test is named after
//! what broke.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton_core::ids::Timestamp;
use baton_engine::config::WorkerConfig;
use baton_engine::jobs::runner::{Progress, WorkOptions, work};
use baton_engine::jobs::{EnqueueRequest, enqueue};
use baton_engine::{Clock, SystemClock};
use baton_gateway::Cancel;
use baton_store::{ClaimOutcome, JobStatus};

use super::jobs::git;
use super::*;

pub(super) fn repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("README.md"), "# project\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    repo
}

/// A command worker running `sh -c SCRIPT` in the worktree.
pub(super) fn sh_worker(id: &str, script: &str) -> WorkerConfig {
    let mut w = WorkerConfig::mock(id, id);
    w.model = format!("command/{id}");
    w.max_retries = 0;
    let options = json!({
        "command": format!("sh -c {}", shell_words(script)),
        "handoff": "derive",
        "pass_env": ["PATH"],
    });
    w.options = options.as_object().unwrap().clone();
    w
}

pub(super) fn shell_words(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn queue(
    store: &dyn baton_store::Store,
    repo: &Path,
    tasks: &[&str],
    worker: WorkerConfig,
) -> String {
    let queued = enqueue(
        store,
        &SystemClock,
        &EnqueueRequest {
            objective: "Harden baton".into(),
            tasks: tasks.iter().map(|t| t.to_string()).collect(),
            repo: repo.to_path_buf(),
            base: None,
            worktree_root: None,
            gates: Vec::new(),
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
    .unwrap();
    queued.jobs[0].clone()
}

pub(super) const WRITE_AND_CLAIM: &str = "echo done > out.txt; \
    printf '{\"summary\":\"wrote out.txt\",\"last_action\":\"wrote\",\"artifacts\":[{\"name\":\"out.txt\",\"description\":\"x\"}]}' > .baton/claim.json";

/// The real clock, except that once armed it panics on its next reading (once).
struct PanickingClock {
    armed: AtomicBool,
}

impl Clock for PanickingClock {
    fn now(&self) -> Timestamp {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("clock exploded");
        }
        SystemClock.now()
    }
}

#[test]
fn a_panic_inside_a_job_fails_the_job_instead_of_hanging_work_under_a_live_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let store = store_in(dir.path());
    let job = queue(
        store.as_ref(),
        &repo,
        &["write"],
        sh_worker("w", WRITE_AND_CLAIM),
    );
    let clock = Arc::new(PanickingClock {
        armed: AtomicBool::new(false),
    });
    let armed = clock.clone();
    let started = Instant::now();
    let reports = work(store.clone(), clock, &WorkOptions::default(), &|p| {
        if matches!(p, Progress::Claimed { .. }) {
            armed.armed.store(true, Ordering::SeqCst);
        }
    })
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, JobStatus::Failed, "{:?}", reports[0]);
    assert!(
        reports[0].detail.contains("clock exploded"),
        "{:?}",
        reports[0]
    );
    let stored = store.job(&job).unwrap();
    assert_eq!(stored.status, JobStatus::Failed);
    assert!(
        stored.lease_expires_at.is_none(),
        "the lease is not renewed any more"
    );
}

#[test]
fn an_interrupted_work_kills_the_agent_and_gives_the_job_back_to_the_queue_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let store = store_in(dir.path());
    let job = queue(store.as_ref(), &repo, &["slow"], sh_worker("w", "sleep 60"));
    let options = WorkOptions {
        cancel: Cancel::new(),
        lease: Duration::from_secs(30),
        ..WorkOptions::default()
    };
    let cancel = options.cancel.clone();
    let started = Instant::now();
    let reports = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(700));
            cancel.cancel();
        });
        work(store.clone(), Arc::new(SystemClock), &options, &|_| {}).unwrap()
    });
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the agent was not stopped: {:?}",
        started.elapsed()
    );
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, JobStatus::Queued, "{:?}", reports[0]);
    let stored = store.job(&job).unwrap();
    assert_eq!(
        stored.status,
        JobStatus::Queued,
        "released, not held for 30 s"
    );
    let run = stored.run_id.unwrap();
    assert!(
        store.turns(&run).unwrap().is_empty(),
        "the turn in flight is discarded"
    );
    // The run's lease went with it: nothing stops the next worker or a reader.
    assert!(store.run_info(&run).is_ok());
}

#[test]
fn a_worker_whose_lease_was_taken_over_stops_its_agent_and_the_new_owner_works_in_a_fresh_worktree()
{
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let store = store_in(dir.path());
    // The agent writes its line to `log.txt` every 100 ms for 3 s, then claims.
    let script = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; \
                  do echo \"$AGENT_NAME $i\" >> log.txt; sleep 0.1; done; echo finished > out.txt; \
                  printf '{\"summary\":\"s\",\"last_action\":\"a\"}' > .baton/claim.json";
    let mut worker = sh_worker("w", script);
    worker
        .options
        .insert("env".into(), json!({"AGENT_NAME": "old"}));
    let job = queue(store.as_ref(), &repo, &["first", "second"], worker);

    // Worker A: a lease of 3 s. Once its agent is writing, the lease is stolen as if A
    // had been stopped (Ctrl-Z) and B had reclaimed it after it expired.
    let options = WorkOptions {
        lease: Duration::from_secs(3),
        owner: "worker-a".into(),
        ..WorkOptions::default()
    };
    let root = repo.join(".baton/worktrees");
    let started = Instant::now();
    let reports = std::thread::scope(|s| {
        s.spawn(|| {
            let log = root.join(&job).join("log.txt");
            let deadline = Instant::now() + Duration::from_secs(20);
            while !log.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            // Expire A's lease and claim the job as B would.
            store
                .expire_job_lease(&job, "worker-a", SystemClock.now())
                .unwrap();
            match store
                .try_claim_job("worker-b", "token-b", SystemClock.now(), 60_000)
                .unwrap()
            {
                ClaimOutcome::Claimed { reclaimed, .. } => assert!(reclaimed),
                other => panic!("{other:?}"),
            }
        });
        work(store.clone(), Arc::new(SystemClock), &options, &|_| {}).unwrap()
    });
    assert_eq!(reports[0].status, JobStatus::Running, "{:?}", reports[0]);
    assert!(reports[0].detail.contains("lease lost"), "{:?}", reports[0]);
    // A's agent was killed when the heartbeat saw the loss (a 1 s beat), long before
    // its 3 s of writing were over.
    let old_log = std::fs::read_to_string(root.join(&job).join("log.txt")).unwrap();
    let lines_then = old_log.lines().count();
    std::thread::sleep(Duration::from_millis(600));
    let lines_later = std::fs::read_to_string(root.join(&job).join("log.txt"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines_then, lines_later, "the old agent is still writing");
    assert!(lines_then < 30, "the old agent ran to its end: {old_log}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // B never shows up again; C takes the job over once B's lease is gone too. The
    // holder may be alive (only its lease ran out), so C works in a fresh worktree, and
    // what the old one holds (A's agent's log) is set aside by name first.
    assert!(
        store
            .expire_job_lease(&job, "worker-b", SystemClock.now())
            .unwrap()
    );
    let c = WorkOptions {
        owner: "worker-c".into(),
        ..WorkOptions::default()
    };
    let reports = work(store.clone(), Arc::new(SystemClock), &c, &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    let info = store.job(&job).unwrap();
    assert_eq!(info.attempts, 3);
    let outbox = baton_engine::jobs::decode_outbox(&info).unwrap().unwrap();
    assert_eq!(outbox.worktree, root.join(format!("{job}.3")));
    assert!(
        outbox
            .drift
            .iter()
            .any(|d| d.contains("set aside at refs/baton/discarded/")),
        "{:?}",
        outbox.drift
    );
    let saved = git(
        &repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/baton/discarded/{job}/"),
        ],
    );
    let saved = saved
        .lines()
        .next()
        .expect("a ref under refs/baton/discarded");
    assert!(git(&repo, &["show", &format!("{saved}:log.txt")]).contains("old 1"));
    // The old worktree let go of the branch: nothing done there can move it.
    let old_head = Command::new("git")
        .arg("-C")
        .arg(root.join(&job))
        .args(["symbolic-ref", "-q", "HEAD"])
        .output()
        .unwrap();
    assert!(
        !old_head.status.success(),
        "the old worktree is still on the branch"
    );
    // The new owner's turns hold none of A's writes: two whole runs of the agent, one
    // per turn, and nothing else.
    let log = git(&repo, &["show", &format!("baton/job-{job}:log.txt")]);
    let expected: Vec<String> = (0..2)
        .flat_map(|_| (1..=30).map(|i| format!("old {i}")))
        .collect();
    assert_eq!(log.lines().collect::<Vec<_>>(), expected, "{log}");
}
