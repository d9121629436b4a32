mod commit;
mod create;
mod drift;
mod exclude;
mod gc;
mod land;
mod open;
mod paths;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use baton_workspace::{Repo, TurnCommitInfo, Workspace, WorkspaceSpec};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// Runs git as a person would (with a throwaway identity), panicking on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=tester@example.com",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

pub fn write(dir: &Path, rel: &str, content: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub struct Fixture {
    _tmp: TempDir,
    pub main: PathBuf,
    pub root: PathBuf,
    pub repo: Repo,
    /// First commit (`README.md`, `src/lib.rs` = "v1", `.gitignore`).
    pub first: String,
    /// Second commit, HEAD of `main` (`src/lib.rs` = "v2").
    pub second: String,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::named("repo", "worktrees")
    }

    /// A repository at `<tmp>/<repo_dir>` and a worktree root at `<tmp>/<root_dir>`.
    pub fn named(repo_dir: &str, root_dir: &str) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join(repo_dir);
        std::fs::create_dir_all(&main).unwrap();
        git(&main, &["init", "-q", "-b", "main"]);
        write(&main, "README.md", "hello\n");
        write(&main, "src/lib.rs", "v1\n");
        write(&main, ".gitignore", "*.log\nbuild/\n");
        git(&main, &["add", "-A"]);
        git(&main, &["commit", "-q", "-m", "first"]);
        let first = git(&main, &["rev-parse", "HEAD"]);
        write(&main, "src/lib.rs", "v2\n");
        git(&main, &["commit", "-q", "-am", "second"]);
        let second = git(&main, &["rev-parse", "HEAD"]);
        let root = tmp.path().join(root_dir);
        let repo = Repo::open(&main).unwrap();
        Fixture {
            _tmp: tmp,
            main,
            root,
            repo,
            first,
            second,
        }
    }

    pub fn spec(&self, job: &str, base: &str) -> WorkspaceSpec {
        WorkspaceSpec {
            job_id: job.to_owned(),
            base: base.to_owned(),
            base_branch: Some("main".to_owned()),
            root: self.root.clone(),
        }
    }

    pub fn create(&self, job: &str) -> Workspace {
        self.repo
            .create_workspace(&self.spec(job, &self.second))
            .unwrap()
    }

    /// HEAD, staged entries, status and every file's bytes of the main checkout.
    pub fn main_snapshot(&self) -> (String, String, String, BTreeMap<PathBuf, Vec<u8>>) {
        let mut files = BTreeMap::new();
        walk(&self.main, &self.main, &mut files);
        (
            git(&self.main, &["rev-parse", "HEAD"]),
            git(&self.main, &["ls-files", "-s"]),
            git(
                &self.main,
                &["status", "--porcelain", "--untracked-files=all"],
            ),
            files,
        )
    }
}

fn walk(top: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == ".git") {
            continue;
        }
        if path.is_dir() {
            walk(top, &path, files);
        } else {
            let rel = path.strip_prefix(top).unwrap().to_path_buf();
            files.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

pub fn turn(job: &str, n: u32, subject: &str) -> TurnCommitInfo {
    TurnCommitInfo {
        run_id: "run-7".to_owned(),
        job_id: job.to_owned(),
        turn: n,
        worker: "worker-2".to_owned(),
        model: "gpt-5-mini".to_owned(),
        family: "openai".to_owned(),
        subject: subject.to_owned(),
        body: None,
    }
}
