use super::*;

#[test]
fn toml_and_json_rosters_parse_with_defaults() {
    let toml = r#"
budget = 1500
[[workers]]
id = "a"
model = "mock/x"
[[workers]]
id = "b"
model = "mock/y"
family = "other"
enabled = false
options = { delay_ms = 5 }
calls = "two"
"#;
    let cfg = parse_file("baton.toml", toml).unwrap();
    let roster = cfg.roster.unwrap();
    assert_eq!(cfg.budget, Some(1500));
    assert_eq!(roster.workers[0].family, "mock");
    assert_eq!(roster.workers[0].max_retries, DEFAULT_MAX_RETRIES);
    assert!(!roster.workers[1].enabled);
    assert_eq!(roster.workers[1].options["delay_ms"], 5);
    assert_eq!(roster.workers[0].calls, None);
    assert_eq!(roster.workers[1].calls, Some(Calls::Two));

    let json = r#"{"workers":[{"id":"a","model":"mock/x","temperature":0.5}]}"#;
    let cfg = parse_file("r.json", json).unwrap();
    assert_eq!(cfg.roster.unwrap().workers[0].temperature, Some(0.5));
}

#[test]
fn bad_rosters_say_what_is_wrong() {
    let dup = "[[workers]]\nid = \"a\"\nmodel = \"mock/x\"\n[[workers]]\nid = \"a\"\nmodel = \"mock/y\"\n";
    let e = parse_file("baton.toml", dup).unwrap_err().to_string();
    assert!(e.contains("appears twice"), "{e}");
    let unknown = "[[workers]]\nid = \"a\"\nmodel = \"acme/x\"\n";
    let e = parse_file("baton.toml", unknown).unwrap_err().to_string();
    assert!(e.contains("unknown provider \"acme\""), "{e}");
    let three = "[[workers]]\nid = \"a\"\nmodel = \"mock/x\"\ncalls = \"three\"\n";
    let e = parse_file("baton.toml", three).unwrap_err().to_string();
    assert!(
        e.contains("three") && e.contains("one") && e.contains("two"),
        "{e}"
    );
    let agent = "[[workers]]\nid = \"a\"\nmodel = \"command/claude\"\ncalls = \"two\"\n";
    let e = parse_file("baton.toml", agent).unwrap_err().to_string();
    assert!(e.contains("runs once per turn"), "{e}");
    let typo = "[[workers]]\nid = \"a\"\nmodle = \"mock/x\"\n";
    let e = parse_file("baton.toml", typo).unwrap_err().to_string();
    assert!(e.contains("modle"), "{e}");
    let zero = "[[workers]]\nid = \"a\"\nmodel = \"llamacpp/x\"\ncontext_window = 0\n";
    let e = parse_file("baton.toml", zero).unwrap_err().to_string();
    assert!(e.contains("context_window = 0"), "{e}");
}

