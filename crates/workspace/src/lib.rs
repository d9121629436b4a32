//! Isolated git workspaces for baton jobs.
//!
//! Each job runs in its own `git worktree` on its own branch (`baton/job-<id>`), created
//! from a recorded base commit; the user's checkout is never touched and is never used as
//! a fallback. Every turn becomes one commit whose trailers name the run, job, turn,
//! worker, model and family, so the branch is the job's audit trail on disk. Finished
//! jobs' worktrees are garbage-collected under a retention policy that never deletes
//! uncommitted work; branches (and so every turn) are kept.
//!
//! All git work goes through the real `git` command line (see `git.rs`), never a library.

mod commit;
mod drift;
mod error;
mod exclude;
mod gc;
mod git;
mod land;
mod recover;
mod repo;
mod workspace;

pub use commit::{ChangeStatus, ChangedFile, CommitOutcome, DiffStat, TurnCommitInfo};
pub use drift::Drift;
pub use error::{Error, Result};
pub use exclude::Exclusion;
pub use gc::{
    AGENT_OUTPUT_DIR, GcReport, KeepReason, KeptWorktree, RemovedWorktree, Retention,
    transcripts_dir,
};
pub use land::Landing;
pub use recover::set_aside;
pub use repo::Repo;
pub use workspace::{
    Workspace, WorkspaceSpec, attempt_dir, branch_for_job, split_attempt_dir, validate_job_id,
};
