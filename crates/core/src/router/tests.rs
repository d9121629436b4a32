//! One test per rule of the router, plus windows, allowances and the serialised forms.

use super::*;
use crate::ids::{Timestamp, WorkerId};
use crate::step_tag::StepTag;

/// 2026-12-02T08:00:00Z, a Wednesday.
const NOW: Timestamp = Timestamp(1_796_198_400_000);

fn at(rfc3339: &str) -> Timestamp {
    Timestamp(
        rfc3339
            .parse::<jiff::Timestamp>()
            .expect("test timestamp")
            .as_millisecond(),
    )
}

fn worker(id: &str, family: &str, pool: &str) -> Candidate {
    Candidate {
        id: WorkerId::new(id),
        model: format!("{family}/{id}"),
        family: family.into(),
        pool: PoolId::new(pool),
        qualified: Vec::new(),
        enabled: true,
    }
}

fn pool(id: &str, tokens: u64) -> Pool {
    Pool {
        id: PoolId::new(id),
        allowance: Allowance {
            tokens: Some(tokens),
            ..Allowance::default()
        },
        window: Window::default(),
    }
}

fn used(pool: &str, tokens: u64) -> PoolUsage {
    PoolUsage {
        tokens,
        ..PoolUsage::none(PoolId::new(pool))
    }
}

/// A roster, its pools and their usage; one seat; everything else empty.
struct World {
    seat: Seat,
    tags: Vec<StepTag>,
    candidates: Vec<Candidate>,
    pools: Vec<Pool>,
    usage: Vec<PoolUsage>,
    benches: Benches,
    pins: Vec<Pin>,
    history: Vec<Authored>,
    inherit_from: Option<WorkerId>,
}

impl World {
    /// Three pools (claude 50 % used, codex 10 %, glm 30 %) with one worker each.
    fn new(seat: &str) -> Self {
        World {
            seat: Seat::new(SeatId::new(seat)),
            tags: Vec::new(),
            candidates: vec![
                worker("opus", "anthropic", "claude"),
                worker("gpt", "openai", "codex"),
                worker("glm", "zhipu", "glm"),
            ],
            pools: vec![pool("claude", 100), pool("codex", 100), pool("glm", 100)],
            usage: vec![used("claude", 50), used("codex", 10), used("glm", 30)],
            benches: Benches::default(),
            pins: Vec::new(),
            history: Vec::new(),
            inherit_from: None,
        }
    }

    fn route(&self) -> Routed<'_> {
        route(&RouteInput {
            seat: &self.seat,
            phase: "build",
            handoff: 7,
            now: NOW,
            tags: &self.tags,
            candidates: &self.candidates,
            pools: &self.pools,
            usage: &self.usage,
            benches: &self.benches,
            pins: &self.pins,
            step: Some("T3"),
            history: &self.history,
            inherit_from: self.inherit_from.as_ref(),
        })
    }

    fn wrote(&mut self, seat: &str, worker: &str, family: &str) {
        self.history.push(Authored {
            step: "T3".into(),
            seat: SeatId::new(seat),
            worker: WorkerId::new(worker),
            family: family.into(),
        });
    }
}

fn picked<'r>(routed: &'r Routed<'_>) -> &'r str {
    match &routed.pick {
        Pick::Seated { pin } | Pick::Held { pin } => pin.worker.as_str(),
        Pick::Nobody { question, .. } => panic!("nobody picked: {question}"),
    }
}

fn reason_for<'r>(routed: &'r Routed<'_>, worker: &str) -> &'r Exclusion<'r> {
    &routed
        .excluded
        .iter()
        .find(|e| e.worker.as_str() == worker)
        .unwrap_or_else(|| panic!("{worker} is not excluded: {routed:?}"))
        .reason
}

fn question<'r>(routed: &'r Routed<'_>) -> &'r str {
    match &routed.pick {
        Pick::Nobody { question, .. } => question,
        other => panic!("expected nobody, got {other:?}"),
    }
}

