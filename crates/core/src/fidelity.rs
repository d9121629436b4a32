//! The fidelity benchmark (`baton bench --fidelity`): long offline runs compiled and
//! reconciled in-process, where the generator knows which records each briefing must
//! carry, and what every briefing actually delivered.
//!
//! One run: a plan of `steps` steps worked over `turns` turns (each step takes
//! `turns / steps` turns), five workers in rotation. Every turn compiles the briefing
//! at `budget`, then reconciles a worker result and a handoff report built from the
//! turn's area: founding decisions at turn 0, an area decision every few turns and now
//! and then a decision that reverses an earlier one (citing its id, as the briefing asks
//! workers to), high and critical issues that a gate closes some turns later (two stay
//! open all run), failed attempts in the step's area, and warnings and notes in every
//! handoff (some long, with what to do at the end). `volume` records per turn are then
//! appended directly, as the reconciler would have created them (completed work,
//! artifacts, assumptions, low and medium issues, detail decisions): they are the
//! pressure on the budget and the caps, and appending them directly keeps a 10,000-item
//! run to seconds.
//!
//! Relevant to a briefing, per category: every open high or critical issue; the failed
//! attempts recorded in the assigned step's area (none for a continuation, which has no
//! step); the founding decisions; every decision
//! that reversed an earlier one; the predecessor's warnings; its notes; and the assigned
//! task with the objective in full. Delivered means the package's section report lists
//! the record as kept (a warning or the notes in their shortened form count).

use serde::Serialize;

use crate::claims::{DecisionClaim, FailedAttemptClaim, HandoffReport, IssueClaim, WorkerResult};
use crate::compiler::{
    Assignment, AssignmentKind, HandoffPackage, Section, WorkerProfile, compile,
};
use crate::ids::{RunId, Timestamp, WorkerId};
use crate::reconciler::{NoVerifier, ReconcileOutcome, TurnContext, apply_gates, reconcile};
use crate::state::{
    Artifact, ArtifactVersion, Assumption, CompletedWork, Decision, ExecutionState, Issue,
    IssueStatus, Provenance, Severity, StepStatus,
};
use crate::tokens::TokenEstimator;
use crate::turn::GateResult;

/// One configuration of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FidelityCase {
    pub turns: u32,
    pub steps: usize,
    pub budget: usize,
    /// Records appended per turn besides the turn's own claims.
    pub volume: usize,
}

/// What a briefing must carry, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The assigned task and the objective, both in full.
    Assignment,
    /// Every warning of the predecessor's handoff.
    Warnings,
    /// The predecessor's notes.
    Notes,
    /// Every open issue of high or critical severity.
    OpenIssues,
    /// Failed attempts recorded in the assigned step's area.
    FailedAttempts,
    /// The decisions of the first turn.
    FoundingDecisions,
    /// Every decision that reversed an earlier one.
    ReversedDecisions,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::Assignment,
        Category::Warnings,
        Category::Notes,
        Category::OpenIssues,
        Category::FailedAttempts,
        Category::FoundingDecisions,
        Category::ReversedDecisions,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Category::Assignment => "assignment",
            Category::Warnings => "warnings",
            Category::Notes => "notes",
            Category::OpenIssues => "open high/critical issues",
            Category::FailedAttempts => "failed attempts (same area)",
            Category::FoundingDecisions => "founding decisions",
            Category::ReversedDecisions => "reversed decisions",
        }
    }
}

/// Relevant and delivered items of one category over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Relevant (item, briefing) pairs.
    pub relevant: u64,
    /// Of them, delivered.
    pub delivered: u64,
    /// Briefings with at least one relevant item of the category.
    pub briefings: u32,
    /// Of them, briefings that delivered every relevant item.
    pub complete: u32,
}

impl Tally {
    fn add(&mut self, relevant: usize, delivered: usize) {
        if relevant == 0 {
            return;
        }
        self.relevant += relevant as u64;
        self.delivered += delivered as u64;
        self.briefings += 1;
        self.complete += u32::from(delivered == relevant);
    }

