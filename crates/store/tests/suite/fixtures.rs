//! Runs, states and turns built from `baton_core` types, the way the engine builds them.

use baton_core::compiler::{Assignment, AssignmentKind, HandoffPackage};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::reconciler::{Accepted, Action, ReconcileOutcome};
use baton_core::state::{
    Assumption, Decision, ExecutionState, HandoffRecord, Issue, IssueStatus, Provenance,
    RecordKind, ResolutionClaim, Severity, Stamped, StepStatus, WorkerRecord,
};
use baton_core::turn::{CallKind, CallRecord, TransferAudit, TurnRecord, TurnStatus};
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::{RunInfo, RunStatus, TurnCommit};

pub const T0: i64 = 1_796_044_933_000;

pub fn run_id(id: &str) -> RunId {
    RunId(id.to_string())
}

pub fn info(id: &str, created_at: i64) -> RunInfo {
    RunInfo {
        id: run_id(id),
        objective: format!("objective of {id}"),
        status: RunStatus::Active,
        turns: 0,
        created_at: Timestamp(created_at),
        updated_at: Timestamp(created_at),
        config: serde_json::json!({ "roster": ["w1", "w2"], "budget": 4000 }),
    }
}

fn prov(worker: &str, turn: u32) -> Provenance {
    Provenance {
        recorded_by: WorkerId::new(worker),
        model: format!("mock/{worker}"),
        turn,
        recorded_at: Timestamp(T0 + i64::from(turn) * 1000),
    }
}

/// A fresh run's state, with the records a run may be founded with.
pub fn initial_state(id: &str) -> ExecutionState {
    let steps: Vec<String> = (1..=4).map(|i| format!("step {i}")).collect();
    let mut state = ExecutionState::new(run_id(id), format!("objective of {id}"), &steps);
    state.decisions.push(Decision {
        id: "D1".into(),
        text: "write it in Rust".into(),
        reason: Some("the team knows it".into()),
        provenance: prov("engine", 0),
        reaffirmed: vec![],
    });
    state.assumptions.push(Assumption {
        id: "S1".into(),
        text: "SQLite is enough on one machine".into(),
        provenance: prov("engine", 0),
        reaffirmed: vec![],
    });
    state
}

pub fn created_event(state: &ExecutionState) -> Event {
    Event {
        run_id: state.run_id.clone(),
        turn: None,
        at: Timestamp(T0),
        kind: EventKind::RunCreated {
            objective: state.objective.clone(),
            steps: state.plan.len(),
        },
    }
}

/// Creates `id` in `store` and returns its initial state.
pub fn create(store: &dyn baton_store::Store, id: &str, created_at: i64) -> ExecutionState {
    let state = initial_state(id);
    store
        .create_run(&info(id, created_at), &state, &[created_event(&state)])
        .unwrap();
    state
}

/// The next turn of `before`, a typical one: three new records and one changed, a ~6 KB
/// package, two calls with ~2 KB outputs each, eight events.
/// Returns the state after the turn and the commit that persists it.
pub fn next_turn(before: &ExecutionState) -> (ExecutionState, TurnCommit) {
    let turn = before.turns;
    let worker = if turn.is_multiple_of(2) { "w1" } else { "w2" };
    let at = T0 + i64::from(turn) * 1000;
    let mut after = before.clone();

    after.decisions.push(Decision {
        id: format!("D{}", after.decisions.len() + 1),
        text: format!("turn {turn} decides to keep module {turn} small"),
        reason: Some("smaller modules review faster".into()),
        provenance: prov(worker, turn),
        reaffirmed: vec![],
    });
    after.issues.push(Issue {
        id: format!("I{}", after.issues.len() + 1),
        title: format!("module {turn} lacks tests"),
        detail: "found while reading".into(),
        severity: Severity::Medium,
        status: IssueStatus::Open,
        provenance: prov(worker, turn),
        resolution_claimed_by: None,
        verified_by: None,
        gate: None,
        reaffirmed: vec![],
    });
    // A changed record of constant size: the previous turn's issue is claimed resolved.
    if let Some(prev) = after.issues.len().checked_sub(2) {
        after.issues[prev].resolution_claimed_by = Some(ResolutionClaim {
            by: WorkerId::new(worker),
            turn,
            at: Timestamp(at),
            note: Some("tests added".into()),
        });
    }
    after.handoffs.push(HandoffRecord {
        id: format!("H{}", after.handoffs.len() + 1),
        notes: format!("turn {turn}: next, module {}", turn + 1),
        warnings: vec![],
        engine_warnings: vec![],
        provenance: prov(worker, turn),
    });
    if let Some(step) = after.cursor() {
        after.plan[step].status = StepStatus::Done;
        after.plan[step].done_by = Some(WorkerId::new(worker));
        after.plan[step].done_at_turn = Some(turn);
    }
    after.last_action = Some(Stamped {
        text: format!("wrote module {turn}"),
        provenance: prov(worker, turn),
    });
    after.next_action = Some(Stamped {
        text: format!("write module {}", turn + 1),
        provenance: prov(worker, turn),
    });
    match after.workers.iter_mut().find(|w| w.id.as_str() == worker) {
        Some(w) => w.turns.push(turn),
        None => after.workers.push(WorkerRecord {
            id: WorkerId::new(worker),
            model: format!("mock/{worker}"),
            family: format!("family-{worker}"),
            turns: vec![turn],
        }),
    }
    after.turns = turn + 1;

    let changes = after.diff(before);
    let record = turn_record(&after, turn, worker, at, &changes);
    let events = turn_events(&after, turn, worker, at, changes.len());
    let commit = TurnCommit {
        record,
        header: after.header(),
        changes,
        events,
        status: RunStatus::Active,
        lease: None,
        run_lease: None,
        holds: Vec::new(),
        pool: None,
        pins: Vec::new(),
        reservation: None,
    };
    (after, commit)
}

