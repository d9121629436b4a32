use baton_workspace::{Error, WorkspaceSpec};

use super::{Fixture, git, turn, write};

#[test]
fn open_returns_the_workspace_that_create_made() {
    let f = Fixture::new();
    let ws = f.create("j1");
    let opened = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &f.root)
        .unwrap();
    assert_eq!(opened, ws);
}

#[test]
fn open_fails_loudly_when_the_directory_was_deleted() {
    let f = Fixture::new();
    let ws = f.create("j1");
    std::fs::remove_dir_all(&ws.path).unwrap();
    let err = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &f.root)
        .unwrap_err();
    assert!(matches!(err, Error::WorkspaceVanished { .. }), "{err}");
    // A stale handle fails the same way instead of committing somewhere else.
    let err = ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap_err();
    assert!(matches!(err, Error::WorkspaceVanished { .. }), "{err}");
}

#[test]
fn open_fails_loudly_when_the_branch_was_switched() {
    let f = Fixture::new();
    let ws = f.create("j1");
    git(&ws.path, &["switch", "-q", "-c", "someone-else"]);
    let err = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &f.root)
        .unwrap_err();
    assert!(
        matches!(&err, Error::BranchSwitched { actual: Some(a), .. } if a == "someone-else"),
        "{err}"
    );
    write(&ws.path, "a.txt", "a\n");
    let err = ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap_err();
    assert!(matches!(err, Error::BranchSwitched { .. }), "{err}");
    assert_eq!(git(&f.main, &["rev-parse", "someone-else"]), f.second);

    git(&ws.path, &["switch", "-q", "--detach"]);
    let err = ws.head().unwrap_err();
    assert!(
        matches!(err, Error::BranchSwitched { actual: None, .. }),
        "{err}"
    );
}

#[test]
fn a_plain_directory_where_the_worktree_was_is_not_mistaken_for_it() {
    let f = Fixture::new();
    let ws = f.create("j1");
    std::fs::remove_dir_all(&ws.path).unwrap();
    git(&f.main, &["worktree", "prune"]);
    std::fs::create_dir_all(&ws.path).unwrap();
    let err = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &f.root)
        .unwrap_err();
    assert!(matches!(err, Error::NotAWorktree { .. }), "{err}");
}

/// The dangerous case: a job's directory inside the main checkout loses its `.git`
/// file. Plain git there would find the main checkout and commit the user's work.
#[test]
fn a_stale_handle_inside_the_main_checkout_never_commits_to_the_main_checkout() {
    let f = Fixture::new();
    let spec = WorkspaceSpec {
        root: f.repo.default_worktree_root(),
        ..f.spec("j1", &f.second)
    };
    let ws = f.repo.create_workspace(&spec).unwrap();
    std::fs::remove_dir_all(&ws.path).unwrap();
    std::fs::create_dir_all(&ws.path).unwrap();
    write(&ws.path, "agent-output.txt", "x\n");
    write(&f.main, "users-wip.txt", "mine\n");
    let before = f.main_snapshot();

    let err = ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap_err();
    assert!(matches!(err, Error::NotAWorktree { .. }), "{err}");
    assert!(matches!(
        ws.dirty().unwrap_err(),
        Error::NotAWorktree { .. }
    ));
    let err = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &spec.root)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::WorkspaceVanished { .. } | Error::NotAWorktree { .. }
        ),
        "{err}"
    );
    assert_eq!(f.main_snapshot(), before);
}
