//! Jobs through the `baton` binary: a killed `baton work` leaves its job to be
//! reclaimed after the lease expires, and the job resumes from its last committed turn
//! without redoing one.

use std::process::Stdio;
use std::time::{Duration, Instant};

use baton_store::{JobStatus, SqliteStore, Store};

use super::*;

/// Like the engine suite's fake agent, plus a pause so a worker can be killed mid-job.
pub(super) const AGENT: &str = r###"
import json, os, re, sys, time
claim_file = sys.argv[1]
brief = sys.stdin.read()
m = re.search(r"## Assigned task\n(?:Step T\d+: )?(.*)", brief)
task = m.group(1).strip() if m else ""
time.sleep(float(os.environ.get("AGENT_SLEEP", "0")))
path = task.split()[1]
with open(path, "w") as f:
    f.write(task + "\n")
# Count how often each task ran: a redone turn would show up here.
with open(os.environ["AGENT_LOG"], "a") as f:
    f.write(task + "\n")
with open(claim_file, "w") as f:
    json.dump({"summary": "did " + task, "last_action": "wrote " + path, "next_action": "next",
               "artifacts": [{"name": path, "description": "written"}]}, f)
"###;

/// A git repository in `d` with one commit, and [`AGENT`] written next to it (its path).
pub(super) fn repo_with_agent(d: &Path) -> std::path::PathBuf {
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "dev@example.com"]);
    git(d, &["config", "user.name", "dev"]);
    std::fs::write(d.join("README.md"), "hello\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "init"]);
    let agent = d.join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    agent
}

#[test]
fn a_killed_worker_leaves_its_job_to_be_reclaimed_and_no_committed_turn_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"slow\"\nmodel = \"command/slow\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], \
             env = {{ AGENT_SLEEP = \"0.4\", AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        ),
    )
    .unwrap();
    let tasks = ["write a.txt", "write b.txt", "write c.txt", "write d.txt"];
    let mut args = vec![
        "enqueue",
        "--objective",
        "Write four files",
        "--worker",
        "slow",
    ];
    for t in &tasks {
        args.extend(["--task", t]);
    }
    run_ok(d, &args);
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();

    // Kill the first worker as soon as two turns are committed.
    let mut worker = baton(d)
        .args(["work", "--lease-s", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = store.job(&job).unwrap().run_id;
        let turns = run.map(|r| store.run_info(&r).unwrap().turns).unwrap_or(0);
        if turns >= 2 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    worker.kill().unwrap();
    worker.wait().unwrap();
    let killed = store.job(&job).unwrap();
    assert_eq!(
        killed.status,
        JobStatus::Running,
        "the dead worker still holds the lease"
    );
    let committed_before = store
        .run_info(killed.run_id.as_ref().unwrap())
        .unwrap()
        .turns;
    assert!((2..4).contains(&committed_before), "{committed_before}");

    // The lease has not expired, but its holder is a dead process on this machine: the
    // job is taken over at once and finished from its last committed turn.
    let out = baton(d).args(["work", "--lease-s", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("taken over"),
        "{}",
        text(&out)
    );

    let done = store.job(&job).unwrap();
    assert_eq!(done.status, JobStatus::Outbox);
    assert_eq!(done.attempts, 2);
    let run = done.run_id.unwrap();
    let turns: Vec<u32> = store.turns(&run).unwrap().iter().map(|t| t.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3], "every turn once");
    // The agent ran each committed task once; only the turn in flight may have run twice.
    let ran = std::fs::read_to_string(&log).unwrap();
    for (i, t) in tasks.iter().enumerate() {
        let times = ran.lines().filter(|l| l == t).count();
        if (i as u32) < committed_before {
            assert_eq!(times, 1, "committed turn {i} ({t}) was redone:\n{ran}");
        } else {
            assert!((1..=2).contains(&times), "{t}: {times}\n{ran}");
        }
    }
    // The branch has one commit per turn, and the files are all there, in the same
    // worktree: its holder was dead, so nothing else can write there.
    let worktree = d.join(".baton/worktrees").join(&job);
    let commits = git(&worktree, &["rev-list", "--count", "main..HEAD"]);
    assert_eq!(commits.trim(), "4");
    for f in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        assert!(worktree.join(f).exists(), "{f}");
    }
}

