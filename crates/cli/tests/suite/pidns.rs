//! Lease owners across pid namespaces: two containers on one kernel, or two machines,
//! given one host name (`docker run --hostname`, replicas of one compose service) and
//! sharing one database. Each sees its own pids, so a holder whose pid does not exist
//! here may still be alive there.
//!
//! Needs root (`unshare --pid`). Without it the test says so and passes, unless
//! `BATON_REQUIRE_PIDNS=1` (which `.ci/run`, running as root, sets).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_store::{JobStatus, SqliteStore, Store};

use super::*;

/// Kills the namespace (its first process, and with it everything in it) if the test
/// ends early.
struct Namespace(Child);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether this process may make pid namespaces and choose pids in them.
fn pid_namespaces() -> bool {
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c"])
        .arg("echo 100 > /proc/sys/kernel/ns_last_pid")
        .output();
    let why = match probe {
        Ok(out) if out.status.success() => return true,
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => format!("unshare: {e}"),
    };
    if std::env::var_os("BATON_REQUIRE_PIDNS").is_some() {
        panic!("pid namespaces are required (BATON_REQUIRE_PIDNS) but: {why}");
    }
    eprintln!(
        "SKIPPED: pid namespaces are not available here ({why}); run as root \
         (BATON_REQUIRE_PIDNS=1 makes this a failure, as .ci/run does)"
    );
    false
}

/// A pid that no process here has: one just reaped, whose number is not handed out
/// again until pids wrap around.
fn free_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    child.id()
}

/// `baton work --follow` in a pid namespace of its own (same host name, same
/// database), as pid `pid` there; returns it and its owner name.
fn worker_in_a_namespace(d: &Path, pid: u32) -> (Namespace, String) {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "sh",
        "-c",
    ])
    // The shell is the namespace's pid 1; the next pid it hands out is `pid`. Not the
    // list's last command: a bash `sh` would run baton in its own place, as pid 1.
    .arg("echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid && \"$0\" work --follow --lease-s 60; exit $?")
    .arg(env!("CARGO_BIN_EXE_baton"))
    .arg(pid.to_string());
    let mut child = isolated(cmd, d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let namespace = Namespace(child);
    let owner = loop {
        let line = lines
            .next()
            .expect("baton work ended before saying who it is")
            .unwrap();
        if let Some(rest) = line.split("following the queue as ").nth(1) {
            break rest.split(';').next().unwrap().to_string();
        }
    };
    // Drained, so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (namespace, owner)
}

/// Regression: a `baton work` whose pid did not exist in this pid namespace, on a host
/// of the same name, was taken for a dead process: the next `baton work` here expired
/// its lease and took its job over at once while it still worked on it, and `baton
/// cancel --worker-process` refused it as a process that does not exist. The owner
/// name carries the pid space now, and only a holder in this one is judged by its pid.
#[test]
fn a_baton_work_in_another_pid_namespace_of_this_host_name_keeps_its_job_and_can_be_cancelled() {
    if !pid_namespaces() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let started = d.join("agent-started");
    super::hardening::repo_with_agent(
        d,
        &format!("sh -c 'echo yes > {}; sleep 300'", started.display()),
        "",
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
    let pid = free_pid();
    let (mut namespace, owner) = worker_in_a_namespace(d, pid);
    assert!(owner.starts_with(&format!("pid-{pid}@")), "{owner}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the job's agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // What makes the case: the holder's pid names no process here.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} was handed out here again"
    );
    assert!(!baton_engine::lease::owner_is_dead(&owner), "{owner}");
    assert!(!baton_engine::lease::owner_is_here(&owner), "{owner}");

    // Another `baton work` here leaves the job to its live holder.
    let mut here = baton(d)
        .arg("work")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let limit = Instant::now() + Duration::from_secs(20);
    while here.try_wait().unwrap().is_none() {
        if Instant::now() > limit {
            let _ = here.kill();
            let _ = here.wait();
            panic!("baton work here took over the job of the live {owner}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = here.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("held by other workers' leases"),
        "{}",
        text(&out)
    );
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = store.list_jobs().unwrap().remove(0);
    assert_eq!(job.status, JobStatus::Running);
    assert_eq!(job.lease_owner.as_deref(), Some(owner.as_str()));
    assert_eq!(job.attempts, 1, "claimed once");

    // And it can be stopped from here by its owner name.
    run_ok(d, &["cancel", "--worker-process", &owner]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = namespace.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after the cancel");
        std::thread::sleep(Duration::from_millis(20));
    };
    // `baton cancel`'s status for the stopped command (README, "Exit codes").
    assert_eq!(status.code(), Some(10));
    let job = store.list_jobs().unwrap().remove(0);
    assert_eq!(job.status, JobStatus::Queued, "given back");
}
