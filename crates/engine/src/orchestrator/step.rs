//! One step of a run: which turn comes next, what stops it before it starts, and
//! what its end means for the run.

use std::sync::Arc;

use baton_core::compiler::{self, Assignment, HandoffPackage};
use baton_core::state::ExecutionState;
use baton_core::turn::TurnStatus;
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::RunStatus;

use super::block::{blocked_question, continue_hint};
use super::reserve::Held;
use super::turn::TurnEnd;
use super::{Engine, MAX_CONSECUTIVE_FAILURES, RunEnd, Session, StepOutcome, TurnSummary, reshape};
use baton_core::ids::WorkerId;

use crate::policy::{PolicyInput, TurnPlan};
use crate::seating::{self, Seating, Unit};
use crate::{Error, Result};

/// A policy's plan, its worker found in the roster.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    /// The worker's position in the run's roster.
    pub worker: usize,
    pub assignment: Assignment,
    pub budget: usize,
    /// Run the workspace's gates after this turn whatever follows it.
    pub gates: bool,
    /// A routed run's seating of the turn (see `crate::seating`): a new one's pin is
    /// written with the turn.
    pub seating: Option<Seating>,
    /// A lane of the assembly line (see `super::line`): its block is compiled into the
    /// briefing, its answer folded in by the line's rules, the unit's progress moved on
    /// with the turn.
    pub line: Option<Box<super::line::LaneTurn>>,
    /// The headroom held for the turn on its pool (a routed turn on a metered pool about
    /// to run; see `super::reserve`): released by its commit, or when the last clone of
    /// the plan is dropped.
    pub reservation: Option<Arc<Held>>,
}

/// What comes next in a run.
// One value a turn, moved once and never stored in a collection: boxing the plan would
// cost an allocation a turn to save a few hundred bytes of stack.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(super) enum Next {
    Turn(Planned),
    /// Nothing: the run is done.
    Done,
    /// A routed run's seat that nobody may take: the run stops with this question.
    Nobody {
        question: String,
    },
}

impl Next {
    pub fn planned(self) -> Option<Planned> {
        match self {
            Next::Turn(plan) => Some(plan),
            Next::Done | Next::Nobody { .. } => None,
        }
    }
}

impl Engine {
    /// The policy's next turn from `state` (`None` when the run is done), its worker
    /// looked up in the session's roster. `reserve` for the turn about to run: a routed
    /// one then holds its pool's headroom (see `super::reserve`); a look at who comes
    /// next holds nothing.
    pub(super) fn next_planned(
        &self,
        session: &Session,
        state: &ExecutionState,
        reserve: bool,
    ) -> Result<Next> {
        let roster = &session.config.roster;
        if session.routed() {
            let (unit, assignment, budget, gates) =
                match seating::next_step(state, &session.config.settings) {
                    Some((step, assignment, budget)) => {
                        (Unit::step(&state.plan[step]), assignment, budget, false)
                    }
                    None => {
                        let input = PolicyInput::new(state, roster, &session.config.settings);
                        let Some(plan) = self.policy.after_plan(&input) else {
                            return Ok(Next::Done);
                        };
                        (
                            Unit::after_plan(state),
                            plan.assignment,
                            plan.budget,
                            plan.gates,
                        )
                    }
                };
            let (seating, reservation) = match reserve {
                true => self.seat_reserved(session, state, &unit, state.turns, budget)?,
                false => (self.seat_unit(session, state, &unit)?, None),
            };
            let worker = match &seating {
                Seating::Nobody { question, .. } => {
                    return Ok(Next::Nobody {
                        question: question.clone(),
                    });
                }
                Seating::Held { pin } | Seating::Seated { pin } => &pin.worker,
            };
            return Ok(Next::Turn(Planned {
                worker: self.roster_index(session, worker)?,
                assignment,
                budget,
                gates,
                seating: Some(seating),
                line: None,
                reservation,
            }));
        }
        let input = PolicyInput::new(state, roster, &session.config.settings);
        let Some(TurnPlan {
            worker,
            assignment,
            budget,
            gates,
        }) = self.policy.next_turn(&input)
        else {
            return Ok(Next::Done);
        };
        Ok(Next::Turn(Planned {
            worker: self.roster_index(session, &worker)?,
            assignment,
            budget,
            gates,
            seating: None,
            line: None,
            reservation: None,
        }))
    }

    /// The position of `worker` in the run's roster. A policy may only pick a worker
    /// the run has: an id it made up is a bug in the policy, said as such rather than
    /// a panic on an index.
    pub(super) fn roster_index(&self, session: &Session, worker: &WorkerId) -> Result<usize> {
        let roster = &session.config.roster;
        roster
            .workers
            .iter()
            .position(|w| &w.id == worker)
            .ok_or_else(|| Error::NoSuchWorker {
                id: worker.to_string(),
                known: roster.ids(),
            })
    }

    /// Whether nothing is left for the run's policy after `state`: every step done
    /// for a routed run (nothing is read from the store for it), else the policy's
    /// answer.
    pub(super) fn nothing_left(&self, session: &Session, state: &ExecutionState) -> bool {
        let input = PolicyInput::new(state, &session.config.roster, &session.config.settings);
        if session.routed() {
            return seating::next_step(state, &session.config.settings).is_none()
                && self.policy.after_plan(&input).is_none();
        }
        self.policy.next_turn(&input).is_none()
    }