/// Commits `n` turns after `state` and returns the state after the last.
pub fn run_turns(store: &dyn baton_store::Store, state: ExecutionState, n: u32) -> ExecutionState {
    (0..n).fold(state, |state, _| {
        let (after, commit) = next_turn(&state);
        store.commit_turn(&commit).unwrap();
        after
    })
}

pub fn turn_record(
    after: &ExecutionState,
    turn: u32,
    worker: &str,
    at: i64,
    changes: &[baton_core::state::RecordChange],
) -> TurnRecord {
    let assignment = Assignment {
        kind: AssignmentKind::Step,
        step_id: Some(format!("T{}", turn + 1)),
        task: format!("write module {turn}"),
    };
    // ~6 KB of briefing, like a compiled package of a mid-sized run.
    let text = format!(
        "# Briefing for turn {turn}\n{}",
        "context line\n".repeat(460)
    );
    let package = HandoffPackage {
        run_id: after.run_id.clone(),
        turn,
        worker: WorkerId::new(worker),
        assignment: assignment.clone(),
        budget: 4000,
        tokens: text.len() / 4,
        estimator: "heuristic".into(),
        text,
        sections: vec![],
        omitted_sections: vec![],
        dropped: vec![],
        over_budget: false,
        line: None,
    };
    let call = |kind: CallKind, i: u64| CallRecord {
        call: kind,
        worker: WorkerId::new(worker),
        model: format!("mock/{worker}"),
        messages: 2,
        request_hash: format!("{:064x}", u64::from(turn) * 2 + i),
        sent_hash: Some(format!("{:064x}", u64::from(turn) * 2 + i + 1_000)),
        tokens_sent: 1500,
        tokens_received: 500,
        // ~2 KB, unique per turn and call so the audit can tell them apart.
        output: Some(format!(
            "{{\"turn\":{turn},\"call\":\"{}\",\"notes\":\"{}\"}}",
            kind.as_str(),
            "x".repeat(2000)
        )),
        error: None,
        error_class: None,
        error_message: None,
        partial_output: None,
        usage: None,
        cost_micro_usd: None,
        attempts: Vec::new(),
        retry_after_ms: None,
        quota_reset_at: None,
        started_at: Timestamp(at + i as i64 * 100),
        duration_ms: 100,
    };
    TurnRecord {
        run_id: after.run_id.clone(),
        turn,
        worker: WorkerId::new(worker),
        model: format!("mock/{worker}"),
        family: format!("family-{worker}"),
        assignment,
        status: TurnStatus::Committed,
        package,
        calls: vec![call(CallKind::Execute, 0), call(CallKind::Handoff, 1)],
        result: Some(serde_json::json!({ "summary": format!("wrote module {turn}") })),
        report: Some(serde_json::json!({ "notes": format!("next, module {}", turn + 1) })),
        outcome: ReconcileOutcome {
            accepted: changes
                .iter()
                .map(|c| Accepted {
                    kind: c.kind,
                    id: c.id.clone(),
                    action: if c.kind == RecordKind::Issue
                        && c.body["resolution_claimed_by"].is_object()
                    {
                        Action::ResolutionClaimed
                    } else {
                        Action::Created
                    },
                })
                .collect(),
            refusals: vec![],
            warnings: vec![],
            contradicted: vec![],
        },
        audit: TransferAudit {
            messages_per_call: vec![2, 2],
            request_hashes: vec![],
            prior_outputs_leaked: 0,
            prior_outputs_checked: turn * 2,
            package_only: true,
        },
        error: None,
        workspace: None,
        started_at: Timestamp(at),
        finished_at: Timestamp(at + 900),
        lane: None,
    }
}

pub fn turn_events(
    after: &ExecutionState,
    turn: u32,
    worker: &str,
    at: i64,
    changes: usize,
) -> Vec<Event> {
    let w = WorkerId::new(worker);
    let kinds = vec![
        EventKind::TurnStarted {
            worker: w.clone(),
            model: format!("mock/{worker}"),
            assignment: format!("T{}", turn + 1),
            task: None,
        },
        EventKind::PackageCompiled {
            tokens: 1500,
            budget: 4000,
            sections_included: 13,
            sections_omitted: vec![],
            items_dropped: 0,
        },
        EventKind::ModelCalled {
            call: "execute".into(),
            worker: w.clone(),
            ok: true,
            tokens_sent: 1500,
            tokens_received: 500,
            detail: Default::default(),
        },
        EventKind::ModelCalled {
            call: "handoff".into(),
            worker: w.clone(),
            ok: true,
            tokens_sent: 1500,
            tokens_received: 500,
            detail: Default::default(),
        },
        EventKind::Warning {
            worker: w.clone(),
            text: "the claimed file was not found on disk".into(),
        },
        EventKind::ClaimRefused {
            worker: w.clone(),
            claim: "issue I1 resolved".into(),
            reason: "a claim never closes an issue".into(),
        },
        EventKind::StepDone {
            step: format!("T{}", turn + 1),
            worker: w.clone(),
        },
        EventKind::TurnCommitted {
            worker: w,
            status: "committed".into(),
            changes,
            error: None,
            step_left_open: false,
            steps: None,
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Event {
            run_id: after.run_id.clone(),
            turn: Some(turn),
            at: Timestamp(at + i as i64 * 10),
            kind,
        })
        .collect()
}
