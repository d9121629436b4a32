//! Jobs end to end: a scripted fake agent (a small Python program the test writes) works
//! in real git worktrees, sometimes lies, and the engine catches each lie.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use baton_core::state::IssueStatus;
use baton_core::turn::TurnStatus;
use baton_engine::config::WorkerConfig;
use baton_engine::jobs::judge::judge;
use baton_engine::jobs::runner::{WorkOptions, work};
use baton_engine::jobs::{EnqueueRequest, GateSpec, decode_outbox, enqueue};
use baton_gateway::{Gateway, ModelResponse, Usage};
use baton_store::JobStatus;

use super::*;

/// Reads its briefing on stdin, acts on the assigned task, writes its claim file.
/// Tasks: `write PATH` (writes it), `LIE-missing PATH` (claims it, writes nothing),
/// `LIE-empty PATH` (claims a change, changes nothing; both own up when their briefing
/// says the step is on its second attempt), `LIE-tests` (claims the tests pass, names
/// the gate, changes nothing else), `idle` (changes and claims nothing),
/// `retry-write PATH` (idle at first, writes PATH on its second attempt).
const FAKE_AGENT: &str = r###"
import json, os, re, sys
claim_file = sys.argv[1]
brief = sys.stdin.read()
m = re.search(r"## Assigned task\n(?:Step T\d+: )?(.*)", brief)
task = m.group(1).strip() if m else ""
who = os.environ.get("AGENT_NAME", "agent")
claim = {"summary": "did: " + task, "last_action": "worked on " + task, "next_action": "continue"}
words = task.split()
if words and words[0] == "write":
    path = words[1]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("written by " + who + " for: " + task + "\n")
    claim["artifacts"] = [{"name": path, "description": "wrote " + path}]
elif words and words[0] in ("LIE-missing", "LIE-empty") and "attempt 2 of this step" in brief:
    # Told that its lie was caught and the step is still open, it owns up.
    claim["completed"] = ["Checked " + words[1] + ": there was nothing to change"]
elif words and words[0] == "LIE-missing":
    claim["artifacts"] = [{"name": words[1], "description": "I definitely wrote this"}]
elif words and words[0] == "LIE-empty":
    claim["artifacts"] = [{"name": words[1], "description": "rewrote it completely"}]
elif words and words[0] == "commit-write":
    # Like aider: the agent commits its own work.
    path = words[1]
    with open(path, "w") as f:
        f.write("committed by the agent for: " + task + "\n")
    import subprocess
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=a@b", "commit", "-q", "-m", "agent's own commit"], check=True)
    claim["artifacts"] = [{"name": path, "description": "wrote " + path}]
elif "Gates fail at the end of the job" in task:
    with open("ok.txt", "w") as f:
        f.write("fixed by " + who + "\n")
    print("Made the gate pass.")
    sys.exit(0)
elif words and words[0] == "LIE-restate":
    # Worded exactly like an earlier true claim; the commit changes another file.
    with open("NOTES.md", "a") as f:
        f.write("notes\n")
    claim["artifacts"] = [{"name": words[1], "description": "wrote " + words[1]}]
elif words and words[0] == "prose-write":
    # No claim at all: edits a file, says what it did in plain words.
    with open(words[1], "w") as f:
        f.write("fixed\n")
    print("I fixed " + words[1] + ". Nothing else is open.")
    sys.exit(0)
elif words and words[0] == "idle":
    # Runs, changes nothing, claims nothing: only a final message.
    print("Looked at it.")
    sys.exit(0)
elif words and words[0] == "retry-write":
    # Idle on a first attempt; on a retry (the briefing says so) does the work.
    if "attempt 2 of this step" not in brief:
        print("Looked at it.")
        sys.exit(0)
    with open(words[1], "w") as f:
        f.write("written on the retry\n")
    print("Wrote " + words[1] + ".")
    sys.exit(0)
elif words and words[0] == "LIE-tests":
    claim["completed"] = ["All tests pass now"]
    claim["issues"] = [{"title": "The test suite must pass", "severity": "high", "gate": "tests"}]
    claim["resolved_issues"] = [{"issue": "The test suite must pass", "note": "ran them, all green"}]
with open(claim_file, "w") as f:
    json.dump(claim, f)
print("done")
"###;

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit, and the fake agent next to it.
fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("README.md"), "# project\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let agent = dir.path().join("fake_agent.py");
    std::fs::write(&agent, FAKE_AGENT).unwrap();
    (dir, repo, agent)
}

fn agent_worker(id: &str, agent: &Path) -> WorkerConfig {
    let mut w = WorkerConfig::mock(id, id);
    w.model = format!("command/{id}");
    w.family = format!("family-{id}");
    w.max_retries = 0;
    let options = serde_json::json!({
        "command": format!("python3 {} {{claim_file}}", agent.display()),
        "handoff": "derive",
        "pass_env": ["PATH"],
        "env": {"AGENT_NAME": id},
    });
    w.options = options.as_object().unwrap().clone();
    w
}

fn request(
    repo: &Path,
    tasks: &[&str],
    candidates: Vec<Roster>,
    gate_each_turn: bool,
) -> EnqueueRequest {
    EnqueueRequest {
        objective: "Make the project pass its gate".into(),
        tasks: tasks.iter().map(|t| t.to_string()).collect(),
        repo: repo.to_path_buf(),
        base: None,
        worktree_root: None,
        gates: vec![GateSpec::parse("tests=test -f ok.txt")],
        gate_each_turn,
        fix_turns: 0,
        candidates,
        settings: RunSettings {
            estimator: baton_core::tokens::EstimatorKind::Heuristic,
            repair_attempts: 0,
            ..RunSettings::default()
        },
        rubric: Some("Prefer the candidate whose gate passes.".into()),
        steps: Default::default(),
    }
}

/// The real clock: leases are measured in it (a stepping test clock would expire them).
fn clock() -> Arc<dyn baton_engine::Clock> {
    Arc::new(baton_engine::SystemClock)
}

