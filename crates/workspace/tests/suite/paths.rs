use baton_workspace::{ChangeStatus, CommitOutcome};

use super::{Fixture, sha256_hex, turn, write};

#[test]
fn repository_root_and_file_names_with_spaces_and_unicode_work() {
    let f = Fixture::named("my repo ü", "work trees ✓");
    let ws = f.create("j1");
    assert!(ws.path.ends_with("work trees ✓/j1"));
    let names = [
        "dir with space/naïve café.txt",
        "日本語.md",
        "quote\"and'tab\t.txt",
    ];
    for name in names {
        write(&ws.path, name, name);
    }
    let mut dirty = ws.dirty().unwrap();
    dirty.sort();
    let mut expected: Vec<_> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    assert_eq!(dirty, expected);

    let CommitOutcome::Committed { sha, files } =
        ws.commit_turn(&turn("j1", 1, "unicode")).unwrap()
    else {
        panic!("no commit");
    };
    let mut committed: Vec<_> = files.iter().map(|c| c.path.clone()).collect();
    committed.sort();
    assert_eq!(committed, expected);
    for file in &files {
        assert_eq!(file.status, ChangeStatus::Added);
        assert_eq!(file.sha256, Some(sha256_hex(file.path.as_bytes())));
        assert_eq!(
            ws.file_at(&sha, &file.path).unwrap().unwrap(),
            file.path.as_bytes()
        );
    }
    let patch = String::from_utf8(ws.patch(&f.second, &sha).unwrap()).unwrap();
    assert!(patch.contains("naïve café.txt") || patch.contains("na\\303\\257ve"));
    let reopened = f
        .repo
        .open_workspace("j1", &ws.branch, &ws.base, &f.root)
        .unwrap();
    assert_eq!(reopened.head().unwrap(), sha);
}
