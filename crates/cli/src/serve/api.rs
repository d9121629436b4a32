//! The HTTP JSON API under `/api/…`: what the CLI shows and does, read from and written
//! to the store (so a second `baton serve` on another host, on the same PostgreSQL,
//! shows the same). Every handler's store and engine work runs on tokio's blocking
//! threads. Documented in `openapi.json` (served at `/api/openapi.json`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_core::ids::RunId;
use baton_engine::ops::OpOutcome;
use baton_engine::{RunEnd, StepOutcome};
use baton_protocol::Op;
use baton_store::PinFilter;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use crate::exit::{self, Exit};

/// An error as the API returns it: `{"error": {"code", "message"}}` with a status that
/// says whose fault it is. The message says what to do next, as the CLI's does.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        let message = format!("{e:#}");
        for cause in e.chain() {
            if cause.downcast_ref::<NotFound>().is_some() {
                return ApiError::new(StatusCode::NOT_FOUND, "not_found", message);
            }
            // A repository the request names that is not one, or a base it lacks: the
            // request's mistake, not the server's.
            let workspace = match cause.downcast_ref::<baton_engine::Error>() {
                Some(baton_engine::Error::Workspace(w)) => Some(w),
                _ => cause.downcast_ref::<baton_workspace::Error>(),
            };
            if let Some(
                baton_workspace::Error::NotARepository { .. }
                | baton_workspace::Error::NoCommits { .. }
                | baton_workspace::Error::RevisionNotFound { .. },
            ) = workspace
            {
                return ApiError::new(StatusCode::BAD_REQUEST, "usage", message);
            }
            if let Some(baton_engine::Error::NotAsked(_)) = cause.downcast_ref() {
                // The unit's state, not the request, is what does not fit.
                return ApiError::new(StatusCode::CONFLICT, "not_waiting", message);
            }
            if let Some(store) = cause.downcast_ref::<baton_store::Error>() {
                use baton_store::Error as S;
                match store {
                    S::RunNotFound { .. } | S::JobNotFound { .. } => {
                        return ApiError::new(StatusCode::NOT_FOUND, "not_found", message);
                    }
                    S::AmbiguousRun { .. } | S::AmbiguousJob { .. } => {
                        return ApiError::new(StatusCode::BAD_REQUEST, "ambiguous", message);
                    }
                    _ => {}
                }
            }
        }
        let (status, code) = match exit::of(&e) {
            Exit::Usage => (StatusCode::BAD_REQUEST, "usage"),
            Exit::Config => (StatusCode::UNPROCESSABLE_ENTITY, "config"),
            Exit::Blocked => (StatusCode::CONFLICT, "blocked"),
            Exit::Busy | Exit::LeaseLost => (StatusCode::CONFLICT, "busy"),
            Exit::Cancelled => (StatusCode::CONFLICT, "cancelled"),
            Exit::Provider => (StatusCode::BAD_GATEWAY, "provider"),
            Exit::TurnFailed => (StatusCode::INTERNAL_SERVER_ERROR, "turn_failed"),
            Exit::Workspace => (StatusCode::INTERNAL_SERVER_ERROR, "workspace"),
            Exit::Failure => (StatusCode::INTERNAL_SERVER_ERROR, "failure"),
            Exit::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

/// Something the request names is not there (beyond a run or job id, which the store's
/// own errors say).
#[derive(Debug)]
pub(crate) struct NotFound(pub String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

/// A request axum refused before a handler ran (a path or query that does not parse, a
/// body that is not JSON) answers in plain text: it is given the API's error shape.
pub(crate) async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_string();
    let message = match (status, text.is_empty()) {
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, _) => {
            "send the body as JSON, with the header Content-Type: application/json".to_string()
        }
        (_, true) => format!("the request was refused ({status})"),
        (_, false) => format!("{text} (see /api/openapi.json)"),
    };
    let code = if status.is_server_error() {
        "internal"
    } else {
        "usage"
    };
    ApiError::new(status, code, message).into_response()
}

pub(crate) type ApiResult = Result<Json<Value>, ApiError>;

