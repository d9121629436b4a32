//! One commit per turn, and reading committed content back for the verifier and outbox.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::git::{Git, nul_records, os, utf8_path};
use crate::workspace::Workspace;

/// What the engine knows about a turn, stamped into its commit. Provenance comes from
/// the engine, never from model output (DESIGN invariant 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCommitInfo {
    pub run_id: String,
    pub job_id: String,
    pub turn: u32,
    pub worker: String,
    pub model: String,
    pub family: String,
    /// One line describing the turn, written by the caller (e.g. `turn 3 (worker-2): T2
    /// Write tests — 2 files changed`); runs of whitespace, newlines included, are
    /// folded to single spaces.
    pub subject: String,
    /// Optional free text between the subject and the trailers.
    pub body: Option<String>,
}

/// The result of [`Workspace::commit_turn`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CommitOutcome {
    Committed {
        sha: String,
        files: Vec<ChangedFile>,
    },
    /// The turn changed nothing; no commit was made.
    NoChanges { head: String },
}

/// One path changed by a turn's commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Repository-relative, `/`-separated.
    pub path: String,
    pub status: ChangeStatus,
    /// The previous path when `status` is `Renamed`.
    pub renamed_from: Option<String>,
    /// Lowercase hex sha256 of the committed content; `None` for deletions and
    /// submodules.
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    Added,
    /// Content, mode or type (file/symlink) changed.
    Modified,
    Deleted,
    Renamed,
}

/// Size of the change between two commits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStat {
    pub files_changed: usize,
    /// Added lines in text files.
    pub insertions: u64,
    /// Removed lines in text files.
    pub deletions: u64,
    /// Changed files git treats as binary (no line counts).
    pub binary_files: usize,
}

/// A committed change, from `git diff-tree --raw -z`.
struct Staged {
    status: ChangeStatus,
    path: String,
    renamed_from: Option<String>,
    new_mode: String,
    new_blob: String,
}

impl Workspace {
    /// Stages everything in the worktree that `.gitignore` allows (`git add -A`) and
    /// commits it on the job's branch with the turn's trailers. A turn whose tree equals
    /// HEAD's makes no commit and returns [`CommitOutcome::NoChanges`].
    ///
    /// The commit is built with plumbing (`write-tree`, `commit-tree`) and the branch is
    /// moved with a compare-and-swap (`update-ref <new> <old>`), so a concurrent writer
    /// is detected rather than overwritten, and no user hook, editor, pager or signing
    /// prompt can stall a turn.
    pub fn commit_turn(&self, turn: &TurnCommitInfo) -> Result<CommitOutcome> {
        let message = self.message(turn)?;
        let parent = self.checked_head()?;
        let git = self.git();
        git.run(&[os("add"), os("-A")])?;
        let tree = git.line(&[os("write-tree")])?;
        if tree == parent.tree {
            return Ok(CommitOutcome::NoChanges {
                head: parent.commit,
            });
        }
        // The change list and the commit object are independent, so they are made side
        // by side (each is a git process, and a turn's latency is mostly process
        // start-up). The branch only moves once the list has been read and checked, so
        // a path baton cannot record stops the turn instead of leaving a commit nobody
        // was told about; the orphaned commit object is garbage for `git gc`.
        let (staged, sha) = std::thread::scope(|s| {
            let listing = s.spawn(|| changes_between(&git, &parent.tree, &tree));
            let sha = self.commit_tree(&git, &parent.commit, &tree, &message);
            (join(listing), sha)
        });
        let (staged, sha) = (staged?, sha?);
        let (moved, hashes) = std::thread::scope(|s| {
            let hashing = s.spawn(|| blob_sha256(&git, &staged));
            let moved = self.move_branch(&git, turn, &parent.commit, &sha);
            (moved, join(hashing))
        });
        moved?;
        let hashes = hashes?;
        let files = staged
            .into_iter()
            .map(|s| ChangedFile {
                sha256: hashes.get(s.new_blob.as_str()).cloned(),
                path: s.path,
                status: s.status,
                renamed_from: s.renamed_from,
            })
            .collect();
        Ok(CommitOutcome::Committed { sha, files })
    }

