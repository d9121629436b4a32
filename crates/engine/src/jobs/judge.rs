//! The judge: a worker that compares a group's candidates against the rubric fixed at
//! enqueue time, blind. Candidates are labelled A, B, … in an order shuffled from the
//! group id; no worker id, model or family reaches the judge — only each candidate's
//! gate results, diff size and patch, with any such name that appears in them masked.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use baton_core::ErrorClass;
use baton_core::claims::extract_json_object;
use baton_core::ids::RunId;
use baton_core::prompt::Prompt;
use baton_core::turn::{CallKind, CallRecord};
use baton_gateway::Gateway;
use baton_protocol::{EventKind, EventMsg};
use baton_store::{CancelTarget, JobInfo, JobStatus, SpentBy, SpentCall, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{JobSpec, Outbox, decode_outbox, decode_spec};
use crate::cancel_watch::CancelWatch;
use crate::clock::Clock;
use crate::config::{RunSettings, WorkerConfig};
use crate::orchestrator::calls::{CallFailed, Caller, NoAnswer, TurnStream};
use crate::orchestrator::reshape::Reshape;
use crate::orchestrator::station::{Station, Unread};
use crate::publish::Publisher;
use crate::{Error, Result};

/// Characters of each candidate's patch the judge sees.
const PATCH_CHARS: usize = 12_000;

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "scores": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "candidate": {"type": "string"},
                        "score": {"type": "number"},
                        "reasons": {"type": "string"}
                    },
                    "required": ["candidate", "score", "reasons"],
                    "additionalProperties": false
                }
            },
            "winner": {"type": "string"},
            "verdict": {"type": "string"}
        },
        "required": ["scores", "winner", "verdict"],
        "additionalProperties": false
    })
});

/// What the judge said, as a model claim (read by `read_verdict`, leniently).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub scores: Vec<Score>,
    pub winner: String,
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub candidate: String,
    pub score: f64,
    pub reasons: String,
}

/// The recorded judgement: the verdict, and which label was which job (never shown to
/// the judge).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub group: String,
    pub rubric: String,
    pub labels: BTreeMap<String, String>,
    pub verdict: Verdict,
    /// The winning job.
    pub winner_job: String,
    pub judge: String,
    pub judge_model: String,
    /// The whole request as sent, so anyone can check what the judge saw.
    pub request: String,
    /// The judge's model calls as they went (a repair included): tokens, attempts,
    /// errors and cost, as a turn records its own. Empty in judgements recorded before
    /// the judge's calls were.
    #[serde(default)]
    pub calls: Vec<CallRecord>,
    /// The events its calls published as they happened (see [`JudgeRun`]). Empty in
    /// judgements recorded before they were kept.
    #[serde(default)]
    pub events: Vec<EventMsg>,
}

impl Judgement {
    /// What the judge's calls cost, when its price is known.
    pub fn cost_micro_usd(&self) -> Option<u64> {
        self.calls.iter().map(|c| c.cost_micro_usd).sum()
    }
}

/// The candidates of a group that finished, in the judge's (shuffled) order.
fn candidates(store: &dyn Store, group: &str) -> Result<Vec<(JobInfo, JobSpec, Outbox)>> {
    let mut out = Vec::new();
    for job in store.list_jobs()?.into_iter().filter(|j| j.group == group) {
        if !matches!(job.status, JobStatus::Outbox | JobStatus::Judged) {
            continue;
        }
        let spec = decode_spec(&job)?;
        if let Some(outbox) = decode_outbox(&job)? {
            out.push((job, spec, outbox));
        }
    }
    out.sort_by_key(|(job, _, _)| {
        let mut h = Sha256::new();
        h.update(group.as_bytes());
        h.update(job.id.as_bytes());
        h.finalize().to_vec()
    });
    Ok(out)
}

/// Replaces every name that could identify a candidate's workers, in any letter case
/// ("Claude" for a worker `claude`). Names shorter than three characters would garble
/// every patch and are left alone.
fn mask(text: &str, names: &[String]) -> String {
    let mut out = text.to_string();
    for name in names.iter().filter(|n| n.chars().count() >= 3) {
        out = replace_ignoring_case(&out, name, "[masked]");
    }
    out
}

