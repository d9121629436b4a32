//! The store's one integration binary (one link step keeps two-core builds fast).

// The suite's helpers are test code too, but clippy's `allow-unwrap-in-tests` only
// covers `#[test]` functions, not the shared checks they call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
