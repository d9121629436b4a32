//! Checks every `Store` backend must pass.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{ExecutionState, RecordKind};
use baton_protocol::{EventKind, EventMsg as Event};
use baton_store::{Error, RunStatus, Store, TurnCommit, WorkerHold};

use super::fixtures::{self, T0, create, next_turn, run_id, run_turns};
use super::{Backend, Damage, Table};

pub fn create_and_load_roundtrip(store: &dyn Store) {
    let state = create(store, "run-1", T0);
    assert_eq!(store.load_state(&state.run_id).unwrap(), state);
    let info = store.run_info(&state.run_id).unwrap();
    assert_eq!(info, fixtures::info("run-1", T0));
    assert!(store.turns(&state.run_id).unwrap().is_empty());
    assert_eq!(store.turn(&state.run_id, 0).unwrap(), None);

    let missing = run_id("nope");
    assert!(matches!(
        store.load_state(&missing),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        store.run_info(&missing),
        Err(Error::RunNotFound { .. })
    ));
}

pub fn creating_a_run_twice_is_refused(store: &dyn Store) {
    let state = create(store, "run-1", T0);
    let again = store.create_run(&fixtures::info("run-1", T0 + 1), &state, &[]);
    assert!(
        matches!(again, Err(Error::RunExists { ref run }) if run == "run-1"),
        "{again:?}"
    );
    // The first run is untouched, its creation event not doubled.
    assert_eq!(
        store.run_info(&state.run_id).unwrap().created_at,
        Timestamp(T0)
    );
    assert_eq!(store.events(&state.run_id, 0).unwrap().len(), 1);
}

/// The commit of a turn from `before` to `after`, `after` built by hand from
/// `next_turn`'s state (its records, header and events recomputed).
fn commit_of(before: &ExecutionState, after: &ExecutionState) -> TurnCommit {
    let (_, template) = next_turn(before);
    let changes = after.diff(before);
    let turn = before.turns;
    let worker = template.record.worker.as_str().to_string();
    let at = T0 + i64::from(turn) * 1000;
    TurnCommit {
        record: fixtures::turn_record(after, turn, &worker, at, &changes),
        header: after.header(),
        events: fixtures::turn_events(after, turn, &worker, at, changes.len()),
        changes,
        ..template
    }
}

/// The assembly line's records (findings, verdicts, plan versions) and the plan lock
/// commit with their turn and load back as they were, a changed finding included.
pub fn line_records_commit_and_load_with_their_turn(store: &dyn Store) {
    use baton_core::line::{
        DraftStep, Finding, FindingSeverity, FindingStatus, PlanLock, PlanVersion, Verdict,
        VerdictKind, plan_hash,
    };
    use baton_core::router::SeatId;
    let state = create(store, "run-line", T0);
    let (mut after, _) = next_turn(&state);
    let prov = after.decisions.last().unwrap().provenance.clone();
    let steps = vec![DraftStep {
        title: "bucket per key".into(),
        tags: vec!["heavy".into()],
    }];
    after.plan_versions.push(PlanVersion {
        id: "P1".into(),
        version: 1,
        station: "plan".into(),
        seat: SeatId::new("plan.co-draft"),
        steps: steps.clone(),
        rationale: None,
        from: vec![],
        content_hash: plan_hash(&steps),
        provenance: prov.clone(),
    });
    after.plan_lock = Some(PlanLock {
        plan: "P1".into(),
        version: 1,
        content_hash: plan_hash(&steps),
        provenance: prov.clone(),
    });
    after.findings.push(Finding {
        id: "N1".into(),
        station: "review".into(),
        seat: SeatId::new("review.breadth"),
        round: 1,
        step: None,
        severity: FindingSeverity::Major,
        raised_as: FindingSeverity::Major,
        what: "buckets never expire".into(),
        location: "src/limit.rs".into(),
        status: FindingStatus::Open,
        family: "zhipu".into(),
        provenance: prov.clone(),
        voices: vec![],
        fix_claimed: None,
        closed: None,
    });
    after.verdicts.push(Verdict {
        id: "V1".into(),
        station: "synthesis".into(),
        round: 1,
        verdict: VerdictKind::NeedsChanges,
        reasons: vec!["MAJOR at src/limit.rs".into()],
        findings: vec!["N1".into()],
        fix_round: true,
        provenance: prov,
    });
    let commit = commit_of(&state, &after);
    store.commit_turn(&commit).unwrap();
    assert_eq!(store.load_state(&state.run_id).unwrap(), after);

    // The next turn changes the finding: only it is stored again, and it loads changed.
    let (mut later, _) = next_turn(&after);
    later.findings[0].status = FindingStatus::Dismissed;
    let commit = commit_of(&after, &later);
    assert!(commit.changes.iter().any(|c| c.id == "N1"));
    assert!(!commit.changes.iter().any(|c| c.id == "P1" || c.id == "V1"));
    store.commit_turn(&commit).unwrap();
    assert_eq!(store.load_state(&state.run_id).unwrap(), later);
}