    /// Delivered over relevant; 1 when nothing was relevant.
    pub fn fraction(&self) -> f64 {
        if self.relevant == 0 {
            1.0
        } else {
            self.delivered as f64 / self.relevant as f64
        }
    }
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FidelityRow {
    pub case: FidelityCase,
    /// One tally per `Category::ALL`, in that order.
    pub tallies: Vec<(Category, Tally)>,
    pub briefings: u32,
    pub over_budget: u32,
    /// Records in the state at the end of the run.
    pub final_items: usize,
    pub mean_tokens: usize,
}

impl FidelityRow {
    pub fn tally(&self, category: Category) -> Tally {
        self.tallies
            .iter()
            .find(|(c, _)| *c == category)
            .map(|(_, t)| *t)
            .unwrap_or_default()
    }
}

/// The cases `baton bench --fidelity` runs: 100 turns, plans of 10 and 40 steps,
/// budgets 300 / 800 / 1,600 / 3,000, and about 680 or 9,600 records at the end.
pub fn standard_cases() -> Vec<FidelityCase> {
    let mut cases = Vec::new();
    for volume in [5, 94] {
        for steps in [10, 40] {
            for budget in [300, 800, 1600, 3000] {
                cases.push(FidelityCase {
                    turns: 100,
                    steps,
                    budget,
                    volume,
                });
            }
        }
    }
    cases
}

const OBJECTIVE: &str = "Ship a task tracking REST service: users, projects and tasks in \
PostgreSQL, token authentication, an OpenAPI description, and tests against a real database.";

/// The areas steps work in; a step's title and its records name its area.
const AREAS: &[&str] = &[
    "cursor pagination of list endpoints",
    "refresh token rotation",
    "password hashing",
    "login rate limiting",
    "project membership checks",
    "task due dates",
    "the OpenAPI description",
    "database migrations",
    "structured request logging",
    "error response bodies",
    "soft deletes of projects",
    "task assignment notifications",
    "full text search of tasks",
    "webhook delivery retries",
    "session expiry",
];

const STEP_VERBS: &[&str] = &["Implement", "Test", "Harden", "Document"];

const CHOICES: &[&str] = &[
    "a single SQL query per request",
    "a background worker queue",
    "a Redis counter with a sliding window",
    "an explicit state machine",
    "a dedicated service module",
    "server-side validation only",
];

const APPROACHES: &[&str] = &[
    "reuse the ORM's default behaviour",
    "patch the handler in place",
    "cache the intermediate results in memory",
    "run the work inside the request",
    "rely on the client to retry",
];

const FAILURES: &[&str] = &[
    "the integration tests deadlocked on the shared database",
    "it broke the existing contract tests",
    "latency went above 800 ms under load",
    "it silently dropped rows under concurrent writes",
];

const PROBLEMS: &[&str] = &[
    "returns 500 on malformed input",
    "lets a revoked token through once",
    "skips the permission check for archived projects",
    "corrupts data when two requests race",
];

const WORKERS: &[(&str, &str, &str)] = &[
    ("w1", "mock/alpha-large", "alpha"),
    ("w2", "mock/beta-pro", "beta"),
    ("w3", "mock/gamma-fast", "gamma"),
    ("w4", "mock/alpha-small", "alpha"),
    ("w5", "mock/delta", "delta"),
];

fn step_title(i: usize) -> String {
    let verb = STEP_VERBS[(i / AREAS.len()) % STEP_VERBS.len()];
    format!("{verb} {}", AREAS[i % AREAS.len()])
}

fn area_of_step(i: usize) -> usize {
    i % AREAS.len()
}

fn worker(t: u32) -> WorkerProfile {
    let (id, model, family) = WORKERS[t as usize % WORKERS.len()];
    WorkerProfile {
        id: WorkerId::new(id),
        model: model.into(),
        family: family.into(),
        role: None,
    }
}

fn at(t: u32) -> Timestamp {
    Timestamp(1_767_225_600_000 + i64::from(t) * 60_000)
}

/// Generator bookkeeping: what each signal record is, by id.
#[derive(Default)]
struct Truth {
    founding: Vec<String>,
    /// Area decisions that may be reversed later: (id, area, choice).
    area_decisions: Vec<(String, usize, usize)>,
    reversals: Vec<String>,
    /// High and critical issues: (id, gate, turn it is closed at, if ever).
    severe: Vec<(String, String, Option<u32>)>,
    /// Failed attempts: (id, area).
    failed: Vec<(String, usize)>,
}

fn kept(p: &HandoffPackage, section: Section) -> impl Iterator<Item = &str> {
    p.sections
        .iter()
        .filter(move |r| r.section == section)
        .flat_map(|r| r.kept.iter().map(|k| k.item.as_str()))
}

fn count_kept(p: &HandoffPackage, section: Section, ids: &[&str]) -> usize {
    let kept: Vec<&str> = kept(p, section).collect();
    ids.iter().filter(|id| kept.contains(id)).count()
}

/// Runs one case with `estimator` and measures every briefing.
pub fn run(case: &FidelityCase, estimator: &dyn TokenEstimator) -> FidelityRow {
    let steps = case.steps.max(1);
    let titles: Vec<String> = (0..steps).map(step_title).collect();
    let mut state = ExecutionState::new(RunId("fidelity".into()), OBJECTIVE, &titles);
    let mut truth = Truth::default();
    let mut tallies: Vec<(Category, Tally)> = Category::ALL
        .iter()
        .map(|c| (*c, Tally::default()))
        .collect();
    let (mut over_budget, mut tokens) = (0u32, 0usize);
    let turns_per_step = (case.turns as usize / steps).max(1);
    for t in 0..case.turns {
        let s = (t as usize / turns_per_step).min(steps - 1);
        let area = area_of_step(s);
        let assignment = if state.plan[s].status == StepStatus::Pending {
            Assignment {
                kind: AssignmentKind::Step,
                step_id: Some(state.plan[s].id.clone()),
                task: titles[s].clone(),
            }
        } else {
            Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: "Continue from the record: fix the open issues".into(),
            }
        };
        let w = worker(t);
        state.turns = t;
        let p = compile(&state, &assignment, &w, case.budget, estimator);
        over_budget += u32::from(p.over_budget);
        tokens += p.tokens;
        // A continuation has no step, so no area of its own.
        let step_area = (assignment.kind == AssignmentKind::Step).then_some(area);
        measure(&p, &state, &truth, step_area, &assignment, &mut tallies);

        let (result, report) = claims(t, s, area, &truth, &state);
        let ctx = TurnContext {
            worker: &w,
            turn: t,
            at: at(t),
            assignment: &assignment,
            seen: Default::default(),
        };
        let mut out = reconcile(&mut state, &ctx, &result, &report, Vec::new(), &NoVerifier);
        label(t, area, &result, &state, &mut truth);
        close_issues(t, &mut state, &ctx, &truth, &mut out);
        if (t as usize + 1).is_multiple_of(turns_per_step) || t + 1 == case.turns {
            let step = &mut state.plan[s];
            step.status = StepStatus::Done;
            step.done_by = Some(w.id.clone());
            step.done_at_turn = Some(t);
        }
        append_volume(&mut state, t, case.volume, &w);
        state.turns = t + 1;
    }
    FidelityRow {
        case: *case,
        tallies,
        briefings: case.turns,
        over_budget,
        final_items: state.item_count(),
        mean_tokens: tokens / case.turns.max(1) as usize,
    }
}

