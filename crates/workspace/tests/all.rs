//! baton-workspace integration tests: every test builds a real repository with `git init`
//! in a temporary directory and drives the crate against it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
