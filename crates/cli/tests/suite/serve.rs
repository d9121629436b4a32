//! `baton serve`: the HTTP API and its live event stream, tested against a real server
//! on an ephemeral port (a child process, a real SQLite file or PostgreSQL schema), every
//! answer checked against the OpenAPI document the server itself serves.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

/// `cmd` (a `baton`) serving on a free loopback port, its stderr to `stderr`: the child
/// and the URL it printed first (`http://127.0.0.1:PORT/`).
pub(super) fn spawn(mut cmd: Command, extra: &[&str], stderr: Stdio) -> (Child, String) {
    let mut child = cmd
        .args(["serve", "--bind", "127.0.0.1:0"])
        .args(extra)
        .env_remove("BATON_TOKEN")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "baton serve: listening on http://127.0.0.1:PORT/ (database …"
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    (child, url)
}

/// A `baton serve` child on an ephemeral port, stopped (Ctrl-C) when dropped.
pub(super) struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub csrf: String,
    token: Option<String>,
}

impl Server {
    pub(super) fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_with(baton(dir), extra)
    }

    pub(super) fn start_with(cmd: Command, extra: &[&str]) -> Server {
        let (child, url) = spawn(cmd, extra, Stdio::inherit());
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let token = extra
            .iter()
            .position(|a| *a == "--token")
            .map(|i| extra[i + 1].to_string());
        let mut server = Server {
            child,
            addr,
            csrf: String::new(),
            token,
        };
        server.csrf = server.get("/api/session").1["csrf"]
            .as_str()
            .unwrap()
            .to_string();
        server
    }

    fn agent(&self) -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into()
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => req.header("authorization", format!("Bearer {t}")),
            None => req,
        }
    }

    /// GET `path`: the status and the JSON body.
    pub(super) fn get(&self, path: &str) -> (u16, Value) {
        let req = self.auth(self.agent().get(format!("http://{}{path}", self.addr)));
        let mut resp = req.call().unwrap();
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")),
        )
    }

    /// POST `body` to `path` as the page does (with the CSRF value).
    pub(super) fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_with(path, body, &[("x-baton-csrf", self.csrf.as_str())])
    }

    pub(super) fn post_with(
        &self,
        path: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut req = self.agent().post(format!("http://{}{path}", self.addr));
        if !headers.iter().any(|(k, _)| *k == "content-type") {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut resp = req.send(body.to_string()).unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}")),
        )
    }

    /// Waits until unit `unit`'s status satisfies `done`, returning it.
    pub(super) fn wait_unit(&self, unit: &str, done: impl Fn(&Value) -> bool) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, status) = self.get(&format!("/api/units/{unit}"));
            assert_eq!(code, 200, "{status}");
            if done(&status) {
                return status;
            }
            assert!(Instant::now() < until, "the unit never got there: {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGINT);
        }
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The OpenAPI document, as the server serves it.
struct Spec(Value);

impl Spec {
    fn of(server: &Server) -> Spec {
        let (code, doc) = server.get("/api/openapi.json");
        assert_eq!(code, 200);
        assert_eq!(doc["openapi"], "3.1.0");
        Spec(doc)
    }

    /// Checks `body` against what the document says `method path` answers with
    /// `status`; `path` is the document's template (`/api/runs/{id}`).
    fn check(&self, method: &str, path: &str, status: u16, body: &Value) {
        let op = &self.0["paths"][path][method];
        assert!(
            op.is_object(),
            "{method} {path} is not in the OpenAPI document"
        );
        let response = &op["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{method} {path} answered {status}, which the OpenAPI document does not list: {body}"
        );
        // A response given by reference (the shared error).
        let pointer = match response["$ref"].as_str() {
            Some(r) => format!(
                "{}/content/application~1json/schema",
                r.trim_start_matches('#')
            ),
            None => format!(
                "/paths/{}/{method}/responses/{status}/content/application~1json/schema",
                path.replace('~', "~0")
                    .replace('/', "~1")
                    .replace('{', "%7B")
                    .replace('}', "%7D")
            ),
        };
        let mut schema = self.0.clone();
        schema["$ref"] = Value::String(format!("#{pointer}"));
        schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("the schema of {method} {path} {status}: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {status} does not match the OpenAPI document: {errors:#?}\n{body:#}"
        );
    }
}