#[test]
fn the_coldest_pool_is_picked_and_the_pin_records_every_fraction() {
    let world = World::new("lead.build");
    let routed = world.route();
    let Pick::Seated { pin } = &routed.pick else {
        panic!("{routed:?}");
    };
    assert_eq!(pin.worker.as_str(), "gpt");
    assert_eq!(pin.pool.as_str(), "codex");
    assert_eq!(pin.model, "openai/gpt");
    assert_eq!(pin.family, "openai");
    assert_eq!(pin.phase, "build");
    assert_eq!(pin.at, NOW);
    assert_eq!(pin.reason, PinReason::AtPhaseStart);
    let fractions: Vec<(&str, f64)> = pin
        .fractions
        .iter()
        .map(|(p, f)| (p.as_str(), *f))
        .collect();
    assert_eq!(fractions, [("claude", 0.5), ("codex", 0.1), ("glm", 0.3)]);
    let eligible: Vec<&str> = routed.eligible.iter().map(|w| w.as_str()).collect();
    assert_eq!(eligible, ["gpt", "glm", "opus"]);
    assert!(routed.excluded.is_empty());
}

#[test]
fn a_pool_is_as_spent_as_its_most_spent_dimension() {
    let mut world = World::new("lead.build");
    // codex: 10 % of tokens but 95 % of its dollars.
    world.pools[1].allowance.usd = Some(100.0);
    world.usage[1].usd = 95.0;
    assert_eq!(picked(&world.route()), "glm");
}

#[test]
fn ties_go_to_the_lower_pool_id_then_the_lower_worker_id() {
    let mut world = World::new("lead.build");
    world.usage = vec![used("claude", 10), used("codex", 10), used("glm", 10)];
    world
        .candidates
        .push(worker("haiku", "anthropic", "claude"));
    // claude < codex < glm; within claude, haiku < opus.
    let routed = world.route();
    assert_eq!(picked(&routed), "haiku");
    let eligible: Vec<&str> = routed.eligible.iter().map(|w| w.as_str()).collect();
    assert_eq!(eligible, ["haiku", "opus", "gpt", "glm"]);
}

#[test]
fn a_pool_without_usage_is_untouched_and_an_unmetered_pool_reads_zero() {
    let mut world = World::new("lead.build");
    world.usage.retain(|u| u.pool.as_str() != "glm");
    assert_eq!(picked(&world.route()), "glm");
    let mut world = World::new("lead.build");
    world.pools[0].allowance = Allowance::default();
    world.usage[0].tokens = 1_000_000;
    assert_eq!(picked(&world.route()), "opus");
}

#[test]
fn workers_qualified_elsewhere_are_not_qualified() {
    let mut world = World::new("review.deep-rounds");
    world.candidates[1].qualified = vec![Glob::new("lead.*"), Glob::new("plan.*")];
    let routed = world.route();
    assert_eq!(reason_for(&routed, "gpt"), &Exclusion::NotQualified);
    assert_eq!(picked(&routed), "glm");
    world.candidates[1].qualified.push(Glob::new("review.*"));
    assert_eq!(picked(&world.route()), "gpt");
}

#[test]
fn a_seats_narrowing_matches_worker_ids_or_models() {
    let mut world = World::new("checkpoint.find");
    world.seat.qualified = vec![Glob::new("glm*"), Glob::new("anthropic/*")];
    let routed = world.route();
    assert_eq!(reason_for(&routed, "gpt"), &Exclusion::NotQualified);
    // glm by id, opus by model; glm's pool is colder.
    assert_eq!(
        routed.eligible,
        [&WorkerId::new("glm"), &WorkerId::new("opus")]
    );
}

#[test]
fn a_denied_family_never_sees_a_tagged_step() {
    let mut world = World::new("checkpoint.find");
    world
        .seat
        .deny_tags
        .insert("credentials".into(), vec!["openai".into()]);
    assert_eq!(
        picked(&world.route()),
        "gpt",
        "untagged steps are not affected"
    );
    world.tags = StepTag::list("ui,credentials").unwrap();
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "gpt"),
        &Exclusion::PolicyDenied { tag: "credentials" }
    );
    assert_eq!(picked(&routed), "glm");
}

