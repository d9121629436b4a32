//! `baton line`: the assembly line. `baton line "DESCRIPTION"` runs a unit through the
//! route's stations (each seat lane an engine turn, see `Engine::line_step`) until it
//! ends, stops with a question for a human, or reaches what this build does not run yet;
//! `--resume UNIT` continues one, `--status [UNIT]` says where it is, and `--check`
//! validates a route.

use std::process::ExitCode;

use anyhow::{Result, bail};
use baton_core::ids::RunId;
use baton_core::line::cursor::Next;
use baton_core::line::{DEFAULT_ROUTE, Roster, Route, RouteErrors};
use baton_core::router::{Allowance, Candidate, Pool, PoolId, Window};
use baton_core::state::ExecutionState;
use baton_engine::config::{Floor, WorkerConfig};
use baton_engine::{LineStep, RunSpec, Session};
use serde::Serialize;

use crate::commands::{Context_, resolve};
use crate::exit;

/// Lane turns in a row that failed before the line stops (a worker that cannot answer).
const FAILED_IN_A_ROW: u32 = 3;

/// What `--json` prints.
#[derive(Serialize)]
struct Checked<'a> {
    source: &'a str,
    /// Whether the seats were checked against a roster (the configuration's workers).
    roster_checked: bool,
    route: &'a Route,
}

/// Where a new unit works: `--repo`, `--base`, `--gate`.
#[derive(Default)]
pub(crate) struct InRepo {
    pub repo: Option<std::path::PathBuf>,
    pub base: Option<String>,
    pub gates: Vec<String>,
    /// `--merge`: land the branch on its base branch at the merge station.
    pub merge: bool,
}

