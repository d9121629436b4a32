//! Each subcommand: resolve configuration, open the store, call the engine, render.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use baton_core::ids::RunId;
use baton_core::tokens::EstimatorKind;
use baton_core::turn::TurnStatus;
use baton_engine::config::{self, FileConfig, Roster, RunSettings};
use baton_engine::ops::{self, OpContext, OpOutcome, Started, Stop};
use baton_engine::{Engine, RunEnd, StepOutcome, TurnSummary, demo, export};
use baton_protocol::{NewRoster, Op};
use baton_store::{Location, Store};

use crate::exit::{self, Exit};
use crate::{BudgetArgs, Cli, Command, ExportFormat};
use crate::{render, signals};

const DEFAULT_DB: &str = ".baton/baton.db";
const DEFAULT_CONFIG: &str = "baton.toml";

/// Resolved global settings: defaults < file < environment < flags.
pub(crate) struct Context_ {
    db: Location,
    file: FileConfig,
    config_path: Option<PathBuf>,
    pub(crate) verbose: bool,
}

fn context(cli: &Cli) -> Result<Context_> {
    let config_path = match &cli.config {
        Some(p) => {
            if !p.exists() {
                return Err(exit::config(format!(
                    "configuration file {} does not exist; create one with `baton init --path {}`",
                    p.display(),
                    p.display()
                )));
            }
            Some(p.clone())
        }
        None => Path::new(DEFAULT_CONFIG)
            .exists()
            .then(|| PathBuf::from(DEFAULT_CONFIG)),
    };
    let file = match &config_path {
        Some(p) => config::load_file(p)?,
        None => FileConfig::default(),
    };
    for warning in &file.warnings {
        eprintln!("warning: {warning}");
    }
    // `--db`/`BATON_DB`, else the file's `db`, may be a path or a URL; a URL of a kind
    // baton cannot open is refused here, before anything is created.
    let db = match (&cli.db, &file.db) {
        (Some(flag), _) => match flag.to_str() {
            Some(spec) => Location::parse(spec)?,
            // Not UTF-8: no URL, a path.
            None => Location::Sqlite(flag.clone()),
        },
        (None, Some(spec)) => Location::parse(spec)?,
        (None, None) => Location::Sqlite(PathBuf::from(DEFAULT_DB)),
    };
    Ok(Context_ {
        db,
        file,
        config_path,
        verbose: cli.verbose,
    })
}

impl Context_ {
    /// The database, for a command that writes: created and migrated when needed.
    // No context added: every open error already names the file and what to do.
    pub(crate) fn store(&self) -> Result<Arc<dyn Store>> {
        Ok(self.db.open()?)
    }

    /// The database, for a command that writes to what is already there (`step`,
    /// `resume`, `judge`): without a database it has nothing to do, so none is created.
    pub(crate) fn existing_store(&self) -> Result<Arc<dyn Store>> {
        if self.db.exists() == Some(false) {
            return Err(self.no_database());
        }
        self.store()
    }

    /// Where the database is, as `--db` named it.
    pub(crate) fn location(&self) -> &Location {
        &self.db
    }

    fn no_database(&self) -> anyhow::Error {
        baton_store::Error::NoDatabase {
            path: self.db.to_string(),
        }
        .into()
    }

    /// The database, for a command that only reads: never created or changed (so it
    /// works on a read-only file system); an error when there is none yet.
    pub(crate) fn reader(&self) -> Result<Arc<dyn Store>> {
        match self.try_reader()? {
            Some(store) => Ok(store),
            None => Err(self.no_database()),
        }
    }