/// Regression: `api_key_env = ""` was taken as a variable named "" and failed only
/// when the run's first call was built, as an authentication error ("environment
/// variable  is not set"). It is refused when the roster is read, saying what to
/// write instead.
#[test]
fn an_empty_api_key_env_is_refused_with_what_to_write() {
    for roster in [
        "[[workers]]\nid = \"a\"\nmodel = \"openai/gpt-4.1\"\napi_key_env = \"\"\n",
        "[[workers]]\nid = \"a\"\nmodel = \"openai/gpt-4.1\"\napi_key_env = \"  \"\n",
        "[[workers]]\nid = \"a\"\nmodel = \"openai/gpt-4.1\"\noptions = { api_key_env = \"\" }\n",
    ] {
        let e = parse_file("baton.toml", roster).unwrap_err();
        assert!(matches!(e, Error::ConfigFile { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("baton.toml")
                && e.contains("worker a")
                && e.contains("api_key_env is empty")
                && e.contains("api_key_env = \"OPENAI_API_KEY\""),
            "{e}"
        );
    }
}

#[test]
fn a_workers_context_window_is_read_from_the_roster() {
    let toml = "[[workers]]\nid = \"a\"\nmodel = \"llamacpp/x\"\ncontext_window = 8192\n";
    let roster = parse_file("baton.toml", toml).unwrap().roster.unwrap();
    assert_eq!(roster.workers[0].context_window, Some(8192));
}

#[test]
fn the_scaffold_is_a_valid_roster() {
    let cfg = parse_file("baton.toml", &scaffold(3)).unwrap();
    assert_eq!(cfg.roster.unwrap().workers.len(), 3);
}

fn refusal(toml: &str) -> String {
    parse_file("baton.toml", toml).unwrap_err().to_string()
}

#[test]
fn an_unknown_estimator_in_the_file_is_refused_when_the_file_is_read() {
    // Regression: the file's estimator was a string, refused only when a run was
    // created with it (`baton workers` and a roster check passed it).
    let e = refusal("estimator = \"bpee\"\n");
    assert!(
        e.contains("estimator") && e.contains("`bpe`") && e.contains("`heuristic`"),
        "{e}"
    );
    let file = parse_file("baton.toml", "estimator = \"heuristic\"\n").unwrap();
    assert_eq!(file.estimator, Some(EstimatorKind::Heuristic));
}

#[test]
fn settings_stored_when_the_estimator_was_a_string_still_load() {
    // The `settings` of a run's stored configuration, as runs stored them before
    // the estimator was typed: read as they are, and written back the same.
    for (stored, kind) in [
        (
            r#"{"budget":2000,"estimator":"heuristic","repair_attempts":1}"#,
            EstimatorKind::Heuristic,
        ),
        (
            r#"{"budget":3000,"total_budget":9000,"estimator":"bpe","repair_attempts":0}"#,
            EstimatorKind::Bpe,
        ),
    ] {
        let settings: RunSettings = serde_json::from_str(stored).unwrap();
        assert_eq!(settings.estimator, kind);
        assert_eq!(serde_json::to_string(&settings).unwrap(), stored);
    }
    // A name no build knows is a corrupt configuration, named, not a default.
    let e = serde_json::from_str::<RunSettings>(r#"{"budget":2000,"estimator":"x"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `x`"), "{e}");
}

#[test]
fn a_typo_in_an_http_workers_options_is_refused_with_the_nearest_key() {
    // Regression: `timeuot_s` was only caught when a run was created; `baton
    // workers` and a roster check passed it, and nothing suggested `timeout_s`.
    let e = refusal(
        "[[workers]]\nid = \"gpt\"\nmodel = \"openai/gpt-4.1-mini\"\noptions = { timeuot_s = 10 }\n",
    );
    for part in [
        "worker gpt",
        "unknown option \"timeuot_s\"",
        "openai",
        "did you mean \"timeout_s\"?",
        "api_base, api_key_env, structured, strict_schema, max_tokens, connect_timeout_s, timeout_s",
    ] {
        assert!(e.contains(part), "missing {part:?} in: {e}");
    }
}

#[test]
fn unknown_options_of_command_mock_scripted_and_replayed_workers_are_refused() {
    let e = refusal(
        "[[workers]]\nid = \"agent\"\nmodel = \"command/claude\"\noptions = { preset = \"claude\", sandbx = \"bwrap\" }\n",
    );
    assert!(
        e.contains("worker agent")
            && e.contains("unknown option \"sandbx\" for provider command")
            && e.contains("did you mean \"sandbox\"?")
            && e.contains("sandbox_hide"),
        "{e}"
    );
    let e = refusal("[[workers]]\nid = \"m\"\nmodel = \"mock/x\"\noptions = { dealy_ms = 5 }\n");
    assert!(
        e.contains("worker m")
            && e.contains("unknown option \"dealy_ms\" for provider mock")
            && e.contains("did you mean \"delay_ms\"?"),
        "{e}"
    );
    let e =
        refusal("[[workers]]\nid = \"m\"\nmodel = \"mock/x\"\noptions = { temperature = 0.2 }\n");
    assert!(
        e.contains("mock accepts: delay_ms") && e.contains("setting of the worker itself"),
        "{e}"
    );
    let e = refusal(
        "[[workers]]\nid = \"s\"\nmodel = \"scripted/x\"\noptions = { script = \"a.jsonl\", scirpt = \"b.jsonl\" }\n",
    );
    assert!(e.contains("did you mean \"script\"?"), "{e}");
    let e =
        refusal("[[workers]]\nid = \"m\"\nmodel = \"mock/x\"\napi_base = \"http://127.0.0.1:9\"\n");
    assert!(
        e.contains("unknown option \"api_base\" for provider mock")
            && e.contains("`api_base` is set on the worker, and provider mock does not use it"),
        "{e}"
    );
    let e = refusal(
        "[[workers]]\nid = \"r\"\nmodel = \"anthropic/claude\"\noptions = { replay = \"run.jsonl\", timeout = 5 }\n",
    );
    assert!(
        e.contains("unknown option \"timeout\" for provider anthropic") && e.contains("replay"),
        "{e}"
    );
}

#[test]
fn every_worker_setting_put_in_options_is_told_to_move_beside_model() {
    // Regression: the settings were a list kept by hand beside `RawWorker`, and
    // `id` and `model` were missing from it. A field added to `[[workers]]` needs a
    // sample here, so the hint is checked for it too; `None` is a field folded into
    // the options anyway, or not a setting to move.
    let sample = |key: &str| match key {
        "api_key_env" | "api_base" | "api_key" | "options" => None,
        "id" => Some("\"w2\""),
        "model" => Some("\"mock/y\""),
        "family" | "role" => Some("\"x\""),
        "temperature" => Some("0.2"),
        "max_tokens" | "context_window" | "max_retries" => Some("8"),
        "enabled" => Some("true"),
        "price" => Some("{ input = 1.0, output = 2.0 }"),
        "calls" => Some("\"two\""),
        "pool" => Some("\"p\""),
        "qualified" => Some("[\"lead.*\"]"),
        other => panic!("no sample value for the worker setting {other:?}: add one"),
    };
    let fields = baton_gateway::struct_fields::<RawWorker>();
    assert!(fields.contains(&"temperature"), "{fields:?}");
    for &key in fields {
        let Some(value) = sample(key) else {
            assert!(!is_worker_setting(key), "{key}");
            continue;
        };
        let e = refusal(&format!(
            "[[workers]]\nid = \"w\"\nmodel = \"mock/x\"\noptions = {{ {key} = {value} }}\n"
        ));
        assert!(
            e.contains(&format!("`{key}` is a setting of the worker itself")),
            "{key}: {e}"
        );
        // And where the hint sends it, it is accepted (`id` and `model` are there).
        if !matches!(key, "id" | "model") {
            parse_file(
                "baton.toml",
                &format!(
                    "[[workers]]\nid = \"w\"\nmodel = \"mock/x\"\n{key} = {value}\n{}",
                    if key == "pool" {
                        "[[pools]]\nid = \"p\"\n"
                    } else {
                        ""
                    }
                ),
            )
            .unwrap();
        }
    }
}

#[test]
fn a_known_option_of_the_wrong_type_is_refused_when_the_roster_is_read() {
    for (model, options, says) in [
        (
            "openai/gpt",
            "timeout_s = \"ten\"",
            "options.timeout_s must be a positive number",
        ),
        (
            "ollama/llama3",
            "structured = \"xml\"",
            "options.structured must be",
        ),
        (
            "gemini/flash",
            "strict_schema = \"yes\"",
            "options.strict_schema must be true or false",
        ),
        (
            "mock/x",
            "delay_ms = \"five\"",
            "delay_ms must be a non-negative integer",
        ),
        (
            "command/claude",
            "preset = \"claude\", pass_env = \"HOME\"",
            "options.pass_env must be a list",
        ),
        ("command/x", "timeout_s = 5", "needs options.command"),
        ("scripted/x", "script = 3", "needs options.script"),
        (
            "openai/gpt",
            "replay = true",
            "options.replay must be a file path",
        ),
    ] {
        let e = refusal(&format!(
            "[[workers]]\nid = \"w\"\nmodel = \"{model}\"\noptions = {{ {options} }}\n"
        ));
        assert!(
            e.contains("worker w") && e.contains(says),
            "{model} {options}: {e}"
        );
    }
}

#[test]
fn every_option_the_readme_documents_is_accepted() {
    // No key is set and no file exists: the roster is checked where it is written.
    let toml = r#"
[[workers]]
id = "http"
model = "anthropic/claude-sonnet"
api_key_env = "SOME_KEY_VARIABLE"
api_base = "http://127.0.0.1:8080/v1"
options = { structured = "instructions", strict_schema = false, max_tokens = 512, connect_timeout_s = 10, timeout_s = 180 }
[[workers]]
id = "mock"
model = "mock/x"
options = { delay_ms = 40 }
[[workers]]
id = "scripted"
model = "scripted/x"
options = { script = "run.jsonl" }
[[workers]]
id = "replayed"
model = "openai/gpt-4.1-mini"
options = { replay = "run.jsonl", timeout_s = 60 }
[[workers]]
id = "claude"
model = "command/claude"
options = { preset = "claude", sandbox = "bwrap", sandbox_hide = ["/srv/secrets"] }
[[workers]]
id = "mine"
model = "command/my-agent"
options = { command = "my-agent --brief {briefing_file} --claim {claim_file}", timeout_s = 1800, silence_s = 300, prompt_silence_s = 20, scratch = [".my-agent/**"], pass_env = ["GOPATH"], env = { CI = "1", DEPTH = 2 }, output_dir = "{workspace}/out" }
"#;
    let roster = parse_file("baton.toml", toml).unwrap().roster.unwrap();
    assert_eq!(roster.workers.len(), 6);
}

const POOLS: &str = r#"
[[pools]]
id = "claude"
allowance = { tokens = 40_000_000, usd = 200 }
window = "weekly"

[[pools]]
id = "local"
window = "daily"
reset = "06:00"

[[workers]]
id = "opus"
model = "mock/claude-opus"
family = "anthropic"
pool = "claude"
qualified = ["lead.*", "plan.*", "review.*", "checkpoint.*", "j?dge"]

[[workers]]
id = "glm-4"
model = "mock/glm-4"
family = "glm"
pool = "local"

[[seats]]
id = "checkpoint.find"
qualified = ["glm-*", "opus"]
deny_tags = { credentials = ["glm"] }

[[seats]]
id = "lead.build"
"#;

#[test]
fn pools_seats_and_workers_pools_are_read_and_resolved() {
    use baton_core::router::{Allowance, Glob, PoolId, Window};
    let cfg = parse_file("baton.toml", POOLS).unwrap();
    let floor = &cfg.floor;
    assert_eq!(floor.pools.len(), 2);
    assert_eq!(
        floor.pools[0].allowance,
        Allowance {
            tokens: Some(40_000_000),
            usd: Some(200.0),
            requests: None
        }
    );
    assert_eq!(floor.pools[0].window, Window::default());
    assert_eq!(floor.pools[1].window, "daily 06:00".parse().unwrap());
    assert_eq!(
        floor.seats[0].qualified,
        [Glob::new("glm-*"), Glob::new("opus")]
    );
    assert_eq!(floor.seats[0].deny_tags["credentials"], ["glm"]);
    let roster = cfg.roster.unwrap();
    assert_eq!(roster.workers[0].pool, Some(PoolId::new("claude")));
    assert_eq!(roster.workers[0].qualified.len(), 5);
    assert!(roster.workers[1].qualified.is_empty());
    let candidate = roster.workers[0].candidate();
    assert_eq!(
        (candidate.pool.as_str(), candidate.family.as_str()),
        ("claude", "anthropic")
    );
}

/// A roster without pools or seats reads as before: no floor, and workers stored as
/// they always were (no new keys in a run's configuration).
#[test]
fn a_roster_without_pools_is_unchanged() {
    let cfg = parse_file(
        "baton.toml",
        "[[workers]]\nid = \"a\"\nmodel = \"mock/x\"\n",
    )
    .unwrap();
    assert!(cfg.floor.is_empty());
    let stored = serde_json::to_value(cfg.roster.unwrap()).unwrap();
    let worker = stored["workers"][0].as_object().unwrap();
    assert!(!worker.contains_key("pool") && !worker.contains_key("qualified"));
    let old: Roster = serde_json::from_value(stored).unwrap();
    assert_eq!(old.workers[0].pool, None);
}

#[test]
fn pool_and_seat_mistakes_say_what_to_write() {
    let with = |from: &str, to: &str| {
        assert!(POOLS.contains(from), "{from}");
        refusal(&POOLS.replacen(from, to, 1))
    };
    for (from, to, says) in [
        (
            "pool = \"claude\"",
            "pool = \"claud\"",
            "worker opus names pool \"claud\", which no [[pools]] entry defines (defined: claude, local); fix the name",
        ),
        (
            "pool = \"local\"\n",
            "\n",
            "worker glm-4 has no pool, but pools are defined (claude, local); add pool = ",
        ),
        (
            "tokens = 40_000_000",
            "tokens = 0",
            "pool claude: a tokens allowance of zero leaves nothing to spend; give a positive amount, or leave tokens out",
        ),
        (
            "usd = 200",
            "usd = 0",
            "pool claude: a usd allowance of zero",
        ),
        (
            "window = \"daily\"",
            "window = \"fortnightly\"",
            "the period is daily, weekly or monthly",
        ),
        (
            "id = \"local\"",
            "id = \"claude\"",
            "pool id \"claude\" appears twice",
        ),
        (
            "\"checkpoint.*\",",
            "\"chekpoint.*\",",
            "worker opus: qualified = \"chekpoint.*\" names no seat: a seat's name starts with one of discovery, plan, lead, build, checkpoint, review, gate, merge, judge; fix the name",
        ),
        (
            "id = \"lead.build\"",
            "id = \"leed.build\"",
            "seat \"leed.build\" is not a seat any station asks for: a seat's name starts with one of discovery, plan, lead, build, checkpoint, review, gate, merge, judge; fix the name",
        ),
        (
            "qualified = [\"glm-*\", \"opus\"]",
            "qualified = [\"gpt-*\"]",
            "seat checkpoint.find: no enabled worker may take it: its qualified = [gpt-*] matches no enabled worker's id or model",
        ),
        (
            "credentials = [\"glm\"]",
            "credentials = [\"glm\", \"anthropic\"]",
            "seat checkpoint.find: deny_tags.credentials = [glm, anthropic] excludes every worker that may take the seat (opus, glm-4), so a step tagged credentials could never be seated; remove a family from the list, or qualify a worker of another family",
        ),
        (
            "credentials = [\"glm\"]",
            "Credentials = [\"glm\"]",
            "seat checkpoint.find: deny_tags: step tag \"Credentials\": it starts with 'C' (write \"credentials\")",
        ),
        (
            "allowance = { tokens = 40_000_000, usd = 200 }",
            "allowance = { tokens = 1, dollars = 2 }",
            "unknown field `dollars`",
        ),
    ] {
        let e = with(from, to);
        assert!(e.contains(says), "{to}: {e}");
    }
    // The seat admits opus and glm-4, but only glm-4 is qualified for it, and it is off.
    let e = refusal(
        &POOLS
            .replacen(
                "pool = \"local\"\n",
                "pool = \"local\"\nenabled = false\n",
                1,
            )
            .replacen("\"checkpoint.*\", ", "", 1),
    );
    assert!(
        e.contains("seat checkpoint.find: no enabled worker may take it: no worker its qualified admits (opus) is qualified for it (the worker's qualified globs do not match checkpoint.find); add the seat to a worker's qualified, or widen the seat's"),
        "{e}"
    );
    // A pool named where no pools are defined, and pools with nobody to fill them.
    let e = refusal("[[workers]]\nid = \"a\"\nmodel = \"mock/x\"\npool = \"p\"\n");
    assert!(
        e.contains("names pool \"p\", but no pools are defined; add a [[pools]] entry"),
        "{e}"
    );
    let e = refusal("[[pools]]\nid = \"p\"\n");
    assert!(e.contains("no [[workers]] to fill them"), "{e}");
}