/// `baton line [DESCRIPTION] [--route default|FILE] [--repo PATH [--base REV] [--gate G]…] [--check] [--json]`.
pub(crate) fn line(
    ctx: &Context_,
    description: Option<&str>,
    route: &str,
    check: bool,
    json: bool,
    in_repo: &InRepo,
) -> Result<ExitCode> {
    if !check {
        let Some(description) = description.map(str::trim).filter(|d| !d.is_empty()) else {
            return Err(exit::usage(
                "say what the unit is: `baton line \"Add rate limiting to the public API\"` (or `--status`, `--resume UNIT`, `--check`)",
            ));
        };
        let (_, text) = read_route(route)?;
        let parsed = Route::parse(&text).map_err(|e| exit::config(format!("{route}: {e}")))?;
        return start(ctx, description, &parsed, false, in_repo);
    }
    let (source, text) = read_route(route)?;
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

/// The route `route` names: the built-in default, or a route file's text.
pub(crate) fn read_route(route: &str) -> Result<(String, String)> {
    Ok(if route == "default" {
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
    })
}

/// The workers a unit runs with offline (no configuration): six mock workers of three
/// families, each family's in a pool of its own, so every seat of the default route can
/// be staffed within the cross-family rule.
fn offline_workers() -> (baton_engine::Roster, Floor) {
    let families = ["alpha", "beta", "gamma"];
    let workers = (1..=6)
        .map(|i| {
            let family = families[(i - 1) % 3];
            let mut w = WorkerConfig::mock(&format!("{family}-{}", (i - 1) / 3 + 1), family);
            w.family = family.into();
            w.pool = Some(PoolId::new(family));
            w
        })
        .collect();
    let pools = families
        .iter()
        .map(|f| Pool {
            id: PoolId::new(*f),
            allowance: Allowance {
                requests: Some(1_000_000),
                ..Allowance::default()
            },
            window: Window::default(),
        })
        .collect();
    (
        baton_engine::Roster { workers },
        Floor {
            pools,
            seats: Vec::new(),
        },
    )
}

/// `baton line "DESCRIPTION"`: a new unit, run until it stops.
fn start(
    ctx: &Context_,
    description: &str,
    route: &Route,
    offline: bool,
    in_repo: &InRepo,
) -> Result<ExitCode> {
    let store = ctx.store()?;
    let engine = ctx.engine(&store);
    let (id, said) = create(ctx, &engine, description, route, offline, in_repo)?;
    println!("{said}");
    let mut session = open_unit(&engine, &id, &say_cli)?;
    drive(&engine, &mut session, &say_cli)
}

/// How the line says what it does: `(to_stderr, line)`. The CLI prints; the server logs.
pub(crate) type Say<'a> = &'a dyn Fn(bool, &str);

fn say_cli(to_stderr: bool, line: &str) {
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// A new unit of `description` on `route`, created (no turn run yet); with what to say
/// of it. `offline`: the mock workers of three families, whatever the configuration.
pub(crate) fn create(
    ctx: &Context_,
    engine: &baton_engine::Engine,
    description: &str,
    route: &Route,
    offline: bool,
    in_repo: &InRepo,
) -> Result<(RunId, String)> {
    let mut settings = ctx.settings(&Default::default());
    let configured = ctx.keys().filter(|_| !offline);
    let (roster, said) = match configured {
        Some(roster) => {
            if settings.floor.is_empty() {
                return Err(exit::config(format!(
                    "the assembly line seats every lane through the router, and no pools are configured{}; add [[pools]] and give each worker pool = \"…\" (README: \"Seats, pools and the router\"), or run without a configuration for the offline mock workers",
                    ctx.config_shown()
                )));
            }
            (roster.clone(), format!("the workers{}", ctx.config_shown()))
        }
        None => {
            let (roster, floor) = offline_workers();
            settings.floor = floor;
            (
                roster,
                "6 offline mock workers of 3 families (no configuration)".to_string(),
            )
        }
    };
    // The repository is checked before anything is created (the database included).
    let unit_repo = match &in_repo.repo {
        Some(repo) => {
            let mut gates = Vec::new();
            for g in &in_repo.gates {
                gates.push(
                    baton_engine::jobs::gates::GateSpec::try_parse(g).ok_or_else(|| {
                        exit::usage(format!(
                            "gate {g:?} has no command; write it as name=command (`tests=cargo test`) or as a command alone"
                        ))
                    })?,
                );
            }
            let mut unit = baton_engine::jobs::unit::UnitRepo::new(
                repo,
                in_repo.base.as_deref(),
                gates,
                &roster,
            )?;
            unit.merge = in_repo.merge;
            if unit.merge && unit.base_branch.is_none() {
                return Err(exit::usage(format!(
                    "merge lands the unit on the branch it starts from, and {} is a commit, not a branch; give a base branch (--base BRANCH, \"base\" over the API) or none, to start from the checked-out branch",
                    in_repo.base.as_deref().unwrap_or("HEAD (detached)")
                )));
            }
            Some(unit)
        }
        None => None,
    };
    let spec = RunSpec {
        objective: description.to_string(),
        // A run has at least one step; the plan lock replaces it with the locked plan.
        tasks: vec![description.to_string()],
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster,
        settings,
    };
    let id = engine.create_unit(&spec, route, unit_repo.as_ref())?;
    let where_ = match &unit_repo {
        Some(u) => format!(
            " in {} from {} on branch {} ({} gate(s))",
            u.repo.display(),
            &u.base[..u.base.len().min(12)],
            baton_engine::jobs::unit::UnitRepo::branch(&id),
            u.gates.len()
        ),
        None => String::new(),
    };
    let said = format!(
        "unit {id}: \"{description}\" on route {} ({} stations), with {said}{where_}",
        route.name,
        route.stations.len()
    );
    Ok((id, said))
}

/// `baton line --resume UNIT`.
pub(crate) fn resume(ctx: &Context_, unit: &str) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    let id = store.resolve_run(unit)?;
    let engine = ctx.engine(&store);
    if engine.open(&id, None)?.config.line.is_none() {
        return Err(exit::usage(format!(
            "run {id} is not a unit of the assembly line; continue it with `baton resume {id}`"
        )));
    }
    let mut session = open_unit(&engine, &id, &say_cli)?;
    println!("unit {id}: resumed at turn {}", session.state.turns);
    drive(&engine, &mut session, &say_cli)
}

/// Opens a unit to advance it: the run's lease taken (one process advances a unit),
/// `baton cancel` and Ctrl-C stopping the turn in flight, and a unit in a repository
/// given its worktree, put back at the last committed turn.
pub(crate) fn open_unit(
    engine: &baton_engine::Engine,
    id: &RunId,
    say: Say<'_>,
) -> Result<Session> {
    let mut session = engine.open(id, None)?;
    session.cancel = baton_gateway::Cancel::on_interrupt();
    engine.lease(&mut session, baton_engine::lease::DEFAULT_RUN_LEASE)?;
    for note in baton_engine::jobs::unit::attach(engine, &mut session)? {
        say(false, &format!("unit {id}: {note}"));
    }
    Ok(session)
}

/// Runs the unit's lanes until it ends or stops, a line a turn.
pub(crate) fn drive(
    engine: &baton_engine::Engine,
    session: &mut Session,
    say: Say<'_>,
) -> Result<ExitCode> {
    let id = session.run.clone();
    let mut failed = 0;
    // `--merge` was refused: the unit is done, its branch not landed (a human decides).
    let mut not_merged = false;
    loop {
        // Stopped between lanes (Ctrl-C, SIGTERM, an MCP client gone): nothing is in
        // flight, nothing is lost, and the unit resumes here. A lane of mock workers
        // never waits on a model, so this is where they notice.
        if session.cancel.is_cancelled() {
            return Err(baton_engine::Error::Stopped {
                next_turn: session.state.turns,
            }
            .into());
        }
        match engine.unit_step(session)? {
            LineStep::Lanes(turns) => {
                for turn in turns {
                    let what = turn.assignment.task.split(':').next().unwrap_or_default();
                    let status = turn.status.as_str();
                    say(
                        false,
                        &format!(
                            "turn {:>3}  {what:<48} {} [{status}]",
                            turn.turn, turn.worker
                        ),
                    );
                    failed = match turn.status {
                        baton_core::turn::TurnStatus::Failed => failed + 1,
                        _ => 0,
                    };
                    if failed >= FAILED_IN_A_ROW {
                        let question = format!(
                            "{what}: {FAILED_IN_A_ROW} turns in a row failed (last: {}); fix the worker (its model, key or server), then `baton line --resume {id}`",
                            turn.error.as_deref().unwrap_or("no answer")
                        );
                        engine.block_unit(session, question.clone())?;
                        say(true, &format!("the line stopped: {question}"));
                        return Ok(exit::Exit::Blocked.into());
                    }
                }
            }
            LineStep::Waiting(Next::Done) => {
                let verdict = session
                    .state
                    .verdicts
                    .last()
                    .map(|v| v.verdict.as_str().to_string())
                    .unwrap_or_else(|| "no verdict".into());
                say(
                    false,
                    &format!(
                        "unit {id} is done after {} turns: {verdict} (`baton line --status {id}`, `baton export {id}`)",
                        session.state.turns
                    ),
                );
                if not_merged {
                    return Ok(exit::Exit::Blocked.into());
                }
                return Ok(ExitCode::SUCCESS);
            }
            LineStep::Waiting(Next::Ask { station, question }) => {
                let question = format!("at {station}: {question}");
                engine.block_unit(session, question.clone())?;
                say(true, &format!("the line stopped for a human: {question}"));
                // A question on record is answered; one the line could not record (nobody
                // may take a seat) is fixed in the configuration.
                let asked = session
                    .state
                    .line
                    .as_ref()
                    .is_some_and(|p| p.asked.is_some());
                if asked {
                    say(
                        true,
                        &format!(
                            "unit {id} waits for an answer: `baton answer {id} \"…\"`, then `baton line --resume {id}`"
                        ),
                    );
                } else {
                    say(
                        true,
                        &format!(
                            "unit {id} waits for a fix of what the question names (the configuration's workers, pools or seats), then `baton line --resume {id}`"
                        ),
                    );
                }
                return Ok(exit::Exit::Blocked.into());
            }
            LineStep::Waiting(Next::Merge { station }) => {
                let o = baton_engine::jobs::unit::merge(engine, session, &station)?;
                say(
                    false,
                    &format!(
                        "turn {:>3}  {:<48} baton [committed]",
                        session.state.turns - 1,
                        format!("Merge at {station}")
                    ),
                );
                say(
                    false,
                    &format!(
                        "outbox: branch {} at {} ({} file(s), +{} -{}); patch {}; report {}",
                        o.branch,
                        &o.head[..o.head.len().min(12)],
                        o.files_changed,
                        o.insertions,
                        o.deletions,
                        o.patch_file.display(),
                        o.report_file.display()
                    ),
                );
                match &o.landing {
                    Some(l @ baton_workspace::Landing::Refused { .. }) => {
                        say(true, &l.describe());
                        not_merged = true;
                    }
                    Some(l) => say(false, &l.describe()),
                    None => {}
                }
            }
            LineStep::Waiting(other) => bail!(
                "the line reached what this build does not run yet ({other:?}); unit {id} is kept as it is (README: \"Assembly line\")"
            ),
        }
    }
}

/// What `--status --json` prints (and the server's `/api/units/{id}`).
#[derive(Serialize)]
pub(crate) struct Status {
    unit: String,
    objective: String,
    route: String,
    /// The route's stations, in order.
    stations: Vec<String>,
    status: String,
    turns: u32,
    /// The station the unit is at (none before its first lane).
    station: Option<String>,
    round: Option<u32>,
    step: Option<String>,
    fixes: u32,
    plan_locked: Option<String>,
    verdicts: Vec<String>,
    findings_open: usize,
    findings: usize,
    /// Who holds the seats of the station the unit is at (its latest pin per seat
    /// and lane), or of the last station it was at, at the end.
    seats: Vec<SeatHeld>,
    /// The open findings, one line each.
    open_findings: Vec<String>,
    question: Option<String>,
}

#[derive(Serialize)]
struct SeatHeld {
    seat: String,
    phase: String,
    worker: String,
    family: String,
    pool: String,
    /// The turn the pin was written with.
    since_turn: u32,
}

/// `baton line --status [UNIT] [--json]`.
pub(crate) fn status(ctx: &Context_, unit: Option<&str>, json: bool) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let id = resolve(&*store, unit)?;
    let out = status_of(&*store, &id)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_status(&out);
    Ok(ExitCode::SUCCESS)
}