fn replace_ignoring_case(text: &str, needle: &str, with: &str) -> String {
    let lower = text.to_lowercase();
    let needle = needle.to_lowercase();
    // Lower-casing can change byte lengths outside ASCII; then match exactly instead.
    if lower.len() != text.len() || needle.is_empty() {
        return text.replace(&needle, with);
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = lower[from..].find(&needle) {
        let start = from + at;
        out.push_str(&text[from..start]);
        out.push_str(with);
        from = start + needle.len();
    }
    out.push_str(&text[from..]);
    out
}

/// Builds the judge's request for a group: its prompt (system, user) and labels.
pub fn request(
    store: &dyn Store,
    group: &str,
) -> Result<(String, String, BTreeMap<String, String>, String)> {
    let cands = candidates(store, group)?;
    if cands.len() < 2 {
        return Err(Error::TooFewCandidates {
            group: group.to_string(),
            finished: cands.len(),
        });
    }
    let spec = &cands[0].1;
    let rubric = spec.rubric.clone().unwrap_or_else(|| {
        "Correctness first (do the gates pass, does the change do what the tasks ask), then \
         completeness, then simplicity and clarity of the change."
            .to_string()
    });
    let mut names: Vec<String> = Vec::new();
    for (job, s, o) in &cands {
        names.push(job.id.clone());
        names.push(o.branch.clone());
        names.push(o.run_id.0.clone());
        for w in &s.roster.workers {
            names.push(w.id.to_string());
            names.push(w.model.clone());
            names.push(
                w.model
                    .split_once('/')
                    .map(|(_, m)| m.to_string())
                    .unwrap_or_default(),
            );
            names.push(w.family.clone());
        }
    }
    // Longest first, so a name that contains another is masked whole.
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    names.dedup();
    let mut user = format!("# Objective\n{}\n\n# Tasks\n", spec.objective);
    for (i, t) in spec.tasks.iter().enumerate() {
        user.push_str(&format!("{}. {t}\n", i + 1));
    }
    user.push_str(&format!("\n# Rubric\n{rubric}\n"));
    let mut labels = BTreeMap::new();
    for (i, (job, _, outbox)) in cands.iter().enumerate() {
        let label = char::from(b'A' + (i as u8 % 26)).to_string();
        labels.insert(label.clone(), job.id.clone());
        user.push_str(&format!("\n# Candidate {label}\n"));
        user.push_str(&format!(
            "Diff: {} files changed, {} insertions, {} deletions.\n",
            outbox.diff.files_changed, outbox.diff.insertions, outbox.diff.deletions
        ));
        if outbox.gates.is_empty() {
            user.push_str("Gates: none configured.\n");
        }
        for g in &outbox.gates {
            user.push_str(&format!(
                "Gate {}: {} (exit {})\n",
                g.name,
                if g.passed { "PASSED" } else { "FAILED" },
                g.exit_code.map_or("none".to_string(), |c| c.to_string())
            ));
        }
        let patch = match std::fs::read(&outbox.patch_file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => format!(
                "[the patch file {} could not be read: {e}]",
                outbox.patch_file.display()
            ),
        };
        let clipped: String = patch.chars().take(PATCH_CHARS).collect();
        user.push_str("```diff\n");
        user.push_str(&clipped);
        if clipped.len() < patch.len() {
            user.push_str("\n[… patch shortened]");
        }
        user.push_str("\n```\n");
    }
    user.push_str(&format!(
        "\n# Your answer\nScore every candidate from 0 to 10 against the rubric, name the winner by its label, \
         and give a one-paragraph verdict. Return one JSON object matching this schema:\n{}\n",
        *SCHEMA
    ));
    let system = "You are a judge comparing candidate changes to one codebase, blind: you know \
                  them only by their labels. Judge the work, not its authors."
        .to_string();
    Ok((system, mask(&user, &names), labels, rubric))
}

/// Repair calls the judge is allowed after an answer that cannot be read.
const JUDGE_REPAIRS: u32 = 1;

/// The judge's station: what it is asked to answer and how its verdict is read.
struct Verdicts<'a> {
    labels: &'a BTreeMap<String, String>,
}