#[test]
fn a_reviewing_seat_never_gets_the_writers_family() {
    for seat in [
        "review.deep-rounds",
        "checkpoint.find",
        "plan.scrutiny",
        "judge",
    ] {
        let mut world = World::new(seat);
        world.candidates.push(worker("o4", "openai", "claude"));
        world.wrote("lead.build", "gpt", "openai");
        let routed = world.route();
        for w in ["gpt", "o4"] {
            assert_eq!(
                reason_for(&routed, w),
                &Exclusion::SameFamilyAsWriter {
                    family: "openai",
                    writer: &WorkerId::new("gpt"),
                },
                "{seat}"
            );
        }
        assert_eq!(picked(&routed), "glm", "{seat}");
    }
}

#[test]
fn a_writing_seat_ignores_who_wrote_and_reviews_do_not_count_as_writing() {
    let mut world = World::new("lead.build");
    world.wrote("lead.build", "gpt", "openai");
    assert_eq!(picked(&world.route()), "gpt");
    let mut world = World::new("review.deep-rounds");
    // gpt reviewed step T3 before; it did not write it.
    world.wrote("review.first", "gpt", "openai");
    assert_eq!(picked(&world.route()), "gpt");
}

#[test]
fn the_writer_of_another_step_does_not_count() {
    let mut world = World::new("review.deep-rounds");
    world.history.push(Authored {
        step: "T2".into(),
        seat: SeatId::new("lead.build"),
        worker: WorkerId::new("gpt"),
        family: "openai".into(),
    });
    assert_eq!(picked(&world.route()), "gpt");
}

#[test]
fn checkpoint_confirm_is_never_the_worker_that_held_find() {
    let mut world = World::new(CHECKPOINT_CONFIRM);
    world.candidates.push(worker("gpt-mini", "openai", "codex"));
    world.wrote("lead.build", "opus", "anthropic");
    world.wrote(CHECKPOINT_FIND, "gpt", "openai");
    let routed = world.route();
    assert_eq!(reason_for(&routed, "gpt"), &Exclusion::HeldFind);
    // Same family as the finder is fine; only the finder itself is out.
    assert_eq!(picked(&routed), "gpt-mini");
    // checkpoint.find itself is not bound by who found.
    world.seat = Seat::new(SeatId::new(CHECKPOINT_FIND));
    assert_eq!(picked(&world.route()), "gpt");
}

#[test]
fn disabled_and_benched_workers_and_benched_pools_are_off_the_floor() {
    let mut world = World::new("lead.build");
    world.candidates[1].enabled = false;
    let routed = world.route();
    assert_eq!(reason_for(&routed, "gpt"), &Exclusion::Disabled);
    assert_eq!(picked(&routed), "glm");

    let mut world = World::new("lead.build");
    world.benches.workers.insert(WorkerId::new("gpt"));
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "gpt"),
        &Exclusion::Benched { pool: None }
    );
    assert_eq!(picked(&routed), "glm");

    let mut world = World::new("lead.build");
    world.benches.pools.insert(PoolId::new("codex"));
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "gpt"),
        &Exclusion::Benched {
            pool: Some(&PoolId::new("codex"))
        }
    );
    assert_eq!(picked(&routed), "glm");
}

#[test]
fn an_exhausted_pool_is_out_until_the_reset_it_named() {
    let mut world = World::new("lead.build");
    let until = at("2026-12-02T12:00:00Z");
    world.usage[1].exhausted_until = Some(until);
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "gpt"),
        &Exclusion::PoolExhausted {
            pool: &PoolId::new("codex"),
            until
        }
    );
    assert_eq!(picked(&routed), "glm");
    // A mark whose reset has passed no longer holds.
    world.usage[1].exhausted_until = Some(NOW);
    assert_eq!(picked(&world.route()), "gpt");
}

