//! `baton cancel` from another shell (issue 10, item 3): a foreground `baton step`
//! waiting on a model that never answers, and an idle `baton work --follow`, each stop
//! within a second of the request, commit nothing and exit with the cancelled status.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// Generous for a loaded two-core machine.
const STOPPED_WITHIN: Duration = Duration::from_secs(2);
/// `baton cancel`'s own exit status for the stopped command (README, "Exit codes").
const EXIT_CANCELLED: i32 = 10;

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {limit:?} after the cancel");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn baton_cancel_stops_a_step_waiting_on_a_model_that_never_answers() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(Mutex::new(0u32));
    let count = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            *count.lock().unwrap() += 1;
            held.push(stream); // read nothing, answer nothing
        }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"local\"\nmodel = \"llamacpp/local\"\n\
             max_retries = 0\noptions = {{ api_base = \"{base}\", timeout_s = 300 }}\n"
        ),
    )
    .unwrap();
    let id = run_ok(
        dir.path(),
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    )
    .trim()
    .to_string();
    let mut step = baton(dir.path())
        .args(["step", &id])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the call", || *connections.lock().unwrap() == 1);
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let said = run_ok(dir.path(), &["cancel", &id]);
    assert!(said.contains(&format!("baton resume {id}")), "{said}");
    // It waited (issue 10): when it returns, the run's lease is released already.
    assert!(said.contains(&format!("run {id} stopped")), "{said}");
    let now = run_ok(dir.path(), &["cancel", "--no-wait", &id]);
    assert!(now.contains("not being advanced by any process"), "{now}");
    let code = exit_within(&mut step, STOPPED_WITHIN);
    eprintln!("baton step stopped {:?} after the request", asked.elapsed());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut step.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(EXIT_CANCELLED), "{err}");
    assert!(err.contains("cancelled (`baton cancel`)"), "{err}");
    assert!(err.contains("0 turn(s)"), "{err}");
    // Resumable: nothing holds the run now, and nothing of the turn is committed.
    let again = run_ok(dir.path(), &["cancel", &id]);
    assert!(
        again.contains("not being advanced by any process"),
        "{again}"
    );
    let history = run_ok(dir.path(), &["history", &id, "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&history).unwrap(),
        serde_json::json!([])
    );
}

/// A `baton work --follow` on an empty queue in `dir`, and its owner as it says it.
fn idle_follower(dir: &Path) -> (std::process::Child, String) {
    let mut work = baton(dir)
        .args(["work", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(work.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let owner = first
        .split("following the queue as ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no owner in {first:?}"))
        .to_string();
    (work, owner)
}

#[test]
fn baton_cancel_worker_process_stops_an_idle_follower() {
    let dir = tempfile::tempdir().unwrap();
    let (mut work, owner) = idle_follower(dir.path());
    assert!(owner.starts_with(&format!("pid-{}@", work.id())), "{owner}");
    let asked = Instant::now();
    run_ok(dir.path(), &["cancel", "--worker-process", &owner]);
    let code = exit_within(&mut work, STOPPED_WITHIN);
    eprintln!("baton work stopped {:?} after the request", asked.elapsed());
    assert_eq!(code, Some(EXIT_CANCELLED));
    // A process that is gone is not asked anything.
    let err = run_err(dir.path(), &["cancel", "--worker-process", &owner]);
    assert!(err.contains("nothing to stop"), "{err}");
}

/// An owner written as before owners named their pid space (`pid-N@host`, from an old
/// script or typed from memory) still stops the `baton work` of that pid on this host:
/// it was recorded under a name the worker does not listen to, and `baton cancel`
/// waited its whole `--wait-s` and failed.
#[test]
fn baton_cancel_worker_process_takes_the_owner_without_its_pid_space() {
    let dir = tempfile::tempdir().unwrap();
    let (mut work, owner) = idle_follower(dir.path());
    let Some((short, _space)) = owner.split_once('#') else {
        // No pid space to leave out (not Linux).
        let _ = work.kill();
        let _ = work.wait();
        return;
    };
    let out = baton(dir.path())
        .args(["cancel", "--worker-process", short, "--wait-s", "20"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(exit_within(&mut work, STOPPED_WITHIN), Some(EXIT_CANCELLED));
    // Gone: nothing to stop, said at once rather than after waiting.
    let err = run_err(dir.path(), &["cancel", "--worker-process", short]);
    assert!(err.contains("nothing to stop"), "{err}");
}

/// Regression (issue 10): `baton cancel` returned at once, so nobody knew whether the
/// work stopped. A holder that cannot stop (here a `baton step` frozen by SIGSTOP) is
/// waited for `--wait-s`, then named, with what to do, and exit status 8.
#[test]
fn baton_cancel_says_what_still_runs_when_the_holder_does_not_stop() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(Mutex::new(0u32));
    let count = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            *count.lock().unwrap() += 1;
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"local\"\nmodel = \"llamacpp/local\"\n\
             max_retries = 0\noptions = {{ api_base = \"{base}\", timeout_s = 300 }}\n"
        ),
    )
    .unwrap();
    let id = run_ok(
        dir.path(),
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    )
    .trim()
    .to_string();
    let mut step = baton(dir.path())
        .args(["step", &id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the call", || *connections.lock().unwrap() == 1);
    let pid = step.id().to_string();
    let signal = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    signal("-STOP");
    let asked = Instant::now();
    let out = baton(dir.path())
        .args(["cancel", "--wait-s", "1", &id])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{}", text(&out));
    assert!(
        asked.elapsed() >= Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        err.contains(&format!("is still held by pid-{pid}@")),
        "{err}"
    );
    assert!(err.contains(&format!("`kill {pid}`")), "{err}");
    // The request stays: once it runs again, it stops.
    signal("-CONT");
    let code = exit_within(&mut step, STOPPED_WITHIN);
    assert_eq!(code, Some(EXIT_CANCELLED));
}
