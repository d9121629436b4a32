//! The `baton` binary, run as a user would: real child processes, real SQLite files.
mod suite;
