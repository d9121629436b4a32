//! The live event stream: what a subscriber sees is what the store keeps and what
//! `baton export --format events` renders, published as it happens.

use std::sync::{Arc, Mutex};

use baton_engine::config::Roster;
use baton_engine::publish::Recorder;
use baton_engine::{StepOutcome, export};
use baton_protocol::{Envelope, EventKind, EventMsg, render};
use baton_store::Store;

use super::{engine, run_all, spec, store_in};

fn stored(store: &dyn Store, run: &baton_core::ids::RunId) -> Vec<EventMsg> {
    store
        .events(run, 0)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect()
}

#[test]
fn a_subscriber_sees_what_the_store_keeps_and_export_renders_as_it_happens() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let recorder = Recorder::new();
    engine.subscribe(recorder.clone());
    // Live means before the commit: when a call goes out, its turn is not stored yet.
    let early: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (store, early) = (store.clone(), early.clone());
        engine.subscribe(Arc::new(move |e: &Envelope| {
            if let (EventKind::CallSent { .. }, Some(turn)) = (&e.event.kind, e.event.turn) {
                let committed = store.run_info(&e.event.run_id).unwrap().turns;
                early.lock().unwrap().push(format!("{turn}:{committed}"));
            }
        }));
    }
    let (run, _) = run_all(&engine, &spec(&["draft", "polish"], Roster::mock(3)));

    let events = recorder.events();
    let durable = stored(store.as_ref(), &run);
    assert_eq!(recorder.durable(), durable);
    assert!(durable.len() > 10, "{durable:?}");
    let sent = early.lock().unwrap().clone();
    assert!(!sent.is_empty());
    for s in &sent {
        let (turn, committed) = s.split_once(':').unwrap();
        assert_eq!(
            turn, committed,
            "turn {turn}'s call went out after it was committed"
        );
    }
    // Provisional until the turn commits; what carries a seq is that stored event.
    let by_seq = store.events(&run, 0).unwrap();
    for e in &events {
        match (e.seq, &e.event.kind) {
            (None, EventKind::TurnCommitted { .. } | EventKind::RunCreated { .. }) => {
                panic!("{e:?} is durable but was published without its seq")
            }
            (Some(seq), _) => assert_eq!(by_seq[seq as usize - 1].event, e.event),
            (None, _) => assert!(e.event.turn.is_some(), "{e:?}"),
        }
    }
    // In each turn: started, then the call going out, then returning, then committed.
    let names: Vec<(Option<u32>, &str)> = events
        .iter()
        .map(|e| (e.event.turn, e.event.kind.name()))
        .collect();
    for turn in 0..3u32 {
        let at = |name: &str| {
            names
                .iter()
                .position(|n| *n == (Some(turn), name))
                .unwrap_or_else(|| panic!("turn {turn} has no {name}: {names:?}"))
        };
        assert!(at("turn_started") < at("call_sent"));
        assert!(at("call_sent") < at("model_called"));
        assert!(at("model_called") < at("turn_committed"));
    }
    // The CLI renders the live stream with the renderer export uses on the stored one.
    let live = render::lines(events.iter().map(|e| &e.event), true);
    assert_eq!(live, export::events(store.as_ref(), &run, true).unwrap());
    assert!(live.contains("turn   0 · worker-1"), "{live}");
    // Gap-free per-run numbers.
    let seqs: Vec<u64> = by_seq.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

/// A turn that is not committed (here: fenced off by another session that committed
/// the same turn first) leaves its live events visible, void, and none of them stored.
#[test]
fn a_turn_that_is_not_committed_is_abandoned_live_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let recorder = Recorder::new();
    engine.subscribe(recorder.clone());
    let run = engine
        .create_run(&spec(&["draft", "polish"], Roster::mock(2)))
        .unwrap();
    let mut first = engine.open(&run, None).unwrap();
    let mut stale = engine.open(&run, None).unwrap();
    assert!(matches!(engine.step(&mut first), Ok(StepOutcome::Turn(_))));
    let before = stored(store.as_ref(), &run);
    let err = engine.step(&mut stale).unwrap_err();
    assert!(err.to_string().contains("another baton process"), "{err}");

    assert_eq!(
        stored(store.as_ref(), &run),
        before,
        "nothing of it was stored"
    );
    let events = recorder.events();
    let last = events.last().unwrap();
    assert!(
        matches!(&last.event.kind, EventKind::TurnAbandoned { reason } if reason.contains("another baton process")),
        "{last:?}"
    );
    assert!(last.seq.is_none());
    // The abandoned turn's live events were seen, provisional...
    let abandoned: Vec<&Envelope> = events
        .iter()
        .rev()
        .skip(1)
        .take_while(|e| !matches!(e.event.kind, EventKind::TurnCommitted { .. }))
        .collect();
    assert!(abandoned.iter().any(|e| e.event.kind.name() == "call_sent"));
    assert!(abandoned.iter().all(|e| e.seq.is_none()));
    // ... and a subscriber that follows the rule keeps only what the store has.
    assert_eq!(recorder.durable(), before);
}
