//! Properties of the router over generated rosters, pools, benches, pins and histories:
//! it never picks an ineligible worker, a new seating comes from the coldest eligible
//! pool, and the answer depends on nothing but the input (not on the roster's order).

use std::collections::BTreeSet;

use baton_core::ids::{Timestamp, WorkerId};
use baton_core::router::{
    Allowance, Authored, Benches, CHECKPOINT_CONFIRM, CHECKPOINT_FIND, Candidate, Fractions, Glob,
    Pick, Pin, PinReason, Pool, PoolId, PoolUsage, RouteInput, Routed, Seat, SeatId, Window, route,
};
use baton_core::state::StepTag;
use proptest::prelude::*;

const NOW: Timestamp = Timestamp(1_796_198_400_000);
const POOLS: [&str; 4] = ["claude", "codex", "glm", "local"];
const FAMILIES: [&str; 3] = ["anthropic", "openai", "zhipu"];
const SEATS: [&str; 6] = [
    "lead.build",
    "plan.co-draft",
    "review.deep-rounds",
    CHECKPOINT_FIND,
    CHECKPOINT_CONFIRM,
    "judge",
];
const GLOBS: [&str; 6] = ["lead.*", "review.*", "checkpoint.*", "*", "w?", "openai/*"];
const TAGS: [&str; 2] = ["credentials", "ui"];

#[derive(Debug, Clone)]
struct Case {
    seat: Seat,
    tags: Vec<StepTag>,
    candidates: Vec<Candidate>,
    shuffled: Vec<Candidate>,
    pools: Vec<Pool>,
    usage: Vec<PoolUsage>,
    benches: Benches,
    pins: Vec<Pin>,
    history: Vec<Authored>,
    inherit_from: Option<WorkerId>,
}

impl Case {
    fn input<'a>(&'a self, candidates: &'a [Candidate]) -> RouteInput<'a> {
        RouteInput {
            seat: &self.seat,
            phase: "build",
            handoff: 3,
            now: NOW,
            tags: &self.tags,
            candidates,
            pools: &self.pools,
            usage: &self.usage,
            benches: &self.benches,
            pins: &self.pins,
            step: Some("T1"),
            history: &self.history,
            inherit_from: self.inherit_from.as_ref(),
        }
    }
}

fn pick_of<T: Clone + std::fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(items)
}

fn globs() -> impl Strategy<Value = Vec<Glob>> {
    prop::collection::vec(pick_of(&GLOBS).prop_map(Glob::new), 0..3)
}

fn pool() -> impl Strategy<Value = (Pool, PoolUsage)> {
    (
        pick_of(&POOLS),
        // Usage up to a little over the allowance: most pools have headroom, some not.
        prop::option::of(100u64..1000),
        prop::option::of(10u32..100),
        prop::option::of(10u64..50),
        0u64..1100,
        0u32..110,
        0u64..55,
        prop::option::weighted(0.2, -3i64..3),
    )
        .prop_map(|(id, tokens, usd, requests, t, u, r, exhausted)| {
            let id = PoolId::new(id);
            let pool = Pool {
                id: id.clone(),
                allowance: Allowance {
                    tokens,
                    usd: usd.map(f64::from),
                    requests,
                },
                window: Window::default(),
            };
            let usage = PoolUsage {
                pool: id,
                tokens: t,
                usd: f64::from(u),
                requests: r,
                exhausted_until: exhausted.map(|h| Timestamp(NOW.0 + h * 3_600_000)),
            };
            (pool, usage)
        })
}

fn candidate(index: usize) -> impl Strategy<Value = Candidate> {
    (
        pick_of(&FAMILIES),
        // "nowhere" is a pool the config does not have.
        prop_oneof![4 => pick_of(&POOLS), 1 => Just("nowhere")],
        globs(),
        prop::bool::weighted(0.9),
    )
        .prop_map(move |(family, pool, qualified, enabled)| Candidate {
            id: WorkerId::new(format!("w{index}")),
            model: format!("{family}/m{index}"),
            family: family.into(),
            pool: PoolId::new(pool),
            qualified,
            enabled,
        })
}

fn candidates() -> impl Strategy<Value = Vec<Candidate>> {
    (0usize..8).prop_flat_map(|n| (0..n).map(candidate).collect::<Vec<_>>())
}

fn authored() -> impl Strategy<Value = Authored> {
    (
        prop_oneof![3 => Just("T1"), 1 => Just("T2")],
        prop_oneof![2 => pick_of(&SEATS), 1 => Just(CHECKPOINT_FIND)],
        0usize..8,
        pick_of(&FAMILIES),
    )
        .prop_map(|(step, seat, w, family)| Authored {
            step: step.into(),
            seat: SeatId::new(seat),
            worker: WorkerId::new(format!("w{w}")),
            family: family.into(),
        })
}

