//! What each kind of call costs beyond its briefing, in o200k tokens (the default
//! estimator): the prompts' own text around an empty briefing, and the JSON Schema a
//! provider receives besides in `structured = "schema"` mode (compact, as serialised).
//! The README's "What a call costs beyond the briefing" quotes this.
//!
//! `cargo run -p baton-core --example call_overhead`

use baton_core::claims;
use baton_core::compiler::HandoffPackage;
use baton_core::ids::WorkerId;
use baton_core::prompt::{self, Prompt};
use baton_core::tokens::{BpeEstimator, TokenEstimator};

fn main() {
    let package = HandoffPackage::empty(WorkerId::new("w"));
    let bpe = BpeEstimator;
    let count = |p: &Prompt| bpe.count(&p.system) + bpe.count(&p.user);
    let schema = |v: &serde_json::Value| bpe.count(&v.to_string());
    println!(
        "system prompt: {}",
        bpe.count(&prompt::combined_prompt(&package).system)
    );
    println!(
        "combined call (the default): {} + schema {}",
        count(&prompt::combined_prompt(&package)),
        schema(claims::turn_answer_schema())
    );
    println!(
        "execute call (calls = \"two\"): {} + schema {}",
        count(&prompt::execute_prompt(&package)),
        schema(claims::worker_result_schema())
    );
    println!(
        "handoff call (calls = \"two\"): {} + schema {}, besides the result it quotes",
        count(&prompt::handoff_prompt(&package, "")),
        schema(claims::handoff_report_schema())
    );
    println!(
        "coding-agent call: {}",
        count(&prompt::agent_prompt(&package, &[]))
    );
}