impl Station for Verdicts<'_> {
    type Answer = (Verdict, String);

    fn schema(&self, _call: CallKind) -> &Value {
        &SCHEMA
    }

    // A verdict is never lost over its form: read leniently, and once more after a
    // repair call that quotes what could not be read.
    fn read(&self, raw: &str) -> std::result::Result<Self::Answer, Unread> {
        read_verdict(raw, self.labels).map_err(|problem| Unread {
            problem,
            repairable: true,
        })
    }

    fn repair_prompt(&self, asked: &Prompt, raw: &str, problem: &str) -> Prompt {
        Prompt {
            system: asked.system.clone(),
            user: format!(
                "{}\n\n## Your answer\n{raw}\n\n## It could not be used\n{problem}\n\
                 Answer again with only the corrected JSON object: `scores` (one per candidate: \
                 `candidate` as its label, e.g. \"A\", `score` 0-10, `reasons`), `winner` (a label) \
                 and `verdict`.\n",
                asked.user
            ),
        }
    }
}

/// What a judge reports to and what stops it.
#[derive(Debug, Clone, Default)]
pub struct JudgeRun {
    /// Where the judge's events go as they happen: each call's `call_sent`,
    /// `retry_waiting` and `model_called` (provisional, `run_id` the group's id, no
    /// turn; kept with what the judge records), then the candidates' `judged` (stored in
    /// each candidate's run, with its `seq`), or `turn_abandoned` when it was stopped.
    pub publisher: Publisher,
    /// Stops the judge's calls and waits: an interrupt, or `baton cancel GROUP` (see
    /// [`watch_cancel`]).
    pub cancel: baton_gateway::Cancel,
}

/// A judge that got no usable verdict, as recorded in the group's judgements: what it
/// asked, the calls it made (and what they cost), its events, and why. The group's jobs
/// are left as they were, so it can be judged again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedJudgement {
    pub group: String,
    pub labels: BTreeMap<String, String>,
    pub judge: String,
    pub judge_model: String,
    pub request: String,
    pub calls: Vec<CallRecord>,
    #[serde(default)]
    pub events: Vec<EventMsg>,
    /// The failure's class: the provider's (`auth`, `timeout`, …), or `unparseable`
    /// for answers that could not be read.
    pub error_class: ErrorClass,
    pub error: String,
}

impl FailedJudgement {
    /// What the judge's calls cost, when its price is known.
    pub fn cost_micro_usd(&self) -> Option<u64> {
        self.calls.iter().map(|c| c.cost_micro_usd).sum()
    }
}

/// Asks `judge` (with its gateway) for a verdict on `group` and records it, with no
/// one listening and nothing to stop it but its own limits (see [`judge_with`]).
pub fn judge(
    store: &dyn Store,
    clock: &dyn Clock,
    group: &str,
    judge: &WorkerConfig,
    gateway: &dyn Gateway,
) -> Result<Judgement> {
    judge_with(store, clock, group, judge, gateway, &JudgeRun::default())
}

