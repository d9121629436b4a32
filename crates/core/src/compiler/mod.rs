//! The briefing compiler: `compile(state, assignment, worker, budget) -> HandoffPackage`.
//!
//! Deterministic (invariant 7), bounded by the token count of the *rendered* package,
//! and honest about what it left out (invariant 6).

mod current;
mod fill;
mod floors;
mod notes;
mod progress;
mod render;
mod sections;

use serde::{Deserialize, Serialize};

use crate::ids::{RunId, WorkerId};
use crate::state::ExecutionState;
use crate::tokens::TokenEstimator;

pub use current::SHOWN_ATTEMPTS;
pub use fill::MIN_KEEP_CHARS;
pub use floors::{
    FLOOR_ACTION, FLOOR_CURRENT, FLOOR_DECISIONS, FLOOR_FAILED, FLOOR_ISSUES, FLOOR_PROGRESS,
    FLOOR_RECORDS, Floor, RECENT_TURNS,
};
pub use progress::OPEN_BEHIND;
pub use sections::{
    ANCHOR_BONUS, ANCHORED, CAP_ARTIFACTS, CAP_ASSUMPTIONS, CAP_COMPLETED, CAP_DECISIONS,
    CAP_FAILED, CAP_ISSUES, CAP_STEP_WORK, FLOOR_WARNINGS, relevance,
};

/// What a worker is asked to do this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub kind: AssignmentKind,
    /// The plan step (`T3`) for a step assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// The task as the worker will read it.
    pub task: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssignmentKind {
    /// Do one step of the plan.
    Step,
    /// Every step is done or taken: advance the objective from the record (open issues,
    /// next action) without a step of its own.
    Continuation,
}

/// The worker as the compiler sees it: no credentials, no gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerProfile {
    pub id: WorkerId,
    pub model: String,
    pub family: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// The 13 sections of a briefing, in fixed priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    AssignedTask,
    Objective,
    Progress,
    CurrentTaskState,
    Decisions,
    CompletedWork,
    Artifacts,
    UnresolvedIssues,
    FailedAttempts,
    Assumptions,
    LastAction,
    NextAction,
    PreviousWorkerNotes,
}

impl Section {
    pub const ALL: [Section; 13] = [
        Section::AssignedTask,
        Section::Objective,
        Section::Progress,
        Section::CurrentTaskState,
        Section::Decisions,
        Section::CompletedWork,
        Section::Artifacts,
        Section::UnresolvedIssues,
        Section::FailedAttempts,
        Section::Assumptions,
        Section::LastAction,
        Section::NextAction,
        Section::PreviousWorkerNotes,
    ];

    /// The heading used in the rendered package.
    pub fn title(self) -> &'static str {
        match self {
            Section::AssignedTask => "Assigned task",
            Section::Objective => "Objective",
            Section::Progress => "Progress",
            Section::CurrentTaskState => "Current task state",
            Section::Decisions => "Decisions",
            Section::CompletedWork => "Completed work",
            Section::Artifacts => "Artifacts",
            Section::UnresolvedIssues => "Unresolved issues",
            Section::FailedAttempts => "Failed attempts",
            Section::Assumptions => "Assumptions",
            Section::LastAction => "Last action",
            Section::NextAction => "Next action",
            Section::PreviousWorkerNotes => "Previous worker's notes",
        }
    }
}

/// What happened to one section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionReport {
    pub section: Section,
    /// Items the record had for this section.
    pub items_available: usize,
    /// Items that made it into the package.
    pub items_included: usize,
    /// Tokens of the rendered section (heading included); 0 when omitted.
    pub tokens: usize,
    /// False when the section had content but none of it fit.
    pub included: bool,
    /// True when the text was shortened (task/objective as a last resort, long items,
    /// warnings in their shortest form).
    #[serde(default)]
    pub shortened: bool,
    /// The items shown, in display order, with their ranking score.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptItem>,
}

/// An item that made it into the package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptItem {
    /// The record id (`D3`) or a short label (`step`, `H4.warning1`).
    pub item: String,
    /// Ranking score (see `relevance`; anchored items and fixed lines rank above
    /// `ANCHOR_BONUS`).
    pub score: u32,
}

/// An item left out, and why; or, for items dropped by a cap, a run of consecutive
/// records (`item` through `through`, `count` of them), so that a large record costs
/// its briefing report a few entries rather than one per record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedItem {
    pub section: Section,
    /// The record id (`D3`, `F1`) or a short label; the first of a run.
    pub item: String,
    /// The last record id of a run of consecutive records dropped together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
    /// Records this entry stands for (1 unless it is a run).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    pub reason: DropReason,
    /// Ranking score (the highest of a run): within a section, an item dropped for the
    /// budget never outranks one that was kept.
    #[serde(default)]
    pub score: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl DroppedItem {
    /// `D7`, or `D3–D41` for a run.
    pub fn label(&self) -> String {
        match &self.through {
            Some(last) => format!("{}–{}", self.item, last),
            None => self.item.clone(),
        }
    }
}

