//! `baton`: run long work through many models, one bounded briefing at a time.

// First: its macros shadow std's printing macros in every module below.
#[macro_use]
mod out;

mod cancel;
mod commands;
mod exit;
mod import;
mod input;
mod jobs;
mod line;
mod live;
mod logs;
mod pools;
mod render;
mod seats;
mod serve;
mod signals;

use std::path::PathBuf;
use std::process::ExitCode;

use baton_core::tokens::EstimatorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "baton",
    version,
    about = "Run long AI work through many models and agents: typed state, compiled briefings, reconciled claims, durable turns."
)]
pub struct Cli {
    /// Database: an SQLite file (a path, sqlite://PATH or file:PATH) or a PostgreSQL
    /// server (postgres://[USER@]HOST[:PORT]/DATABASE[?schema=NAME], schema default
    /// "baton") [default: .baton/baton.db]
    #[arg(long, global = true, env = "BATON_DB")]
    pub db: Option<PathBuf>,
    /// Configuration and roster file (TOML or JSON) [default: baton.toml if present]
    #[arg(long, global = true, env = "BATON_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print every model call (worker, status, tokens, retries) on stderr
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone, Default)]
pub struct BudgetArgs {
    /// Token budget per briefing [default: 2000]
    #[arg(long, env = "BATON_BUDGET")]
    pub budget: Option<usize>,
    /// Token budget for the whole plan, split across steps (later steps get more)
    #[arg(long, env = "BATON_TOTAL_BUDGET")]
    pub total_budget: Option<usize>,
    /// Token estimator: bpe (real o200k tokenizer, offline) or heuristic
    #[arg(long, env = "BATON_ESTIMATOR")]
    pub estimator: Option<EstimatorKind>,
}

impl BudgetArgs {
    /// The flags given, for an op (what is unset is the configuration's).
    pub fn settings(&self) -> baton_protocol::Settings {
        baton_protocol::Settings {
            budget: self.budget,
            total_budget: self.total_budget,
            estimator: self.estimator,
        }
    }
}