pub fn committed_turns_load_as_the_state_after_them(store: &dyn Store) {
    let mut state = create(store, "run-1", T0);
    let mut records = Vec::new();
    for turn in 0..5 {
        let (after, commit) = next_turn(&state);
        store.commit_turn(&commit).unwrap();
        assert_eq!(
            store.load_state(&state.run_id).unwrap(),
            after,
            "after turn {turn}"
        );
        assert_eq!(
            store.turn(&state.run_id, turn).unwrap().as_ref(),
            Some(&commit.record)
        );
        assert_eq!(
            store.turn_changes(&state.run_id, turn).unwrap(),
            commit.changes
        );
        records.push(commit.record);
        state = after;
    }
    assert_eq!(store.turns(&state.run_id).unwrap(), records);
    let info = store.run_info(&state.run_id).unwrap();
    assert_eq!(info.turns, 5);
    assert_eq!(info.updated_at, records[4].finished_at);
    assert!(store.turn_changes(&state.run_id, 5).unwrap().is_empty());
}

pub fn a_turn_is_never_committed_twice(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    let (after, commit) = next_turn(&state);
    store.commit_turn(&commit).unwrap();
    let counts = all_counts(backend, &run);

    let again = store.commit_turn(&commit);
    assert!(
        matches!(again, Err(Error::TurnConflict { turn: 0, ref run, .. }) if run == "run-1"),
        "{again:?}"
    );
    // A turn from the future is refused the same way.
    let (_, mut skipped) = next_turn(&after);
    skipped.record.turn = 5;
    assert!(matches!(
        store.commit_turn(&skipped),
        Err(Error::TurnConflict { turn: 5, .. })
    ));

    assert_eq!(all_counts(backend, &run), counts);
    assert_eq!(counts[0], 1, "turn rows");
    assert_eq!(store.load_state(&run).unwrap(), after);
    assert_eq!(store.run_info(&run).unwrap().turns, 1);
    assert_eq!(store.turns(&run).unwrap().len(), 1);

    let mut ghost = commit.clone();
    ghost.record.run_id = run_id("ghost");
    assert!(matches!(
        store.commit_turn(&ghost),
        Err(Error::RunNotFound { .. })
    ));
}