fn demo_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    run_ok(dir.path(), &["demo"]);
    dir
}

fn first_run(server: &Server) -> String {
    let (_, runs) = server.get("/api/runs");
    runs["runs"][0]["id"].as_str().unwrap().to_string()
}

#[test]
fn every_read_answers_as_the_openapi_document_says() {
    let dir = demo_dir();
    let server = Server::start(dir.path(), &[]);
    let spec = Spec::of(&server);
    let run = first_run(&server);

    let (code, session) = server.get("/api/session");
    spec.check("get", "/api/session", code, &session);
    assert_eq!(session["token_required"], false);

    let (code, runs) = server.get("/api/runs");
    spec.check("get", "/api/runs", code, &runs);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);

    let (code, detail) = server.get(&format!("/api/runs/{}", &run[..8]));
    spec.check("get", "/api/runs/{id}", code, &detail);
    let turns = detail["report"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5, "the demo's five turns");
    assert!(turns.iter().all(|t| t["budget"].as_u64().unwrap() > 0));

    let (code, events) = server.get(&format!("/api/runs/{run}/events"));
    spec.check("get", "/api/runs/{id}/events", code, &events);
    let seqs: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    let (code, briefing) = server.get(&format!("/api/runs/{run}/turns/2/briefing"));
    spec.check(
        "get",
        "/api/runs/{id}/turns/{turn}/briefing",
        code,
        &briefing,
    );
    assert_eq!(briefing["package"]["turn"], 2);

    // The budget slider: a smaller budget, a smaller briefing with more left out.
    let (code, wide) = server.get(&format!("/api/runs/{run}/compile?budget=3000"));
    spec.check("get", "/api/runs/{id}/compile", code, &wide);
    let (_, narrow) = server.get(&format!("/api/runs/{run}/compile?budget=200"));
    let tokens = |p: &Value| p["package"]["tokens"].as_u64().unwrap();
    let dropped = |p: &Value| p["package"]["dropped"].as_array().unwrap().len();
    assert!(tokens(&narrow) < tokens(&wide), "{narrow}");
    assert!(dropped(&narrow) > dropped(&wide));
    assert_eq!(narrow["package"]["budget"], 200);
    assert_eq!(wide["workers"].as_array().unwrap().len(), 5);
    let worker = wide["workers"][1].as_str().unwrap();
    let (_, for_worker) = server.get(&format!(
        "/api/runs/{run}/compile?budget=800&worker={worker}"
    ));
    assert_eq!(for_worker["package"]["worker"], worker);

    for (template, path) in [
        ("/api/runs/{id}/seats", format!("/api/runs/{run}/seats")),
        ("/api/pins", format!("/api/pins?run={run}")),
        ("/api/pins", "/api/pins".to_string()),
        ("/api/jobs", "/api/jobs".to_string()),
        ("/api/pools", "/api/pools".to_string()),
    ] {
        let (code, body) = server.get(&path);
        spec.check("get", template, code, &body);
    }

    // Errors: the status says whose fault, the message what to do next.
    let (code, err) = server.get("/api/runs/nosuchrun");
    spec.check("get", "/api/runs/{id}", code, &err);
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`baton runs`")
    );
    let (code, err) = server.get(&format!("/api/runs/{run}/turns/99/briefing"));
    spec.check("get", "/api/runs/{id}/turns/{turn}/briefing", code, &err);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no turn 99 (it has 5 turns)")
    );
    let (code, err) = server.get(&format!("/api/units/{run}"));
    spec.check("get", "/api/units/{id}", code, &err);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a unit of the assembly line")
    );
    let (code, err) = server.get("/api/nothing/here");
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    // Refused before any handler ran (a turn that is not a number): the same shape.
    let (code, err) = server.get(&format!("/api/runs/{run}/turns/two/briefing"));
    spec.check("get", "/api/runs/{id}/turns/{turn}/briefing", code, &err);
    assert_eq!(code, 400);
    let (code, err) = server.post_with(
        "/api/runs",
        Value::Null,
        &[
            ("x-baton-csrf", &server.csrf),
            ("content-type", "text/plain"),
        ],
    );
    spec.check("post", "/api/runs", code, &err);
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("Content-Type: application/json"), "{err}");
}

