//! The engine's integration tests: one binary, modules under `suite/`.
mod suite;
