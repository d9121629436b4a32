//! Defects found by crashing, signalling and starving the real binary (issue 7); each
//! test is named after what broke.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use baton_store::{JobStatus, SqliteStore, Store};

use super::*;

/// A repository with one commit and a roster of one command worker `w` running `command`.
pub(super) fn repo_with_agent(d: &Path, command: &str, extra_options: &str) {
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "dev@example.com"]);
    git(d, &["config", "user.name", "dev"]);
    std::fs::write(d.join("README.md"), "hello\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "init"]);
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"w\"\nmodel = \"command/w\"\n\
             options = {{ command = {command:?}, handoff = \"derive\", pass_env = [\"PATH\"]{extra_options} }}\n"
        ),
    )
    .unwrap();
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[test]
fn sigpipe_from_an_agent_that_never_reads_its_briefing_does_not_kill_baton_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_agent(d, "sh -c 'sleep 0.3; exit 0'", "");
    // A briefing far bigger than a pipe's buffer: the writer is always mid-write when
    // the agent exits.
    let objective = format!("Do the thing. {}", "context ".repeat(12_000));
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            &objective,
            "--task",
            "write a.txt",
            "--worker",
            "w",
            "--budget",
            "60000",
        ],
    );
    let out = baton(d).args(["work"]).output().unwrap();
    assert_eq!(
        signal_of(&out.status),
        None,
        "baton work died of a signal:\n{}",
        text(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("without reading its briefing"),
        "the failure says why:\n{stderr}"
    );
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = &store.list_jobs().unwrap()[0];
    assert_eq!(job.status, JobStatus::Failed, "recorded, not left running");
    let run = job.run_id.clone().unwrap();
    assert!(
        !store.turns(&run).unwrap().is_empty(),
        "the failed turns are recorded"
    );
}

#[test]
fn sigpipe_on_baton_own_stdout_still_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run_ok(d, &["demo"]);
    // `baton history | head -c 10`: the reader goes away early.
    let out = Command::new("sh")
        .current_dir(d)
        .arg("-c")
        .arg(format!(
            "'{}' history 2>err.txt | head -c 10 >/dev/null; cat err.txt",
            env!("CARGO_BIN_EXE_baton")
        ))
        .env_remove("BATON_DB")
        .env_remove("BATON_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("error"), "{err}");
}

/// Alive: exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').unwrap().1.split_whitespace().next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

fn wait_for(path: &Path, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.trim().is_empty()
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_ended(pids: &[i32], when: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    for p in &survivors {
        unsafe { libc::kill(**p, libc::SIGKILL) };
    }
    assert!(survivors.is_empty(), "{when}: still running: {survivors:?}");
}

/// Writes the pids of a background child, a `setsid` daemon and a double fork to
/// `dir`, then sleeps.
fn escapees(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "nohup sleep 300 >/dev/null 2>&1 </dev/null & echo $! > {d}/bg.pid; \
         setsid sh -c \"echo \\$\\$ > {d}/sid.pid; exec sleep 300\" >/dev/null 2>&1 </dev/null & \
         (sh -c \"echo \\$\\$ > {d}/dbl.pid; exec sleep 300\" >/dev/null 2>&1 </dev/null &); \
         sleep 300"
    )
}

fn escapee_pids(dir: &Path) -> Vec<i32> {
    ["bg.pid", "sid.pid", "dbl.pid"]
        .iter()
        .map(|f| wait_for(&dir.join(f), 20).trim().parse().unwrap())
        .collect()
}

/// Enqueues one job (with `extra` arguments), starts `baton work`, waits for the
/// escapees' pids in `pids_dir`, kills baton with SIGKILL and checks they all ended.
fn kill_9_during(d: &Path, pids_dir: &Path, extra: &[&str], when: &str) {
    let mut args = vec![
        "enqueue",
        "--objective",
        "o",
        "--task",
        "t",
        "--worker",
        "w",
    ];
    args.extend(extra);
    run_ok(d, &args);
    let mut work = baton(d)
        .arg("work")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = escapee_pids(pids_dir);
    work.kill().unwrap();
    work.wait().unwrap();
    assert_ended(&pids, when);
}