fn seat() -> impl Strategy<Value = Seat> {
    (
        // The checkpoint seats have the most rules; give them more cases.
        prop_oneof![2 => pick_of(&SEATS), 1 => Just(CHECKPOINT_CONFIRM)],
        globs(),
        prop::collection::btree_map(
            pick_of(&TAGS).prop_map(String::from),
            prop::collection::vec(pick_of(&FAMILIES).prop_map(String::from), 0..2),
            0..2,
        ),
    )
        .prop_map(|(id, qualified, deny_tags)| Seat {
            id: SeatId::new(id),
            qualified,
            deny_tags,
        })
}

fn pins(seat: SeatId) -> impl Strategy<Value = Vec<Pin>> {
    prop::collection::vec((0usize..8, pick_of(&POOLS), prop::bool::ANY, 0i64..5), 0..3).prop_map(
        move |pins| {
            pins.into_iter()
                .map(|(w, pool, this_phase, minutes)| Pin {
                    seat: seat.clone(),
                    worker: WorkerId::new(format!("w{w}")),
                    model: String::new(),
                    family: String::new(),
                    pool: PoolId::new(pool),
                    phase: if this_phase { "build" } else { "plan" }.into(),
                    at: Timestamp(NOW.0 - minutes * 60_000),
                    fractions: Fractions::new(),
                    reason: PinReason::AtPhaseStart,
                    excluded: None,
                })
                .collect()
        },
    )
}

prop_compose! {
    fn case()(
        seat in seat(),
        tags in prop::collection::vec(pick_of(&TAGS).prop_map(|t| StepTag::new(t).unwrap()), 0..2),
        (candidates, shuffled) in candidates()
            .prop_flat_map(|c| (Just(c.clone()), Just(c).prop_shuffle())),
        pools in prop::collection::vec(pool(), 0..4),
        benched_pools in prop::collection::btree_set(pick_of(&POOLS).prop_map(PoolId::new), 0..2),
        benched_workers in prop::collection::btree_set(
            (0usize..9).prop_map(|w| WorkerId::new(format!("w{w}"))), 0..2),
        history in prop::collection::vec(authored(), 0..5),
        inherit in prop::option::of(0usize..9),
        with_pins in prop::bool::ANY,
    )(
        pins in if with_pins { pins(seat.id.clone()).boxed() } else { Just(Vec::new()).boxed() },
        seat in Just(seat), tags in Just(tags), candidates in Just(candidates),
        shuffled in Just(shuffled), pools in Just(pools), benched_pools in Just(benched_pools),
        benched_workers in Just(benched_workers), history in Just(history), inherit in Just(inherit),
    ) -> Case {
        // One configuration entry per pool id, as the config guarantees.
        let mut seen = BTreeSet::new();
        let (pools, usage): (Vec<Pool>, Vec<PoolUsage>) = pools
            .into_iter()
            .filter(|(p, _)| seen.insert(p.id.clone()))
            .unzip();
        Case {
            seat, tags, candidates, shuffled, pools, usage,
            benches: Benches { pools: benched_pools, workers: benched_workers },
            pins, history,
            inherit_from: inherit.map(|w| WorkerId::new(format!("w{w}"))),
        }
    }
}

/// The rules as the issue states them, written out once more without the router's code.
fn eligible(case: &Case, c: &Candidate) -> bool {
    let seat = &case.seat;
    let qualified = (c.qualified.is_empty()
        || c.qualified.iter().any(|g| g.matches(seat.id.as_str())))
        && (seat.qualified.is_empty()
            || seat
                .qualified
                .iter()
                .any(|g| g.matches(c.id.as_str()) || g.matches(&c.model)));
    let allowed = !case.tags.iter().any(|tag| {
        seat.deny_tags
            .get(tag.as_str())
            .is_some_and(|families| families.contains(&c.family))
    });
    let of_step = |a: &&Authored| a.step == "T1";
    let cross_family = !seat.id.reviews_work()
        || !case
            .history
            .iter()
            .filter(of_step)
            .any(|a| !a.seat.reviews_work() && a.family == c.family);
    let not_finder = seat.id.as_str() != CHECKPOINT_CONFIRM
        || !case
            .history
            .iter()
            .filter(of_step)
            .any(|a| a.seat.as_str() == CHECKPOINT_FIND && a.worker == c.id);
    let Some(pool) = case.pools.iter().find(|p| p.id == c.pool) else {
        return false;
    };
    let usage = case.usage.iter().find(|u| u.pool == c.pool);
    let headroom = usage.is_none_or(|u| {
        u.exhausted_until.is_none_or(|until| until <= NOW)
            && pool
                .allowance
                .tokens
                .is_none_or(|l| (u.tokens as f64) < l as f64)
            && pool.allowance.usd.is_none_or(|l| u.usd < l)
            && pool
                .allowance
                .requests
                .is_none_or(|l| (u.requests as f64) < l as f64)
    });
    qualified
        && allowed
        && cross_family
        && not_finder
        && c.enabled
        && !case.benches.pools.contains(&c.pool)
        && !case.benches.workers.contains(&c.id)
        && headroom
}

