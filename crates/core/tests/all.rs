//! The one integration test binary of baton-core (see STYLE.md: one per crate).

mod suite;