fn measure(
    p: &HandoffPackage,
    state: &ExecutionState,
    truth: &Truth,
    area: Option<usize>,
    assignment: &Assignment,
    tallies: &mut [(Category, Tally)],
) {
    let mut add = |c: Category, relevant: usize, delivered: usize| {
        if let Some((_, tally)) = tallies.iter_mut().find(|(k, _)| *k == c) {
            tally.add(relevant, delivered);
        }
    };
    let full =
        !p.over_budget && p.text.contains(&assignment.task) && p.text.contains(&state.objective);
    add(Category::Assignment, 1, usize::from(full));
    if let Some(h) = state.handoffs.last() {
        let ids: Vec<String> = (1..=h.warnings.len())
            .map(|k| format!("{}.warning{k}", h.id))
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        add(
            Category::Warnings,
            ids.len(),
            count_kept(p, Section::PreviousWorkerNotes, &ids),
        );
        if !h.notes.is_empty() {
            let id = format!("{}.notes", h.id);
            add(
                Category::Notes,
                1,
                count_kept(p, Section::PreviousWorkerNotes, &[&id]),
            );
        }
    }
    let open: Vec<&str> = truth
        .severe
        .iter()
        .map(|(id, _, _)| id.as_str())
        .filter(|id| {
            state
                .issues
                .iter()
                .any(|i| i.id == *id && i.status == IssueStatus::Open)
        })
        .collect();
    add(
        Category::OpenIssues,
        open.len(),
        count_kept(p, Section::UnresolvedIssues, &open),
    );
    let failed: Vec<&str> = truth
        .failed
        .iter()
        .filter(|(_, a)| Some(*a) == area)
        .map(|(id, _)| id.as_str())
        .collect();
    add(
        Category::FailedAttempts,
        failed.len(),
        count_kept(p, Section::FailedAttempts, &failed),
    );
    let founding: Vec<&str> = truth.founding.iter().map(String::as_str).collect();
    add(
        Category::FoundingDecisions,
        founding.len(),
        count_kept(p, Section::Decisions, &founding),
    );
    let reversals: Vec<&str> = truth.reversals.iter().map(String::as_str).collect();
    add(
        Category::ReversedDecisions,
        reversals.len(),
        count_kept(p, Section::Decisions, &reversals),
    );
}