#[test]
fn a_spent_dimension_leaves_no_headroom_until_the_window_resets() {
    let mut world = World::new("lead.build");
    world.pools[1].allowance.requests = Some(20);
    world.usage[1].requests = 20;
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "gpt"),
        &Exclusion::NoHeadroom {
            pool: &PoolId::new("codex"),
            dimension: Dimension::Requests,
            // The default window: next Monday 00:00 UTC.
            resets_at: Some(at("2026-12-07T00:00:00Z")),
        }
    );
    assert_eq!(picked(&routed), "glm");
    // One request left is headroom (though 95 % makes codex the hottest pool).
    world.usage[1].requests = 19;
    let routed = world.route();
    assert!(routed.excluded.is_empty(), "{routed:?}");
    assert_eq!(routed.eligible.last(), Some(&&WorkerId::new("gpt")));
}

#[test]
fn a_worker_of_an_unconfigured_pool_is_never_picked() {
    let mut world = World::new("lead.build");
    world.candidates.push(worker("ghost", "openai", "nowhere"));
    world.usage = vec![used("claude", 90), used("codex", 90), used("glm", 90)];
    let routed = world.route();
    assert_eq!(
        reason_for(&routed, "ghost"),
        &Exclusion::UnknownPool {
            pool: &PoolId::new("nowhere")
        }
    );
}

#[test]
fn the_reason_shown_is_the_one_unbenching_would_not_fix() {
    let mut world = World::new("lead.build");
    world.candidates[1].qualified = vec![Glob::new("review.*")];
    world.candidates[1].enabled = false;
    world.benches.pools.insert(PoolId::new("codex"));
    assert_eq!(reason_for(&world.route(), "gpt"), &Exclusion::NotQualified);
}

fn pin(seat: &str, worker: &str, pool: &str, phase: &str) -> Pin {
    Pin {
        seat: SeatId::new(seat),
        worker: WorkerId::new(worker),
        model: String::new(),
        family: String::new(),
        pool: PoolId::new(pool),
        phase: phase.into(),
        at: Timestamp(NOW.0 - 60_000),
        fractions: Fractions::new(),
        reason: PinReason::AtPhaseStart,
        excluded: None,
    }
}

#[test]
fn a_pin_holds_within_its_phase_even_when_another_pool_is_colder() {
    let mut world = World::new("lead.build");
    world.pins = vec![pin("lead.build", "opus", "claude", "build")];
    let routed = world.route();
    assert_eq!(
        routed.pick,
        Pick::Held {
            pin: world.pins[0].clone()
        }
    );
    // Another seat's pin, or this seat's pin of another phase, does not hold.
    world.pins = vec![
        pin("lead.plan", "opus", "claude", "build"),
        pin("lead.build", "opus", "claude", "plan"),
    ];
    let Pick::Seated { pin } = world.route().pick else {
        panic!("a new seating");
    };
    assert_eq!(
        (pin.worker.as_str(), pin.reason),
        ("gpt", PinReason::AtPhaseStart)
    );
}

#[test]
fn the_latest_pin_of_the_phase_is_the_one_that_holds() {
    let mut world = World::new("lead.build");
    let mut later = pin("lead.build", "glm", "glm", "build");
    later.at = NOW;
    world.pins = vec![later, pin("lead.build", "opus", "claude", "build")];
    assert_eq!(picked(&world.route()), "glm");
}

fn reseated(world: &World) -> Pin {
    match world.route().pick {
        Pick::Seated { pin } => pin,
        other => panic!("expected a re-seating, got {other:?}"),
    }
}

#[test]
fn a_benched_or_exhausted_pool_re_seats_with_a_pin_saying_so() {
    let mut world = World::new("lead.build");
    world.pins = vec![pin("lead.build", "gpt", "codex", "build")];
    world.benches.pools.insert(PoolId::new("codex"));
    let pin = reseated(&world);
    assert_eq!(pin.worker.as_str(), "glm");
    assert_eq!(
        pin.reason,
        PinReason::PoolBenched {
            pool: PoolId::new("codex")
        }
    );

    world.benches = Benches::default();
    world.usage[1].tokens = 100;
    let pin = reseated(&world);
    assert_eq!(pin.worker.as_str(), "glm");
    assert_eq!(
        pin.reason,
        PinReason::PoolExhausted {
            pool: PoolId::new("codex")
        }
    );

    world.usage[1].tokens = 0;
    world.usage[1].exhausted_until = Some(at("2026-12-09T00:00:00Z"));
    assert_eq!(
        reseated(&world).reason,
        PinReason::PoolExhausted {
            pool: PoolId::new("codex")
        }
    );
}