#[test]
fn kill_9_of_baton_work_ends_everything_its_agent_started() {
    let dir = tempfile::tempdir().unwrap();
    let pids_dir = tempfile::tempdir().unwrap();
    repo_with_agent(
        dir.path(),
        &format!("sh -c '{}'", escapees(pids_dir.path())),
        "",
    );
    kill_9_during(dir.path(), pids_dir.path(), &[], "kill -9 of baton work");
}

#[test]
fn kill_9_of_baton_work_during_a_gate_ends_the_gate_and_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let pids_dir = tempfile::tempdir().unwrap();
    repo_with_agent(
        dir.path(),
        "sh -c 'echo hi > a.txt; printf \"{\\\"summary\\\":\\\"s\\\",\\\"last_action\\\":\\\"a\\\"}\" > .baton/claim.json'",
        "",
    );
    let gate = format!("slow={}", escapees(pids_dir.path()));
    kill_9_during(
        dir.path(),
        pids_dir.path(),
        &["--gate", &gate, "--gate-each-turn"],
        "kill -9 during a gate",
    );
}

#[test]
fn ctrl_c_of_baton_work_stops_the_agent_releases_the_job_and_says_how_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pids_dir = tempfile::tempdir().unwrap();
    repo_with_agent(d, &format!("sh -c '{}'", escapees(pids_dir.path())), "");
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    let work = baton(d)
        .args(["work", "--lease-s", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = escapee_pids(pids_dir.path());
    unsafe { libc::kill(work.id() as i32, libc::SIGINT) };
    let out = work.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("queued again"), "{all}");
    assert!(all.contains("`baton work` continues"), "{all}");
    assert_ended(&pids, "Ctrl-C");
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = &store.list_jobs().unwrap()[0];
    assert_eq!(job.status, JobStatus::Queued, "not held for the 60 s lease");
}