#[test]
fn every_turn_is_a_commit_and_every_lie_is_caught() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("coder", &agent)],
    };
    let tasks = [
        "write src/app.txt",
        "LIE-missing src/ghost.txt",
        "LIE-empty src/app.txt",
        "write ok.txt",
    ];
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &tasks, vec![roster], false),
    )
    .unwrap();
    let main_head = git(&repo, &["rev-parse", "HEAD"]);

    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);

    let job = store.job(&queued.jobs[0]).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    let run = job.run_id.clone().unwrap();
    let turns = store.turns(&run).unwrap();
    // Each lie leaves its step open (its claim refused, no commit: no evidence of work)
    // and the step is attempted again: tasks 0, 1, 1, 2, 2, 3.
    assert_eq!(turns.len(), 6);
    assert!(turns.iter().all(|t| t.status == TurnStatus::Committed));
    let steps: Vec<&str> = turns
        .iter()
        .map(|t| t.assignment.step_id.as_deref().unwrap())
        .collect();
    assert_eq!(steps, ["T1", "T2", "T2", "T3", "T3", "T4"]);
    for lie in [1, 3] {
        assert!(
            turns[lie]
                .outcome
                .warnings
                .iter()
                .any(|w| w.contains("stays open: no evidence of work")),
            "{:?}",
            turns[lie].outcome.warnings
        );
    }

    // Turn 0: a real change, committed with trailers, verified with the content hash.
    let ws0 = turns[0].workspace.as_ref().unwrap();
    assert!(ws0.changed && ws0.files == ["src/app.txt"]);
    let trailers = git(
        &outbox.worktree,
        &["log", "-1", "--format=%(trailers)", &ws0.commit],
    );
    assert!(
        trailers.contains(&format!("Baton-Run: {}", run.0)),
        "{trailers}"
    );
    assert!(
        trailers.contains("Baton-Turn: 0") && trailers.contains("Baton-Worker: coder"),
        "{trailers}"
    );
    assert!(
        trailers.contains("Baton-Model: command/coder")
            && trailers.contains("Baton-Family: family-coder")
    );
    let state = store.load_state(&run).unwrap();
    let app = state
        .artifacts
        .iter()
        .find(|a| a.name == "src/app.txt")
        .unwrap();
    assert!(app.versions[0].verified);
    let bytes = git(
        &outbox.worktree,
        &["show", &format!("{}:src/app.txt", ws0.commit)],
    );
    let expected = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes.as_bytes()));
    assert_eq!(
        app.versions[0].content_hash.as_deref(),
        Some(expected.as_str())
    );

    // Turn 1: a file claimed but never written is a refused claim, not an artifact.
    assert!(
        turns[1].outcome.refusals.iter().any(|r| r
            .reason
            .contains("src/ghost.txt is not in the turn's commit")),
        "{:?}",
        turns[1].outcome
    );
    assert!(state.artifacts.iter().all(|a| a.name != "src/ghost.txt"));
    assert!(!turns[1].workspace.as_ref().unwrap().changed);

    // Turn 3: changes claimed, diff empty.
    assert!(
        turns[3]
            .outcome
            .refusals
            .iter()
            .any(|r| r.reason.contains("diff is empty")),
        "{:?}",
        turns[3].outcome
    );
    // Each retry was told what happened, and completed its step by owning up.
    assert!(turns[2].package.text.contains("attempt 2 of this step"));
    assert!(
        turns[2].package.text.contains("claim(s) refused"),
        "{}",
        turns[2].package.text
    );
    assert_eq!(state.plan[1].done_at_turn, Some(2));
    assert_eq!(state.plan[2].done_at_turn, Some(4));
    assert_eq!(
        app.versions.len(),
        1,
        "the unchanged file gained no version"
    );

    // Turn 5 is the last: the gate ran on its commit and passed.
    let ws3 = turns[5].workspace.as_ref().unwrap();
    assert_eq!(ws3.gates.len(), 1);
    assert!(ws3.gates[0].passed && ws3.gates[0].commit == ws3.commit);
    assert_eq!(outbox.gates, ws3.gates);
    assert_eq!(outbox.ended, "finished");
    assert_eq!(outbox.diff.files_changed, 2);
    let patch = std::fs::read_to_string(&outbox.patch_file).unwrap();
    assert!(patch.contains("src/app.txt") && patch.contains("ok.txt"));
    // Two commits on the branch (the turns that changed something), none in the checkout.
    let log = git(
        &outbox.worktree,
        &["rev-list", "--count", &format!("{}..HEAD", queued.base)],
    );
    assert_eq!(log.trim(), "2");
    assert_eq!(
        git(&repo, &["rev-parse", "HEAD"]),
        main_head,
        "the user's checkout is untouched"
    );
    assert!(
        git(&repo, &["status", "--porcelain"]).trim().is_empty(),
        "{}",
        git(&repo, &["status", "--porcelain"])
    );
}

#[test]
fn a_failing_gate_keeps_the_issue_open_for_the_next_worker_and_a_passing_gate_closes_it() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("a", &agent), agent_worker("b", &agent)],
    };
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["LIE-tests", "write ok.txt"], vec![roster], true),
    )
    .unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    let run = store.job(&queued.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();

    // Turn 0 claimed the tests pass; the gate said otherwise.
    let g0 = &turns[0].workspace.as_ref().unwrap().gates[0];
    assert!(!g0.passed);
    // The next worker was shown the failing gate as a fact, and the claim as unverified.
    let briefing = &turns[1].package.text;
    assert!(briefing.contains("Gate `tests` fails"), "{briefing}");
    assert!(
        briefing.contains("NOT verified") || briefing.contains("not verified"),
        "{briefing}"
    );

    // Turn 1 made it pass: every issue naming the gate closed, verified by gate and commit.
    let ws1 = turns[1].workspace.as_ref().unwrap();
    assert!(ws1.gates[0].passed);
    let state = store.load_state(&run).unwrap();
    let short = &ws1.commit[..12];
    for issue in state
        .issues
        .iter()
        .filter(|i| i.gate.as_deref() == Some("tests"))
    {
        assert_eq!(issue.status, IssueStatus::Resolved, "{}", issue.title);
        assert_eq!(
            issue.verified_by.as_deref(),
            Some(format!("gate:tests@{short}").as_str())
        );
    }
    assert_eq!(state.issues.iter().filter(|i| i.gate.is_some()).count(), 2);
}

