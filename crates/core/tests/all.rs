//! The one integration test binary of baton-core (see STYLE.md: one per crate).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
