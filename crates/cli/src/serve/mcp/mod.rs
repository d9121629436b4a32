//! The MCP server for coordinator agents: `baton mcp` over stdio, and `/mcp` under
//! `baton serve` over streamable HTTP (behind the same guard as the API). Each tool
//! calls what the HTTP API calls (the [`App`]'s methods, the CLI's line, pools and
//! seats functions, the engine's ops), so a unit started here is the unit
//! `baton line --status` shows.
//!
//! A tool answers with one or two lines of text and the same facts as structured
//! content; a failure is a tool error (`is_error`) whose text is the CLI's message,
//! which says what to do next.
//!
//! Long work (a unit, a run's resume) runs on a thread of its own, as the API's does;
//! the tool waits for it up to `wait_seconds` (default [`DEFAULT_WAIT`]) and then
//! answers either with where it stopped or with `running: true`, to be polled with
//! `unit_status` (or `state`) and `wait_seconds`. An offline unit ends within the
//! first wait; a unit of real models is followed a wait at a time, and no MCP client's
//! request timeout is reached on the way. Over stdio the work lives as long as the
//! session (see [`stdio`]); under `baton serve`, as long as the server.

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use axum::http::StatusCode;
use baton_core::ids::RunId;
use baton_protocol::Op;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use super::App;
use super::api::{ApiError, blocking, outcome_json};
use args::*;
use say::{say_outcome, say_unit};

mod args;
mod say;

/// How long a tool waits for a unit or a run it advances before it answers that the
/// work goes on [seconds].
const DEFAULT_WAIT: u64 = 30;
/// The longest wait a call may ask for: MCP clients give up on a request after a few
/// minutes (the Python SDK's streamable HTTP client reads for 300 s at most).
const MAX_WAIT: u64 = 240;

const INSTRUCTIONS: &str = "baton runs long work through many models, one bounded briefing at a time. \
Assembly-line units: start_unit (waits up to wait_seconds, then poll unit_status), answer when a unit stops with a question. \
Plain runs: create_run, then step or resume; state shows the canonical record, compile_briefing what a worker would be given. \
Jobs in git worktrees: enqueue, then `baton work` runs them; jobs, outbox, judge. Pools and seats: pools, bench_pool, unbench_pool, seats. \
Ids may be given as unique prefixes; runs lists them.";

/// The MCP tools over one [`App`].
#[derive(Clone)]
pub(crate) struct Tools {
    app: Arc<App>,
    tool_router: ToolRouter<Tools>,
}

/// What a tool answers: its text and its structured content, or a tool error.
type Answer = Result<CallToolResult, rmcp::ErrorData>;

fn answer(text: impl Into<String>, structured: Value) -> Answer {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    Ok(result)
}

/// A failure as a tool error: the CLI's message (it says what to do next), with where
/// to look over MCP when something named is not there.
fn failed(e: ApiError) -> Answer {
    let mut message = e.message;
    match e.code {
        "not_found" => {
            message.push_str(" (over MCP: the `runs` tool lists runs and units, `jobs` the jobs)")
        }
        "busy" => message.push_str(
            " (over MCP: `unit_status` or `state` with `wait_seconds` follows it, `cancel` stops it)",
        ),
        _ => {}
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
    result.structured_content = Some(json!({ "error": { "code": e.code, "message": message } }));
    Ok(result)
}

fn usage(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "usage", message)
}

fn wait_of(wait_seconds: Option<u64>) -> Duration {
    Duration::from_secs(wait_seconds.unwrap_or(DEFAULT_WAIT).min(MAX_WAIT))
}

fn resolve(app: &App, prefix: &str) -> anyhow::Result<RunId> {
    Ok(app.store.resolve_run(prefix)?)
}

/// Whether `id` is a unit of the assembly line (else a plain run).
fn is_unit(app: &App, id: &RunId) -> anyhow::Result<bool> {
    Ok(app.store.run_info(id)?.config.get("line").is_some())
}

// ---- the tools -------------------------------------------------------------------------

#[tool_router]
impl Tools {
    pub(crate) fn new(app: Arc<App>) -> Tools {
        Tools {
            app,
            tool_router: Self::tool_router(),
        }
    }