/// A judge gateway that records what it was sent and picks candidate B, or gives the
/// `answers` queued, in order.
#[derive(Debug, Default)]
struct RecordingJudge {
    seen: Mutex<Vec<String>>,
    answers: Mutex<Vec<&'static str>>,
}

impl Gateway for RecordingJudge {
    fn complete(
        &self,
        request: &baton_gateway::ModelRequest<'_>,
    ) -> baton_gateway::Result<ModelResponse> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("{}\n{}", request.system, request.user));
        let mut answers = self.answers.lock().unwrap();
        if !answers.is_empty() {
            return Ok(ModelResponse {
                text: answers.remove(0).into(),
                usage: Usage::default(),
                sent: baton_gateway::Sent::pair(request),
            });
        }
        Ok(ModelResponse {
            text: r#"{"scores":[{"candidate":"A","score":4,"reasons":"gate fails"},{"candidate":"B","score":9,"reasons":"gate passes"}],"winner":"B","verdict":"B passes its gate"}"#.into(),
            usage: Usage::default(),
            sent: baton_gateway::Sent::pair(request),
        })
    }
}

#[test]
fn four_concurrent_jobs_on_the_same_file_names_never_interfere_and_the_judge_is_blind() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let names = ["alpha", "beta", "gamma", "delta"];
    let candidates: Vec<Roster> = names
        .iter()
        .map(|n| Roster {
            workers: vec![agent_worker(n, &agent)],
        })
        .collect();
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(
            &repo,
            &["write shared/file.txt", "write ok.txt"],
            candidates,
            false,
        ),
    )
    .unwrap();
    let options = WorkOptions {
        concurrency: 4,
        ..WorkOptions::default()
    };
    let reports = work(store.clone(), clock(), &options, &|_| {}).unwrap();
    assert_eq!(reports.len(), 4, "{reports:?}");
    assert!(
        reports.iter().all(|r| r.status == JobStatus::Outbox),
        "{reports:?}"
    );
    let mut worktrees = std::collections::BTreeSet::new();
    for id in &queued.jobs {
        let job = store.job(id).unwrap();
        let outbox = decode_outbox(&job).unwrap().unwrap();
        let spec: baton_engine::jobs::JobSpec = serde_json::from_value(job.spec.clone()).unwrap();
        let who = &spec.candidate;
        let content = git(
            &outbox.worktree,
            &["show", &format!("{}:shared/file.txt", outbox.head)],
        );
        assert!(
            content.starts_with(&format!("written by {who} ")),
            "{who}: {content}"
        );
        assert!(outbox.gates[0].passed);
        worktrees.insert(outbox.worktree.clone());
    }
    assert_eq!(worktrees.len(), 4);

    // The judge sees candidates by label only: no worker id, model, family or job id.
    let gateway = RecordingJudge::default();
    let mut judge_worker = WorkerConfig::mock("judge", "referee");
    // A key that an agent wrote into its change (here: a path every patch holds)
    // reaches neither the judge nor the record.
    judge_worker.api_key = Some(baton_gateway::Credential::new("shared/file.txt").unwrap());
    let verdict = judge(
        store.as_ref(),
        &*clock(),
        &queued.group,
        &judge_worker,
        &gateway,
    )
    .unwrap();
    // Every candidate's run says it was judged, live and stored.
    let recorder = baton_engine::publish::Recorder::new();
    let publisher = baton_engine::publish::Publisher::default();
    publisher.subscribe(recorder.clone());
    baton_engine::jobs::events::announce(store.as_ref(), &*clock(), &publisher, &verdict).unwrap();
    assert_eq!(recorder.events().len(), verdict.labels.len());
    for e in recorder.events() {
        let stored = store.events(&e.event.run_id, 0).unwrap();
        assert_eq!(
            stored.last().map(|s| (s.seq, &s.event)),
            Some((e.seq.unwrap(), &e.event))
        );
        assert!(
            matches!(&e.event.kind, baton_protocol::EventKind::Judged { winner: Some(w), .. } if *w == verdict.winner_job)
        );
    }
    let seen = gateway.seen.lock().unwrap().join("\n");
    for n in names {
        assert!(!seen.contains(n), "the judge saw \"{n}\"");
        assert!(!seen.contains(&format!("command/{n}")));
    }
    for id in &queued.jobs {
        assert!(!seen.contains(id.as_str()), "the judge saw job id {id}");
    }
    assert!(!seen.contains("shared/file.txt") && seen.contains("[redacted]"));
    assert!(
        seen.contains("Candidate A")
            && seen.contains("Candidate D")
            && seen.contains("Prefer the candidate")
    );
    assert_eq!(verdict.labels.len(), 4);
    assert_eq!(verdict.winner_job, verdict.labels["B"]);
    let judged = store.job(&verdict.winner_job).unwrap();
    assert_eq!(judged.status, JobStatus::Judged);
    assert_eq!(judged.judgement.unwrap()["verdict"]["winner"], "B");

    // Regression: a verdict in prose, then one that names "Candidate C", was dropped as
    // "invalid configuration". One repair call, then a lenient reading, keep it.
    let prose = RecordingJudge::default();
    *prose.answers.lock().unwrap() = vec![
        "Candidate C is clearly the best.",
        r#"{"scores":[{"candidate":"Candidate C","score":"9/10","reasons":"passes"},
            {"candidate":"candidate_a","score":2}],"winner":"Candidate C","verdict":"C"}"#,
    ];
    let again = judge(
        store.as_ref(),
        &*clock(),
        &queued.group,
        &judge_worker,
        &prose,
    )
    .unwrap();
    assert_eq!(again.winner_job, again.labels["C"]);
    let seen = prose.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].contains("It could not be used") && seen[1].contains("no JSON object"));

    // Prose twice: the judge's answer is its own error, not "invalid configuration".
    let hopeless = RecordingJudge::default();
    *hopeless.answers.lock().unwrap() = vec!["C is best.", "Still C, truly."];
    let err = judge(
        store.as_ref(),
        &*clock(),
        &queued.group,
        &judge_worker,
        &hopeless,
    )
    .unwrap_err();
    assert!(
        matches!(err, baton_engine::Error::JudgeAnswer { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("after one repair"), "{err}");
}

#[test]
fn agent_commits_gate_side_effects_and_rewritten_files_are_handled() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("coder", &agent)],
    };
    // Turn 0 writes shared.txt; turn 1 commits on its own; turn 2 rewrites shared.txt
    // in the same words; a gate that writes a file runs after every turn.
    let tasks = [
        "write shared.txt first",
        "commit-write self.txt",
        "write shared.txt second",
        "write ok.txt",
    ];
    let mut req = request(&repo, &tasks, vec![roster], true);
    req.gates = vec![GateSpec::parse(
        "stamp=date > build_stamp.txt && test -f shared.txt",
    )];
    let queued = enqueue(store.as_ref(), &*clock(), &req).unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{reports:?}");
    let job = store.job(&queued.jobs[0]).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    let turns = store.turns(job.run_id.as_ref().unwrap()).unwrap();

    // The agent's own commit became the turn's commit, with baton's trailers.
    let ws1 = turns[1].workspace.as_ref().unwrap();
    assert_eq!(ws1.files, ["self.txt"], "{ws1:?}");
    assert!(
        turns[1].outcome.refusals.is_empty(),
        "{:?}",
        turns[1].outcome.refusals
    );
    let trailers = git(
        &outbox.worktree,
        &["log", "-1", "--format=%(trailers)", &ws1.commit],
    );
    assert!(trailers.contains("Baton-Turn: 1"), "{trailers}");
    let authors = git(
        &outbox.worktree,
        &["log", "--format=%s", &format!("{}..HEAD", queued.base)],
    );
    assert!(!authors.contains("agent's own commit"), "{authors}");

    // The gate's file never entered a turn's commit.
    for t in &turns {
        let files = &t.workspace.as_ref().unwrap().files;
        assert!(
            !files.iter().any(|f| f == "build_stamp.txt"),
            "turn {}: {files:?}",
            t.turn
        );
    }
    assert!(!outbox.worktree.join("build_stamp.txt").exists());

    // shared.txt rewritten in the same words gained a version with the new bytes' hash.
    let state = store.load_state(job.run_id.as_ref().unwrap()).unwrap();
    let shared = state
        .artifacts
        .iter()
        .find(|a| a.name == "shared.txt")
        .unwrap();
    assert_eq!(shared.versions.len(), 2, "{shared:?}");
    assert!(shared.versions.iter().all(|v| v.verified));
    assert_ne!(
        shared.versions[0].content_hash,
        shared.versions[1].content_hash
    );
}