/// What `baton export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The whole record
    Json,
    /// A readable report
    #[value(alias = "markdown")]
    Md,
    /// A JSONL replay script
    #[value(alias = "jsonl")]
    Script,
    /// The run's event stream, rendered as the CLI shows it live (`-v` adds call lines)
    Events,
    /// The run's event stream, one JSON event per line
    EventsJsonl,
    /// Every stored row of the run (baton-archive/1), for `baton import` into another
    /// database
    Archive,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the built-in demonstration: five offline mock workers, a SQLite file
    Demo {
        /// Print the summary as JSON
        #[arg(long)]
        json: bool,
        /// Replay recorded responses instead of the built-in mock answers
        #[arg(long)]
        replay: Option<PathBuf>,
        /// Save every model response as a replay script (JSONL)
        #[arg(long)]
        record: Option<PathBuf>,
        /// Run the assembly line's default route instead: a unit with offline mock
        /// workers of three families, then its stations, pins, checkpoints, review and verdict
        #[arg(long, conflicts_with_all = ["json", "replay", "record"])]
        line: bool,
    },
    /// Write a starter roster file (baton.toml)
    Init {
        /// Where to write it
        #[arg(long, default_value = "baton.toml")]
        path: PathBuf,
        /// Number of workers to scaffold
        #[arg(long, default_value_t = 3)]
        workers: usize,
        /// Overwrite an existing file
        #[arg(long)]
        force: bool,
    },
    /// Start a run of your own plan and run it to the end
    Run {
        #[command(flatten)]
        text: input::WorkText,
        #[command(flatten)]
        steps: input::StepArgs,
        #[command(flatten)]
        budget: BudgetArgs,
        /// Stop after this many turns (continue later with `baton resume`)
        #[arg(long)]
        max_turns: Option<u32>,
        /// Create the run without running any turn
        #[arg(long)]
        create_only: bool,
        /// Replay recorded responses (from `--record` or `baton export --format script`)
        /// instead of calling the models; workers keep their identities
        #[arg(long)]
        replay: Option<PathBuf>,
        /// Save every model response as a replay script (JSONL)
        #[arg(long)]
        record: Option<PathBuf>,
    },
    /// Advance a run by exactly one turn
    Step {
        /// Run id or unambiguous prefix [default: the newest run]
        run: Option<String>,
    },
    /// Continue a persisted run from its last committed turn
    Resume {
        /// Run id or unambiguous prefix [default: the newest run]
        run: Option<String>,
        /// Stop after this many turns
        #[arg(long)]
        max_turns: Option<u32>,
        /// Save every model response of the run as a replay script (JSONL)
        #[arg(long)]
        record: Option<PathBuf>,
        /// Replace the run's roster with this file's (a fixed model, provider or base
        /// URL); recorded in the run's history
        #[arg(long)]
        roster: Option<PathBuf>,
    },
    /// Stop a run, a job or a whole `baton work` from another shell, within a second;
    /// nothing half-done is committed
    Cancel {
        /// Run or job id (or unambiguous prefix)
        #[arg(
            required_unless_present = "worker_process",
            conflicts_with = "worker_process"
        )]
        id: Option<String>,
        /// Stop a whole `baton work` process: the owner name its leases carry
        /// (`pid-<pid>@<host>#<space>`, shown by `baton jobs` and when `baton work`
        /// starts)
        #[arg(long)]
        worker_process: Option<String>,
        /// Wait this long for it to stop (its lease released, the job ended, the
        /// process gone); still running after that exits 8 and says what to do
        #[arg(long, default_value_t = cancel::DEFAULT_WAIT_S)]
        wait_s: u64,
        /// Ask and return at once, without waiting for it to stop
        #[arg(long, conflicts_with = "wait_s")]
        no_wait: bool,
    },
    /// Put a failed or cancelled job back on the queue; it continues from its last
    /// committed turn
    Requeue {
        /// Job id or unambiguous prefix
        job: String,
        /// Replace the job's roster with this file's (recorded in its run's history)
        #[arg(long)]
        roster: Option<PathBuf>,
    },
    /// List the runs in the database
    Runs,
    /// Show a run's canonical state
    State {
        run: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show every turn: worker, assignment, status, tokens, refusals and warnings
    History {
        run: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show each compiled briefing, with what did not fit
    Handoffs {
        run: Option<String>,
        /// Only this turn
        #[arg(long)]
        turn: Option<u32>,
        /// Print the full briefing text
        #[arg(long)]
        text: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show the plan's steps and who completed them
    Tasks { run: Option<String> },
    /// Show the roster (of a run, or of the configuration file) with each credential's status
    Workers {
        run: Option<String>,
        /// Make one tiny call per worker and report what each provider said
        #[arg(long)]
        verify: bool,
    },
    /// Each pool: allowance, used and headroom in its current window, when it resets
    /// (from the configuration's [[pools]] and the usage in the database)
    Pools {
        #[arg(long)]
        json: bool,
    },
    /// Bench a pool (take it off the floor) or put it back; declare usage done outside baton
    Pool {
        #[command(subcommand)]
        action: PoolAction,
    },
    /// Dry run of the router: who would take SEAT now, every other worker's reason, from
    /// the configured pools, seats and roster and the database's usage and benches
    Route {
        /// A seat name (`review.deep-rounds`, `checkpoint.find`, …)
        seat: String,
        /// The step's tags, read against the seat's deny_tags
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// The assembly line: a unit of work through a route's stations (intake, discovery,
    /// plan, build with checkpoints, review, synthesis, gates, merge); `--check`
    /// validates a route
    Line {
        /// What the unit of work is: runs it through the route's stations
        description: Option<String>,
        /// The route: `default` (built in) or a route file (TOML)
        #[arg(long, default_value = "default")]
        route: String,
        /// Validate the route (and, with a configuration's workers, who can take each seat)
        #[arg(long)]
        check: bool,
        /// Continue a unit (after a crash, a kill, an interrupt) from its last committed turn
        #[arg(long, value_name = "UNIT", conflicts_with_all = ["description", "check"])]
        resume: Option<String>,
        /// Where a unit is: its station, round, plan lock, verdicts, findings, question
        #[arg(long, value_name = "UNIT", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["description", "check", "resume"])]
        status: Option<String>,
        /// Work in this git repository: the unit gets a worktree and branch of its own,
        /// each turn is a commit there, and the outbox gets the patch and a report
        #[arg(long, value_name = "PATH")]
        repo: Option<std::path::PathBuf>,
        /// With --repo: the commit or branch the unit starts from [default: HEAD]
        #[arg(long, requires = "repo")]
        base: Option<String>,
        /// With --repo: a gate the gate station runs, `name=command` or just `command` (repeat)
        #[arg(long = "gate", requires = "repo")]
        gates: Vec<String>,
        /// With --repo: the merge station lands the branch on the base branch (a final
        /// drift check, then a fast-forward, or a merge commit when the base moved on
        /// other files); refused with the reason otherwise (exit 3)
        #[arg(long, requires = "repo")]
        merge: bool,
        #[arg(long)]
        json: bool,
    },
    /// Answer the question a unit of the assembly line stopped on (a decision by `human`)
    Answer {
        /// The unit (a run id or a unique prefix)
        unit: String,
        /// What the human decided
        answer: String,
    },
    /// Who holds each seat of a routed run now, since when and why (its latest pins)
    Seats {
        run: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The pin log: every seating of a run (or of every run), and why
    Pins(seats::PinsArgs),
    /// Bench one worker (take it off the floor) or put it back
    Worker {
        #[command(subcommand)]
        action: WorkerAction,
    },
    /// Compile the briefing a worker would get now, without running it
    Compile {
        run: Option<String>,
        /// Worker id [default: the worker the policy picks next]
        #[arg(long)]
        worker: Option<String>,
        /// Budget in tokens [default: the next turn's planned budget]
        #[arg(long)]
        budget: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Export a run: json (the whole record), md (a readable report), script (JSONL replay),
    /// events (its event stream as `baton run` printed it; with -v every call too),
    /// events-jsonl (the stream, one event a line) or archive (every stored row, for
    /// `baton import`)
    Export {
        run: Option<String>,
        #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
        format: ExportFormat,
        /// Write to this file instead of standard output
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Import a run from an archive (`baton export RUN --format archive`) into the
    /// database, in one transaction: to move it between SQLite and PostgreSQL
    Import {
        /// The archive file (`-`: standard input)
        file: PathBuf,
    },
    /// Queue work for coding agents: one job per --worker (candidate), each in its own worktree
    Enqueue(jobs::EnqueueArgs),
    /// Claim queued jobs and run them, each in its own git worktree
    Work {
        /// Jobs to run at once
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Seconds a claim holds without a heartbeat (a killed worker's jobs are
        /// reclaimed after this)
        #[arg(long, default_value_t = 30)]
        lease_s: u64,
        /// Keep waiting for new jobs instead of stopping when the queue is empty (and
        /// outlive a database that is briefly away, retrying with backoff)
        #[arg(long)]
        follow: bool,
        /// With --follow, how often an idle worker looks for claimable jobs; on
        /// PostgreSQL a new job wakes it at once (LISTEN/NOTIFY), this is the fallback
        #[arg(long, default_value_t = 1000, requires = "follow")]
        poll_ms: u64,
    },
    /// Jobs: queued, running, in the outbox, judged, with progress
    Jobs {
        #[arg(long)]
        json: bool,
    },
    /// Finished jobs: branch, commits, diff summary, gate results, patch
    Outbox {
        /// A job id or prefix [default: every finished job]
        job: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Blind comparison of a group's candidates against the rubric fixed at enqueue
    Judge {
        /// A group id, or any job of the group
        target: String,
        /// The judging worker (a roster id) [default: the first roster worker]
        #[arg(long)]
        judge: Option<String>,
    },
    /// Create or upgrade the database (an SQLite file or a PostgreSQL schema) to this
    /// build's schema, and say what was done; every writing command also does this itself
    Migrate,
    /// Remove worktrees of finished jobs (never one with uncommitted changes)
    Gc {
        /// The repository [default: the current directory]
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// Worktree directory [default: <repo>/.baton/worktrees]
        #[arg(long)]
        worktrees: Option<PathBuf>,
        /// Keep this many most recent finished worktrees
        #[arg(long, default_value_t = 5)]
        keep: usize,
        /// Keep worktrees touched in the last this many hours
        #[arg(long, default_value_t = 24)]
        idle_hours: u64,
    },
    /// Serve the dashboard, the HTTP API (/api/…), its live event stream
    /// (/api/events) and the MCP server (/mcp) on one port; prints the URL
    Serve {
        /// Where to listen; an address other than loopback needs --token
        #[arg(long, default_value = "127.0.0.1:7878")]
        bind: std::net::SocketAddr,
        /// Required of every API, event stream and MCP request (as `Authorization:
        /// Bearer TOKEN`; the page is opened once at /?token=TOKEN)
        #[arg(long, env = "BATON_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// How often the live event stream reads the database for new events while a
        /// client is connected, in milliseconds [default: 10 on SQLite; 1000 on
        /// PostgreSQL, where commits are also announced with NOTIFY]
        #[arg(long, env = "BATON_SERVE_POLL_MS", value_parser = clap::value_parser!(u64).range(1..))]
        poll_ms: Option<u64>,
    },
    /// The MCP server over stdio, for a coordinator agent (Claude Code, Codex, any MCP
    /// client) to start and follow units and runs, answer their questions, queue and
    /// judge jobs, and bench pools; stdout carries the protocol only
    Mcp,
    /// Measure tokens sent against transcript replay, and engine speed
    Bench {
        /// Run lengths to measure
        #[arg(long, value_delimiter = ',', default_value = "5,20,100")]
        turns: Vec<u32>,
        /// Token estimator for the measurement (the default is the runs' default)
        #[arg(long, value_enum, default_value_t = EstimatorKind::Bpe)]
        estimator: EstimatorKind,
        /// Tokens per package (the reference engine's figure is quoted at 3,000; a run's
        /// default is 2,000)
        #[arg(long, default_value_t = baton_engine::bench::BENCH_BUDGET)]
        budget: usize,
        /// Measure handoff fidelity instead: 100-turn offline runs (plans of 10 and 40
        /// steps, budgets 300 to 3,000, up to 10,000 records) and the share of relevant
        /// records each briefing delivered, per category
        #[arg(long)]
        fidelity: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PoolAction {
    /// Take a pool off the floor: recorded with who and when
    Bench {
        /// A pool id from [[pools]]
        pool: String,
        /// Why, for whoever reads `baton pools` later
        #[arg(long)]
        reason: Option<String>,
    },
    /// Put a benched pool back on the floor
    Unbench {
        /// A pool id from [[pools]]
        pool: String,
    },
    /// Declare usage of work done outside baton (added to the current window), or with
    /// --set what the provider's dashboard shows for the window so far
    Usage(UsageArgs),
}

#[derive(Args, Debug)]
pub struct UsageArgs {
    /// A pool id from [[pools]]
    pub pool: String,
    #[arg(long)]
    pub tokens: Option<u64>,
    /// US dollars
    #[arg(long)]
    pub usd: Option<f64>,
    #[arg(long)]
    pub requests: Option<u64>,
    /// The numbers are the window's total so far (replacing what baton counted before
    /// now), not an addition
    #[arg(long)]
    pub set: bool,
    /// Where the numbers come from
    #[arg(long)]
    pub note: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum WorkerAction {
    /// Take a worker off the floor: recorded with who and when
    Bench {
        /// A worker id from the roster
        worker: String,
        /// Why, for whoever reads it later
        #[arg(long)]
        reason: Option<String>,
    },
    /// Put a benched worker back on the floor
    Unbench {
        /// A worker id from the roster
        worker: String,
    },
}

fn main() -> ExitCode {
    // SIGPIPE stays ignored (Rust's default): see `out` for why and how `| head` still
    // ends quietly.
    let cli = Cli::parse();
    if matches!(cli.command, Command::Work { .. }) {
        // Before any thread starts: the watchdog is a fork of this process, and kills
        // what the agents and gates started if baton dies without cleaning up.
        baton_gateway::contain::start_watchdog();
        logs::init();
    }
    // `run` installs them itself once its input is read: an objective read from a
    // stdin that never ends must still stop at the first Ctrl-C.
    if matches!(
        cli.command,
        Command::Work { .. }
            | Command::Resume { .. }
            | Command::Step { .. }
            | Command::Serve { .. }
            | Command::Mcp
    ) {
        signals::install();
    }
    // A panic is a bug: its own exit status, after the panic message.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commands::dispatch(cli)));
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            match exit::of(&e) {
                // Stopped by Ctrl-C or SIGTERM: the status a shell gives that signal.
                exit::Exit::Cancelled => {
                    signals::exit_code().unwrap_or(exit::Exit::Cancelled.into())
                }
                other => other.into(),
            }
        }
        Err(_) => exit::Exit::Internal.into(),
    }
}
