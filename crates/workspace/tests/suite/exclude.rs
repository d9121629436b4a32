use baton_workspace::Exclusion;

use super::{Fixture, git};

fn wanted() -> Vec<Exclusion> {
    [".baton/", ".aider*"]
        .map(|p| Exclusion {
            pattern: p.to_owned(),
            why: format!("for {p}"),
        })
        .to_vec()
}

#[test]
fn the_exclude_file_keeps_the_users_lines_and_is_written_once() {
    // Regression: the file was read with `unwrap_or_default`, so one the user had
    // written in another encoding read as empty and was replaced by baton's lines.
    let fx = Fixture::new();
    let path = fx.main.join(".git/info/exclude");
    let mut user = b"# mine\nsecret-notes.txt\n\xe9t\xe9.tmp".to_vec();
    std::fs::write(&path, &user).unwrap();
    std::fs::write(fx.main.join("secret-notes.txt"), "x").unwrap();
    std::fs::create_dir_all(fx.main.join(".baton")).unwrap();
    std::fs::write(fx.main.join(".baton/db"), "x").unwrap();

    assert!(fx.repo.exclude(&wanted()).unwrap());
    let after = std::fs::read(&path).unwrap();
    user.push(b'\n');
    assert!(
        after.starts_with(&user),
        "{}",
        String::from_utf8_lossy(&after)
    );
    assert!(after.ends_with(b"# for .baton/\n.baton/\n# for .aider*\n.aider*\n"));
    // git reads it as before, plus baton's patterns.
    assert_eq!(git(&fx.main, &["status", "--porcelain"]), "");

    // Nothing new to add: not rewritten, and no scratch file left beside it.
    assert!(!fx.repo.exclude(&wanted()).unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), after);
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["exclude"]);
}

#[test]
fn a_worktree_lists_its_patterns_in_the_checkouts_shared_file() {
    let fx = Fixture::new();
    let ws = fx.create("j1");
    let from_worktree = baton_workspace::Repo::open(&ws.path).unwrap();
    assert!(from_worktree.exclude(&wanted()[..1]).unwrap());
    let shared = std::fs::read_to_string(fx.main.join(".git/info/exclude")).unwrap();
    assert!(shared.lines().any(|l| l == ".baton/"), "{shared}");
}
