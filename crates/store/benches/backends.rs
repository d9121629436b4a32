//! SQLite and PostgreSQL side by side, each with the defaults a user gets: SQLite on a
//! real file in the temp directory (every commit pays its fsync), PostgreSQL on the
//! server `BATON_TEST_POSTGRES` names (default `postgres://postgres@127.0.0.1:5432/test`,
//! as the tests), in a schema of its own dropped at the end. Each store is opened as
//! `--db` opens it (`Location::parse(..).open()`).
//!
//! - `commit_turn/*`: `commit_turn` of the conformance suite's typical turn
//!   (`tests/suite/fixtures.rs`); runs restart every 100 turns, as in `commit.rs`.
//! - `claim/*/N_queued`: one `try_claim_job` of the oldest queued job, N (1,000, then
//!   10,000) jobs queued at the start of each sample. Between samples, untimed, the
//!   claimed jobs are finished to the outbox and the queue refilled.
//! - `claim_throughput/*/N`: N claimer threads, each with its own store handle (its own
//!   connection, as N processes would have), drain a shared queue of `QUEUE` jobs, each
//!   claimer claiming a job then finishing it to the outbox, until the queue is empty.
//!   One iteration is one whole queue; criterion reports jobs/s. Filling the queue is
//!   not timed.
//! - `load_state/*`: `load_state` of a 100-turn run, warm (the same store handle).
//! - `resume/*/fresh_process`: this binary started again as a new process that opens
//!   the store and loads that run's state (`load_state`), timed from spawn to exit;
//!   `resume/*/open_and_load` is the part of it inside the new process, from `main` to
//!   the loaded state (connecting, checking the schema, the load). Cold for the
//!   process; the OS's page cache and the server's buffers are warm.
//!
//! `cargo bench -p baton-store --bench backends` runs them all; a criterion filter
//! (`-- claim_throughput`) runs some.

// Bench setup is test code: a failure should stop the bench loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/suite/fixtures.rs"]
mod fixtures;

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use baton_core::ids::{RunId, Timestamp};
use baton_store::{ClaimOutcome, JobStatus, LeaseFence, Location, NewJob, Store};
use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use postgres::{Client, NoTls};
use tempfile::TempDir;

use fixtures::{T0, create, next_turn, run_turns};

/// Runs restart after this many turns (see `commit.rs`).
const TURNS_PER_RUN: u32 = 100;

/// Queued jobs at the start of each `claim` sample.
const QUEUED: [u64; 2] = [1_000, 10_000];

/// Jobs one `claim_throughput` iteration drains.
const QUEUE: u64 = 400;

/// Claimers at once in `claim_throughput`.
const CLAIMERS: [usize; 3] = [1, 4, 16];

/// Set in a child started by `resume/*`: the store to open, then the run to load.
const RESUME_DB: &str = "BATON_BENCH_RESUME_DB";
const RESUME_RUN: &str = "BATON_BENCH_RESUME_RUN";

const LEASE_MS: i64 = 60_000;

/// A database to bench, dropped (file or schema) at the end.
enum Db {
    Sqlite(TempDir),
    Postgres { server: String, schema: String },
}

impl Db {
    fn sqlite() -> Db {
        Db::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres(tag: &str) -> Db {
        let server = std::env::var("BATON_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        if let Err(e) = Client::connect(&server, NoTls) {
            panic!(
                "PostgreSQL is not reachable at {server}: {e}. This bench needs it \
                 (`pg_ctlcluster 15 main start`), or set BATON_TEST_POSTGRES"
            );
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!("bench_{tag}_{}_{nanos}", std::process::id());
        Db::Postgres { server, schema }
    }

    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres { .. } => "postgres",
        }
    }

    /// What `--db` would say.
    fn spec(&self) -> String {
        match self {
            Db::Sqlite(dir) => dir.path().join("baton.db").display().to_string(),
            Db::Postgres { server, schema } => format!("{server}?schema={schema}"),
        }
    }

