//! End to end with the real aider CLI (the version the `aider` preset is proven with,
//! installed by `.ci/agents/install-aider.sh`): `baton enqueue` + `baton work` fix a
//! failing test in a small repository, with aider talking to a scripted
//! OpenAI-compatible server on 127.0.0.1 (`tests/agents/fake_openai_chat.py`).
//!
//! The agent's environment names that server as its HTTP(S) proxy too, so any attempt
//! to reach the internet (update checks, price lists, URL scraping, a Playwright
//! download) lands in the server's log, and the test fails on it.
//!
//! Without the CLI the test says how to install it and passes, unless
//! `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use baton_engine::jobs::decode_outbox;
use baton_store::{SqliteStore, Store};
use serde_json::{Value, json};

use super::agent_support::*;
use super::*;

const AIDER_VERSION: &str = "0.86.2";
const KEY: &str = "sk-baton-aider-e2e-0123456789";
/// The model as aider names it (`openai/` picks litellm's OpenAI-compatible client).
const MODEL: &str = "openai/baton-fake";
const WORKER: Worker = Worker {
    id: "aider",
    preset: "aider",
    key: KEY,
    // The preset's scratch paths, ignored through the shared exclude file.
    scratch: &[".aider"],
};
/// The SUMMARY section of the model's reply, which baton takes as the turn's summary.
const SUMMARY: &str = "add() in calc.py subtracted its arguments; it now returns their sum, so the \
                       unittest suite passes.";

/// The aider installed by `.ci/agents/install-aider.sh` (a virtualenv), if it is.
fn aider_bin_dir() -> Option<PathBuf> {
    installed_agent(
        &format!("aider {AIDER_VERSION}"),
        &format!("aider-{AIDER_VERSION}"),
        "bin/aider",
        ".ci/agents/install-aider.sh",
    )
}

/// `baton` with aider's key and none of the variables of the developer's own that
/// aider or litellm would read.
fn agent(s: &Setup, bin: &Path) -> Command {
    let mut cmd = baton_for_agent(s, bin);
    cmd.env("OPENAI_API_KEY", KEY)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AIDER_MODEL")
        .env_remove("OPENAI_API_BASE")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

/// The edit aider must apply, in its SEARCH/REPLACE format, and the worker-contract
/// sections baton reads the claim from. The summary is longer than 80 columns: aider
/// wraps its output there unless told otherwise.
fn edit_reply() -> String {
    format!(
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n\n\
     SUMMARY: {SUMMARY}\nCHANGES: calc.py: add() returns a + b\n"
    )
}

#[test]
fn aider_fixes_a_failing_test_through_the_preset_and_stays_in_its_worktree() {
    let Some(bin) = aider_bin_dir() else { return };
    let s = setup();
    // What a user of a local model tells aider about it: its edit format, and its
    // context window (without it aider downloads litellm's price list to look it up).
    std::fs::write(
        s.home.join(".aider.model.settings.yml"),
        format!("- name: {MODEL}\n  edit_format: diff\n"),
    )
    .unwrap();
    std::fs::write(
        s.home.join(".aider.model.metadata.json"),
        format!(
            r#"{{"{MODEL}": {{"max_input_tokens": 32000, "max_output_tokens": 4000, "input_cost_per_token": 0, "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}}}}"#
        ),
    )
    .unwrap();
    let home_before = files(&s.home, &[]);

    // The model: the edit once aider has put calc.py's content in the chat; before
    // that (and after), it names the file it needs, which aider adds by itself.
    let fake = FakeServer::start(
        "fake_openai_chat.py",
        &s.root,
        &json!({"replies": [
            {"requires": "    return a - b", "once": true, "content": edit_reply()},
            {"content": "To fix this I need to edit calc.py."},
        ]}),
        None,
    );
    let extra_env = format!(
        ", AIDER_MODEL = \"{MODEL}\", OPENAI_API_BASE = \"{}/v1\"",
        fake.url()
    );
    write_roster(&s, &WORKER, &fake, &extra_env, "");
    let before = outside(&s);

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin));
    let wt = assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, SUMMARY, &before);

    // aider did write its scratch files in the worktree; they stayed out of the commit.
    assert!(wt.join(".aider.chat.history.md").exists());
    assert!(!wt.join(".gitignore").exists(), "aider edited .gitignore");

    // aider's own lines (banner, `Tokens: …`, `Applied edit to …`) became neither
    // issues nor part of the claim; the contract sections did.
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(outbox.worktree, wt);
    let state = store.load_state(job.run_id.as_ref().unwrap()).unwrap();
    assert!(state.issues.is_empty(), "{:?}", state.issues);
    let state_json = serde_json::to_string(&state).unwrap();
    for line in ["Tokens: ", "Applied edit to", "Aider v", "Repo-map:"] {
        assert!(!state_json.contains(line), "{line} reached the state");
    }
    let claim: Value = serde_json::from_str(
        &std::fs::read_to_string(wt.join(".baton/output/turn-0-execute/claim.json")).unwrap(),
    )
    .unwrap();
    let message = claim["final_message"].as_str().unwrap();
    for line in [
        "Tokens: ",
        "Applied edit",
        "Aider v",
        "Analytics have been",
        "edit format",
        "Repo-map:",
    ] {
        assert!(
            !message.contains(line),
            "{line} in the final message: {message}"
        );
    }
    // Not wrapped at 80 columns.
    assert!(
        message.contains("it now returns their sum, so the unittest suite passes."),
        "{message}"
    );
    assert!(claim["notes"].is_object(), "{claim}");

    // Nothing appeared in HOME and TMPDIR but aider's own records under ~/.aider/,
    // and the user's model files there are as they were.
    let home_after = files(&s.home, &[]);
    let tmp_after = files(&s.tmp, &[]);
    for (path, content) in &home_before {
        assert_eq!(
            home_after.get(path),
            Some(content),
            "{} changed",
            path.display()
        );
    }
    let appeared: Vec<&PathBuf> = home_after
        .keys()
        .filter(|p| !home_before.contains_key(*p))
        .chain(tmp_after.keys())
        .collect();
    assert!(
        appeared
            .iter()
            .all(|p| p.starts_with(s.home.join(".aider"))),
        "files appeared outside the worktree: {appeared:?}"
    );

    // The server saw the model and nothing else: chat completions for the model, with
    // the worker's key, non-streaming, the briefing in the first one.
    let requests = fake.model_requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r["method"], "POST", "not a model call: {r}");
        assert_eq!(r["path"], "/v1/chat/completions", "not a model call: {r}");
        assert_eq!(r["authorization"], format!("Bearer {KEY}"));
        assert_eq!(r["body"]["model"], "baton-fake");
        assert_ne!(r["body"]["stream"], true);
    }
    assert!(requests[0].to_string().contains(TASK), "{}", requests[0]);
}
