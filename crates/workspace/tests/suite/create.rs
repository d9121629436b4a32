use std::sync::Arc;

use baton_workspace::{Error, Repo, WorkspaceSpec};

use super::{Fixture, git, turn, write};

#[test]
fn worktree_starts_at_the_recorded_base_and_leaves_the_main_checkout_alone() {
    let f = Fixture::new();
    // Leave something uncommitted in the main checkout: it must survive untouched.
    write(&f.main, "src/lib.rs", "work in progress\n");
    write(&f.main, "notes.txt", "untracked\n");
    let before = f.main_snapshot();

    let ws = f
        .repo
        .create_workspace(&f.spec("j1", &f.first[..10]))
        .unwrap();

    assert_eq!(
        ws.base, f.first,
        "an abbreviated base resolves to the full sha"
    );
    assert_eq!(ws.branch, "baton/job-j1");
    assert_eq!(ws.path, f.root.join("j1"));
    assert_eq!(ws.head().unwrap(), f.first);
    assert_eq!(
        std::fs::read_to_string(ws.path.join("src/lib.rs")).unwrap(),
        "v1\n"
    );
    assert_eq!(f.main_snapshot(), before);
    assert_eq!(f.repo.head_commit().unwrap(), f.second);
    assert_eq!(f.repo.current_branch().unwrap().as_deref(), Some("main"));
}

#[test]
fn creating_again_for_the_same_job_returns_the_same_workspace_with_its_turns() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    let head = ws.head().unwrap();

    let again = f.create("j1");
    assert_eq!(again, ws);
    assert_eq!(again.head().unwrap(), head);
}

#[test]
fn recreating_after_the_worktree_was_removed_checks_out_the_branch_with_its_turns() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    let head = ws.head().unwrap();
    git(&f.main, &["worktree", "remove", ws.path.to_str().unwrap()]);

    let again = f.create("j1");
    assert_eq!(again.head().unwrap(), head);
    assert!(again.path.join("a.txt").exists());
}

#[test]
fn recreating_after_the_directory_was_deleted_outright_prunes_and_recreates() {
    let f = Fixture::new();
    let ws = f.create("j1");
    std::fs::remove_dir_all(&ws.path).unwrap();
    let again = f.create("j1");
    assert_eq!(again.head().unwrap(), f.second);
}

#[test]
fn default_root_inside_the_checkout_does_not_show_in_its_status() {
    let f = Fixture::new();
    let spec = WorkspaceSpec {
        root: f.repo.default_worktree_root(),
        ..f.spec("j1", &f.second)
    };
    let ws = f.repo.create_workspace(&spec).unwrap();
    assert!(ws.path.starts_with(f.main.join(".baton/worktrees")));
    assert_eq!(
        git(&f.main, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    // And git in the worktree sees the worktree, not the enclosing checkout.
    write(&ws.path, "x.txt", "x\n");
    assert_eq!(ws.dirty().unwrap(), ["x.txt"]);
}

#[test]
fn a_directory_in_the_way_is_an_error_not_a_fallback() {
    let f = Fixture::new();
    write(&f.root, "j1/precious.txt", "mine\n");
    let err = f
        .repo
        .create_workspace(&f.spec("j1", &f.second))
        .unwrap_err();
    assert!(matches!(err, Error::PathOccupied { .. }), "{err}");
    assert!(err.to_string().contains("another worktree root"), "{err}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("j1/precious.txt")).unwrap(),
        "mine\n"
    );
}

#[test]
fn a_root_that_would_put_the_job_in_the_main_checkout_is_refused() {
    let f = Fixture::new();
    let spec = WorkspaceSpec {
        root: f.main.parent().unwrap().to_path_buf(),
        ..f.spec("repo", &f.second)
    };
    let err = f.repo.create_workspace(&spec).unwrap_err();
    assert!(matches!(err, Error::PathOccupied { .. }), "{err}");
}

#[test]
fn an_unwritable_root_fails_with_gits_words_and_what_to_do() {
    let f = Fixture::new();
    // A regular file where the root directory should be.
    std::fs::write(&f.root, "not a directory").unwrap();
    let err = f
        .repo
        .create_workspace(&f.spec("j1", &f.second))
        .unwrap_err();
    let Error::CreateWorkspace { stderr, .. } = &err else {
        panic!("expected CreateWorkspace, got {err}");
    };
    assert!(!stderr.is_empty());
    assert!(
        err.to_string().contains("not started in the main checkout"),
        "{err}"
    );
}

#[test]
fn an_existing_branch_from_another_history_is_refused() {
    let f = Fixture::new();
    git(&f.main, &["branch", "baton/job-j1", &f.first]);
    // Base is the second commit, which baton/job-j1 does not contain.
    let err = f
        .repo
        .create_workspace(&f.spec("j1", &f.second))
        .unwrap_err();
    assert!(
        matches!(err, Error::BranchDoesNotContainBase { .. }),
        "{err}"
    );
}

#[test]
fn job_ids_that_cannot_be_paths_or_branches_are_rejected() {
    let f = Fixture::new();
    for bad in [
        "",
        "../escape",
        "a/b",
        "-x",
        ".hidden",
        "a..b",
        "x.lock",
        "sp ace",
    ] {
        let err = f
            .repo
            .create_workspace(&f.spec(bad, &f.second))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidJobId { .. }), "{bad:?}: {err}");
    }
}

