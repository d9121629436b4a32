//! Conformance checks of the job queue: claims, leases, fencing, reclaiming.
//!
//! Leases expire by the database's clock, so the checks that wait a lease out move
//! that clock (`Backend::set_clock_offset`); the `Timestamp`s the calls pass are the
//! engine's stamps only. Leases are a minute long, so the real time a slow machine
//! spends between two calls never decides a check.

use baton_core::ids::{RunId, Timestamp};
use baton_store::{ClaimOutcome, Error, JobStatus, JudgementOutcome, LeaseFence, NewJob, Store};
use serde_json::json;

use super::Backend;
use super::fixtures;

fn enqueue(store: &dyn Store, id: &str, group: &str, at: i64) {
    store
        .enqueue_job(&NewJob {
            id: id.into(),
            group: group.into(),
            spec: json!({"objective": format!("job {id}")}),
            created_at: Timestamp(at),
        })
        .unwrap();
}

/// The lease every check takes, in milliseconds.
const LEASE: i64 = 60_000;

fn claim(
    store: &dyn Store,
    owner: &str,
    token: &str,
    now: i64,
) -> Option<(String, LeaseFence, bool)> {
    match store
        .try_claim_job(owner, token, Timestamp(now), LEASE)
        .unwrap()
    {
        ClaimOutcome::Claimed {
            job,
            token,
            reclaimed,
            ..
        } => Some((
            job.id.clone(),
            LeaseFence {
                job: job.id.clone(),
                token,
            },
            reclaimed,
        )),
        ClaimOutcome::Skipped { .. } => None,
    }
}

pub fn jobs_are_claimed_oldest_first_and_once(store: &dyn Store) {
    enqueue(store, "job-b", "g", 20);
    enqueue(store, "job-a", "g", 10);
    let (first, _, reclaimed) = claim(store, "w1", "t1", 100).unwrap();
    assert_eq!(first, "job-a");
    assert!(!reclaimed);
    let (second, _, _) = claim(store, "w2", "t2", 100).unwrap();
    assert_eq!(second, "job-b");
    assert!(
        claim(store, "w3", "t3", 100).is_none(),
        "nothing left while leases hold"
    );
    let job = store.job("job-a").unwrap();
    assert_eq!(job.status, JobStatus::Running);
    assert_eq!(job.lease_owner.as_deref(), Some("w1"));
    assert_eq!(job.attempts, 1);
    assert_eq!(store.resolve_job("job-a").unwrap(), "job-a");
    assert!(matches!(
        store.resolve_job("job-"),
        Err(Error::AmbiguousJob { .. })
    ));
    assert!(matches!(
        store.resolve_job("zzz"),
        Err(Error::JobNotFound { .. })
    ));
    // The end of an id names it too (a UUIDv7's first digits are its creation time).
    assert_eq!(store.resolve_job("ob-b").unwrap(), "job-b");
    assert!(matches!(
        store.resolve_job("b-"),
        Err(Error::JobNotFound { .. })
    ));
}