#[test]
fn a_resumed_job_refuses_to_reset_over_hand_commits_and_keeps_stray_edits() {
    use baton_engine::jobs::git_hook::GitHook;
    let (dir, repo, _agent) = repo();
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let r = baton_workspace::Repo::open(&repo).unwrap();
    let ws = r
        .create_workspace(&baton_workspace::WorkspaceSpec {
            job_id: "j1".into(),
            base: base.clone(),
            base_branch: Some("main".into()),
            root: dir.path().join("wt"),
        })
        .unwrap();
    let hook = GitHook {
        workspace: ws.clone(),
        job_id: "j1".into(),
        gates: Vec::new(),
        gate_each_turn: false,
        gate_dir: dir.path().join("gates"),
        hide: Vec::new(),
        keys: Default::default(),
        fence: None,
        last_commit: Mutex::new(base.clone()),
        cancel: Default::default(),
    };
    // Stray uncommitted edits are set aside under refs/baton/discarded, not destroyed.
    std::fs::write(ws.path.join("notes.txt"), "my notes\n").unwrap();
    let saved = hook.reset_to(&base, "test").unwrap().unwrap();
    assert!(saved.starts_with("refs/baton/discarded/j1/"), "{saved}");
    assert!(!ws.path.join("notes.txt").exists());
    assert_eq!(
        git(&ws.path, &["show", &format!("{saved}:notes.txt")]),
        "my notes\n"
    );

    // A clean worktree whose branch is ahead of the last committed turn (a turn whose
    // git commit was made but whose store commit never was: killed during its gates) is
    // reset, and the commit kept by name under refs/baton/discarded — it used to survive
    // only in the reflog.
    std::fs::write(ws.path.join("turn.txt"), "half a turn\n").unwrap();
    git(&ws.path, &["add", "."]);
    git(
        &ws.path,
        &[
            "-c",
            "user.name=baton",
            "-c",
            "user.email=b@x",
            "commit",
            "-q",
            "-m",
            "turn 0",
        ],
    );
    let orphan = git(&ws.path, &["rev-parse", "HEAD"]).trim().to_string();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let saved = hook
        .reset_to(&base, "a turn the record never got")
        .unwrap()
        .expect("the orphan commit is kept");
    assert_eq!(git(&ws.path, &["rev-parse", &saved]).trim(), orphan);
    assert_eq!(git(&ws.path, &["rev-parse", "HEAD"]).trim(), base);

    // A commit made by hand on the job's branch is drift that stops the job.
    let d = r.drift(&ws, Some("main")).unwrap();
    assert!(d.commits_outside_baton.is_empty());
    std::fs::write(ws.path.join("mine.txt"), "by hand\n").unwrap();
    git(&ws.path, &["add", "."]);
    git(
        &ws.path,
        &[
            "-c",
            "user.name=me",
            "-c",
            "user.email=me@x",
            "commit",
            "-q",
            "-m",
            "by hand",
        ],
    );
    let d = r.drift(&ws, Some("main")).unwrap();
    assert_eq!(d.commits_outside_baton.len(), 1);
}