/// The turn's worker result and handoff report.
fn claims(
    t: u32,
    s: usize,
    area: usize,
    truth: &Truth,
    state: &ExecutionState,
) -> (WorkerResult, HandoffReport) {
    let name = AREAS[area];
    let n = t as usize;
    let mut result = WorkerResult {
        summary: format!("Worked on {name} for step T{} at turn {t}.", s + 1),
        completed: vec![format!(
            "Progress on {name}: part {t} of the step is in place"
        )],
        last_action: format!("Ran the {name} tests after change {t}"),
        next_action: Some(format!("Continue {name} with change {}", t + 1)),
        ..WorkerResult::default()
    };
    if t == 0 {
        result.decisions = vec![
            DecisionClaim {
                text: "Store every timestamp in UTC as timestamptz".into(),
                reason: Some("reports are compared across time zones".into()),
            },
            DecisionClaim {
                text: "Serve every endpoint under /api/v1 with JSON bodies only".into(),
                reason: Some("the mobile client is built against that contract".into()),
            },
        ];
    } else if n % 5 == 3 {
        let choice = n % CHOICES.len();
        result.decisions.push(DecisionClaim {
            text: format!("Build {name} with {}", CHOICES[choice]),
            reason: Some(format!("it was the simplest option at turn {t}")),
        });
    } else if n % 20 == 12 {
        // Reverse the oldest area decision not reversed yet.
        if let Some((id, a, choice)) = truth.area_decisions.first() {
            let next = CHOICES[(choice + 1) % CHOICES.len()];
            result.decisions.push(DecisionClaim {
                text: format!(
                    "Reverse {id}: {} now uses {next}; drop the earlier approach",
                    AREAS[*a]
                ),
                reason: Some(format!(
                    "the load test at turn {t} showed it does not scale"
                )),
            });
        }
    }
    if n % 4 == 1 || n == 5 {
        let severity = if n % 8 == 1 || n == 5 {
            Severity::Critical
        } else {
            Severity::High
        };
        result.issues.push(IssueClaim {
            title: format!(
                "{} {} (seen at turn {t})",
                capitalise(name),
                PROBLEMS[n % 4]
            ),
            severity,
            detail: Some(format!("Reproduced against step T{}", s + 1)),
            gate: Some(format!("check-{t}")),
        });
    }
    if n % 3 == 2 {
        result.failed_attempts.push(FailedAttemptClaim {
            what: format!(
                "Tried to {} for {name} (attempt {t})",
                APPROACHES[n % APPROACHES.len()]
            ),
            why: FAILURES[n % FAILURES.len()].into(),
        });
    }
    let mut warnings = Vec::new();
    if n.is_multiple_of(2) {
        warnings.push(format!(
            "Do not trust the {name} fixtures from turn {}: they predate the schema change",
            t.saturating_sub(1)
        ));
    }
    if n.is_multiple_of(5) {
        warnings.push(format!(
            "The staging database was restored from an old backup during turn {t} and the \
             migrations for {name} were never applied there, so run the migrations gate \
             before trusting any endpoint test"
        ));
    }
    if n.is_multiple_of(7) && state.open_issues().count() > 0 {
        warnings.push("Do not mark an issue resolved without a passing gate".into());
    }
    let notes = if n.is_multiple_of(6) {
        format!(
            "Turn {t} on {name}: the handler is split into parsing, checks and storage. \
             {} The next worker should read the storage part first, because the checks \
             depend on how rows are locked, and the tests for it are slow (about a \
             minute) so run them last. Nothing else in the record is out of date.",
            "The parsing part is done and covered by tests; the checks part is half done. "
                .repeat(3)
        )
    } else {
        format!("Turn {t}: {name} is partly done; the tests for change {t} pass locally.")
    };
    let report = HandoffReport {
        notes,
        warnings,
        last_action: result.last_action.clone(),
        next_action: format!("Continue {name} with change {}", t + 1),
        ..HandoffReport::default()
    };
    (result, report)
}