    fn commit_tree(&self, git: &Git, parent: &str, tree: &str, message: &str) -> Result<String> {
        self.commit_tree_of(git, &[parent], tree, message)
    }

    /// A commit of `tree` with `parents` (two for a merge), as baton's identity.
    pub(crate) fn commit_tree_of(
        &self,
        git: &Git,
        parents: &[&str],
        tree: &str,
        message: &str,
    ) -> Result<String> {
        let identity = match self.identity.0.get() {
            Some(identity) => identity,
            None => {
                let found = identity_overrides(git)?;
                self.identity.0.get_or_init(|| found)
            }
        };
        let mut args: Vec<&std::ffi::OsStr> = Vec::new();
        for setting in identity {
            args.extend([os("-c"), os(setting)]);
        }
        // Signing could prompt for a passphrase mid-run; these are checkpoints on a
        // baton branch, and the human signs what they merge.
        args.extend([os("commit-tree"), os("--no-gpg-sign")]);
        for parent in parents {
            args.extend([os("-p"), os(parent)]);
        }
        args.extend([os("-F"), os("-"), os(tree)]);
        let out = git.run_with_input(&args, message.as_bytes())?;
        let sha = String::from_utf8_lossy(&out).trim().to_owned();
        if sha.len() < 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(git.unexpected(&args, format!("not a commit id: {sha:?}")));
        }
        Ok(sha)
    }

    /// Points the job's branch at `sha` if it still points at `parent`.
    fn move_branch(&self, git: &Git, turn: &TurnCommitInfo, parent: &str, sha: &str) -> Result<()> {
        let full_ref = format!("refs/heads/{}", self.branch);
        let reflog = format!("baton: job {} turn {}", turn.job_id, turn.turn);
        let update = [
            os("update-ref"),
            os("-m"),
            os(&reflog),
            os(&full_ref),
            os(sha),
            os(parent),
        ];
        let out = git.output(&update)?;
        if out.status.success() {
            return Ok(());
        }
        if self.resolve(&full_ref)? != parent {
            return Err(Error::ConcurrentCommit {
                branch: self.branch.clone(),
                expected: parent.to_owned(),
            });
        }
        Err(git.failure(&update, &out))
    }

    fn message(&self, turn: &TurnCommitInfo) -> Result<String> {
        if turn.job_id != self.job_id {
            return Err(Error::InvalidTurnInfo {
                field: "job_id",
                reason: "it is not this workspace's job",
            });
        }
        let subject = turn
            .subject
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if subject.is_empty() {
            return Err(Error::InvalidTurnInfo {
                field: "subject",
                reason: "it is empty; describe the turn in one line",
            });
        }
        let mut message = subject;
        message.push_str("\n\n");
        if let Some(body) = turn.body.as_deref() {
            let body = body.trim_matches(['\n', '\r']).trim_end();
            if !body.is_empty() {
                message.push_str(body);
                message.push_str("\n\n");
            }
        }
        let turn_no = turn.turn.to_string();
        for (key, field, value) in [
            ("Baton-Run", "run_id", turn.run_id.as_str()),
            ("Baton-Job", "job_id", turn.job_id.as_str()),
            ("Baton-Turn", "turn", turn_no.as_str()),
            ("Baton-Worker", "worker", turn.worker.as_str()),
            ("Baton-Model", "model", turn.model.as_str()),
            ("Baton-Family", "family", turn.family.as_str()),
        ] {
            check_trailer_value(field, value)?;
            message.push_str(key);
            message.push_str(": ");
            message.push_str(value);
            message.push('\n');
        }
        Ok(message)
    }

    /// The content of `path` (repository-relative, `/`-separated) in `commit`; `None` if
    /// the commit has no file there (absent, or a directory).
    pub fn file_at(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let git = self.git();
        let commit = self.resolve(commit)?;
        let args = [
            os("ls-tree"),
            os("-z"),
            os("--full-tree"),
            os(&commit),
            os("--"),
            os(path),
        ];
        let out = git.run(&args)?;
        for record in nul_records(&out) {
            // `<mode> SP <type> SP <object> TAB <path>`
            let Some(tab) = record.iter().position(|b| *b == b'\t') else {
                return Err(git.unexpected(&args, "ls-tree record without a tab"));
            };
            if &record[tab + 1..] != path.as_bytes() {
                continue;
            }
            let meta = String::from_utf8_lossy(&record[..tab]);
            let fields: Vec<&str> = meta.split(' ').collect();
            let [_, kind, object] = fields.as_slice() else {
                return Err(git.unexpected(&args, format!("ls-tree record {meta:?}")));
            };
            if *kind != "blob" {
                return Ok(None);
            }
            return git.run(&[os("cat-file"), os("blob"), os(object)]).map(Some);
        }
        Ok(None)
    }

    /// Files changed, lines inserted and deleted from `from` to `to` (renames detected).
    pub fn diff_stat(&self, from: &str, to: &str) -> Result<DiffStat> {
        let git = self.git();
        let from = self.resolve(from)?;
        let to = self.resolve(to)?;
        let args = [
            os("diff"),
            os("--numstat"),
            os("-z"),
            os("-M"),
            os("--no-ext-diff"),
            os("--no-textconv"),
            os(&from),
            os(&to),
        ];
        let out = git.run(&args)?;
        let mut stat = DiffStat::default();
        let mut records = nul_records(&out);
        while let Some(record) = records.next() {
            // `<added> TAB <deleted> TAB <path>`, or for a rename an empty path followed
            // by two records (old, new).
            let text = String::from_utf8_lossy(record);
            let mut parts = text.splitn(3, '\t');
            let (Some(added), Some(deleted), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(git.unexpected(&args, format!("numstat record {text:?}")));
            };
            if path.is_empty() {
                records.next();
                records.next();
            }
            stat.files_changed += 1;
            if added == "-" || deleted == "-" {
                stat.binary_files += 1;
                continue;
            }
            let parse = |n: &str| {
                n.parse::<u64>()
                    .map_err(|_| git.unexpected(&args, format!("line count {n:?}")))
            };
            stat.insertions += parse(added)?;
            stat.deletions += parse(deleted)?;
        }
        Ok(stat)
    }

    /// `git diff --binary from to` as bytes (file contents need not be UTF-8), in the
    /// standard `a/` `b/` form that `git apply` takes, whatever the user's diff config.
    pub fn patch(&self, from: &str, to: &str) -> Result<Vec<u8>> {
        let from = self.resolve(from)?;
        let to = self.resolve(to)?;
        self.git().run(&[
            os("diff"),
            os("--binary"),
            os("--full-index"),
            os("-M"),
            os("--no-color"),
            os("--no-ext-diff"),
            os("--no-textconv"),
            os("--no-relative"),
            os("--src-prefix=a/"),
            os("--dst-prefix=b/"),
            os(&from),
            os(&to),
        ])
    }
}

