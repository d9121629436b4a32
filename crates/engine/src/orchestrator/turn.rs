//! One turn, start to commit: compile the briefing, make the calls, let the workspace
//! and the reconciler see the claims, run the gates when the reconciled state says they
//! are due, and commit everything in one transaction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::ErrorClass;
use baton_core::agent;
use baton_core::claims::{self, ArtifactClaim, Parsed, WorkerResult};
use baton_core::compiler;
use baton_core::prompt::{self, Prompt};
use baton_core::reconciler::{self, ReconcileOutcome, StepEnd, TurnContext, Verifier, WorkSeen};
use baton_core::turn::{CallKind, TurnRecord, TurnStatus};
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::{RunStatus, TurnCommit};

use super::doomed::Doomed;
use super::step::Planned;
use super::unbilled::Unbilled;
use super::{Engine, Session, TurnSummary, holds};
use crate::audit;
use crate::config::{Calls, WorkerConfig};
use crate::hook::{GateInput, HookOutcome, TurnFacts};
use crate::seating::Seating;
use crate::{Error, Result};

impl Engine {
    /// Runs and commits one turn.
    pub(super) fn run_turn(&self, session: &mut Session, plan: &Planned) -> Result<TurnEnd> {
        let briefed = self.brief_turn(session, plan, session.state.turns)?;
        let called = self.call_turn(session, plan, &briefed);
        self.finish_turn(session, plan, briefed, called)
    }

    /// Compiles the briefing of turn `turn` from the committed state and says the turn
    /// started (the seating, the start, the package: each event kept with the turn).
    pub(super) fn brief_turn(
        &self,
        session: &Session,
        plan: &Planned,
        turn: u32,
    ) -> Result<Briefed> {
        let t0 = Instant::now();
        let worker: WorkerConfig = session.config.roster.workers[plan.worker].clone();
        let profile = worker.profile();
        let started_at = self.clock.now();
        let budget = self.turn_budget(session, plan)?;
        let package = match &plan.line {
            Some(lane) => compiler::compile_with_line(
                &session.state,
                &plan.assignment,
                &profile,
                budget,
                &*session.estimator,
                &lane.ask.block,
            ),
            None => compiler::compile(
                &session.state,
                &plan.assignment,
                &profile,
                budget,
                &*session.estimator,
            ),
        };
        // A new seating is said first (and, like every event of the turn, committed with
        // it or voided with it).
        let new_pin = match &plan.seating {
            Some(Seating::Seated { pin }) => Some(pin.clone()),
            _ => None,
        };
        if let Some(pin) = &new_pin {
            self.emit(
                session,
                turn,
                started_at,
                EventKind::Seated {
                    seat: pin.seat.to_string(),
                    worker: pin.worker.clone(),
                    model: pin.model.clone(),
                    pool: pin.pool.to_string(),
                    phase: pin.phase.clone(),
                    reason: pin.reason.to_string(),
                },
            );
        }
        // Said before anything is sent: a subscriber sees the turn start, not end.
        self.emit(
            session,
            turn,
            started_at,
            EventKind::TurnStarted {
                worker: worker.id.clone(),
                model: worker.model.clone(),
                assignment: plan
                    .assignment
                    .step_id
                    .clone()
                    .unwrap_or_else(|| "continuation".into()),
                task: Some(plan.assignment.task.clone()),
            },
        );
        self.emit(
            session,
            turn,
            started_at,
            EventKind::PackageCompiled {
                tokens: package.tokens,
                budget: package.budget,
                sections_included: package.sections.iter().filter(|s| s.included).count(),
                sections_omitted: package.omitted_titles(),
                items_dropped: package.dropped_count(),
            },
        );

        Ok(Briefed {
            t0,
            turn,
            worker,
            profile,
            started_at,
            package,
            new_pin,
        })
    }

