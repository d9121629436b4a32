//! The `baton` binary on PostgreSQL: `--db postgres://…` for every command, jobs shared
//! by several `baton work` processes, a new job waking an idle worker through
//! LISTEN/NOTIFY, and a `baton work --follow` that outlives the database going away.
//!
//! The server is `BATON_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/test`,
//! as on every development and CI machine); each test has a schema of its own, dropped
//! when it ends. An unreachable server fails the tests, saying so.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_store::{JobStatus, PostgresStore, PostgresUrl, Store};

pub(super) use super::cuttable::{Cuttable, server_addr};
use super::jobs::repo_with_agent;
use super::*;

pub(super) fn server() -> String {
    std::env::var("BATON_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// A schema of its own on the test server, dropped with it.
pub(super) struct Schema {
    pub(super) name: String,
}

impl Schema {
    pub(super) fn new(tag: &str) -> Schema {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "cli_{tag}_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // Fails here, clearly, when the server is not there.
        raw_client();
        Schema { name }
    }

    /// The URL `--db` gets, through `server` (`host:port`) if given.
    pub(super) fn url_via(&self, server: Option<&str>) -> String {
        let base = match server {
            Some(addr) => format!("postgres://postgres@{addr}/test"),
            None => self::server(),
        };
        format!("{base}?schema={}", self.name)
    }

    pub(super) fn url(&self) -> String {
        self.url_via(None)
    }

    pub(super) fn store(&self) -> PostgresStore {
        PostgresStore::open(&PostgresUrl::parse(&self.url()).unwrap()).unwrap()
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ =
            raw_client().batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
    }
}

pub(super) fn raw_client() -> ::postgres::Client {
    let server = server();
    ::postgres::Client::connect(&server, ::postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {server}: {e}. These tests need it (every \
             development and CI machine runs one: `pg_ctlcluster 15 main start`), or set \
             BATON_TEST_POSTGRES to another server's URL"
        )
    })
}

/// `baton` in `dir` with `BATON_DB` set to `url`.
pub(super) fn baton_on(dir: &Path, url: &str) -> Command {
    let mut cmd = baton(dir);
    cmd.env("BATON_DB", url);
    cmd
}

pub(super) fn ok_on(dir: &Path, url: &str, args: &[&str]) -> String {
    let out = baton_on(dir, url).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "baton {args:?} failed:\n{}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A roster of one scripted coding agent (the jobs suite's), logging each task it runs.
fn write_config(d: &Path, agent: &Path, log: &Path) {
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"fast\"\nmodel = \"command/fast\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], \
             env = {{ AGENT_SLEEP = \"0\", AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        ),
    )
    .unwrap();
}

fn enqueue(d: &Path, url: &str, tasks: &[String]) {
    let mut args = vec!["enqueue", "--objective", "Write files", "--worker", "fast"];
    for t in tasks {
        args.extend(["--task", t.as_str()]);
    }
    ok_on(d, url, &args);
}

pub(super) fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child's stderr, collected by a thread as it comes.
pub(super) fn collect_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let seen = Arc::new(Mutex::new(String::new()));
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let into = seen.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    seen
}

pub(super) fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.wait();
}