/// Asks `judge` (with its gateway) for a verdict on `group` and records it. The calls
/// go the way a turn's do (retried as the judge's `max_retries` says, repaired once,
/// scrubbed, costed by its price, published to `run.publisher` as they happen) and are
/// recorded with the judgement. A judge with no usable verdict is recorded too, as a
/// [`FailedJudgement`], and its error returned; a judge stopped by `run.cancel`
/// records nothing (`JudgeCancelled`).
pub fn judge_with(
    store: &dyn Store,
    clock: &dyn Clock,
    group: &str,
    judge: &WorkerConfig,
    gateway: &dyn Gateway,
    run: &JudgeRun,
) -> Result<Judgement> {
    let (system, user, labels, rubric) = request(store, group)?;
    // An agent may have written a key into its patch, and a provider may echo one: no
    // key of the judge's or of any candidate's reaches the judge or the record.
    let redactor = keys_of(store, group, judge)?;
    let user = redactor.scrub(&user);
    let estimator = RunSettings::default().estimator.build();
    let reshape = Reshape::default();
    // A judge belongs to no run: its events are its group's, stamped with the group's
    // id where a turn's carry their run's, and stored with the judgement (the events
    // table is per run, and a judge is not one).
    let stream_id = RunId(group.to_string());
    let kept = Mutex::new(Vec::new());
    let caller = Caller {
        worker: judge,
        gateway: Some(gateway),
        estimator: &*estimator,
        system_tokens: estimator.count(&system),
        briefing: None,
        redactor: &redactor,
        cancel: &run.cancel,
        clock,
        events: Some(TurnStream {
            publisher: &run.publisher,
            run: &stream_id,
            kept: &kept,
            in_turn: false,
        }),
        reshape: &reshape,
        workspace: None,
        output: None,
        repair_attempts: JUDGE_REPAIRS,
    };
    let prompt = Prompt { system, user };
    let request = format!("{}\n\n{}", prompt.system, prompt.user);
    let mut calls = Vec::with_capacity(2);
    let mut prompts = Vec::with_capacity(2);
    let station = Verdicts { labels: &labels };
    let answered = caller.call_for_answer(
        &station,
        prompt,
        CallKind::Execute,
        0,
        &mut calls,
        &mut prompts,
    );
    let events = std::mem::take(&mut *kept.lock().unwrap_or_else(PoisonError::into_inner));
    // Whatever becomes of the verdict (none, or a judge stopped half-way), the calls
    // its provider answered are billed: they count against the judge's pool.
    if let Some(pool) = &judge.pool {
        let spent: Vec<SpentCall> = calls.iter().map(SpentCall::of).collect();
        let by = SpentBy::Judge {
            group: group.to_string(),
        };
        store.record_spend(pool, &by, &spent, clock.now())?;
    }
    let (error_class, error, returned) = match answered {
        Ok(((verdict, winner_job), _)) => {
            let judgement = Judgement {
                group: group.to_string(),
                rubric,
                labels,
                verdict,
                winner_job,
                judge: judge.id.to_string(),
                judge_model: judge.model.clone(),
                request,
                calls,
                events,
            };
            store.record_judgement(group, &encode(&judgement)?, clock.now())?;
            super::events::announce(store, clock, &run.publisher, &judgement)?;
            return Ok(judgement);
        }
        // Stopped (an interrupt, `baton cancel`): nothing of it is recorded, as a turn
        // that was stopped is not committed.
        Err(NoAnswer::Failed { .. }) if run.cancel.is_cancelled() => {
            run.publisher.live(&EventMsg {
                run_id: stream_id,
                turn: None,
                at: clock.now(),
                kind: EventKind::TurnAbandoned {
                    reason: format!("the judge of group {group} was stopped; nothing was recorded"),
                },
            });
            return Err(Error::JudgeCancelled {
                group: group.to_string(),
            });
        }
        Err(NoAnswer::Failed {
            failed:
                CallFailed {
                    message,
                    error: Some(error),
                },
            ..
        }) => (
            error.class(),
            message,
            Error::Gateway {
                worker: judge.id.to_string(),
                error,
            },
        ),
        Err(other) => {
            let answers: Vec<String> = calls
                .iter()
                .map(|c| clip(c.output.as_deref().unwrap_or("")))
                .collect();
            let what = match &other {
                NoAnswer::Unread { problem, .. } => problem.clone(),
                NoAnswer::Failed { .. } => other.to_string(),
            };
            let repairs = match calls.len().saturating_sub(1) {
                0 => String::new(),
                1 => ", after one repair call".to_string(),
                n => format!(", after {n} repair calls"),
            };
            let detail = format!("{what}{repairs} (answers: {})", answers.join("; then "));
            (
                ErrorClass::Unparseable,
                format!("the judge's answer could not be used: {what}{repairs}"),
                Error::JudgeAnswer { detail },
            )
        }
    };
    let failed = FailedJudgement {
        group: group.to_string(),
        labels,
        judge: judge.id.to_string(),
        judge_model: judge.model.clone(),
        request,
        calls,
        events,
        error_class,
        error,
    };
    store.record_failed_judgement(group, &encode(&failed)?, clock.now())?;
    super::events::announce_failure(store, clock, &run.publisher, &failed)?;
    Err(returned)
}