#[test]
fn a_worker_that_lost_its_lease_commits_nothing_to_the_branch() {
    use baton_core::compiler::{Assignment, AssignmentKind};
    use baton_engine::WorkspaceHook;
    use baton_engine::hook::TurnFacts;
    use baton_engine::jobs::git_hook::GitHook;
    let (dir, repo, _agent) = repo();
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let r = baton_workspace::Repo::open(&repo).unwrap();
    let ws = r
        .create_workspace(&baton_workspace::WorkspaceSpec {
            job_id: "j2".into(),
            base: base.clone(),
            base_branch: None,
            root: dir.path().join("wt"),
        })
        .unwrap();
    let lost: Arc<dyn Fn() -> baton_engine::Result<()> + Send + Sync> = Arc::new(|| {
        Err(baton_engine::Error::Store(baton_store::Error::LeaseLost {
            job: "j2".into(),
            reason: "taken over".into(),
        }))
    });
    let hook = GitHook {
        workspace: ws.clone(),
        job_id: "j2".into(),
        gates: Vec::new(),
        gate_each_turn: false,
        gate_dir: dir.path().join("gates"),
        hide: Vec::new(),
        keys: Default::default(),
        fence: Some(lost),
        last_commit: Mutex::new(base.clone()),
        cancel: Default::default(),
    };
    std::fs::write(ws.path.join("late.txt"), "from a stale worker\n").unwrap();
    let worker = agent_worker("stale", Path::new("/nonexistent"));
    let assignment = Assignment {
        kind: AssignmentKind::Step,
        step_id: Some("T1".into()),
        task: "t".into(),
    };
    let result = baton_core::claims::WorkerResult {
        summary: "s".into(),
        last_action: "a".into(),
        ..Default::default()
    };
    let run = RunId("r".into());
    let err = hook
        .after_calls(&TurnFacts {
            run: &run,
            turn: 0,
            worker: &worker,
            assignment: &assignment,
            result: Some(&result),
        })
        .err()
        .expect("fenced off");
    assert!(err.to_string().contains("lost the lease"), "{err}");
    assert_eq!(
        git(&ws.path, &["rev-parse", "HEAD"]).trim(),
        base,
        "nothing reached the branch"
    );
}

/// Regression (issue 7, item 17): `--lease-s 18446744073709551615` wrapped to a
/// lease of -1000 ms, which had expired before the job started (any other worker
/// could take it over mid-run). The lease is bounded, so it holds while the job runs.
#[test]
fn a_huge_lease_holds_while_the_job_runs() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("a", &agent)],
    };
    enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["write ok.txt"], vec![roster], false),
    )
    .unwrap();
    let options = WorkOptions {
        lease: std::time::Duration::from_secs(u64::MAX),
        ..WorkOptions::default()
    };
    let seen = std::sync::Mutex::new(Vec::new());
    let reports = work(store.clone(), clock(), &options, &|p| {
        if let baton_engine::jobs::runner::Progress::Turn { job, .. } = p {
            let expires = store.job(&job).unwrap().lease_expires_at.unwrap();
            seen.lock().unwrap().push(expires.0 - clock().now().0);
        }
    })
    .unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    let seen = seen.into_inner().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|left_ms| *left_ms > 3_600_000),
        "lease left while running, in ms: {seen:?}"
    );
}

/// Issue 8, item 4: an agent that writes no claim at all still has a turn: the file its
/// commit changed is a verified artifact, its last words are the summary, it ran once,
/// and the handoff derived from it is not a request.
#[test]
fn an_agent_that_only_edits_and_talks_gets_its_changed_files_as_verified_artifacts() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("coder", &agent)],
    };
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["prose-write ok.txt"], vec![roster], false),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    let run = store.job(&queued.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(
        turns[0].status,
        TurnStatus::Committed,
        "{:?}",
        turns[0].error
    );
    assert_eq!(
        turns[0].calls.len(),
        1,
        "one run of the agent, no handoff call"
    );
    assert_eq!(turns[0].calls[0].call, baton_core::turn::CallKind::Execute);
    let state = store.load_state(&run).unwrap();
    let ok = state.artifacts.iter().find(|a| a.name == "ok.txt").unwrap();
    assert!(ok.versions[0].verified, "{ok:?}");
    assert!(
        ok.versions[0]
            .verified_by
            .as_deref()
            .is_some_and(|b| b.starts_with("git:"))
    );
    assert_eq!(
        turns[0].result.as_ref().unwrap()["summary"],
        "I fixed ok.txt. Nothing else is open."
    );
    assert!(turns[0].workspace.as_ref().unwrap().gates[0].passed);
}