impl HandoffPackage {
    /// A package with no briefing, for `worker`: what a call's own text costs around
    /// one (`workers --verify`, the README's call costs).
    pub fn empty(worker: crate::ids::WorkerId) -> Self {
        HandoffPackage {
            run_id: crate::ids::RunId(String::new()),
            turn: 0,
            worker,
            assignment: Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: String::new(),
            },
            budget: 0,
            tokens: 0,
            estimator: String::new(),
            text: String::new(),
            sections: Vec::new(),
            omitted_sections: Vec::new(),
            dropped: Vec::new(),
            over_budget: false,
            line: None,
        }
    }

    /// Records left out, counting every record of a run.
    pub fn dropped_count(&self) -> usize {
        self.dropped.iter().map(|d| d.count as usize).sum()
    }

    /// The titles of the sections left out whole, in priority order.
    pub fn omitted_titles(&self) -> Vec<String> {
        self.omitted_sections
            .iter()
            .map(|s| s.title().to_string())
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Beyond the section's per-category cap.
    Cap,
    /// Did not fit the token budget.
    Budget,
    /// Below the relevance floor: completed work, an artifact or an assumption neither
    /// recent nor on the assigned task's own terms. Not a candidate, whatever the budget.
    NotRelevant,
    /// Shown only within a range or a count (plan steps away from the assigned one).
    Summarized,
}

/// One compiled briefing: the only thing a worker ever receives about the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffPackage {
    pub run_id: RunId,
    pub turn: u32,
    pub worker: WorkerId,
    pub assignment: Assignment,
    pub budget: usize,
    /// Tokens of `text`, counted on the rendered text by `estimator`.
    pub tokens: usize,
    pub estimator: String,
    pub text: String,
    /// One report per section, in section order.
    pub sections: Vec<SectionReport>,
    pub omitted_sections: Vec<Section>,
    pub dropped: Vec<DroppedItem>,
    /// True only when even the shortest task and objective (each cut to
    /// `MIN_KEEP_CHARS`), with the header and the predecessor's warnings in their
    /// shortest form, exceed the budget.
    pub over_budget: bool,
    /// A line seat's block (`line::brief`): what it showed and left out. Its text is in
    /// `text`, after the objective. None for every other briefing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<LineSection>,
}

/// What a line seat's block showed of the line's records and what it left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineSection {
    pub tokens: usize,
    pub shown: Vec<String>,
    pub omitted: Vec<crate::line::brief::Omitted>,
    /// Even the block's headings exceed the block's own budget.
    pub over_budget: bool,
}

/// Compiles the briefing for `worker` doing `assignment`, within `budget` tokens as
/// counted by `estimator` on the rendered text.
///
/// Deterministic: the same inputs give a byte-identical package (integer scores, total
/// orders with record-index tie-breaks, no hash-map iteration).
pub fn compile(
    state: &ExecutionState,
    assignment: &Assignment,
    worker: &WorkerProfile,
    budget: usize,
    estimator: &dyn TokenEstimator,
) -> HandoffPackage {
    fill::Compiler::new(state, assignment, worker, estimator).compile(budget)
}

/// `compile` for a seat of the assembly line: `line` (the station's block, built by
/// `line::brief` within its own share of the budget) is shown right after the objective
/// and paid for first; the record's sections fill what is left of `budget`.
pub fn compile_with_line(
    state: &ExecutionState,
    assignment: &Assignment,
    worker: &WorkerProfile,
    budget: usize,
    estimator: &dyn TokenEstimator,
    line: &crate::line::brief::LineBrief,
) -> HandoffPackage {
    let mut package = fill::Compiler::new(state, assignment, worker, estimator)
        .with_line(line)
        .compile(budget);
    package.line = Some(LineSection {
        tokens: line.tokens,
        shown: line.shown.clone(),
        omitted: line.omitted.clone(),
        over_budget: line.over_budget,
    });
    package
}

/// The smallest budget a valid briefing for `worker` doing `assignment` under
/// `objective` fits in: the header, the task and the objective, each at its shortest
/// (cut to `MIN_KEEP_CHARS`, invariant 6's last resort), counted on the header of the
/// longest turn number. Below it every briefing is over budget. The predecessor's
/// warnings, which are always delivered, come on top of it.
pub fn smallest_briefing(
    objective: &str,
    assignment: &Assignment,
    worker: &WorkerProfile,
    estimator: &dyn TokenEstimator,
) -> usize {
    let mut state = ExecutionState::new(RunId(String::new()), objective, &[]);
    state.turns = u32::MAX;
    compile(&state, assignment, worker, 0, estimator).tokens
}