    /// `reader`, or `None` when there is no database yet.
    pub(crate) fn try_reader(&self) -> Result<Option<Arc<dyn Store>>> {
        match self.db.open_read_only() {
            Ok(store) => Ok(Some(store)),
            Err(baton_store::Error::NoDatabase { .. }) => Ok(None),
            // A database from an older baton: migrating it is the one write a reading
            // command makes, once, so the upgrade does not wait for the next run.
            Err(
                too_old @ baton_store::Error::SchemaTooOld {
                    found, supported, ..
                },
            ) => {
                let store = match self.db.open() {
                    Ok(store) => store,
                    // Cannot be upgraded here: say why it cannot be read as it is.
                    Err(baton_store::Error::ReadOnly { .. }) => return Err(too_old.into()),
                    Err(e) => return Err(e.into()),
                };
                eprintln!(
                    "upgraded the database {} from schema version {found} to {supported}",
                    self.db
                );
                Ok(Some(store))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// An engine over the store whose events are printed on stderr as they happen
    /// (every model call too with `--verbose`).
    pub(crate) fn engine(&self, store: &Arc<dyn Store>) -> Engine {
        let engine = Engine::new(store.clone());
        engine.subscribe(crate::live::progress(self.verbose));
        engine
    }

    /// What every op this command applies is given: the configuration's roster and
    /// settings (the op carries the flags), its literal keys, Ctrl-C as the stop, and
    /// the database's files to hide from sandboxed agents.
    pub(crate) fn op_context(&self) -> OpContext {
        // An SQLite file and its companions are hidden from sandboxed agents; a server's
        // database is not on this machine's disk.
        let hidden = match self.db.file() {
            Some(file) => {
                let db = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
                ["", "-wal", "-shm"]
                    .iter()
                    .map(|suffix| PathBuf::from(format!("{}{suffix}", db.display())))
                    .collect()
            }
            None => Vec::new(),
        };
        OpContext {
            keys: self.keys().cloned(),
            cancel: baton_gateway::Cancel::on_interrupt(),
            hidden,
            ..OpContext::new(self.roster().0, self.settings(&BudgetArgs::default()))
        }
    }

    /// The configuration's pools and seats (empty without a file or without them).
    pub(crate) fn floor(&self) -> &config::Floor {
        &self.file.floor
    }

    /// " in FILE" for a message about the configuration, or "" when there is none.
    pub(crate) fn config_shown(&self) -> String {
        self.config_path
            .as_ref()
            .map(|p| format!(" in {}", p.display()))
            .unwrap_or_default()
    }

    /// Literal keys from the configuration file's roster, which runs never store.
    pub(crate) fn keys(&self) -> Option<&Roster> {
        self.file.roster.as_ref()
    }

    pub(crate) fn settings(&self, flags: &BudgetArgs) -> RunSettings {
        let d = RunSettings::default();
        RunSettings {
            budget: flags.budget.or(self.file.budget).unwrap_or(d.budget),
            total_budget: flags.total_budget.or(self.file.total_budget),
            estimator: flags
                .estimator
                .or(self.file.estimator)
                .unwrap_or(d.estimator),
            repair_attempts: self.file.repair_attempts.unwrap_or(d.repair_attempts),
            floor: self.file.floor.clone(),
        }
    }

    /// The configured roster, or the offline default of five mock workers.
    pub(crate) fn roster(&self) -> (Roster, String) {
        match (&self.file.roster, &self.config_path) {
            (Some(r), Some(p)) => (r.clone(), format!("roster from {}", p.display())),
            _ => (
                Roster::mock(5),
                "no roster file: 5 offline mock workers (`baton init` writes one)".into(),
            ),
        }
    }
}

pub(crate) fn resolve(store: &dyn Store, run: Option<&str>) -> Result<RunId> {
    match run {
        Some(prefix) => Ok(store.resolve_run(prefix)?),
        None => {
            let runs = store.list_runs()?;
            match runs.into_iter().next() {
                Some(r) => Ok(r.id),
                None => bail!(
                    "no runs in this database yet; start one with `baton demo` or `baton run --objective \"…\" --task \"…\"`"
                ),
            }
        }
    }
}

pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let ctx = context(&cli)?;
    match cli.command {
        Command::Init {
            path,
            workers,
            force,
        } => init(&path, workers, force),
        Command::Demo { line: true, .. } => crate::line::demo(&ctx),
        Command::Demo {
            json,
            replay,
            record,
            line: false,
        } => demo_cmd(&ctx, json, replay.as_deref(), record.as_deref()),
        Command::Run {
            text,
            steps,
            budget,
            max_turns,
            create_only,
            replay,
            record,
        } => {
            // Read before the database is opened: a bad file creates nothing.
            let (objective, tasks) = text.read()?;
            let (mut roster, roster_note) = ctx.roster();
            if let Some(path) = &replay {
                with_replay(&mut roster, path)?;
            }
            let steps = steps.read(tasks.len())?;
            // Every worker checked before the database is even opened (a missing key
            // too, unless only creating: it would stop the run before its first turn).
            baton_engine::orchestrator::check_roster(
                &roster,
                ctx.keys(),
                !create_only,
                baton_engine::orchestrator::Place::Run,
            )?;
            let op = Op::CreateRun {
                objective,
                tasks,
                step_budgets: steps.budgets,
                step_seats: steps.seats,
                step_tags: steps.tags,
                step_scopes: steps.scopes,
                // The configuration's roster is the context's; a replayed one differs.
                roster: match replay {
                    Some(_) => Some(serde_json::to_value(&roster)?),
                    None => None,
                },
                settings: budget.settings(),
            };
            let store = ctx.store()?;
            let engine = ctx.engine(&store);
            signals::install();
            let id = match ops::apply(&engine, &ctx.op_context(), op, &mut |_| {})? {
                OpOutcome::RunCreated { run } => run,
                other => return Err(unexpected(&other)),
            };
            eprintln!("run {id} created in {} ({roster_note})", ctx.db);
            if create_only {
                println!("{id}");
                return Ok(ExitCode::SUCCESS);
            }
            drive(
                &ctx,
                &engine,
                store.as_ref(),
                &id,
                max_turns,
                record.as_deref(),
                None,
            )
        }
        Command::Step { run } => {
            let store = ctx.existing_store()?;
            let engine = ctx.engine(&store);
            let id = resolve_own_run(store.as_ref(), run.as_deref())?;
            let op = Op::Step { run: id.0.clone() };
            match ops::apply(&engine, &ctx.op_context(), op, &mut |_| {})? {
                OpOutcome::Stopped {
                    run,
                    stop,
                    requested,
                } => stopped(store.as_ref(), &run, stop, requested),
                // The turn's line, and the question of a run it blocked, were said by
                // the event stream as they happened (see `live`).
                OpOutcome::Stepped {
                    step: StepOutcome::Turn(summary),
                    status,
                    ..
                } => {
                    if status == baton_store::RunStatus::Blocked {
                        return Ok(Exit::Blocked.into());
                    }
                    Ok(turn_exit(&id, Some(&summary)))
                }
                OpOutcome::Stepped {
                    step: StepOutcome::Finished,
                    ..
                } => {
                    println!(
                        "run {id} is finished: every planned turn has committed. See `baton state {id}`."
                    );
                    Ok(ExitCode::SUCCESS)
                }
                // A run blocked before this step publishes no event: its question is
                // said here; one this step blocks was said by the event stream.
                OpOutcome::Stepped {
                    step: StepOutcome::Blocked { question },
                    was_blocked,
                    ..
                } => {
                    if was_blocked {
                        println!("run {id} is blocked: {question}");
                    }
                    Ok(Exit::Blocked.into())
                }
                other => Err(unexpected(&other)),
            }
        }
        Command::Resume {
            run,
            max_turns,
            record,
            roster,
        } => {
            let store = ctx.existing_store()?;
            let engine = ctx.engine(&store);
            let id = resolve_own_run(store.as_ref(), run.as_deref())?;
            drive(
                &ctx,
                &engine,
                store.as_ref(),
                &id,
                max_turns,
                record.as_deref(),
                roster.as_deref(),
            )
        }
        Command::Runs => {
            let store = ctx.reader()?;
            print!("{}", render::runs(&store.list_runs()?));
            Ok(ExitCode::SUCCESS)
        }
        Command::State { run, json } => {
            let store = ctx.reader()?;
            let id = resolve(store.as_ref(), run.as_deref())?;
            let state = store.load_state(&id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&state)?);
            } else {
                let info = store.run_info(&id)?;
                print!("{}", render::state(&info, &state));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::History { run, json } => {
            let store = ctx.reader()?;
            let id = resolve(store.as_ref(), run.as_deref())?;
            let (report, _, _) = baton_engine::report::build(store.as_ref(), &id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report.turns)?);
            } else {
                print!("{}", render::history(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Handoffs {
            run,
            turn,
            text,
            json,
        } => {
            let store = ctx.reader()?;
            let id = resolve(store.as_ref(), run.as_deref())?;
            let turns = store.turns(&id)?;
            let selected: Vec<_> = turns
                .iter()
                .filter(|t| turn.is_none_or(|n| t.turn == n))
                .collect();
            if let (Some(n), true) = (turn, selected.is_empty()) {
                bail!("run {id} has no turn {n} (it has {} turns)", turns.len());
            }
            if json {
                let packages: Vec<_> = selected.iter().map(|t| &t.package).collect();
                println!("{}", serde_json::to_string_pretty(&packages)?);
            } else {
                for t in selected {
                    print!("{}", render::package(&t.package, Some(t), text));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tasks { run } => {
            let store = ctx.reader()?;
            let id = resolve(store.as_ref(), run.as_deref())?;
            print!("{}", render::tasks(&store.load_state(&id)?));
            Ok(ExitCode::SUCCESS)
        }
        Command::Workers { run, verify } => workers(&ctx, run.as_deref(), verify),
        Command::Pools { json } => crate::pools::list(&ctx, json),
        Command::Pool { action } => match action {
            crate::PoolAction::Bench { pool, reason } => {
                crate::pools::bench_pool(&ctx, &pool, true, reason)
            }
            crate::PoolAction::Unbench { pool } => {
                crate::pools::bench_pool(&ctx, &pool, false, None)
            }
            crate::PoolAction::Usage(args) => crate::pools::declare_usage(&ctx, &args),
        },
        Command::Route { seat, tags, json } => crate::pools::route(&ctx, &seat, &tags, json),
        Command::Line {
            description,
            route,
            check,
            resume,
            status,
            repo,
            base,
            gates,
            merge,
            json,
        } => match (status, resume) {
            (Some(unit), _) => {
                crate::line::status(&ctx, Some(unit.as_str()).filter(|u| !u.is_empty()), json)
            }
            (None, Some(unit)) => crate::line::resume(&ctx, &unit),
            (None, None) => {
                let workspace = crate::line::InRepo {
                    repo,
                    base,
                    gates,
                    merge,
                };
                crate::line::line(
                    &ctx,
                    description.as_deref(),
                    &route,
                    check,
                    json,
                    &workspace,
                )
            }
        },
        Command::Answer { unit, answer } => crate::line::answer(&ctx, &unit, &answer),
        Command::Seats { run, json } => crate::seats::seats(&ctx, run.as_deref(), json),
        Command::Pins(args) => crate::seats::pins(&ctx, &args),
        Command::Worker { action } => match action {
            crate::WorkerAction::Bench { worker, reason } => {
                crate::pools::bench_worker(&ctx, &worker, true, reason)
            }
            crate::WorkerAction::Unbench { worker } => {
                crate::pools::bench_worker(&ctx, &worker, false, None)
            }
        },
        Command::Compile {
            run,
            worker,
            budget,
            json,
        } => {
            let store = ctx.reader()?;
            let engine = Engine::new(store.clone());
            let id = resolve(store.as_ref(), run.as_deref())?;
            let session = engine.open_for_preview(&id)?;
            let package = engine.preview(&session, worker.as_deref(), budget)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&package)?);
            } else {
                print!("{}", render::package(&package, None, true));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { run, format, out } => {
            let store = ctx.reader()?;
            let id = resolve(store.as_ref(), run.as_deref())?;
            let text = match format {
                ExportFormat::Json => export::json(store.as_ref(), &id)?,
                ExportFormat::Md => export::markdown(store.as_ref(), &id)?,
                ExportFormat::Script => export::script(store.as_ref(), &id)?,
                ExportFormat::Events => export::events(store.as_ref(), &id, ctx.verbose)?,
                ExportFormat::EventsJsonl => export::events_jsonl(store.as_ref(), &id)?,
                ExportFormat::Archive => export::archive(store.as_ref(), &id)?,
            };
            match out {
                Some(path) => {
                    std::fs::write(&path, text)
                        .with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("wrote {}", path.display());
                }
                None => {
                    let mut stdout = std::io::stdout().lock();
                    // A closed pipe (`| head`) is not an error worth reporting.
                    let _ = stdout.write_all(text.as_bytes());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            fidelity: true,
            estimator,
            ..
        } => bench_fidelity(estimator),
        Command::Bench {
            turns,
            estimator,
            budget,
            ..
        } => bench(&turns, estimator, budget),
        Command::Import { file } => crate::import::import(&ctx, &file),
        Command::Enqueue(args) => crate::jobs::enqueue(&ctx, args),
        Command::Work {
            concurrency,
            lease_s,
            follow,
            poll_ms,
        } => crate::jobs::work(&ctx, concurrency, lease_s, follow, poll_ms),
        Command::Serve {
            bind,
            token,
            poll_ms,
        } => crate::serve::serve(ctx, bind, token, poll_ms.map(Duration::from_millis)),
        Command::Mcp => crate::serve::mcp::stdio(ctx),
        Command::Jobs { json } => crate::jobs::list(&ctx, json),
        Command::Requeue { job, roster } => requeue(&ctx, &job, roster.as_deref()),
        Command::Cancel {
            id,
            worker_process,
            wait_s,
            no_wait,
        } => crate::cancel::cancel(
            &ctx,
            id.as_deref(),
            worker_process.as_deref(),
            (!no_wait).then(|| Duration::from_secs(wait_s)),
        ),
        Command::Outbox { job, json } => crate::jobs::outbox(&ctx, job.as_deref(), json),
        Command::Judge { target, judge } => crate::jobs::judge(&ctx, &target, judge.as_deref()),
        Command::Gc {
            repo,
            worktrees,
            keep,
            idle_hours,
        } => crate::jobs::gc(&ctx, &repo, worktrees.as_deref(), keep, idle_hours),
        Command::Migrate => migrate(&ctx),
    }
}

/// `baton migrate`: what the database was, and what it is now.
fn migrate(ctx: &Context_) -> Result<ExitCode> {
    let baton_store::Migrated { from, to } = ctx.db.migrate()?;
    let db = &ctx.db;
    if from == 0 {
        println!("created the baton schema (version {to}) in {db}");
    } else if from == to {
        println!("{db} is already at schema version {to}; nothing to do");
    } else {
        println!("upgraded {db} from schema version {from} to {to}");
    }
    Ok(ExitCode::SUCCESS)
}

fn init(path: &Path, workers: usize, force: bool) -> Result<ExitCode> {
    if path.exists() && !force {
        bail!(
            "{} already exists; pass --force to overwrite it",
            path.display()
        );
    }
    std::fs::write(path, config::scaffold(workers))
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "wrote {} with {} offline mock workers; edit it, then `baton run --objective \"…\" --task \"…\"`",
        path.display(),
        workers.max(1)
    );
    Ok(ExitCode::SUCCESS)
}

/// The run `resume` and `step` act on: the one named (the engine refuses a job's
/// run, which continues only in its worktree, through `baton work`), or the newest that
/// is not a job's.
fn resolve_own_run(store: &dyn Store, run: Option<&str>) -> Result<RunId> {
    if let Some(prefix) = run {
        return Ok(store.resolve_run(prefix)?);
    }
    let jobs = store.list_jobs()?;
    let runs = store.list_runs()?;
    let own = runs
        .iter()
        .find(|r| !jobs.iter().any(|j| j.run_id.as_ref() == Some(&r.id)));
    match own {
        Some(r) => Ok(r.id.clone()),
        None if runs.is_empty() => bail!(
            "no runs in this database yet; start one with `baton demo` or `baton run --objective \"…\" --task \"…\"`"
        ),
        None => bail!(
            "every run in this database belongs to a job; jobs continue with `baton work` (`baton jobs` lists them)"
        ),
    }
}

/// An outcome of another op than the one applied: a bug.
fn unexpected(outcome: &OpOutcome) -> anyhow::Error {
    baton_engine::Error::Internal {
        place: "the CLI's op",
        detail: format!("unexpected outcome {outcome:?}"),
    }
    .into()
}

/// `--roster FILE` of `requeue`: the job's run's roster replaced, the change said and
/// recorded. Returns the file's roster with the keys to use.
fn replace_roster(
    ctx: &Context_,
    engine: &Engine,
    id: &RunId,
    path: &Path,
    place: baton_engine::orchestrator::Place,
) -> Result<baton_engine::Roster> {
    let roster = roster_from(path)?;
    let (changes, keys) =
        engine.replace_roster(id, roster, ctx.keys(), &path.display().to_string(), place)?;
    if changes.is_empty() {
        say_same_roster(path);
    }
    // Each change is said by the event stream (see `live`).
    Ok(keys)
}

fn say_same_roster(path: &Path) {
    eprintln!(
        "the roster in {} is the run's roster already",
        path.display()
    );
}

fn roster_from(path: &Path) -> Result<baton_engine::Roster> {
    let file = config::load_file(path)?;
    for warning in &file.warnings {
        eprintln!("warning: {warning}");
    }
    file.roster.with_context(|| {
        format!(
            "{} has no [[workers]]: nothing to replace the roster with",
            path.display()
        )
    })
}

/// A run stopped by Ctrl-C or `baton cancel` (`requested`): says what was kept and
/// how to continue, and returns the exit status.
fn stopped(store: &dyn Store, id: &RunId, stop: Stop, requested: bool) -> Result<ExitCode> {
    let what = match stop {
        Stop::InFlight { turn } => {
            format!("turn {turn} was in flight and is discarded (nothing of it is committed)")
        }
        Stop::BeforeTurn { next_turn } => format!("stopped before turn {next_turn}"),
    };
    let (how, code) = match crate::signals::exit_code() {
        Some(code) => ("interrupted", code),
        None if requested => (
            "cancelled (`baton cancel`)",
            ExitCode::from(crate::cancel::EXIT_CANCELLED),
        ),
        None => return Err(baton_engine::Error::from(stop).into()),
    };
    let turns = store.run_info(id).map(|i| i.turns).unwrap_or(0);
    eprintln!(
        "{how}: {what}; {turns} turn(s) of run {id} are committed and its lease is released. Continue with `baton resume {id}`."
    );
    Ok(code)
}

pub(crate) fn requeue(ctx: &Context_, job: &str, roster: Option<&Path>) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    let id = store.resolve_job(job)?;
    let info = store.job(&id)?;
    // Refused before anything changes: a running job's run must not get a roster its
    // worker never uses.
    if !matches!(
        info.status,
        baton_store::JobStatus::Failed | baton_store::JobStatus::Cancelled
    ) {
        return Err(baton_store::Error::JobNotRequeueable {
            job: id,
            status: info.status.as_str(),
        }
        .into());
    }
    if let Some(path) = roster {
        let Some(run) = &info.run_id else {
            bail!(
                "job {id} never started, so it has no run whose roster to replace; enqueue it again with the fixed roster"
            );
        };
        let engine = ctx.engine(&store);
        let keys = replace_roster(
            ctx,
            &engine,
            run,
            path,
            baton_engine::orchestrator::Place::Job,
        )?;
        if keys.workers.iter().any(|w| w.api_key.is_some()) && ctx.keys().is_none() {
            eprintln!(
                "note: literal keys are never stored; `baton work` gets them from its --config file (or use api_key_env)"
            );
        }
    }
    store.requeue_job(&id, baton_engine::Clock::now(&baton_engine::SystemClock))?;
    println!(
        "job {id} is queued again; `baton work` continues it from its last committed turn{}",
        info.run_id
            .map(|r| format!(" (run {r})"))
            .unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

fn drive(
    ctx: &Context_,
    engine: &Engine,
    store: &dyn Store,
    id: &RunId,
    max_turns: Option<u32>,
    record: Option<&Path>,
    roster: Option<&Path>,
) -> Result<ExitCode> {
    let mut context = ctx.op_context();
    let new_roster = match roster {
        Some(path) => {
            let file = roster_from(path)?;
            // The file's literal keys (never stored, so not in the op), else the
            // configuration's.
            context.keys = Some(match ctx.keys() {
                Some(k) => baton_engine::orchestrator::with_keys(file.clone(), k),
                None => file.clone(),
            });
            Some(NewRoster {
                roster: serde_json::to_value(&file)?,
                source: path.display().to_string(),
            })
        }
        None => None,
    };
    let op = Op::Resume {
        run: id.0.clone(),
        max_turns,
        roster: new_roster,
    };
    let started = Instant::now();
    let applied = ops::apply(engine, &context, op, &mut |s| {
        if let Started::Resuming {
            run,
            was_blocked,
            roster_changes,
        } = s
        {
            // Each change is said by the event stream (see `live`).
            if let (Some([]), Some(path)) = (roster_changes, roster) {
                say_same_roster(path);
            }
            if was_blocked {
                eprintln!("run {run} was blocked; resuming as asked");
            }
        }
    });
    // Record what ran even when the run stopped on an error.
    if let Some(path) = record {
        write_record(store, id, path)?;
    }
    let (end, last) = match applied? {
        OpOutcome::Stopped {
            run,
            stop,
            requested,
        } => return stopped(store, &run, stop, requested),
        OpOutcome::Resumed { end, last, .. } => (end, last),
        other => return Err(unexpected(&other)),
    };
    let (report, state, _) = baton_engine::report::build(store, id)?;
    print!(
        "{}",
        render::run_summary(&report, &state, started.elapsed())
    );
    // Each turn's line was said by the event stream (see `live`).
    Ok(match end {
        RunEnd::Finished => turn_exit(id, last.as_deref()),
        RunEnd::Paused => {
            println!(
                "paused after {} turns as asked; continue with `baton resume {id}`",
                max_turns.unwrap_or(0)
            );
            turn_exit(id, last.as_deref())
        }
        // The question was said once, by the event stream, when the run blocked (a
        // run blocked before is unblocked first, so every block here published one).
        RunEnd::Blocked { .. } => Exit::Blocked.into(),
    })
}

/// Success, or `EXIT_TURN_FAILED` (said on stderr) when the last turn this command
/// ran failed or left its step open for want of evidence of work.
fn turn_exit(id: &RunId, last: Option<&TurnSummary>) -> ExitCode {
    match last {
        Some(turn) if turn.status == TurnStatus::Failed => {
            eprintln!(
                "turn {} failed (recorded; exit status {}): `baton history {id}` shows why; `baton step {id}` or `baton resume {id}` tries again",
                turn.turn,
                Exit::TurnFailed as u8
            );
            Exit::TurnFailed.into()
        }
        Some(turn) if turn.step_left_open => {
            eprintln!(
                "turn {} left step {} open: no evidence of work (recorded; exit status {}): `baton history {id}` shows what the worker said; `baton step {id}` or `baton resume {id}` tries again",
                turn.turn,
                turn.assignment.step_id.as_deref().unwrap_or("?"),
                Exit::TurnFailed as u8
            );
            Exit::TurnFailed.into()
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Writes every model response of the run as a replay script.
fn write_record(store: &dyn Store, id: &RunId, path: &Path) -> Result<()> {
    let script = export::script(store, id)?;
    std::fs::write(path, script).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "recorded every model response of run {id} in {} (replay with --replay)",
        path.display()
    );
    Ok(())
}

/// Points every worker at a recorded script.
fn with_replay(roster: &mut Roster, path: &Path) -> Result<()> {
    if !path.exists() {
        return Err(exit::config(format!(
            "replay file {} does not exist; record one with `baton export RUN --format script --out {}`",
            path.display(),
            path.display()
        )));
    }
    for w in &mut roster.workers {
        w.options.insert(
            "replay".into(),
            serde_json::Value::String(path.display().to_string()),
        );
    }
    Ok(())
}

fn demo_cmd(
    ctx: &Context_,
    json: bool,
    replay: Option<&Path>,
    record: Option<&Path>,
) -> Result<ExitCode> {
    let store = ctx.store()?;
    let engine = ctx.engine(&store);
    let started = Instant::now();
    let mut spec = demo::spec();
    if let Some(path) = replay {
        with_replay(&mut spec.roster, path)?;
    }
    let id = engine.create_run(&spec)?;
    let mut session = engine.open(&id, None)?;
    let end = engine.run(&mut session, None, &mut |_, _| {})?;
    let elapsed = started.elapsed();
    if let Some(path) = record {
        write_record(store.as_ref(), &id, path)?;
    }
    let (report, state, turns) = baton_engine::report::build(store.as_ref(), &id)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            render::demo(&report, &state, &turns, &ctx.db, elapsed)
        );
    }
    Ok(if end == RunEnd::Finished {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn workers(ctx: &Context_, run: Option<&str>, verify: bool) -> Result<ExitCode> {
    // With a run (named, or the newest when there is no roster file) show its roster
    // and who took which turns; otherwise the configured roster.
    // Without a database there is no run to show, but the configured roster still is.
    let store = match run {
        Some(_) => Some(ctx.reader()?),
        None => ctx.try_reader()?,
    };
    let id = match (&store, run) {
        (Some(store), Some(p)) => Some(store.resolve_run(p)?),
        (Some(store), None) if ctx.config_path.is_none() => {
            store.list_runs()?.into_iter().next().map(|r| r.id)
        }
        _ => None,
    };
    let (mut roster, state, note) = match store.zip(id) {
        Some((store, id)) => {
            let engine = Engine::new(store.clone());
            let session = engine.open_for_preview(&id)?;
            (
                session.config.roster,
                Some(session.state),
                format!("run {id}"),
            )
        }
        None => {
            let (roster, note) = ctx.roster();
            (roster, None, note)
        }
    };
    if let Some(keys) = ctx.keys() {
        for w in &mut roster.workers {
            if w.api_key.is_none() {
                w.api_key = keys
                    .workers
                    .iter()
                    .find(|k| k.id == w.id)
                    .and_then(|k| k.api_key.clone());
            }
        }
    }
    print!("{}", render::workers(&roster, state.as_ref(), &note));
    if !verify {
        return Ok(ExitCode::SUCCESS);
    }
    println!("\nverifying (one tiny call per enabled worker):");
    // The worst failure decides the status: a configuration fault before a provider's.
    let mut failed: Option<Exit> = None;
    let budget = ctx.settings(&BudgetArgs::default()).budget;
    for w in roster.workers.iter().filter(|w| w.enabled) {
        let verdict = baton_engine::verify::verify_worker(w, budget);
        if let Some(class) = &verdict.class {
            let this = exit::class(class);
            if failed != Some(Exit::Config) {
                failed = Some(this);
            }
        }
        println!("  {:<16} {}", w.id.as_str(), verdict.message);
        if let Some(context) = verdict.context {
            println!("  {:<16} {context}", "");
        }
    }
    Ok(failed.map_or(ExitCode::SUCCESS, ExitCode::from))
}

fn bench(turns: &[u32], estimator: EstimatorKind, budget: usize) -> Result<ExitCode> {
    let dir = tempfile_dir()?;
    let mut rows = Vec::new();
    for &n in turns {
        if n == 0 {
            bail!("--turns values must be at least 1");
        }
        eprintln!("running {n} turns…");
        rows.push(baton_engine::bench::run_one(&dir, n, estimator, budget)?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    print!("{}", render::bench(&rows, estimator.name()));
    Ok(ExitCode::SUCCESS)
}

fn bench_fidelity(estimator: EstimatorKind) -> Result<ExitCode> {
    let est = estimator.build();
    let mut rows = Vec::new();
    for case in baton_core::fidelity::standard_cases() {
        eprintln!(
            "running {} turns, {} steps, budget {}, {} extra records per turn…",
            case.turns, case.steps, case.budget, case.volume
        );
        rows.push(baton_core::fidelity::run(&case, &*est));
    }
    print!("{}", render::fidelity(&rows, est.name()));
    Ok(ExitCode::SUCCESS)
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("baton-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