    /// Makes the turn's calls: nothing here changes the session, so the calls of
    /// independent lanes may run at once (see `line_batch`).
    pub(super) fn call_turn(&self, session: &Session, plan: &Planned, briefed: &Briefed) -> Called {
        let Briefed {
            turn, ref package, ..
        } = *briefed;
        let mut calls = Vec::with_capacity(2);
        let mut prompts: Vec<Prompt> = Vec::with_capacity(2);
        let mut own_outputs: Vec<String> = Vec::new();
        let mut error: Option<String> = None;
        let mut claims_ok = None;
        // A coding agent runs once per turn: no JSON is asked of it (its commit is the
        // evidence), no repair re-runs it, and its handoff is derived, not a request.
        let is_agent = session.gateways[plan.worker]
            .as_ref()
            .is_some_and(|g| g.needs_workspace());
        let mut agent_warnings = Vec::new();
        // A station's answer (an intake, a plan, a check), read by the line's parsers.
        let mut line_answer = None;
        let station_kind = plan
            .line
            .as_ref()
            .map(|l| l.ask.answer)
            .filter(|k| *k != baton_core::line::ask::AnswerKind::Claims);
        if let Some(kind) = station_kind {
            let station = super::line::LineStation { kind };
            let answered = self
                .caller(session, plan.worker, package)
                .call_for_answer(
                    &station,
                    super::line::line_prompt(package, kind),
                    CallKind::Execute,
                    turn,
                    &mut calls,
                    &mut prompts,
                )
                .map_err(|e| e.to_string());
            match answered {
                Err(e) => error = Some(e),
                Ok((answer, _)) => line_answer = Some(answer),
            }
        } else if is_agent {
            let checks = session
                .workspace
                .as_ref()
                .map(|w| w.checks())
                .unwrap_or_default();
            let prompt = prompt::agent_prompt(package, &checks);
            let (mut record, out) = self.call_model(
                session,
                plan.worker,
                package,
                &prompt,
                CallKind::Execute,
                turn,
            );
            prompts.push(prompt);
            match out {
                Err(e) => error = Some(format!("execute call failed: {e}")),
                Ok(raw) => match agent::parse_agent_output(&raw) {
                    Err(e) => {
                        record.error = Some(e.to_string());
                        error = Some(format!("execute output rejected: {e}"));
                    }
                    Ok(claim) => {
                        agent_warnings = claim.warnings;
                        claims_ok = Some((claim.result, claim.report));
                    }
                },
            }
            self.emit(
                session,
                turn,
                record.started_at,
                super::calls::model_called(&record),
            );
            calls.push(record);
        } else if !self.two_calls(session, plan.worker) {
            // One call per turn: the answer carries the result and the handoff, so the
            // briefing is sent once.
            let answered = self.call_for_claim(
                session,
                plan.worker,
                package,
                prompt::combined_prompt(package),
                CallKind::Combined,
                turn,
                claims::parse_turn_answer,
                &mut calls,
                &mut prompts,
            );
            match answered {
                Err(e) => error = Some(e),
                Ok((claims, _)) => claims_ok = Some(claims),
            }
        } else {
            let executed = self.call_for_claim(
                session,
                plan.worker,
                package,
                prompt::execute_prompt(package),
                CallKind::Execute,
                turn,
                claims::parse_worker_result,
                &mut calls,
                &mut prompts,
            );
            match executed {
                Err(e) => error = Some(e),
                Ok((result, raw1)) => {
                    let handed = self.call_for_claim(
                        session,
                        plan.worker,
                        package,
                        prompt::handoff_prompt(package, &raw1),
                        CallKind::Handoff,
                        turn,
                        claims::parse_handoff_report,
                        &mut calls,
                        &mut prompts,
                    );
                    own_outputs.push(raw1);
                    match handed {
                        Err(e) => error = Some(e),
                        Ok((report, _)) => claims_ok = Some((result, report)),
                    }
                }
            }
        }
        Called {
            calls,
            prompts,
            own_outputs,
            error,
            claims_ok,
            line_answer,
            agent_warnings,
            is_agent,
        }
    }

