//! Who works next, on what, with how many tokens.

use baton_core::compiler::{Assignment, AssignmentKind};
use baton_core::ids::WorkerId;
use baton_core::state::ExecutionState;

use crate::config::{Roster, RunSettings};

/// The next turn: who takes it, an assignment and a package budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPlan {
    /// A worker of the roster, by id (an id the roster does not have stops the run
    /// with an error naming the roster's workers).
    pub worker: WorkerId,
    pub assignment: Assignment,
    pub budget: usize,
    /// Run the workspace's gates after this turn whatever follows it (a gate-fix turn).
    pub gates: bool,
}

/// What a policy chooses from. A struct, so what a policy may consult can grow (the
/// seat a turn fills, the run's phase, a worker pinned to a step) without changing
/// every policy's signature.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInput<'a> {
    /// The run's canonical state, as last committed.
    pub state: &'a ExecutionState,
    pub roster: &'a Roster,
    pub settings: &'a RunSettings,
}

impl<'a> PolicyInput<'a> {
    pub fn new(state: &'a ExecutionState, roster: &'a Roster, settings: &'a RunSettings) -> Self {
        PolicyInput {
            state,
            roster,
            settings,
        }
    }
}

/// Chooses the next turn from canonical state; `None` when the run is done.
pub trait SwitchPolicy: Send + Sync {
    fn next_turn(&self, input: &PolicyInput<'_>) -> Option<TurnPlan>;

    /// A routed run's next turn once every step of its plan is done (`None`: the run is
    /// done). The router fills its seat, so the plan's `worker` is not read. None by
    /// default: a routed run has no continuation turns (see `crate::seating`).
    fn after_plan(&self, _input: &PolicyInput<'_>) -> Option<TurnPlan> {
        None
    }
}

/// The default: workers take turns in roster order, cycling when steps outnumber them.
/// When every step is done before every enabled worker has had a turn, the remaining
/// workers get continuation turns, so every worker in the roster contributes. A failed
/// turn leaves its step at the cursor for the next worker.
#[derive(Debug, Default, Clone, Copy)]
pub struct RotatingPolicy;

impl SwitchPolicy for RotatingPolicy {
    fn next_turn(&self, input: &PolicyInput<'_>) -> Option<TurnPlan> {
        let PolicyInput {
            state,
            roster,
            settings,
        } = *input;
        let enabled: Vec<&WorkerId> = roster.enabled().map(|(_, w)| &w.id).collect();
        if enabled.is_empty() {
            return None;
        }
        let slot = state.turns as usize % enabled.len();
        if let Some(cursor) = state.cursor() {
            let step = &state.plan[cursor];
            return Some(TurnPlan {
                worker: enabled[slot].clone(),
                assignment: Assignment {
                    kind: AssignmentKind::Step,
                    step_id: Some(step.id.clone()),
                    task: step.title.clone(),
                },
                budget: step_budget(state, settings, cursor),
                gates: false,
            });
        }
        // Every step is done. While the first pass through the roster is not complete,
        // the surplus workers continue the objective, each in its own slot (a failed
        // turn uses its worker's slot too, so a broken worker cannot loop the run).
        if state.turns as usize >= enabled.len() {
            return None;
        }
        let worker = enabled[slot].clone();
        Some(TurnPlan {
            worker,
            assignment: Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: "Every planned step is done. Continue the objective from the record: \
                       resolve or narrow the open issues, check the next action, and leave the \
                       work in a better state for the next worker."
                    .into(),
            },
            budget: step_budget(state, settings, state.plan.len().saturating_sub(1)),
            gates: false,
        })
    }
}

/// Jobs: when the plan is done and a gate fails (its engine-stamped issue is open), up to
/// `fix_turns` more turns go to fixing it, taking turns through the roster like any
/// other; the gates run after each. Then the job ends, its gates failing or not.
#[derive(Debug, Clone, Copy)]
pub struct GateFixPolicy<P> {
    pub inner: P,
    pub fix_turns: u32,
}

impl<P: SwitchPolicy> SwitchPolicy for GateFixPolicy<P> {
    fn next_turn(&self, input: &PolicyInput<'_>) -> Option<TurnPlan> {
        if let Some(plan) = self.inner.next_turn(input) {
            return Some(plan);
        }
        self.fix_turn(input, input.roster.enabled().count())
    }

