//! One model call, for a turn or for the judge: the request, the retry policy around
//! it, what the call cost and what the provider asked for, and the repair calls when
//! its answer cannot be read. Every caller goes through `call` and `call_for_answer`,
//! so every call is retried, recorded, costed and scrubbed the same way.

use std::path::Path;
use std::time::Instant;

use baton_core::claims;
use baton_core::compiler::HandoffPackage;
use baton_core::prompt::Prompt;
use baton_core::tokens::{self, TokenEstimator};
use baton_core::turn::{AttemptRecord, CallKind, CallRecord, ReportedUsage};
use baton_gateway::{Gateway, ModelRequest, RetryPolicy, complete_with_retry};
use serde_json::Value;

use baton_core::ids::{RunId, Timestamp};
use baton_protocol::{CallDetail, EventKind, EventMsg};

use super::reshape::Reshape;
use super::station::{Station, Unread};
use super::{Engine, Session};
use crate::clock::Clock;
use crate::config::WorkerConfig;
use crate::publish::Publisher;

/// Everything a model call needs besides its prompt: whose call it is, through which
/// gateway, how its tokens are counted and what is scrubbed from its answer.
pub(crate) struct Caller<'a> {
    pub worker: &'a WorkerConfig,
    /// `None` for a disabled worker: the call fails without being sent.
    pub gateway: Option<&'a dyn Gateway>,
    pub estimator: &'a dyn TokenEstimator,
    /// Tokens of the system message, counted once by the caller (it rarely changes).
    pub system_tokens: usize,
    /// The briefing the call's user message begins with, when it has one: its tokens
    /// are known, so only what follows it is counted (see `count_extended`).
    pub briefing: Option<&'a HandoffPackage>,
    pub redactor: &'a baton_gateway::Redactor,
    pub cancel: &'a baton_gateway::Cancel,
    pub clock: &'a dyn Clock,
    /// Where the call's live events go (call sent, retry waiting, call returned):
    /// the turn's stream, or nowhere for a call that has none.
    pub events: Option<TurnStream<'a>>,
    /// How this call differs from one that failed before (see `reshape`).
    pub reshape: &'a Reshape,
    pub workspace: Option<&'a Path>,
    pub output: Option<&'a baton_gateway::OutputSink>,
    /// Repair calls allowed after an answer that cannot be read.
    pub repair_attempts: u32,
}

/// A turn's event stream, as a call sees it: each event is published live at once and
/// kept for the turn's commit (see `events.rs`), or for the judgement's record.
#[derive(Clone, Copy)]
pub(crate) struct TurnStream<'a> {
    pub publisher: &'a Publisher,
    /// The run the events belong to (for the judge's calls, its group: see `judge`).
    pub run: &'a RunId,
    pub kept: &'a std::sync::Mutex<Vec<EventMsg>>,
    /// False for calls that belong to no turn (the judge's): their events carry none.
    pub in_turn: bool,
}

impl TurnStream<'_> {
    pub(crate) fn emit(&self, turn: u32, at: Timestamp, kind: EventKind) {
        let event = EventMsg {
            run_id: self.run.clone(),
            turn: self.in_turn.then_some(turn),
            at,
            kind,
        };
        self.publisher.live(&event);
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }
}

/// A call that got no answer after its retries: what its record says, and the
/// gateway's error (none for a worker that is disabled, which sends nothing).
#[derive(Debug)]
pub(crate) struct CallFailed {
    pub message: String,
    pub error: Option<baton_gateway::Error>,
}

/// Why a station got nothing it could use.
#[derive(Debug)]
pub(crate) enum NoAnswer {
    /// The call failed (after its retries).
    Failed { kind: CallKind, failed: CallFailed },
    /// Answered, but not usably, after the repairs allowed.
    Unread { kind: CallKind, problem: String },
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAnswer::Failed { kind, failed } => {
                write!(f, "{} call failed: {}", kind.as_str(), failed.message)
            }
            NoAnswer::Unread { kind, problem } => {
                write!(f, "{} output rejected: {problem}", kind.as_str())
            }
        }
    }
}