#[test]
fn every_command_works_on_a_postgres_url_and_migrate_says_what_it_did() {
    let schema = Schema::new("cmds");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = schema.url();

    let created = ok_on(d, &url, &["migrate"]);
    assert!(
        created.contains("created the baton schema (version") && created.contains(&schema.name),
        "{created}"
    );
    let again = ok_on(d, &url, &["migrate"]);
    assert!(again.contains("already at schema version"), "{again}");

    let demo = ok_on(d, &url, &["demo"]);
    assert!(demo.contains("PostgreSQL"), "{demo}");
    // Nothing went to the default SQLite file.
    assert!(!db(d).exists());
    let runs = ok_on(d, &url, &["runs"]);
    assert!(runs.contains("finished"), "{runs}");
    let state = ok_on(d, &url, &["state", "--json"]);
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert!(state.is_object(), "{state}");
    let history = ok_on(d, &url, &["history"]);
    assert!(history.contains("turn   4"), "{history}");
    // The same run, read straight from the schema.
    let store = schema.store();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].turns, 5);

    // A password never appears in what baton prints.
    let secret = format!(
        "postgres://postgres:hunter2@127.0.0.1:1/test?schema={}",
        schema.name
    );
    let out = baton_on(d, &secret).arg("runs").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be reached"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn jobs_enqueued_by_one_process_are_worked_once_by_several() {
    let schema = Schema::new("share");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    write_config(d, &agent, &log);
    let url = schema.url();
    // Twelve one-step jobs, one per enqueue, from a process that then exits.
    let tasks: Vec<String> = (0..12).map(|i| format!("write f{i}.txt")).collect();
    for t in &tasks {
        enqueue(d, &url, std::slice::from_ref(t));
    }
    let workers: Vec<Child> = (0..3)
        .map(|_| {
            baton_on(d, &url)
                .args(["work", "--concurrency", "2"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut errors = String::new();
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        errors.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    let store = schema.store();
    let jobs = store.list_jobs().unwrap();
    assert_eq!(jobs.len(), 12);
    for job in &jobs {
        assert_eq!(job.status, JobStatus::Outbox, "{job:?}\n{errors}");
        assert_eq!(job.attempts, 1, "claimed once: {job:?}");
    }
    // Each task ran exactly once, across the three processes.
    let ran = std::fs::read_to_string(&log).unwrap();
    for t in &tasks {
        assert_eq!(ran.lines().filter(|l| l == t).count(), 1, "{t}:\n{ran}");
    }
    let listed = ok_on(d, &url, &["jobs"]);
    assert_eq!(listed.matches("outbox").count(), 12, "{listed}");
}

#[test]
fn a_new_job_wakes_an_idle_follower_at_once_instead_of_at_its_next_poll() {
    let schema = Schema::new("wake");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    write_config(d, &agent, &log);
    let url = schema.url();
    ok_on(d, &url, &["migrate"]);
    // It polls once a minute: only a notification can start the job sooner.
    let mut worker = baton_on(d, &url)
        .args(["work", "--follow", "--poll-ms", "60000"])
        .env("BATON_LOG", "baton_engine::jobs::runner=trace")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut worker);
    wait_until("the worker to go idle", Duration::from_secs(30), || {
        seen.lock().unwrap().contains("no job to claim; waiting")
    });
    // Let the listener connect (it sends a wake-up when it does).
    std::thread::sleep(Duration::from_millis(500));
    let enqueued = Instant::now();
    enqueue(d, &url, &["write woken.txt".to_string()]);
    let store = schema.store();
    wait_until("the job to be worked", Duration::from_secs(30), || {
        store.list_jobs().unwrap()[0].status == JobStatus::Outbox
    });
    let took = enqueued.elapsed();
    stop(worker);
    assert!(
        took < Duration::from_secs(30),
        "the job waited {took:?}: the follower was not woken"
    );
}

/// A link to the test server that can be cut (the store suite's, shared).
pub(super) fn link_on(ip: &str) -> Cuttable {
    Cuttable::start_on(ip, &server_addr(&server()))
}

#[test]
fn a_follower_outlives_the_database_going_away_and_works_what_was_queued_meanwhile() {
    let schema = Schema::new("outage");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    write_config(d, &agent, &log);
    let url = schema.url();
    ok_on(d, &url, &["migrate"]);
    let link = link_on("127.0.0.1");
    let via = schema.url_via(Some(&link.addr));

    let mut worker = baton_on(d, &via)
        .args(["work", "--follow", "--poll-ms", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut worker);
    wait_until("the worker to start", Duration::from_secs(30), || {
        seen.lock().unwrap().contains("following the queue")
    });
    enqueue(d, &url, &["write before.txt".to_string()]);
    let store = schema.store();
    wait_until("the first job", Duration::from_secs(30), || {
        store.list_jobs().unwrap()[0].status == JobStatus::Outbox
    });

    // The network goes; a job is queued by someone who can still reach the database.
    link.cut();
    enqueue(d, &url, &["write during.txt".to_string()]);
    wait_until("the outage to be reported", Duration::from_secs(30), || {
        seen.lock().unwrap().contains("cannot be reached")
    });
    // It keeps trying rather than exiting.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        worker.try_wait().unwrap().is_none(),
        "{}",
        seen.lock().unwrap()
    );
    assert!(
        store
            .list_jobs()
            .unwrap()
            .iter()
            .any(|j| j.status == JobStatus::Queued)
    );

    link.restore();
    wait_until(
        "the job queued during the outage",
        Duration::from_secs(60),
        || {
            store
                .list_jobs()
                .unwrap()
                .iter()
                .all(|j| j.status == JobStatus::Outbox)
        },
    );
    wait_until(
        "the recovery to be reported",
        Duration::from_secs(10),
        || seen.lock().unwrap().contains("answers again"),
    );
    stop(worker);
    let said = seen.lock().unwrap().clone();
    // Said once per outage, not at every retry.
    assert_eq!(said.matches("cannot be reached").count(), 1, "{said}");
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(ran.lines().count(), 2, "{ran}");
}

#[test]
fn a_follower_started_before_the_database_is_up_waits_for_it() {
    let schema = Schema::new("late");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = repo_with_agent(d);
    let log = d.join("agent.log");
    write_config(d, &agent, &log);
    let url = schema.url();
    let link = link_on("127.0.0.1");
    link.cut();
    let via = schema.url_via(Some(&link.addr));
    let mut worker = baton_on(d, &via)
        .args(["work", "--follow", "--poll-ms", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut worker);
    wait_until("the wait to be reported", Duration::from_secs(30), || {
        seen.lock().unwrap().contains("cannot be reached")
    });
    enqueue(d, &url, &["write late.txt".to_string()]);
    link.restore();
    let store = schema.store();
    wait_until("the job", Duration::from_secs(60), || {
        store.list_jobs().unwrap()[0].status == JobStatus::Outbox
    });
    stop(worker);
    // Without --follow the same start is an error that says what to do.
    link.cut();
    let out = baton_on(d, &via).arg("work").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be reached") && err.contains("Check that PostgreSQL is running"),
        "{err}"
    );
}

/// A unit of work started on one host and resumed on another after a crash (issue 13):
/// host A runs `baton line` on PostgreSQL and is SIGKILLed in the middle of the plan
/// station with calls in flight; host B (another link, another address) resumes it
/// from the last committed turn, and it ends lane for lane, worker for worker and pin
/// for pin as the same unit never killed.
#[test]
fn a_unit_started_on_one_host_is_resumed_on_another_after_a_crash() {
    use super::line::{ran_in, repo_with_build_agent_at, spawn_lines_with, unit_id};
    const GATE: &str = "check=grep -q fixed impl.txt";
    let args = [
        "line",
        "Add rate limiting to the public API",
        "--repo",
        ".",
        "--gate",
        GATE,
    ];
    let agents = tempfile::tempdir().unwrap();
    // The same unit never killed, on a schema of its own.
    let clean_schema = Schema::new("unit_clean");
    let clean = tempfile::tempdir().unwrap();
    repo_with_build_agent_at(clean.path(), agents.path(), "", 0);
    let out = ok_on(clean.path(), &clean_schema.url(), &args);
    let clean_unit = unit_id(&out, 1);
    let never_killed = ran_in(&clean_schema.store(), &clean_unit);

    let schema = Schema::new("unit_moved");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_build_agent_at(d, agents.path(), "", 300);
    let (host_a, host_b) = (link_on("127.0.0.21"), link_on("127.0.0.22"));
    let (mut child, lines) =
        spawn_lines_with(baton_on(d, &schema.url_via(Some(&host_a.addr))), &args);
    let mut unit = String::new();
    let mut said = Vec::new();
    // Killed once the lead's plan is committed: the scrutiny's call is in flight.
    while !said.iter().any(|l: &String| l.contains("As lead.plan")) {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no plan: {said:#?}"));
        if unit.is_empty() && line.starts_with("unit ") {
            unit = unit_id(&line, 1);
        }
        said.push(line);
    }
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL: no cleanup of any kind
    let _ = child.wait();
    let store = schema.store();
    let committed = ran_in(&store, &unit).0.len();
    assert!(
        committed > 0 && committed < never_killed.0.len(),
        "{said:#?}"
    );

    let out = baton_on(d, &schema.url_via(Some(&host_b.addr)))
        .args(["line", "--resume", &unit])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("APPROVED"),
        "{}",
        text(&out)
    );
    let (lanes, pins) = ran_in(&store, &unit);
    assert_eq!(lanes, never_killed.0);
    assert_eq!(pins, never_killed.1);
    assert_eq!(
        git(d, &["show", &format!("baton/job-{unit}:impl.txt")]),
        "fixed after the gate failed\n"
    );
}