#[test]
fn a_pinned_worker_that_can_no_longer_take_the_seat_re_seats_at_the_hand_off() {
    let mut world = World::new("review.deep-rounds");
    world.pins = vec![pin("review.deep-rounds", "gpt", "codex", "build")];
    // The step under review now was written by gpt's family: the pin cannot hold.
    world.wrote("lead.build", "gpt", "openai");
    let pin = reseated(&world);
    assert_eq!(pin.worker.as_str(), "glm");
    assert_eq!(pin.reason, PinReason::ReseatedAtHandoff { handoff: 7 });
    // So does a benched worker, and a worker gone from the roster.
    let mut world = World::new("lead.build");
    world.pins = vec![pin_of(&world, "gpt")];
    world.benches.workers.insert(WorkerId::new("gpt"));
    assert_eq!(
        reseated(&world).reason,
        PinReason::ReseatedAtHandoff { handoff: 7 }
    );
    world.benches = Benches::default();
    world.candidates.remove(1);
    assert_eq!(
        reseated(&world).reason,
        PinReason::ReseatedAtHandoff { handoff: 7 }
    );
}

fn pin_of(world: &World, worker: &str) -> Pin {
    let c = world
        .candidates
        .iter()
        .find(|c| c.id.as_str() == worker)
        .expect("worker in the roster");
    pin(world.seat.id.as_str(), worker, c.pool.as_str(), "build")
}

#[test]
fn a_seat_stays_with_the_running_lead_when_the_station_asks_and_the_lead_is_eligible() {
    let mut world = World::new("lead.build");
    world.inherit_from = Some(WorkerId::new("opus"));
    let Pick::Seated { pin } = world.route().pick else {
        panic!("a new seating");
    };
    assert_eq!(
        (pin.worker.as_str(), pin.reason),
        ("opus", PinReason::InheritedFromLead)
    );
    // An ineligible lead is not inherited: the coldest pool fills the seat.
    world.benches.workers.insert(WorkerId::new("opus"));
    let Pick::Seated { pin } = world.route().pick else {
        panic!("a new seating");
    };
    assert_eq!(
        (pin.worker.as_str(), pin.reason),
        ("gpt", PinReason::AtPhaseStart)
    );
}

#[test]
fn nobody_left_by_the_cross_family_rule_asks_a_human_what_would_unblock_it() {
    let mut world = World::new(CHECKPOINT_CONFIRM);
    world.candidates = vec![
        worker("opus", "anthropic", "claude"),
        worker("sonnet", "anthropic", "claude"),
        worker("gpt", "openai", "codex"),
    ];
    world.wrote("lead.build", "opus", "anthropic");
    world.wrote(CHECKPOINT_FIND, "gpt", "openai");
    let routed = world.route();
    assert!(routed.eligible.is_empty());
    let question = question(&routed);
    assert_eq!(
        question,
        "Nobody can take seat checkpoint.confirm for T3 (phase build). All 3 workers are \
         excluded: gpt (it found this checkpoint, so it cannot confirm it); opus (same family \
         (anthropic) as the writer, opus); sonnet (same family (anthropic) as the writer, \
         opus). To unblock it: qualify a worker of another family than anthropic for \
         checkpoint.confirm (reviews are cross-family; the rule is not waived); or qualify a \
         second worker for checkpoint.confirm: the worker that found a checkpoint never \
         confirms it."
    );
}