/// Where unit `id` is, read from the store.
pub(crate) fn status_of(store: &dyn baton_store::Store, id: &RunId) -> Result<Status> {
    let id = id.clone();
    let info = store.run_info(&id)?;
    let Some(route) = info.config.get("line") else {
        return Err(exit::usage(format!(
            "run {id} is not a unit of the assembly line (`baton status {id}` shows it)"
        )));
    };
    let route: Route = serde_json::from_value(route.clone())?;
    let state: ExecutionState = store.load_state(&id)?;
    let progress = state.line.as_ref();
    let station = progress.map(|p| match route.stations.get(p.station) {
        Some(s) => s.id.clone(),
        None => "the end of the route".to_string(),
    });
    // The question the unit stopped on, as it said it then.
    let question = match info.status {
        baton_store::RunStatus::Blocked => {
            store
                .events(&id, 0)?
                .into_iter()
                .rev()
                .find_map(|e| match e.event.kind {
                    baton_protocol::EventKind::RunBlocked { question } => Some(question),
                    _ => None,
                })
        }
        _ => None,
    };
    // The pins of the station the unit is at (the last one it was at, at the end).
    let at_station = progress.and_then(|p| {
        route
            .stations
            .get(p.station)
            .or_else(|| route.stations.last())
            .map(|s| s.id.clone())
    });
    let mut seats: Vec<SeatHeld> = Vec::new();
    if let Some(station) = &at_station {
        let pins = store.pins(&baton_store::PinFilter::run(&id))?;
        let here = format!("{station} round ");
        for p in pins.into_iter().filter(|p| p.pin.phase.starts_with(&here)) {
            let held = SeatHeld {
                seat: p.pin.seat.to_string(),
                phase: p.pin.phase.clone(),
                worker: p.pin.worker.to_string(),
                family: p.pin.family.clone(),
                pool: p.pin.pool.to_string(),
                since_turn: p.turn,
            };
            match seats
                .iter_mut()
                .find(|s| s.seat == held.seat && s.phase == held.phase)
            {
                Some(s) => *s = held,
                None => seats.push(held),
            }
        }
    }
    let open_findings = state
        .findings
        .iter()
        .filter(|f| f.is_open())
        .map(|f| {
            format!(
                "{} {} at {}{}: {} (raised by {} at {}{})",
                f.id,
                f.severity.as_str(),
                f.station,
                f.step
                    .as_deref()
                    .map(|s| format!(" {s}"))
                    .unwrap_or_default(),
                f.what,
                f.provenance.recorded_by,
                f.seat,
                if f.fix_claimed.is_some() {
                    "; fix claimed, not confirmed"
                } else {
                    ""
                }
            )
        })
        .collect();
    Ok(Status {
        unit: id.to_string(),
        objective: state.objective.clone(),
        route: route.name.clone(),
        stations: route.stations.iter().map(|s| s.id.clone()).collect(),
        status: info.status.as_str().to_string(),
        turns: state.turns,
        station,
        round: progress.map(|p| p.absolute_round()),
        step: progress.and_then(|p| p.step).map(|s| format!("T{}", s + 1)),
        fixes: progress.map_or(0, |p| p.fixes),
        plan_locked: state.plan_lock.as_ref().map(|l| l.plan.clone()),
        verdicts: state
            .verdicts
            .iter()
            .map(|v| format!("{} {}", v.id, v.verdict.as_str()))
            .collect(),
        findings_open: state.findings.iter().filter(|f| f.is_open()).count(),
        findings: state.findings.len(),
        seats,
        open_findings,
        question,
    })
}