    /// Compiles the package `worker` would get for the next turn, without running it.
    pub fn preview(
        &self,
        session: &Session,
        worker: Option<&str>,
        budget: Option<usize>,
    ) -> Result<HandoffPackage> {
        let plan = self.next_planned(session, &session.state, false)?.planned();
        let (index, assignment, planned_budget) = match plan {
            Some(p) => (p.worker, p.assignment, p.budget),
            None => (
                0,
                Assignment {
                    kind: baton_core::compiler::AssignmentKind::Continuation,
                    step_id: None,
                    task: "The run is finished: review the record.".into(),
                },
                session.config.settings.budget,
            ),
        };
        let worker = match worker {
            Some(id) => session.config.roster.find(id)?,
            None => &session.config.roster.workers[index],
        };
        Ok(compiler::compile(
            &session.state,
            &assignment,
            &worker.profile(),
            budget.unwrap_or(planned_budget),
            &*session.estimator,
        ))
    }

    /// Runs exactly one turn (or reports that the run is finished or blocked).
    pub fn step(&self, session: &mut Session) -> Result<StepOutcome> {
        match session.status {
            RunStatus::Finished => return Ok(StepOutcome::Finished),
            RunStatus::Blocked => {
                return Ok(StepOutcome::Blocked {
                    question: blocked_question(session),
                });
            }
            RunStatus::Active => {}
        }
        if session.cancel.is_cancelled() {
            return Err(Error::Stopped {
                next_turn: session.state.turns,
            });
        }
        if let Some(loss) = session.run_lease.as_ref().and_then(|l| l.lost()) {
            // In the run's stream too, so whoever follows the run sees why this process
            // stopped (best effort: the store may be what failed).
            let lost = EventKind::LeaseLost {
                what: "run".into(),
                id: session.run.to_string(),
                reason: loss.to_string(),
            };
            let _ = crate::jobs::events::record(
                &*self.store,
                &*self.clock,
                &self.publisher,
                &session.run,
                lost,
            );
            return Err(Error::RunLeaseLost {
                run: session.run.to_string(),
                reason: loss.to_string(),
            });
        }
        let plan = match self.next_planned(session, &session.state, true)? {
            Next::Turn(plan) => Some(plan),
            Next::Done => None,
            Next::Nobody { question } => {
                let question = format!("{question} Then {}.", continue_hint(session, false));
                self.block(session, question.clone())?;
                return Ok(StepOutcome::Blocked { question });
            }
        };
        let Some(plan) = plan else {
            let event = Event {
                run_id: session.run.clone(),
                turn: None,
                at: self.clock.now(),
                kind: EventKind::RunFinished {
                    turns: session.state.turns,
                },
            };
            let seqs = self.store.update_run(
                &session.run,
                RunStatus::Finished,
                std::slice::from_ref(&event),
            )?;
            self.published(&seqs, std::slice::from_ref(&event));
            session.status = RunStatus::Finished;
            return Ok(StepOutcome::Finished);
        };
        // A provider that asked for a delay (in an earlier turn or process) is not
        // called before it has passed; one that asked for too long blocks the run.
        if let Some(question) = self.wait_for_hold(session, plan.worker) {
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        if session.cancel.is_cancelled() {
            return Err(Error::Stopped {
                next_turn: session.state.turns,
            });
        }
        // A bad request this worker made a few (failed) turns ago, about to be sent again
        // unchanged because other workers failed in between: stop instead.
        if let Some(d) = self.last_bad_request(session, &plan)?
            && self.sends_again(session, &plan, &d)?
        {
            let worker = session.config.roster.workers[plan.worker].id.clone();
            let question = d.question(worker.as_str(), &continue_hint(session, true), true);
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        // A context window too small for any briefing is said before anything is sent.
        let fit = self.window_fit(session, plan.worker, false);
        if let Some(fit) = fit
            .as_ref()
            .filter(|f| f.budget < crate::config::MIN_BUDGET)
        {
            let worker = &session.config.roster.workers[plan.worker].id;
            let question = format!(
                "worker {worker}'s model cannot take a turn: {}, less than the {} tokens baton needs to brief anyone, so nothing was sent. Lower the worker's max_tokens, or give the model a larger context (llama-server -c 8192, Ollama num_ctx) and set the worker's context_window to it, then {}.",
                fit.explain(),
                crate::config::MIN_BUDGET,
                continue_hint(session, true)
            );
            self.block(session, question.clone())?;
            return Ok(StepOutcome::Blocked { question });
        }
        let window_notice = fit
            .filter(|f| f.budget < plan.budget && !session.window_noticed[plan.worker])
            .map(|f| {
                session.window_noticed[plan.worker] = true;
                format!(
                    "worker {}'s briefings are compiled at a budget of {} tokens instead of {}: {}",
                    session.config.roster.workers[plan.worker].id,
                    f.budget,
                    plan.budget,
                    f.explain()
                )
            });
        let fresh = self.reshape(session, plan.worker)?;
        session.reshape = if fresh.is_empty() {
            session.remembered_cuts[plan.worker].clone()
        } else {
            session.remembered_cuts[plan.worker] = fresh.remembered();
            fresh
        };
        let mut notices = session.reshape.notices().to_vec();
        notices.extend(Self::fallback_notices(session, plan.worker));
        notices.extend(window_notice);
        session.notices = notices;
        let TurnEnd {
            mut summary,
            fatal,
            doomed,
        } = self.run_turn(session, &plan).inspect_err(|e| {
            // Whatever stopped the turn (a cancel, a fence, a failed write), nothing of
            // it was committed: its live events are void, and subscribers are told.
            self.abandon_turn(session, session.state.turns, e.to_string());
        })?;
        session.reshape = reshape::Reshape::default();
        // Who takes the next turn matters only to a turn that failed or cannot be sent
        // again as it was; a routed run's seating reads the floor, so a turn that went
        // well does not pay for a seating the next step makes anyway.
        let next = match fatal.is_some() || doomed.is_some() || summary.status == TurnStatus::Failed
        {
            true => self.next_planned(session, &session.state, false)?.planned(),
            false => None,
        };
        let same_worker_next = next.as_ref().is_some_and(|n| n.worker == plan.worker);
        let worker = session.config.roster.workers[plan.worker].id.clone();
        let unreachable = match same_worker_next && summary.status == TurnStatus::Failed {
            true => self.unreachable(session, summary.turn)?,
            false => None,
        };
        if let (Some(f), Some(n), false) = (&fatal, &next, same_worker_next)
            && f.agent
        {
            summary.warnings.push(format!(
                "agent {worker} is not run again on this briefing; worker {} takes the next turn",
                session.config.roster.workers[n.worker].id
            ));
        }
        if let (true, Some(fatal)) = (same_worker_next, &fatal) {
            // A failure no retry can fix (a bad key, an unknown model, a hung agent),
            // about to be met again by the same worker: stop now instead of failing the
            // same way twice more.
            let error = &fatal.error;
            let question = if fatal.agent {
                format!(
                    "agent {worker} failed: {error}. baton did not run it again: the same agent \
                     on the same briefing fails the same way (a hang costs its whole timeout \
                     each time). Look at its output, then fix its command or preset, raise its \
                     options.timeout_s, or add another worker to the roster, and {}.",
                    continue_hint(session, true)
                )
            } else {
                format!(
                    "worker {worker} cannot work: {error}. Fix its key in the environment, or its \
                     model, provider or base URL in the roster file, then {} \
                     (a run keeps the roster it was created with until you replace it).",
                    continue_hint(session, true)
                )
            };
            self.block(session, question)?;
        } else if let Some(error) = unreachable {
            // Nothing answers (a server not started, a wrong api_base): the next turn
            // would fail the same way within milliseconds, using up turn numbers.
            let retries = session.config.roster.workers[plan.worker].max_retries;
            let question = format!(
                "worker {worker} cannot reach its model: {error}. baton stopped rather than fail the next turns the same way (each call is tried {} time{}: max_retries = {retries}). Start the server, or fix the worker's api_base in the roster file, then {}.",
                retries + 1,
                if retries == 0 { "" } else { "s" },
                continue_hint(session, true)
            );
            self.block(session, question)?;
        } else if let (Some(d), Some(next)) = (&doomed, next.as_ref().filter(|_| same_worker_next))
            && self.sends_again(session, next, d)?
        {
            let question = d.question(worker.as_str(), &continue_hint(session, true), true);
            self.block(session, question)?;
        } else if (summary.status == TurnStatus::Failed || summary.step_left_open)
            && session.state.consecutive_failures >= MAX_CONSECUTIVE_FAILURES
            && session
                .state
                .consecutive_failures
                .is_multiple_of(MAX_CONSECUTIVE_FAILURES)
        {
            let question = match &doomed {
                Some(d) if d.is_too_long() => {
                    d.question(worker.as_str(), &continue_hint(session, true), false)
                }
                _ => blocked_question(session),
            };
            self.block(session, question)?;
        }
        Ok(StepOutcome::Turn(Box::new(summary)))
    }

    /// Runs turns until the run finishes or blocks, or `max_turns` have run.
    pub fn run(
        &self,
        session: &mut Session,
        max_turns: Option<u32>,
        progress: &mut dyn FnMut(&TurnSummary, &Session),
    ) -> Result<RunEnd> {
        let mut ran = 0;
        loop {
            if max_turns.is_some_and(|m| ran >= m) {
                return Ok(RunEnd::Paused);
            }
            match self.step(session)? {
                StepOutcome::Turn(summary) => {
                    ran += 1;
                    progress(&summary, session);
                    if session.status == RunStatus::Blocked {
                        return Ok(RunEnd::Blocked {
                            question: blocked_question(session),
                        });
                    }
                }
                StepOutcome::Finished => return Ok(RunEnd::Finished),
                StepOutcome::Blocked { question } => return Ok(RunEnd::Blocked { question }),
            }
        }
    }
}