pub fn racing_commits_of_one_turn_commit_it_once(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    // Two stores on one database, as two processes holding the same run would be.
    let other = backend.reopen();
    let (after, commit) = next_turn(&state);
    let results: Vec<_> = std::thread::scope(|s| {
        let racers = [store, other.as_ref()].map(|st| s.spawn(|| st.commit_turn(&commit)));
        racers.map(|r| r.join().unwrap()).into_iter().collect()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    let fenced = results
        .iter()
        .filter(|r| matches!(r, Err(Error::TurnConflict { turn: 0, .. })))
        .count();
    assert_eq!((won, fenced), (1, 1), "{results:?}");
    assert_eq!(backend.count(Table::Turns, &run), 1);
    assert_eq!(other.load_state(&run).unwrap(), after);
}

pub fn a_failing_commit_writes_nothing(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    let counts = all_counts(backend, &run);
    let (after, commit) = next_turn(&state);

    // Both fail after the fence passed and the turn row was written: a record listed
    // twice (the delta's primary key), and an event of a run that does not exist (the
    // foreign key).
    let mut doubled = commit.clone();
    doubled.changes.push(commit.changes[0].clone());
    let mut stray = commit.clone();
    stray.events.push(Event {
        run_id: run_id("ghost"),
        turn: Some(0),
        at: Timestamp(T0),
        kind: EventKind::RunFinished { turns: 1 },
    });
    for bad in [doubled, stray] {
        assert!(matches!(
            store.commit_turn(&bad),
            Err(Error::Backend {
                op: "commit_turn",
                ..
            })
        ));
        assert_eq!(all_counts(backend, &run), counts);
        assert_eq!(store.load_state(&run).unwrap(), state);
        assert_eq!(store.run_info(&run).unwrap().turns, 0);
        assert_eq!(store.turn(&run, 0).unwrap(), None);
        assert!(store.prior_outputs(&run, 10).unwrap().is_empty());
    }

    // The fence was rolled back too: the turn still commits.
    store.commit_turn(&commit).unwrap();
    assert_eq!(store.load_state(&run).unwrap(), after);
}

pub fn a_new_store_on_the_same_database_sees_identical_state(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    let state = run_turns(store, state, 3);
    store.update_run(&run, RunStatus::Finished, &[]).unwrap();

    let other = backend.reopen();
    assert_eq!(other.load_state(&run).unwrap(), state);
    assert_eq!(other.run_info(&run).unwrap(), store.run_info(&run).unwrap());
    assert_eq!(other.turns(&run).unwrap(), store.turns(&run).unwrap());
    assert_eq!(
        other.events(&run, 0).unwrap(),
        store.events(&run, 0).unwrap()
    );

    // And the new store continues where the first left off.
    let (after, commit) = next_turn(&state);
    other.commit_turn(&commit).unwrap();
    assert_eq!(store.load_state(&run).unwrap(), after);
}

/// A provider's "not before" is written in its turn's transaction (a fenced-off turn
/// writes none), replaced by the worker's next one, and read by another process.
pub fn worker_holds_commit_with_their_turn_and_outlive_the_store(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    assert!(store.worker_holds(&run).unwrap().is_empty());
    let hold = |worker: &str, not_before: i64, asked_ms: u64| WorkerHold {
        worker: WorkerId::new(worker),
        not_before: Timestamp(not_before),
        asked_ms,
    };
    let (after, mut commit) = next_turn(&state);
    commit.holds = vec![hold("w1", T0 + 3_000, 3_000), hold("w2", T0 + 9_000, 9_000)];
    store.commit_turn(&commit).unwrap();
    // The same turn again is fenced off, and its holds with it.
    let mut again = commit.clone();
    again.holds = vec![hold("w1", T0 + 99_000, 99_000)];
    assert!(store.commit_turn(&again).is_err());
    assert_eq!(
        store.worker_holds(&run).unwrap(),
        [hold("w1", T0 + 3_000, 3_000), hold("w2", T0 + 9_000, 9_000)]
    );

    let (_, mut next) = next_turn(&after);
    next.holds = vec![hold("w1", T0 + 3_600_000, 3_600_000)];
    store.commit_turn(&next).unwrap();
    let other = backend.reopen();
    assert_eq!(
        other.worker_holds(&run).unwrap(),
        [
            hold("w1", T0 + 3_600_000, 3_600_000),
            hold("w2", T0 + 9_000, 9_000)
        ]
    );
    assert!(other.worker_holds(&run_id("ghost")).unwrap().is_empty());
}

pub fn runs_resolve_by_exact_id_or_unique_prefix(store: &dyn Store) {
    for (i, id) in ["run", "run-abc1", "run-abc2", "run-b7", "run_x"]
        .iter()
        .enumerate()
    {
        create(store, id, T0 + i as i64);
    }
    let resolve = |prefix: &str| store.resolve_run(prefix);
    // Exact wins even when it is also a prefix of other runs.
    assert_eq!(resolve("run").unwrap(), run_id("run"));
    assert_eq!(resolve("run-abc1").unwrap(), run_id("run-abc1"));
    assert_eq!(resolve("run-b").unwrap(), run_id("run-b7"));
    assert_eq!(resolve("run_").unwrap(), run_id("run_x"));
    match resolve("run-a") {
        Err(Error::AmbiguousRun { prefix, candidates }) => {
            assert_eq!(prefix, "run-a");
            assert_eq!(candidates, ["run-abc1", "run-abc2"]);
        }
        other => panic!("expected AmbiguousRun, got {other:?}"),
    }
    assert!(
        matches!(resolve("run-"), Err(Error::AmbiguousRun { candidates, .. }) if candidates.len() == 3)
    );
    // No id starts with it: the end of an id names it too (UUIDv7s made in the same
    // minute share their first digits), from four characters on.
    assert_eq!(resolve("abc2").unwrap(), run_id("run-abc2"));
    assert_eq!(resolve("un_x").unwrap(), run_id("run_x"));
    assert!(
        matches!(resolve("-abc"), Err(Error::RunNotFound { .. })),
        "a middle is not an end"
    );
    // Prefixes are literal and case-sensitive: no wildcards.
    for missing in [
        "x",
        "",
        "_x",
        "RUN-b",
        "run-%",
        "run-_bc1",
        "run-abc12",
        "ABC2",
        "%bc2",
    ] {
        assert!(
            matches!(resolve(missing), Err(Error::RunNotFound { ref prefix }) if prefix == missing),
            "{missing:?}"
        );
    }
}

pub fn runs_list_newest_first_and_update_their_status(store: &dyn Store) {
    assert!(store.list_runs().unwrap().is_empty());
    create(store, "old", T0);
    create(store, "new", T0 + 5000);
    create(store, "mid", T0 + 1000);
    let ids: Vec<_> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|r| r.id.0)
        .collect();
    assert_eq!(ids, ["new", "mid", "old"]);

    let run = run_id("mid");
    let blocked = Event {
        run_id: run.clone(),
        turn: None,
        at: Timestamp(T0 + 9000),
        kind: EventKind::RunBlocked {
            question: "which database?".into(),
        },
    };
    store
        .update_run(&run, RunStatus::Blocked, std::slice::from_ref(&blocked))
        .unwrap();
    let info = store.run_info(&run).unwrap();
    assert_eq!(
        (info.status, info.updated_at),
        (RunStatus::Blocked, Timestamp(T0 + 9000))
    );
    assert_eq!(
        store.events(&run, 0).unwrap().last().map(|e| &e.event),
        Some(&blocked)
    );

    // Without events the status changes and the time stays.
    store.update_run(&run, RunStatus::Active, &[]).unwrap();
    let info = store.run_info(&run).unwrap();
    assert_eq!(
        (info.status, info.updated_at),
        (RunStatus::Active, Timestamp(T0 + 9000))
    );

    assert!(matches!(
        store.update_run(&run_id("nope"), RunStatus::Finished, &[]),
        Err(Error::RunNotFound { .. })
    ));
}

pub fn events_are_append_only_ordered_and_paginated(store: &dyn Store) {
    let a = create(store, "run-a", T0);
    let b = create(store, "run-b", T0);
    let mut expected = vec![fixtures::created_event(&a)];
    let (mut sa, mut sb) = (a, b);
    // Interleave the two runs' turns, so their events interleave in the table.
    for _ in 0..3 {
        let (after, commit) = next_turn(&sa);
        store.commit_turn(&commit).unwrap();
        expected.extend(commit.events.iter().cloned());
        sa = after;
        sb = run_turns(store, sb, 1);
    }
    let finished = Event {
        run_id: sa.run_id.clone(),
        turn: None,
        at: Timestamp(T0 + 99_000),
        kind: EventKind::RunFinished { turns: 3 },
    };
    store
        .update_run(
            &sa.run_id,
            RunStatus::Finished,
            std::slice::from_ref(&finished),
        )
        .unwrap();
    expected.push(finished);

    let all = store.events(&sa.run_id, 0).unwrap();
    let got: Vec<_> = all.iter().map(|e| e.event.clone()).collect();
    assert_eq!(got, expected);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "seq increases");

    // Pagination: everything after a seen seq, in pages, adds up to the whole log.
    let mut after = 0;
    let mut paged = Vec::new();
    while let Some(page) = Some(store.events(&sa.run_id, after).unwrap()).filter(|p| !p.is_empty())
    {
        let take: Vec<_> = page.into_iter().take(4).collect();
        after = take.last().map_or(after, |e| e.seq);
        paged.extend(take);
    }
    assert_eq!(paged, all);
    assert!(
        store
            .events(&sa.run_id, all[all.len() - 1].seq)
            .unwrap()
            .is_empty()
    );

    // Appending to one run never renumbers the other's events.
    let b_before = store.events(&sb.run_id, 0).unwrap();
    run_turns(store, sb.clone(), 1);
    let b_after = store.events(&sb.run_id, 0).unwrap();
    assert_eq!(b_after[..b_before.len()], b_before[..]);
    assert_eq!(b_after[b_before.len()].seq, b_before.len() as u64 + 1);
}