impl Engine {
    /// The caller for `worker_index`'s calls in `session`'s turn, whose requests are
    /// built from `briefing`.
    pub(super) fn caller<'a>(
        &'a self,
        session: &'a Session,
        worker_index: usize,
        briefing: &'a HandoffPackage,
    ) -> Caller<'a> {
        Caller {
            worker: &session.config.roster.workers[worker_index],
            gateway: session.gateways[worker_index].as_deref(),
            estimator: &*session.estimator,
            system_tokens: session.system_tokens,
            briefing: Some(briefing),
            redactor: &session.redactor,
            cancel: &session.cancel,
            clock: &*self.clock,
            events: Some(self.turn_stream(session)),
            reshape: &session.reshape,
            workspace: session.workspace.as_ref().map(|w| w.path()),
            output: session.agent_output.as_ref(),
            repair_attempts: session.config.settings.repair_attempts,
        }
    }

    pub(super) fn call_model(
        &self,
        session: &Session,
        worker_index: usize,
        briefing: &HandoffPackage,
        prompt: &Prompt,
        call: CallKind,
        turn: u32,
    ) -> (CallRecord, std::result::Result<String, String>) {
        let (record, out) =
            self.caller(session, worker_index, briefing)
                .call(prompt, call, schema_of(call), turn);
        (record, out.map_err(|e| e.message))
    }

    /// One call and the parsing of its claim, with the configured repair calls when the
    /// output does not parse or fails its schema. Every call is pushed to `calls` and
    /// its prompt to `prompts`. Returns the claim and the raw text it came from.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_for_claim<T>(
        &self,
        session: &Session,
        worker_index: usize,
        briefing: &HandoffPackage,
        prompt: Prompt,
        call: CallKind,
        turn: u32,
        parse: fn(&str) -> baton_core::Result<T>,
        calls: &mut Vec<CallRecord>,
        prompts: &mut Vec<Prompt>,
    ) -> std::result::Result<(T, String), String> {
        let station = super::station::Claims { call, parse };
        self.caller(session, worker_index, briefing)
            .call_for_answer(&station, prompt, call, turn, calls, prompts)
            .map_err(|e| e.to_string())
    }
}