fn print_status(out: &Status) {
    println!(
        "unit {}: \"{}\" on route {} ({})",
        out.unit, out.objective, out.route, out.status
    );
    match &out.station {
        Some(s) => println!(
            "at {s}, round {}{}; {} fix round{} taken; {} turns",
            out.round.unwrap_or(1),
            out.step
                .as_ref()
                .map(|t| format!(", step {t}"))
                .unwrap_or_default(),
            out.fixes,
            if out.fixes == 1 { "" } else { "s" },
            out.turns
        ),
        None => println!("not started; {} turns", out.turns),
    }
    println!(
        "plan: {}",
        out.plan_locked
            .as_ref()
            .map_or("not locked yet".to_string(), |p| format!("{p} locked"))
    );
    println!(
        "verdicts: {}",
        if out.verdicts.is_empty() {
            "none yet".to_string()
        } else {
            out.verdicts.join(", ")
        }
    );
    for s in &out.seats {
        println!(
            "seat {} ({}): {} ({}, pool {}) since turn {}",
            s.seat, s.phase, s.worker, s.family, s.pool, s.since_turn
        );
    }
    println!("findings: {} open of {}", out.findings_open, out.findings);
    for f in &out.open_findings {
        println!("  {f}");
    }
    if let Some(q) = &out.question {
        println!("stopped for a human: {q}");
    }
}

