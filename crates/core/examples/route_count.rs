//! Routes one decision of the router bench's floor N times (the first argument, default
//! 1000), for instruction counts that machine load does not move:
//!
//! ```text
//! valgrind --tool=callgrind target/release/examples/route_count 0
//! valgrind --tool=callgrind target/release/examples/route_count 1000
//! ```
//!
//! The difference over 1000 is one decision's instructions.

#![allow(clippy::expect_used)]

use std::hint::black_box;

use baton_core::router::route;

#[path = "../benches/support/router_floor.rs"]
mod router_floor;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1000, |a| a.parse().expect("a count"));
    let floor = router_floor::floor();
    let seat = router_floor::review_seat(&floor);
    for _ in 0..n {
        black_box(route(black_box(&router_floor::input(&floor, seat))));
    }
}
