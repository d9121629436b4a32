//! Pools in the store: spend counted against the pool of the turn's worker, declared
//! usage, exhaustion marks from spent quotas, benches.

use baton_core::ErrorClass;
use baton_core::ids::{Timestamp, WorkerId};
use baton_core::router::{Allowance, Pin, PinReason, PoolId, PoolUsage, SeatId};
use baton_core::state::ExecutionState;
use baton_core::turn::ReportedUsage;
use baton_store::{
    BenchChange, BenchOutcome, BenchTarget, Estimate, ManualUsage, PinFilter, ReservationId,
    ReserveOutcome, ReserveRequest, SpentBy, SpentCall, Store, UsageMode, bench_set,
};

use super::Backend;
use super::fixtures::{self, T0};

const HOUR: i64 = 3_600_000;

fn pool(id: &str) -> PoolId {
    PoolId::new(id)
}

/// Commits the next turn of `state` with its worker in `pool` (or none), each call
/// reporting `tokens` (input 3/4, output 1/4) at `micro_usd`.
fn commit(
    store: &dyn Store,
    state: &ExecutionState,
    in_pool: Option<&str>,
    tokens: u64,
    micro_usd: u64,
) -> ExecutionState {
    let (after, mut commit) = fixtures::next_turn(state);
    for call in &mut commit.record.calls {
        call.usage = Some(ReportedUsage {
            input_tokens: tokens * 3 / 4,
            output_tokens: tokens / 4,
            cached_tokens: 0,
        });
        call.cost_micro_usd = Some(micro_usd);
    }
    commit.pool = in_pool.map(pool);
    store.commit_turn(&commit).unwrap();
    after
}

fn spent_calls(calls: &[baton_core::turn::CallRecord]) -> Vec<SpentCall> {
    calls.iter().map(SpentCall::of).collect()
}

fn usage(store: &dyn Store, id: &str, start: i64, end: i64) -> PoolUsage {
    store
        .pool_usage(&pool(id), Timestamp(start), Timestamp(end))
        .unwrap()
}

/// Every call of a turn counts against the pool its worker was in, in the window its
/// start falls in; other pools and pool-less turns count against nothing.
pub fn pool_usage_sums_the_calls_of_its_workers_in_the_window(backend: &dyn Backend) {
    let store = backend.store();
    let state = fixtures::create(store, "run-1", T0);
    // Turns 0 and 2 in claude, 1 in codex, 3 in none; two calls each.
    let state = commit(store, &state, Some("claude"), 1_000, 2_500);
    let state = commit(store, &state, Some("codex"), 400, 100);
    let state = commit(store, &state, Some("claude"), 2_000, 1_500_000);
    commit(store, &state, None, 9_999, 9_999);

    let claude = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!(claude.tokens, 2 * 1_000 + 2 * 2_000);
    assert_eq!(claude.requests, 4);
    assert!(
        (claude.usd - 2.0 * (0.0025 + 1.5)).abs() < 1e-9,
        "{}",
        claude.usd
    );
    assert_eq!(claude.exhausted_until, None);
    let codex = usage(store, "codex", T0, T0 + HOUR);
    assert_eq!((codex.tokens, codex.requests), (800, 2));
    // Turn 2 starts at T0 + 2000: a window ending there holds turns 0 and 1 only.
    assert_eq!(usage(store, "claude", T0, T0 + 2_000).tokens, 2_000);
    assert_eq!(usage(store, "claude", T0 + HOUR, T0 + 2 * HOUR).tokens, 0);
    // A pool nobody used reads as nothing used, and another process reads the same.
    assert_eq!(
        usage(store, "glm", T0, T0 + HOUR),
        PoolUsage::none(pool("glm"))
    );
    let other = backend.reopen();
    assert_eq!(usage(other.as_ref(), "claude", T0, T0 + HOUR), claude);
}

/// A turn that is refused (fenced off) counts nothing against its pool.
pub fn a_refused_turn_counts_nothing(backend: &dyn Backend) {
    let store = backend.store();
    let state = fixtures::create(store, "run-1", T0);
    let (_, mut first) = fixtures::next_turn(&state);
    first.pool = Some(pool("claude"));
    store.commit_turn(&first).unwrap();
    let before = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!(before.requests, 2);
    assert!(store.commit_turn(&first).is_err());
    assert_eq!(usage(store, "claude", T0, T0 + HOUR), before);
}

