//! The `baton` binary, run as a user would: real child processes, real SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