fn encode(record: &impl Serialize) -> Result<Value> {
    serde_json::to_value(record).map_err(crate::unencodable("the judgement's record"))
}

/// Stops a judge of `group` when `baton cancel GROUP` asks, until dropped. Requests
/// made before it started are forgotten first (they were made while no judge ran), and
/// again when it is dropped.
pub fn watch_cancel(
    store: Arc<dyn Store>,
    group: &str,
    cancel: baton_gateway::Cancel,
) -> Result<GroupCancelWatch> {
    let target = CancelTarget::Group(group.to_string());
    store.clear_cancel(&target)?;
    let watch = CancelWatch::start(store.clone(), target.clone(), None, cancel);
    Ok(GroupCancelWatch {
        watch: Some(watch),
        store,
        target,
    })
}

/// See [`watch_cancel`].
pub struct GroupCancelWatch {
    watch: Option<CancelWatch>,
    store: Arc<dyn Store>,
    target: CancelTarget,
}

impl std::fmt::Debug for GroupCancelWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCancelWatch")
            .field("target", &self.target)
            .field("requested", &self.requested())
            .finish()
    }
}

impl GroupCancelWatch {
    /// Whether `baton cancel` asked the judge to stop.
    pub fn requested(&self) -> bool {
        self.watch.as_ref().is_some_and(CancelWatch::requested)
    }
}

impl Drop for GroupCancelWatch {
    fn drop(&mut self) {
        self.watch.take();
        // A request left behind is forgotten by the next judge's start anyway.
        let _ = self.store.clear_cancel(&self.target);
    }
}

/// Every key the judge or the group's candidates can be given (from the environment or
/// the judge's roster entry), for scrubbing.
fn keys_of(
    store: &dyn Store,
    group: &str,
    judge: &WorkerConfig,
) -> Result<baton_gateway::Redactor> {
    let mut workers = vec![judge.clone()];
    for (_, spec, _) in candidates(store, group)? {
        workers.extend(spec.roster.workers);
    }
    Ok(crate::config::redactor_for(&workers))
}

/// Reads a verdict as judges write them: labels as "A", "Candidate A", "candidate_a",
/// "(A)"; scores as numbers or "8/10"; fields the schema lacks ignored; a winner that is
/// missing or names no label taken from the best score. Says what is wrong otherwise.
fn read_verdict(
    answer: &str,
    labels: &BTreeMap<String, String>,
) -> std::result::Result<(Verdict, String), String> {
    let json = extract_json_object(answer)
        .ok_or_else(|| format!("no JSON object in {} bytes of answer", answer.len()))?;
    let value: Value =
        serde_json::from_str(json).map_err(|e| format!("the JSON does not parse: {e}"))?;
    let items = value
        .get("scores")
        .and_then(Value::as_array)
        .ok_or("no `scores` list")?;
    let mut scores = Vec::new();
    for item in items {
        let named = item
            .get("candidate")
            .or_else(|| item.get("label"))
            .map(text_of)
            .unwrap_or_default();
        let candidate = label_in(&named, labels)
            .ok_or_else(|| format!("a score names \"{named}\", which is no candidate's label"))?;
        let score = item
            .get("score")
            .and_then(number_of)
            .ok_or_else(|| format!("the score of candidate {candidate} is not a number"))?;
        scores.push(Score {
            candidate,
            score,
            reasons: item
                .get("reasons")
                .or_else(|| item.get("reason"))
                .map(text_of)
                .unwrap_or_default(),
        });
    }
    if scores.is_empty() {
        return Err("`scores` is empty".into());
    }
    let named = value.get("winner").map(text_of).unwrap_or_default();
    let winner = match label_in(&named, labels) {
        Some(label) => label,
        None => scores
            .iter()
            .max_by(|a, b| a.score.total_cmp(&b.score))
            .map(|s| s.candidate.clone())
            .ok_or("no winner")?,
    };
    let winner_job = labels.get(&winner).cloned().ok_or("no winner")?;
    let verdict = Verdict {
        scores,
        winner,
        verdict: value.get("verdict").map(text_of).unwrap_or_default(),
    };
    Ok((verdict, winner_job))
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn number_of(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.split('/').next().and_then(|n| n.trim().parse().ok()),
        _ => None,
    }?;
    n.is_finite().then_some(n)
}