#[test]
fn sigterm_of_baton_run_says_what_was_interrupted_and_a_resume_continues_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        "estimator = \"heuristic\"\n[[workers]]\nid = \"a\"\nmodel = \"mock/a\"\noptions = { delay_ms = 150 }\n",
    )
    .unwrap();
    let mut args = vec!["run", "--objective", "Survive signals"];
    for _ in 0..6 {
        args.extend(["--task", "do a step"]);
    }
    let child = baton(d)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Twice at once, as `timeout` does (to baton and to its group): one request.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(20));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!stderr.contains("stopping now"), "{stderr}");
    assert!(stderr.contains("baton resume"), "{stderr}");
    // The run's lease was released: a resume right away is not refused.
    let out = baton(d).args(["resume"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn resume_and_step_refuse_a_job_run_and_the_default_run_is_never_a_job_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_agent(d, "sh -c 'exit 1'", "");
    run_ok(d, &["demo"]);
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    let out = baton(d).arg("work").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = store.list_jobs().unwrap()[0].clone();
    let run = job.run_id.clone().unwrap();
    for cmd in ["resume", "step"] {
        let err = run_err(d, &[cmd, &run.0]);
        assert!(err.contains(&format!("run of job {}", job.id)), "{err}");
        assert!(err.contains(&format!("baton requeue {}", job.id)), "{err}");
    }
    // The newest run is the job's; `resume` with no argument picks the demo's.
    let out = baton(d).arg("resume").output().unwrap();
    assert!(!text(&out).contains(&run.0), "{}", text(&out));
}

#[test]
fn bad_worker_options_are_refused_before_a_run_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for options in [
        "model = \"openai/gpt-4.1-mini\"\napi_base = \"ftp://x\"",
        "model = \"command/x\"\noptions = { command = \"true\", timeout_s = -3 }",
    ] {
        std::fs::write(
            d.join("baton.toml"),
            format!("[[workers]]\nid = \"w\"\n{options}\n"),
        )
        .unwrap();
        let err = run_err(
            d,
            &["run", "--objective", "o", "--task", "t", "--create-only"],
        );
        assert!(err.contains("error"), "{err}");
    }
    // A command worker needs a job's worktree: `baton run` refuses it up front.
    std::fs::write(
        d.join("baton.toml"),
        "[[workers]]\nid = \"w\"\nmodel = \"command/x\"\noptions = { command = \"true\" }\n",
    )
    .unwrap();
    let err = run_err(d, &["run", "--objective", "o", "--task", "t"]);
    assert!(err.contains("baton enqueue --worker w"), "{err}");
    assert!(!db(d).exists(), "nothing was created");
    // `enqueue` checks every candidate's options before queueing anything.
    repo_with_agent(d, "true", ", timeout_s = -3");
    let err = run_err(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    assert!(err.contains("timeout_s"), "{err}");
    let jobs = baton(d).arg("jobs").output().unwrap();
    assert!(
        !String::from_utf8_lossy(&jobs.stdout).contains("queued"),
        "{}",
        text(&jobs)
    );
}

/// The first command between backticks in `text` that starts with `prefix`, with
/// `<file>` replaced by `file`: advice, as a user would follow it.
fn advised(text: &str, prefix: &str, file: &str) -> Vec<String> {
    let start = text
        .find(&format!("`{prefix}"))
        .unwrap_or_else(|| panic!("no `{prefix}…` advice in:\n{text}"));
    let rest = &text[start + 1..];
    let end = rest.find('`').unwrap();
    rest[..end]
        .replace("<file>", file)
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn a_blocked_run_advice_to_fix_the_roster_and_resume_works_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Nothing listens on port 9: every call is unreachable.
    std::fs::write(
        d.join("baton.toml"),
        "estimator = \"heuristic\"\n[[workers]]\nid = \"a\"\nmodel = \"openai/gpt-4.1-mini\"\n\
         api_base = \"http://127.0.0.1:9/v1\"\napi_key_env = \"BATON_TEST_KEY\"\nmax_retries = 0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fixed.toml"),
        "[[workers]]\nid = \"a\"\nmodel = \"mock/a\"\n",
    )
    .unwrap();
    let out = baton(d)
        .args(["run", "--objective", "o", "--task", "one", "--task", "two"])
        .env("BATON_TEST_KEY", "sk-test-0123456789abcdef")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let args = advised(&text(&out), "baton resume", "fixed.toml");
    assert!(args.contains(&"--roster".to_string()), "{args:?}");
    let out = baton(d).args(&args).output().unwrap();
    assert!(out.status.success(), "{args:?}\n{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("worker a: openai/gpt-4.1-mini") && stderr.contains("→ mock/a"),
        "{stderr}"
    );
    // The change is in the run's record, stamped like every event.
    let export = run_ok(d, &["export", "--format", "json"]);
    assert!(export.contains("roster_changed"), "{export}");
}

#[test]
fn a_failed_job_advice_to_requeue_it_works_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_agent(d, "sh -c 'echo broken >&2; exit 1'", "");
    let fixed = d.join("fixed_agent.py");
    std::fs::write(
        &fixed,
        "open('ok.txt', 'w').write('ok')\nopen('.baton/claim.json', 'w').write('{\"summary\": \"s\", \"last_action\": \"a\"}')\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fixed.toml"),
        format!(
            "[[workers]]\nid = \"w\"\nmodel = \"command/w\"\noptions = {{ command = \"python3 {}\", handoff = \"derive\", pass_env = [\"PATH\"] }}\n",
            fixed.display()
        ),
    )
    .unwrap();
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    let out = baton(d).arg("work").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let args = advised(&text(&out), "baton requeue", "fixed.toml");
    let out = baton(d).args(&args).output().unwrap();
    assert!(out.status.success(), "{args:?}\n{}", text(&out));
    let out = baton(d).arg("work").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = &store.list_jobs().unwrap()[0];
    assert_eq!(job.status, JobStatus::Outbox, "{}", text(&out));
    // Requeueing anything but a failed job is refused, saying why, before its roster
    // is touched.
    std::fs::write(
        d.join("other.toml"),
        "[[workers]]\nid = \"w\"\nmodel = \"command/other\"\noptions = { command = \"true\" }\n",
    )
    .unwrap();
    let err = run_err(d, &["requeue", &job.id, "--roster", "other.toml"]);
    assert!(
        err.contains("only a failed or cancelled job can be requeued"),
        "{err}"
    );
    let run = job.run_id.clone().unwrap();
    let export = run_ok(d, &["export", &run.0, "--format", "json"]);
    assert_eq!(export.matches("roster_changed").count(), 1, "{export}");
}

