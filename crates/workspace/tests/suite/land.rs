//! `Repo::land`: a job's branch onto its base branch, or a refusal that changes nothing.

use baton_workspace::Landing;

use super::{Fixture, git, turn, write};

fn refused(landing: &Landing) -> &str {
    match landing {
        Landing::Refused { why, .. } => why,
        other => panic!("landed: {other:?}"),
    }
}

#[test]
fn a_checkout_with_uncommitted_changes_is_not_moved() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    write(&f.main, "README.md", "edited, not committed\n");
    let before = f.main_snapshot();
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        refused(&landing).contains("is checked out at")
            && refused(&landing).contains("with uncommitted changes"),
        "{landing:?}"
    );
    assert_eq!(f.main_snapshot(), before);

    // Committed, the same landing is a fast-forward of the checkout.
    git(&f.main, &["checkout", "-q", "--", "README.md"]);
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        matches!(landing, Landing::FastForward { .. }),
        "{landing:?}"
    );
    assert_eq!(git(&f.main, &["rev-parse", "HEAD"]), ws.head().unwrap());
    assert!(f.main.join("a.txt").exists());
}

#[test]
fn a_base_branch_checked_out_elsewhere_or_a_branch_with_foreign_commits_is_refused() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    // main is checked out in a second worktree, not in the repository's own.
    git(&f.main, &["switch", "-q", "-c", "other"]);
    let second = f.root.join("second");
    git(
        &f.main,
        &["worktree", "add", "-q", second.to_str().unwrap(), "main"],
    );
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        refused(&landing).contains("main is checked out in the worktree"),
        "{landing:?}"
    );
    git(&f.main, &["worktree", "remove", second.to_str().unwrap()]);

    // Not checked out anywhere: moved by ref, compare-and-swap.
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        matches!(landing, Landing::FastForward { .. }),
        "{landing:?}"
    );
    assert_eq!(git(&f.main, &["rev-parse", "main"]), ws.head().unwrap());

    // A commit on the job's branch that baton did not make is not landed.
    let ws = f.create("j2");
    write(&ws.path, "b.txt", "b\n");
    git(&ws.path, &["add", "b.txt"]);
    git(&ws.path, &["commit", "-q", "-m", "by hand"]);
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        refused(&landing).contains("were not made by baton for this unit"),
        "{landing:?}"
    );
}

#[test]
fn landing_again_finds_it_done_and_a_rewound_base_is_refused() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap();
    // The base moves on another file: a merge commit joins both.
    write(&f.main, "CHANGELOG.md", "theirs\n");
    git(&f.main, &["add", "CHANGELOG.md"]);
    git(&f.main, &["commit", "-q", "-m", "theirs"]);
    let landing = f.repo.land(&ws, "main").unwrap();
    let Landing::Merged { to, .. } = &landing else {
        panic!("{landing:?}")
    };
    assert_eq!(git(&f.main, &["rev-parse", "HEAD"]), *to);
    // Run again (a process killed before it recorded the landing): nothing to do, and
    // the base's own commits are not taken for foreign ones on the unit's branch.
    let again = f.repo.land(&ws, "main").unwrap();
    assert!(matches!(again, Landing::Already { .. }), "{again:?}");

    // A base rewound past where the unit started is refused.
    let ws = f.create("j2");
    write(&ws.path, "b.txt", "b\n");
    ws.commit_turn(&turn("j2", 1, "turn 1")).unwrap();
    let first = git(&f.main, &["rev-list", "--max-parents=0", "HEAD"]);
    git(&f.main, &["reset", "-q", "--hard", &first]);
    let before = f.main_snapshot();
    let landing = f.repo.land(&ws, "main").unwrap();
    assert!(
        refused(&landing).contains("no longer contains the commit the unit started from"),
        "{landing:?}"
    );
    assert_eq!(f.main_snapshot(), before);
}