    /// A new handle, as a new process opens one.
    fn open(&self) -> Arc<dyn Store> {
        Location::parse(&self.spec()).unwrap().open().unwrap()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Postgres { server, schema } = self
            && let Ok(mut client) = Client::connect(server, NoTls)
        {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
}

fn both(tag: &str) -> [Db; 2] {
    [Db::sqlite(), Db::postgres(tag)]
}

fn commit_turn(c: &mut Criterion) {
    for db in both("commit") {
        let store = db.open();
        let mut runs = 0;
        let mut state = create(&*store, "run-0", T0);
        c.bench_function(&format!("commit_turn/{}", db.name()), |b| {
            b.iter_batched(
                || {
                    if state.turns == TURNS_PER_RUN {
                        runs += 1;
                        state = create(&*store, &format!("run-{runs}"), T0);
                    }
                    let (after, commit) = next_turn(&state);
                    state = after;
                    commit
                },
                |commit| store.commit_turn(&commit).unwrap(),
                BatchSize::SmallInput,
            );
        });
    }
}

/// Jobs numbered from one counter per store, so every id is new.
struct Queue {
    store: Arc<dyn Store>,
    next: AtomicU64,
}

impl Queue {
    fn new(store: Arc<dyn Store>) -> Queue {
        Queue {
            store,
            next: AtomicU64::new(0),
        }
    }

    fn enqueue(&self, n: u64) {
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            self.store
                .enqueue_job(&NewJob {
                    id: format!("job-{i:08}"),
                    group: format!("g{}", i / 4),
                    spec: serde_json::json!({ "task": format!("task {i}"), "base": "main" }),
                    created_at: Timestamp(T0 + i as i64),
                })
                .unwrap();
        }
    }
}

fn claim(store: &dyn Store, owner: &str, token: &str) -> Option<LeaseFence> {
    match store
        .try_claim_job(owner, token, Timestamp(T0), LEASE_MS)
        .unwrap()
    {
        ClaimOutcome::Claimed { job, token, .. } => Some(LeaseFence { job: job.id, token }),
        ClaimOutcome::Skipped { .. } => None,
    }
}

fn finish(store: &dyn Store, fence: &LeaseFence) {
    store
        .finish_job(
            fence,
            JobStatus::Outbox,
            Some(&serde_json::json!({ "branch": format!("baton/{}", fence.job) })),
            None,
            Timestamp(T0),
        )
        .unwrap();
}

fn claim_latency(c: &mut Criterion) {
    for db in both("claim") {
        let queue = Queue::new(db.open());
        let store = queue.store.clone();
        let mut n = 0u64;
        let mut queued = 0;
        for depth in QUEUED {
            queue.enqueue(depth - queued);
            queued = depth;
            c.bench_function(&format!("claim/{}/{depth}_queued", db.name()), |b| {
                b.iter_custom(|iters| {
                    queue.enqueue(iters);
                    let mut claimed = Vec::with_capacity(iters as usize);
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        n += 1;
                        claimed.push(claim(&*store, "bench", &format!("t{n}")).unwrap());
                    }
                    let elapsed = t0.elapsed();
                    for fence in &claimed {
                        finish(&*store, fence);
                    }
                    elapsed
                })
            });
        }
    }
}

/// One claimer thread per handle drains the queue; returns how long that took.
fn drain(handles: &[Arc<dyn Store>], round: u64) -> Duration {
    let start = Arc::new(Barrier::new(handles.len() + 1));
    let workers: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let store = store.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut done = 0u64;
                while let Some(fence) =
                    claim(&*store, &format!("c{i}"), &format!("r{round}c{i}n{done}"))
                {
                    finish(&*store, &fence);
                    done += 1;
                }
                done
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let done: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let elapsed = t0.elapsed();
    assert_eq!(done, QUEUE, "every queued job claimed and finished once");
    elapsed
}

fn claim_throughput(c: &mut Criterion) {
    for db in both("thru") {
        let queue = Queue::new(db.open());
        let mut group = c.benchmark_group(format!("claim_throughput/{}", db.name()));
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .throughput(Throughput::Elements(QUEUE));
        let mut round = 0;
        for claimers in CLAIMERS {
            let handles: Vec<Arc<dyn Store>> = (0..claimers).map(|_| db.open()).collect();
            group.bench_function(claimers.to_string(), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        round += 1;
                        queue.enqueue(QUEUE);
                        total += drain(&handles, round);
                    }
                    total
                })
            });
        }
        group.finish();
    }
}

/// The stores with a 100-turn run, and that run.
fn with_100_turns() -> Vec<(Db, RunId)> {
    both("resume")
        .into_iter()
        .map(|db| {
            let store = db.open();
            let state = run_turns(&*store, create(&*store, "run-100", T0), 100);
            assert_eq!(store.load_state(&state.run_id).unwrap(), state);
            (db, state.run_id)
        })
        .collect()
}

fn resume(c: &mut Criterion) {
    for (db, run) in with_100_turns() {
        let store = db.open();
        c.bench_function(&format!("load_state/{}", db.name()), |b| {
            b.iter(|| store.load_state(&run).unwrap());
        });
        drop(store);

        let exe = std::env::current_exe().unwrap();
        let child = || {
            let t0 = Instant::now();
            let out = Command::new(&exe)
                .env(RESUME_DB, db.spec())
                .env(RESUME_RUN, &run.0)
                .output()
                .unwrap();
            let wall = t0.elapsed();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let inside: u64 = String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            (wall, Duration::from_nanos(inside))
        };
        let mut group = c.benchmark_group(format!("resume/{}", db.name()));
        group.sampling_mode(SamplingMode::Flat).sample_size(20);
        group.bench_function("fresh_process", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| child().0).sum())
        });
        group.bench_function("open_and_load", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| child().1).sum())
        });
        group.finish();
    }
}

/// The child of `resume/*`: opens the store, loads the run, prints how long that took
/// in nanoseconds.
fn resume_child(db: &str) {
    let t0 = Instant::now();
    let run = RunId(std::env::var(RESUME_RUN).unwrap());
    let store = Location::parse(db).unwrap().open().unwrap();
    let state = store.load_state(&run).unwrap();
    let elapsed = t0.elapsed();
    assert_eq!(state.turns, 100);
    println!("{}", elapsed.as_nanos());
}

fn main() {
    if let Ok(db) = std::env::var(RESUME_DB) {
        resume_child(&db);
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    commit_turn(&mut c);
    claim_latency(&mut c);
    claim_throughput(&mut c);
    resume(&mut c);
    c.final_summary();
}