fn declared(id: &str, mode: UsageMode, at: i64, tokens: u64, micro_usd: u64) -> ManualUsage {
    ManualUsage {
        pool: pool(id),
        mode,
        at: Timestamp(at),
        tokens,
        cost_micro_usd: micro_usd,
        requests: 1,
        note: "from the provider's dashboard".into(),
        recorded_by: "ada".into(),
        recorded_at: Timestamp(at + 5),
    }
}

/// Declared usage adds to the calls; a `Set` replaces everything before it in its
/// window (the dashboard counted it) and what comes after is added to it.
pub fn declared_usage_adds_and_a_set_replaces_what_came_before_it(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let state = commit(store, &state, Some("claude"), 1_000, 0); // T0, T0+100
    store
        .record_usage(&declared("claude", UsageMode::Add, T0 + 500, 300, 40))
        .unwrap();
    assert_eq!(usage(store, "claude", T0, T0 + HOUR).tokens, 2_300);
    // The dashboard says 50,000 as of T0 + 800; turn 1 (T0 + 1000) comes after.
    store
        .record_usage(&declared(
            "claude",
            UsageMode::Set,
            T0 + 800,
            50_000,
            7_000_000,
        ))
        .unwrap();
    commit(store, &state, Some("claude"), 8, 1_000);
    store
        .record_usage(&declared("claude", UsageMode::Add, T0 + 1_500, 5, 0))
        .unwrap();
    let used = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!(used.tokens, 50_000 + 2 * 8 + 5);
    assert_eq!(used.requests, 1 + 2 + 1);
    assert!((used.usd - 7.002).abs() < 1e-9, "{}", used.usd);
    // Work declared for another window, or another pool, is not counted here.
    store
        .record_usage(&declared("claude", UsageMode::Add, T0 + HOUR, 1, 0))
        .unwrap();
    store
        .record_usage(&declared("codex", UsageMode::Add, T0 + 10, 1, 0))
        .unwrap();
    assert_eq!(usage(store, "claude", T0, T0 + HOUR), used);
    // A set in the next window starts that window afresh.
    assert_eq!(usage(store, "claude", T0 + HOUR, T0 + 2 * HOUR).tokens, 1);
    let rows = store.declared_usage(&pool("claude")).unwrap();
    assert_eq!(
        rows.iter().map(|r| (r.mode, r.tokens)).collect::<Vec<_>>(),
        [
            (UsageMode::Add, 300),
            (UsageMode::Set, 50_000),
            (UsageMode::Add, 5),
            (UsageMode::Add, 1)
        ]
    );
    assert_eq!(rows[1].recorded_by, "ada");
}

/// A call whose provider said the quota is spent marks its pool exhausted until the
/// reset it named; with no reset named (Gemini's per-day quota), until the end of the
/// window the mark was made in.
pub fn a_spent_quota_marks_its_pool_exhausted_until_the_reset(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let spent = |state: &ExecutionState, id: &str, reset: Option<i64>| {
        let (after, mut commit) = fixtures::next_turn(state);
        let call = &mut commit.record.calls[0];
        call.error_class = Some(ErrorClass::QuotaExhausted);
        call.quota_reset_at = reset.map(Timestamp);
        commit.pool = Some(pool(id));
        store.commit_turn(&commit).unwrap();
        after
    };
    // Turn 0 (T0): claude's quota is back at T0 + 30 h.
    let state = spent(&state, "claude", Some(T0 + 30 * HOUR));
    // Turn 1 (T0 + 1000): gemini's per-day quota, no reset named.
    let state = spent(&state, "gemini", None);
    commit(store, &state, Some("codex"), 10, 0);

    let day = 24 * HOUR;
    let claude = usage(store, "claude", T0, T0 + day);
    assert_eq!(claude.exhausted_until, Some(Timestamp(T0 + 30 * HOUR)));
    // The next window still sees a mark whose reset lies in it, but not a later one.
    assert_eq!(
        usage(store, "claude", T0 + day, T0 + 2 * day).exhausted_until,
        Some(Timestamp(T0 + 30 * HOUR))
    );
    assert_eq!(
        usage(store, "claude", T0 + 2 * day, T0 + 3 * day).exhausted_until,
        None
    );
    assert_eq!(
        usage(store, "gemini", T0, T0 + day).exhausted_until,
        Some(Timestamp(T0 + day))
    );
    assert_eq!(
        usage(store, "gemini", T0 + day, T0 + 2 * day).exhausted_until,
        None
    );
    assert_eq!(usage(store, "codex", T0, T0 + day).exhausted_until, None);
    // The router reads the mark at its own clock.
    assert!(claude.exhausted_at(Timestamp(T0 + HOUR)).is_some());
    assert!(claude.exhausted_at(Timestamp(T0 + 30 * HOUR)).is_none());
}

