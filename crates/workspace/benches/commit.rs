//! Per-turn cost of `Workspace::commit_turn` in a repository of 1,000 files: a turn that
//! changes 3 of them (stage, write the tree, commit, move the branch, hash the committed
//! content), and an empty turn (stage, find nothing). This is most of the engine's own
//! overhead per turn for a command worker, whose budget is 30 ms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use baton_workspace::{CommitOutcome, Repo, TurnCommitInfo, WorkspaceSpec};
use criterion::{Criterion, criterion_group, criterion_main};

const FILES: usize = 1_000;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn info(turn: u32) -> TurnCommitInfo {
    TurnCommitInfo {
        run_id: "run-bench".to_owned(),
        job_id: "bench".to_owned(),
        turn,
        worker: "worker-1".to_owned(),
        model: "command".to_owned(),
        family: "local".to_owned(),
        subject: format!("turn {turn} (worker-1): bench — 3 files changed"),
        body: None,
    }
}

fn commit_turn(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let main = tmp.path().join("repo");
    for i in 0..FILES {
        let path = main.join(format!("src/m{:02}/file_{i:04}.rs", i % 50));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("// file {i}\n{}", "fn f() {}\n".repeat(80))).unwrap();
    }
    git(&main, &["init", "-q", "-b", "main"]);
    git(&main, &["add", "-A"]);
    git(&main, &["commit", "-q", "-m", "1,000 files"]);
    let repo = Repo::open(&main).unwrap();
    let ws = repo
        .create_workspace(&WorkspaceSpec {
            job_id: "bench".to_owned(),
            base: "main".to_owned(),
            base_branch: Some("main".to_owned()),
            root: tmp.path().join("worktrees"),
        })
        .unwrap();

    let mut group = c.benchmark_group("commit_turn");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    let mut turn = 0u32;
    group.bench_function("3_of_1000_files_changed", |b| {
        b.iter(|| {
            turn += 1;
            for k in 0..3 {
                let path = ws.path.join(format!("src/m{k:02}/file_{k:04}.rs"));
                std::fs::write(&path, format!("// turn {turn}, file {k}\n")).unwrap();
            }
            let outcome = ws.commit_turn(&info(turn)).unwrap();
            assert!(
                matches!(outcome, CommitOutcome::Committed { ref files, .. } if files.len() == 3)
            );
        });
    });
    group.bench_function("empty_turn_of_1000_files", |b| {
        b.iter(|| {
            let outcome = ws.commit_turn(&info(turn)).unwrap();
            assert!(matches!(outcome, CommitOutcome::NoChanges { .. }));
        });
    });
    group.finish();
}

criterion_group!(benches, commit_turn);
criterion_main!(benches);