    /// Reconciles what the turn's calls returned with the committed state and commits
    /// the turn.
    pub(super) fn finish_turn(
        &self,
        session: &mut Session,
        plan: &Planned,
        briefed: Briefed,
        called: Called,
    ) -> Result<TurnEnd> {
        let Briefed {
            t0,
            turn,
            worker,
            profile,
            started_at,
            package,
            new_pin,
        } = briefed;
        let Called {
            calls,
            prompts,
            mut own_outputs,
            error,
            mut claims_ok,
            line_answer,
            agent_warnings,
            is_agent,
        } = called;
        let model_time: Duration = calls
            .iter()
            .map(|c| Duration::from_millis(c.duration_ms))
            .sum();
        // From here on the calls are spent: they count against the worker's pool
        // however the turn ends (with the turn when it commits, else apart).
        let unbilled = Unbilled::new(
            &*self.store,
            worker.pool.as_ref(),
            &session.run,
            turn,
            &calls,
            self.clock.now(),
        );
        // Every output of this turn may be quoted by its own later calls.
        own_outputs.extend(calls.iter().filter_map(|c| c.output.clone()));
        let own: Vec<&str> = own_outputs.iter().map(String::as_str).collect();
        let prompt_refs: Vec<&Prompt> = prompts.iter().collect();
        let transfer = audit::audit(&package, &prompt_refs, &calls, &own, &session.prior_outputs);

        let now = self.clock.now();
        // The scoring memo moves to the next state rather than being copied: it is
        // derived, and a turn that does not commit leaves a state that rebuilds it.
        let scoring = std::mem::take(&mut session.state.scoring);
        let mut next = session.state.clone();
        next.scoring = scoring;
        // The turn's events after its calls (the calls' own were emitted as they went).
        let mut events: Vec<Event> = Vec::new();

        // A turn whose call was cut short is not committed: it did not fail, it was
        // stopped. (One whose calls all finished commits as usual, cancel or not.)
        if calls
            .iter()
            .any(|c| c.error_class == Some(ErrorClass::Cancelled))
        {
            // A delay the provider asked for before the interrupt outlives the turn.
            let holds = holds::left_by(&worker.id, &calls, self.clock.now());
            if !holds.is_empty() {
                self.store.put_worker_holds(&session.run, &holds)?;
            }
            return Err(Error::Cancelled { turn });
        }
        // The workspace commits the turn before the reconciler sees it, so claims about
        // files are checked against the turn's commit.
        // A station's answer (an intake, a plan, a check) claims no work: what its worker
        // changed anyway is committed as its turn's, with nothing claimed of it.
        let answered = line_answer.as_ref().map(|_| WorkerResult::default());
        let mut hooked: Option<HookOutcome> = match &session.workspace {
            None => None,
            Some(hook) => Some(
                hook.after_calls(&TurnFacts {
                    run: &session.run,
                    turn,
                    worker: &worker,
                    assignment: &plan.assignment,
                    result: claims_ok
                        .as_ref()
                        .map(|(r, _): &(Parsed<_>, Parsed<_>)| &r.claim)
                        .or(answered.as_ref()),
                })?,
            ),
        };
        let verifier: Arc<dyn Verifier> = match &hooked {
            Some(h) => h.verifier.clone(),
            None => self.verifier.clone(),
        };
        // The commit is the evidence: every file it changed is an artifact of the turn,
        // claimed or not (and checked against the commit like any claim).
        if let (Some(h), Some((result, _))) = (&hooked, claims_ok.as_mut()) {
            for path in &h.changed_files {
                if !result
                    .claim
                    .artifacts
                    .iter()
                    .any(|a| a.name.trim().trim_start_matches("./") == path)
                {
                    result.claim.artifacts.push(ArtifactClaim {
                        name: path.clone(),
                        kind: Some("file".into()),
                        description: format!("changed in turn {turn}"),
                        content: None,
                    });
                }
            }
        }
        let seen = if is_agent {
            WorkSeen::Agent {
                committed: hooked.as_ref().is_some_and(|h| h.workspace.changed),
            }
        } else {
            WorkSeen::Claims
        };
        let ctx = TurnContext {
            worker: &profile,
            turn,
            at: now,
            assignment: &plan.assignment,
            seen,
        };
        let mut step_left_open = false;
        // What the lane's turn did to the line (moved on, or asked a human).
        let mut happened = None;
        let (status, mut outcome, result_json, report_json) = match (claims_ok, line_answer) {
            (_, Some((answer, refusals, warnings))) => {
                let mut outcome = ReconcileOutcome {
                    refusals,
                    warnings,
                    ..ReconcileOutcome::default()
                };
                if let Some(lane) = &plan.line {
                    happened = Some(super::line::fold(
                        &mut next,
                        &ctx,
                        lane,
                        &answer,
                        &mut outcome,
                    ));
                }
                next.consecutive_failures = 0;
                (TurnStatus::Committed, outcome, Some(answer.to_json()), None)
            }
            (Some((mut result, report)), None) => {
                let mut refusals = result.refusals;
                refusals.extend(report.refusals);
                // A builder of the line says which findings it fixed by their ids among
                // its resolved issues: recorded as claimed fixes, for another to confirm.
                let mut fixes = ReconcileOutcome::default();
                if let Some(lane) = plan
                    .line
                    .as_deref()
                    .filter(|l| l.lane.seat.as_str().starts_with("build."))
                {
                    let turn = baton_core::reconciler::line::LineTurn {
                        ctx: &ctx,
                        station: &lane.station,
                        seat: &lane.lane.seat,
                        round: lane.round,
                        step: lane.step.as_deref(),
                    };
                    baton_core::reconciler::line::take_finding_fixes(
                        &mut next,
                        &turn,
                        &mut result.claim,
                        &mut fixes,
                    );
                }
                // A discovery lane advises; the lead that merges the lanes decides.
                if let Some(lane) = plan.line.as_deref().filter(|l| {
                    l.lane.role == baton_core::line::cursor::Role::Work
                        && l.route.stations.iter().any(|s| {
                            s.id == l.station && s.kind == baton_core::line::StationKind::Discovery
                        })
                }) {
                    baton_core::reconciler::line::advice_only(&mut result.claim, &lane.lane.seat);
                }
                let mut outcome = reconciler::reconcile(
                    &mut next,
                    &ctx,
                    &result.claim,
                    &report.claim,
                    refusals,
                    &*verifier,
                );
                // What parsing set aside (unknown fields, copied stamps) comes first.
                let mut parsed = result.warnings;
                parsed.extend(report.warnings);
                parsed.append(&mut outcome.warnings);
                outcome.warnings = parsed;
                outcome.accepted.append(&mut fixes.accepted);
                outcome.refusals.append(&mut fixes.refusals);
                outcome.warnings.append(&mut fixes.warnings);
                // The step is done when its turn commits with evidence of work,
                // whatever the claims said about completion; without it the step stays
                // open and the turn counts towards the failure breaker.
                match reconciler::complete_step(
                    &mut next,
                    &ctx,
                    &result.claim,
                    &report.claim,
                    &mut outcome,
                ) {
                    StepEnd::Done => {
                        events.push(Event {
                            run_id: session.run.clone(),
                            turn: Some(turn),
                            at: now,
                            kind: EventKind::StepDone {
                                step: plan.assignment.step_id.clone().unwrap_or_default(),
                                worker: worker.id.clone(),
                            },
                        });
                        next.consecutive_failures = 0;
                    }
                    StepEnd::NoStep => next.consecutive_failures = 0,
                    StepEnd::Open => {
                        step_left_open = true;
                        next.consecutive_failures += 1;
                    }
                }
                // Plain data structs: serialising them cannot fail.
                let rj =
                    Some(serde_json::to_value(&result.claim).unwrap_or(serde_json::Value::Null));
                let pj =
                    Some(serde_json::to_value(&report.claim).unwrap_or(serde_json::Value::Null));
                if let Some(lane) = &plan.line {
                    happened = Some(baton_core::line::cursor::Happened::Committed(vec![
                        lane.lane.clone(),
                    ]));
                }
                (TurnStatus::Committed, outcome, rj, pj)
            }
            (None, None) => {
                next.consecutive_failures += 1;
                reconciler::record_failed_turn(
                    &mut next,
                    &ctx,
                    error.as_deref().unwrap_or("the turn failed"),
                );
                // The line counts a seat's failures in a row (three ask a human).
                if let Some(lane) = &plan.line {
                    happened = Some(baton_core::line::cursor::Happened::Failed {
                        seat: lane.lane.seat.clone(),
                        error: error.clone().unwrap_or_else(|| "the turn failed".into()),
                    });
                }
                (TurnStatus::Failed, ReconcileOutcome::default(), None, None)
            }
        };
        outcome.warnings.extend(agent_warnings);
        outcome.warnings.append(&mut session.notices);
        if let Some(h) = &hooked {
            outcome.refusals.extend(h.refusals.iter().cloned());
            outcome.warnings.extend(h.warnings.iter().cloned());
        }
        next.turns += 1;
        // The gate station, on the commit the claims were checked against.
        if let Some(h) = hooked.as_mut()
            && status == TurnStatus::Committed
        {
            self.gate(
                session,
                plan,
                &ctx,
                &mut next,
                &mut outcome,
                &mut h.workspace,
            )?;
        }
        // Recorded only with a turn that commits (a cancelled one is not), first among
        // the turn's own events as it happened first.
        if let Some(fell) = self.fell_back(session, plan.worker, turn, now) {
            events.insert(0, fell);
        }
        for r in &outcome.refusals {
            events.push(Event {
                run_id: session.run.clone(),
                turn: Some(turn),
                at: now,
                kind: EventKind::ClaimRefused {
                    worker: worker.id.clone(),
                    claim: r.claim.clone(),
                    reason: r.reason.clone(),
                },
            });
        }
        for w in &outcome.warnings {
            events.push(Event {
                run_id: session.run.clone(),
                turn: Some(turn),
                at: now,
                kind: EventKind::Warning {
                    worker: worker.id.clone(),
                    text: w.clone(),
                },
            });
        }
        // The unit's progress moves on with the turn that moved it.
        if let (Some(lane), Some(happened)) = (&plan.line, happened) {
            let mut progress = lane.progress.clone();
            baton_core::line::cursor::advance(&lane.route, &mut progress, &next, happened);
            // Two workers contradicting each other on a decision: a human says which
            // holds (the lane's work stands; the line waits).
            if let Some(c) = outcome.contradicted.first() {
                let text = |id: &str| {
                    next.decisions
                        .iter()
                        .find(|d| d.id == id)
                        .map(|d| d.text.chars().take(160).collect::<String>())
                        .unwrap_or_default()
                };
                let question = format!(
                    "{} ({}) recorded {} \"{}\", which may contradict {} \"{}\" by {}; answer which holds (or how both do), and the answer is a decision every later briefing carries",
                    worker.id,
                    lane.lane.seat,
                    c.id,
                    text(&c.id),
                    c.of,
                    text(&c.of),
                    c.by
                );
                baton_core::line::cursor::advance(
                    &lane.route,
                    &mut progress,
                    &next,
                    baton_core::line::cursor::Happened::Asked(question),
                );
            }
            next.line = Some(progress);
        }
        let changes = next.diff(&session.state);
        events.push(Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: now,
            kind: EventKind::TurnCommitted {
                worker: worker.id.clone(),
                status: status.as_str().into(),
                changes: changes.len(),
                error: error.clone(),
                step_left_open,
                steps: Some((next.steps_done(), next.plan.len())),
            },
        });
        // What was published live comes first, in the order it happened; what the
        // reconciler said is published once it is durable.
        let mut all = self.take_turn_events(session);
        let live = all.len();
        all.append(&mut events);
        let events = all;

