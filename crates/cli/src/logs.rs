//! Diagnostic logs for the long-running commands (`baton work`, later `serve`): what
//! the engine is doing between the progress lines, through `tracing`. Off unless asked
//! for, so what a user sees by default is unchanged.

use tracing_subscriber::EnvFilter;

/// The variables that turn logs on, the first set winning: `BATON_LOG` so baton's logs
/// can be asked for without every other Rust program's, `RUST_LOG` as the convention.
const VARIABLES: [&str; 2] = ["BATON_LOG", "RUST_LOG"];

/// Sends logs to stderr, filtered by `BATON_LOG` or `RUST_LOG` (`info`,
/// `baton_engine=debug`, …). Neither set: no subscriber, no logs.
pub fn init() {
    let Some((var, spec)) = VARIABLES.iter().find_map(|var| {
        let value = std::env::var(var).ok()?;
        (!value.trim().is_empty()).then_some((*var, value))
    }) else {
        return;
    };
    let filter = match EnvFilter::try_new(&spec) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("warning: {var}={spec:?} is not a log filter ({e}); logs stay off");
            return;
        }
    };
    // `try_init`: a second call (tests in one process) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