#[test]
fn actions_need_the_csrf_value_and_pages_of_other_sites_are_refused() {
    let dir = demo_dir();
    let server = Server::start(dir.path(), &[]);
    let spec = Spec::of(&server);
    let new_run =
        json!({"objective": "Write a haiku about handoffs", "tasks": ["Draft it", "Polish it"]});

    // No CSRF value: refused, nothing created.
    let (code, err) = server.post_with("/api/runs", new_run.clone(), &[]);
    spec.check("post", "/api/runs", code, &err);
    assert_eq!((code, err["error"]["code"].as_str()), (403, Some("csrf")));
    let (code, _) = server.post_with("/api/runs", new_run.clone(), &[("x-baton-csrf", "0")]);
    assert_eq!(code, 403);
    // Another site's page, even with the value.
    let (code, err) = server.post_with(
        "/api/runs",
        new_run.clone(),
        &[
            ("x-baton-csrf", &server.csrf),
            ("origin", "http://evil.example"),
        ],
    );
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    // A name that rebinds to 127.0.0.1.
    let req = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .get(format!("http://{}/api/runs", server.addr))
        .header("host", "evil.example");
    assert_eq!(req.call().unwrap().status().as_u16(), 403);
    assert_eq!(
        server.get("/api/runs").1["runs"].as_array().unwrap().len(),
        1
    );

    // With it: a run is created, stepped, and its turn is on record.
    let (code, created) = server.post("/api/runs", new_run);
    spec.check("post", "/api/runs", code, &created);
    let run = created["run"].as_str().unwrap().to_string();
    let (code, stepped) = server.post(&format!("/api/runs/{run}/step"), Value::Null);
    spec.check("post", "/api/runs/{id}/step", code, &stepped);
    assert_eq!(stepped["step"], "turn", "{stepped}");
    assert_eq!(stepped["turn"]["turn"], 0);
    let (_, detail) = server.get(&format!("/api/runs/{run}"));
    assert_eq!(detail["report"]["turns"].as_array().unwrap().len(), 1);

    // A body that is not the op's: 400 with what was wrong.
    let (code, err) = server.post("/api/runs", json!({"objective": "o"}));
    spec.check("post", "/api/runs", code, &err);
    assert_eq!(code, 400);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("tasks"),
        "{err}"
    );
}