pub fn an_expired_lease_is_reclaimed_and_the_old_token_is_fenced_off(backend: &dyn Backend) {
    let store = backend.store();
    enqueue(store, "job-1", "g", 10);
    let (_, old, _) = claim(store, "dead-worker", "old-token", 100).unwrap();
    // Heartbeats keep it: renewal moves the expiry, by the database's clock.
    backend.set_clock_offset(50_000);
    store.renew_lease(&old, Timestamp(900), LEASE).unwrap();
    backend.set_clock_offset(100_000);
    assert!(
        claim(store, "w2", "t2", 1_500).is_none(),
        "the renewed lease still holds 50 s after renewal"
    );
    // The worker dies; after expiry another claims it.
    backend.set_clock_offset(120_000);
    let (id, new, reclaimed) = claim(store, "w2", "new-token", 2_000).unwrap();
    assert_eq!(id, "job-1");
    assert!(reclaimed);
    assert_eq!(store.job("job-1").unwrap().attempts, 2);
    // Every write with the old token is refused; the new token works.
    assert!(matches!(
        store.renew_lease(&old, Timestamp(2_001), LEASE),
        Err(Error::LeaseLost { .. })
    ));
    let run = RunId("run-1".into());
    assert!(matches!(
        store.set_job_run(&old, &run, Timestamp(2_002)),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        store.finish_job(
            &old,
            JobStatus::Outbox,
            Some(&json!({"branch": "x"})),
            None,
            Timestamp(2_003)
        ),
        Err(Error::LeaseLost { .. })
    ));
    // A turn of the job's run cannot commit under the old lease either.
    let state = fixtures::create(store, "run-1", 1);
    store.set_job_run(&new, &run, Timestamp(2_004)).unwrap();
    let (_, mut commit) = fixtures::next_turn(&state);
    commit.lease = Some(old.clone());
    assert!(matches!(
        store.commit_turn(&commit),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(
        store.turns(&run).unwrap().len(),
        0,
        "a fenced-off turn writes nothing"
    );
    commit.lease = Some(new.clone());
    store.commit_turn(&commit).unwrap();
    // Finishing releases the lease; the job cannot be claimed again.
    store
        .finish_job(
            &new,
            JobStatus::Outbox,
            Some(&json!({"branch": "baton/job-1"})),
            None,
            Timestamp(2_100),
        )
        .unwrap();
    let job = store.job("job-1").unwrap();
    assert_eq!(job.status, JobStatus::Outbox);
    assert_eq!(job.run_id, Some(run));
    assert_eq!(job.outbox.unwrap()["branch"], "baton/job-1");
    backend.set_clock_offset(10 * LEASE);
    assert!(claim(store, "w3", "t3", 10_000).is_none());
    assert!(matches!(
        store.renew_lease(&new, Timestamp(2_200), LEASE),
        Err(Error::LeaseLost { .. })
    ));
    // Another process sees the same.
    assert_eq!(
        backend.reopen().job("job-1").unwrap().status,
        JobStatus::Outbox
    );
}

/// The order a claim picks in: every queued job (oldest first) before any job whose
/// lease expired, and those oldest first too. PostgreSQL looks for each kind in its
/// own index-ordered branch of one statement, so the order between them is the
/// statement's, checked here.
pub fn queued_jobs_go_before_expired_leases_and_those_oldest_first(backend: &dyn Backend) {
    let store = backend.store();
    enqueue(store, "old-2", "g", 2);
    enqueue(store, "old-1", "g", 1);
    assert_eq!(claim(store, "dead", "t1", 100).unwrap().0, "old-1");
    assert_eq!(claim(store, "dead", "t2", 100).unwrap().0, "old-2");
    backend.set_clock_offset(2 * LEASE);
    enqueue(store, "new-1", "g", 50);
    let (id, _, reclaimed) = claim(store, "w", "t3", 200).unwrap();
    assert_eq!((id.as_str(), reclaimed), ("new-1", false), "queued first");
    let (id, _, reclaimed) = claim(store, "w", "t4", 200).unwrap();
    assert_eq!((id.as_str(), reclaimed), ("old-1", true));
    let (id, _, reclaimed) = claim(store, "w", "t5", 200).unwrap();
    assert_eq!((id.as_str(), reclaimed), ("old-2", true));
    assert!(claim(store, "w", "t6", 200).is_none());
    let job = store.job("old-1").unwrap();
    assert_eq!(job.attempts, 2);
    assert_eq!(job.lease_owner.as_deref(), Some("w"));
}

pub fn racing_claims_never_share_a_job(backend: &dyn Backend) {
    for i in 0..8 {
        enqueue(backend.store(), &format!("job-{i}"), "g", i);
    }
    let stores: Vec<Box<dyn Store>> = (0..4).map(|_| backend.reopen()).collect();
    let claimed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (n, store) in stores.iter().enumerate() {
            let claimed = &claimed;
            s.spawn(move || {
                for k in 0..4 {
                    if let Some((id, _, _)) =
                        claim(store.as_ref(), &format!("w{n}"), &format!("t{n}-{k}"), 100)
                    {
                        claimed.lock().unwrap().push(id);
                    }
                }
            });
        }
    });
    let mut claimed = claimed.into_inner().unwrap();
    claimed.sort();
    let mut unique = claimed.clone();
    unique.dedup();
    assert_eq!(claimed, unique, "a job was claimed twice");
    assert_eq!(claimed.len(), 8);
}

