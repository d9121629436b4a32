//! The crate's one error type. Each variant carries what a caller acts on (the job, the
//! path, the branch, git's own words) and its message says what to do next.

use std::path::PathBuf;

/// Result of every fallible operation in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between baton and git.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `git` could not be started at all.
    #[error("could not run `git` ({source}); install git 2.30 or newer and put it on PATH")]
    GitUnavailable {
        #[source]
        source: std::io::Error,
    },

    /// A git command exited unsuccessfully. `command` is the full command line as run.
    #[error("`{command}` failed (exit {}): {}", display_code(*.code), display_stderr(.stderr))]
    Git {
        command: String,
        code: Option<i32>,
        stderr: String,
    },

    /// The path is not inside a git working tree.
    #[error(
        "{} is not inside a git repository ({}); run `git init` there or point baton at a repository",
        .path.display(), display_stderr(.stderr)
    )]
    NotARepository { path: PathBuf, stderr: String },

    /// The repository exists but has no commit to base a workspace on.
    #[error(
        "the repository at {} has no commits yet; make an initial commit so jobs have a base",
        .path.display()
    )]
    NoCommits { path: PathBuf },

    /// A revision (branch, tag, sha) does not name a commit.
    #[error("`{rev}` does not name a commit in this repository; check the branch or sha ({})", display_stderr(.stderr))]
    RevisionNotFound { rev: String, stderr: String },

    /// A job id cannot be used as a directory and branch name.
    #[error(
        "job id {job_id:?} cannot name a worktree: {reason}; use letters, digits, '.', '_' or '-'"
    )]
    InvalidJobId {
        job_id: String,
        reason: &'static str,
    },

    /// A field of a turn's commit information would corrupt the message or its trailers.
    #[error("turn commit field `{field}` is invalid: {reason}")]
    InvalidTurnInfo {
        field: &'static str,
        reason: &'static str,
    },

    /// `git worktree add` failed. baton never falls back to the main checkout.
    #[error(
        "could not create the worktree for job {job_id} at {} on branch {branch}: {}; \
         check that the directory's parent is writable and has space, or configure another \
         worktree root — the job was not started in the main checkout",
        .path.display(), display_stderr(.stderr)
    )]
    CreateWorkspace {
        job_id: String,
        path: PathBuf,
        branch: String,
        stderr: String,
    },

    /// The workspace directory is taken by something that is not this job's worktree.
    #[error(
        "{} is in the way of job {job_id}'s worktree: {reason}; move it away or configure another worktree root",
        .path.display()
    )]
    PathOccupied {
        job_id: String,
        path: PathBuf,
        reason: String,
    },

    /// The job's branch is already checked out in a different worktree.
    #[error(
        "branch {branch} is already checked out at {}; remove that worktree (`git worktree remove`) before resuming the job",
        .elsewhere.display()
    )]
    BranchCheckedOutElsewhere { branch: String, elsewhere: PathBuf },

    /// The job's branch exists but does not contain the recorded base commit, so it
    /// belongs to some other history.
    #[error(
        "branch {branch} exists but does not contain the job's base {base}; delete or rename the branch, or give the job a new id"
    )]
    BranchDoesNotContainBase { branch: String, base: String },

    /// The workspace directory is gone.
    #[error(
        "the worktree of job {job_id} at {} has vanished; its committed turns are still on its branch — recreate it with create_workspace to resume",
        .path.display()
    )]
    WorkspaceVanished { job_id: String, path: PathBuf },

    /// The directory exists but is not this job's worktree.
    #[error(
        "{} is not this job's worktree ({reason}); refusing to run git there, it could act on another checkout — remove the directory and recreate the workspace",
        .path.display()
    )]
    NotAWorktree { path: PathBuf, reason: String },

    /// The worktree's HEAD is not on the job's branch.
    #[error(
        "the worktree at {} is on {} instead of {expected}; someone switched it outside baton — run `git switch {expected}` there or recreate the workspace",
        .path.display(), .actual.as_deref().unwrap_or("a detached HEAD")
    )]
    BranchSwitched {
        path: PathBuf,
        expected: String,
        actual: Option<String>,
    },

    /// The job's branch moved between reading it and committing the turn.
    #[error(
        "branch {branch} moved while turn was being committed (expected {expected}); another process is writing to this job's worktree — stop it and retry the turn"
    )]
    ConcurrentCommit { branch: String, expected: String },

    /// Git reported a path that is not UTF-8; baton records paths as text.
    #[error("git reported a path that is not valid UTF-8: {lossy:?}; rename the file")]
    NonUtf8Path { lossy: String },

    /// Git printed something this crate could not parse.
    #[error("could not parse the output of `{command}`: {detail}")]
    UnexpectedOutput { command: String, detail: String },

    /// A filesystem operation outside git failed.
    #[error("{action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn display_code(code: Option<i32>) -> String {
    code.map_or_else(|| "by signal".to_owned(), |c| c.to_string())
}

fn display_stderr(stderr: &str) -> &str {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        "git printed no error"
    } else {
        trimmed
    }
}