/// A scoped thread's result; a panic in it is re-raised here, as if it had run inline.
fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn check_trailer_value(field: &'static str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::InvalidTurnInfo {
            field,
            reason: "it is empty",
        });
    }
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidTurnInfo {
            field,
            reason: "it contains a newline or control character, which would forge or break a trailer",
        });
    }
    if value != value.trim() {
        return Err(Error::InvalidTurnInfo {
            field,
            reason: "it has leading or trailing whitespace, which git strips from trailers",
        });
    }
    Ok(())
}

/// `-c user.name=...`/`user.email=...` settings for whatever identity the repository
/// (or the user's global config) lacks, so baton never needs global git config.
pub(crate) fn identity_overrides(git: &Git) -> Result<Vec<&'static str>> {
    let args = [
        os("config"),
        os("-z"),
        os("--get-regexp"),
        os(r"^user\.(name|email)$"),
    ];
    let out = git.output(&args)?;
    let (mut name, mut email) = (false, false);
    match out.status.code() {
        Some(0) => {
            // `-z` records are `key LF value NUL`.
            for record in nul_records(&out.stdout) {
                let mut kv = record.splitn(2, |b| *b == b'\n');
                let key = kv.next().unwrap_or_default();
                let has_value = kv.next().is_some_and(|v| !v.trim_ascii().is_empty());
                name |= key == b"user.name" && has_value;
                email |= key == b"user.email" && has_value;
            }
        }
        Some(1) => {}
        _ => return Err(git.failure(&args, &out)),
    }
    let mut settings = Vec::new();
    if !name {
        settings.push("user.name=baton");
    }
    if !email {
        settings.push("user.email=baton@localhost");
    }
    Ok(settings)
}

