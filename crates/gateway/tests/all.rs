//! Gateway integration tests: every HTTP provider against a local server that speaks
//! its wire format. Nothing leaves 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
