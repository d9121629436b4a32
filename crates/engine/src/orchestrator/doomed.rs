//! Requests that fail the same way every time they are sent. A bad request or a
//! briefing too long for the model's context is never retried within a call; across
//! turns, a briefing that was too long is compiled again at half the budget, and a
//! request the next turn would send byte-identical is not sent at all: the run
//! blocks with a question that names the budget.

use baton_core::ErrorClass;
use baton_core::compiler;
use baton_core::prompt;
use baton_core::turn::{CallKind, CallRecord, TurnRecord, TurnStatus};

use super::step::Planned;
use super::{Engine, Session};
use crate::Result;
use crate::audit;
use crate::config::MIN_BUDGET;

/// A turn whose execute call failed in a way the same request fails again.
#[derive(Debug, Clone)]
pub(super) struct Doomed {
    too_long: bool,
    turn: u32,
    error: String,
    request_hash: String,
    budget: usize,
    tokens: usize,
}

impl Doomed {
    /// The turn's doomed first call (execute, or the one combined call), when it had one.
    pub(super) fn of(
        turn: u32,
        calls: &[CallRecord],
        budget: usize,
        tokens: usize,
    ) -> Option<Doomed> {
        let call = calls
            .first()
            .filter(|c| matches!(c.call, CallKind::Execute | CallKind::Combined))?;
        // The failure classes the same request meets again.
        let too_long = match call.error_class.as_ref()? {
            ErrorClass::ContextTooLong => true,
            ErrorClass::BadRequest => false,
            _ => return None,
        };
        Some(Doomed {
            too_long,
            turn,
            error: call.error.clone().unwrap_or_default(),
            request_hash: call.request_hash.clone(),
            budget,
            tokens,
        })
    }

    pub(super) fn is_too_long(&self) -> bool {
        self.too_long
    }

    /// Why the run stops, for `worker`; `next` says how to continue (see
    /// `continue_hint`).
    pub(super) fn question(&self, worker: &str, next: &str, identical: bool) -> String {
        if self.too_long {
            let why = if identical {
                "baton cannot shrink it further".to_string()
            } else {
                "baton halved the budget after each failure and it still does not fit".to_string()
            };
            format!(
                "worker {worker}'s model cannot take its briefing: {}. The last briefing was \
                 {} tokens at a budget of {} tokens, and {why}. Give the step to a model with a \
                 larger context window, or split the step, then {next}.",
                self.error, self.tokens, self.budget
            )
        } else {
            format!(
                "worker {worker}'s provider refused the request: {}. The next turn would send \
                 the same request, byte-identical but for its turn number and its list of \
                 earlier attempts (a briefing of {} \
                 tokens at a budget of {} tokens), so baton stopped instead of failing the same \
                 way again. Fix the worker's model \
                 or options in the roster file, or reword the step, then {next}.",
                self.error, self.tokens, self.budget
            )
        }
    }
}

/// The budget after a briefing of `tokens` compiled at `budget` was too long: half of
/// what was sent, never below the smallest budget baton compiles.
fn shrink(budget: usize, tokens: usize) -> usize {
    (budget.min(tokens) / 2).max(MIN_BUDGET)
}

impl Engine {
    /// `worker`'s last turn, when it is among the failed turns just before this one
    /// (other workers may have failed in between). Read from the committed turns, so a
    /// resumed run sees it too; at most one turn per roster worker is read, none when
    /// the last turn did not fail.
    pub(super) fn last_failed_turn(
        &self,
        session: &Session,
        worker: usize,
    ) -> Result<Option<TurnRecord>> {
        let state = &session.state;
        let worker = &session.config.roster.workers[worker];
        let look_back = state
            .consecutive_failures
            .min(state.turns)
            .min(u32::try_from(session.config.roster.workers.len()).unwrap_or(u32::MAX));
        for turn in (state.turns - look_back..state.turns).rev() {
            let Some(last) = self.store.turn(&session.run, turn)? else {
                continue;
            };
            if last.worker != worker.id {
                continue;
            }
            return Ok((last.status == TurnStatus::Failed).then_some(last));
        }
        Ok(None)
    }

    /// How `plan`'s worker's last turn failed in a doomed way, when it failed just
    /// before this one (see [`Self::last_failed_turn`]).
    fn last_doomed(&self, session: &Session, plan: &Planned) -> Result<Option<Doomed>> {
        Ok(self
            .last_failed_turn(session, plan.worker)?
            .and_then(|last| {
                Doomed::of(
                    last.turn,
                    &last.calls,
                    last.package.budget,
                    last.package.tokens,
                )
            }))
    }

    /// The budget of the turn `plan` describes: the plan's, or less when the same
    /// worker's last failed turn failed because its briefing did not fit its model's
    /// context, and never more than the worker's context window leaves (once a
    /// briefing did not fit, the window the server tells is asked for).
    pub(super) fn turn_budget(&self, session: &Session, plan: &Planned) -> Result<usize> {
        let doomed = self.last_doomed(session, plan)?;
        let too_long = doomed.as_ref().is_some_and(|d| d.too_long);
        let budget = match doomed {
            Some(d) if d.too_long => shrink(d.budget, d.tokens).min(plan.budget),
            _ => plan.budget,
        };
        Ok(match self.window_fit(session, plan.worker, too_long) {
            Some(fit) => budget.min(fit.budget.max(MIN_BUDGET)),
            None => budget,
        })
    }

    /// The bad request `plan`'s worker made on its last failed turn (workers
    /// alternating in between): the request it would send again is checked before it
    /// is sent.
    pub(super) fn last_bad_request(
        &self,
        session: &Session,
        plan: &Planned,
    ) -> Result<Option<Doomed>> {
        Ok(self.last_doomed(session, plan)?.filter(|d| !d.too_long))
    }

    /// Whether the turn `next` would send `doomed`'s request again: byte-identical once
    /// its briefing is labelled with the doomed turn's number and leaves out the attempts
    /// recorded since (the label and the attempt history are all a failed turn changes
    /// in the record).
    pub(super) fn sends_again(
        &self,
        session: &Session,
        next: &Planned,
        doomed: &Doomed,
    ) -> Result<bool> {
        let worker = &session.config.roster.workers[next.worker];
        let mut as_then = session.state.clone();
        as_then.turns = doomed.turn;
        // The failed turns since are on record as attempts on their step; the briefing
        // lists them, the request is otherwise the one that failed.
        for step in &mut as_then.plan {
            step.attempts.retain(|a| a.turn < doomed.turn);
        }
        let package = compiler::compile(
            &as_then,
            &next.assignment,
            &worker.profile(),
            self.turn_budget(session, next)?,
            &*session.estimator,
        );
        let first = if self.two_calls(session, next.worker) {
            prompt::execute_prompt(&package)
        } else {
            prompt::combined_prompt(&package)
        };
        Ok(audit::request_hash(&first) == doomed.request_hash)
    }
}