/// Runs `f` on a blocking thread: the store and the engine are synchronous.
pub(crate) async fn blocking<T: Send + 'static>(
    app: &Arc<App>,
    f: impl FnOnce(&App) -> anyhow::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let app = app.clone();
    match tokio::task::spawn_blocking(move || f(&app)).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("a bug in baton: the request's work panicked ({e}); the server goes on"),
        )),
    }
}

async fn read(
    app: Arc<App>,
    f: impl FnOnce(&App) -> anyhow::Result<Value> + Send + 'static,
) -> ApiResult {
    blocking(&app, f).await.map(Json)
}

/// A body that is not what the endpoint takes: 400 with what was wrong.
fn body<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "usage",
            format!(
                "the request body is not what this endpoint takes: {e} (see /api/openapi.json)"
            ),
        )
    })
}

/// An op of `kind` from a body holding its fields (without `"op"`).
fn op_of(kind: &str, value: Value) -> Result<Op, ApiError> {
    let Value::Object(mut map) = value else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "usage",
            "the request body must be a JSON object",
        ));
    };
    map.insert("op".into(), kind.into());
    body(Value::Object(map))
}

pub(crate) async fn session(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "csrf": app.csrf,
        "token_required": app.token.is_some(),
        "database": app.ctx.location().to_string(),
        "streams": app.hub.clients(),
        "bind": app.bind.to_string(),
    }))
}

pub(crate) async fn runs(State(app): State<Arc<App>>) -> ApiResult {
    read(app, |app| Ok(json!({ "runs": run_rows(app)? }))).await
}

/// Every run, newest first, as the API and the MCP tools list them.
pub(crate) fn run_rows(app: &App) -> anyhow::Result<Vec<Value>> {
    Ok(app
        .store
        .list_runs()?
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "objective": r.objective,
                "status": r.status.as_str(),
                "turns": r.turns,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
                "unit": r.config.get("line").is_some(),
            })
        })
        .collect())
}

fn resolve(app: &App, prefix: &str) -> anyhow::Result<RunId> {
    Ok(app.store.resolve_run(prefix)?)
}

/// `GET /api/runs/{id}`: the run's report (every turn: worker, tokens against budget,
/// refusals, warnings) and its canonical state.
pub(crate) async fn run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        let (report, state, _) = baton_engine::report::build(app.store.as_ref(), &id)?;
        let unit = report.run.config.get("line").is_some();
        Ok(json!({ "report": report, "state": state, "unit": unit }))
    })
    .await
}

pub(crate) async fn run_events(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        let events = app.store.events(&id, 0)?;
        let rows: Vec<Value> = events
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(&e.event).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    m.insert("seq".into(), e.seq.into());
                }
                v
            })
            .collect();
        Ok(json!({ "run": id, "events": rows }))
    })
    .await
}

/// `GET /api/runs/{id}/turns/{n}/briefing`: the briefing turn `n` was given, as
/// compiled then: sections included and omitted, items that did not fit.
pub(crate) async fn briefing(
    State(app): State<Arc<App>>,
    Path((id, turn)): Path<(String, u32)>,
) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        match app.store.turn(&id, turn)? {
            Some(t) => {
                Ok(json!({ "run": id, "turn": turn, "worker": t.worker, "package": t.package }))
            }
            None => Err(NotFound(format!(
                "run {id} has no turn {turn} (it has {} turns)",
                app.store.run_info(&id)?.turns
            ))
            .into()),
        }
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(crate) struct CompileQuery {
    worker: Option<String>,
    budget: Option<usize>,
}

/// `GET /api/runs/{id}/compile?worker=&budget=`: the briefing a worker would get now,
/// at that budget (the budget slider).
pub(crate) async fn compile(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<CompileQuery>,
) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        let engine = baton_engine::Engine::new(app.store.clone());
        let session = engine.open_for_preview(&id)?;
        let package = engine.preview(&session, q.worker.as_deref(), q.budget)?;
        let workers: Vec<&str> = session
            .config
            .roster
            .workers
            .iter()
            .map(|w| w.id.as_str())
            .collect();
        Ok(json!({ "run": id, "workers": workers, "package": package }))
    })
    .await
}

