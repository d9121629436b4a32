use std::time::Duration;

use baton_workspace::{KeepReason, Retention};

use super::{Fixture, git, turn, write};

fn now_policy(keep_newest: usize) -> Retention {
    Retention {
        keep_newest,
        min_idle: Duration::ZERO,
    }
}

#[test]
fn gc_removes_finished_clean_worktrees_and_keeps_active_and_dirty_ones() {
    let f = Fixture::new();
    let done_a = f.create("done-a");
    write(&done_a.path, "a.txt", "a\n");
    done_a.commit_turn(&turn("done-a", 1, "turn 1")).unwrap();
    let done_a_head = done_a.head().unwrap();
    let done_b = f.create("done-b");
    // Ignored output does not count as uncommitted work.
    write(&done_b.path, "build/out.bin", "artifact\n");
    let dirty = f.create("done-dirty");
    write(&dirty.path, "src/lib.rs", "unsaved\n");
    write(&dirty.path, "notes/new file.txt", "untracked\n");
    let active = f.create("running");
    // A worktree that is not baton's, in the same root, is never touched.
    let foreign = f.root.join("foreign");
    git(
        &f.main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "mine",
            foreign.to_str().unwrap(),
        ],
    );

    let report = f
        .repo
        .gc(&f.root, &now_policy(0), &|job| job.starts_with("done"))
        .unwrap();

    let mut removed: Vec<_> = report.removed.iter().map(|r| r.job_id.as_str()).collect();
    removed.sort();
    assert_eq!(removed, ["done-a", "done-b"]);
    assert!(!done_a.path.exists() && !done_b.path.exists());
    assert!(dirty.path.exists() && active.path.exists() && foreign.exists());

    let kept_dirty = report
        .kept
        .iter()
        .find(|k| k.job_id == "done-dirty")
        .unwrap();
    let KeepReason::Dirty { paths } = &kept_dirty.reason else {
        panic!("expected Dirty, got {:?}", kept_dirty.reason);
    };
    let mut paths = paths.clone();
    paths.sort();
    assert_eq!(paths, ["notes/new file.txt", "src/lib.rs"]);
    let kept_active = report.kept.iter().find(|k| k.job_id == "running").unwrap();
    assert_eq!(kept_active.reason, KeepReason::Active);
    assert_eq!(report.kept.len(), 2);

    // Branches, and so every turn, survive; the registrations are gone.
    assert_eq!(
        git(&f.main, &["rev-parse", "baton/job-done-a"]),
        done_a_head
    );
    git(&f.main, &["rev-parse", "--verify", "baton/job-done-b"]);
    let list = git(&f.main, &["worktree", "list", "--porcelain"]);
    assert!(
        !list.contains("done-a") && !list.contains("done-b"),
        "{list}"
    );
}

#[test]
fn gc_keeps_the_newest_finished_worktrees() {
    let f = Fixture::new();
    for job in ["old", "middle", "newest"] {
        let ws = f.create(job);
        write(&ws.path, "a.txt", job);
        ws.commit_turn(&turn(job, 1, "turn 1")).unwrap();
        // Index mtimes order the jobs; make sure they differ even on coarse clocks.
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = f.repo.gc(&f.root, &now_policy(1), &|_| true).unwrap();
    let mut removed: Vec<_> = report.removed.iter().map(|r| r.job_id.as_str()).collect();
    removed.sort();
    assert_eq!(removed, ["middle", "old"]);
    assert_eq!(report.kept.len(), 1);
    assert_eq!(report.kept[0].job_id, "newest");
    assert_eq!(report.kept[0].reason, KeepReason::Newest);
}

#[test]
fn gc_keeps_worktrees_idle_for_less_than_the_minimum() {
    let f = Fixture::new();
    let ws = f.create("done");
    let policy = Retention {
        keep_newest: 0,
        min_idle: Duration::from_secs(3600),
    };
    let report = f.repo.gc(&f.root, &policy, &|_| true).unwrap();
    assert!(report.removed.is_empty());
    assert!(matches!(report.kept[0].reason, KeepReason::Recent { .. }));
    assert!(ws.path.exists());
}

#[test]
fn gc_keeps_a_locked_worktree() {
    let f = Fixture::new();
    let ws = f.create("done");
    git(
        &f.main,
        &[
            "worktree",
            "lock",
            "--reason",
            "on a USB disk",
            ws.path.to_str().unwrap(),
        ],
    );
    let report = f.repo.gc(&f.root, &now_policy(0), &|_| true).unwrap();
    assert_eq!(
        report.kept[0].reason,
        KeepReason::Locked {
            reason: "on a USB disk".to_owned()
        }
    );
    assert!(ws.path.exists());
}

#[test]
fn gc_keeps_the_agents_transcripts_of_a_removed_worktree() {
    let f = Fixture::new();
    // The job runner excludes baton's scratch area from every worktree.
    std::fs::write(f.main.join(".git/info/exclude"), ".baton/\n").unwrap();
    let done = f.create("done");
    write(&done.path, "a.txt", "a\n");
    done.commit_turn(&turn("done", 1, "turn 1")).unwrap();
    write(
        &done.path,
        ".baton/output/turn-1-execute/stdout",
        "the agent's words\n",
    );
    write(
        &done.path,
        ".baton/output/turn-1-execute/briefing.md",
        "brief\n",
    );
    let quiet = f.create("quiet");
    quiet.commit_turn(&turn("quiet", 1, "turn 1")).ok();

    let report = f.repo.gc(&f.root, &now_policy(0), &|_| true).unwrap();

    let removed = report.removed.iter().find(|r| r.job_id == "done").unwrap();
    assert!(!done.path.exists());
    let kept = removed.transcripts.as_ref().expect("transcripts kept");
    assert_eq!(*kept, baton_workspace::transcripts_dir(&f.root, "done"));
    assert_eq!(
        std::fs::read_to_string(kept.join("turn-1-execute/stdout")).unwrap(),
        "the agent's words\n"
    );
    assert!(kept.join("turn-1-execute/briefing.md").exists());
    // A worktree with no agent output has nothing to keep.
    let quiet = report.removed.iter().find(|r| r.job_id == "quiet").unwrap();
    assert_eq!(quiet.transcripts, None);
}