#[test]
fn a_database_error_during_a_job_is_reported_as_itself_not_as_a_lost_lease() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The agent makes the database refuse the turn and the job's failure, as a full
    // disk would (SQLite's own words).
    let agent = d.join("agent.py");
    std::fs::write(
        &agent,
        r#"
import os, sqlite3
db = sqlite3.connect(os.environ["BATON_TEST_DB"], timeout=10)
db.execute("CREATE TRIGGER full_turns BEFORE INSERT ON turns BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
db.execute("CREATE TRIGGER full_jobs BEFORE UPDATE OF status ON jobs WHEN NEW.status = 'failed' BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
db.commit()
open("a.txt", "w").write("a\n")
open(".baton/claim.json", "w").write('{"summary": "s", "last_action": "a"}')
"#,
    )
    .unwrap();
    repo_with_agent(
        d,
        &format!("python3 {}", agent.display()),
        &format!(
            ", env = {{ BATON_TEST_DB = {:?} }}",
            db(d).display().to_string()
        ),
    );
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    let out = baton(d).arg("work").output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("database or disk is full"), "{all}");
    assert!(all.contains("could not be recorded"), "{all}");
    assert!(!all.contains("lease lost"), "{all}");
    assert!(all.contains("1 whose end could not be recorded"), "{all}");
}

#[test]
fn a_stopped_worker_agent_never_writes_into_the_turns_of_the_worker_that_took_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Writes a line tagged with its pid every 100 ms for 3 s, then claims.
    let agent = d.join("agent.py");
    std::fs::write(
        &agent,
        r#"
import os, sys, time
sys.stdin.read()
for i in range(30):
    with open("log.txt", "a") as f:
        f.write("%d %d\n" % (os.getpid(), i))
    time.sleep(0.1)
open(".baton/claim.json", "w").write('{"summary": "s", "last_action": "a"}')
"#,
    )
    .unwrap();
    repo_with_agent(d, &format!("python3 {}", agent.display()), "");
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();
    let a = baton(d)
        .args(["work", "--lease-s", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&d.join(".baton/worktrees").join(&job).join("log.txt"), 20);
    // Ctrl-Z: baton stops, its agent (in a group of its own) goes on writing.
    unsafe { libc::kill(a.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(3300));
    let b = baton(d).args(["work", "--lease-s", "3"]).output().unwrap();
    assert!(b.status.success(), "{}", text(&b));
    assert!(
        String::from_utf8_lossy(&b.stderr).contains("taken over"),
        "{}",
        text(&b)
    );
    unsafe { libc::kill(a.id() as i32, libc::SIGCONT) };
    let a = a.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&a.stderr).contains("lease lost"),
        "{}",
        text(&a)
    );
    // The job's one turn holds the log of exactly one agent: the new owner's.
    let done = store.job(&job).unwrap();
    assert_eq!(done.status, JobStatus::Outbox);
    let log = git(d, &["show", &format!("baton/job-{job}:log.txt")]);
    let writers: std::collections::BTreeSet<&str> =
        log.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(writers.len(), 1, "two agents wrote the turn's file:\n{log}");
    assert_eq!(log.lines().count(), 30, "{log}");
}