/// Benches record who and when; benching twice records once; unbenching puts the
/// target back, and the history of a re-bench names the latest bench.
pub fn benches_record_who_and_when_and_unbench_puts_back(backend: &dyn Backend) {
    let store = backend.store();
    let change = |target: BenchTarget, benched: bool, by: &str, at: i64| BenchChange {
        target,
        benched,
        by: by.into(),
        at: Timestamp(at),
        reason: benched.then(|| format!("{by} said so")),
    };
    let codex = || BenchTarget::Pool(pool("codex"));
    let gpt = || BenchTarget::Worker(WorkerId::new("gpt-5"));
    assert!(store.benches().unwrap().is_empty());
    assert_eq!(
        store.set_bench(&change(codex(), false, "ada", 1)).unwrap(),
        BenchOutcome::Unchanged
    );
    assert_eq!(
        store.set_bench(&change(codex(), true, "ada", 2)).unwrap(),
        BenchOutcome::Changed
    );
    assert_eq!(
        store.set_bench(&change(codex(), true, "bob", 3)).unwrap(),
        BenchOutcome::Unchanged
    );
    store.set_bench(&change(gpt(), true, "bob", 4)).unwrap();
    let benches = backend.reopen().benches().unwrap();
    assert_eq!(benches.len(), 2);
    assert_eq!(benches[0].target, codex());
    assert_eq!(
        (benches[0].by.as_str(), benches[0].at),
        ("ada", Timestamp(2))
    );
    assert_eq!(benches[0].reason.as_deref(), Some("ada said so"));
    assert_eq!(benches[1].target, gpt());
    let set = bench_set(&benches);
    assert!(set.pools.contains(&pool("codex")) && set.workers.contains(&WorkerId::new("gpt-5")));

    assert_eq!(
        store.set_bench(&change(codex(), false, "bob", 5)).unwrap(),
        BenchOutcome::Changed
    );
    store.set_bench(&change(gpt(), false, "bob", 6)).unwrap();
    store.set_bench(&change(gpt(), true, "cy", 7)).unwrap();
    let benches = store.benches().unwrap();
    assert_eq!(benches.len(), 1);
    assert_eq!(
        (benches[0].target.clone(), benches[0].by.as_str()),
        (gpt(), "cy")
    );
    // A pool and a worker with the same name are different targets.
    store
        .set_bench(&change(BenchTarget::Pool(pool("gpt-5")), true, "cy", 8))
        .unwrap();
    assert_eq!(store.benches().unwrap().len(), 2);
}

fn pin(seat: &str, worker: &str, pool_id: &str, phase: &str, at: i64, reason: PinReason) -> Pin {
    Pin {
        seat: SeatId::new(seat),
        worker: WorkerId::new(worker),
        model: format!("mock/{worker}"),
        family: format!("family-{worker}"),
        pool: pool(pool_id),
        phase: phase.into(),
        at: Timestamp(at),
        fractions: [(pool("claude"), 0.25), (pool("codex"), 1.0)]
            .into_iter()
            .collect(),
        reason,
        excluded: None,
    }
}

