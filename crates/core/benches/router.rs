//! One routing decision on a large floor (`support/router_floor.rs`): 100 workers in 10
//! pools, 30 seats. Target ≤ 10 µs. Instruction counts, which machine load does not
//! move: `valgrind --tool=callgrind` on `examples/route_count.rs`.
//!
//! `cargo bench -p baton-core --bench router -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::expect_used)]

use std::hint::black_box;

use baton_core::router::{Pick, route};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/router_floor.rs"]
mod router_floor;

use router_floor::{floor, input, review_seat};

fn bench(c: &mut Criterion) {
    let floor = floor();
    let review = review_seat(&floor);
    let routed = route(&input(&floor, review));
    assert!(
        matches!(routed.pick, Pick::Seated { .. }),
        "{:?}",
        routed.pick
    );
    c.bench_function(
        "route/one decision (100 workers, 30 seats, 10 pools)",
        |b| b.iter(|| route(black_box(&input(&floor, review)))),
    );
    // Every seat once: 30 decisions, some held by their pin, some re-seated.
    c.bench_function("route/all 30 seats", |b| {
        b.iter(|| {
            for seat in &floor.seats {
                black_box(route(black_box(&input(&floor, seat))));
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