/// Issue 8, item 4: the briefing an agent gets asks for no JSON, carries no schema and
/// no URL (aider fetched the schema's `$schema` URL and installed Playwright as root),
/// and names the gates it must pass.
#[test]
fn an_agents_briefing_has_no_url_and_no_schema_and_names_the_gates() {
    let (dir, repo, _) = repo();
    let store = store_in(dir.path());
    let saved = dir.path().join("briefing.txt");
    let mut w = WorkerConfig::mock("coder", "coder");
    w.model = "command/coder".into();
    w.max_retries = 0;
    w.options = serde_json::json!({
        "command": format!(
            "sh -c 'cat > {}; echo ok > ok.txt; echo Done.'",
            saved.display()
        ),
        "pass_env": ["PATH"],
    })
    .as_object()
    .unwrap()
    .clone();
    enqueue(
        store.as_ref(),
        &*clock(),
        &request(
            &repo,
            &["write ok.txt"],
            vec![Roster { workers: vec![w] }],
            false,
        ),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    let briefing = std::fs::read_to_string(&saved).unwrap();
    for banned in [
        "http://",
        "https://",
        "$schema",
        "\"properties\"",
        "WorkerResult",
        "HandoffReport",
        "call 1 of 2",
        "one JSON object and nothing else",
    ] {
        assert!(
            !briefing.contains(banned),
            "the agent's briefing contains {banned:?}:\n{briefing}"
        );
    }
    assert!(briefing.contains("`tests`: `test -f ok.txt`"), "{briefing}");
    assert!(briefing.contains("Do not commit"), "{briefing}");
    assert!(briefing.contains(".baton/claim.json"), "{briefing}");
}

/// Regression (issue 8, item 6): in a team, turn 1 claimed `src/app.txt` with turn 0's
/// exact words while its commit changed only `NOTES.md`; it passed as a restatement
/// with 0 refusals. Every claim is verified before deduplication.
#[test]
fn a_false_file_claim_worded_like_an_earlier_true_one_is_refused() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("a", &agent), agent_worker("b", &agent)],
    };
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(
            &repo,
            &[
                "write src/app.txt",
                "LIE-restate src/app.txt",
                "write ok.txt",
            ],
            vec![roster],
            false,
        ),
    )
    .unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    let run = store.job(&queued.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns[1].workspace.as_ref().unwrap().files, ["NOTES.md"]);
    assert!(
        turns[1]
            .outcome
            .refusals
            .iter()
            .any(|r| r.reason.contains("did not change it")),
        "{:?}",
        turns[1].outcome
    );
    let state = store.load_state(&run).unwrap();
    let app = state
        .artifacts
        .iter()
        .find(|a| a.name == "src/app.txt")
        .unwrap();
    assert_eq!(app.versions.len(), 1);
    assert!(
        app.mentions.is_empty(),
        "a refused claim is not a reaffirmation: {:?}",
        app.mentions
    );
}

fn failing_agent(id: &str, command: &str) -> WorkerConfig {
    let mut w = WorkerConfig::mock(id, id);
    w.model = format!("command/{id}");
    w.max_retries = 3;
    w.options = serde_json::json!({"command": command, "pass_env": ["PATH"]})
        .as_object()
        .unwrap()
        .clone();
    w
}

/// Regression (issue 8, item 9): a hung agent, one stuck at a prompt, or one whose flag
/// was rejected was run three times with the same briefing (a hang cost 3 × 30 min).
/// A lone agent's job stops after the first such failure and says why; in a team the
/// next worker takes the turn.
#[test]
fn a_failed_agent_is_not_run_again_on_the_same_briefing() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let runs = dir.path().join("runs.txt");
    let bad = failing_agent(
        "bad",
        &format!(
            "sh -c 'echo x >> {}; echo \"error: unknown option --yolo\" >&2; exit 2'",
            runs.display()
        ),
    );
    let alone = enqueue(
        store.as_ref(),
        &*clock(),
        &request(
            &repo,
            &["write ok.txt"],
            vec![Roster {
                workers: vec![bad.clone()],
            }],
            false,
        ),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Failed, "{:?}", reports[0]);
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        1,
        "run once, not three times"
    );
    let job = store.job(&alone.jobs[0]).unwrap();
    let error = job.error.unwrap();
    assert!(error.contains("unknown option --yolo"), "{error}");
    assert!(error.contains("did not run it again"), "{error}");

    // In a team, the next worker takes the turn and the job finishes.
    std::fs::remove_file(&runs).unwrap();
    let team = enqueue(
        store.as_ref(),
        &*clock(),
        &request(
            &repo,
            &["write ok.txt"],
            vec![Roster {
                workers: vec![bad, agent_worker("good", &agent)],
            }],
            false,
        ),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    let run = store.job(&team.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].worker.as_str(), "good");
}

/// Issue 8, item 8: a gate that fails when the tasks are done gets fix turns (the next
/// worker in turn, gates run after each) instead of the job ending "finished"; with no
/// fix turns left it ends saying which gate fails.
#[test]
fn a_failing_gate_at_the_end_gets_fix_turns_and_never_ends_as_finished() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("a", &agent), agent_worker("b", &agent)],
    };
    let mut req = request(&repo, &["write src/app.txt"], vec![roster.clone()], false);
    req.fix_turns = 2;
    let fixed = enqueue(store.as_ref(), &*clock(), &req).unwrap();
    let mut req = request(&repo, &["write src/app.txt"], vec![roster], false);
    req.fix_turns = 0;
    let unfixed = enqueue(store.as_ref(), &*clock(), &req).unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();

    let job = store.job(&fixed.jobs[0]).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(outbox.ended, "finished");
    assert!(outbox.gates.iter().all(|g| g.passed), "{:?}", outbox.gates);
    let turns = store.turns(&job.run_id.unwrap()).unwrap();
    // Turn 0 the task (a's), turn 1 b's continuation (its first pass), whose gates
    // fail; turn 2 is a gate fix by a, and its gates pass.
    let gates_failed: Vec<bool> = turns
        .iter()
        .map(|t| {
            t.workspace
                .as_ref()
                .unwrap()
                .gates
                .iter()
                .any(|g| !g.passed)
        })
        .collect();
    assert_eq!(gates_failed, [false, true, false], "{turns:#?}");
    assert_eq!(turns.len(), 3);
    assert!(turns[2].assignment.task.contains("`tests`"));
    let state = store.load_state(&turns[0].run_id).unwrap();
    assert!(state.open_issues().all(|i| i.gate.is_none()));

    let job = store.job(&unfixed.jobs[0]).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(
        outbox.ended,
        "finished with failing gate(s) tests after 0 fix turn(s)"
    );
}