        let summary = TurnSummary {
            turn,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            assignment: plan.assignment.clone(),
            status,
            package_tokens: package.tokens,
            budget: package.budget,
            sections_omitted: package.omitted_titles(),
            items_dropped: package.dropped_count(),
            tokens_sent: calls.iter().map(|c| c.tokens_sent).sum(),
            tokens_received: calls.iter().map(|c| c.tokens_received).sum(),
            warnings: outcome.warnings.clone(),
            refusals: outcome.refusals.clone(),
            error: error.clone(),
            step_left_open,
            changes: changes.len(),
            conversations_passed: transfer.conversations_passed(),
            engine_time: Duration::ZERO,
        };
        let new_outputs: Vec<String> = calls.iter().filter_map(|c| c.output.clone()).collect();
        let fatal = calls.iter().rev().find_map(|c| {
            let class = c.error_class.as_ref()?;
            let agent_fatal = is_agent && AGENT_FATAL_CLASSES.contains(class);
            (FATAL_CLASSES.contains(class) || agent_fatal).then(|| Fatal {
                error: c.error.clone().unwrap_or_default(),
                agent: agent_fatal,
            })
        });
        let doomed = Doomed::of(turn, &calls, package.budget, package.tokens);
        let holds = holds::left_by(&worker.id, &calls, now);
        let record = TurnRecord {
            run_id: session.run.clone(),
            turn,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            family: worker.family.clone(),
            assignment: plan.assignment.clone(),
            status,
            package,
            calls,
            result: result_json,
            report: report_json,
            outcome,
            audit: transfer,
            error,
            workspace: hooked.map(|h| h.workspace),
            started_at,
            finished_at: now,
            lane: plan.line.as_ref().map(|l| l.record()),
        };
        let commit = TurnCommit {
            record,
            header: next.header(),
            changes,
            events,
            status: RunStatus::Active,
            lease: session.lease.clone(),
            run_lease: session.run_lease.as_ref().map(|l| l.token.clone()),
            holds: holds.clone(),
            pool: worker.pool.clone(),
            pins: new_pin.iter().cloned().collect(),
            reservation: plan.reservation.as_ref().and_then(|h| h.id()),
        };
        let seqs = self.commit(&commit)?;
        unbilled.committed();
        if let Some(held) = &plan.reservation {
            held.committed();
        }
        self.published(&seqs[live..], &commit.events[live..]);
        session.state = next;
        match &plan.line {
            Some(lane) => session.seated_lane(new_pin.as_ref(), lane, plan.worker, status),
            None => session.seated(
                new_pin.as_ref(),
                commit.record.assignment.step_id.as_deref(),
                plan.worker,
                status,
            ),
        }
        session.prior_outputs.extend(new_outputs);
        for hold in holds {
            session.holds.retain(|h| h.worker != hold.worker);
            session.holds.push(hold);
        }
        let engine_time = t0.elapsed().saturating_sub(model_time);
        Ok(TurnEnd {
            summary: TurnSummary {
                engine_time,
                ..summary
            },
            fatal,
            doomed,
        })
    }
}