#[test]
fn work_logs_through_tracing_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let plain = baton(dir.path()).arg("work").output().unwrap();
    assert!(plain.status.success(), "{}", text(&plain));
    let plain_err = String::from_utf8(plain.stderr).unwrap();
    assert!(!plain_err.contains("baton_engine"), "{plain_err}");

    let logged = baton(dir.path())
        .arg("work")
        .env("BATON_LOG", "baton_engine=debug")
        .output()
        .unwrap();
    assert!(logged.status.success(), "{}", text(&logged));
    // The user's output is the same; the logs come on stderr besides it.
    assert_eq!(logged.stdout, plain.stdout);
    let err = String::from_utf8(logged.stderr).unwrap();
    for line in [
        "INFO baton_engine::jobs::runner: work started",
        "DEBUG baton_engine::jobs::runner: no job to claim",
    ] {
        assert!(err.contains(line), "{line:?} not in {err}");
    }
    assert!(err.contains(plain_err.trim()), "{err}");

    // RUST_LOG when BATON_LOG is not set; BATON_LOG wins when both are.
    let rust = baton(dir.path())
        .arg("work")
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8(rust.stderr).unwrap();
    assert!(
        err.contains("work started") && !err.contains("DEBUG"),
        "{err}"
    );
    let both = baton(dir.path())
        .arg("work")
        .env("RUST_LOG", "debug")
        .env("BATON_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(both.stderr).unwrap(), plain_err);
}

/// `baton enqueue` with pools configured: the job's turns are routed from the
/// candidate's workers (the step tagged `credentials` skips the family denied it), the
/// pins say whom each seating left out, a preset with no pool is refused with the entry
/// to add, and a typo in a step seat is refused before anything is queued.
#[test]
fn enqueued_jobs_are_routed_by_the_configured_pools_with_their_step_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    let worker = |id: &str, pool: &str| {
        format!(
            "[[workers]]\nid = \"{id}\"\nmodel = \"command/{id}\"\nfamily = \"f{id}\"\npool = \"{pool}\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], \
             env = {{ AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        )
    };
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n{}{}\
             [[pools]]\nid = \"pa\"\n[[pools]]\nid = \"pb\"\n\
             [[seats]]\nid = \"build.step\"\ndeny_tags = {{ credentials = [\"fa\"] }}\n",
            worker("a", "pa"),
            worker("b", "pb")
        ),
    )
    .unwrap();
    let enqueue = |extra: &[&str]| {
        let mut args = vec![
            "enqueue",
            "--objective",
            "Write two files",
            "--task",
            "write secrets.txt",
            "--task",
            "write app.txt",
        ];
        args.extend_from_slice(extra);
        baton(d).args(&args).output().unwrap()
    };
    let out = enqueue(&["--worker", "claude"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("candidate claude is a coding agent's preset with no [[workers]] entry, but pools are defined (pa, pb)"),
        "{}",
        text(&out)
    );
    let out = enqueue(&["--worker", "a+b", "--step-seat", "bulid.step"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("build.step"), "{}", text(&out));
    let store = SqliteStore::open(&db(d)).unwrap();
    assert!(store.list_jobs().unwrap().is_empty(), "nothing was queued");

    let out = enqueue(&[
        "--worker",
        "a+b",
        "--step-tags",
        "credentials",
        "--step-budget",
        "900",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    run_ok(d, &["work"]);
    let job = &store.list_jobs().unwrap()[0];
    assert_eq!(job.status, JobStatus::Outbox);
    let run = job.run_id.clone().unwrap();
    let who: Vec<String> = store
        .turns(&run)
        .unwrap()
        .iter()
        .map(|t| t.worker.to_string())
        .collect();
    assert_eq!(who, ["b", "a"]);
    assert_eq!(store.load_state(&run).unwrap().plan[0].budget, Some(900));
    let why = run_ok(d, &["pins", &run.0, "--why"]);
    assert!(
        why.contains("· build.step · b (command/b, family fb, pool pb) · step T1 ·"),
        "{why}"
    );
    assert!(
        why.contains("left out: a (its family may not see steps tagged credentials)"),
        "{why}"
    );
}
