//! Known coding-agent CLIs: how each is run non-interactively, which of its switches
//! keep it inside its worktree, which variables carry its key and endpoint, and which
//! files it writes for itself.
//!
//! A preset's flags switch off what reaches beyond the worktree (aider's URL scraping,
//! which once accepted its own offer to install a browser with `apt-get` as root; shell
//! commands suggested by the model; update checks and analytics). Flags drift between
//! releases: when one is refused, set `command` explicitly. The presets proven against
//! the real CLIs name the version they were proven with in `proven_with`.

/// One known agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// The command template (see the module documentation of `command`).
    pub command: &'static str,
    /// Variables the CLI reads its key from. The first one set in baton's environment
    /// is the worker's credential (unless the roster names `api_key_env`): exported to
    /// the agent under the same name and scrubbed from everything baton records.
    pub key_env: &'static [&'static str],
    /// Variables the CLI reads its endpoint and provider settings from, passed through
    /// from baton's environment when set (never a key: those go through `key_env`).
    pub pass_env: &'static [&'static str],
    /// Variables always set for the agent: the CLI's own switches for telemetry,
    /// updates and other traffic that has nothing to do with the work.
    pub env: &'static [(&'static str, &'static str)],
    /// Paths (git pathspec globs, relative to the worktree) the CLI writes for itself:
    /// history, caches. Never committed, so never part of a patch.
    pub scratch: &'static [&'static str],
    /// The CLI version this preset was run against by baton's test suite, if any.
    pub proven_with: Option<&'static str>,
}