/// A pin is stored with the turn it seats and read back whole (reason and fractions
/// included), in the order written, by run, seat, pool, phase and time; another process
/// reads the same.
pub fn pins_are_written_with_their_turn_and_read_back_in_order(backend: &dyn Backend) {
    let store = backend.store();
    let state = fixtures::create(store, "run-1", T0);
    let first = pin(
        "build.step",
        "a",
        "claude",
        "step T1",
        T0,
        PinReason::AtPhaseStart,
    );
    // Whom a seating left out is kept as written: some, nobody, or not recorded.
    let second = Pin {
        excluded: Some(vec![baton_core::router::PassedOver {
            worker: baton_core::ids::WorkerId::new("a"),
            reason: "pool_exhausted".into(),
            why: "pool claude is exhausted until 3600000".into(),
        }]),
        ..pin(
            "build.step",
            "b",
            "codex",
            "step T1",
            T0 + HOUR,
            PinReason::PoolExhausted {
                pool: pool("claude"),
            },
        )
    };
    let (state, mut commit) = fixtures::next_turn(&state);
    commit.pins = vec![first.clone()];
    store.commit_turn(&commit).unwrap();
    // A turn the pin held for writes none.
    let (state, commit) = fixtures::next_turn(&state);
    store.commit_turn(&commit).unwrap();
    let (_, mut commit) = fixtures::next_turn(&state);
    commit.pins = vec![second.clone()];
    store.commit_turn(&commit).unwrap();
    let other = fixtures::create(store, "run-2", T0);
    let (_, mut commit) = fixtures::next_turn(&other);
    let third = Pin {
        excluded: Some(Vec::new()),
        ..pin(
            "review.code",
            "c",
            "claude",
            "step T2",
            T0,
            PinReason::AtPhaseStart,
        )
    };
    commit.pins = vec![third.clone()];
    store.commit_turn(&commit).unwrap();

    let run1 = store
        .pins(&PinFilter::run(&baton_core::ids::RunId("run-1".into())))
        .unwrap();
    assert_eq!(
        run1.iter().map(|p| (p.turn, &p.pin)).collect::<Vec<_>>(),
        [(0, &first), (2, &second)]
    );
    assert!(run1.iter().all(|p| p.run_id.0 == "run-1"));
    let all = store.pins(&PinFilter::default()).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[2].pin, third);
    let by = |filter: PinFilter| -> Vec<String> {
        store
            .pins(&filter)
            .unwrap()
            .into_iter()
            .map(|p| p.pin.worker.to_string())
            .collect()
    };
    let seat = PinFilter {
        seat: Some(SeatId::new("review.code")),
        ..PinFilter::default()
    };
    assert_eq!(by(seat), ["c"]);
    let in_pool = PinFilter {
        pool: Some(pool("claude")),
        ..PinFilter::default()
    };
    assert_eq!(by(in_pool), ["a", "c"]);
    let phase = PinFilter {
        phase: Some("step T1".into()),
        ..PinFilter::default()
    };
    assert_eq!(by(phase), ["a", "b"]);
    let since = PinFilter {
        since: Some(Timestamp(T0 + 1)),
        ..PinFilter::default()
    };
    assert_eq!(by(since), ["b"]);
    let reopened = backend.reopen();
    assert_eq!(reopened.pins(&PinFilter::default()).unwrap(), all);
}

/// A turn refused at commit (here: fenced off, as a second process committing the same
/// turn is) writes no pin: the pin lives and dies with its turn's transaction.
pub fn a_turn_that_does_not_commit_leaves_no_pin(backend: &dyn Backend) {
    let store = backend.store();
    let state = fixtures::create(store, "run-1", T0);
    let (_, mut first) = fixtures::next_turn(&state);
    first.pins = vec![pin(
        "build.step",
        "a",
        "claude",
        "step T1",
        T0,
        PinReason::AtPhaseStart,
    )];
    store.commit_turn(&first).unwrap();
    let mut again = first.clone();
    again.pins = vec![pin(
        "build.step",
        "b",
        "codex",
        "step T1",
        T0 + 5,
        PinReason::ReseatedAtHandoff { handoff: 0 },
    )];
    assert!(store.commit_turn(&again).is_err());
    let pins = store.pins(&PinFilter::default()).unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].pin.worker.as_str(), "a");
}