pub fn judging_a_group_marks_its_finished_candidates(store: &dyn Store) {
    enqueue(store, "c1", "grp", 1);
    enqueue(store, "c2", "grp", 2);
    for (i, token) in ["a", "b"].iter().enumerate() {
        let (_, fence, _) = claim(store, "w", token, 10 + i as i64).unwrap();
        store
            .finish_job(
                &fence,
                JobStatus::Outbox,
                Some(&json!({})),
                None,
                Timestamp(20),
            )
            .unwrap();
    }
    store
        .record_judgement("grp", &json!({"winner": "B"}), Timestamp(30))
        .unwrap();
    for id in ["c1", "c2"] {
        let job = store.job(id).unwrap();
        assert_eq!(job.status, JobStatus::Judged);
        assert_eq!(job.judgement.unwrap()["winner"], "B");
    }
    assert!(
        store
            .record_judgement("nope", &json!({}), Timestamp(31))
            .is_err()
    );
    let history = store.judgements("grp").unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].outcome, history[0].recorded_at),
        (JudgementOutcome::Judged, Timestamp(30))
    );
    assert_eq!(history[0].body["winner"], "B");
}

/// A judge without a usable verdict: what it spent is kept, the jobs are left as they
/// were (so the group can be judged again), and every judge stays in the history.
pub fn a_failed_judgement_is_kept_and_the_group_can_be_judged_again(store: &dyn Store) {
    enqueue(store, "c1", "grp", 1);
    enqueue(store, "c2", "grp", 2);
    for (i, token) in ["a", "b"].iter().enumerate() {
        let (_, fence, _) = claim(store, "w", token, 10 + i as i64).unwrap();
        store
            .finish_job(
                &fence,
                JobStatus::Outbox,
                Some(&json!({})),
                None,
                Timestamp(20),
            )
            .unwrap();
    }
    store
        .record_failed_judgement("grp", &json!({"error": "no JSON"}), Timestamp(30))
        .unwrap();
    for id in ["c1", "c2"] {
        let job = store.job(id).unwrap();
        assert_eq!((job.status, job.judgement), (JobStatus::Outbox, None));
    }
    assert!(matches!(
        store.record_failed_judgement("nope", &json!({}), Timestamp(31)),
        Err(Error::JobNotFound { .. })
    ));
    store
        .record_judgement("grp", &json!({"winner": "A"}), Timestamp(40))
        .unwrap();
    let history = store.judgements("grp").unwrap();
    let outcomes: Vec<_> = history.iter().map(|j| j.outcome).collect();
    assert_eq!(
        outcomes,
        [JudgementOutcome::Failed, JudgementOutcome::Judged]
    );
    assert_eq!(history[0].body["error"], "no JSON");
    assert!(history[0].seq < history[1].seq);
    assert!(store.judgements("nope").unwrap().is_empty());
}