#[test]
fn off_loopback_the_server_needs_a_token_and_checks_it_on_every_request() {
    let dir = demo_dir();
    let d = dir.path();
    let out = baton(d)
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a token: give --token"));

    let server = Server::start(d, &["--token", "s3cret-token"]);
    assert_eq!(server.get("/api/session").1["token_required"], true);
    // A GET with no credential but, when given, a `Cookie` header.
    let get_with = |path: &str, cookie: Option<&str>| {
        let request = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent()
            .get(format!("http://{}{path}", server.addr));
        match cookie {
            Some(c) => request.header("cookie", c).call(),
            None => request.call(),
        }
        .unwrap()
    };
    let anonymous = |path: &str| get_with(path, None);
    let mut refused = anonymous("/api/runs");
    assert_eq!(refused.status().as_u16(), 401);
    let body = refused.body_mut().read_to_string().unwrap();
    assert!(body.contains("needs its token"), "{body}");
    assert_eq!(anonymous("/api/events").status().as_u16(), 401);
    assert_eq!(anonymous("/api/runs?token=wrong").status().as_u16(), 401);
    assert_eq!(
        anonymous("/api/runs?token=s3cret-token").status().as_u16(),
        200
    );
    // The page holds no data and loads without it; opened with it, it keeps the token
    // in a cookie only this site's requests carry.
    let page = anonymous("/?token=s3cret-token");
    assert_eq!(page.status().as_u16(), 200);
    let cookie = page.headers().get("set-cookie").unwrap().to_str().unwrap();
    // Named by the port: browsers send a host's cookies to all its ports, and two
    // servers on one machine must not overwrite each other's.
    let port = server.addr.rsplit(':').next().unwrap();
    assert!(
        cookie.starts_with(&format!("baton_token_{port}=s3cret-token;"))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(anonymous("/").headers().get("set-cookie").is_none());
    let with_cookie = |cookie: &str| get_with("/api/runs", Some(cookie)).status().as_u16();
    assert_eq!(
        with_cookie(&format!("baton_token_{port}=s3cret-token")),
        200
    );
    // Another server's cookie, even with this token, is not this one's.
    assert_eq!(with_cookie("baton_token_1=s3cret-token"), 401);
    // A bearer client acts without the CSRF value (no page can make a browser send it).
    let (code, created) = server.post_with(
        "/api/runs",
        json!({"objective": "o", "tasks": ["t"]}),
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(code, 200, "{created}");
}

#[test]
fn the_api_never_returns_a_credential() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = "sk-live-do-not-leak-4f9a8b7c6d5e";
    // Real providers (never called here: reading is all this test does).
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "[[workers]]\nid = \"m1\"\nmodel = \"openai/gpt-4.1-mini\"\napi_base = \"http://127.0.0.1:9/v1\"\napi_key = \"{secret}\"\n\
             [[workers]]\nid = \"m2\"\nmodel = \"anthropic/claude-sonnet-4-5\"\napi_key_env = \"BATON_TEST_SECRET_KEY\"\n"
        ),
    )
    .unwrap();
    let mut cmd = baton(d);
    cmd.env("BATON_TEST_SECRET_KEY", secret);
    let server = Server::start_with(cmd, &[]);
    let (code, created) = server.post(
        "/api/runs",
        json!({"objective": "Summarise the design", "tasks": ["Read", "Summarise"]}),
    );
    assert_eq!(code, 200, "{created}");
    let run = created["run"].as_str().unwrap().to_string();
    for path in [
        "/api/session".to_string(),
        "/api/runs".to_string(),
        format!("/api/runs/{run}"),
        format!("/api/runs/{run}/events"),
        format!("/api/runs/{run}/compile"),
        "/api/pools".to_string(),
        "/api/jobs".to_string(),
    ] {
        let (code, body) = server.get(&path);
        assert_eq!(code, 200, "{path}: {body}");
        assert!(
            !body.to_string().contains(secret),
            "{path} returned the key"
        );
    }
}

/// An SSE client: reads `id:`/`data:` events off a raw connection.
struct Sse {
    reader: BufReader<TcpStream>,
}