    /// Start a unit of the assembly line (discovery, plan, build, review, gate, merge)
    /// and advance it until it ends, stops with a question for a human, or
    /// `wait_seconds` pass. Answers its status; when `running` is true, poll
    /// `unit_status` with `wait_seconds`. A unit that stops with a question goes on
    /// with `answer`.
    #[tool]
    async fn start_unit(&self, Parameters(a): Parameters<StartUnit>) -> Answer {
        let in_repo = crate::line::InRepo {
            repo: a.repo.map(std::path::PathBuf::from),
            base: a.base,
            gates: a.gates,
            merge: a.merge,
        };
        let new = blocking(&self.app, move |app| {
            app.create_unit(&a.description, a.route.as_deref(), a.offline, &in_repo)
        })
        .await;
        let (id, said) = match new {
            Ok(new) => new,
            Err(e) => return failed(e),
        };
        let ended = self
            .advance(&id, wait_of(a.wait_seconds), |app, id| app.drive_unit(id))
            .await;
        self.unit_answer(id, Some(said), ended).await
    }

    /// Where a unit is: its status (active, blocked, finished), station, turns,
    /// verdicts, open findings, who holds its seats, and the question it stopped on.
    /// `wait_seconds` waits for a unit this server is advancing to stop first.
    #[tool]
    async fn unit_status(&self, Parameters(a): Parameters<UnitArgs>) -> Answer {
        let unit = a.unit;
        let id = match blocking(&self.app, move |app| resolve(app, &unit)).await {
            Ok(id) => id,
            Err(e) => return failed(e),
        };
        let wait = Duration::from_secs(a.wait_seconds.unwrap_or(0).min(MAX_WAIT));
        self.settle(&id, wait).await;
        self.unit_answer(id, None, Ok(None)).await
    }