#[test]
fn an_unknown_base_names_the_revision() {
    let f = Fixture::new();
    let err = f
        .repo
        .create_workspace(&f.spec("j1", "no-such-branch"))
        .unwrap_err();
    assert!(
        matches!(&err, Error::RevisionNotFound { rev, .. } if rev == "no-such-branch"),
        "{err}"
    );
}

#[test]
fn opening_something_that_is_not_a_repository_or_has_no_commits_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Repo::open(tmp.path()).unwrap_err();
    assert!(matches!(err, Error::NotARepository { .. }), "{err}");
    assert!(err.to_string().contains("git init"), "{err}");

    git(tmp.path(), &["init", "-q"]);
    let err = Repo::open(tmp.path()).unwrap_err();
    assert!(matches!(err, Error::NoCommits { .. }), "{err}");
}

#[test]
fn two_jobs_editing_the_same_file_names_concurrently_do_not_interfere() {
    let f = Arc::new(Fixture::new());
    let before = f.main_snapshot();
    let handles: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|job| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                let ws = f.create(job);
                let mut shas = Vec::new();
                for n in 1..=5 {
                    write(&ws.path, "src/lib.rs", &format!("{job} turn {n}\n"));
                    write(&ws.path, "shared/new.txt", &format!("{job} {n}\n"));
                    let outcome = ws
                        .commit_turn(&turn(job, n, &format!("turn {n} of {job}")))
                        .unwrap();
                    let baton_workspace::CommitOutcome::Committed { sha, .. } = outcome else {
                        panic!("turn {n} of {job} committed nothing");
                    };
                    shas.push(sha);
                }
                (ws, shas)
            })
        })
        .collect();
    for handle in handles {
        let (ws, shas) = handle.join().unwrap();
        let job = ws.job_id.clone();
        assert_eq!(ws.head().unwrap(), *shas.last().unwrap());
        for (i, sha) in shas.iter().enumerate() {
            let n = i + 1;
            assert_eq!(
                ws.file_at(sha, "src/lib.rs").unwrap().unwrap(),
                format!("{job} turn {n}\n").into_bytes()
            );
        }
        let log = git(
            &ws.path,
            &[
                "log",
                "--format=%(trailers:key=Baton-Job,valueonly)",
                &format!("{}..HEAD", f.second),
            ],
        );
        assert!(
            log.lines().filter(|l| !l.is_empty()).all(|l| l == job),
            "{log}"
        );
        assert!(ws.dirty().unwrap().is_empty());
    }
    assert_eq!(f.main_snapshot(), before);
}

