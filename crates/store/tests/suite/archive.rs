//! Moving a run between backends: `archive_run` on one, `import_run` on the other, both
//! ways (SQLite → PostgreSQL, PostgreSQL → SQLite). The archive the target gives back is
//! byte for byte the one the source gave, and so is everything the store reads back.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::router::{Pin, PinReason, PoolId, SeatId};
use baton_core::turn::ReportedUsage;
use baton_store::{
    CancelTarget, ClaimOutcome, Error, Imported, JobStatus, LeaseFence, NewJob, PinFilter,
    RunArchive, SpentBy, SpentCall, Store, WorkerHold,
};
use serde_json::json;

use super::fixtures::{self, T0};
use super::postgres::Postgres;
use super::sqlite::Sqlite;
use super::{Backend, Table};

/// `check(source, target)` from SQLite to PostgreSQL, then from PostgreSQL to SQLite.
fn both_ways(check: impl Fn(&dyn Backend, &dyn Backend)) {
    check(&Sqlite::new(), &Postgres::tagged("arch"));
    check(&Postgres::tagged("arch"), &Sqlite::new());
}

fn run(id: &str) -> RunId {
    RunId(id.into())
}

/// A routed run of three turns in pools, with pins, a worker's hold, spend of a turn
/// that did not commit, and events outside turns; beside it another run, which must
/// not come along.
fn routed_run(store: &dyn Store, id: &str) {
    let mut state = fixtures::create(store, id, T0);
    for (n, pool) in ["claude", "codex", "claude"].into_iter().enumerate() {
        let (after, mut commit) = fixtures::next_turn(&state);
        for call in &mut commit.record.calls {
            call.usage = Some(ReportedUsage {
                input_tokens: 300,
                output_tokens: 100,
                cached_tokens: 0,
            });
            // Not a round number of dollars: a float would show any re-encoding.
            call.cost_micro_usd = Some(1_234_567);
        }
        commit.pool = Some(PoolId::new(pool));
        if n != 1 {
            commit.pins = vec![Pin {
                seat: SeatId::new("build.step"),
                worker: WorkerId::new("w1"),
                model: "mock/w1".into(),
                family: "family-w1".into(),
                pool: PoolId::new(pool),
                phase: format!("step T{}", n + 1),
                at: Timestamp(T0 + n as i64),
                fractions: [
                    (PoolId::new("claude"), 0.1),
                    (PoolId::new("codex"), 1.0 / 3.0),
                ]
                .into_iter()
                .collect(),
                reason: PinReason::AtPhaseStart,
                excluded: (n == 2).then(Vec::new),
            }];
        }
        commit.holds = vec![WorkerHold {
            worker: WorkerId::new("w2"),
            not_before: Timestamp(T0 + 90_000 + n as i64),
            asked_ms: 30_000,
        }];
        store.commit_turn(&commit).unwrap();
        state = after;
    }
    let spend = baton_core::router::CallSpend {
        tokens: 77,
        cost_micro_usd: 5,
        requests: 1,
        exhausted: true,
        exhausted_until: Some(Timestamp(T0 + 3_600_000)),
    };
    store
        .record_spend(
            &PoolId::new("codex"),
            &SpentBy::Turn {
                run: run(id),
                turn: 3,
            },
            &[SpentCall {
                at: Timestamp(T0 + 5_000),
                spend,
            }],
            Timestamp(T0 + 6_000),
        )
        .unwrap();
    let blocked = baton_protocol::EventMsg {
        run_id: run(id),
        turn: None,
        at: Timestamp(T0 + 7_000),
        kind: baton_protocol::EventKind::RunBlocked {
            question: "which \"schema\"? ünïcode, tabs\tand\nlines".into(),
        },
    };
    store
        .update_run(&run(id), baton_store::RunStatus::Blocked, &[blocked])
        .unwrap();
    // Another run in the same database, and a judge's spend (before the window
    // `read_back` sums): neither belongs to `id`.
    let other = fixtures::create(store, "other", T0);
    fixtures::run_turns(store, other, 1);
    store
        .record_spend(
            &PoolId::new("codex"),
            &SpentBy::Judge { group: "g".into() },
            &[SpentCall {
                at: Timestamp(T0 - 7_200_000),
                spend,
            }],
            Timestamp(T0),
        )
        .unwrap();
}