pub const PRESETS: &[Preset] = &[
    // Proven with Claude Code 2.1.197 (crates/cli/tests/suite/agent_claude.rs). In
    // `-p` mode nothing can be approved, so a tool call that needs approval is
    // refused and the model is told so. `--tools` offers only the file tools: no
    // Bash (acceptEdits would run read-only commands such as `ls` and refuse the
    // rest, tests included; baton's gates run the tests), no web tools, no
    // subagents, worktree switching (EnterWorktree), cron or scheduled wake-ups.
    // acceptEdits lets Read/Edit/Write act inside the working directory only: a
    // path outside it is refused. `--strict-mcp-config` without `--mcp-config`
    // starts no MCP server from the user's or the project's configuration;
    // `--no-session-persistence` keeps no transcript to resume (baton never
    // resumes one). The comma-joined lists keep the variadic flags from taking
    // the next argument.
    Preset {
        name: "claude",
        command: "claude -p --output-format json --permission-mode acceptEdits \
                  --tools Read,Edit,Write,Glob,Grep,NotebookEdit \
                  --disallowedTools WebFetch,WebSearch \
                  --strict-mcp-config --no-session-persistence",
        key_env: &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
        pass_env: &[
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "ANTHROPIC_SMALL_FAST_MODEL",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "ANTHROPIC_DEFAULT_SONNET_MODEL",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL",
            "CLAUDE_CONFIG_DIR",
            "CLAUDE_CODE_MAX_RETRIES",
            "API_TIMEOUT_MS",
        ],
        env: &[
            // Without it Claude Code 2.1.197 opens six connections to
            // api.anthropic.com per run (telemetry, feature flags) whatever
            // ANTHROPIC_BASE_URL says; the three below are what it implies.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            // Auto-memory is a notes directory under CLAUDE_CONFIG_DIR that every
            // later run in the same directory reads: a channel between workers
            // that bypasses the briefing.
            ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1"),
        ],
        // Nothing was written in the worktree in the proven runs (Claude Code keeps
        // `.claude.json`, `backups/` and `sessions/` in CLAUDE_CONFIG_DIR, else
        // HOME, and a task directory in TMPDIR). `CLAUDE.local.md` is personal by
        // design. Not `.claude/`: scratch paths go to the repository's shared
        // exclude file, and projects commit `.claude/settings.json`.
        scratch: &["CLAUDE.local.md"],
        proven_with: Some("2.1.197"),
    },
    // Proven with Codex CLI 0.171.0 (`.ci/agents/install-codex.sh`) against a scripted
    // Responses API server in crates/cli/tests/suite/agent_codex.rs. The model's shell
    // commands (`exec_command`; there is no separate edit tool) run in Codex's own
    // sandbox: `workspace-write` with its network off and /tmp and $TMPDIR taken out of
    // the writable roots, so only the worktree is writable. `approval_policy=never`
    // makes a request for escalated permissions a refusal the model is told about
    // (exec mode cannot ask anyone). `ignore_default_excludes=false` applies Codex's
    // KEY/SECRET/TOKEN filter to the commands' environment: without it they saw
    // CODEX_API_KEY. Off by name: web search; the plugins feature (a `git ls-remote` of
    // github.com, api.github.com and chatgpt.com at every start); analytics
    // (ab.chatgpt.com); subagents (multi_agent), goals, memories (notes that later runs
    // read, bypassing the briefing) and the request_user_input tool; the update check
    // (exec made none in 0.171.0 either way). What remains offered is exec_command,
    // write_stdin and view_image. `--ephemeral` keeps no session to resume. The worktree
    // is a git repository, where Codex runs without `--skip-git-repo-check`; it stays
    // for a worktree whose git directory is out of the agent's sight.
    //
    // The endpoint is Codex's configuration, never an environment variable: 0.171.0
    // ignores OPENAI_BASE_URL, and its built-in `openai` provider sends CODEX_API_KEY
    // only (OPENAI_API_KEY is not sent). For the OpenAI API set CODEX_API_KEY; for any
    // other Responses API server define a provider (`model_provider`,
    // `[model_providers.<id>]` with `base_url`, `env_key = "CODEX_API_KEY"`,
    // `wire_api = "responses"`, `supports_websockets = false`) and `model` in
    // `$CODEX_HOME/config.toml`. That file's settings apply under the flags below, MCP
    // servers included: give baton a CODEX_HOME of its own.
    Preset {
        name: "codex",
        command: "codex exec --sandbox workspace-write -c approval_policy=never \
                  -c sandbox_workspace_write.network_access=false \
                  -c sandbox_workspace_write.exclude_slash_tmp=true \
                  -c sandbox_workspace_write.exclude_tmpdir_env_var=true \
                  -c shell_environment_policy.ignore_default_excludes=false \
                  -c web_search=disabled -c tools.experimental_request_user_input.enabled=false \
                  --disable plugins --disable multi_agent --disable goals --disable memories \
                  -c analytics.enabled=false -c check_for_update_on_startup=false \
                  --ephemeral --skip-git-repo-check \
                  --output-last-message {last_message_file} -",
        key_env: &["CODEX_API_KEY"],
        pass_env: &["CODEX_HOME"],
        env: &[],
        // Nothing was written in the worktree in the proven runs (Codex keeps its
        // state, logs, skills and shell snapshots in CODEX_HOME, else ~/.codex, and a
        // lock directory in TMPDIR). Not `.codex/`: that is a project's own
        // configuration, and scratch paths go to the checkout's shared exclude file.
        scratch: &[],
        proven_with: Some("0.171.0"),
    },
    // Proven with Gemini CLI 0.61.0 (`.ci/agents/install-gemini.sh`) against a scripted
    // Gemini API server in crates/cli/tests/suite/agent_gemini.rs. From its `--help`:
    // `-p` "Run in non-interactive (headless) mode with the given prompt. Appended to
    // input on stdin", so the briefing goes on stdin. `--approval-mode auto_edit`
    // "auto-approve edit tools": headless, every other call that needs approval is
    // refused (its policy turns "ask user" into "deny" without a terminal), and the
    // shell tool is not offered at all (what 0.61.0 offered: list_directory,
    // read_file, grep_search, glob, replace, write_file, update_topic,
    // enter_plan_mode, invoke_agent, and web_fetch and google_web_search unless
    // settings exclude them). Not `--yolo`, which runs the model's shell commands.
    // `--skip-trust` "Trust the current workspace for this session": in an untrusted
    // folder 0.61.0 overrides the approval mode to "default", where no edit is
    // approved headless. `--extensions none` loads no extension (their MCP servers,
    // context files, commands); `--allowed-mcp-server-names` with a name no
    // configuration uses starts none of the user's MCP servers (an empty name is
    // refused). `--output-format json` puts the final message in `response`.
    //
    // Settings only, no flag or variable, in 0.61.0 (`$GEMINI_CLI_HOME/.gemini/
    // settings.json`, else ~/.gemini/): usage statistics (two connections to
    // play.googleapis.com per run unless `"privacy": {"usageStatisticsEnabled":
    // false}`); the web tools (`"tools": {"exclude": ["web_fetch",
    // "google_web_search"]}`; web_fetch is refused headless anyway, google_web_search
    // is a grounded request to the model's own endpoint); and, with
    // GOOGLE_GEMINI_BASE_URL set, `"security": {"auth": {"selectedType":
    // "gemini-api-key"}}`: without it 0.61.0 picks a "gateway" auth type its own
    // headless check rejects ("Invalid auth method selected."). It loads `.env` from
    // the worktree (or a parent) over its environment, and keeps its chats in
    // `~/.gemini/tmp/<project>/` (baton never resumes one).
    Preset {
        name: "gemini",
        command: "gemini --skip-trust --approval-mode auto_edit --extensions none \
                  --allowed-mcp-server-names baton-starts-no-mcp-server --output-format json \
                  -p 'Follow the briefing given on standard input.'",
        // GOOGLE_API_KEY is Vertex AI's (with GOOGLE_GENAI_USE_VERTEXAI=true).
        key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        pass_env: &[
            "GOOGLE_GEMINI_BASE_URL",
            "GEMINI_MODEL",
            "GEMINI_CLI_HOME",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_VERTEX_BASE_URL",
        ],
        env: &[
            // Off by default; the variable overrides a user's `telemetry.enabled`.
            ("GEMINI_TELEMETRY_ENABLED", "false"),
        ],
        // Nothing was written in the worktree in the proven run. Not `.gemini/`: that
        // is where a project's own settings, policies and commands live, and scratch
        // paths go to the repository's shared exclude file.
        scratch: &[],
        proven_with: Some("0.61.0"),
    },
    // Proven with opencode-ai 1.18.33 (`.ci/agents/install-opencode.sh`) against a
    // scripted OpenAI chat-completions server in crates/cli/tests/suite/agent_opencode.rs.
    // `opencode run [message..]` ("run opencode with a message") appends standard input
    // to the message, so the briefing goes on stdin; it prints only the final message on
    // stdout (progress and errors go to stderr) and exits 1 on an API error. `--pure`
    // "run without external plugins". There is no flag for tools or approvals: the
    // OPENCODE_PERMISSION variable below is merged over every configuration file's
    // `permission`, last rule winning, and a tool denied outright is not offered at
    // all. What 1.18.33 offers under it: read, edit, write, glob, grep; not bash,
    // webfetch, task (subagents), skill or todowrite, which it offers otherwise. The
    // `*` rule covers every other tool, an MCP server's included (not exercised).
    //
    // The endpoint is opencode's configuration: a provider in the file OPENCODE_CONFIG
    // names (`"provider": {"<id>": {"npm": "@ai-sdk/openai-compatible", "env":
    // ["OPENAI_API_KEY"], "options": {"baseURL": "…/v1"}, "models": {"<model>": {}}}}`,
    // `"model": "<id>/<model>"`, and `"$schema": "https://opencode.ai/config.json"`,
    // which 1.18.33 otherwise writes into the file); the openai-compatible package is
    // built in, nothing is installed for it. The user's global configuration (~/.config/opencode) still
    // applies, MCP servers included (they start; their tools are denied): give baton a
    // HOME of its own. Without a key opencode sends the request with no Authorization
    // header (no check of its own), so the endpoint's 401 is what the user sees.
    Preset {
        name: "opencode",
        command: "opencode run --pure 'Follow the briefing given on standard input.'",
        key_env: &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        pass_env: &["OPENCODE_CONFIG"],
        env: &[
            ("OPENCODE_PERMISSION", OPENCODE_PERMISSION),
            // Without it 1.18.33 fetches its model list from models.opencode.ai at
            // every start.
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            // It installs @opencode-ai/plugin into every writable configuration
            // directory (~/.config/opencode) at every start, from registry.npmjs.org;
            // its npm reads npm's settings from the environment, and offline it
            // installs nothing (a warning in its log).
            ("npm_config_offline", "true"),
            // Its session database (every message, tool call and output) is kept in
            // ~/.local/share/opencode/opencode.db otherwise; baton never resumes one.
            ("OPENCODE_DB", ":memory:"),
            // A repository's own opencode.json(c) is not loaded (its permissions are
            // overridden anyway; its MCP servers, commands and agents would not be).
            ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
            // No update check or share link was seen in `run` either way.
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
        ],
        // Nothing was written in the worktree in the proven run (opencode keeps its
        // log and its undo snapshots, a git repository of the worktree's files, under
        // ~/.local/share/opencode). Not `.opencode/`: that is where a project's own
        // agents, commands and plugins live, and scratch paths go to the repository's
        // shared exclude file.
        scratch: &[],
        proven_with: Some("1.18.33"),
    },
    // Proven with aider-chat 0.86.2 (`.ci/agents/install-aider.sh`) against a scripted
    // OpenAI-compatible server in crates/cli/tests/suite/agent_aider.rs. `--yes-always`
    // accepts every offer aider makes, so each offer that leaves the worktree is
    // switched off by name: URL scraping and its Playwright install, shell commands the
    // model suggests, the model-warnings and other "open documentation URL?" offers (a
    // browser; `BROWSER=true` catches the ones no switch reaches, such as a URL in an
    // API error), the update check, analytics, `.gitignore` edits and aider's own
    // commits (which also stop its commits of a dirty tree). `--no-restore-chat-history`
    // keeps a repository's `.aider.conf.yml` from carrying one turn's chat into the
    // next. Not switched off by any flag: with neither a model nor a key aider offers
    // an OpenRouter login that listens on a local port for 5 minutes (set AIDER_MODEL);
    // it fetches litellm's model-price list from GitHub once a day unless the model is
    // described in `.aider.model.metadata.json`; it loads `.env` from the worktree root
    // over its environment.
    Preset {
        name: "aider",
        command: "aider --yes-always --no-pretty --no-stream --no-fancy-input \
                  --no-detect-urls --disable-playwright --no-suggest-shell-commands \
                  --no-show-model-warnings --no-check-update --no-show-release-notes \
                  --analytics-disable --no-gitignore --no-auto-commits \
                  --no-restore-chat-history --message-file {briefing_file}",
        key_env: &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        // litellm prefers OPENAI_BASE_URL over OPENAI_API_BASE (which aider's
        // --openai-api-base and AIDER_OPENAI_API_BASE set).
        pass_env: &[
            "AIDER_MODEL",
            "AIDER_EDIT_FORMAT",
            "AIDER_WEAK_MODEL",
            "OPENAI_API_BASE",
            "OPENAI_BASE_URL",
            "AIDER_OPENAI_API_BASE",
            "ANTHROPIC_API_BASE",
        ],
        env: &[
            // litellm downloads its model-price list from GitHub at import otherwise.
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            // Without a terminal rich wraps every line at 80 columns, the final
            // message included.
            ("COLUMNS", "100000"),
            // An accepted "open this URL?" offer runs `true <url>`, not a browser.
            ("BROWSER", "true"),
        ],
        // `.aider.chat.history.md`, `.aider.tags.cache.v4/` (the repo map's cache),
        // `.aider.input.history`; its analytics and install records go to ~/.aider/.
        scratch: &[".aider*"],
        proven_with: Some("0.86.2"),
    },
    // Proven with Qwen Code 0.24.4 (`.ci/agents/install-qwen.sh`) against a scripted
    // OpenAI chat-completions server in crates/cli/tests/suite/agent_qwen.rs. From its
    // `--help`: the positional prompt ("Defaults to one-shot") follows the briefing
    // on stdin ("Appended to input on stdin"). `--approval-mode auto-edit`
    // "Automatically approve file edits": headless, the shell tool is not offered
    // (not `--yolo`, "Automatically approve all tools"). `--safe-mode` "Disable all
    // customizations (context files, hooks, extensions, skills, MCP servers)", and
    // with them its background memory extraction (an agent of its own, with a shell,
    // that writes notes later runs read: a channel that bypasses the briefing); it
    // ignores `--core-tools`, so `--exclude-tools` ("Tools to exclude") names what
    // 0.24.4 offered beyond the file tools: web_fetch, the deferred-tool pair
    // tool_search/tool_call (which reach every tool not listed up front), subagents
    // (agent, list_agents, send_message), skills, enter_worktree/exit_worktree and
    // MCP resources. What remains: read_file, edit, write_file, glob, grep_search,
    // notebook_edit, zoom_image, get_goal/update_goal, record_artifact,
    // report_findings, task_stop. `--auth-type openai` uses OPENAI_API_KEY and
    // OPENAI_BASE_URL without a settings file; `--chat-recording false` "chat history
    // is not saved"; `--output-format json` ends with a `result` object.
    Preset {
        name: "qwen",
        command: "qwen --safe-mode --auth-type openai --approval-mode auto-edit \
                  --exclude-tools web_fetch,tool_search,tool_call,agent,list_agents,send_message,skill,enter_worktree,exit_worktree,read_mcp_resource \
                  --chat-recording false --output-format json \
                  'Follow the briefing given on standard input.'",
        key_env: &["OPENAI_API_KEY"],
        pass_env: &["OPENAI_BASE_URL", "OPENAI_MODEL", "QWEN_HOME"],
        env: &[
            // Without it 0.24.4 opens two connections to a *.rum.aliyuncs.com
            // collector per run.
            ("QWEN_USAGE_STATISTICS_ENABLED", "false"),
            ("QWEN_TELEMETRY_ENABLED", "false"),
            // The in-session cron/loop tools (recurring prompts).
            ("QWEN_CODE_DISABLE_CRON", "1"),
        ],
        // Nothing was written in the worktree in the proven run (Qwen Code keeps its
        // usage records in QWEN_HOME, else ~/.qwen). Not `.qwen/`: that is where a
        // project's own settings and commands live, and scratch paths go to the
        // repository's shared exclude file.
        scratch: &[],
        proven_with: Some("0.24.4"),
    },
];

/// opencode's permission rules (see its preset): the file tools, nothing else.
const OPENCODE_PERMISSION: &str =
    r#"{"*":"deny","read":"allow","edit":"allow","glob":"allow","grep":"allow"}"#;

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    /// The first of the CLI's key variables set (non-empty) in baton's environment.
    pub fn key_source(&self) -> Option<&'static str> {
        self.key_env
            .iter()
            .copied()
            .find(|var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()))
    }
}

/// The presets' names, comma-separated, for messages.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_preset_passes_a_key_through_pass_env() {
        for p in PRESETS {
            for var in p.pass_env {
                let upper = var.to_ascii_uppercase();
                assert!(
                    !["KEY", "TOKEN", "SECRET", "PASSWORD"]
                        .iter()
                        .any(|w| upper.contains(w)),
                    "{}: {var} is a key; list it in key_env",
                    p.name
                );
            }
        }
    }
}