#[test]
fn a_worktree_add_that_died_half_way_is_cleared_and_redone() {
    let f = Fixture::new();
    let ws = f.create("j1");
    // What `git worktree add` leaves when killed before its checkout finished.
    std::fs::remove_file(ws.path.join("README.md")).unwrap();
    let admin = git(
        &ws.path,
        &["rev-parse", "--path-format=absolute", "--git-dir"],
    );
    std::fs::write(std::path::Path::new(&admin).join("locked"), "initializing").unwrap();

    let again = f.create("j1");
    assert_eq!(again.head().unwrap(), f.second);
    assert!(again.path.join("README.md").exists());
    assert!(again.dirty().unwrap().is_empty());
}

#[test]
fn a_takeover_gets_a_fresh_worktree_on_the_branch_and_reopening_finds_the_newest() {
    let f = Fixture::new();
    let first = f.create("job1");
    write(&first.path, "a.txt", "turn 1\n");
    first.commit_turn(&turn("job1", 1, "turn 1")).unwrap();
    let committed = first.head().unwrap();
    // The old owner's agent is still writing in its worktree.
    write(&first.path, "late.txt", "from the stopped worker\n");

    let taken = f
        .repo
        .take_over_workspace(&f.spec("job1", &f.second), 2)
        .unwrap();
    assert_eq!(taken.path, f.root.join("job1.2"));
    assert_eq!(taken.head().unwrap(), committed);
    assert!(taken.path.join("a.txt").exists());
    assert!(!taken.path.join("late.txt").exists());
    // Idempotent, and the newest attempt is what a later claim reopens.
    let again = f
        .repo
        .take_over_workspace(&f.spec("job1", &f.second), 2)
        .unwrap();
    assert_eq!(again.path, taken.path);
    let reopened = f
        .repo
        .open_workspace(
            "job1",
            &baton_workspace::branch_for_job("job1"),
            &f.second,
            &f.root,
        )
        .unwrap();
    assert_eq!(reopened.path, taken.path);
    assert_eq!(baton_workspace::split_attempt_dir("job1.2"), ("job1", 2));
    assert_eq!(baton_workspace::split_attempt_dir("job1"), ("job1", 1));

    // gc knows both belong to the job: the clean one goes, the one with the stopped
    // worker's late write is kept as dirty.
    let report = f
        .repo
        .gc(
            &f.root,
            &baton_workspace::Retention {
                keep_newest: 0,
                min_idle: std::time::Duration::ZERO,
            },
            &|job| job == "job1",
        )
        .unwrap();
    let removed: Vec<_> = report.removed.iter().map(|r| r.path.clone()).collect();
    assert_eq!(removed, std::slice::from_ref(&taken.path));
    assert!(report.kept.iter().any(|k| k.path == first.path));
}

/// Another process's `git worktree add` writes a worktree's administrative files one
/// by one, and git fails on an entry read mid-write ("failed to read
/// .git/worktrees/ID/commondir: Success"). Regression (found by four `baton work`
/// processes on one repository): a job taken over at that moment failed for it. The
/// entry is complete a moment later; creating a worktree waits for that.
#[test]
fn a_worktree_another_process_is_still_writing_is_waited_for() {
    let f = Fixture::new();
    let other = f.main.join(".git/worktrees/being-added");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("gitdir"),
        f.root.join("elsewhere/.git").display().to_string(),
    )
    .unwrap();
    std::fs::write(other.join("commondir"), "").unwrap();
    let finishing = {
        let other = other.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(150));
            std::fs::write(other.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            std::fs::write(other.join("commondir"), "../..\n").unwrap();
        })
    };
    let ws = f.create("j1");
    finishing.join().unwrap();
    assert_eq!(ws.head().unwrap(), f.second);
}