/// Records which ids the turn's signal claims became.
fn label(t: u32, area: usize, result: &WorkerResult, state: &ExecutionState, truth: &mut Truth) {
    let id_of = |text: &str| {
        state
            .decisions
            .iter()
            .find(|d| d.text == text)
            .map(|d| d.id.clone())
    };
    for d in &result.decisions {
        let Some(id) = id_of(&d.text) else { continue };
        if t == 0 {
            truth.founding.push(id);
        } else if d.text.starts_with("Reverse ") {
            truth.reversals.push(id);
            if !truth.area_decisions.is_empty() {
                truth.area_decisions.remove(0);
            }
        } else {
            truth
                .area_decisions
                .push((id, area, t as usize % CHOICES.len()));
        }
    }
    for i in &result.issues {
        if let Some(issue) = state.issues.iter().find(|x| x.title == i.title) {
            let gate = i.gate.clone().unwrap_or_default();
            // Two critical issues stay open all run; the rest are closed by their gate.
            let closes = (t != 1 && t != 5).then_some(t + 9);
            truth.severe.push((issue.id.clone(), gate, closes));
        }
    }
    for f in &result.failed_attempts {
        if let Some(rec) = state.failed_attempts.iter().find(|x| x.what == f.what) {
            truth.failed.push((rec.id.clone(), area));
        }
    }
}

fn close_issues(
    t: u32,
    state: &mut ExecutionState,
    ctx: &TurnContext<'_>,
    truth: &Truth,
    out: &mut ReconcileOutcome,
) {
    let gates: Vec<GateResult> = truth
        .severe
        .iter()
        .filter(|(_, _, closes)| *closes == Some(t))
        .map(|(_, gate, _)| GateResult {
            name: gate.clone(),
            command: "cargo test".into(),
            commit: format!("{t:040x}"),
            exit_code: Some(0),
            passed: true,
            duration_ms: 1,
            output_tail: String::new(),
            output_file: None,
        })
        .collect();
    apply_gates(state, ctx, &gates, out);
}

/// Appends `n` records of background work, as the reconciler would have recorded them.
fn append_volume(state: &mut ExecutionState, t: u32, n: usize, w: &WorkerProfile) {
    let provenance = Provenance {
        recorded_by: w.id.clone(),
        model: w.model.clone(),
        turn: t,
        recorded_at: at(t),
    };
    for j in 0..n {
        let area = AREAS[(t as usize * 7 + j) % AREAS.len()];
        let unit = t as usize * 1000 + j;
        match j % 10 {
            0..=2 => {
                let id = format!("C{}", state.completed.len() + 1);
                state.completed.push(CompletedWork {
                    id,
                    text: format!("Checked unit {unit} of {area} against the contract"),
                    step: None,
                    provenance: provenance.clone(),
                    reaffirmed: Vec::new(),
                });
            }
            3 | 4 => {
                let id = format!("A{}", state.artifacts.len() + 1);
                state.artifacts.push(Artifact {
                    id,
                    name: format!("src/unit_{unit}.rs"),
                    kind: "code".into(),
                    versions: vec![ArtifactVersion {
                        version: 1,
                        description: format!("Helpers for {area}, unit {unit}"),
                        content_hash: None,
                        content: None,
                        provenance: provenance.clone(),
                        verified: false,
                        verified_by: None,
                    }],
                    mentions: Vec::new(),
                });
            }
            5 | 6 => {
                let id = format!("S{}", state.assumptions.len() + 1);
                state.assumptions.push(Assumption {
                    id,
                    text: format!("Unit {unit} of {area} needs no migration"),
                    provenance: provenance.clone(),
                    reaffirmed: Vec::new(),
                });
            }
            7 | 8 => {
                let id = format!("I{}", state.issues.len() + 1);
                state.issues.push(Issue {
                    id,
                    title: format!("Unit {unit} of {area} logs too much"),
                    detail: String::new(),
                    severity: if j % 2 == 0 {
                        Severity::Medium
                    } else {
                        Severity::Low
                    },
                    status: IssueStatus::Open,
                    provenance: provenance.clone(),
                    resolution_claimed_by: None,
                    verified_by: None,
                    gate: None,
                    reaffirmed: Vec::new(),
                });
            }
            _ => {
                let id = format!("D{}", state.decisions.len() + 1);
                state.decisions.push(Decision {
                    id,
                    text: format!("Name the helpers of unit {unit} of {area} after their table"),
                    reason: Some("it keeps grep useful".into()),
                    provenance: provenance.clone(),
                    reaffirmed: Vec::new(),
                });
            }
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