/// The one read of a hand-off gives what `pool_usage` and `benches` give apart.
pub fn floor_reading_is_each_pools_usage_and_the_benches(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let state = commit(store, &state, Some("claude"), 1_000, 2_500);
    commit(store, &state, Some("codex"), 400, 100);
    store
        .set_bench(&BenchChange {
            target: BenchTarget::Pool(pool("codex")),
            benched: true,
            by: "ada".into(),
            at: Timestamp(T0),
            reason: None,
        })
        .unwrap();
    let windows = [
        (pool("codex"), Timestamp(T0), Timestamp(T0 + HOUR)),
        (pool("claude"), Timestamp(T0), Timestamp(T0 + HOUR)),
    ];
    let (usage_read, benches) = store.floor_reading(&windows).unwrap();
    assert_eq!(
        usage_read,
        [
            usage(store, "codex", T0, T0 + HOUR),
            usage(store, "claude", T0, T0 + HOUR)
        ]
    );
    assert_eq!(usage_read[1].tokens, 2_000);
    assert_eq!(benches, store.benches().unwrap());
    assert!(bench_set(&benches).pools.contains(&pool("codex")));
}

/// A hand-off's reading is kept and brought up to date by the next one: it must still
/// see everything committed in between, by this process or another (a turn of another
/// run, an owner's `baton pool usage` or `baton bench`), exactly as summing afresh does.
pub fn a_floor_reading_sees_what_any_process_wrote_since_the_last(backend: &dyn Backend) {
    let store = backend.store();
    let other = backend.reopen();
    let other = other.as_ref();
    let day = 24 * HOUR;
    let windows = |start: i64| {
        [
            (pool("claude"), Timestamp(start), Timestamp(start + day)),
            (pool("codex"), Timestamp(start), Timestamp(start + day)),
        ]
    };
    // The reading, checked against `pool_usage` and `benches` read afresh.
    let read = |start: i64| {
        let (got, benches) = store.floor_reading(&windows(start)).unwrap();
        let fresh: Vec<PoolUsage> = windows(start)
            .iter()
            .map(|(p, s, e)| other.pool_usage(p, *s, *e).unwrap())
            .collect();
        assert_eq!(got, fresh);
        assert_eq!(benches, other.benches().unwrap());
        (got, benches)
    };
    let state = fixtures::create(store, "run-1", T0);
    let state = commit(store, &state, Some("claude"), 1_000, 2_500);
    let (first, _) = read(T0);
    assert_eq!(first[0].tokens, 2_000);

    // Another process: a turn of another run in claude, usage declared for codex, and
    // codex benched.
    let theirs = fixtures::create(other, "run-2", T0);
    let theirs = commit(other, &theirs, Some("claude"), 400, 10);
    other
        .record_usage(&declared("codex", UsageMode::Add, T0 + 500, 300, 40))
        .unwrap();
    other
        .set_bench(&BenchChange {
            target: BenchTarget::Pool(pool("codex")),
            benched: true,
            by: "ada".into(),
            at: Timestamp(T0 + 600),
            reason: None,
        })
        .unwrap();
    let (second, benches) = read(T0);
    assert_eq!((second[0].tokens, second[1].tokens), (2_800, 300));
    assert!(bench_set(&benches).pools.contains(&pool("codex")));

    // This process's own turn and a judge's call, then a dashboard reading that
    // replaces claude's sums.
    let state = commit(store, &state, Some("claude"), 100, 0);
    read(T0);
    let (_, judged) = fixtures::next_turn(&state);
    let judge = SpentBy::Judge { group: "g".into() };
    other
        .record_spend(
            &pool("codex"),
            &judge,
            &spent_calls(&judged.record.calls),
            Timestamp(T0),
        )
        .unwrap();
    let (spent, _) = read(T0);
    assert_eq!(spent[1].requests, 1 + 2);
    other
        .record_usage(&declared("claude", UsageMode::Set, T0 + 10 * HOUR, 7, 0))
        .unwrap();
    let (set, _) = read(T0);
    assert_eq!(set[0].tokens, 7);
    // What follows the dashboard reading is added to it; a spent quota marks the pool.
    let (_, mut spent) = fixtures::next_turn(&theirs);
    spent.record.calls[0].error_class = Some(ErrorClass::QuotaExhausted);
    spent.record.started_at = Timestamp(T0 + 11 * HOUR);
    for call in &mut spent.record.calls {
        call.started_at = Timestamp(T0 + 11 * HOUR);
    }
    spent.pool = Some(pool("claude"));
    other.commit_turn(&spent).unwrap();
    let (marked, _) = read(T0);
    assert_eq!(marked[0].exhausted_until, Some(Timestamp(T0 + day)));
    assert!(marked[0].requests > set[0].requests);
    // The next window starts from nothing; an unbench is seen.
    other
        .set_bench(&BenchChange {
            target: BenchTarget::Pool(pool("codex")),
            benched: false,
            by: "ada".into(),
            at: Timestamp(T0 + day),
            reason: None,
        })
        .unwrap();
    let (next, benches) = read(T0 + day);
    assert_eq!(next[0].tokens, 0);
    assert!(benches.is_empty());
    commit(store, &state, Some("codex"), 50, 0);
    read(T0 + day);
}

