//! baton's exit statuses: one table (README, "Exit codes"), each status decided from
//! the error's type, never from its message.

use std::process::ExitCode;

use baton_core::ErrorClass;

/// What a script can tell apart by the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Any other error: a database or file error, a run or job not found, a check
    /// (`demo`, `work`) that found a failure.
    Failure = 1,
    /// The command line is wrong (clap's own errors exit 2 too).
    Usage = 2,
    /// The run is blocked and a human must answer.
    Blocked = 3,
    /// The last turn ran and failed (recorded; the run can continue).
    TurnFailed = 4,
    /// The configuration or roster is wrong: a worker's options, model, provider, a
    /// missing configuration or replay file.
    Config = 5,
    /// A provider refused or failed (authentication, quota, unknown model,
    /// unreachable, an answer that could not be used).
    Provider = 6,
    /// This process lost its lease on the run (or a job) to another process.
    LeaseLost = 7,
    /// Another process advances the run now (its lease holds, or it committed the
    /// turn first), or still held it when `baton cancel` stopped waiting for it.
    Busy = 8,
    /// A git or worktree error in a job's workspace.
    Workspace = 9,
    /// The work was stopped by `baton cancel` (a signal has its own status; a lost lease
    /// is `LeaseLost`).
    Cancelled = 10,
    /// A bug in baton.
    Internal = 70,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// An error the CLI itself detects, with its exit status.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub exit: Exit,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// The command line is wrong.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    Refusal {
        exit: Exit::Usage,
        message: message.into(),
    }
    .into()
}

/// The configuration is wrong.
pub(crate) fn config(message: impl Into<String>) -> anyhow::Error {
    Refusal {
        exit: Exit::Config,
        message: message.into(),
    }
    .into()
}

/// The status for an error that reached the top: the first typed error in its chain
/// decides.
pub(crate) fn of(error: &anyhow::Error) -> Exit {
    for cause in error.chain() {
        if let Some(r) = cause.downcast_ref::<Refusal>() {
            return r.exit;
        }
        if let Some(e) = cause.downcast_ref::<baton_engine::Error>() {
            return engine(e);
        }
        if let Some(e) = cause.downcast_ref::<baton_gateway::Error>() {
            return class(&e.class());
        }
        if let Some(e) = cause.downcast_ref::<baton_store::Error>() {
            return store(e);
        }
        if cause.downcast_ref::<baton_workspace::Error>().is_some() {
            return Exit::Workspace;
        }
    }
    Exit::Failure
}

fn engine(e: &baton_engine::Error) -> Exit {
    use baton_engine::Error as E;
    match e {
        E::Store(s) => store(s),
        E::Gateway { error, .. } => class(&error.class()),
        E::Config(_)
        | E::ConfigFile { .. }
        | E::NoSuchWorker { .. }
        | E::UnknownCandidate { .. }
        | E::CannotJudge { .. }
        | E::NoJudge { .. } => Exit::Config,
        // The command named a run that is not a unit (as `line --resume` and
        // `line --status` of one are).
        E::GateWithoutCommand { .. } | E::NotAUnit(_) => Exit::Usage,
        E::JudgeAnswer { .. } => Exit::Provider,
        E::Workspace(_) | E::Drift(_) => Exit::Workspace,
        E::RunLeaseLost { .. } => Exit::LeaseLost,
        E::RunBusy { .. } | E::TurnTaken { .. } => Exit::Busy,
        E::Cancelled { .. } | E::Stopped { .. } | E::JudgeCancelled { .. } => Exit::Cancelled,
        E::Internal { .. } => Exit::Internal,
        // Nothing to compare yet: neither busy nor a provider's failure.
        E::Core(_)
        | E::NotRunnable { .. }
        | E::NotAsked(_)
        | E::TooFewCandidates { .. }
        | E::RunOfJob { .. }
        | E::NoSuchProcess { .. }
        | E::NoSuchGroup { .. }
        | E::Io(_) => Exit::Failure,
    }
}

fn store(e: &baton_store::Error) -> Exit {
    use baton_store::Error as S;
    match e {
        S::LeaseLost { .. } | S::RunLeaseLost { .. } => Exit::LeaseLost,
        S::TurnConflict { .. } => Exit::Busy,
        _ => Exit::Failure,
    }
}

/// A gateway failure: the worker's configuration, a cancelled call, or the provider.
pub(crate) fn class(class: &ErrorClass) -> Exit {
    match class {
        ErrorClass::Config | ErrorClass::Script => Exit::Config,
        ErrorClass::Cancelled => Exit::Cancelled,
        _ => Exit::Provider,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_decides_not_the_words() {
        let wrapped = anyhow::Error::new(baton_engine::Error::Gateway {
            worker: "w".into(),
            error: baton_gateway::Error::Auth {
                message: "invalid configuration".into(),
            },
        })
        .context("checking the roster");
        assert_eq!(of(&wrapped), Exit::Provider);
        let lease = anyhow::Error::new(baton_engine::Error::Store(baton_store::Error::LeaseLost {
            job: "j".into(),
            reason: "taken".into(),
        }));
        assert_eq!(of(&lease), Exit::LeaseLost);
        assert_eq!(of(&anyhow::anyhow!("lost its lease")), Exit::Failure);
        assert_eq!(of(&usage("--x twice")), Exit::Usage);
        // Refusals the engine now types (they were strings, or the CLI's own bail!s).
        let engine = |e: baton_engine::Error| of(&anyhow::Error::new(e));
        let taken = baton_engine::Error::TurnTaken {
            run: "r".into(),
            turn: 3,
        };
        assert_eq!(engine(taken), Exit::Busy);
        let gate = baton_engine::Error::GateWithoutCommand { gate: "x=".into() };
        assert_eq!(engine(gate), Exit::Usage);
        let judge = baton_engine::Error::NoJudge { roster: "a".into() };
        assert_eq!(engine(judge), Exit::Config);
        let bug = baton_engine::Error::Internal {
            place: "a run's configuration",
            detail: "key must be a string".into(),
        };
        assert_eq!(engine(bug), Exit::Internal);
    }
}