#[test]
fn nobody_names_the_resets_and_the_benches_that_would_unblock_it() {
    let mut world = World::new("lead.build");
    world.usage[0].exhausted_until = Some(at("2026-12-03T10:00:00Z"));
    world.benches.pools.insert(PoolId::new("codex"));
    world.usage[2].tokens = 100;
    let routed = world.route();
    let question = question(&routed);
    assert!(
        question.starts_with(
            "Nobody can take seat lead.build for T3 (phase build). All 3 workers are excluded: "
        ),
        "{question}"
    );
    for expected in [
        "glm (pool glm has spent its tokens allowance for this window)",
        "opus (pool claude is exhausted until 2026-12-03T10:00:00.000Z)",
        "unbench pool codex (baton pool unbench codex)",
        "wait until 2026-12-03T10:00:00.000Z, when pool claude's quota resets",
        "wait until 2026-12-07T00:00:00.000Z, when pool glm's window resets, or raise its tokens allowance",
    ] {
        assert!(
            question.contains(expected),
            "{expected:?} missing from {question}"
        );
    }
}

#[test]
fn nobody_in_an_empty_roster_says_to_add_a_worker() {
    let mut world = World::new("lead.build");
    world.candidates.clear();
    assert_eq!(
        question(&world.route()),
        "Nobody can take seat lead.build for T3 (phase build). The roster has no workers. \
         To unblock it: add a worker whose qualified globs match lead.build."
    );
}

#[test]
fn reviewing_seats_are_named_by_the_issue() {
    for seat in [
        "review.deep-rounds",
        "checkpoint.find",
        "checkpoint.confirm",
        "plan.scrutiny",
        "judge",
        "judge.rubric",
    ] {
        assert!(SeatId::new(seat).reviews_work(), "{seat}");
    }
    for seat in [
        "lead.build",
        "plan.co-draft",
        "reviewer",
        "judges",
        "plan.scrutinyx",
    ] {
        assert!(!SeatId::new(seat).reviews_work(), "{seat}");
    }
}

// ---- allowances ----

#[test]
fn a_zero_allowance_is_refused_with_what_to_write_instead() {
    let claude = PoolId::new("claude");
    let zero = |a: Allowance| a.validate(&claude).expect_err("refused").to_string();
    assert_eq!(
        zero(Allowance {
            tokens: Some(0),
            ..Allowance::default()
        }),
        "pool claude: a tokens allowance of zero leaves nothing to spend; give a positive \
         amount, or leave tokens out to not meter it"
    );
    for usd in [0.0, -5.0, f64::NAN, f64::INFINITY] {
        let refused = Allowance {
            usd: Some(usd),
            ..Allowance::default()
        }
        .validate(&claude);
        assert!(
            matches!(
                refused,
                Err(RouterError::ZeroAllowance {
                    dimension: Dimension::Usd,
                    ..
                })
            ),
            "{usd}"
        );
    }
    assert!(matches!(
        Allowance {
            requests: Some(0),
            ..Allowance::default()
        }
        .validate(&claude),
        Err(RouterError::ZeroAllowance {
            dimension: Dimension::Requests,
            ..
        })
    ));
    Allowance::default()
        .validate(&claude)
        .expect("unmetered is allowed");
    Allowance {
        tokens: Some(40_000_000),
        usd: Some(200.0),
        requests: None,
    }
    .validate(&claude)
    .expect("valid");
}

// ---- windows ----

fn bounds(spec: &str, now: &str) -> (String, String) {
    let window: Window = spec.parse().expect("window parses");
    let (start, end) = window.bounds(at(now)).expect("in range");
    (start.to_string(), end.to_string())
}

#[test]
fn the_default_window_is_weekly_from_monday_midnight_utc() {
    assert_eq!(Window::default().to_string(), "weekly mon 00:00");
    assert_eq!(
        bounds("weekly", "2026-12-02T08:00:00Z"),
        (
            "2026-11-30T00:00:00.000Z".into(),
            "2026-12-07T00:00:00.000Z".into()
        )
    );
    // The reset instant itself opens the new window.
    assert_eq!(
        bounds("weekly", "2026-12-07T00:00:00Z").0,
        "2026-12-07T00:00:00.000Z"
    );
    assert_eq!(
        bounds("weekly", "2026-12-06T23:59:59.999Z").0,
        "2026-11-30T00:00:00.000Z"
    );
}