/// Every event of a run, whichever write stored it, is numbered 1, 2, 3 … in its run,
/// whatever the other runs wrote in between, and a refused write takes no number.
pub fn events_of_a_run_are_numbered_without_gaps(store: &dyn Store) {
    let a = create(store, "run-a", T0);
    let b = create(store, "run-b", T0);
    let (after, commit) = next_turn(&a);
    let seqs = store.commit_turn(&commit).unwrap();
    assert_eq!(
        seqs,
        (2..2 + commit.events.len() as u64).collect::<Vec<_>>()
    );
    // Refused by the fence: nothing written, no number taken.
    assert!(store.commit_turn(&commit).is_err());
    run_turns(store, b, 2);
    let blocked = Event {
        run_id: a.run_id.clone(),
        turn: None,
        at: Timestamp(T0 + 50_000),
        kind: EventKind::RunBlocked {
            question: "which?".into(),
        },
    };
    let next = 2 + commit.events.len() as u64;
    assert_eq!(
        store
            .update_run(
                &a.run_id,
                RunStatus::Blocked,
                std::slice::from_ref(&blocked)
            )
            .unwrap(),
        vec![next]
    );
    store
        .set_run_config(
            &a.run_id,
            &serde_json::json!({}),
            std::slice::from_ref(&blocked),
        )
        .unwrap();
    assert_eq!(
        store
            .append_events(&a.run_id, std::slice::from_ref(&blocked))
            .unwrap(),
        vec![next + 2]
    );
    // An event for a run that does not exist is refused, and takes no number.
    let stray = Event {
        run_id: run_id("nope"),
        ..blocked.clone()
    };
    assert!(
        store
            .append_events(&stray.run_id, std::slice::from_ref(&stray))
            .is_err()
    );
    run_turns(store, after, 1);
    let seqs: Vec<u64> = store
        .events(&a.run_id, 0)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(seqs.len() as u64 > next + 2);
}

