//! `baton serve`: the dashboard, the HTTP JSON API (`/api/…`), the live event stream
//! (`/api/events`) and, with `mcp`, the MCP server over streamable HTTP (`/mcp`), on
//! one port.
//!
//! Safe by default: it binds to loopback, where it refuses requests whose `Host` is not
//! a loopback name (a web page cannot reach it through DNS rebinding); binding to any
//! other address needs a token (`--token` or `BATON_TOKEN`), checked on every API, SSE
//! and MCP request. Every action is a POST that carries the session's CSRF value (or
//! the token in `Authorization`), which no other site's page can send. Nothing the
//! server returns holds a credential: runs store the names of key variables, never keys.

mod api;
mod events;
mod guard;
pub(crate) mod mcp;
mod page;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use baton_core::ids::RunId;
use baton_engine::Engine;
use baton_engine::ops::OpOutcome;
use baton_store::Store;

use crate::commands::Context_;
use crate::exit;
use api::ApiError;
use events::{Hub, log};

/// What `baton serve` serves, and to whom.
pub(crate) struct App {
    pub ctx: Context_,
    pub store: Arc<dyn Store>,
    /// Required on every API, SSE and MCP request when set.
    pub token: Option<String>,
    /// This server's CSRF value: every POST from the page carries it.
    pub csrf: String,
    pub bind: SocketAddr,
    pub hub: Arc<Hub>,
    /// Runs and units this server is advancing now.
    running: Mutex<HashSet<RunId>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl App {
    /// What serves `ctx`'s database: `baton serve` gives it its listener's address, its
    /// token and its event hub; `baton mcp` over stdio, which has no listener, gives
    /// loopback, none and [`Hub::idle`].
    pub(crate) fn new(
        ctx: Context_,
        store: Arc<dyn Store>,
        bind: SocketAddr,
        token: Option<String>,
        hub: Arc<Hub>,
    ) -> App {
        App {
            ctx,
            store,
            token,
            csrf: guard::random_hex(),
            bind,
            hub,
            running: Mutex::new(HashSet::new()),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Waits for the work started in the background: stopped by the signal that ended
    /// the server (nothing half-done is committed), its leases released before the
    /// process ends.
    pub(crate) fn join_background(&self) {
        let threads = self.threads.lock().map(|mut t| std::mem::take(&mut *t));
        for thread in threads.unwrap_or_default() {
            let _ = thread.join();
        }
    }

    /// Applies `op` as the CLI would, with the configuration's roster and settings.
    pub(crate) fn apply(&self, op: baton_protocol::Op) -> Result<OpOutcome> {
        let engine = Engine::new(self.store.clone());
        Ok(baton_engine::ops::apply(
            &engine,
            &self.ctx.op_context(),
            op,
            &mut |_| {},
        )?)
    }

    /// A new unit of the assembly line (no turn run yet), and what to say of it; in a
    /// repository when `in_repo` names one.
    pub(crate) fn create_unit(
        &self,
        description: &str,
        route: Option<&str>,
        offline: bool,
        in_repo: &crate::line::InRepo,
    ) -> Result<(RunId, String)> {
        let description = description.trim();
        if description.is_empty() {
            return Err(exit::usage(
                "say what the unit is: {\"description\": \"Add rate limiting to the public API\"}",
            ));
        }
        if in_repo.repo.is_none()
            && (in_repo.base.is_some() || !in_repo.gates.is_empty() || in_repo.merge)
        {
            return Err(exit::usage(
                "base, gates and merge are for a unit in a repository: give \"repo\" too (a path on the server's machine)",
            ));
        }
        let route_name = route.unwrap_or("default");
        let (_, text) = crate::line::read_route(route_name)?;
        let parsed = baton_core::line::Route::parse(&text)
            .map_err(|e| exit::config(format!("{route_name}: {e}")))?;
        let engine = Engine::new(self.store.clone());
        crate::line::create(&self.ctx, &engine, description, &parsed, offline, in_repo)
    }

    /// Advances unit `id` until it ends or stops, saying each turn in the server's log.
    pub(crate) fn drive_unit(&self, id: &RunId) -> Result<String> {
        let engine = Engine::new(self.store.clone());
        let say = |_: bool, line: &str| log(line);
        let mut session = crate::line::open_unit(&engine, id, &say)?;
        let code = crate::line::drive(&engine, &mut session, &say)?;
        Ok(format!("unit {id}: the line stopped ({code:?})"))
    }

    pub(crate) fn is_running(&self, id: &RunId) -> bool {
        self.running.lock().is_ok_and(|r| r.contains(id))
    }

    /// Whether this server is advancing any run or unit now.
    pub(crate) fn is_busy(&self) -> bool {
        self.running.lock().is_ok_and(|r| !r.is_empty())
    }

    /// Runs `work` on `id` on a thread of its own; refused (409) when this server is
    /// advancing `id` already. What it ends with goes to the server's log; its turns
    /// reach clients through the event stream.
    pub(crate) fn start_background(
        self: &Arc<Self>,
        id: &RunId,
        work: impl FnOnce(&App, &RunId) -> Result<String> + Send + 'static,
    ) -> Result<(), ApiError> {
        {
            let mut running = self.running.lock().map_err(|_| poisoned())?;
            if !running.insert(id.clone()) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "busy",
                    format!(
                        "this server is advancing {id} already; watch /api/events?run={id}, or cancel it (POST /api/runs/{id}/cancel)"
                    ),
                ));
            }
        }
        let (app, id) = (self.clone(), id.clone());
        let thread = std::thread::Builder::new()
            .name("baton-serve-work".into())
            .spawn(move || {
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&app, &id)));
                match result {
                    Ok(Ok(said)) => log(&said),
                    Ok(Err(e)) => log(&format!("{id}: {e:#}")),
                    Err(_) => log(&format!("{id}: a bug in baton: the work panicked")),
                }
                if let Ok(mut running) = app.running.lock() {
                    running.remove(&id);
                }
            })
            .map_err(|e| ApiError::from(anyhow::Error::from(e)))?;
        if let Ok(mut threads) = self.threads.lock() {
            threads.retain(|t| !t.is_finished());
            threads.push(thread);
        }
        Ok(())
    }
}