#[test]
fn a_turn_committed_to_git_but_not_to_the_store_is_kept_under_refs_baton_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let marks = tempfile::tempdir().unwrap();
    repo_with_agent(
        d,
        "sh -c 'echo hi > a.txt; printf \"{\\\"summary\\\":\\\"s\\\",\\\"last_action\\\":\\\"a\\\"}\" > .baton/claim.json'",
        "",
    );
    // The gate hangs the first time (baton is killed meanwhile), passes afterwards.
    let m = marks.path().display();
    let gate = format!(
        "slow=if [ -e {m}/once ]; then exit 0; fi; touch {m}/once; echo $$ > {m}/gate.pid; sleep 300"
    );
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
            "--gate",
            &gate,
            "--gate-each-turn",
        ],
    );
    let mut work = baton(d)
        .arg("work")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&marks.path().join("gate.pid"), 20);
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();
    let orphan = git(d, &["rev-parse", &format!("baton/job-{job}")]);
    work.kill().unwrap();
    work.wait().unwrap();
    let run = store.job(&job).unwrap().run_id.unwrap();
    assert!(
        store.turns(&run).unwrap().is_empty(),
        "the store never got the turn"
    );

    let out = baton(d).arg("work").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let discarded = git(
        d,
        &[
            "for-each-ref",
            "--format=%(objectname)",
            &format!("refs/baton/discarded/{job}/"),
        ],
    );
    assert!(
        discarded.lines().any(|l| l == orphan.trim()),
        "the orphan turn commit {orphan} is not kept by name: {discarded:?}"
    );
    // The turn was redone once and committed; the job finished.
    let turns = store.turns(&run).unwrap();
    assert_eq!(
        turns.len(),
        1,
        "{:?}",
        turns
            .iter()
            .map(|t| (t.status, t.error.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(store.job(&job).unwrap().status, JobStatus::Outbox);
}

#[test]
fn a_roster_is_never_replaced_under_a_process_that_is_using_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        "estimator = \"heuristic\"\n[[workers]]\nid = \"a\"\nmodel = \"mock/a\"\noptions = { delay_ms = 200 }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("other.toml"),
        "[[workers]]\nid = \"a\"\nmodel = \"mock/other\"\n",
    )
    .unwrap();
    let mut args = vec!["run", "--objective", "o"];
    for _ in 0..8 {
        args.extend(["--task", "a step"]);
    }
    let mut running = baton(d)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !db(d).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let err = run_err(d, &["resume", "--roster", "other.toml"]);
    assert!(err.contains("is being advanced by"), "{err}");
    running.kill().unwrap();
    running.wait().unwrap();
    let export = run_ok(d, &["export", "--format", "json"]);
    assert!(
        !export.contains("roster_changed"),
        "changed under a live process"
    );
}

/// Regression (issue 10): a job that failed before its run existed (here its
/// repository is gone) printed the failure with no "claimed" line before it.
#[test]
fn a_job_that_fails_before_its_run_exists_is_said_claimed_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_agent(d, "true", "");
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "o",
            "--task",
            "t",
            "--worker",
            "w",
        ],
    );
    std::fs::remove_dir_all(d.join(".git")).unwrap();
    let out = baton(d).arg("work").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let claimed = stderr
        .find(") claimed")
        .unwrap_or_else(|| panic!("{}", text(&out)));
    let failed = stderr
        .find(": failed")
        .unwrap_or_else(|| panic!("{}", text(&out)));
    assert!(claimed < failed, "{stderr}");
}

/// Regression (issue 10): a blocked run's question was printed twice, by the event
/// stream and again by the summary, on `baton run` and on `baton resume`.
#[test]
fn a_blocked_run_says_its_question_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        "estimator = \"heuristic\"\n[[workers]]\nid = \"a\"\nmodel = \"openai/gpt-4.1-mini\"\n\
         api_base = \"http://127.0.0.1:9/v1\"\napi_key_env = \"BATON_TEST_KEY\"\nmax_retries = 0\n",
    )
    .unwrap();
    for args in [
        &["run", "--objective", "o", "--task", "one"][..],
        &["resume"],
    ] {
        let out = baton(d)
            .args(args)
            .env("BATON_TEST_KEY", "sk-test-0123456789abcdef")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        let all = text(&out);
        assert_eq!(
            all.matches("cannot reach its model").count(),
            1,
            "{args:?}: {all}"
        );
    }
}