/// Calls no committed turn carries (a judge's, a stopped turn's) count against the pool
/// in the window each started in, exhaustion marks included; a call that never reached
/// the provider counts nothing.
pub fn spend_outside_a_turn_counts_against_its_pool(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let (_, turn) = fixtures::next_turn(&state);
    let mut calls = turn.record.calls.clone();
    calls[0].usage = Some(ReportedUsage {
        input_tokens: 300,
        output_tokens: 20,
        cached_tokens: 0,
    });
    calls[0].cost_micro_usd = Some(70);
    calls[1].error_class = Some(ErrorClass::Unreachable);
    let stopped = SpentBy::Turn {
        run: state.run_id.clone(),
        turn: 0,
    };
    store
        .record_spend(
            &pool("claude"),
            &stopped,
            &spent_calls(&calls),
            Timestamp(T0 + 5),
        )
        .unwrap();
    let claude = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!((claude.tokens, claude.requests), (320, 1));
    assert!((claude.usd - 70e-6).abs() < 1e-12, "{}", claude.usd);
    // The turn is committed later under the same number: both count, apart.
    let (_, mut committed) = fixtures::next_turn(&state);
    committed.pool = Some(pool("claude"));
    store.commit_turn(&committed).unwrap();
    assert_eq!(usage(store, "claude", T0, T0 + HOUR).requests, 1 + 2);
    // A judge whose quota is spent marks its pool exhausted.
    let mut spent = turn.record.calls[..1].to_vec();
    spent[0].error_class = Some(ErrorClass::QuotaExhausted);
    spent[0].quota_reset_at = Some(Timestamp(T0 + 2 * HOUR));
    let judge = SpentBy::Judge { group: "g".into() };
    store
        .record_spend(&pool("codex"), &judge, &spent_calls(&spent), Timestamp(T0))
        .unwrap();
    let codex = usage(store, "codex", T0, T0 + HOUR);
    assert_eq!(codex.exhausted_until, Some(Timestamp(T0 + 2 * HOUR)));
    assert_eq!(codex.requests, 1);
    assert_eq!(usage(store, "codex", T0 + HOUR, T0 + 2 * HOUR).requests, 0);
}

/// A turn whose commit landed but was reported as failed (the disk answered late, the
/// connection dropped after COMMIT) hands its calls to `record_spend` all the same: the
/// calls its committed turn carries are not counted a second time, while a fenced-off
/// turn's own calls under the same number (another process committed that number) are.
pub fn spend_of_a_committed_turn_is_not_counted_twice(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let (_, mut committed) = fixtures::next_turn(&state);
    committed.pool = Some(pool("claude"));
    for call in &mut committed.record.calls {
        call.usage = Some(ReportedUsage {
            input_tokens: 300,
            output_tokens: 20,
            cached_tokens: 0,
        });
        call.cost_micro_usd = Some(70);
    }
    store.commit_turn(&committed).unwrap();
    let once = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!(once.requests, 2);

    let turn = SpentBy::Turn {
        run: state.run_id.clone(),
        turn: committed.record.turn,
    };
    let calls = spent_calls(&committed.record.calls);
    store
        .record_spend(&pool("claude"), &turn, &calls, Timestamp(T0 + 9))
        .unwrap();
    assert_eq!(usage(store, "claude", T0, T0 + HOUR), once);

    // The fenced-off process's calls started at other times: they were billed too.
    let mut theirs = committed.record.calls.clone();
    for call in &mut theirs {
        call.started_at = Timestamp(call.started_at.0 + 1);
    }
    store
        .record_spend(
            &pool("claude"),
            &turn,
            &spent_calls(&theirs),
            Timestamp(T0 + 9),
        )
        .unwrap();
    let twice = usage(store, "claude", T0, T0 + HOUR);
    assert_eq!(twice.requests, 4);
    assert_eq!(twice.tokens, 2 * once.tokens);
}