/// A turn's briefing, compiled from the committed state and announced.
pub(super) struct Briefed {
    t0: Instant,
    turn: u32,
    worker: WorkerConfig,
    profile: baton_core::compiler::WorkerProfile,
    started_at: baton_core::ids::Timestamp,
    package: compiler::HandoffPackage,
    /// The turn's new seating, written with it.
    new_pin: Option<baton_core::router::Pin>,
}

/// What a turn's calls returned, before anything of it is reconciled.
pub(super) struct Called {
    calls: Vec<baton_core::turn::CallRecord>,
    prompts: Vec<Prompt>,
    own_outputs: Vec<String>,
    error: Option<String>,
    claims_ok: Option<(
        Parsed<WorkerResult>,
        Parsed<baton_core::claims::HandoffReport>,
    )>,
    line_answer: Option<<super::line::LineStation as super::station::Station>::Answer>,
    agent_warnings: Vec<String>,
    is_agent: bool,
}

impl Engine {
    /// A turn briefed and called that will not be committed (a lane after one whose
    /// commit failed): its live events are void, and what its calls spent is counted
    /// against its worker's pool all the same.
    pub(super) fn drop_turn(
        &self,
        session: &Session,
        briefed: &Briefed,
        called: &Called,
        reason: String,
    ) {
        drop(Unbilled::new(
            &*self.store,
            briefed.worker.pool.as_ref(),
            &session.run,
            briefed.turn,
            &called.calls,
            self.clock.now(),
        ));
        self.abandon_turn(session, briefed.turn, reason);
    }
}

