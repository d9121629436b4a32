//! The floor the router bench and `examples/route_count.rs` route on: 100 workers in 10
//! pools, 30 seats, qualifications, narrowing, tag policy, benches, a spent and an
//! exhausted pool, earlier pins and a history of who wrote what.

use std::collections::BTreeMap;

use baton_core::ids::{Timestamp, WorkerId};
use baton_core::router::{
    Allowance, Authored, Benches, Candidate, Glob, Pin, PinReason, Pool, PoolId, PoolUsage,
    RouteInput, Seat, SeatId, Window,
};

const WORKERS: usize = 100;
const SEATS: usize = 30;
const POOLS: usize = 10;
const NOW: Timestamp = Timestamp(1_796_044_933_000);

pub struct Floor {
    pub seats: Vec<Seat>,
    candidates: Vec<Candidate>,
    pools: Vec<Pool>,
    usage: Vec<PoolUsage>,
    benches: Benches,
    pins: Vec<Pin>,
    history: Vec<Authored>,
    tags: Vec<baton_core::state::StepTag>,
}

pub fn floor() -> Floor {
    let families = ["anthropic", "openai", "google", "glm", "deepseek"];
    let pools: Vec<Pool> = (0..POOLS)
        .map(|p| Pool {
            id: PoolId::new(format!("pool-{p}")),
            allowance: Allowance {
                tokens: Some(40_000_000),
                usd: (p % 2 == 0).then_some(200.0),
                requests: (p % 3 == 0).then_some(10_000),
            },
            window: Window::default(),
        })
        .collect();
    let usage: Vec<PoolUsage> = (0..POOLS)
        .map(|p| PoolUsage {
            pool: PoolId::new(format!("pool-{p}")),
            // 5 % … 95 %, pool 9 spent on tokens.
            tokens: 2_000_000 + p as u64 * 4_200_000,
            usd: 10.0 * p as f64,
            requests: 500 * p as u64,
            // Pool 7's provider said the quota is gone for another hour.
            exhausted_until: (p == 7).then_some(Timestamp(NOW.0 + 3_600_000)),
        })
        .collect();
    let qualified = [
        vec![],
        vec![Glob::new("lead.*"), Glob::new("plan.*")],
        vec![Glob::new("review.*"), Glob::new("checkpoint.*")],
        vec![Glob::new("*")],
    ];
    let candidates: Vec<Candidate> = (0..WORKERS)
        .map(|w| Candidate {
            id: WorkerId::new(format!("worker-{w:03}")),
            model: format!("{}/model-{w}", families[w % families.len()]),
            family: families[w % families.len()].to_string(),
            pool: PoolId::new(format!("pool-{}", w % POOLS)),
            qualified: qualified[w % qualified.len()].clone(),
            enabled: w % 17 != 0,
        })
        .collect();
    let names = ["lead", "plan", "build", "review", "checkpoint", "judge"];
    let seats: Vec<Seat> = (0..SEATS)
        .map(|s| {
            let mut seat = Seat::new(SeatId::new(format!("{}.seat-{s}", names[s % names.len()])));
            if s % 3 == 0 {
                seat.qualified = vec![Glob::new("worker-0*"), Glob::new("*/model-1*")];
            }
            if s % 2 == 0 {
                seat.deny_tags = BTreeMap::from([(
                    "credentials".to_string(),
                    vec!["glm".to_string(), "deepseek".to_string()],
                )]);
            }
            seat
        })
        .collect();
    let benches = Benches {
        pools: [PoolId::new("pool-3")].into(),
        workers: [WorkerId::new("worker-011"), WorkerId::new("worker-042")].into(),
    };
    // An earlier phase seated every seat; this phase seated the first half.
    let pin = |s: usize, phase: &str, w: usize| Pin {
        seat: seats[s].id.clone(),
        worker: candidates[w].id.clone(),
        model: candidates[w].model.clone(),
        family: candidates[w].family.clone(),
        pool: candidates[w].pool.clone(),
        phase: phase.to_string(),
        at: Timestamp(NOW.0 - 1_000 * (SEATS - s) as i64),
        fractions: BTreeMap::new(),
        reason: PinReason::AtPhaseStart,
        excluded: None,
    };
    let mut pins: Vec<Pin> = (0..SEATS)
        .map(|s| pin(s, "plan", (s * 7) % WORKERS))
        .collect();
    pins.extend((0..SEATS / 2).map(|s| pin(s, "build", (s * 13 + 1) % WORKERS)));
    let history: Vec<Authored> = (0..60)
        .map(|i| Authored {
            step: format!("T{}", i / 4),
            seat: seats[i % SEATS].id.clone(),
            worker: candidates[(i * 11) % WORKERS].id.clone(),
            family: candidates[(i * 11) % WORKERS].family.clone(),
        })
        .collect();
    Floor {
        seats,
        candidates,
        pools,
        usage,
        benches,
        pins,
        history,
        tags: baton_core::state::StepTag::list("credentials,migration").unwrap_or_default(),
    }
}

pub fn input<'a>(floor: &'a Floor, seat: &'a Seat) -> RouteInput<'a> {
    RouteInput {
        seat,
        phase: "build",
        handoff: 42,
        now: NOW,
        tags: &floor.tags,
        candidates: &floor.candidates,
        pools: &floor.pools,
        usage: &floor.usage,
        benches: &floor.benches,
        pins: &floor.pins,
        step: Some("T7"),
        history: &floor.history,
        inherit_from: None,
    }
}

/// The seat one decision is measured on: a review seat with no pin in this phase, so
/// every worker is checked against the cross-family rule and the pick is a new pin.
pub fn review_seat(floor: &Floor) -> &Seat {
    floor
        .seats
        .iter()
        .rev()
        .find(|s| s.id.as_str().starts_with("review."))
        .expect("a review seat")
}