/// The files changed between two trees, from `git diff-tree --raw -z`.
fn changes_between(git: &Git, old_tree: &str, new_tree: &str) -> Result<Vec<Staged>> {
    let args = [
        os("diff-tree"),
        os("-r"),
        os("--raw"),
        os("-z"),
        os("-M"),
        os("--no-abbrev"),
        os(old_tree),
        os(new_tree),
    ];
    let out = git.run(&args)?;
    let mut staged = Vec::new();
    let mut records = nul_records(&out);
    while let Some(meta) = records.next() {
        // `:<old mode> <new mode> <old blob> <new blob> <status letter[score]>`
        let meta = String::from_utf8_lossy(meta);
        let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [_, new_mode, _, new_blob, letter] = fields.as_slice() else {
            return Err(git.unexpected(&args, format!("raw diff record {meta:?}")));
        };
        let mut path = || {
            records
                .next()
                .ok_or_else(|| git.unexpected(&args, "raw diff record without a path"))
                .and_then(utf8_path)
        };
        let (status, renamed_from, path) = match letter.as_bytes().first() {
            Some(b'A' | b'C') => (ChangeStatus::Added, None, path()?),
            Some(b'M' | b'T') => (ChangeStatus::Modified, None, path()?),
            Some(b'D') => (ChangeStatus::Deleted, None, path()?),
            Some(b'R') => {
                let from = path()?;
                (ChangeStatus::Renamed, Some(from), path()?)
            }
            _ => {
                return Err(git.unexpected(&args, format!("change status {letter:?}")));
            }
        };
        staged.push(Staged {
            status,
            path,
            renamed_from,
            new_mode: (*new_mode).to_owned(),
            new_blob: (*new_blob).to_owned(),
        });
    }
    Ok(staged)
}

/// Regular files (100644, 100755) and symlinks (120000) have blob content; gitlinks
/// (160000) point at a commit in another repository.
fn has_content(mode: &str) -> bool {
    matches!(mode, "100644" | "100755" | "120000")
}

/// sha256 of the committed content of each change that has content (not deletions or
/// submodules), by blob id, streamed through one `git cat-file --batch` so large files
/// are never held in memory.
fn blob_sha256(git: &Git, changes: &[Staged]) -> Result<HashMap<String, String>> {
    let blobs: Vec<&str> = changes
        .iter()
        .filter(|c| c.status != ChangeStatus::Deleted && has_content(&c.new_mode))
        .map(|c| c.new_blob.as_str())
        .collect();
    if blobs.is_empty() {
        return Ok(HashMap::new());
    }
    let args = [os("cat-file"), os("--batch")];
    let mut child = git.spawn(&args)?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(git.unexpected(&args, "git's pipes were not captured"));
    };
    let input: String = blobs.iter().map(|b| format!("{b}\n")).collect();
    let result = std::thread::scope(|s| {
        // Fed from its own thread: git answers as it reads, and a full stdout pipe must
        // not block our writes. A write error means git exited; its status says why.
        s.spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        read_batch(git, &args, stdout, blobs.len())
    });
    let out = child
        .wait_with_output()
        .map_err(|source| Error::GitUnavailable { source })?;
    if !out.status.success() {
        return Err(git.failure(&args, &out));
    }
    result
}