/// Everything a store reads back about `id`, as JSON text.
fn read_back(store: &dyn Store, id: &str) -> String {
    let id = run(id);
    let usage = ["claude", "codex"].map(|p| {
        store
            .pool_usage(
                &PoolId::new(p),
                Timestamp(T0 - 1),
                Timestamp(T0 + 3_600_000),
            )
            .unwrap()
    });
    json!({
        "info": store.run_info(&id).unwrap(),
        "state": store.load_state(&id).unwrap(),
        "turns": store.turns(&id).unwrap(),
        "changes": (0..3).map(|t| store.turn_changes(&id, t).unwrap()).collect::<Vec<_>>(),
        "events": store.events(&id, 0).unwrap(),
        "holds": store.worker_holds(&id).unwrap(),
        "outputs": store.prior_outputs(&id, 3).unwrap(),
        "pins": store.pins(&PinFilter::run(&id)).unwrap(),
        "usage": usage,
    })
    .to_string()
}

#[test]
fn a_run_moves_between_backends_byte_for_byte_both_ways() {
    both_ways(|source, target| {
        routed_run(source.store(), "run-1");
        let archive = source.store().archive_run(&run("run-1")).unwrap();
        assert_eq!(archive.turns.len(), 3);
        assert_eq!(archive.events.len(), 1 + 3 * 8 + 1);
        assert_eq!((archive.pins.len(), archive.pool_calls.len()), (2, 6));
        assert_eq!(archive.pool_spend.len(), 1, "the turn's, not the judge's");
        let text = archive.to_text().unwrap();

        let read = RunArchive::from_slice(text.as_bytes()).unwrap();
        assert_eq!(target.store().import_run(&read).unwrap(), Imported::Written);
        let again = target.store().archive_run(&run("run-1")).unwrap();
        assert_eq!(again.to_text().unwrap(), text);
        assert_eq!(
            read_back(target.store(), "run-1"),
            read_back(source.store(), "run-1")
        );
        // Only the run came.
        assert_eq!(target.store().list_runs().unwrap().len(), 1);
        // Events keep their numbers, and a live follower of the target sees them.
        let page = target
            .store()
            .events_since(baton_store::EventCursor::default(), 100)
            .unwrap();
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=26).collect::<Vec<_>>()
        );

        // Again: the run is here as the archive has it, and nothing is written.
        assert_eq!(
            target.store().import_run(&read).unwrap(),
            Imported::AlreadyPresent
        );
        assert_eq!(target.count(Table::Events, &run("run-1")), 26);
    });
}

/// Once the run went on in the target, the archive is refused, saying how they differ,
/// and nothing of it is written; runs are never overwritten.
#[test]
fn an_archive_of_a_run_that_went_on_elsewhere_is_refused_and_writes_nothing() {
    both_ways(|source, target| {
        let state = fixtures::create(source.store(), "run-1", T0);
        let old = source.store().archive_run(&run("run-1")).unwrap();
        fixtures::run_turns(source.store(), state, 2);
        let new = source.store().archive_run(&run("run-1")).unwrap();
        target.store().import_run(&old).unwrap();
        let err = target.store().import_run(&new).unwrap_err();
        assert!(
            matches!(&err, Error::ImportConflict { run, detail }
                if run == "run-1" && detail.contains("this database has it active, 0 turns, 1 event, the archive active, 2 turns, 17 events")),
            "{err}"
        );
        assert!(err.to_string().contains("never overwritten"), "{err}");
        assert_eq!(target.count(Table::Events, &run("run-1")), 1);
        assert_eq!(target.count(Table::Turns, &run("run-1")), 0);
    });
}

fn claim(store: &dyn Store, owner: &str) -> LeaseFence {
    match store
        .try_claim_job(owner, "token-1", Timestamp(T0), 60_000)
        .unwrap()
    {
        ClaimOutcome::Claimed { job, token, .. } => LeaseFence { job: job.id, token },
        ClaimOutcome::Skipped { reason } => panic!("nothing claimed: {reason:?}"),
    }
}