pub(crate) async fn seats(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        Ok(json!({ "run": id, "seats": crate::seats::seats_json(app.store.as_ref(), &id)? }))
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(crate) struct PinsQuery {
    run: Option<String>,
}

/// `GET /api/pins[?run=]`: the pin log, oldest first.
pub(crate) async fn pins(State(app): State<Arc<App>>, Query(q): Query<PinsQuery>) -> ApiResult {
    read(app, move |app| {
        let filter = match &q.run {
            Some(prefix) => PinFilter::run(&resolve(app, prefix)?),
            None => PinFilter::default(),
        };
        Ok(json!({ "pins": app.store.pins(&filter)? }))
    })
    .await
}

pub(crate) async fn unit(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    read(app, move |app| {
        let id = resolve(app, &id)?;
        let status = crate::line::status_of(app.store.as_ref(), &id)?;
        let running = app.is_running(&id);
        let mut v = serde_json::to_value(status)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("running_here".into(), running.into());
        }
        Ok(v)
    })
    .await
}

pub(crate) async fn jobs(State(app): State<Arc<App>>) -> ApiResult {
    read(app, |app| Ok(json!({ "jobs": app.store.list_jobs()? }))).await
}

/// What the page is given of a patch or a gate's log at most: a diff past this is cut
/// (and says so), the whole file stays on the server's disk.
const FILE_SHOWN: u64 = 256 * 1024;

/// The first [`FILE_SHOWN`] bytes of `path` as text, and whether it was cut; `None` when
/// the file is gone (a worktree cleaned up).
fn file_head(path: &str) -> Option<(String, bool)> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(FILE_SHOWN).read_to_end(&mut bytes).ok()?;
    Some((
        String::from_utf8_lossy(&bytes).into_owned(),
        len > FILE_SHOWN,
    ))
}

/// `GET /api/jobs/{id}`: a job with its outbox (branch, gates and their logs, the
/// patch's text as `patch`), the commits its turns made (`commits`), and its group's
/// judgements.
pub(crate) async fn job(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    read(app, move |app| {
        let id = app.store.resolve_job(&id)?;
        let mut job = app.store.job(&id)?;
        let judgements = app.store.judgements(&job.group)?;
        let mut commits = Vec::new();
        if let Some(run) = &job.run_id {
            for t in app.store.turns(run)? {
                if let Some(ws) = t.workspace.filter(|w| w.changed) {
                    commits.push(json!({
                        "turn": t.turn, "worker": t.worker, "commit": ws.commit,
                        "files": ws.files, "task": t.assignment.task,
                    }));
                }
            }
        }
        let mut patch = Value::Null;
        if let Some(outbox) = job.outbox.as_mut() {
            if let Some((text, cut)) = outbox["patch_file"].as_str().and_then(file_head) {
                patch = json!({ "text": text, "cut": cut });
            }
            if let Some(gates) = outbox.get_mut("gates").and_then(Value::as_array_mut) {
                for gate in gates {
                    let log = gate["output_file"].as_str().and_then(file_head);
                    if let (Some((text, cut)), Some(m)) = (log, gate.as_object_mut()) {
                        m.insert("log".into(), json!({ "text": text, "cut": cut }));
                    }
                }
            }
        }
        Ok(json!({ "job": job, "commits": commits, "patch": patch, "judgements": judgements }))
    })
    .await
}

pub(crate) async fn pools(State(app): State<Arc<App>>) -> ApiResult {
    read(app, |app| crate::pools::floor_json(&app.ctx)).await
}

// ---- actions (POST, CSRF-checked by the middleware) ----------------------------------

/// `POST /api/runs`: a new run (the fields of the `create_run` op); no turn runs until
/// `step` or `resume`.
pub(crate) async fn create_run(State(app): State<Arc<App>>, Json(v): Json<Value>) -> ApiResult {
    let op = op_of("create_run", v)?;
    let outcome = blocking(&app, move |app| app.apply(op)).await?;
    Ok(Json(outcome_json(&outcome)))
}

