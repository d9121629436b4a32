//! `commit_turn` of a typical turn and `load_state` of a 100-turn run, on real files.
//!
//! The turn is the conformance suite's typical one (`tests/suite/fixtures.rs`): three
//! new records and one changed, a ~6 KB package, two calls with ~2 KB outputs, eight
//! events. `commit_turn` runs twice: on the temp directory's disk, where each commit
//! pays a real fsync, and on tmpfs (when `/dev/shm` exists), where fsync is free, which
//! isolates the store's own cost per turn.

// Bench setup is test code: a failure should stop the bench loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/suite/fixtures.rs"]
mod fixtures;

use std::path::Path;

use baton_store::{SqliteStore, Store};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use tempfile::TempDir;

use fixtures::{T0, create, next_turn, run_turns};

/// Runs restart after this many turns, so the header (whose worker roster lists every
/// turn) stays the size it has in a run of realistic length.
const TURNS_PER_RUN: u32 = 100;

fn bench_commit(c: &mut Criterion, name: &str, dir: &TempDir) {
    let store = SqliteStore::open(&dir.path().join("baton.db")).unwrap();
    let mut runs = 0;
    let mut state = create(&store, "run-0", T0);
    c.bench_function(name, |b| {
        b.iter_batched(
            || {
                if state.turns == TURNS_PER_RUN {
                    runs += 1;
                    state = create(&store, &format!("run-{runs}"), T0);
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

fn commit_turn(c: &mut Criterion) {
    let disk = tempfile::tempdir().unwrap();
    bench_commit(c, "commit_turn/disk", &disk);
    if Path::new("/dev/shm").is_dir() {
        let tmpfs = tempfile::tempdir_in("/dev/shm").unwrap();
        bench_commit(c, "commit_turn/tmpfs", &tmpfs);
    }
}

fn reads_at_100_turns(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("baton.db")).unwrap();
    let state = create(&store, "run-1", T0);
    let run = state.run_id.clone();
    let state = run_turns(&store, state, 100);
    assert_eq!(store.load_state(&run).unwrap(), state);

    c.bench_function("load_state/100_turns", |b| {
        b.iter(|| store.load_state(&run).unwrap());
    });
    // The transfer audit's read, once per turn.
    c.bench_function("prior_outputs/100_turns", |b| {
        b.iter(|| store.prior_outputs(&run, 100).unwrap());
    });
}

criterion_group!(benches, commit_turn, reads_at_100_turns);
criterion_main!(benches);