/// A follower reads every run's events from a cursor, in pages, in the order they were
/// committed, and a page at the end returns the same cursor.
pub fn events_since_reads_every_run_from_a_cursor(store: &dyn Store) {
    let start = store.events_since(Default::default(), 100).unwrap();
    assert!(start.events.is_empty());
    assert_eq!(start.next, Default::default());
    let a = create(store, "run-a", T0);
    let b = create(store, "run-b", T0);
    let mut expected = vec![fixtures::created_event(&a), fixtures::created_event(&b)];
    let (mut sa, mut sb) = (a, b);
    for _ in 0..3 {
        let (after, commit) = next_turn(&sa);
        store.commit_turn(&commit).unwrap();
        expected.extend(commit.events.iter().cloned());
        sa = after;
        let (after, commit) = next_turn(&sb);
        store.commit_turn(&commit).unwrap();
        expected.extend(commit.events.iter().cloned());
        sb = after;
    }
    let (mut cursor, mut read) = (Default::default(), Vec::new());
    loop {
        let page = store.events_since(cursor, 5).unwrap();
        assert!(page.events.len() <= 5);
        if page.events.is_empty() {
            assert_eq!(page.next, cursor);
            break;
        }
        assert!(page.next > cursor);
        cursor = page.next;
        read.extend(page.events);
    }
    let got: Vec<Event> = read.iter().map(|e| e.event.clone()).collect();
    assert_eq!(got, expected);
    // Each event keeps its run's own number.
    let a_seqs: Vec<u64> = read
        .iter()
        .filter(|e| e.event.run_id == sa.run_id)
        .map(|e| e.seq)
        .collect();
    assert_eq!(a_seqs, (1..=a_seqs.len() as u64).collect::<Vec<_>>());
    // What commits later is read from the cursor the reader stopped at.
    run_turns(store, sb.clone(), 1);
    let more = store.events_since(cursor, 100).unwrap();
    assert!(!more.events.is_empty());
    assert!(more.events.iter().all(|e| e.event.run_id == sb.run_id));
}

