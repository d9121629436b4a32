//! baton's pure core: the typed record of the work (`state`), what models may claim
//! (`claims`), the briefing compiler (`compiler`) and the reconciler that is the only
//! write path into state (`reconciler`), and the router that fills seats from pools
//! (`router`). The events every consumer shares live one
//! crate up, in `baton-protocol`.
//!
//! Nothing here does I/O: no files, no clock, no network. Time and identity are passed in
//! by the engine, which is what makes provenance engine-stamped (invariant 5) and
//! compilation deterministic (invariant 7).

pub mod agent;
pub mod claims;
pub mod compiler;
pub mod error;
pub mod error_class;
pub mod fidelity;
pub mod ids;
pub mod line;
pub mod prompt;
pub mod reconciler;
pub mod router;
pub mod state;
pub mod step_scope;
pub mod step_tag;
pub mod synthetic;
pub mod text;
pub mod tokens;
pub mod turn;

pub use error::{Error, Result};
pub use error_class::ErrorClass;
