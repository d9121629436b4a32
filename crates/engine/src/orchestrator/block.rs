//! Stopping a run to ask a human, and what the question says.

use baton_core::ErrorClass;
use baton_core::state::AttemptOutcome;
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::RunStatus;

use super::{Engine, Session};
use crate::Result;

impl Engine {
    /// The error of `turn`'s last call, when its provider could not be reached at all
    /// (after the call's retries).
    pub(super) fn unreachable(&self, session: &Session, turn: u32) -> Result<Option<String>> {
        let Some(record) = self.store.turn(&session.run, turn)? else {
            return Ok(None);
        };
        Ok(record
            .calls
            .last()
            .filter(|c| c.error_class == Some(ErrorClass::Unreachable))
            .and_then(|c| c.error.clone()))
    }

    /// Stops the run to ask a human `question`.
    pub(super) fn block(&self, session: &mut Session, question: String) -> Result<()> {
        let event = Event {
            run_id: session.run.clone(),
            turn: None,
            at: self.clock.now(),
            kind: EventKind::RunBlocked {
                question: question.clone(),
            },
        };
        let seqs = self.store.update_run(
            &session.run,
            RunStatus::Blocked,
            std::slice::from_ref(&event),
        )?;
        self.published(&seqs, std::slice::from_ref(&event));
        session.status = RunStatus::Blocked;
        session.blocked = Some(question);
        Ok(())
    }

    /// Re-opens a blocked run so it can continue (a human has looked at it).
    pub fn unblock(&self, session: &mut Session) -> Result<()> {
        if session.status == RunStatus::Blocked {
            self.store
                .update_run(&session.run, RunStatus::Active, &[])?;
            session.status = RunStatus::Active;
            session.blocked = None;
        }
        Ok(())
    }
}

pub(super) fn blocked_question(session: &Session) -> String {
    if let Some(reason) = &session.blocked {
        return reason.clone();
    }
    let failures = session.state.consecutive_failures;
    let cursor = session.state.cursor().map(|i| &session.state.plan[i]);
    let step = cursor
        .map(|s| format!("step {} (\"{}\")", s.id, s.title))
        .unwrap_or_else(|| "the continuation turns".into());
    // The attempts of this streak: the step's last `failures` attempts.
    let recent = cursor.map_or(&[][..], |s| {
        let n = s.attempts.len().min(failures as usize);
        &s.attempts[s.attempts.len() - n..]
    });
    let idle = recent
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::NoEvidence)
        .count();
    if let (Some(last), true) = (recent.last(), idle > 0) {
        let failed = recent.len() - idle;
        let how = if failed == 0 {
            "none of them left evidence of work".to_string()
        } else {
            format!("{failed} failed and {idle} left no evidence of work")
        };
        return format!(
            "{failures} turns in a row did not complete {step}: {how} (the last, turn {} by \
             {}: {} — {}). Look at `baton history {}` \
             for what each worker said; make the step doable (reword or split it, or supply \
             what the workers say is missing) or give it to other workers in the roster \
             file, then {} to continue.",
            last.turn,
            last.worker,
            last.outcome.as_str(),
            last.detail,
            session.run,
            continue_hint(session, true)
        );
    }
    format!(
        "{} turns in a row failed on {step}. Look at `baton history {}` for the errors, fix the \
         workers in the roster file, then {} to continue (without --roster if the workers were \
         not the problem).",
        session.state.consecutive_failures,
        session.run,
        continue_hint(session, true)
    )
}

/// How a human continues this run once they fixed what stopped it: a job's run is
/// continued by requeueing the job (it needs its worktree), any other by resuming it.
pub(super) fn continue_hint(session: &Session, new_roster: bool) -> String {
    let roster = if new_roster { " --roster <file>" } else { "" };
    match &session.lease {
        Some(fence) => format!(
            "run `baton requeue {}{roster}` and `baton work` (it is a job's run: it continues in its worktree)",
            fence.job
        ),
        None => format!("run `baton resume {}{roster}`", session.run),
    }
}