pub fn a_run_is_advanced_by_one_lease_holder_at_a_time(backend: &dyn Backend) {
    let store = backend.store();
    let state = fixtures::create(store, "run-1", 1);
    let run = RunId("run-1".into());
    assert_eq!(
        store.try_lease_run(&run, "p1", "t1", LEASE, false).unwrap(),
        Ok(())
    );
    let held = store
        .try_lease_run(&run, "p2", "t2", LEASE, false)
        .unwrap()
        .unwrap_err();
    assert_eq!(held.owner, "p1");
    // Renewal keeps it (and moves its expiry); a turn under the holder's token
    // commits, under another's not.
    backend.set_clock_offset(50_000);
    store.renew_run_lease(&run, "t1", LEASE).unwrap();
    backend.set_clock_offset(100_000);
    let renewed = store
        .try_lease_run(&run, "p2", "t2", LEASE, false)
        .unwrap()
        .unwrap_err();
    assert!(
        renewed.expires_at.0 >= held.expires_at.0 + 50_000,
        "{renewed:?} vs {held:?}"
    );
    let (_, mut commit) = fixtures::next_turn(&state);
    commit.run_lease = Some("t2".into());
    assert!(matches!(
        store.commit_turn(&commit),
        Err(Error::RunLeaseLost { .. })
    ));
    commit.run_lease = Some("t1".into());
    store.commit_turn(&commit).unwrap();
    // After expiry, or with take_over (its holder is known dead), another takes it.
    backend.set_clock_offset(120_000);
    assert_eq!(
        store.try_lease_run(&run, "p2", "t2", LEASE, false).unwrap(),
        Ok(())
    );
    assert!(matches!(
        store.renew_run_lease(&run, "t1", LEASE),
        Err(Error::RunLeaseLost { .. })
    ));
    assert_eq!(
        store.try_lease_run(&run, "p3", "t3", LEASE, true).unwrap(),
        Ok(())
    );
    // Release frees it at once; releasing with a stale token does nothing.
    store.release_run_lease(&run, "t2").unwrap();
    assert!(
        store
            .try_lease_run(&run, "p4", "t4", LEASE, false)
            .unwrap()
            .is_err()
    );
    store.release_run_lease(&run, "t3").unwrap();
    assert_eq!(
        store.try_lease_run(&run, "p4", "t4", LEASE, false).unwrap(),
        Ok(())
    );
}

