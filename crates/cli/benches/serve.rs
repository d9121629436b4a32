//! `baton serve` measured from outside, as a browser or an API client meets it: the
//! binary of this build (optimised) started as a child process on an ephemeral port,
//! with the defaults a user gets (SQLite file, BPE estimator, budget 2,000, the five
//! offline mock workers), over real loopback HTTP with a kept-alive connection.
//!
//! - `api/run_state_100_turns`: `GET /api/runs/{id}` (report and state) of a 100-turn
//!   run, warm. Criterion gives the median; p50/p99 of 2,000 more requests are printed.
//! - `api/runs_list`: `GET /api/runs` with that run and the demo's.
//! - `api/compile_budget_slider`: `GET /api/runs/{id}/compile?budget=B` of that run,
//!   the budget slider's request, B cycling 500..3,000.
//! - commit to client: a client on `/api/events` while turns are stepped over the API;
//!   for each `turn_committed` event, the time from the event's `at` (the engine's clock
//!   just before the commit) to its arrival at the client. p50/p99/max printed.
//! - the page's weight: the HTML, script and style sheet as served, in bytes, printed.
//!
//! `cargo bench -p baton --bench serve`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::Criterion;
use serde_json::Value;

struct Server {
    child: Child,
    addr: String,
    csrf: String,
    agent: ureq::Agent,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .current_dir(dir)
            .env_remove("BATON_DB")
            .env_remove("BATON_CONFIG")
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .split("http://")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut s = Server {
            child,
            addr,
            csrf: String::new(),
            agent,
        };
        s.csrf = s.get("/api/session")["csrf"].as_str().unwrap().to_string();
        s
    }

    fn get_text(&self, path: &str) -> String {
        self.agent
            .get(format!("http://{}{path}", self.addr))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    }

    fn get(&self, path: &str) -> Value {
        serde_json::from_str(&self.get_text(path)).unwrap()
    }

    fn post(&self, path: &str, body: &str) -> Value {
        let text = self
            .agent
            .post(format!("http://{}{path}", self.addr))
            .header("x-baton-csrf", &self.csrf)
            .header("content-type", "application/json")
            .send(body)
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(name: &str, mut samples: Vec<f64>, unit: &str) {
    samples.sort_by(|a, b| a.total_cmp(b));
    eprintln!(
        "{name}: n={} p50={:.3} {unit} p99={:.3} {unit} max={:.3} {unit}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
}

/// A run of 100 committed turns (100 steps, the default mock workers).
fn hundred_turn_run(server: &Server) -> String {
    let tasks: Vec<String> = (1..=100)
        .map(|i| format!("Step {i}: carry the work on"))
        .collect();
    let body = serde_json::json!({"objective": "A long refactor, 100 steps", "tasks": tasks});
    let run = server.post("/api/runs", &body.to_string())["run"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..100 {
        server.post(&format!("/api/runs/{run}/step"), "");
    }
    let turns = server.get(&format!("/api/runs/{run}"))["report"]["turns"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(turns, 100);
    run
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Steps `turns` turns while a client follows the stream: each `turn_committed`'s
/// arrival time minus its `at`, in milliseconds.
fn commit_to_client(server: &Server, turns: usize) -> Vec<f64> {
    let tasks: Vec<String> = (1..=turns).map(|i| format!("Step {i}")).collect();
    let body = serde_json::json!({"objective": "Latency", "tasks": tasks});
    let run = server.post("/api/runs", &body.to_string())["run"]
        .as_str()
        .unwrap()
        .to_string();
    let stream = TcpStream::connect(&server.addr).unwrap();
    let mut w = stream.try_clone().unwrap();
    write!(
        w,
        "GET /api/events?run={run} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        server.addr
    )
    .unwrap();
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut lags = Vec::new();
        let mut line = String::new();
        while lags.len() < turns {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let arrived = now_ms();
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                let e: Value = serde_json::from_str(data).unwrap();
                if e["type"] == "turn_committed" {
                    lags.push(arrived - e["at"].as_f64().unwrap());
                }
            }
        }
        lags
    });
    // Connected and subscribed before the first turn.
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..turns {
        server.post(&format!("/api/runs/{run}/step"), "");
        // Turns at a human pace apart, not back to back: what a watcher sees.
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().unwrap()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_baton"))
        .current_dir(dir.path())
        .args(["demo"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let server = Server::start(dir.path());
    let started = Instant::now();
    let run = hundred_turn_run(&server);
    eprintln!(
        "setup: a 100-turn run over the API in {:?}",
        started.elapsed()
    );

    let weight: usize = ["/", "/assets/app.js", "/assets/app.css"]
        .iter()
        .map(|p| server.get_text(p).len())
        .sum();
    eprintln!("page weight: {weight} bytes (HTML, script and style sheet, uncompressed)");

    let state_path = format!("/api/runs/{run}");
    let samples: Vec<f64> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(server.get_text(&state_path));
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    summary("GET /api/runs/{id} (100 turns)", samples, "ms");
    let bytes = server.get_text(&state_path).len();
    eprintln!("GET /api/runs/{{id}} (100 turns): {bytes} bytes");

    let lags = commit_to_client(&server, 200);
    summary("commit to client (turn_committed)", lags, "ms");

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("api");
    group.bench_function("run_state_100_turns", |b| {
        b.iter(|| server.get_text(&state_path))
    });
    group.bench_function("runs_list", |b| b.iter(|| server.get_text("/api/runs")));
    let mut budget = 500;
    group.bench_function("compile_budget_slider", |b| {
        b.iter(|| {
            budget = if budget >= 3000 { 500 } else { budget + 100 };
            server.get_text(&format!("/api/runs/{run}/compile?budget={budget}"))
        })
    });
    group.finish();
    c.final_summary();
}