/// Regression (issue 9, item 3): a coding agent that made no commit and claimed nothing
/// completed its step on the strength of its final message alone. Its commit is the
/// evidence: without one (or a completed-work, artifact or decision claim in its notes)
/// the step stays open, and three such turns stop the job with a question.
#[test]
fn an_agent_that_commits_nothing_and_claims_nothing_does_not_complete_its_step() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("coder", &agent)],
    };
    let idle = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["idle"], vec![roster.clone()], false),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Failed, "{:?}", reports[0]);
    let job = store.job(&idle.jobs[0]).unwrap();
    let error = job.error.clone().unwrap_or_default();
    assert!(error.contains("no evidence of work"), "{error}");
    let run = job.run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 3, "{turns:#?}");
    assert!(turns.iter().all(|t| !t.workspace.as_ref().unwrap().changed));
    let state = store.load_state(&run).unwrap();
    assert_eq!(state.steps_done(), 0);
    assert!(
        turns[0]
            .outcome
            .warnings
            .iter()
            .any(|w| w.contains("no evidence of work") && w.contains("commit")),
        "{:?}",
        turns[0].outcome.warnings
    );

    // The same agent, told on its retry what happened, does the work and the job ends.
    let retried = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["retry-write ok.txt"], vec![roster], false),
    )
    .unwrap();
    let reports = work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{:?}", reports[0]);
    let run = store.job(&retried.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns[1].workspace.as_ref().unwrap().changed);
    let state = store.load_state(&run).unwrap();
    assert_eq!(state.plan[0].done_at_turn, Some(1));
}

/// Regression (issue 10, "gates become a station"): whether the gates ran was decided
/// before reconciling, by re-simulating the reconciler, which took the last step as done
/// whatever became of it. A last step left open for lack of evidence of work ran the
/// gates as if the job were over (and a failing gate opened an issue on a turn that did
/// nothing). The gates now run after the reconciler, decided from the reconciled state:
/// not while the step is open, once when its turn completes it.
#[test]
fn gates_do_not_run_after_a_last_step_left_open_and_run_once_when_it_is_done() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("coder", &agent)],
    };
    let gate_runs = |run: &RunId| -> Vec<(Option<u32>, bool)> {
        store
            .events(run, 0)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.event.kind {
                baton_protocol::EventKind::GateFinished { passed, .. } => {
                    Some((e.event.turn, passed))
                }
                _ => None,
            })
            .collect()
    };

    // The only step, never done: three turns, none of them the last, no gate run.
    let idle = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["idle"], vec![roster.clone()], false),
    )
    .unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    let run = store.job(&idle.jobs[0]).unwrap().run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 3, "{turns:#?}");
    let gated: Vec<usize> = turns
        .iter()
        .map(|t| t.workspace.as_ref().unwrap().gates.len())
        .collect();
    assert_eq!(
        gated,
        [0, 0, 0],
        "gates ran on turns that left the step open"
    );
    assert_eq!(gate_runs(&run), []);
    let state = store.load_state(&run).unwrap();
    assert!(
        state.issues.iter().all(|i| i.gate.is_none()),
        "{:?}",
        state.issues
    );

    // Open after its first turn, done after its second: the gate runs once, then.
    let retried = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["retry-write ok.txt"], vec![roster], false),
    )
    .unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    let job = store.job(&retried.jobs[0]).unwrap();
    let run = job.run_id.clone().unwrap();
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert!(turns[0].workspace.as_ref().unwrap().gates.is_empty());
    let ws1 = turns[1].workspace.as_ref().unwrap();
    assert_eq!(ws1.gates.len(), 1);
    assert!(ws1.gates[0].passed && ws1.gates[0].commit == ws1.commit);
    assert_eq!(gate_runs(&run), [(Some(1), true)]);
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(outbox.ended, "finished");
    assert_eq!(outbox.gates, ws1.gates);
}

/// Issue 10: a gate that prints a roster worker's literal key (one an agent wrote into
/// the tree) leaves it in neither the record nor the log file on disk.
#[test]
fn a_roster_key_a_gate_prints_reaches_neither_the_record_nor_its_log() {
    const KEY: &str = "sk-proj-LITERAL-roster-key-0123456789";
    let (dir, repo, agent) = repo();
    std::fs::write(repo.join("leak.txt"), format!("{KEY}\n")).unwrap();
    git(&repo, &["add", "."]);
    git(
        &repo,
        &[
            "commit",
            "-q",
            "-m",
            "the key, written where it should not be",
        ],
    );
    let store = store_in(dir.path());
    let mut coder = agent_worker("coder", &agent);
    // A command worker is handed its key under a variable of its own.
    coder.api_key_env = Some("CODER_API_KEY".into());
    let roster = Roster {
        workers: vec![coder],
    };
    let mut req = request(&repo, &["write ok.txt"], vec![roster.clone()], false);
    req.gates = vec![GateSpec::parse("tests=cat leak.txt && test -f ok.txt")];
    let queued = enqueue(store.as_ref(), &*clock(), &req).unwrap();
    // The key comes from the roster file, in memory only, as `baton work` passes it.
    let mut keys = roster;
    keys.workers[0].api_key = Some(baton_gateway::Credential::new(KEY).unwrap());
    let options = WorkOptions {
        keys: Some(keys),
        ..WorkOptions::default()
    };
    let reports = work(store.clone(), clock(), &options, &|_| {}).unwrap();
    assert_eq!(reports[0].status, JobStatus::Outbox, "{reports:?}");
    let job = store.job(&queued.jobs[0]).unwrap();
    let turns = store.turns(job.run_id.as_ref().unwrap()).unwrap();
    let gate = &turns.last().unwrap().workspace.as_ref().unwrap().gates[0];
    assert!(gate.passed, "{gate:?}");
    assert!(
        !gate.output_tail.contains("LITERAL"),
        "{}",
        gate.output_tail
    );
    let log = std::fs::read_to_string(gate.output_file.as_ref().unwrap()).unwrap();
    assert_eq!(log, "[redacted]\n");
}

