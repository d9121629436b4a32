//! The `command` provider's own overhead per call, against a child that does no work:
//! `echo` printing a small claim.
//!
//! `spawn/raw` is `std::process::Command::output()` of the same child — the floor any
//! process-based worker pays. `complete/*` is a whole `Gateway::complete`: workspace
//! checks, scratch directories, the briefing (stdin or file), the minimal
//! environment, spawning in a new session, two reader threads copying to files, the
//! watcher, and finding and saving the claim. The difference is the provider's cost.

use std::hint::black_box;
use std::process::Command;

use baton_core::turn::CallKind;
use baton_gateway::{Gateway, ModelRequest, Options, for_model};
use criterion::{Criterion, criterion_group, criterion_main};

const CLAIM: &str = r#"{"summary":"migrated the ledger calls","last_action":"wrote ledger.rs","completed":["ledger client"]}"#;

fn briefing() -> String {
    let mut text = String::from("# Assigned task\nMigrate the billing module.\n\n# Progress\n");
    while text.len() < 6 * 1024 {
        text.push_str("- decided: keep the old invoice ids; reason: external references.\n");
    }
    text
}

fn gateway(command: &str) -> std::sync::Arc<dyn Gateway> {
    let mut options = Options::new();
    options.insert("command".into(), command.into());
    for_model("command/bench", &options).unwrap_or_else(|e| panic!("{e}"))
}

fn bench(c: &mut Criterion) {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let user = briefing();
    let request = ModelRequest {
        model: "bench",
        system: baton_core::prompt::SYSTEM_PROMPT,
        user: &user,
        call: CallKind::Execute,
        turn: 1,
        schema: baton_core::claims::worker_result_schema(),
        max_tokens: None,
        temperature: None,
        workspace: Some(workspace.path()),
        cancel: None,
        output: None,
        hashed: None,
    };
    let quoted = format!("echo '{CLAIM}'");
    let stdin = gateway(&quoted);
    let file = gateway(&format!("echo '{CLAIM}' {{briefing_file}}"));
    // The file variant prints the path after the claim; the claim is still the last
    // JSON object on stdout.
    for g in [&stdin, &file] {
        let r = g.complete(&request).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.text.contains("migrated"));
    }

    let mut group = c.benchmark_group("command");
    group.sample_size(50);
    group.bench_function("spawn/raw", |b| {
        b.iter(|| {
            let out = Command::new("echo")
                .arg(CLAIM)
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            black_box(out)
        })
    });
    // Every call of a run has its own output directory, as in a real run (rewriting
    // the same files would measure the filesystem's truncation instead).
    let mut turn = 1;
    for (name, g) in [
        ("complete/briefing_on_stdin", &stdin),
        ("complete/briefing_file", &file),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                turn += 1;
                let request = ModelRequest { turn, ..request };
                black_box(g.complete(&request).unwrap_or_else(|e| panic!("{e}")))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