fn read_batch(
    git: &Git,
    args: &[&std::ffi::OsStr],
    stdout: impl Read,
    count: usize,
) -> Result<HashMap<String, String>> {
    let io_err = |e: std::io::Error| git.unexpected(args, format!("reading output: {e}"));
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut hashes = HashMap::with_capacity(count);
    let mut header = Vec::new();
    for _ in 0..count {
        header.clear();
        reader.read_until(b'\n', &mut header).map_err(io_err)?;
        // `<object> SP <type> SP <size> LF <content> LF`, or `<object> SP missing LF`.
        let text = String::from_utf8_lossy(&header);
        let fields: Vec<&str> = text.trim_end().split(' ').collect();
        let [object, _, size] = fields.as_slice() else {
            return Err(git.unexpected(args, format!("batch header {text:?}")));
        };
        let mut remaining: u64 = size
            .parse()
            .map_err(|_| git.unexpected(args, format!("batch header {text:?}")))?;
        let mut hasher = Sha256::new();
        while remaining > 0 {
            let chunk = reader.fill_buf().map_err(io_err)?;
            if chunk.is_empty() {
                return Err(git.unexpected(args, "output ended inside an object"));
            }
            let take = chunk
                .len()
                .min(usize::try_from(remaining).unwrap_or(usize::MAX));
            hasher.update(&chunk[..take]);
            reader.consume(take);
            remaining -= take as u64;
        }
        let mut lf = [0u8; 1];
        reader.read_exact(&mut lf).map_err(io_err)?;
        hashes.insert((*object).to_owned(), hex::encode(hasher.finalize()));
    }
    Ok(hashes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn git_in(dir: &Path) -> Git {
        // An empty global config and no system config: as on a fresh CI machine.
        Git::new(dir)
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
    }

    #[test]
    fn identity_falls_back_to_baton_only_for_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let git = git_in(dir.path());
        git.run(&[os("init"), os("-q")]).unwrap();
        assert_eq!(
            identity_overrides(&git).unwrap(),
            ["user.name=baton", "user.email=baton@localhost"]
        );
        git.run(&[os("config"), os("user.name"), os("Ada")])
            .unwrap();
        assert_eq!(
            identity_overrides(&git).unwrap(),
            ["user.email=baton@localhost"]
        );
    }

    #[test]
    fn a_branch_that_moved_under_the_turn_is_a_concurrent_commit_not_an_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("repo");
        std::fs::create_dir_all(&main).unwrap();
        let git = git_in(&main);
        git.run(&[os("init"), os("-q")]).unwrap();
        std::fs::write(main.join("a"), "a").unwrap();
        git.run(&[os("add"), os("a")]).unwrap();
        git.run(&[
            os("-c"),
            os("user.name=t"),
            os("-c"),
            os("user.email=t@t"),
            os("commit"),
            os("-qm"),
            os("a"),
        ])
        .unwrap();
        let repo = crate::Repo::open(&main).unwrap();
        let ws = repo
            .create_workspace(&crate::WorkspaceSpec {
                job_id: "j".to_owned(),
                base: "HEAD".to_owned(),
                base_branch: None,
                root: dir.path().join("wt"),
            })
            .unwrap();
        let info = TurnCommitInfo {
            run_id: "r".to_owned(),
            job_id: "j".to_owned(),
            turn: 1,
            worker: "w".to_owned(),
            model: "m".to_owned(),
            family: "f".to_owned(),
            subject: "s".to_owned(),
            body: None,
        };
        let head = ws.head().unwrap();
        let stale = "0".repeat(40);
        let err = ws.move_branch(&ws.git(), &info, &stale, &head).unwrap_err();
        assert!(matches!(err, Error::ConcurrentCommit { .. }), "{err}");
        assert_eq!(ws.head().unwrap(), head);
    }
}