/// A pool's used fraction: its most spent dimension.
fn fraction(case: &Case, pool: &PoolId) -> f64 {
    let (Some(p), Some(u)) = (
        case.pools.iter().find(|p| &p.id == pool),
        case.usage.iter().find(|u| &u.pool == pool),
    ) else {
        return 0.0;
    };
    let a = p.allowance;
    [
        a.tokens.map(|l| u.tokens as f64 / l as f64),
        a.usd.map(|l| u.usd / l),
        a.requests.map(|l| u.requests as f64 / l as f64),
    ]
    .into_iter()
    .flatten()
    .fold(0.0, f64::max)
}

fn seated_worker<'r>(routed: &'r Routed<'_>) -> Option<&'r WorkerId> {
    routed.pin().map(|p| &p.worker)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_picks_an_ineligible_worker_and_accounts_for_everyone(case in case()) {
        let routed = route(&case.input(&case.candidates));
        let expected: BTreeSet<&WorkerId> = case
            .candidates
            .iter()
            .filter(|c| eligible(&case, c))
            .map(|c| &c.id)
            .collect();
        let got: BTreeSet<&WorkerId> = routed.eligible.iter().copied().collect();
        prop_assert_eq!(&got, &expected);
        let excluded: BTreeSet<&WorkerId> = routed.excluded.iter().map(|e| e.worker).collect();
        let everyone: BTreeSet<&WorkerId> = case.candidates.iter().map(|c| &c.id).collect();
        prop_assert!(got.is_disjoint(&excluded));
        prop_assert_eq!(got.union(&excluded).copied().collect::<BTreeSet<_>>(), everyone);
        match seated_worker(&routed) {
            Some(worker) => prop_assert!(expected.contains(worker), "picked {worker}, not eligible"),
            None => prop_assert!(expected.is_empty(), "nobody picked from {expected:?}"),
        }
    }

    #[test]
    fn a_new_seating_comes_from_the_coldest_eligible_pool(case in case()) {
        let routed = route(&case.input(&case.candidates));
        let Pick::Seated { pin } = &routed.pick else {
            return Ok(());
        };
        prop_assert_eq!(pin.fractions.len(), case.pools.len());
        if pin.reason == PinReason::InheritedFromLead {
            prop_assert_eq!(Some(&pin.worker), case.inherit_from.as_ref());
            return Ok(());
        }
        let coldest = case
            .candidates
            .iter()
            .filter(|c| eligible(&case, c))
            .map(|c| fraction(&case, &c.pool))
            .fold(f64::INFINITY, f64::min);
        prop_assert_eq!(fraction(&case, &pin.pool), coldest);
        prop_assert_eq!(pin.fractions.get(&pin.pool).copied(), Some(coldest));
    }

    #[test]
    fn the_same_input_gives_the_same_answer_in_any_roster_order(case in case()) {
        let first = route(&case.input(&case.candidates));
        prop_assert_eq!(&route(&case.input(&case.candidates)), &first);
        prop_assert_eq!(&route(&case.input(&case.shuffled)), &first);
    }

    #[test]
    fn a_pin_of_this_phase_holds_exactly_while_its_worker_is_eligible(case in case()) {
        let routed = route(&case.input(&case.candidates));
        let current = case.pins.iter().filter(|p| p.phase == "build").max_by_key(|p| p.at);
        let held = matches!(routed.pick, Pick::Held { .. });
        let pinned_eligible = current.is_some_and(|pin| {
            case.candidates.iter().any(|c| c.id == pin.worker && eligible(&case, c))
        });
        prop_assert_eq!(held, pinned_eligible);
        if let (Some(pin), Pick::Seated { pin: new }) = (current, &routed.pick) {
            prop_assert!(
                !matches!(new.reason, PinReason::AtPhaseStart | PinReason::InheritedFromLead),
                "a re-seating within the phase says why: {:?} after {:?}", new.reason, pin
            );
        }
    }
}