/// A request for `requests` of pool `id`'s headroom (an allowance of 10 requests in
/// the hour from T0), for turn `turn` of run-1.
fn reserve_request(id: &str, turn: u32, requests: u64, ttl_ms: i64) -> ReserveRequest {
    ReserveRequest {
        pool: pool(id),
        window: (Timestamp(T0), Timestamp(T0 + HOUR)),
        allowance: Allowance {
            requests: Some(10),
            ..Allowance::default()
        },
        estimate: Estimate {
            tokens: 500,
            cost_micro_usd: 0,
            requests,
        },
        run: baton_core::ids::RunId("run-1".into()),
        turn,
        lease_token: None,
        at: Timestamp(T0 + 10),
        ttl_ms,
    }
}

fn reserved(outcome: ReserveOutcome) -> ReservationId {
    match outcome {
        ReserveOutcome::Reserved { id } => id,
        short => panic!("expected a reservation: {short:?}"),
    }
}

/// Nine of ten requests used: the last of the pool is reserved by exactly one of the
/// processes asking for it at once (each on its own connection, as two hosts would
/// be), and the other is `Short` with the usage that says why. Repeated, so that the
/// two requests really meet.
pub fn racing_reservations_for_the_last_of_a_pool_reserve_it_once(backend: &dyn Backend) {
    for round in 0..6 {
        let id = format!("claude-{round}");
        backend
            .store()
            .record_usage(&ManualUsage {
                requests: 9,
                ..declared(&id, UsageMode::Add, T0, 0, 0)
            })
            .unwrap();
        let stores = [backend.reopen(), backend.reopen()];
        let start = std::sync::Barrier::new(stores.len());
        let outcomes: Vec<ReserveOutcome> = std::thread::scope(|s| {
            let asks: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(turn, store)| {
                    let (start, id) = (&start, &id);
                    s.spawn(move || {
                        start.wait();
                        store
                            .try_reserve(&reserve_request(id, turn as u32, 1, 60_000))
                            .unwrap()
                    })
                })
                .collect();
            asks.into_iter().map(|a| a.join().unwrap()).collect()
        });
        let won = outcomes
            .iter()
            .filter(|o| matches!(o, ReserveOutcome::Reserved { .. }))
            .count();
        assert_eq!(won, 1, "round {round}: {outcomes:?}");
        let short = outcomes
            .iter()
            .find_map(|o| match o {
                ReserveOutcome::Short { usage } => Some(usage.clone()),
                ReserveOutcome::Reserved { .. } => None,
            })
            .unwrap();
        // Nine used, one held by the winner.
        assert_eq!((short.requests, short.tokens), (10, 500), "round {round}");
        // Every process reads the same headroom: the held request counts as used.
        let windows = [(pool(&id), Timestamp(T0), Timestamp(T0 + HOUR))];
        let (floor, _) = backend.store().floor_reading(&windows).unwrap();
        assert_eq!(floor[0].requests, 10, "round {round}");
        // What was spent is not changed by what is held.
        assert_eq!(usage(backend.store(), &id, T0, T0 + HOUR).requests, 9);
    }
}