/// `baton answer UNIT "…"`: the human's reply to the question the unit stopped on.
pub(crate) fn answer(ctx: &Context_, unit: &str, text: &str) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    let id = store.resolve_run(unit)?;
    let engine = ctx.engine(&store);
    let (turn, taken) = record_answer(&engine, &id, text)?;
    println!(
        "recorded as a decision of human (turn {turn}), {taken}; the unit is open again: continue with `baton line --resume {id}`"
    );
    Ok(ExitCode::SUCCESS)
}

/// Records `text` as the human's answer to the question unit `id` stopped on: the
/// turn it was committed with, and what the line makes of it.
pub(crate) fn record_answer(
    engine: &baton_engine::Engine,
    id: &RunId,
    text: &str,
) -> Result<(u32, String)> {
    let mut session = engine.open(id, None)?;
    let stopped = session.state.line.as_ref().and_then(|p| p.stopped);
    let turn = engine.answer_unit(&mut session, text)?;
    use baton_core::line::cursor::Reply;
    let taken = match (stopped, Reply::read(text)) {
        (None, _) => "the station runs again with it".to_string(),
        (Some(_), Reply::Accept) => "accepted: the line goes on as things stand".to_string(),
        (Some(_), Reply::More(n)) => format!("{n} more round(s) allowed"),
        (Some(_), Reply::Guidance) => "taken as guidance for one more round".to_string(),
    };
    Ok((turn.turn, taken))
}

/// What `baton demo --line` runs: the offline workers' checks catch the planted bug
/// (`baton_gateway::mock::line::PLANTED`), once at a checkpoint and once in review.
pub(crate) const DEMO_UNIT: &str = "Add rate limiting to the public API, with a planted bug";