fn poisoned() -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "a bug in baton: a lock was poisoned",
    )
}

/// The routes: the page, its assets, the API, the event stream.
pub(crate) fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/session", get(api::session))
        .route("/openapi.json", get(page::openapi))
        .route("/events", get(events::stream))
        .route("/runs", get(api::runs).post(api::create_run))
        .route("/runs/{id}", get(api::run))
        .route("/runs/{id}/events", get(api::run_events))
        .route("/runs/{id}/turns/{turn}/briefing", get(api::briefing))
        .route("/runs/{id}/compile", get(api::compile))
        .route("/runs/{id}/seats", get(api::seats))
        .route("/runs/{id}/step", post(api::step))
        .route("/runs/{id}/resume", post(api::resume))
        .route("/runs/{id}/cancel", post(api::cancel))
        .route("/units", post(api::create_unit))
        .route("/units/{id}", get(api::unit))
        .route("/units/{id}/resume", post(api::resume_unit))
        .route("/units/{id}/answer", post(api::answer))
        .route("/pins", get(api::pins))
        .route("/jobs", get(api::jobs).post(api::enqueue))
        .route("/jobs/{id}", get(api::job))
        .route("/judge", post(api::judge))
        .route("/pools", get(api::pools))
        .route("/pools/{id}/bench", post(api::bench))
        .route("/pools/{id}/unbench", post(api::unbench))
        .fallback(page::api_not_found)
        .layer(axum::middleware::map_response(api::json_errors));
    Router::new()
        .route("/", get(page::index))
        .route("/assets/{file}", get(page::asset))
        .nest("/api", api)
        .nest_service("/mcp", mcp::service(app.clone()))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            guard::guard,
        ))
        .with_state(app)
}

/// `baton serve [--bind ADDR] [--token T]`.
/// `poll`: how often the event follower reads the log while a client is connected
/// (`--poll-ms`; `None`: the store's default, see `events`).
pub(crate) fn serve(
    ctx: Context_,
    bind: SocketAddr,
    token: Option<String>,
    poll: Option<std::time::Duration>,
) -> Result<ExitCode> {
    let token = token.filter(|t| !t.is_empty());
    if !bind.ip().is_loopback() && token.is_none() {
        return Err(exit::usage(format!(
            "binding to {bind} lets other machines reach baton's API, so it needs a token: give --token SECRET (or set BATON_TOKEN); clients send it as `Authorization: Bearer SECRET`, and the page is opened once at http://HOST:PORT/?token=SECRET. Or bind to loopback (--bind 127.0.0.1:7878)"
        )));
    }
    let store = ctx.store()?;
    let hub = Hub::start(store.clone(), poll)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("baton-serve")
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(bind))
        .with_context(|| {
            format!("cannot listen on {bind}; is another server using it? Give --bind 127.0.0.1:PORT with another port (0 picks a free one)")
        })?;
    let local = listener.local_addr()?;
    let app = Arc::new(App::new(ctx, store, local, token.clone(), hub));
    let url = format!("http://{local}/");
    match &token {
        Some(_) => println!(
            "baton serve: listening on {url} (database {}); open {url}?token=… with the token once; API clients send `Authorization: Bearer …`; Ctrl-C stops",
            app.ctx.location()
        ),
        None => println!(
            "baton serve: listening on {url} (database {}); loopback only, no token; Ctrl-C stops",
            app.ctx.location()
        ),
    }
    let served = runtime.block_on(async {
        let shutdown = async {
            while baton_gateway::cancel::interrupted().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let server = axum::serve(listener, router(app.clone())).with_graceful_shutdown(shutdown);
        // Event streams never end by themselves: after the signal, a second to finish
        // what is in flight, then the rest are dropped.
        let deadline = async {
            while baton_gateway::cancel::interrupted().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        tokio::select! {
            r = server => r,
            () = deadline => Ok(()),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    app.join_background();
    served.context("the server stopped with an error")?;
    Ok(crate::signals::exit_code().unwrap_or(ExitCode::SUCCESS))
}