impl Engine {
    /// Commits a turn; a turn another process committed first (fenced off) is
    /// `TurnTaken`: its turn stands.
    pub(super) fn commit(&self, commit: &TurnCommit) -> Result<Vec<u64>> {
        match self.store.commit_turn(commit) {
            Ok(seqs) => Ok(seqs),
            Err(baton_store::Error::TurnConflict { run, turn, .. }) => Err(Error::TurnTaken {
                run: run.to_string(),
                turn,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs the workspace's gates when they are due after this turn, and folds what they
    /// observed into `next`. Due is decided from the reconciled state, never from a
    /// guess at it: a gate-fix turn, gates that run every turn, or a turn after which
    /// the policy has nothing left (a step the reconciler left open is not done).
    fn gate(
        &self,
        session: &Session,
        plan: &Planned,
        ctx: &TurnContext<'_>,
        next: &mut baton_core::state::ExecutionState,
        outcome: &mut ReconcileOutcome,
        workspace: &mut baton_core::turn::WorkspaceTurn,
    ) -> Result<()> {
        let Some(station) = session.workspace.as_ref().and_then(|w| w.gates()) else {
            return Ok(());
        };
        // A lane of the assembly line is gated at the route's gate station, not here.
        if plan.line.is_some() {
            return Ok(());
        }
        let due = plan.gates || station.every_turn() || self.nothing_left(session, next);
        if !due {
            return Ok(());
        }
        let gated = station.run(&GateInput {
            turn: ctx.turn,
            commit: &workspace.commit,
            emit: &|kind| self.emit(session, ctx.turn, self.clock.now(), kind),
        })?;
        // Gates stopped half-way prove nothing either way.
        if session.cancel.is_cancelled() {
            return Err(Error::Cancelled { turn: ctx.turn });
        }
        gated.fold(next, ctx, outcome, workspace);
        Ok(())
    }

    /// Whether the worker makes an execute and a handoff call per turn: a replay asks
    /// the way its script was recorded (every script from before one call per turn
    /// has two), anyone else as the roster says (one by default).
    pub(super) fn two_calls(&self, session: &Session, worker: usize) -> bool {
        let recorded = session.gateways[worker]
            .as_ref()
            .and_then(|g| g.recorded_calls_per_turn());
        match recorded {
            Some(n) => n == 2,
            None => session.config.roster.workers[worker].calls == Some(Calls::Two),
        }
    }
}

/// What one turn left for `step` to decide on.
pub(super) struct TurnEnd {
    pub summary: TurnSummary,
    /// The failure, when a call failed in a way no retry can fix (see `FATAL_CLASSES`).
    pub fatal: Option<Fatal>,
    /// The execute request, when it failed in a way the same request fails again.
    pub doomed: Option<Doomed>,
}

/// A failure the same worker would meet again on the next try.
pub(super) struct Fatal {
    pub error: String,
    /// An agent's run that failed in a way a re-run repeats (see `AGENT_FATAL_CLASSES`).
    pub agent: bool,
}

/// Gateway failure classes that the same worker will meet again on the next try.
const FATAL_CLASSES: &[ErrorClass] = &[
    ErrorClass::Auth,
    ErrorClass::Config,
    ErrorClass::UnknownModel,
    ErrorClass::QuotaExhausted,
];

/// How an agent's run fails again when the same agent is run on the same briefing: a
/// hang costs its whole timeout each time, a question nobody answers is asked again,
/// a rejected flag or a missing login fails the same way. Not repeated with the same
/// agent: a team's next worker takes the turn, and a lone agent's job stops and says
/// why.
const AGENT_FATAL_CLASSES: &[ErrorClass] = &[
    ErrorClass::Timeout,
    ErrorClass::Interactive,
    ErrorClass::AgentExited,
];