/// `baton demo --line`: the default route offline (mock workers of three families,
/// whatever the configuration says), then what happened, station by station.
pub(crate) fn demo(ctx: &Context_) -> Result<ExitCode> {
    let route = Route::default_route().map_err(|e| exit::config(e.to_string()))?;
    let code = start(ctx, DEMO_UNIT, &route, true, &InRepo::default())?;
    let store = ctx.reader()?;
    let id = resolve(&*store, None)?;
    let state = store.load_state(&id)?;
    let pins = store.pins(&baton_store::PinFilter::run(&id))?;
    println!(
        "\nwho held which seat (the router's pins; each checking seat of another family than the work's writer):"
    );
    for station in &route.stations {
        let mut held: Vec<String> = Vec::new();
        for p in pins
            .iter()
            .filter(|p| p.pin.phase.split(" round ").next() == Some(station.id.as_str()))
        {
            let who = format!("{} {} ({})", p.pin.seat, p.pin.worker, p.pin.family);
            if !held.contains(&who) {
                held.push(who);
            }
        }
        if !held.is_empty() {
            println!("  {:<10} {}", station.id, held.join(", "));
        }
    }
    let how = |f: &baton_core::line::Finding| {
        let fix = f
            .fix_claimed
            .as_ref()
            .map(|c| format!("fix claimed by {} at turn {}", c.by, c.turn));
        let closed = f.closed.as_ref().map(|c| match &c.by {
            baton_core::line::ClosedBy::Confirmed { seat, worker } => {
                format!("confirmed by {worker} at {seat}, turn {}", c.turn)
            }
            baton_core::line::ClosedBy::Gate { gate } => format!("gate {gate} passed"),
            baton_core::line::ClosedBy::Lead { worker, .. } => {
                format!("dismissed by the lead {worker}")
            }
            baton_core::line::ClosedBy::Human => "dismissed by a human".into(),
        });
        let parts: Vec<String> = fix.into_iter().chain(closed).collect();
        format!(
            "{} {} by {} ({}) at {}{}: {} — {}; {}",
            f.id,
            f.severity.as_str(),
            f.provenance.recorded_by,
            f.family,
            f.seat,
            f.step
                .as_deref()
                .map(|s| format!(" on {s}"))
                .unwrap_or_default(),
            f.what,
            f.status.as_str(),
            if parts.is_empty() {
                "nothing claimed".into()
            } else {
                parts.join(", ")
            }
        )
    };
    let steps = state.plan.len();
    fn at<'a>(
        state: &'a ExecutionState,
        station: &'a str,
    ) -> impl Iterator<Item = &'a baton_core::line::Finding> {
        state.findings.iter().filter(move |f| f.station == station)
    }
    println!(
        "checkpoints: {steps} steps built, each found and confirmed by another family; {} finding(s):",
        at(&state, "build").count()
    );
    for f in at(&state, "build") {
        println!("  {}", how(f));
    }
    // Each pass through the review ends at the round that raised nothing new: the last
    // review round before each synthesis.
    let mut converged: Vec<u32> = Vec::new();
    let mut last_round = None;
    for t in store.turns(&id)? {
        match &t.lane {
            Some(l) if l.station == "review" => last_round = Some(l.round),
            None if t.assignment.task.starts_with("Synthesize") => {
                converged.extend(last_round.take());
            }
            _ => {}
        }
    }
    let rounds = match converged.as_slice() {
        [] => "did not run".to_string(),
        [only] => format!("converged after round {only}"),
        [first, rest @ ..] => format!(
            "converged after round {first}, then (in the fix round{}) after round {}",
            if rest.len() > 1 { "s" } else { "" },
            rest.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    println!(
        "review: {} finding(s); {rounds} (a round that raised nothing new):",
        at(&state, "review").count()
    );
    for f in at(&state, "review") {
        println!("  {}", how(f));
    }
    let fixes = state.line.as_ref().map_or(0, |p| p.fixes);
    for v in &state.verdicts {
        println!(
            "synthesis {}: {} ({})",
            v.round,
            v.verdict.as_str(),
            if v.reasons.is_empty() {
                "no reasons given".to_string()
            } else {
                v.reasons.join("; ")
            }
        );
    }
    if state.verdicts.is_empty() {
        println!("synthesis: no verdict yet");
    }
    println!("fix rounds: {fixes}");
    Ok(code)
}
