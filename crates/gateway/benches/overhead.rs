//! Gateway overhead per model call: building the request (a ~6 KB briefing plus the
//! claim schema), reading the response, and the bookkeeping around them — against a
//! local keep-alive server that answers at once.
//!
//! `round_trip/raw` is a trivial POST through a bare `ureq` agent to the same server;
//! `round_trip/<provider>` is a full `Gateway::complete`. Their difference is the
//! gateway's own cost plus moving the bigger body over loopback; `build/*` and
//! `parse/*` measure the gateway's work with no network at all.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use baton_core::turn::CallKind;
use baton_gateway::providers::ProviderKind;
use baton_gateway::{Credential, Gateway, HttpGateway, ModelRequest, Options};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

const OPENAI_REPLY: &str = r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\"summary\":\"migrated the ledger calls\",\"decisions\":[{\"text\":\"keep ids\",\"reason\":\"external refs\"}],\"completed\":[\"ledger client\"]}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1900,"completion_tokens":120,"prompt_tokens_details":{"cached_tokens":1024}}}"#;

fn anthropic_reply() -> String {
    json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "submit_claim",
            "input": {"summary": "migrated the ledger calls", "decisions": [{"text": "keep ids", "reason": "external refs"}], "completed": ["ledger client"]}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 120, "cache_read_input_tokens": 1800}
    })
    .to_string()
}

fn gemini_reply() -> String {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "{\"summary\":\"migrated the ledger calls\",\"decisions\":[{\"text\":\"keep ids\",\"reason\":\"external refs\"}],\"completed\":[\"ledger client\"]}"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1900, "candidatesTokenCount": 120, "cachedContentTokenCount": 1024}
    })
    .to_string()
}

/// A keep-alive HTTP/1.1 server answering every request with the reply for its path.
fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("addr: {e}"));
    let (anthropic, gemini) = (anthropic_reply(), gemini_reply());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (a, g) = (anthropic.clone(), gemini.clone());
            std::thread::spawn(move || serve(stream, &a, &g));
        }
    });
    format!("http://{addr}")
}

fn serve(stream: TcpStream, anthropic: &str, gemini: &str) {
    let _ = stream.set_nodelay(true);
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':')
                && n.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        body.resize(length, 0);
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = if path.ends_with("/messages") {
            anthropic
        } else if path.contains(":generateContent") {
            gemini
        } else {
            OPENAI_REPLY
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn briefing() -> String {
    let mut text = String::from(
        "# Assigned task\nMigrate the billing module to the new ledger API.\n\n# Progress\n",
    );
    while text.len() < 6 * 1024 {
        text.push_str(
            "- decided: keep the old invoice ids; reason: external references depend on them.\n",
        );
    }
    text
}

fn gateway(kind: ProviderKind, base: &str, key: &str) -> HttpGateway {
    let mut options = Options::new();
    let base = match kind {
        ProviderKind::OpenAi => format!("{base}/v1"),
        _ => base.to_string(),
    };
    options.insert("api_base".into(), base.into());
    let credential = Credential::new(key).unwrap_or_else(|e| panic!("{e}"));
    HttpGateway::new(kind, "bench-model", &options, Some(credential))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn overhead(c: &mut Criterion) {
    let base = start_server();
    let user = briefing();
    let request = ModelRequest {
        model: "bench-model",
        system: "You are a careful engineer. Answer with JSON matching the schema.",
        user: &user,
        call: CallKind::Execute,
        turn: 3,
        schema: baton_core::claims::worker_result_schema(),
        max_tokens: Some(4096),
        temperature: Some(0.2),
        workspace: None,
        cancel: None,
        output: None,
        hashed: None,
    };
    let providers = [
        (
            "openai",
            ProviderKind::OpenAi,
            "sk-bench",
            OPENAI_REPLY.to_string(),
        ),
        (
            "anthropic",
            ProviderKind::Anthropic,
            "sk-ant-bench",
            anthropic_reply(),
        ),
        ("gemini", ProviderKind::Gemini, "AIza-bench", gemini_reply()),
    ];

    let mut build = c.benchmark_group("build");
    for (name, kind, key, _) in &providers {
        let gw = gateway(*kind, &base, key);
        build.bench_function(*name, |b| {
            b.iter(|| black_box(gw.request_body(black_box(&request))))
        });
    }
    build.finish();

    let mut parse = c.benchmark_group("parse");
    for (name, kind, key, reply) in &providers {
        let gw = gateway(*kind, &base, key);
        parse.bench_function(*name, |b| {
            b.iter(|| black_box(gw.read_reply(200, &[], black_box(reply))))
        });
    }
    parse.finish();

    let mut trip = c.benchmark_group("round_trip");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let raw_url = format!("{base}/v1/chat/completions");
    trip.bench_function("raw", |b| {
        b.iter(|| {
            let mut response = agent
                .post(&raw_url)
                .header("content-type", "application/json")
                .send("{}")
                .unwrap_or_else(|e| panic!("{e}"));
            black_box(response.body_mut().read_to_vec().unwrap_or_default())
        })
    });
    for (name, kind, key, _) in &providers {
        let gw = gateway(*kind, &base, key);
        trip.bench_function(*name, |b| {
            b.iter(|| {
                black_box(
                    gw.complete(black_box(&request))
                        .unwrap_or_else(|e| panic!("{e}")),
                )
            })
        });
    }
    trip.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = overhead
}
criterion_main!(benches);
