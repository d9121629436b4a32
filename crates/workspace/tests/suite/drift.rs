use baton_workspace::{CommitOutcome, Drift};

use super::{Fixture, git, turn, write};

#[test]
fn a_fresh_workspace_has_no_drift() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    let drift = f.repo.drift(&ws, Some("main")).unwrap();
    assert!(drift.is_clean(), "{drift:?}");
}

#[test]
fn drift_reports_the_base_branch_moving() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&f.main, "README.md", "moved on\n");
    git(&f.main, &["commit", "-q", "-am", "third"]);
    let third = git(&f.main, &["rev-parse", "HEAD"]);
    let drift = f.repo.drift(&ws, Some("main")).unwrap();
    assert_eq!(
        drift,
        Drift {
            base_moved: Some((f.second.clone(), third)),
            ..Drift::default()
        }
    );
    assert!(f.repo.drift(&ws, None).unwrap().is_clean());
}

#[test]
fn drift_reports_the_worktree_switched_to_another_branch() {
    let f = Fixture::new();
    let ws = f.create("j1");
    git(&ws.path, &["switch", "-q", "-c", "elsewhere"]);
    let drift = f.repo.drift(&ws, Some("main")).unwrap();
    assert_eq!(drift.branch_changed.as_deref(), Some("elsewhere"));

    git(&ws.path, &["switch", "-q", "--detach", "HEAD"]);
    let drift = f.repo.drift(&ws, Some("main")).unwrap();
    assert_eq!(
        drift.branch_changed,
        Some(format!("detached at {}", f.second))
    );
}

#[test]
fn drift_lists_commits_made_on_the_job_branch_outside_baton() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    let CommitOutcome::Committed { sha: ours, .. } =
        ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap()
    else {
        panic!("no commit");
    };
    write(&ws.path, "b.txt", "b\n");
    git(&ws.path, &["add", "b.txt"]);
    git(&ws.path, &["commit", "-q", "-m", "by hand"]);
    let by_hand = git(&ws.path, &["rev-parse", "HEAD"]);
    // A commit claiming to be another job's is not this job's either.
    write(&ws.path, "c.txt", "c\n");
    git(&ws.path, &["add", "c.txt"]);
    git(
        &ws.path,
        &["commit", "-q", "-m", "copied", "-m", "Baton-Job: j2"],
    );
    let other_job = git(&ws.path, &["rev-parse", "HEAD"]);

    let drift = f.repo.drift(&ws, Some("main")).unwrap();
    assert_eq!(drift.commits_outside_baton, [by_hand, other_job]);
    assert!(!drift.commits_outside_baton.contains(&ours));
    assert_eq!(drift.branch_changed, None);
}