    /// Answer the question a unit stopped on (recorded as a decision of a human), then
    /// continue the unit (unless `resume` is false) and wait for it as `start_unit`
    /// does.
    #[tool]
    async fn answer(&self, Parameters(a): Parameters<AnswerArgs>) -> Answer {
        if a.answer.trim().is_empty() {
            return failed(usage("the answer is empty; say what the human decided"));
        }
        let (unit, text) = (a.unit.clone(), a.answer.clone());
        let recorded = blocking(&self.app, move |app| {
            let id = resolve(app, &unit)?;
            let engine = baton_engine::Engine::new(app.store.clone());
            let (turn, taken) = crate::line::record_answer(&engine, &id, &text)?;
            Ok((id, turn, taken))
        })
        .await;
        let (id, turn, taken) = match recorded {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let said = format!("answer recorded as a decision of human (turn {turn}), {taken}");
        if a.resume == Some(false) {
            return self.unit_answer(id, Some(said), Ok(None)).await;
        }
        let ended = self
            .advance(&id, wait_of(a.wait_seconds), |app, id| app.drive_unit(id))
            .await;
        self.unit_answer(id, Some(said), ended).await
    }

    /// Create a plain run: an objective and its plan (one task per step). No turn runs
    /// until `step` or `resume`.
    #[tool]
    async fn create_run(&self, Parameters(a): Parameters<CreateRun>) -> Answer {
        let op = Op::CreateRun {
            objective: a.objective,
            tasks: a.tasks,
            step_budgets: Vec::new(),
            step_seats: Vec::new(),
            step_tags: Vec::new(),
            step_scopes: Vec::new(),
            roster: a.roster,
            settings: baton_protocol::Settings {
                budget: a.budget,
                ..Default::default()
            },
        };
        self.op(op).await
    }

    /// Run one turn of a plain run and wait for it.
    #[tool]
    async fn step(&self, Parameters(a): Parameters<RunArgs>) -> Answer {
        let outcome = blocking(&self.app, move |app| {
            let id = resolve(app, &a.run)?;
            if is_unit(app, &id)? {
                return Err(crate::exit::usage(format!(
                    "{id} is a unit of the assembly line, which advances a station at a time: use `resume` (or `unit_status`)"
                )));
            }
            app.apply(Op::Step { run: id.to_string() })
        })
        .await;
        match outcome {
            Ok(o) => {
                let v = outcome_json(&o);
                answer(say_outcome(&v), v)
            }
            Err(e) => failed(e),
        }
    }

    /// Continue a run until it finishes or blocks (or `max_turns` ran), or a unit until
    /// it stops; waits up to `wait_seconds`, then answers `running: true` (poll `state`
    /// or `unit_status`). A blocked plain run is re-opened: resuming it is a decision
    /// that it may continue.
    #[tool]
    async fn resume(&self, Parameters(a): Parameters<ResumeArgs>) -> Answer {
        let run = a.run.clone();
        let found = blocking(&self.app, move |app| {
            let id = resolve(app, &run)?;
            let unit = is_unit(app, &id)?;
            Ok((id, unit))
        })
        .await;
        let (id, unit) = match found {
            Ok(f) => f,
            Err(e) => return failed(e),
        };
        let wait = wait_of(a.wait_seconds);
        if unit {
            let ended = self.advance(&id, wait, |app, id| app.drive_unit(id)).await;
            return self.unit_answer(id, None, ended).await;
        }
        let max_turns = a.max_turns;
        let ended = self
            .advance(&id, wait, move |app, id| {
                let op = Op::Resume {
                    run: id.to_string(),
                    max_turns,
                    roster: None,
                };
                app.apply(op).map(|o| outcome_json(&o).to_string())
            })
            .await;
        match ended {
            Ok(Some(said)) => {
                let v: Value = serde_json::from_str(&said).unwrap_or(Value::String(said));
                answer(say_outcome(&v), v)
            }
            Ok(None) => answer(
                format!(
                    "run {id} is still running; call `state` to see its turns, or `resume` again later to wait for it"
                ),
                json!({ "run": id, "running": true }),
            ),
            Err(e) => failed(e),
        }
    }

    /// Stop what a run or unit is doing, wherever it runs; nothing half-done is
    /// committed, and it can be resumed.
    #[tool]
    async fn cancel(&self, Parameters(a): Parameters<RunArgs>) -> Answer {
        let outcome = blocking(&self.app, move |app| {
            let run = resolve(app, &a.run)?.to_string();
            app.apply(Op::Cancel {
                target: baton_protocol::CancelTarget::Run(run),
            })
        })
        .await;
        match outcome {
            Ok(o) => {
                let v = outcome_json(&o);
                answer(say_outcome(&v), v)
            }
            Err(e) => failed(e),
        }
    }

    /// The runs and units in the database, newest first: id, status, turns, objective.
    #[tool]
    async fn runs(&self) -> Answer {
        let listed = blocking(&self.app, super::api::run_rows).await;
        match listed {
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {} {} turns{}: {}",
                            r["id"].as_str().unwrap_or_default(),
                            r["status"].as_str().unwrap_or_default(),
                            r["turns"],
                            if r["unit"] == true { " (unit)" } else { "" },
                            r["objective"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                let text = if lines.is_empty() {
                    "no runs yet; start one with `start_unit` or `create_run`".to_string()
                } else {
                    lines.join("\n")
                };
                answer(text, json!({ "runs": rows }))
            }
            Err(e) => failed(e),
        }
    }

    /// A run's (or unit's) canonical state: objective, plan and progress, decisions,
    /// artifacts, issues, failed attempts, next action; with its status and token
    /// totals.
    #[tool]
    async fn state(&self, Parameters(a): Parameters<RunArgs>) -> Answer {
        let shown = blocking(&self.app, move |app| {
            let id = resolve(app, &a.run)?;
            let (report, state, _) = baton_engine::report::build(app.store.as_ref(), &id)?;
            let running = app.is_running(&id);
            Ok(json!({
                "run": id,
                "objective": report.run.objective,
                "status": report.run.status.as_str(),
                "turns": report.run.turns,
                "unit": report.run.config.get("line").is_some(),
                "running_here": running,
                "tokens_sent": report.tokens_sent,
                "tokens_received": report.tokens_received,
                "failed_turns": report.failed_turns,
                "state": state,
            }))
        })
        .await;
        match shown {
            Ok(v) => {
                let text = format!(
                    "run {} ({}): {} after {} turns{}; {} failed turn(s); {} tokens sent",
                    v["run"].as_str().unwrap_or_default(),
                    v["objective"].as_str().unwrap_or_default(),
                    v["status"].as_str().unwrap_or_default(),
                    v["turns"],
                    if v["running_here"] == true {
                        ", running here"
                    } else {
                        ""
                    },
                    v["failed_turns"],
                    v["tokens_sent"],
                );
                answer(text, v)
            }
            Err(e) => failed(e),
        }
    }

    /// Compile the briefing a worker would be given now (deterministic, bounded by the
    /// budget): the package's rendered text, its sections included and omitted, and
    /// the items that did not fit.
    #[tool]
    async fn compile_briefing(&self, Parameters(a): Parameters<CompileArgs>) -> Answer {
        let compiled = blocking(&self.app, move |app| {
            let id = resolve(app, &a.run)?;
            let engine = baton_engine::Engine::new(app.store.clone());
            let session = engine.open_for_preview(&id)?;
            let package = engine.preview(&session, a.worker.as_deref(), a.budget)?;
            Ok(json!({ "run": id, "package": package }))
        })
        .await;
        match compiled {
            Ok(v) => {
                let p = &v["package"];
                let omitted: Vec<String> = p["omitted_sections"]
                    .as_array()
                    .map(|a| a.iter().map(|s| s.to_string().replace('"', "")).collect())
                    .unwrap_or_default();
                let text = format!(
                    "briefing of run {} for {} (turn {}): {} of {} tokens; sections omitted: {}; {} item(s) dropped\n\n{}",
                    v["run"].as_str().unwrap_or_default(),
                    p["worker"].as_str().unwrap_or_default(),
                    p["turn"],
                    p["tokens"],
                    p["budget"],
                    if omitted.is_empty() {
                        "none".to_string()
                    } else {
                        omitted.join(", ")
                    },
                    p["dropped"].as_array().map_or(0, Vec::len),
                    p["text"].as_str().unwrap_or_default()
                );
                answer(text, v)
            }
            Err(e) => failed(e),
        }
    }

    /// Queue one job per candidate, each to run in its own git worktree by
    /// `baton work`; a group's finished candidates are compared with `judge`.
    #[tool]
    async fn enqueue(&self, Parameters(a): Parameters<EnqueueArgs>) -> Answer {
        let op = Op::Enqueue {
            objective: a.objective,
            tasks: a.tasks,
            candidates: a.candidates,
            gates: a.gates,
            gate_each_turn: a.gate_each_turn,
            fix_turns: a.fix_turns,
            sandbox: None,
            repo: a.repo,
            base: a.base,
            worktrees: None,
            rubric: a.rubric,
            step_budgets: Vec::new(),
            step_seats: Vec::new(),
            step_tags: Vec::new(),
            step_scopes: Vec::new(),
            roster: None,
            settings: Default::default(),
        };
        self.op(op).await
    }

    /// The jobs in the queue and their status.
    #[tool]
    async fn jobs(&self) -> Answer {
        let listed = blocking(&self.app, |app| Ok(app.store.list_jobs()?)).await;
        match listed {
            Ok(jobs) => {
                let lines: Vec<String> = jobs
                    .iter()
                    .map(|j| format!("{} {} group {}", j.id, j.status.as_str(), j.group))
                    .collect();
                let text = if lines.is_empty() {
                    "no jobs; queue some with `enqueue`".to_string()
                } else {
                    lines.join("\n")
                };
                answer(text, json!({ "jobs": jobs }))
            }
            Err(e) => failed(e),
        }
    }

    /// What finished jobs sent back: branch, commits, diff, gates and their logs, the
    /// patch file; one job's, or every job's with a result.
    #[tool]
    async fn outbox(&self, Parameters(a): Parameters<OutboxArgs>) -> Answer {
        let listed = blocking(&self.app, move |app| {
            Ok(match &a.job {
                Some(prefix) => vec![app.store.job(&app.store.resolve_job(prefix)?)?],
                None => app
                    .store
                    .list_jobs()?
                    .into_iter()
                    .filter(|j| j.outbox.is_some())
                    .collect(),
            })
        })
        .await;
        match listed {
            Ok(jobs) => {
                let text = if jobs.is_empty() {
                    "the outbox is empty; `baton work` runs queued jobs".to_string()
                } else {
                    jobs.iter()
                        .map(|j| {
                            format!(
                                "{} {}: {}",
                                j.id,
                                j.status.as_str(),
                                match (&j.outbox, &j.error) {
                                    (Some(o), _) => format!(
                                        "branch {}",
                                        o["branch"].as_str().unwrap_or_default()
                                    ),
                                    (None, Some(e)) => e.clone(),
                                    (None, None) => "not finished".into(),
                                }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                answer(text, json!({ "jobs": jobs }))
            }
            Err(e) => failed(e),
        }
    }

    /// Compare a group's finished candidate jobs, blind, against its rubric (waited
    /// for): the verdict and the winning job.
    #[tool]
    async fn judge(&self, Parameters(a): Parameters<JudgeArgs>) -> Answer {
        self.op(Op::Judge {
            group: a.group,
            judge: a.judge,
        })
        .await
    }

    /// The pools (subscriptions with a weekly allowance), their usage and headroom,
    /// benches, the seats and the workers on the floor.
    #[tool]
    async fn pools(&self) -> Answer {
        match blocking(&self.app, |app| crate::pools::floor_json(&app.ctx)).await {
            Ok(v) => {
                let n = v["pools"].as_array().map_or(0, Vec::len);
                let text = if n == 0 {
                    "no pools configured (add [[pools]] to the configuration; README: \"Seats, pools and the router\")".to_string()
                } else {
                    format!("{n} pool(s); see the structured content for usage and benches")
                };
                answer(text, v)
            }
            Err(e) => failed(e),
        }
    }

    /// Bench a pool: its seats are filled from the other pools from the next phase on,
    /// without renaming any seat. Recorded with who (`baton mcp`) and why.
    #[tool]
    async fn bench_pool(&self, Parameters(a): Parameters<BenchArgs>) -> Answer {
        self.bench(a.pool, true, a.reason).await
    }

    /// Put a benched pool back on the floor.
    #[tool]
    async fn unbench_pool(&self, Parameters(a): Parameters<PoolArgs>) -> Answer {
        self.bench(a.pool, false, None).await
    }

    /// A routed run's or unit's seats: who holds each (pins: model, pool, since when)
    /// and why others were excluded.
    #[tool]
    async fn seats(&self, Parameters(a): Parameters<RunArgs>) -> Answer {
        let shown = blocking(&self.app, move |app| {
            let id = resolve(app, &a.run)?;
            Ok(json!({ "run": id, "seats": crate::seats::seats_json(app.store.as_ref(), &id)? }))
        })
        .await;
        match shown {
            Ok(v) => {
                let n = v["seats"].as_array().map_or(0, Vec::len);
                let text = format!(
                    "run {}: {n} seat(s) held; see the structured content",
                    v["run"].as_str().unwrap_or_default()
                );
                answer(text, v)
            }
            Err(e) => failed(e),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

impl Tools {
    /// Applies `op` and answers what it did.
    async fn op(&self, op: Op) -> Answer {
        match blocking(&self.app, move |app| app.apply(op)).await {
            Ok(o) => {
                let v = outcome_json(&o);
                answer(say_outcome(&v), v)
            }
            Err(e) => failed(e),
        }
    }

    async fn bench(&self, pool: String, benched: bool, reason: Option<String>) -> Answer {
        let done = blocking(&self.app, move |app| {
            let said =
                crate::pools::bench_pool_as(&app.ctx, &pool, benched, reason, "baton mcp".into())?;
            Ok(json!({ "pool": pool, "benched": benched, "said": said }))
        })
        .await;
        match done {
            Ok(v) => answer(v["said"].as_str().unwrap_or_default().to_string(), v),
            Err(e) => failed(e),
        }
    }

    /// Runs `work` on `id` on a thread of its own (as the API's background work) and
    /// waits up to `wait` for it: what it said when it ended in time, `None` when it
    /// goes on.
    async fn advance(
        &self,
        id: &RunId,
        wait: Duration,
        work: impl FnOnce(&App, &RunId) -> anyhow::Result<String> + Send + 'static,
    ) -> Result<Option<String>, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.app.start_background(id, move |app, id| {
            let (reply, logged) = match work(app, id) {
                Ok(said) => (Ok(said.clone()), Ok(said)),
                Err(e) => {
                    let logged = anyhow!("{e:#}");
                    (Err(ApiError::from(e)), Err(logged))
                }
            };
            let _ = tx.send(reply);
            logged
        })?;
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(ended)) => {
                // The thread is about to let go of the unit: a call that follows at
                // once (an answer) must not find it busy.
                self.settle(id, Duration::from_secs(5)).await;
                ended.map(Some)
            }
            Ok(Err(_)) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!(
                    "a bug in baton: the work on {id} panicked; see the server's log, and `resume` it"
                ),
            )),
            Err(_) => Ok(None),
        }
    }

    /// Waits up to `wait` for this server's work on `id` to end.
    async fn settle(&self, id: &RunId, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        while self.app.is_running(id) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A unit's status as the answer of a tool that started, continued or looked at it.
    /// `said`: what the tool did first; `ended`: what advancing it ended with.
    async fn unit_answer(
        &self,
        id: RunId,
        said: Option<String>,
        ended: Result<Option<String>, ApiError>,
    ) -> Answer {
        let ended = match ended {
            Ok(ended) => ended,
            // This server advances it already: where it is answers the call.
            Err(e) if e.code == "busy" && self.app.is_running(&id) => None,
            Err(e) => return failed(e),
        };
        let status = blocking(&self.app, move |app| {
            let status = crate::line::status_of(app.store.as_ref(), &id)?;
            let mut v = serde_json::to_value(status)?;
            if let Some(m) = v.as_object_mut() {
                m.insert("running".into(), app.is_running(&id).into());
            }
            Ok(v)
        })
        .await;
        let mut v = match status {
            Ok(v) => v,
            Err(e) => return failed(e),
        };
        let mut lines: Vec<String> = said.into_iter().collect();
        lines.push(say_unit(&v));
        if let (Some(m), Some(ended)) = (v.as_object_mut(), ended) {
            m.insert("ended".into(), ended.into());
        }
        answer(lines.join("\n"), v)
    }
}

/// The streamable HTTP service mounted at `/mcp` (behind the server's guard, which
/// checks the token, the `Host` and the `Origin`: rmcp's own `Host` list is left
/// empty, since a server bound off loopback with a token serves any host name).
pub(crate) fn service(
    app: Arc<App>,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    Tools,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let tools = Tools::new(app);
    StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().disable_allowed_hosts(),
    )
}

/// The signal a client's leaving is taken as (the number only reaches messages).
#[cfg(unix)]
const SIGTERM: u32 = libc::SIGTERM as u32;
#[cfg(not(unix))]
const SIGTERM: u32 = 15;

/// `baton mcp`: the tools over stdio. stdout carries the protocol only: what the line
/// says of its turns goes to stderr.
pub(crate) fn stdio(ctx: crate::commands::Context_) -> anyhow::Result<std::process::ExitCode> {
    let _ = super::events::LOG_AS.set("baton mcp");
    use anyhow::Context as _;
    use rmcp::ServiceExt as _;
    let store = ctx.store()?;
    let bind = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let app = Arc::new(App::new(ctx, store, bind, None, super::events::Hub::idle()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("baton-mcp")
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    let served = runtime.block_on(async {
        let service = Tools::new(app.clone())
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP client did not initialize the session")?;
        let interrupted = async {
            while baton_gateway::cancel::interrupted().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::select! {
            r = service.waiting() => r.map(|_| ()).context("the MCP session ended with an error"),
            () = interrupted => Ok(()),
        }
    });
    // A pending read of stdin cannot be cancelled: the runtime is not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let signalled = crate::signals::exit_code();
    // Over stdio the work lives as long as the session: with the client gone nobody
    // follows it, so it stops as at Ctrl-C (the turn in flight discarded, its lease
    // released), to be continued with `resume` from another session.
    if signalled.is_none() && app.is_busy() {
        eprintln!(
            "baton mcp: the client ended the session; stopping the work in flight (nothing half-done is committed; `resume` continues it)"
        );
        baton_gateway::cancel::interrupt(SIGTERM);
    }
    app.join_background();
    served?;
    Ok(signalled.unwrap_or(std::process::ExitCode::SUCCESS))
}
