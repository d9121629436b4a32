//! `baton line`: the assembly line (issue 12, in progress). What exists is the route:
//! `baton line --check [--route default|FILE]` validates a route and prints it. Running a
//! unit through the line does not exist yet, and says so.

use std::process::ExitCode;

use anyhow::Result;
use baton_core::line::{DEFAULT_ROUTE, Roster, Route, RouteErrors};
use baton_core::router::Candidate;
use serde::Serialize;

use crate::commands::Context_;
use crate::exit;

/// What `--json` prints.
#[derive(Serialize)]
struct Checked<'a> {
    source: &'a str,
    /// Whether the seats were checked against a roster (the configuration's workers).
    roster_checked: bool,
    route: &'a Route,
}

/// `baton line [DESCRIPTION] [--route default|FILE] [--check] [--json]`.
pub(crate) fn line(
    ctx: &Context_,
    description: Option<&str>,
    route: &str,
    check: bool,
    json: bool,
) -> Result<ExitCode> {
    if !check {
        let what = description.map_or_else(String::new, |d| format!(" \"{d}\""));
        return Err(exit::usage(format!(
            "the assembly line cannot run a unit{what} yet: only its route exists (README: \"Assembly line (in progress)\"); `baton line --check [--route FILE]` validates a route"
        )));
    }
    let (source, text) = if route == "default" {
        (
            "the built-in default route".to_string(),
            DEFAULT_ROUTE.to_string(),
        )
    } else {
        let text = std::fs::read_to_string(route).map_err(|e| {
            exit::usage(format!(
                "cannot read route file {route}: {e}; give a route file's path, or `default` for the built-in route"
            ))
        })?;
        (route.to_string(), text)
    };
    let refuse = |errors: RouteErrors| exit::config(format!("{source}: {errors}"));
    let parsed = Route::parse(&text).map_err(refuse)?;

    // Staffing and the cross-family rule need the configured workers; the mock roster
    // a run falls back on says nothing about a real floor.
    let candidates: Option<Vec<Candidate>> = ctx
        .keys()
        .map(|r| r.workers.iter().map(|w| w.candidate()).collect());
    if let Some(candidates) = &candidates {
        let roster = Roster {
            candidates,
            seats: &ctx.floor().seats,
        };
        parsed.check(Some(&roster)).map_err(|errors| {
            exit::config(format!(
                "{source}, against the roster{}: {errors}",
                ctx.config_shown()
            ))
        })?;
    }
    if json {
        let out = Checked {
            source: &source,
            roster_checked: candidates.is_some(),
            route: &parsed,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", parsed.describe());
    match &candidates {
        Some(c) => println!(
            "valid: every seat can be staffed from the {} workers{} within the cross-family rule",
            c.len(),
            ctx.config_shown()
        ),
        None => println!(
            "valid as written; not checked against a roster (give --config with [[workers]] to check who can take each seat)"
        ),
    }
    Ok(ExitCode::SUCCESS)
}
