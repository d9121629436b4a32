use baton_workspace::{ChangeStatus, ChangedFile, CommitOutcome, DiffStat, Error};

use super::{Fixture, git, sha256_hex, turn, write};

fn committed(outcome: CommitOutcome) -> (String, Vec<ChangedFile>) {
    match outcome {
        CommitOutcome::Committed { sha, files } => (sha, files),
        CommitOutcome::NoChanges { head } => panic!("nothing committed (head {head})"),
    }
}

#[test]
fn a_turn_commits_new_modified_and_deleted_files_but_not_ignored_ones() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "src/lib.rs", "v3\n");
    std::fs::remove_file(ws.path.join("README.md")).unwrap();
    write(&ws.path, "docs/guide.md", "# guide\n");
    write(&ws.path, "debug.log", "noise\n");
    write(&ws.path, "build/out.bin", "artifact\n");

    let mut info = turn(
        "j1",
        3,
        "turn 3 (worker-2): T2 Write tests — 2 files changed",
    );
    info.body = Some("Touched the guide.\n".to_owned());
    let (sha, mut files) = committed(ws.commit_turn(&info).unwrap());
    files.sort_by(|a, b| a.path.cmp(&b.path));

    assert_eq!(ws.head().unwrap(), sha);
    assert_eq!(
        files,
        [
            ChangedFile {
                path: "README.md".to_owned(),
                status: ChangeStatus::Deleted,
                renamed_from: None,
                sha256: None,
            },
            ChangedFile {
                path: "docs/guide.md".to_owned(),
                status: ChangeStatus::Added,
                renamed_from: None,
                sha256: Some(sha256_hex(b"# guide\n")),
            },
            ChangedFile {
                path: "src/lib.rs".to_owned(),
                status: ChangeStatus::Modified,
                renamed_from: None,
                sha256: Some(sha256_hex(b"v3\n")),
            },
        ]
    );
    assert_eq!(ws.file_at(&sha, "debug.log").unwrap(), None);
    assert_eq!(ws.file_at(&sha, "build/out.bin").unwrap(), None);
    assert_eq!(ws.file_at(&sha, "README.md").unwrap(), None);
    assert_eq!(ws.file_at(&sha, "src/lib.rs").unwrap().unwrap(), b"v3\n");
    // The ignored files are still on disk, just not committed, and not "dirty".
    assert!(ws.path.join("debug.log").exists());
    assert!(ws.dirty().unwrap().is_empty());

    let trailers = git(&ws.path, &["log", "-1", "--format=%(trailers)"]);
    assert_eq!(
        trailers,
        "Baton-Run: run-7\nBaton-Job: j1\nBaton-Turn: 3\nBaton-Worker: worker-2\n\
         Baton-Model: gpt-5-mini\nBaton-Family: openai"
    );
    assert_eq!(
        git(&ws.path, &["log", "-1", "--format=%s"]),
        "turn 3 (worker-2): T2 Write tests — 2 files changed"
    );
    assert_eq!(git(&ws.path, &["log", "-1", "--format=%P"]), f.second);
    // The main checkout's branch did not move.
    assert_eq!(git(&f.main, &["rev-parse", "main"]), f.second);
}

#[test]
fn an_empty_turn_makes_no_commit() {
    let f = Fixture::new();
    let ws = f.create("j1");
    assert_eq!(
        ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap(),
        CommitOutcome::NoChanges {
            head: f.second.clone()
        }
    );
    // Only ignored output is still an empty turn.
    write(&ws.path, "run.log", "x\n");
    assert_eq!(
        ws.commit_turn(&turn("j1", 2, "turn 2")).unwrap(),
        CommitOutcome::NoChanges {
            head: f.second.clone()
        }
    );
    assert_eq!(ws.head().unwrap(), f.second);
}

#[test]
fn a_moved_file_is_reported_as_renamed_from_its_old_path() {
    let f = Fixture::new();
    let ws = f.create("j1");
    std::fs::rename(ws.path.join("README.md"), ws.path.join("README.txt")).unwrap();
    let (_, files) = committed(ws.commit_turn(&turn("j1", 1, "rename")).unwrap());
    assert_eq!(
        files,
        [ChangedFile {
            path: "README.txt".to_owned(),
            status: ChangeStatus::Renamed,
            renamed_from: Some("README.md".to_owned()),
            sha256: Some(sha256_hex(b"hello\n")),
        }]
    );
}