impl Sse {
    fn connect(addr: &str, path: &str, last_event_id: Option<&str>) -> Sse {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut w = stream.try_clone().unwrap();
        let last = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        write!(
            w,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{last}\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        // Headers.
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        Sse { reader }
    }

    /// The next event: its id and its data. Chunked transfer framing is skipped (a
    /// chunk-size line is never `id:` or `data:`).
    fn next(&mut self) -> (i64, Value) {
        let (mut id, mut data, mut kind) = (None, None, None::<String>);
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).unwrap();
            assert!(n > 0, "the stream ended");
            let line = line.trim_end();
            if let Some(v) = line.strip_prefix("event:") {
                kind = Some(v.trim().to_string());
            } else if let Some(v) = line
                .strip_prefix("id: ")
                .or_else(|| line.strip_prefix("id:"))
            {
                id = v.trim().parse().ok();
            } else if let Some(v) = line
                .strip_prefix("data: ")
                .or_else(|| line.strip_prefix("data:"))
            {
                data = Some(serde_json::from_str(v.trim()).unwrap());
            } else if line.is_empty() {
                // The stream's `start` event says where it starts; the tests want the
                // protocol's events.
                if let (Some(i), Some(d), None) = (id, data.take(), kind.take()) {
                    return (i, d);
                }
            }
        }
    }

    fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Vec<(i64, Value)> {
        let mut seen = Vec::new();
        loop {
            let e = self.next();
            let done = wanted(&e.1);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

#[test]
fn a_committed_turn_reaches_a_connected_client_and_a_reconnect_replays_exactly_what_was_missed() {
    let dir = demo_dir();
    let server = Server::start(dir.path(), &[]);
    let (_, created) = server.post(
        "/api/runs",
        json!({"objective": "Plan a migration", "tasks": ["Inventory", "Order", "Cut over", "Verify"]}),
    );
    let run = created["run"].as_str().unwrap().to_string();
    let mut sse = Sse::connect(&server.addr, &format!("/api/events?run={run}"), None);
    let (_, stepped) = server.post(&format!("/api/runs/{run}/step"), Value::Null);
    assert_eq!(stepped["step"], "turn");
    let seen = sse.until(|e| e["type"] == "turn_committed");
    let types: Vec<&str> = seen
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"turn_started"), "{types:?}");
    assert!(
        types.contains(&"package_compiled") && types.contains(&"model_called"),
        "{types:?}"
    );
    assert!(
        seen.iter()
            .all(|(_, e)| e["run_id"] == run.as_str() && e["turn"] == 0)
    );
    // Ids are the events' cursors, increasing.
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
    let last_seen = seen.last().unwrap().0;
    drop(sse);

    // Missed while away: two turns, and another run's events (filtered out).
    let (_, other) = server.post("/api/runs", json!({"objective": "o", "tasks": ["t"]}));
    let other = other["run"].as_str().unwrap().to_string();
    server.post(&format!("/api/runs/{run}/step"), Value::Null);
    server.post(&format!("/api/runs/{other}/step"), Value::Null);
    server.post(&format!("/api/runs/{run}/step"), Value::Null);

    let mut again = Sse::connect(
        &server.addr,
        &format!("/api/events?run={run}"),
        Some(&last_seen.to_string()),
    );
    let replayed = again.until(|e| e["type"] == "turn_committed" && e["turn"] == 2);
    // Exactly the run's events after the last one seen: none twice, none skipped.
    let (_, stored) = server.get(&format!("/api/runs/{run}/events"));
    let last_seq = seen.last().unwrap().1["seq"].as_u64().unwrap();
    let expected: Vec<u64> = stored["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .filter(|s| *s > last_seq)
        .collect();
    let got: Vec<u64> = replayed
        .iter()
        .map(|(_, e)| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(got, expected);
    assert!(replayed.iter().all(|(_, e)| e["run_id"] == run.as_str()));

    // Then live again on the same connection.
    server.post(&format!("/api/runs/{run}/step"), Value::Null);
    let live = again.until(|e| e["type"] == "turn_committed");
    assert_eq!(live.last().unwrap().1["turn"], 3);
}

#[test]
fn a_unit_started_over_the_api_stops_on_its_question_is_answered_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let spec = Spec::of(&server);
    let (code, started) = server.post("/api/units", json!({"description": "Fix it"}));
    spec.check("post", "/api/units", code, &started);
    assert_eq!(code, 202);
    let unit = started["unit"].as_str().unwrap().to_string();
    let mut sse = Sse::connect(
        &server.addr,
        &format!("/api/events?run={unit}&after=0"),
        None,
    );
    let blocked = server.wait_unit(&unit, |s| {
        s["status"] == "blocked" && !s["running_here"].as_bool().unwrap()
    });
    spec.check("get", "/api/units/{id}", 200, &blocked);
    assert!(
        blocked["question"]
            .as_str()
            .unwrap()
            .contains("What should \"Fix it\" change"),
        "{blocked}"
    );
    // The stream carried the whole unit so far, the question last.
    let seen = sse.until(|e| e["type"] == "run_blocked");
    assert_eq!(seen[0].1["type"], "run_created");

    let (code, answered) = server.post(
        &format!("/api/units/{unit}/answer"),
        json!({"answer": "Return 429 after 100 requests a minute per key"}),
    );
    spec.check("post", "/api/units/{id}/answer", code, &answered);
    assert_eq!(code, 202, "{answered}");
    let done = server.wait_unit(&unit, |s| s["status"] == "finished");
    assert!(done["turns"].as_u64().unwrap() > blocked["turns"].as_u64().unwrap());
    assert!(
        done["verdicts"][0].as_str().unwrap().ends_with("APPROVED"),
        "{done}"
    );
    // Answering again: refused, with why.
    let (code, err) = server.post(
        &format!("/api/units/{unit}/answer"),
        json!({"answer": "twice"}),
    );
    spec.check("post", "/api/units/{id}/answer", code, &err);
    assert_eq!(code, 409, "{err}");
    assert_eq!(err["error"]["code"], "not_waiting", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not waiting for an answer"),
        "{err}"
    );
    // A plain run asked nothing and is no unit: the request names the wrong run (400).
    let (_, created) = server.post("/api/runs", json!({"objective": "o", "tasks": ["t"]}));
    let plain = created["run"].as_str().unwrap();
    let (code, err) = server.post(
        &format!("/api/units/{plain}/answer"),
        json!({"answer": "yes"}),
    );
    spec.check("post", "/api/units/{id}/answer", code, &err);
    assert_eq!(
        (code, &err["error"]["code"]),
        (400, &json!("usage")),
        "{err}"
    );
}

#[test]
fn two_servers_on_one_postgresql_show_the_same_runs_and_events_as_they_are_committed() {
    let schema = super::postgres::Schema::new("serve");
    let url = schema.url();
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let on = |d: &Path| {
        let mut cmd = baton(d);
        cmd.env("BATON_DB", &url);
        cmd
    };
    let a = Server::start_with(on(a_dir.path()), &[]);
    // B reads the log only once a minute unless PostgreSQL tells it of a commit: the
    // turn below reaches its client only by that notification (the read times out at
    // 30 s otherwise).
    let mut b_cmd = on(b_dir.path());
    b_cmd.env("BATON_SERVE_POLL_MS", "60000"); // as --poll-ms 60000
    let b = Server::start_with(b_cmd, &[]);
    let (_, created) = a.post(
        "/api/runs",
        json!({"objective": "Shared", "tasks": ["One", "Two"]}),
    );
    let run = created["run"].as_str().unwrap().to_string();
    let mut on_b = Sse::connect(&b.addr, &format!("/api/events?run={run}"), None);
    a.post(&format!("/api/runs/{run}/step"), Value::Null);
    let asked = Instant::now();
    let seen = on_b.until(|e| e["type"] == "turn_committed");
    assert_eq!(seen.last().unwrap().1["run_id"], run.as_str());
    // Not a latency target (that is the benchmark's): far below B's minute of polling.
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "B heard of the commit only after {:?}",
        asked.elapsed()
    );
    let (_, from_a) = a.get(&format!("/api/runs/{run}"));
    let (_, from_b) = b.get(&format!("/api/runs/{run}"));
    assert_eq!(from_a["report"]["turns"], from_b["report"]["turns"]);
    assert_eq!(from_a["state"], from_b["state"]);
}