/// `POST /api/runs/{id}/step`: one turn, waited for.
pub(crate) async fn step(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    let outcome = blocking(&app, move |app| {
        let run = resolve(app, &id)?.to_string();
        app.apply(Op::Step { run })
    })
    .await?;
    Ok(Json(outcome_json(&outcome)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    max_turns: Option<u32>,
}

/// `POST /api/runs/{id}/resume`: turns until the run finishes or blocks, in the
/// background (202); its turns arrive on `/api/events`.
pub(crate) async fn resume(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    v: Option<Json<Value>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let b: ResumeBody = match v {
        Some(Json(v)) if !v.is_null() => body(v)?,
        _ => ResumeBody::default(),
    };
    let id = blocking(&app, move |app| resolve(app, &id)).await?;
    app.start_background(&id, move |app, id| {
        let op = Op::Resume {
            run: id.to_string(),
            max_turns: b.max_turns,
            roster: None,
        };
        app.apply(op).map(|o| outcome_json(&o).to_string())
    })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "run": id, "started": true })),
    ))
}

/// `POST /api/runs/{id}/cancel`: stops what the run is doing, wherever it runs;
/// nothing half-done is committed.
pub(crate) async fn cancel(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    let outcome = blocking(&app, move |app| {
        let run = resolve(app, &id)?.to_string();
        app.apply(Op::Cancel {
            target: baton_protocol::CancelTarget::Run(run),
        })
    })
    .await?;
    Ok(Json(outcome_json(&outcome)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewUnit {
    description: String,
    /// `default` (built in) or a route file on the server's disk.
    #[serde(default)]
    route: Option<String>,
    /// The offline mock workers of three families, whatever the configuration says.
    #[serde(default)]
    offline: bool,
    /// A git repository on the server's machine (relative: to where the server was
    /// started): the unit builds on a branch of its own in a worktree of it, as
    /// `baton line --repo`.
    #[serde(default)]
    repo: Option<String>,
    /// With `repo`: the branch, tag or commit to start from [default: what is checked
    /// out].
    #[serde(default)]
    base: Option<String>,
    /// With `repo`: gates, each `name=command` or `command`, run at the gate station.
    #[serde(default)]
    gates: Vec<String>,
    /// With `repo`: land the branch on its base branch at the merge station.
    #[serde(default)]
    merge: bool,
}

/// `POST /api/units`: a new unit of the assembly line, run in the background (202).
pub(crate) async fn create_unit(
    State(app): State<Arc<App>>,
    Json(v): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let new: NewUnit = body(v)?;
    let (id, said) = blocking(&app, move |app| {
        app.create_unit(
            &new.description,
            new.route.as_deref(),
            new.offline,
            &crate::line::InRepo {
                repo: new.repo.map(std::path::PathBuf::from),
                base: new.base,
                gates: new.gates,
                merge: new.merge,
            },
        )
    })
    .await?;
    app.start_background(&id, move |app, id| app.drive_unit(id))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "unit": id, "said": said, "started": true })),
    ))
}

/// `POST /api/units/{id}/resume`: continues a unit in the background (202).
pub(crate) async fn resume_unit(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = blocking(&app, move |app| resolve(app, &id)).await?;
    app.start_background(&id, move |app, id| app.drive_unit(id))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "unit": id, "started": true })),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerBody {
    answer: String,
    /// Continue the unit at once (in the background) [default: true].
    #[serde(default)]
    resume: Option<bool>,
}