/// A job's stream, as `baton work` prints it: its claim, each turn with its gates, as
/// they happen, and exactly what the store keeps and export renders.
#[test]
fn a_jobs_live_stream_has_its_claim_turns_and_gates_and_equals_the_stored_one() {
    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let roster = Roster {
        workers: vec![agent_worker("a", &agent), agent_worker("b", &agent)],
    };
    let queued = enqueue(
        store.as_ref(),
        &*clock(),
        &request(&repo, &["LIE-tests", "write ok.txt"], vec![roster], true),
    )
    .unwrap();
    let recorder = baton_engine::publish::Recorder::new();
    let options = WorkOptions::default();
    options.publisher.subscribe(recorder.clone());
    work(store.clone(), clock(), &options, &|_| {}).unwrap();
    let run = store.job(&queued.jobs[0]).unwrap().run_id.unwrap();

    let stored: Vec<_> = store
        .events(&run, 0)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(recorder.durable(), stored);
    let names: Vec<&str> = stored.iter().map(|e| e.kind.name()).collect();
    let first = |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .unwrap_or_else(|| panic!("no {n}: {names:?}"))
    };
    assert!(first("job_claimed") < first("turn_started"));
    assert!(first("model_called") < first("gate_started"));
    assert!(first("gate_started") < first("gate_finished"));
    assert!(first("gate_finished") < first("turn_committed"));
    // Turn 0's gate failed, turn 1's passed: the stream says which.
    let gates: Vec<bool> = stored
        .iter()
        .filter_map(|e| match &e.kind {
            baton_protocol::EventKind::GateFinished { passed, .. } => Some(*passed),
            _ => None,
        })
        .collect();
    assert_eq!(gates[..2], [false, true]);
    let live = baton_protocol::render::lines(recorder.events().iter().map(|e| &e.event), false);
    assert_eq!(
        live,
        baton_engine::export::events(store.as_ref(), &run, false).unwrap()
    );
    assert!(
        live.contains(&format!("job {} (", queued.jobs[0])),
        "{live}"
    );
    assert!(live.contains("gate tests: FAILED"), "{live}");
}

/// Jobs are routed when pools are configured: the router seats each turn from the
/// candidate's workers (a `credentials` step never goes to the family denied it, though
/// its pool is picked first on a tie), the gate-fix turn after the plan is seated too
/// (carrying the plan's tags), every seating is pinned with whom it left out and why,
/// and a step flag no station knows is refused when the job is queued.
#[test]
fn a_routed_job_seats_its_steps_and_its_gate_fix_and_pins_each_seating() {
    use baton_core::router::{Allowance, Pool, PoolId, Seat, SeatId, Window};
    use baton_core::state::StepTag;
    use baton_engine::config::Floor;
    use baton_engine::jobs::StepFlags;

    let (dir, repo, agent) = repo();
    let store = store_in(dir.path());
    let mut a = agent_worker("a", &agent);
    a.pool = Some(PoolId::new("pa"));
    let mut b = agent_worker("b", &agent);
    b.pool = Some(PoolId::new("pb"));
    let roster = Roster {
        workers: vec![a, b],
    };
    let pool = |id: &str| Pool {
        id: PoolId::new(id),
        allowance: Allowance::default(),
        window: Window::default(),
    };
    let mut seat = Seat::new(SeatId::new("build.step"));
    seat.deny_tags
        .insert("credentials".into(), vec!["family-a".into()]);
    let floor = Floor {
        pools: vec![pool("pa"), pool("pb")],
        seats: vec![seat],
    };
    let mut req = request(
        &repo,
        &["write config/secrets.txt", "write src/app.txt"],
        vec![roster],
        false,
    );
    req.fix_turns = 1;
    req.settings.floor = floor;
    req.steps = StepFlags {
        budgets: vec![Some(900)],
        seats: Vec::new(),
        tags: vec![StepTag::list("credentials").unwrap()],
        scopes: Vec::new(),
    };
    // A candidate of one worker is queued though `build.step` denies its family a tag:
    // the seats were checked against the whole roster; a step that needed it would stop
    // with the router's question. (Queued in a scratch store: it is not worked here.)
    let scratch = tempfile::tempdir().unwrap();
    let mut alone = req.clone();
    alone.candidates = vec![Roster {
        workers: vec![req.candidates[0].workers[0].clone()],
    }];
    alone.steps = StepFlags::default();
    enqueue(store_in(scratch.path()).as_ref(), &*clock(), &alone).unwrap();
    let mut typo = req.clone();
    typo.steps.seats = vec![Some(SeatId::new("reveiw.code"))];
    let err = enqueue(store.as_ref(), &*clock(), &typo).unwrap_err();
    assert!(err.to_string().contains("review"), "{err}");
    assert!(store.list_jobs().unwrap().is_empty(), "nothing queued");

    let queued = enqueue(store.as_ref(), &*clock(), &req).unwrap();
    work(store.clone(), clock(), &WorkOptions::default(), &|_| {}).unwrap();
    let job = store.job(&queued.jobs[0]).unwrap();
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(outbox.ended, "finished", "{outbox:?}");
    let run = job.run_id.unwrap();
    let turns = store.turns(&run).unwrap();
    let who: Vec<&str> = turns.iter().map(|t| t.worker.as_str()).collect();
    // T1 (credentials) to b; T2 untagged to a (pool pa first on the tie); the gate
    // fails after the plan, so one fix turn, which carries credentials: b again.
    assert_eq!(who, ["b", "a", "b"], "{turns:#?}");
    assert!(turns[2].assignment.task.contains("Gates fail at the end"));
    assert!(outbox.gates.iter().all(|g| g.passed), "{:?}", outbox.gates);

    let pins = store.pins(&baton_store::PinFilter::run(&run)).unwrap();
    let seated: Vec<(&str, &str, u32)> = pins
        .iter()
        .map(|p| (p.pin.phase.as_str(), p.pin.worker.as_str(), p.turn))
        .collect();
    assert_eq!(
        seated,
        [
            ("step T1", "b", 0),
            ("step T2", "a", 1),
            ("after the plan", "b", 2)
        ]
    );
    let left_out = pins[0].pin.excluded.as_ref().unwrap();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].worker.as_str(), "a");
    assert_eq!(left_out[0].reason, "policy_denied");
    assert_eq!(pins[1].pin.excluded, Some(Vec::new()), "nobody left out");
    assert_eq!(
        pins[2].pin.excluded.as_ref().unwrap()[0].reason,
        "policy_denied"
    );
    // The step budget given at enqueue is the step's.
    let state = store.load_state(&run).unwrap();
    assert_eq!(
        (state.plan[0].budget, state.plan[1].budget),
        (Some(900), None)
    );
    assert_eq!(turns[0].package.budget, 900);
}