impl Caller<'_> {
    fn emit(&self, turn: u32, at: Timestamp, kind: EventKind) {
        if let Some(stream) = &self.events {
            stream.emit(turn, at, kind);
        }
    }

    /// One call of `call`'s kind, retried as the worker's policy says, and its record.
    pub(crate) fn call(
        &self,
        prompt: &Prompt,
        call: CallKind,
        schema: &Value,
        turn: u32,
    ) -> (CallRecord, std::result::Result<String, CallFailed>) {
        let worker = self.worker;
        let model_name = worker
            .model
            .split_once('/')
            .map(|(_, m)| m)
            .unwrap_or(&worker.model);
        let hashed = baton_gateway::PairHashMemo::default();
        let request = ModelRequest {
            model: model_name,
            system: &prompt.system,
            user: &prompt.user,
            call,
            turn,
            schema,
            max_tokens: self.reshape.max_tokens(call, worker.max_tokens),
            temperature: super::reshape::temperature(call, worker.temperature),
            workspace: self.workspace,
            cancel: Some(self.cancel),
            output: self.output,
            hashed: Some(&hashed),
        };
        // What goes on the wire besides the messages, read before the call: a gateway
        // may change how it asks after this one.
        let format_tokens = self
            .gateway
            .and_then(|g| g.answer_format_sent(&request))
            .map_or(0, |f| self.estimator.count(&f));
        let started_at = self.clock.now();
        let t0 = Instant::now();
        let retries = match self.gateway {
            Some(g) if !g.retries_in_place() => 0,
            _ => worker.max_retries,
        };
        let retry = RetryPolicy::new(retries);
        let mut error_class = None;
        let mut error_message = None;
        let mut partial_output = None;
        let mut retry_after = None;
        let mut quota_reset = None;
        let (outcome, attempts) = match self.gateway {
            None => (
                Err(CallFailed {
                    message: format!("worker {} is disabled", worker.id),
                    error: None,
                }),
                Vec::new(),
            ),
            Some(gateway) => {
                let sent = |attempt: u32| EventKind::CallSent {
                    call: call.as_str().into(),
                    worker: worker.id.clone(),
                    model: worker.model.clone(),
                    attempt,
                    attempts: retry.max_retries + 1,
                    timeout_ms: gateway
                        .call_timeout()
                        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                };
                self.emit(turn, started_at, sent(1));
                let mut attempt = 1;
                // A wait the provider asked for ends early on an interrupt.
                let mut sleep = |d: std::time::Duration| {
                    self.emit(
                        turn,
                        self.clock.now(),
                        EventKind::RetryWaiting {
                            worker: worker.id.clone(),
                            after_attempt: attempt,
                            delay_ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
                        },
                    );
                    self.cancel.sleep(d);
                    attempt += 1;
                    self.emit(turn, self.clock.now(), sent(attempt));
                };
                let (result, attempts) = complete_with_retry(gateway, &request, &retry, &mut sleep);
                let tries = attempts.len();
                if let Err(e) = &result {
                    error_class = Some(e.class());
                    error_message = Some(self.redactor.scrub(&e.to_string()));
                    partial_output = e.partial_output().map(|p| self.redactor.scrub(p));
                    retry_after = e.retry_after();
                    quota_reset = e.quota_reset();
                    // Interrupted while waiting out a provider's delay: the delay is
                    // still the provider's word (the turn's hold keeps it).
                    if matches!(e, baton_gateway::Error::Cancelled) {
                        retry_after = attempts.iter().rev().find_map(|a| a.retry_after);
                    }
                }
                let result = result.map_err(|e| {
                    let after = if tries > 1 {
                        format!(" after {tries} attempts")
                    } else {
                        String::new()
                    };
                    let declined = match retry.declined_wait(&e) {
                        Some(asked) => format!(
                            "; baton declined to wait {} s (it waits at most {} s); the provider said it can be retried after {}",
                            asked.as_secs(),
                            retry.max_wait.as_secs(),
                            super::holds::after(self.clock.now(), asked)
                        ),
                        None => String::new(),
                    };
                    CallFailed {
                        message: format!("{}{after}: {e}{declined}", e.class()),
                        error: Some(e),
                    }
                });
                (result, attempts)
            }
        };
        // A provider echoing a key (its own or another worker's) in its reply must not
        // carry it into the record, the next briefing or another provider's request.
        let outcome = outcome
            .map(|mut r| {
                r.text = self.redactor.scrub(&r.text);
                r
            })
            .map_err(|e| CallFailed {
                message: self.redactor.scrub(&e.message),
                error: e.error,
            });
        // Every attempt's reported usage counts, rejected replies included: the provider
        // bills a truncated or empty answer as it bills a good one. All zeros means the
        // gateway had nothing to report (an agent CLI without usage).
        let billed = attempts
            .iter()
            .fold(baton_gateway::Usage::default(), |sum, a| sum.plus(a.usage));
        let usage = (billed != baton_gateway::Usage::default()).then_some(ReportedUsage {
            input_tokens: billed.input_tokens,
            output_tokens: billed.output_tokens,
            cached_tokens: billed.cached_tokens,
        });
        // Counted once per attempt that may have reached the provider (each is billed):
        // both messages and, where the gateway sends one, the answer format (a schema
        // rides in every request that enforces one). An attempt that never connected
        // cost nothing and counts nothing.
        let user_tokens = match self.briefing {
            Some(b) if b.estimator == self.estimator.name() => {
                tokens::count_extended(self.estimator, &b.text, b.tokens, &prompt.user)
            }
            _ => self.estimator.count(&prompt.user),
        };
        let per_attempt = self.system_tokens + user_tokens + format_tokens;
        let tokens_sent = per_attempt * attempts.iter().filter(|a| a.sent).count();
        let record = CallRecord {
            call,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            messages: outcome
                .as_ref()
                .map_or(Prompt::MESSAGES, |r| r.sent.messages),
            // The gateway that sent the request as it was handed hashed these bytes.
            request_hash: request.pair_hash(),
            sent_hash: outcome.as_ref().ok().map(|r| r.sent.request_hash.clone()),
            tokens_sent,
            tokens_received: outcome
                .as_ref()
                .map(|r| self.estimator.count(&r.text))
                .unwrap_or(0),
            output: outcome.as_ref().ok().map(|r| r.text.clone()),
            error: outcome.as_ref().err().map(|e| e.message.clone()),
            error_class,
            error_message,
            partial_output,
            started_at,
            duration_ms: t0.elapsed().as_millis() as u64,
            cost_micro_usd: match (&worker.price, usage) {
                (Some(price), Some(u)) => {
                    Some(price.cost_micro_usd(u.input_tokens, u.output_tokens, u.cached_tokens))
                }
                _ => None,
            },
            usage,
            attempts: if attempts.len() > 1 {
                attempts
                    .iter()
                    .map(|a| AttemptRecord {
                        error: a.error_class.clone(),
                        retry_after_ms: a.retry_after.map(|d| d.as_millis() as u64),
                        waited_ms: a.delay.map(|d| d.as_millis() as u64),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            retry_after_ms: retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            // Counted from the engine's clock, as every other instant in the record.
            quota_reset_at: quota_reset.map(|d| {
                let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                baton_core::ids::Timestamp(self.clock.now().0.saturating_add(ms))
            }),
        };
        // Not published here: whoever reads the answer decides whether it was usable,
        // and the stream must say what the committed record says (see `returned`).
        (record, outcome.map(|r| r.text))
    }

    /// Publishes `record`'s `model_called` once its answer was read (or refused), so
    /// the event says "ok" exactly when the record does.
    pub(crate) fn returned(&self, turn: u32, record: &CallRecord) {
        self.emit(turn, record.started_at, model_called(record));
    }

    /// One call and the reading of its answer by `station`, with the repair calls
    /// allowed when the answer cannot be read and a repair may fix it. Every call is
    /// pushed to `calls` and its prompt to `prompts`. Returns what the station read and
    /// the raw text it came from.
    pub(crate) fn call_for_answer<S: Station>(
        &self,
        station: &S,
        prompt: Prompt,
        call: CallKind,
        turn: u32,
        calls: &mut Vec<CallRecord>,
        prompts: &mut Vec<Prompt>,
    ) -> std::result::Result<(S::Answer, String), NoAnswer> {
        let mut repairs_left = self.repair_attempts;
        let mut kind = call;
        let mut current = self.reshape.prompt(call, prompt, station.schema(call));
        loop {
            let (mut record, out) = self.call(&current, kind, station.schema(kind), turn);
            let raw = match out {
                Ok(raw) => raw,
                Err(failed) => {
                    self.returned(turn, &record);
                    calls.push(record);
                    prompts.push(current);
                    return Err(NoAnswer::Failed { kind, failed });
                }
            };
            let (problem, repairable) = match station.read(&raw) {
                Ok(read) => {
                    self.returned(turn, &record);
                    calls.push(record);
                    prompts.push(current);
                    return Ok((read, raw));
                }
                Err(Unread {
                    problem,
                    repairable,
                }) => (problem, repairable),
            };
            record.error = Some(problem.clone());
            self.returned(turn, &record);
            calls.push(record);
            let repair = call.repair().filter(|_| repairable && repairs_left > 0);
            let Some(repair) = repair else {
                prompts.push(current);
                return Err(NoAnswer::Unread { kind, problem });
            };
            repairs_left -= 1;
            kind = repair;
            let next = station.repair_prompt(&current, &raw, &problem);
            prompts.push(std::mem::replace(&mut current, next));
        }
    }
}

/// The JSON Schema `call`'s answer must match.
pub(super) fn schema_of(call: CallKind) -> &'static serde_json::Value {
    match call {
        CallKind::Execute | CallKind::ExecuteRepair => claims::worker_result_schema(),
        CallKind::Handoff | CallKind::HandoffRepair => claims::handoff_report_schema(),
        CallKind::Combined | CallKind::CombinedRepair => claims::turn_answer_schema(),
    }
}

/// The event of a call that returned (or failed after its retries): what the stream
/// and every renderer of it show of the call's record.
pub fn model_called(record: &CallRecord) -> EventKind {
    EventKind::ModelCalled {
        call: record.call.as_str().into(),
        worker: record.worker.clone(),
        ok: record.error.is_none(),
        tokens_sent: record.tokens_sent,
        tokens_received: record.tokens_received,
        detail: CallDetail {
            model: record.model.clone(),
            duration_ms: record.duration_ms,
            usage: record
                .usage
                .map(|u| [u.input_tokens, u.cached_tokens, u.output_tokens]),
            cost_micro_usd: record.cost_micro_usd,
            attempts: record.attempts.len() as u64,
            error: record.error.clone(),
        },
    }
}