/// `baton line --repo . --gate …` over the API: the unit builds on a branch of its own
/// in a worktree of the server's repository, the gate sends it back once, and it ends
/// approved with the user's checkout untouched.
#[test]
fn a_unit_in_a_repository_started_over_the_api_builds_on_its_branch_and_passes_its_gate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let base = super::line::repo_with_build_agent_at(d, agents.path(), "", 0);
    let server = Server::start(d, &[]);
    let spec = Spec::of(&server);

    // Gates without a repository: refused, saying what is missing.
    let (code, err) = server.post(
        "/api/units",
        json!({"description": "Add rate limiting", "gates": ["check=true"]}),
    );
    spec.check("post", "/api/units", code, &err);
    assert_eq!(code, 400, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("give \"repo\" too"),
        "{err}"
    );

    // A path that is no repository, or a base it lacks: the request's mistake (400).
    for (repo, base) in [("no-such-dir", None), (".", Some("no-such-branch"))] {
        let (code, err) = server.post(
            "/api/units",
            json!({"description": "Add rate limiting", "repo": repo, "base": base}),
        );
        spec.check("post", "/api/units", code, &err);
        assert_eq!(
            (code, &err["error"]["code"]),
            (400, &json!("usage")),
            "{err}"
        );
    }

    let (code, started) = server.post(
        "/api/units",
        json!({
            "description": "Add rate limiting to the public API",
            "repo": ".",
            "gates": ["check=grep -q fixed impl.txt"],
        }),
    );
    spec.check("post", "/api/units", code, &started);
    assert_eq!(code, 202, "{started}");
    let unit = started["unit"].as_str().unwrap().to_string();
    let branch = format!("baton/job-{unit}");
    assert!(
        started["said"]
            .as_str()
            .unwrap()
            .contains(&format!("on branch {branch} (1 gate(s))")),
        "{started}"
    );
    let done = server.wait_unit(&unit, |s| s["status"] == "finished");
    assert!(
        done["verdicts"][0].as_str().unwrap().ends_with("APPROVED"),
        "{done}"
    );
    assert_eq!(git(d, &["rev-parse", "HEAD"]).trim(), base);
    assert!(!d.join("impl.txt").exists());
    assert_eq!(
        git(d, &["show", &format!("{branch}:impl.txt")]),
        "fixed after the gate failed\n"
    );
}