#[test]
fn weekly_daily_and_monthly_resets_bound_the_window_holding_now() {
    // Wednesday 08:00, weekly on Wednesday at 09:00: the window opened last week.
    assert_eq!(
        bounds("weekly wed 09:00", "2026-12-02T08:00:00Z"),
        (
            "2026-11-25T09:00:00.000Z".into(),
            "2026-12-02T09:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("weekly sunday", "2026-12-02T08:00:00Z"),
        (
            "2026-11-29T00:00:00.000Z".into(),
            "2026-12-06T00:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("daily 06:00", "2026-12-02T05:59:00Z"),
        (
            "2026-12-01T06:00:00.000Z".into(),
            "2026-12-02T06:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("daily", "2026-12-31T23:00:00Z"),
        (
            "2026-12-31T00:00:00.000Z".into(),
            "2027-01-01T00:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("monthly", "2026-12-02T08:00:00Z"),
        (
            "2026-12-01T00:00:00.000Z".into(),
            "2027-01-01T00:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("monthly 15 08:00", "2026-12-02T08:00:00Z"),
        (
            "2026-11-15T08:00:00.000Z".into(),
            "2026-12-15T08:00:00.000Z".into()
        )
    );
    // The 31st in months without one: the last day.
    assert_eq!(
        bounds("monthly 31", "2027-02-10T00:00:00Z"),
        (
            "2027-01-31T00:00:00.000Z".into(),
            "2027-02-28T00:00:00.000Z".into()
        )
    );
    assert_eq!(
        bounds("monthly 31", "2027-03-01T00:00:00Z"),
        (
            "2027-02-28T00:00:00.000Z".into(),
            "2027-03-31T00:00:00.000Z".into()
        )
    );
}

#[test]
fn an_rfc3339_anchor_gives_the_weekday_and_time_in_utc() {
    let window = Window::parse("weekly", Some("2026-12-03T09:00:00+01:00")).expect("parses");
    assert_eq!(window.to_string(), "weekly thu 08:00");
    assert_eq!(
        "daily 2026-12-03T09:30:00Z"
            .parse::<Window>()
            .expect("parses")
            .to_string(),
        "daily 09:30"
    );
    assert_eq!(
        "monthly 2026-12-15T00:00:00Z"
            .parse::<Window>()
            .expect("parses")
            .to_string(),
        "monthly 15 00:00"
    );
}

#[test]
fn the_written_forms_round_trip_and_read_the_configs_two_keys() {
    for spec in [
        "weekly mon 00:00",
        "weekly fri 17:45",
        "daily 06:00",
        "monthly 28 23:59",
    ] {
        let window: Window = spec.parse().expect("parses");
        assert_eq!(window.to_string(), spec);
        let json = serde_json::to_string(&window).expect("serialises");
        assert_eq!(json, format!("\"{spec}\""));
        assert_eq!(
            serde_json::from_str::<Window>(&json).expect("reads"),
            window
        );
    }
    assert_eq!(
        Window::parse("weekly", Some("mon 09:00"))
            .expect("parses")
            .to_string(),
        "weekly mon 09:00"
    );
    assert_eq!(
        Window::parse("Weekly", Some("09:00"))
            .expect("parses")
            .to_string(),
        "weekly mon 09:00"
    );
}

#[test]
fn a_bad_window_says_what_the_form_is() {
    for (spec, detail) in [
        ("", "write daily, weekly or monthly"),
        ("fortnightly", "the period is daily, weekly or monthly"),
        (
            "weekly someday",
            "a weekday is mon, tue, wed, thu, fri, sat or sun",
        ),
        ("weekly mon 25:00", "a time of day is HH:MM, e.g. 09:30"),
        ("weekly mon 9", "a time of day is HH:MM, e.g. 09:30"),
        (
            "daily 06:00 07:00",
            "a daily reset is one time of day, e.g. daily 06:00",
        ),
        ("monthly 32", "a day of the month is 1 to 31"),
        ("monthly 0 00:00", "a day of the month is 1 to 31"),
        (
            "weekly 2026-12-03T09:00:30Z",
            "a reset is kept to the minute; give the anchor with :00 seconds",
        ),
    ] {
        match spec.parse::<Window>() {
            Err(RouterError::BadWindow { detail: got, .. }) => assert_eq!(got, detail, "{spec:?}"),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    let message = "weekly someday"
        .parse::<Window>()
        .expect_err("bad")
        .to_string();
    assert!(
        message.contains("e.g. \"weekly\", \"weekly mon 09:00\""),
        "{message}"
    );
}

#[test]
fn an_instant_outside_the_calendar_is_an_error_not_a_panic() {
    assert_eq!(
        Window::default().bounds(Timestamp(i64::MAX)),
        Err(RouterError::OutOfRange {
            at: Timestamp(i64::MAX)
        })
    );
}

// ---- serialised forms (the store and the config read these) ----

#[test]
fn pools_seats_and_pins_serialise_as_the_config_and_store_write_them() {
    let pool: Pool = serde_json::from_value(serde_json::json!({
        "id": "claude",
        "allowance": { "tokens": 40_000_000, "usd": 200 },
        "window": "weekly mon 09:00",
    }))
    .expect("pool");
    assert_eq!(pool.allowance.usd, Some(200.0));
    assert_eq!(pool.window.to_string(), "weekly mon 09:00");
    let unknown = serde_json::from_value::<Allowance>(serde_json::json!({ "dollars": 5 }));
    assert!(unknown.is_err(), "unknown allowance keys are refused");

    let seat: Seat = serde_json::from_value(serde_json::json!({
        "id": "checkpoint.find",
        "qualified": ["glm-*", "gpt-*"],
        "deny_tags": { "credentials": ["glm"] },
    }))
    .expect("seat");
    assert_eq!(seat.qualified, [Glob::new("glm-*"), Glob::new("gpt-*")]);

    let mut pin = pin("lead.build", "gpt", "codex", "build");
    pin.reason = PinReason::ReseatedAtHandoff { handoff: 4 };
    let json = serde_json::to_value(&pin).expect("pin");
    assert_eq!(
        json["reason"],
        serde_json::json!({ "kind": "reseated_at_handoff", "handoff": 4 })
    );
    assert_eq!(serde_json::from_value::<Pin>(json).expect("reads"), pin);
    assert_eq!(pin.reason.to_string(), "re-seated at hand-off 4");
    assert_eq!(
        PinReason::PoolExhausted {
            pool: PoolId::new("codex")
        }
        .to_string(),
        "pool codex exhausted"
    );
}

/// A pin keeps each exclusion by the name `baton route --json` gives it, and in words.
#[test]
fn passed_over_names_each_exclusion_as_it_is_serialized() {
    let pool = PoolId::new("p");
    let writer = WorkerId::new("w");
    let all = [
        Exclusion::NotQualified,
        Exclusion::PolicyDenied { tag: "credentials" },
        Exclusion::SameFamilyAsWriter {
            family: "f",
            writer: &writer,
        },
        Exclusion::HeldFind,
        Exclusion::Disabled,
        Exclusion::Benched { pool: Some(&pool) },
        Exclusion::PoolExhausted {
            pool: &pool,
            until: Timestamp(5),
        },
        Exclusion::NoHeadroom {
            pool: &pool,
            dimension: Dimension::Tokens,
            resets_at: None,
        },
        Exclusion::UnknownPool { pool: &pool },
    ];
    let excluded: Vec<Excluded> = all
        .iter()
        .map(|reason| Excluded {
            worker: &writer,
            reason: *reason,
        })
        .collect();
    let kept = passed_over(&excluded);
    for (reason, kept) in all.iter().zip(&kept) {
        let json = serde_json::to_value(reason).unwrap();
        assert_eq!(json["reason"], kept.reason, "{reason:?}");
        assert_eq!(kept.why, reason.to_string());
        assert_eq!(kept.worker, writer);
    }
    assert_eq!(kept[2].why, "same family (f) as the writer, w");
}