/// Two processes whose own clocks disagree by minutes (the `now` each passes) still
/// agree on who holds a lease, because only the database's clock decides; once the
/// lease has expired by that clock, it is reclaimed.
pub fn leases_are_decided_by_the_database_clock_not_the_callers(backend: &dyn Backend) {
    let (a, b) = (backend.store(), backend.reopen());
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let minutes = |m: i64| m * 60_000;
    enqueue(a, "job-1", "g", 10);
    let (_, fence, _) = claim(a, "a", "token-a", real).unwrap();
    // B's clock runs ten minutes ahead: by it, A's one-minute lease ran out long ago.
    assert!(
        claim(b.as_ref(), "b", "token-b", real + minutes(10)).is_none(),
        "a caller's fast clock took a lease that still holds"
    );
    // A's clock runs ten minutes behind: its renewal still extends from the
    // database's now, not from its own past.
    a.renew_lease(&fence, Timestamp(real - minutes(10)), LEASE)
        .unwrap();
    let job = b.job("job-1").unwrap();
    assert!(
        job.lease_expires_at.unwrap().0 >= real + LEASE,
        "the lease was measured on the caller's slow clock: {job:?}"
    );
    assert!(claim(b.as_ref(), "b", "token-b", real + minutes(10)).is_none());
    // Runs too: B cannot take A's run lease, whatever B's clock says.
    fixtures::create(a, "run-1", 1);
    let run = RunId("run-1".into());
    assert_eq!(
        a.try_lease_run(&run, "a", "ra", LEASE, false).unwrap(),
        Ok(())
    );
    assert!(
        b.try_lease_run(&run, "b", "rb", LEASE, false)
            .unwrap()
            .is_err()
    );
    // Expired by the database's clock: reclaimed, and the old token is fenced off.
    backend.set_clock_offset(LEASE + 1_000);
    let (_, _, reclaimed) = claim(a, "c", "token-c", real - minutes(10)).unwrap();
    assert!(reclaimed, "an expired lease is reclaimable");
    assert!(matches!(
        a.renew_lease(&fence, Timestamp(real), LEASE),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(
        a.try_lease_run(&run, "c", "rc", LEASE, false).unwrap(),
        Ok(())
    );
}

/// A job's run is created and linked in one transaction (a kill between the two used to
/// leave an active run with no job, forever the default target of `resume`); a fenced-off
/// worker creates nothing. Interrupted work gives the job back at once, a failed job
/// can be requeued, and a dead holder's lease can be ended early.
pub fn job_runs_are_created_with_their_link_and_jobs_are_released_and_requeued(store: &dyn Store) {
    enqueue(store, "job-1", "g", 10);
    let (_, old, _) = claim(store, "w1", "old", 100).unwrap();
    // Its holder is gone: the lease is ended for that owner only.
    assert!(
        !store
            .expire_job_lease("job-1", "someone-else", Timestamp(150))
            .unwrap()
    );
    assert!(
        store
            .expire_job_lease("job-1", "w1", Timestamp(150))
            .unwrap()
    );
    let (_, fence, reclaimed) = claim(store, "w2", "new", 151).unwrap();
    assert!(reclaimed);

    let state = fixtures::initial_state("run-j");
    let info = fixtures::info("run-j", 160);
    let event = fixtures::created_event(&state);
    assert!(matches!(
        store.create_job_run(&old, &info, &state, std::slice::from_ref(&event)),
        Err(Error::LeaseLost { .. })
    ));
    assert!(store.list_runs().unwrap().is_empty(), "nothing created");
    store
        .create_job_run(&fence, &info, &state, &[event])
        .unwrap();
    assert_eq!(store.job("job-1").unwrap().run_id, Some(info.id.clone()));

    // Released: queued again at once, its run kept.
    assert!(matches!(
        store.release_job(&old, Timestamp(170)),
        Err(Error::LeaseLost { .. })
    ));
    store.release_job(&fence, Timestamp(170)).unwrap();
    let job = store.job("job-1").unwrap();
    assert_eq!(job.status, JobStatus::Queued);
    assert_eq!(job.run_id, Some(info.id.clone()));
    assert!(matches!(
        store.requeue_job("job-1", Timestamp(175)),
        Err(Error::JobNotRequeueable { .. })
    ));
    let (_, fence, reclaimed) = claim(store, "w3", "t3", 180).unwrap();
    assert!(!reclaimed);
    store
        .finish_job(
            &fence,
            JobStatus::Failed,
            None,
            Some("blocked"),
            Timestamp(190),
        )
        .unwrap();
    store.requeue_job("job-1", Timestamp(200)).unwrap();
    let job = store.job("job-1").unwrap();
    assert_eq!(job.status, JobStatus::Queued);
    assert_eq!(job.error, None);
    assert_eq!(job.run_id, Some(info.id));
    assert!(claim(store, "w4", "t4", 210).is_some());
}

/// `baton cancel`: a request names the lease it stops and never outlives it; a job no
/// worker holds is cancelled at once, claimed by nobody, and can be requeued.
pub fn cancel_requests_stop_the_lease_they_name_and_no_other(backend: &dyn Backend) {
    use baton_store::{CancelOutcome, CancelTarget};
    let store = backend.store();
    fixtures::create(store, "run-1", 1);
    let run = CancelTarget::Run(RunId("run-1".into()));
    // Nobody advances the run: nothing to stop, and nothing recorded to stop a later one.
    assert!(matches!(
        store.request_cancel(&run, Timestamp(50)).unwrap(),
        CancelOutcome::NotRunning { .. }
    ));
    store
        .try_lease_run(&RunId("run-1".into()), "p1", "t1", 60_000, false)
        .unwrap()
        .unwrap();
    assert!(!store.cancel_requested(&run, Some("t1")).unwrap());
    assert_eq!(
        store.request_cancel(&run, Timestamp(200)).unwrap(),
        CancelOutcome::Requested {
            holder: "p1".into()
        }
    );
    assert!(store.cancel_requested(&run, Some("t1")).unwrap());
    // The next holder (`baton resume` after the stop) is not cancelled by it.
    store
        .release_run_lease(&RunId("run-1".into()), "t1")
        .unwrap();
    store
        .try_lease_run(&RunId("run-1".into()), "p2", "t2", 60_000, false)
        .unwrap()
        .unwrap();
    assert!(!store.cancel_requested(&run, Some("t2")).unwrap());
    assert!(matches!(
        store.request_cancel(&CancelTarget::Run(RunId("nope".into())), Timestamp(300)),
        Err(Error::RunNotFound { .. })
    ));

    // A queued job: cancelled now, claimed by nobody, requeued on request.
    enqueue(store, "job-1", "g", 10);
    let job = CancelTarget::Job("job-1".into());
    assert_eq!(
        store.request_cancel(&job, Timestamp(400)).unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(store.job("job-1").unwrap().status, JobStatus::Cancelled);
    assert!(claim(store, "w1", "lt1", 500).is_none());
    store.requeue_job("job-1", Timestamp(600)).unwrap();
    // A running job: asked of its holder, under its lease only.
    let (_, fence, _) = claim(store, "w1", "lt1", 700).unwrap();
    assert_eq!(
        store.request_cancel(&job, Timestamp(800)).unwrap(),
        CancelOutcome::Requested {
            holder: "w1".into()
        }
    );
    assert!(store.cancel_requested(&job, Some("lt1")).unwrap());
    assert!(!store.cancel_requested(&job, Some("other")).unwrap());
    store
        .finish_job(
            &fence,
            JobStatus::Cancelled,
            None,
            Some("cancelled"),
            Timestamp(900),
        )
        .unwrap();
    store.clear_cancel(&job).unwrap();
    assert!(!store.cancel_requested(&job, Some("lt1")).unwrap());
    assert_eq!(
        store.request_cancel(&job, Timestamp(950)).unwrap(),
        CancelOutcome::NotRunning {
            state: "cancelled".into()
        }
    );
    // A running job whose worker stopped renewing: nobody would stop it, so it is
    // cancelled here, and the old holder is fenced off.
    store.requeue_job("job-1", Timestamp(1_000)).unwrap();
    let (_, stale, _) = claim(store, "w2", "lt2", 1_100).unwrap();
    // Its lease runs out by the database's clock.
    backend.set_clock_offset(2 * LEASE);
    assert_eq!(
        store.request_cancel(&job, Timestamp(5_000)).unwrap(),
        CancelOutcome::Cancelled
    );
    assert!(matches!(
        store.renew_lease(&stale, Timestamp(5_001), 1_000),
        Err(Error::LeaseLost { .. })
    ));

    // A whole process, by owner name, until cleared.
    let process = CancelTarget::Process("pid-1@host".into());
    assert!(!store.cancel_requested(&process, None).unwrap());
    store.request_cancel(&process, Timestamp(6_000)).unwrap();
    assert!(store.cancel_requested(&process, None).unwrap());
    store.clear_cancel(&process).unwrap();
    assert!(!store.cancel_requested(&process, None).unwrap());

    // A group's judge, by group id, until cleared; an unknown group is refused.
    enqueue(store, "g-job", "g-1", 7_000);
    let group = CancelTarget::Group("g-1".into());
    assert!(matches!(
        store.request_cancel(&group, Timestamp(7_001)).unwrap(),
        CancelOutcome::Requested { .. }
    ));
    assert!(store.cancel_requested(&group, None).unwrap());
    assert!(!store.cancel_requested(&process, None).unwrap());
    store.clear_cancel(&group).unwrap();
    assert!(!store.cancel_requested(&group, None).unwrap());
    assert!(matches!(
        store.request_cancel(&CancelTarget::Group("g-none".into()), Timestamp(7_002)),
        Err(Error::JobNotFound { .. })
    ));
}