/// `POST /api/units/{id}/answer`: the human's answer to the question the unit stopped
/// on, recorded as a decision of human; then the unit continues (202) unless
/// `resume: false`.
pub(crate) async fn answer(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Json(v): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let b: AnswerBody = body(v)?;
    if b.answer.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "usage",
            "the answer is empty; say what the human decided",
        ));
    }
    let text = b.answer.clone();
    let (id, turn, taken) = blocking(&app, move |app| {
        let id = resolve(app, &id)?;
        let engine = baton_engine::Engine::new(app.store.clone());
        let (turn, taken) = crate::line::record_answer(&engine, &id, &text)?;
        Ok((id, turn, taken))
    })
    .await?;
    let resume = b.resume.unwrap_or(true);
    if resume {
        app.start_background(&id, move |app, id| app.drive_unit(id))?;
    }
    Ok((
        if resume {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        },
        Json(json!({ "unit": id, "turn": turn, "taken": taken, "resumed": resume })),
    ))
}

/// `POST /api/jobs`: queues one job per candidate (the fields of the `enqueue` op).
pub(crate) async fn enqueue(State(app): State<Arc<App>>, Json(v): Json<Value>) -> ApiResult {
    let op = op_of("enqueue", v)?;
    let outcome = blocking(&app, move |app| app.apply(op)).await?;
    Ok(Json(outcome_json(&outcome)))
}

/// `POST /api/judge`: compares a group's finished candidates, blind (waited for).
pub(crate) async fn judge(State(app): State<Arc<App>>, Json(v): Json<Value>) -> ApiResult {
    let op = op_of("judge", v)?;
    let outcome = blocking(&app, move |app| app.apply(op)).await?;
    Ok(Json(outcome_json(&outcome)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BenchBody {
    reason: Option<String>,
}

/// `POST /api/pools/{id}/bench` and `/unbench`.
pub(crate) async fn bench(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    v: Option<Json<Value>>,
) -> ApiResult {
    bench_as(app, id, true, v).await
}

pub(crate) async fn unbench(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    v: Option<Json<Value>>,
) -> ApiResult {
    bench_as(app, id, false, v).await
}

async fn bench_as(app: Arc<App>, id: String, benched: bool, v: Option<Json<Value>>) -> ApiResult {
    let b: BenchBody = match v {
        Some(Json(v)) if !v.is_null() => body(v)?,
        _ => BenchBody::default(),
    };
    read(app, move |app| {
        let said =
            crate::pools::bench_pool_as(&app.ctx, &id, benched, b.reason, "baton serve".into())?;
        Ok(json!({ "pool": id, "benched": benched, "said": said }))
    })
    .await
}

/// What an op did, as JSON.
pub(crate) fn outcome_json(outcome: &OpOutcome) -> Value {
    match outcome {
        OpOutcome::RunCreated { run } => json!({ "outcome": "run_created", "run": run }),
        OpOutcome::Stepped {
            run,
            step,
            was_blocked,
            status,
        } => {
            let (what, turn, question) = match step {
                StepOutcome::Turn(t) => (
                    "turn",
                    Some(serde_json::to_value(t).unwrap_or_default()),
                    None,
                ),
                StepOutcome::Finished => ("finished", None, None),
                StepOutcome::Blocked { question } => ("blocked", None, Some(question.clone())),
            };
            json!({
                "outcome": "stepped", "run": run, "step": what, "turn": turn,
                "question": question, "was_blocked": was_blocked, "status": status.as_str(),
            })
        }
        OpOutcome::Resumed { run, end, last } => {
            let (end, question) = match end {
                RunEnd::Finished => ("finished", None),
                RunEnd::Blocked { question } => ("blocked", Some(question.clone())),
                RunEnd::Paused => ("paused", None),
            };
            json!({ "outcome": "resumed", "run": run, "end": end, "question": question, "last": last })
        }
        OpOutcome::Stopped {
            run,
            stop,
            requested,
        } => {
            json!({ "outcome": "stopped", "run": run, "stop": format!("{stop:?}"), "requested": requested })
        }
        OpOutcome::CancelAsked { target, outcome } => {
            json!({ "outcome": "cancel_asked", "target": format!("{target:?}"), "result": format!("{outcome:?}") })
        }
        OpOutcome::Enqueued { queued, .. } => json!({
            "outcome": "enqueued", "group": queued.group, "jobs": queued.jobs, "base": queued.base,
        }),
        OpOutcome::Judged(j) => json!({ "outcome": "judged", "judgement": j }),
    }
}