/// A released reservation gives its headroom back at once; one whose holder never
/// released it (a process that died) expires by the store's clock; one held under a
/// run lease lives while the lease's heartbeat renews it and goes with the lease.
pub fn a_released_or_expired_reservation_frees_the_headroom(backend: &dyn Backend) {
    let store = backend.store();
    store
        .record_usage(&ManualUsage {
            requests: 9,
            ..declared("claude", UsageMode::Add, T0, 0, 0)
        })
        .unwrap();
    let first = reserved(
        store
            .try_reserve(&reserve_request("claude", 0, 1, 60_000))
            .unwrap(),
    );
    let short = store.try_reserve(&reserve_request("claude", 1, 1, 60_000));
    assert!(
        matches!(short, Ok(ReserveOutcome::Short { .. })),
        "{short:?}"
    );
    assert_eq!(store.live_reservations().unwrap().len(), 1);

    store.release_reservation(first).unwrap();
    assert!(store.live_reservations().unwrap().is_empty());
    let second = reserved(
        store
            .try_reserve(&reserve_request("claude", 1, 1, 1_000))
            .unwrap(),
    );
    assert_ne!(first, second, "an id is never given twice");
    // Releasing again (a late drop) is a no-op.
    store.release_reservation(first).unwrap();

    // Never released: two seconds on, by the store's clock, it holds nothing.
    backend.set_clock_offset(2_000);
    let windows = [(pool("claude"), Timestamp(T0), Timestamp(T0 + HOUR))];
    assert_eq!(store.floor_reading(&windows).unwrap().0[0].requests, 9);
    assert!(store.live_reservations().unwrap().is_empty());
    let third = reserved(
        store
            .try_reserve(&reserve_request("claude", 2, 1, 1_000))
            .unwrap(),
    );
    store.release_reservation(third).unwrap();

    // Held under a run lease: renewed with it, released with it.
    fixtures::create(store, "run-1", T0);
    let run = baton_core::ids::RunId("run-1".into());
    store
        .try_lease_run(&run, "host-a", "lease-a", 1_000, false)
        .unwrap()
        .unwrap();
    let leased = ReserveRequest {
        lease_token: Some("lease-a".into()),
        ..reserve_request("claude", 3, 1, 1_000)
    };
    reserved(store.try_reserve(&leased).unwrap());
    store.renew_run_lease(&run, "lease-a", 60_000).unwrap();
    backend.set_clock_offset(4_000);
    assert_eq!(store.floor_reading(&windows).unwrap().0[0].requests, 10);
    store.release_run_lease(&run, "lease-a").unwrap();
    assert_eq!(store.floor_reading(&windows).unwrap().0[0].requests, 9);
    assert!(store.live_reservations().unwrap().is_empty());
}

/// A turn that commits replaces what it held with what its calls spent, in its own
/// transaction: its reservation is gone and its calls are counted once. A commit that
/// is refused changes neither.
pub fn a_committed_turns_reservation_is_gone_and_its_usage_counted_once(store: &dyn Store) {
    let state = fixtures::create(store, "run-1", T0);
    let id = reserved(
        store
            .try_reserve(&reserve_request("claude", 0, 5, 60_000))
            .unwrap(),
    );
    let windows = [(pool("claude"), Timestamp(T0), Timestamp(T0 + HOUR))];
    assert_eq!(store.floor_reading(&windows).unwrap().0[0].requests, 5);

    let (_, mut turn) = fixtures::next_turn(&state);
    turn.pool = Some(pool("claude"));
    turn.reservation = Some(id);
    store.commit_turn(&turn).unwrap();
    assert!(store.live_reservations().unwrap().is_empty());
    // Two calls, two requests: the turn's, not its estimate, and not both.
    let (floor, _) = store.floor_reading(&windows).unwrap();
    assert_eq!(floor[0].requests, 2);
    assert_eq!(usage(store, "claude", T0, T0 + HOUR).requests, 2);

    // A second commit of the same turn is refused: it counts nothing again.
    let other = reserved(
        store
            .try_reserve(&reserve_request("claude", 1, 5, 60_000))
            .unwrap(),
    );
    assert!(store.commit_turn(&turn).is_err());
    assert_eq!(store.live_reservations().unwrap().len(), 1);
    assert_eq!(store.floor_reading(&windows).unwrap().0[0].requests, 7);
    store.release_reservation(other).unwrap();
}