#[test]
fn jobs_queued_over_the_api_are_shown_with_their_commits_and_outbox() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(
        d,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    );
    let server = Server::start(d, &[]);
    let spec = Spec::of(&server);
    let (code, queued) = server.post(
        "/api/jobs",
        json!({"objective": "Write release notes", "tasks": ["Draft the notes"], "candidates": ["worker-1", "worker-2"]}),
    );
    spec.check("post", "/api/jobs", code, &queued);
    assert_eq!(queued["outcome"], "enqueued", "{queued}");
    let jobs: Vec<String> = queued["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap().to_string())
        .collect();
    assert_eq!(jobs.len(), 2);
    let (code, listed) = server.get("/api/jobs");
    spec.check("get", "/api/jobs", code, &listed);
    assert!(
        listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["status"] == "queued")
    );

    run_ok(d, &["work"]);
    for job in &jobs {
        let (code, detail) = server.get(&format!("/api/jobs/{job}"));
        spec.check("get", "/api/jobs/{id}", code, &detail);
        assert_eq!(detail["job"]["status"], "outbox", "{detail}");
        assert_eq!(detail["patch"]["cut"], false);
        assert!(detail["job"]["outbox"].is_object());
    }
    let (code, err) = server.get("/api/jobs/jnosuch");
    spec.check("get", "/api/jobs/{id}", code, &err);
    assert_eq!(code, 404);
}

#[test]
fn a_stream_whose_client_left_ends_even_when_its_run_is_quiet() {
    let dir = demo_dir();
    let server = Server::start(dir.path(), &[]);
    let run = first_run(&server);
    let streams = || server.get("/api/session").1["streams"].as_u64().unwrap();
    assert_eq!(streams(), 0);
    {
        let _quiet = Sse::connect(&server.addr, &format!("/api/events?run={run}"), None);
        let _all = Sse::connect(&server.addr, "/api/events", None);
        let until = Instant::now() + Duration::from_secs(5);
        while streams() != 2 {
            assert!(Instant::now() < until, "the two streams never showed");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Both clients gone; the finished run will never send another event.
    let until = Instant::now() + Duration::from_secs(5);
    while streams() != 0 {
        assert!(
            Instant::now() < until,
            "{} streams outlived their clients",
            streams()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