pub fn prior_outputs_are_the_earlier_turns_raw_outputs(store: &dyn Store) {
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    let mut outputs = Vec::new();
    let mut state = state;
    for _ in 0..3 {
        let (after, mut commit) = next_turn(&state);
        // A call that failed has no output; it is simply not among the prior outputs.
        if commit.record.turn == 1 {
            commit.record.calls[1].output = None;
            commit.record.calls[1].error = Some("timed out".into());
        }
        outputs.push(
            commit
                .record
                .calls
                .iter()
                .filter_map(|c| c.output.clone())
                .collect::<Vec<_>>(),
        );
        store.commit_turn(&commit).unwrap();
        assert_eq!(
            store.turn(&run, commit.record.turn).unwrap(),
            Some(commit.record)
        );
        state = after;
    }
    assert!(store.prior_outputs(&run, 0).unwrap().is_empty());
    assert_eq!(store.prior_outputs(&run, 1).unwrap(), outputs[0]);
    assert_eq!(store.prior_outputs(&run, 3).unwrap(), outputs.concat());
    assert_eq!(store.prior_outputs(&run, 99).unwrap(), outputs.concat());
    assert_eq!(store.prior_outputs(&run, 3).unwrap().len(), 5);
}

pub fn storage_grows_with_what_turns_changed(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    let state = run_turns(store, state, 100);
    assert_eq!(store.load_state(&run).unwrap(), state);

    // Every turn adds three records and changes one: its stored delta stays the same
    // size whether the state holds 5 records or 300. Storing the state per turn would
    // make turn 99's row ~30 times turn 0's.
    let bytes: Vec<i64> = (0..100).map(|t| backend.turn_bytes(&run, t)).collect();
    let (min, max) = (bytes.iter().min().unwrap(), bytes.iter().max().unwrap());
    assert!(*max < min + min / 10, "per-turn bytes range {min}..{max}");
    let first: i64 = bytes[..50].iter().sum();
    let second: i64 = bytes[50..].iter().sum();
    assert!(
        second < first + first / 10,
        "first 50 turns {first} B, last 50 {second} B"
    );

    // The current records are one row each, not one per turn that saw them.
    assert_eq!(
        backend.count(Table::Records, &run),
        state.item_count() as i64
    );
    assert_eq!(backend.count(Table::RecordChanges, &run), 3 * 100 + 99);
    let records = backend.record_bytes(&run);
    assert!(records < 100 * 1000, "current records take {records} B");
}

pub fn corrupt_rows_are_errors_with_context(backend: &dyn Backend) {
    let store = backend.store();
    let state = create(store, "run-1", T0);
    let run = state.run_id.clone();
    run_turns(store, state, 3);
    let seq = store.events(&run, 0).unwrap()[2].seq;

    backend.damage(&Damage::RecordBody {
        run: run.clone(),
        kind: RecordKind::Issue.as_str(),
        ordinal: 1,
    });
    expect_corrupt(store.load_state(&run), &["issue", "I2", "run-1", "turn 2"]);

    backend.damage(&Damage::TurnRecord {
        run: run.clone(),
        turn: 1,
    });
    expect_corrupt(store.turns(&run), &["turn 1", "run-1"]);
    expect_corrupt(store.turn(&run, 1), &["turn 1", "run-1"]);
    assert!(
        store.turn(&run, 2).unwrap().is_some(),
        "other turns still read"
    );

    backend.damage(&Damage::EventBody {
        run: run.clone(),
        seq,
    });
    expect_corrupt(store.events(&run, 0), &[&format!("event {seq}"), "run-1"]);
    assert_eq!(store.events(&run, seq).unwrap().len(), 3 * 8 - 2);

    backend.damage(&Damage::Header { run: run.clone() });
    expect_corrupt(store.load_state(&run), &["header", "run-1"]);
}

fn expect_corrupt<T: std::fmt::Debug>(result: Result<T, Error>, mentions: &[&str]) {
    match result {
        Err(Error::Corrupt { what, detail }) => {
            for m in mentions {
                assert!(what.contains(m), "{what:?} ({detail}) should mention {m:?}");
            }
        }
        other => panic!("expected Corrupt mentioning {mentions:?}, got {other:?}"),
    }
}

fn all_counts(backend: &dyn Backend, run: &RunId) -> [i64; 5] {
    [
        Table::Turns,
        Table::Records,
        Table::RecordChanges,
        Table::CallOutputs,
        Table::Events,
    ]
    .map(|t| backend.count(t, run))
}