    /// A routed job's gate fixes: the same turns, counted from the plan's end (a routed
    /// run has no first pass through the roster).
    fn after_plan(&self, input: &PolicyInput<'_>) -> Option<TurnPlan> {
        if let Some(plan) = self.inner.after_plan(input) {
            return Some(plan);
        }
        self.fix_turn(input, 0)
    }
}

impl<P> GateFixPolicy<P> {
    /// The next gate-fix turn, when a gate fails and fix turns are left; fix turns are
    /// counted from the plan's end, or from the end of the roster's first pass when
    /// `first_pass` (the enabled workers) is longer.
    fn fix_turn(&self, input: &PolicyInput<'_>, first_pass: usize) -> Option<TurnPlan> {
        let PolicyInput {
            state,
            roster,
            settings,
        } = *input;
        let failing = failing_gates(state);
        let enabled: Vec<&WorkerId> = roster.enabled().map(|(_, w)| &w.id).collect();
        if failing.is_empty() || enabled.is_empty() {
            return None;
        }
        if fix_turns_taken(state, first_pass) >= self.fix_turns {
            return None;
        }
        let names = failing
            .iter()
            .map(|g| format!("`{g}`"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(TurnPlan {
            worker: enabled[state.turns as usize % enabled.len()].clone(),
            assignment: Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: format!(
                    "Gates fail at the end of the job: {names}. Make them pass: the open gate \
                     issues in the record show each gate's command and its newest output. \
                     Change only what the failure needs."
                ),
            },
            budget: step_budget(state, settings, state.plan.len().saturating_sub(1)),
            gates: true,
        })
    }
}

/// Gates whose engine-stamped issue is open: they failed on their last run.
pub fn failing_gates(state: &ExecutionState) -> Vec<&str> {
    let mut names: Vec<&str> = state
        .issues
        .iter()
        .filter(|i| {
            i.status == baton_core::state::IssueStatus::Open
                && i.provenance.recorded_by.as_str().starts_with("gate:")
        })
        .filter_map(|i| i.gate.as_deref())
        .collect();
    names.dedup();
    names
}

/// Turns taken since the plan and the roster's first pass (`enabled` turns; 0 for a
/// routed run, which has none) were done: the gate-fix turns (the inner policy has
/// nothing left once both are).
pub fn fix_turns_taken(state: &ExecutionState, enabled: usize) -> u32 {
    let plan_done = state
        .plan
        .iter()
        .filter_map(|s| s.done_at_turn)
        .max()
        .map_or(0, |t| t + 1);
    let start = plan_done.max(u32::try_from(enabled).unwrap_or(u32::MAX));
    state.turns.saturating_sub(start)
}

/// The package budget for step `index`: the step's own budget, else its share of the
/// total (weights grow linearly so later steps, which have more record to read, get
/// more), else the per-package budget.
pub fn step_budget(state: &ExecutionState, settings: &RunSettings, index: usize) -> usize {
    if let Some(b) = state.plan.get(index).and_then(|s| s.budget) {
        return b;
    }
    let n = state.plan.len();
    match settings.total_budget {
        Some(total) if n > 0 => {
            // Weights n, n+1, …, 2n-1: the last step gets about twice the first.
            let weight = n + index.min(n - 1);
            let sum: usize = (n..2 * n).sum();
            total * weight / sum
        }
        _ => settings.budget,
    }
}

/// Refuses budgets below the smallest valid briefing of some step: with one, every
/// briefing of that step would go out over budget. The error says which step, the
/// smallest briefing, and what to set instead.
pub fn check_budgets(
    state: &ExecutionState,
    settings: &RunSettings,
    roster: &Roster,
    estimator: &dyn baton_core::tokens::TokenEstimator,
) -> crate::Result<()> {
    let n = state.plan.len();
    // The total every step's share needs, for the message about `total_budget`.
    let mut total_needed = 0usize;
    let mut short: Option<(usize, usize, usize)> = None;
    for (i, step) in state.plan.iter().enumerate() {
        let assignment = Assignment {
            kind: AssignmentKind::Step,
            step_id: Some(step.id.clone()),
            task: step.title.clone(),
        };
        let smallest = roster
            .workers
            .iter()
            .map(|w| {
                baton_core::compiler::smallest_briefing(
                    &state.objective,
                    &assignment,
                    &w.profile(),
                    estimator,
                )
            })
            .max()
            .unwrap_or(0);
        let budget = step_budget(state, settings, i);
        if step.budget.is_none() && settings.total_budget.is_some() {
            let weight = n + i.min(n - 1);
            let sum: usize = (n..2 * n).sum();
            total_needed = total_needed.max((smallest * sum).div_ceil(weight));
        }
        if budget < smallest && short.is_none() {
            short = Some((i, budget, smallest));
        }
    }
    let Some((i, budget, smallest)) = short else {
        return Ok(());
    };
    let step = &state.plan[i].id;
    let why = format!(
        "the smallest briefing for step {step} (its header, task and objective, each cut \
         to {} characters) is {smallest} tokens with the {} estimator, so every briefing \
         would go out over budget",
        baton_core::compiler::MIN_KEEP_CHARS,
        estimator.name()
    );
    let fix = if state.plan[i].budget.is_some() {
        format!("set its --step-budget to {smallest} or more")
    } else if settings.total_budget.is_some() {
        format!("set total_budget (--total-budget, BATON_TOTAL_BUDGET) to {total_needed} or more")
    } else {
        format!(
            "set budget to {smallest} or more (--budget, BATON_BUDGET or `budget =` in baton.toml)"
        )
    };
    Err(crate::Error::Config(format!(
        "budget {budget} is too small for step {step}: {why}; {fix}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ids::RunId;
    use baton_core::state::{StepStatus, WorkerRecord};

    fn state(steps: usize) -> ExecutionState {
        let titles: Vec<String> = (0..steps).map(|i| format!("step {i}")).collect();
        ExecutionState::new(RunId("r".into()), "o", &titles)
    }

    fn finish(state: &mut ExecutionState, plan: &TurnPlan) {
        if let Some(id) = &plan.assignment.step_id {
            let step = state.plan.iter_mut().find(|s| &s.id == id).unwrap();
            step.status = StepStatus::Done;
        }
        state.workers.push(WorkerRecord {
            id: plan.worker.clone(),
            model: String::new(),
            family: String::new(),
            turns: vec![state.turns],
        });
        state.turns += 1;
    }

    /// The roster positions of the workers the policy picks, turn by turn.
    fn simulate(steps: usize, workers: usize) -> Vec<(usize, AssignmentKind)> {
        let roster = Roster::mock(workers);
        let settings = RunSettings::default();
        let mut s = state(steps);
        let mut out = Vec::new();
        while let Some(plan) = RotatingPolicy.next_turn(&PolicyInput::new(&s, &roster, &settings)) {
            let index = roster.workers.iter().position(|w| w.id == plan.worker);
            out.push((index.unwrap(), plan.assignment.kind));
            finish(&mut s, &plan);
            assert!(out.len() < 1000);
        }
        out
    }

    #[test]
    fn cycles_the_roster_when_steps_outnumber_workers() {
        let turns = simulate(5, 2);
        assert_eq!(
            turns.iter().map(|t| t.0).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0]
        );
        assert!(turns.iter().all(|t| t.1 == AssignmentKind::Step));
    }

    #[test]
    fn surplus_workers_get_continuation_turns() {
        let turns = simulate(2, 5);
        assert_eq!(turns.len(), 5);
        assert_eq!(
            turns.iter().map(|t| t.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(
            turns
                .iter()
                .filter(|t| t.1 == AssignmentKind::Continuation)
                .count(),
            3
        );
    }

    #[test]
    fn one_twenty_and_a_hundred_workers_take_the_same_path() {
        assert_eq!(simulate(5, 1).len(), 5);
        assert_eq!(simulate(5, 20).len(), 20);
        assert_eq!(simulate(5, 100).len(), 100);
    }

    #[test]
    fn a_total_budget_gives_later_steps_more() {
        let s = state(5);
        let settings = RunSettings {
            total_budget: Some(10_000),
            ..RunSettings::default()
        };
        let budgets: Vec<usize> = (0..5).map(|i| step_budget(&s, &settings, i)).collect();
        assert!(budgets.windows(2).all(|w| w[0] < w[1]), "{budgets:?}");
        assert!(budgets.iter().sum::<usize>() <= 10_000);
        assert!(budgets.iter().sum::<usize>() > 9_900);
    }
}