/// A job's run comes with its job, as nobody holds it: a running job arrives queued
/// (as a released one is), with no lease; a run's lease and a cancel request stay
/// behind.
#[test]
fn a_jobs_run_comes_with_its_job_unheld() {
    both_ways(|source, target| {
        let s = source.store();
        s.enqueue_job(&NewJob {
            id: "job-1".into(),
            group: "g".into(),
            spec: json!({"objective": "o", "b": 1, "a": [2.50]}),
            created_at: Timestamp(T0),
        })
        .unwrap();
        let fence = claim(s, "pid-1@laptop");
        let state = fixtures::initial_state("run-j");
        s.create_job_run(
            &fence,
            &fixtures::info("run-j", T0),
            &state,
            &[fixtures::created_event(&state)],
        )
        .unwrap();
        let (_, mut commit) = fixtures::next_turn(&state);
        commit.lease = Some(fence.clone());
        s.commit_turn(&commit).unwrap();
        assert!(
            s.try_lease_run(&run("run-j"), "pid-1@laptop", "t", 60_000, false)
                .unwrap()
                .is_ok()
        );
        s.request_cancel(&CancelTarget::Run(run("run-j")), Timestamp(T0))
            .unwrap();

        let archive = s.archive_run(&run("run-j")).unwrap();
        let job = archive.job.as_ref().unwrap();
        assert_eq!((job.id.as_str(), job.status.as_str()), ("job-1", "queued"));
        let text = archive.to_text().unwrap();
        assert!(!text.contains("pid-1@laptop"), "{text}");
        let t = target.store();
        t.import_run(&RunArchive::from_slice(text.as_bytes()).unwrap())
            .unwrap();
        assert_eq!(
            t.archive_run(&run("run-j")).unwrap().to_text().unwrap(),
            text
        );
        let moved = t.job("job-1").unwrap();
        assert_eq!(moved.status, JobStatus::Queued);
        assert_eq!(moved.run_id, Some(run("run-j")));
        assert_eq!((moved.lease_owner, moved.attempts), (None, 1));
        assert_eq!(moved.spec, s.job("job-1").unwrap().spec);
        assert_eq!(t.run_lease_holder(&run("run-j")).unwrap(), None);
        assert!(
            !t.cancel_requested(&CancelTarget::Run(run("run-j")), Some("t"))
                .unwrap()
        );
        // Claimed there as a queued job is, continuing its run.
        let fence = claim(t, "pid-2@fleet");
        assert_eq!(fence.job, "job-1");
        assert_eq!(t.job("job-1").unwrap().attempts, 2);
    });
}

/// A write that fails half-way (here the job's id is taken by another run's job, found
/// after the run's row went in) leaves nothing of the run behind.
#[test]
fn an_import_that_fails_half_way_writes_nothing() {
    both_ways(|source, target| {
        let s = source.store();
        s.enqueue_job(&NewJob {
            id: "job-1".into(),
            group: "g".into(),
            spec: json!({}),
            created_at: Timestamp(T0),
        })
        .unwrap();
        let fence = claim(s, "w");
        let state = fixtures::initial_state("run-j");
        s.create_job_run(
            &fence,
            &fixtures::info("run-j", T0),
            &state,
            &[fixtures::created_event(&state)],
        )
        .unwrap();
        let archive = s.archive_run(&run("run-j")).unwrap();
        let t = target.store();
        t.enqueue_job(&NewJob {
            id: "job-1".into(),
            group: "g".into(),
            spec: json!({}),
            created_at: Timestamp(T0),
        })
        .unwrap();
        let err = t.import_run(&archive).unwrap_err();
        assert!(
            matches!(&err, Error::ImportConflict { detail, .. } if detail.contains("job job-1 is already in this database, with no run")),
            "{err}"
        );
        assert!(matches!(
            t.resolve_run("run-j"),
            Err(Error::RunNotFound { .. })
        ));
        assert_eq!(target.count(Table::Events, &run("run-j")), 0);
    });
}
