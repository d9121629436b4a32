//! Nothing an agent starts outlives its turn: a background child, a `setsid` daemon and
//! a double fork (re-parented to init at once) are all ended when the agent succeeds,
//! fails, times out or is cancelled. (`kill -9` of baton itself: the CLI suite.)

use std::path::Path;
use std::time::{Duration, Instant};

use baton_core::turn::CallKind;
use baton_gateway::Cancel;
use baton_gateway::ErrorClass;
use serde_json::json;

use super::command::{CLAIM, Fixture, request};

/// Starts the three kinds of escapee, each writing its pid to a file, then `then`.
fn escaping_agent(then: &str) -> String {
    format!(
        "sh -c 'nohup sleep 300 >/dev/null 2>&1 </dev/null & echo $! > bg.pid; \
         setsid sh -c \"echo \\$\\$ > sid.pid; exec sleep 300\" >/dev/null 2>&1 </dev/null & \
         (sh -c \"echo \\$\\$ > dbl.pid; exec sleep 300\" >/dev/null 2>&1 </dev/null &); \
         while [ ! -s sid.pid ] || [ ! -s dbl.pid ]; do sleep 0.05; done; {then}'"
    )
}

fn pids(ws: &Path) -> Vec<(String, i32)> {
    ["bg.pid", "sid.pid", "dbl.pid"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(ws.join(f))
                .unwrap_or_else(|e| panic!("{f} was not written: {e}"));
            (f.to_string(), text.trim().parse().unwrap())
        })
        .collect()
}

/// Alive: exists and is not a zombie (a killed orphan may wait for init to reap it).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').unwrap().1.split_whitespace().next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

fn assert_all_ended(ws: &Path, when: &str) {
    let pids = pids(ws);
    // The kill happens before the call returns; allow the kernel a moment to tear down.
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|(_, p)| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<_> = pids.iter().filter(|(_, p)| alive(*p)).collect();
    for (_, p) in &survivors {
        // Do not leave them behind for the rest of the suite.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(survivors.is_empty(), "{when}: still running: {survivors:?}");
}

#[test]
fn what_an_agent_started_ends_with_its_turn_when_it_succeeds() {
    let f = Fixture::new();
    std::fs::write(f.ws().join("claim.src"), CLAIM).unwrap();
    let cmd = escaping_agent("cat claim.src");
    f.call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    assert_all_ended(f.ws(), "success");
}

#[test]
fn what_an_agent_started_ends_with_its_turn_when_it_fails() {
    let f = Fixture::new();
    let cmd = escaping_agent("exit 3");
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AgentExited, "{err}");
    assert_all_ended(f.ws(), "failure");
}

#[test]
fn what_an_agent_started_ends_with_its_turn_when_it_times_out() {
    let f = Fixture::new();
    let cmd = escaping_agent("sleep 100");
    let err = f
        .call(
            &*f.gateway(&cmd, json!({"timeout_s": 1.5})),
            CallKind::Execute,
        )
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Timeout, "{err}");
    assert_all_ended(f.ws(), "timeout");
}

#[test]
fn a_cancelled_agent_is_stopped_with_everything_it_started() {
    let f = Fixture::new();
    let cmd = escaping_agent("sleep 100");
    let g = f.gateway(&cmd, json!({}));
    let cancel = Cancel::new();
    let started = Instant::now();
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            // Once the escapees exist, cancel.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !(f.ws().join("dbl.pid").exists() && f.ws().join("sid.pid").exists())
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(100));
            cancel.cancel();
        });
        let mut req = request(CallKind::Execute, Some(f.ws()));
        req.cancel = Some(&cancel);
        g.complete(&req).unwrap_err()
    });
    assert_eq!(err, baton_gateway::Error::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_all_ended(f.ws(), "cancel");
}

#[test]
fn an_agent_whose_descendant_holds_its_unread_stdin_does_not_hang_the_turn() {
    // The agent exits at once without reading a briefing far bigger than the pipe; a
    // daemon it started keeps the pipe's read end (and its output pipes) open, unread.
    let f = Fixture::new();
    let cmd = "sh -c '(setsid sh -c \"echo \\$\\$ > holder.pid; exec sleep 300\" &); \
               while [ ! -s holder.pid ]; do sleep 0.05; done; exit 0'";
    let g = f.gateway(cmd, json!({}));
    let user = "briefing ".repeat(40_000);
    let mut req = request(CallKind::Execute, Some(f.ws()));
    req.user = &user;
    let started = Instant::now();
    let err = g.complete(&req).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the turn hung for {:?}",
        started.elapsed()
    );
    assert!(
        err.to_string().contains("without reading its briefing"),
        "{err}"
    );
    let pid: i32 = std::fs::read_to_string(f.ws().join("holder.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the daemon holding the briefing outlived the turn");
    }
}
