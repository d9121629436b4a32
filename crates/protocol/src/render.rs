//! The one human rendering of the event stream: the CLI prints it live, `baton export
//! --format events` prints it from the store, and both are this code, so they say the
//! same thing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::events::CallDetail;
use crate::{EventKind, EventMsg};

/// 12345 -> "12,345".
pub fn n(v: impl Into<u64>) -> String {
    let s = v.into().to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A turn's assignment as its lines name it: the step and the start of its task.
pub fn assignment_label(step: Option<&String>, task: &str) -> String {
    match step {
        Some(id) => format!("{id} {}", baton_core::reconciler::clip(task, 44)),
        None => "continuation".into(),
    }
}

/// What a turn said so far, for its one progress line at `TurnCommitted`.
#[derive(Debug, Default)]
struct Pending {
    turn: u32,
    worker: String,
    model: String,
    label: String,
    tokens: usize,
    budget: usize,
    refused: usize,
    warnings: usize,
}

/// Turns events into lines. Stateful: a turn's progress line is written when the
/// turn commits, from what its earlier events said (per run and turn: the turns of
/// concurrent jobs interleave, and so do the lanes of a unit's batch).
#[derive(Debug, Default)]
pub struct Renderer {
    /// Also a line per model call (`--verbose`).
    pub verbose: bool,
    pending: BTreeMap<(String, u32), Pending>,
    /// The job each run belongs to, once it was claimed: its lines say so.
    jobs: BTreeMap<String, String>,
    /// The judges said so far (group, time): one `judged` is stored in each candidate's
    /// run, and says one thing.
    judged: std::collections::BTreeSet<(String, i64)>,
}

impl Renderer {
    pub fn new(verbose: bool) -> Self {
        Renderer {
            verbose,
            ..Renderer::default()
        }
    }

    /// The lines `e` adds (often none: most events only feed the turn's line).
    pub fn feed(&mut self, e: &EventMsg) -> Vec<String> {
        let mut lines = self.lines(e);
        if let Some(job) = self.jobs.get(&e.run_id.0) {
            for line in &mut lines {
                if !line.starts_with("job ") {
                    *line = format!("job {job}: {}", line.trim_start());
                }
            }
        }
        lines
    }

    fn lines(&mut self, e: &EventMsg) -> Vec<String> {
        let mut out = Vec::new();
        let run = &e.run_id.0;
        let key = (run.clone(), e.turn.unwrap_or(0));
        let pending = self.pending.get_mut(&key);
        match &e.kind {
            EventKind::TurnStarted {
                worker,
                model,
                assignment,
                task,
            } => {
                let label = match task {
                    Some(task) if assignment != "continuation" => {
                        assignment_label(Some(assignment), task)
                    }
                    _ => assignment.clone(),
                };
                self.pending.insert(key, Pending {
                    turn: e.turn.unwrap_or(0),
                    worker: worker.to_string(),
                    model: model.clone(),
                    label,
                    ..Pending::default()
                });
            }
            EventKind::PackageCompiled { tokens, budget, .. } => {
                if let Some(p) = pending {
                    p.tokens = *tokens;
                    p.budget = *budget;
                }
            }
            EventKind::ClaimRefused { .. } => {
                if let Some(p) = pending {
                    p.refused += 1;
                }
            }
            EventKind::Warning { .. } => {
                if let Some(p) = pending {
                    p.warnings += 1;
                }
            }
            EventKind::ModelCalled {
                call,
                worker,
                ok,
                tokens_sent,
                detail:
                    CallDetail {
                        model,
                        duration_ms,
                        usage,
                        cost_micro_usd,
                        attempts,
                        error,
                    },
                ..
            } if self.verbose => {
                let mut line = format!(
                    "  call {call} · {worker} ({model}) · {duration_ms} ms · sent {} tokens",
                    n(*tokens_sent as u64)
                );
                if let Some([input, cached, output]) = usage {
                    let _ = write!(
                        line,
                        " · provider: {input} in ({cached} cached), {output} out"
                    );
                }
                if let Some(cost) = cost_micro_usd {
                    let _ = write!(line, " · {}", dollars(*cost));
                }
                if *attempts > 0 {
                    let _ = write!(line, " · {attempts} attempts");
                }
                match (error, ok) {
                    (Some(e), _) => {
                        let _ = write!(line, " · ERROR {e}");
                    }
                    (None, false) => line.push_str(" · ERROR"),
                    (None, true) => line.push_str(" · ok"),
                }
                out.push(line);
            }
            EventKind::RetryWaiting {
                worker,
                after_attempt,
                delay_ms,
            } if *delay_ms >= 2000 => out.push(format!(
                "  … {worker}: attempt {after_attempt} failed; the next goes out in {} s (Ctrl-C stops)",
                delay_ms / 1000
            )),
            EventKind::TurnCommitted {
                status,
                error,
                step_left_open,
                steps,
                ..
            } => {
                let p = self.pending.remove(&key).unwrap_or_default();
                let status = match (status.as_str(), step_left_open) {
                    ("committed", true) => format!(
                        "committed, but {} stays open: no evidence of work",
                        p.label.split(' ').next().unwrap_or("the step")
                    ),
                    ("committed", false) => "committed".to_string(),
                    _ => format!("FAILED: {}", error.as_deref().unwrap_or("unknown error")),
                };
                let mut line = format!(
                    "turn {:>3} · {} ({}) · {} · briefing {}/{} tokens{} · {status}",
                    p.turn,
                    p.worker,
                    p.model,
                    p.label,
                    n(p.tokens as u64),
                    n(p.budget as u64),
                    if p.tokens > p.budget {
                        " (OVER BUDGET: the task and objective alone do not fit)"
                    } else {
                        ""
                    },
                );
                if let Some((done, total)) = steps {
                    let _ = write!(line, " · steps {done}/{total}");
                }
                if p.refused > 0 {
                    let _ = write!(line, " · {} refused", p.refused);
                }
                if p.warnings > 0 {
                    let _ = write!(
                        line,
                        " · {} warning{}",
                        p.warnings,
                        if p.warnings == 1 { "" } else { "s" }
                    );
                }
                out.push(line);
            }
            EventKind::TurnAbandoned { reason } => {
                self.pending.remove(&key);
                out.push(format!("turn not committed: {reason}"));
            }
            EventKind::JobClaimed {
                job,
                candidate,
                reclaimed,
                ..
            } => {
                self.jobs.insert(run.clone(), job.clone());
                out.push(format!(
                    "job {job} ({candidate}) claimed{}",
                    if *reclaimed {
                        " — taken over (its previous worker died or stopped renewing its lease); it continues from its last committed turn"
                    } else {
                        ""
                    }
                ));
            }
            EventKind::GateStarted { name, command } => {
                out.push(format!("  gate {name}: {command}"))
            }
            EventKind::GateFinished {
                name,
                passed,
                duration_ms,
            } => out.push(format!(
                "  gate {name}: {} in {duration_ms} ms",
                if *passed { "passed" } else { "FAILED" }
            )),
            EventKind::LeaseLost { what, id, reason } => {
                out.push(format!("{what} {id}: lease lost ({reason})"))
            }
            EventKind::Seated {
                seat,
                worker,
                model,
                pool,
                reason,
                ..
            } => out.push(format!(
                "  seat {seat}: {worker} ({model}, pool {pool}), {reason}"
            )),
            EventKind::RosterChanged { changes, .. } => {
                for c in changes {
                    out.push(format!("roster of run {}: {c}", e.run_id));
                }
            }
            EventKind::RunBlocked { question } => {
                out.push(format!("run {} is blocked: {question}", e.run_id))
            }
            EventKind::Judged { group, .. } if !self.judged.insert((group.clone(), e.at.0)) => {}
            EventKind::Judged {
                group,
                candidates,
                error: Some(error),
                ..
            } => out.push(format!(
                "group {group}: the judge of {candidates} candidates FAILED: {error}"
            )),
            EventKind::Judged {
                group,
                candidates,
                winner,
                error: None,
            } => out.push(format!(
                "group {group}: judged {candidates} candidates{}",
                winner
                    .as_ref()
                    .map(|w| format!("; {w} wins"))
                    .unwrap_or_default()
            )),
            _ => {}
        }
        out
    }
}

/// Micro-dollars as "$0.012345".
pub fn dollars(micro: u64) -> String {
    format!("${}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// Every line a stream of events renders to, one per line.
pub fn lines<'a>(events: impl IntoIterator<Item = &'a EventMsg>, verbose: bool) -> String {
    let mut r = Renderer::new(verbose);
    let mut out = String::new();
    for e in events {
        for line in r.feed(e) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use baton_core::ids::{RunId, Timestamp, WorkerId};

    use super::*;

    fn ev(run: &str, turn: Option<u32>, kind: EventKind) -> EventMsg {
        EventMsg {
            run_id: RunId(run.into()),
            turn,
            at: Timestamp(0),
            kind,
        }
    }

    fn turn(run: &str, n: u32, committed: EventKind) -> Vec<EventMsg> {
        let w = WorkerId::new("w1");
        vec![
            ev(
                run,
                Some(n),
                EventKind::TurnStarted {
                    worker: w.clone(),
                    model: "mock/m".into(),
                    assignment: "T1".into(),
                    task: Some("write the parser".into()),
                },
            ),
            ev(
                run,
                Some(n),
                EventKind::PackageCompiled {
                    tokens: 1234,
                    budget: 2000,
                    sections_included: 13,
                    sections_omitted: vec![],
                    items_dropped: 0,
                },
            ),
            ev(
                run,
                Some(n),
                EventKind::Warning {
                    worker: w,
                    text: "x".into(),
                },
            ),
            ev(run, Some(n), committed),
        ]
    }

    fn committed(status: &str, error: Option<&str>) -> EventKind {
        EventKind::TurnCommitted {
            worker: WorkerId::new("w1"),
            status: status.into(),
            changes: 3,
            error: error.map(str::to_string),
            step_left_open: false,
            steps: Some((1, 2)),
        }
    }

    #[test]
    fn a_turn_renders_as_one_progress_line_when_it_commits() {
        let out = lines(&turn("r", 0, committed("committed", None)), false);
        assert_eq!(
            out,
            "turn   0 · w1 (mock/m) · T1 write the parser · briefing 1,234/2,000 tokens · committed · steps 1/2 · 1 warning\n"
        );
        let failed = lines(&turn("r", 4, committed("failed", Some("timeout"))), false);
        assert!(failed.contains("· FAILED: timeout · steps 1/2"), "{failed}");
    }

    /// A judge's `judged` is stored in each candidate's run: one line says it, and a
    /// judge without a verdict says why.
    #[test]
    fn a_judge_is_one_line_however_many_candidates_and_a_failed_one_says_why() {
        let judged = |run: &str, at: i64, error: Option<&str>| EventMsg {
            at: Timestamp(at),
            ..ev(
                run,
                None,
                EventKind::Judged {
                    group: "g1".into(),
                    candidates: 2,
                    winner: error.is_none().then(|| "job-b".to_string()),
                    error: error.map(str::to_string),
                },
            )
        };
        let out = lines(
            &[
                judged("ra", 5, Some("auth: Incorrect API key")),
                judged("rb", 5, Some("auth: Incorrect API key")),
                judged("ra", 9, None),
                judged("rb", 9, None),
            ],
            false,
        );
        assert_eq!(
            out,
            "group g1: the judge of 2 candidates FAILED: auth: Incorrect API key\n\
             group g1: judged 2 candidates; job-b wins\n"
        );
    }

    /// Two jobs' turns interleave in `baton work`: each line is its own run's, and says
    /// its job.
    #[test]
    fn interleaved_runs_keep_their_own_turns_and_jobs_are_named() {
        let claim = |run: &str, job: &str| {
            ev(
                run,
                None,
                EventKind::JobClaimed {
                    job: job.into(),
                    owner: "host:1".into(),
                    attempt: 1,
                    candidate: "A".into(),
                    reclaimed: false,
                },
            )
        };
        let (a, b) = (
            turn("ra", 0, committed("committed", None)),
            turn("rb", 0, committed("committed", None)),
        );
        let mut events = vec![claim("ra", "job-a"), claim("rb", "job-b")];
        for (x, y) in a.into_iter().zip(b) {
            events.push(x);
            events.push(y);
        }
        let out = lines(&events, false);
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got[0], "job job-a (A) claimed");
        assert!(got[2].starts_with("job job-a: turn   0 · w1"), "{out}");
        assert!(got[3].starts_with("job job-b: turn   0 · w1"), "{out}");
        assert_eq!(got.len(), 4);
    }

    /// The lanes of a unit's batch: one run's turns started together, committed in
    /// turn; each line is its own turn's.
    #[test]
    fn one_runs_turns_in_flight_together_keep_their_own_lines() {
        let (a, mut b) = (
            turn("r", 5, committed("committed", None)),
            turn("r", 6, committed("failed", Some("timeout"))),
        );
        if let EventKind::TurnStarted { worker, .. } = &mut b[0].kind {
            *worker = WorkerId::new("w2");
        }
        let mut events = Vec::new();
        for (x, y) in a.into_iter().zip(b) {
            events.push(x);
            events.push(y);
        }
        let out = lines(&events, false);
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got.len(), 2, "{out}");
        assert!(
            got[0].starts_with("turn   5 · w1") && got[0].contains("committed"),
            "{out}"
        );
        assert!(
            got[1].starts_with("turn   6 · w2") && got[1].contains("FAILED: timeout"),
            "{out}"
        );
    }
}