#[test]
fn the_body_cannot_smuggle_trailers_and_a_divider_does_not_hide_them() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    let mut info = turn("j1", 1, "turn 1");
    info.body = Some("Baton-Worker: impostor\n---\n# not a comment\n".to_owned());
    ws.commit_turn(&info).unwrap();
    assert_eq!(
        git(
            &ws.path,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Baton-Worker,valueonly)"
            ]
        ),
        "worker-2"
    );
    assert!(git(&ws.path, &["log", "-1", "--format=%b"]).contains("# not a comment"));
}

#[test]
fn trailer_values_that_would_forge_a_trailer_are_rejected_before_anything_is_staged() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    let mut info = turn("j1", 1, "turn 1");
    info.model = "m\nBaton-Worker: impostor".to_owned();
    let err = ws.commit_turn(&info).unwrap_err();
    assert!(
        matches!(err, Error::InvalidTurnInfo { field: "model", .. }),
        "{err}"
    );
    let err = ws.commit_turn(&turn("other-job", 1, "turn 1")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidTurnInfo {
                field: "job_id",
                ..
            }
        ),
        "{err}"
    );
    let err = ws.commit_turn(&turn("j1", 1, " \n ")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidTurnInfo {
                field: "subject",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(git(&ws.path, &["diff", "--cached", "--name-only"]), "");
}

#[test]
fn a_multi_line_subject_is_folded_to_one_line() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "a.txt", "a\n");
    ws.commit_turn(&turn("j1", 1, "turn 1:\n  wrote   a"))
        .unwrap();
    assert_eq!(
        git(&ws.path, &["log", "-1", "--format=%s"]),
        "turn 1: wrote a"
    );
}

#[test]
fn file_at_diff_stat_and_patch_describe_the_turns() {
    let f = Fixture::new();
    let ws = f.create("j1");
    write(&ws.path, "src/lib.rs", "v3\nmore\n");
    std::fs::write(ws.path.join("logo.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
    let (sha, _) = committed(ws.commit_turn(&turn("j1", 1, "turn 1")).unwrap());

    assert_eq!(
        ws.file_at(&sha, "logo.bin").unwrap().unwrap(),
        [0u8, 159, 146, 150, 0, 1]
    );
    assert_eq!(
        ws.file_at(&sha, "src").unwrap(),
        None,
        "a directory is not a file"
    );
    assert_eq!(ws.file_at(&f.first, "logo.bin").unwrap(), None);
    assert!(matches!(
        ws.file_at("nope", "a").unwrap_err(),
        Error::RevisionNotFound { .. }
    ));
    assert_eq!(
        ws.diff_stat(&f.second, &sha).unwrap(),
        DiffStat {
            files_changed: 2,
            insertions: 2,
            deletions: 1,
            binary_files: 1,
        }
    );

    let patch = ws.patch(&f.second, &sha).unwrap();
    assert!(patch.starts_with(b"diff --git a/logo.bin b/logo.bin"));
    assert!(String::from_utf8_lossy(&patch).contains("GIT binary patch"));
    // The main checkout is at the base: the patch applies there as is.
    let patch_file = f.root.join("turn.patch");
    std::fs::write(&patch_file, &patch).unwrap();
    git(&f.main, &["apply", "--check", patch_file.to_str().unwrap()]);
}

#[test]
fn dirty_lists_modified_and_untracked_files_but_not_ignored_ones() {
    let f = Fixture::new();
    let ws = f.create("j1");
    assert!(ws.dirty().unwrap().is_empty());
    write(&ws.path, "src/lib.rs", "changed\n");
    write(&ws.path, "new/deep/file.txt", "n\n");
    write(&ws.path, "x.log", "ignored\n");
    let mut dirty = ws.dirty().unwrap();
    dirty.sort();
    assert_eq!(dirty, ["new/deep/file.txt", "src/lib.rs"]);
}