/// The label `named` means: the whole text (any case), or after a leading
/// "candidate", without brackets, punctuation or what follows the label.
fn label_in(named: &str, labels: &BTreeMap<String, String>) -> Option<String> {
    let find = |t: &str| labels.keys().find(|l| l.eq_ignore_ascii_case(t)).cloned();
    let trimmed = named.trim_matches(|c: char| !c.is_alphanumeric());
    if let Some(l) = find(trimmed) {
        return Some(l);
    }
    let lower = trimmed.to_ascii_lowercase();
    let rest = lower.strip_prefix("candidate")?;
    let rest = rest.trim_start_matches(|c: char| !c.is_alphanumeric());
    let label: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
    find(&label)
}

fn clip(s: &str) -> String {
    baton_core::reconciler::clip(s, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> BTreeMap<String, String> {
        [("A", "job-1"), ("B", "job-2")]
            .into_iter()
            .map(|(l, j)| (l.to_string(), j.to_string()))
            .collect()
    }

    /// Regression: a real model answered "Candidate A" and the whole verdict was
    /// dropped as "invalid configuration".
    #[test]
    fn labels_in_any_reasonable_form_are_read() {
        let l = labels();
        for named in [
            "A",
            "a",
            "Candidate A",
            "candidate_b",
            "(B)",
            "Candidate B (the second)",
            "B.",
        ] {
            assert!(label_in(named, &l).is_some(), "{named}");
        }
        assert_eq!(label_in("Candidate A", &l).as_deref(), Some("A"));
        for named in ["C", "Candidate", "", "Alpha"] {
            assert_eq!(label_in(named, &l), None, "{named}");
        }
        let answer = r#"Here is my verdict: {"scores": [
            {"candidate": "Candidate A", "score": "7/10", "reasons": "ok", "confidence": "high"},
            {"candidate": "Candidate B", "score": 9}],
            "winner": "Candidate B", "verdict": "B is better"}"#;
        let (v, job) = read_verdict(answer, &l).unwrap();
        assert_eq!((v.winner.as_str(), job.as_str()), ("B", "job-2"));
        assert_eq!(v.scores[0].score, 7.0);
        // No usable winner: the best score decides.
        let (v, _) = read_verdict(
            r#"{"scores":[{"candidate":"A","score":8},{"candidate":"B","score":3}]}"#,
            &l,
        )
        .unwrap();
        assert_eq!(v.winner, "A");
        assert!(
            read_verdict("no json here", &l)
                .unwrap_err()
                .contains("no JSON")
        );
        assert!(
            read_verdict(r#"{"scores":[{"candidate":"Z","score":1}]}"#, &l)
                .unwrap_err()
                .contains("\"Z\"")
        );
    }

    #[test]
    fn names_are_masked_in_any_case_and_short_ones_are_left_alone() {
        let names = vec![
            "claude".to_string(),
            "ab".to_string(),
            "command/claude".to_string(),
        ];
        assert_eq!(
            mask(
                "Co-authored-by: Claude; CLAUDE.md; tab; command/claude",
                &names
            ),
            "Co-authored-by: [masked]; [masked].md; tab; command/[masked]"
        );
    }
}
