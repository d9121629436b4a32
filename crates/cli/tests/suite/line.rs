//! `baton line`: a unit run through the route's stations offline (with the mock workers
//! of three families), stopped for a human, resumed and shown; and the route itself,
//! validated with `--check` (as data, and against the configuration's workers).

use std::path::Path;

use serde_json::{Value, json};

use super::*;

/// A roster of mock workers of the given families, one worker each.
fn roster(families: &[&str]) -> String {
    families
        .iter()
        .enumerate()
        .map(|(i, family)| {
            format!("[[workers]]\nid = \"w{i}\"\nmodel = \"mock/m{i}\"\nfamily = \"{family}\"\n\n")
        })
        .collect()
}

#[test]
fn the_default_route_checks_and_prints_every_station() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(dir.path(), &["line", "--check"]);
    assert!(
        out.starts_with("route default: 9 stations, 18 seat lanes\n"),
        "{out}"
    );
    for station in [
        "intake",
        "discovery",
        "plan-loop",
        "build",
        "review",
        "synthesis",
        "gate",
        "merge",
    ] {
        assert!(
            out.contains(&format!(" {station} ")),
            "{station} missing:\n{out}"
        );
    }
    assert!(out.ends_with("not checked against a roster (give --config with [[workers]] to check who can take each seat)\n"), "{out}");
}

#[test]
fn a_route_file_with_problems_lists_each_with_what_to_fix_and_fails_as_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let route = baton_core::line::DEFAULT_ROUTE
        .replace("limit = 4", "limit = 0")
        .replace("review.breadth", "reveiw.breadth");
    std::fs::write(dir.path().join("route.toml"), route).unwrap();
    let out = baton(dir.path())
        .args(["line", "--route", "route.toml", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "error: route.toml: 2 problems in the route\n  - station plan-loop: a round limit of 0 runs no round; give limit = 1 or more (reaching it without converging asks a human)\n  - station review: \"reveiw.breadth\" is not a seat this station asks for; a review station's seats are named review.* (e.g. review.fresh-eyes)\n"
    );
}

#[test]
fn a_roster_of_one_family_cannot_staff_the_reviews() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baton.toml"), roster(&["mock", "mock"])).unwrap();
    let err = run_err(dir.path(), &["line", "--check"]);
    assert!(err.starts_with("error: the built-in default route, against the roster in baton.toml: 7 problems in the route"), "{err}");
    assert!(err.contains("seat review.deep-rounds could only be filled by family mock, which can also write the work it reviews (build.hard-step, build.rote-step)"), "{err}");
}

#[test]
fn a_roster_of_three_families_staffs_the_default_route() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        roster(&["anthropic", "openai", "zhipu"]),
    )
    .unwrap();
    let out = run_ok(dir.path(), &["line", "--check"]);
    assert!(out.ends_with("valid: every seat can be staffed from the 3 workers in baton.toml within the cross-family rule\n"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(dir.path(), &["line", "--check", "--json"])).unwrap();
    assert_eq!(json["roster_checked"], true);
    assert_eq!(json["route"]["stations"].as_array().unwrap().len(), 9);
}

#[test]
fn a_unit_runs_offline_to_an_approval_and_resumes_to_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run_ok(d, &["line", "Add rate limiting to the public API"]);
    assert!(
        out.contains("with 6 offline mock workers of 3 families"),
        "{out}"
    );
    for turn in [
        "turn   0  As lead.intake",
        "turn   8  As lead.plan",
        "turn  11  Lock the plan at plan-loop",
        "As checkpoint.confirm",
        "As review.fresh-eyes (lane 3 of 3), round 1",
        "turn  26  Synthesize the review at synthesis",
    ] {
        assert!(out.contains(turn), "{turn}: {out}");
    }
    assert!(out.contains("is done after 29 turns: APPROVED"), "{out}");
    let status: Value = serde_json::from_str(&run_ok(d, &["line", "--status", "--json"])).unwrap();
    assert_eq!(status["status"], "finished");
    assert_eq!(status["plan_locked"], "P3");
    assert_eq!(status["verdicts"], json!(["V1 APPROVED"]));
    assert_eq!(status["turns"], 29);
    let unit = status["unit"].as_str().unwrap().to_string();
    let again = run_ok(d, &["line", "--resume", &unit]);
    assert!(
        again.contains("resumed at turn 29") && again.contains("is done after 29 turns"),
        "{again}"
    );
    let shown = run_ok(d, &["line", "--status", &unit]);
    assert!(
        shown.contains("at the end of the route") && shown.contains("V1 APPROVED"),
        "{shown}"
    );
}

#[test]
fn a_vague_unit_stops_at_the_intake_with_its_question_for_a_human() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = baton(d).args(["line", "Fix it"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the line stopped for a human: at intake: the intake (lead.intake held by")
            && err.contains("1) What should \"Fix it\" change"),
        "{err}"
    );
    let status: Value = serde_json::from_str(&run_ok(d, &["line", "--status", "--json"])).unwrap();
    assert_eq!(status["status"], "blocked");
    assert!(
        status["question"]
            .as_str()
            .unwrap()
            .contains("What should \"Fix it\" change")
    );

    // The human answers; the answer is a decision by `human`, and the unit goes on.
    let unit = status["unit"].as_str().unwrap().to_string();
    let said = run_ok(
        d,
        &[
            "answer",
            &unit,
            "Return 429 after 100 requests a minute per key",
        ],
    );
    assert!(said.contains("recorded as a decision of human"), "{said}");
    // Answering again: refused with why, as a plain failure (exit 1), not as a
    // configuration error (exit 5: "the configuration file ... is wrong").
    let again = baton(d).args(["answer", &unit, "twice"]).output().unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let again = String::from_utf8_lossy(&again.stderr);
    assert!(again.contains("is not waiting for an answer"), "{again}");
    assert!(!again.contains("invalid configuration"), "{again}");
    let done = run_ok(d, &["line", "--resume", &unit]);
    assert!(done.contains("APPROVED"), "{done}");
    let export: Value =
        serde_json::from_str(&run_ok(d, &["export", &unit, "--format", "json"])).unwrap();
    let decisions = export["state"]["decisions"].as_array().unwrap();
    let human = decisions
        .iter()
        .find(|d| d["text"].as_str().unwrap().starts_with("A human answered"))
        .unwrap();
    assert_eq!(human["provenance"]["recorded_by"], "human");
    assert!(
        human["text"]
            .as_str()
            .unwrap()
            .ends_with("Return 429 after 100 requests a minute per key")
    );
}

#[test]
fn a_plan_loop_that_will_not_converge_stops_with_its_options_and_the_human_answer_acts_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = baton(d)
        .args([
            "line",
            "Add rate limiting to the public API, with a contested plan",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let unit = unit_id(&String::from_utf8_lossy(&out.stdout), 1);
    assert!(
        err.contains("the line stopped for a human: at plan-loop: plan-loop (plan.scrutiny) did not converge in 4 rounds")
            && err.contains("`accept` to lock the plan as it stands")
            && err.contains(&format!("unit {unit} waits for an answer: `baton answer {unit} \"…\"`")),
        "{err}"
    );
    // Where it stopped: the station's seats and who holds them, the open objections.
    let shown = run_ok(d, &["line", "--status", &unit]);
    assert!(
        shown.contains("at plan-loop, round 4")
            && shown.contains("seat plan.scrutiny (plan-loop round 4 lane 1): ")
            && shown.contains("seat plan.scrutiny (plan-loop round 4 lane 2): ")
            && shown.contains("findings: 8 open of 8")
            && shown.contains("MINOR at plan-loop: The plan leaves open where the limiter keeps its counts (objection of plan.scrutiny (lane 2 of 2), round 4)"),
        "{shown}"
    );
    let status: Value =
        serde_json::from_str(&run_ok(d, &["line", "--status", &unit, "--json"])).unwrap();
    let seats = status["seats"].as_array().unwrap();
    assert!(
        seats
            .iter()
            .any(|s| s["seat"] == "lead.plan" && s["phase"] == "plan-loop round 4"),
        "{seats:?}"
    );
    let said = run_ok(d, &["answer", &unit, "more 1"]);
    assert!(said.contains("1 more round(s) allowed"), "{said}");
    let out = baton(d).args(["line", "--resume", &unit]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did not converge in 5 rounds"),
        "{}",
        text(&out)
    );
    let said = run_ok(d, &["answer", &unit, "accept"]);
    assert!(
        said.contains("accepted: the line goes on as things stand"),
        "{said}"
    );
    let done = run_ok(d, &["line", "--resume", &unit]);
    assert!(
        done.contains("Lock the plan at plan-loop") && done.contains("APPROVED"),
        "{done}"
    );
}

#[test]
fn a_unit_needs_a_description_pools_to_route_by_and_resumes_only_units() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = run_err(d, &["line"]);
    assert!(err.contains("say what the unit is"), "{err}");
    // A configuration's workers with no pools: the line cannot seat its lanes.
    std::fs::write(d.join("baton.toml"), roster(&["a", "b", "c"])).unwrap();
    let out = baton(d)
        .args(["line", "Add rate limiting"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no pools are configured"));
    // A coding agent among them needs a repository: said so, with the flag to add.
    let agents = tempfile::tempdir().unwrap();
    std::fs::write(
        d.join("baton.toml"),
        repo_unit_config(&agents.path().join("agent.py"), "", 0),
    )
    .unwrap();
    let out = baton(d)
        .args(["line", "Add rate limiting"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker builder (command/builder) works in a git worktree, which a unit has only in a repository: run the unit with `baton line \"…\" --repo PATH`"),
        "{err}"
    );
    std::fs::remove_file(d.join("baton.toml")).unwrap();
    let created = run_ok(
        d,
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    );
    let plain = created.trim();
    let err = run_err(d, &["line", "--resume", plain]);
    assert!(err.contains("is not a unit of the assembly line"), "{err}");
    // Nor does an answer go to a plain run: the command names the wrong run (exit 2),
    // as `line --resume` of it does, and says what continues it.
    let out = baton(d).args(["answer", plain, "yes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("`baton resume {plain}`")), "{err}");
}

#[test]
fn the_line_demo_runs_the_default_route_offline_and_says_who_held_each_seat() {
    let dir = tempfile::tempdir().unwrap();
    // A configuration's workers do not change the demo: it is offline by definition.
    std::fs::write(dir.path().join("baton.toml"), roster(&["a", "a"])).unwrap();
    let out = run_ok(dir.path(), &["demo", "--line"]);
    for said in [
        "with 6 offline mock workers of 3 families",
        "is done after 42 turns: APPROVED",
        "who held which seat",
        "  plan       plan.co-draft ",
        "  build      build.rote-step ",
        "checkpoint.confirm ",
        "checkpoints: 3 steps built, each found and confirmed by another family; 1 finding(s):",
        "review: 1 finding(s); converged after round 2, then (in the fix round) after round 3",
        "synthesis 1: NEEDS_CHANGES (MAJOR at ",
        "synthesis 2: APPROVED (no open finding)",
        "fix rounds: 1",
    ] {
        assert!(out.contains(said), "{said}: {out}");
    }
    // What the checkpoint found, by whom, and who fixed and who confirmed it.
    let n1 = out
        .lines()
        .find(|l| l.trim_start().starts_with("N1 MAJOR by "))
        .expect(&out);
    assert!(n1.contains("at checkpoint.find on T2"), "{n1}");
    assert!(n1.contains("— fixed; fix claimed by "), "{n1}");
    assert!(n1.contains(", confirmed by "), "{n1}");
    let n2 = out
        .lines()
        .find(|l| l.trim_start().starts_with("N2 MAJOR by "))
        .expect(&out);
    assert!(n2.contains("at review.deep-rounds"), "{n2}");
}

/// A coding agent for the build seats: writes a file per step of the locked plan (the
/// implementation without the word the gate looks for), and in a fix round, briefed
/// with the failing gate, fixes the implementation.
const BUILD_AGENT: &str = r###"
import json, os, re, sys, time
claim_file = sys.argv[1]
brief = sys.stdin.read()
m = re.search(r"## Assigned task\n(.*)", brief)
task = m.group(1).strip() if m else ""
step = re.search(r"build step (T\d+) \(([^)]*)\)", task)
if step:
    name, title = step.group(1), step.group(2)
    path = "impl.txt" if title.startswith("Implement") else "step-" + name + ".txt"
    text = ("first try at: " if path == "impl.txt" else "") + title + "\n"
    stall = os.environ.get("STALL_MARK")
    if stall and name == "T2" and not os.path.exists(stall):
        # Half a file, then a hang: the process driving the unit is killed meanwhile.
        with open(path, "w") as f:
            f.write("half-writ")
        with open(stall, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
elif "exit code" in brief:
    path, text = "impl.txt", "fixed after the gate failed\n"
else:
    path, text = "notes.txt", "looked at the fix round\n"
# The checkpoint's and the review's open findings it was shown, fixed: named by id.
fixed = []
shown = re.search(r"## Open findings\n(.*?)(?:\n## |\Z)", brief, re.S)
for line in (shown.group(1).splitlines() if shown else []):
    found = re.search(r"\bN\d+\b", line)
    if found and "fix claimed by" not in line:
        fixed.append({"issue": found.group(0), "note": "fixed in " + path})
        text += "fixed " + found.group(0) + "\n"
with open(path, "w") as f:
    f.write(text)
with open(claim_file, "w") as f:
    json.dump({"summary": "wrote " + path, "last_action": "wrote " + path, "next_action": "check it",
               "artifacts": [{"name": path, "description": "wrote " + path}],
               "resolved_issues": fixed}, f)
"###;

/// The configuration of a unit in a repository: the agent above for the build seats
/// (family acme), mock workers of three other families for every other seat, answering
/// after `delay_ms` each call.
fn repo_unit_config(agent: &Path, env: &str, delay_ms: u64) -> String {
    let mut toml = format!(
        "estimator = \"heuristic\"\n\
         [[pools]]\nid = \"pa\"\n[[pools]]\nid = \"alpha\"\n[[pools]]\nid = \"beta\"\n[[pools]]\nid = \"gamma\"\n\
         [[workers]]\nid = \"builder\"\nmodel = \"command/builder\"\nfamily = \"acme\"\npool = \"pa\"\n\
         qualified = [\"build.*\"]\n\
         options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], env = {{ {env} }} }}\n",
        agent.display()
    );
    for (i, family) in ["alpha", "beta", "gamma", "alpha", "beta", "gamma"]
        .iter()
        .enumerate()
    {
        toml.push_str(&format!(
            "[[workers]]\nid = \"{family}-{i}\"\nmodel = \"mock/{family}\"\nfamily = \"{family}\"\npool = \"{family}\"\n\
             qualified = [\"discovery.*\", \"plan.*\", \"lead.*\", \"checkpoint.*\", \"review.*\"]\n\
             options = {{ delay_ms = {delay_ms} }}\n"
        ));
    }
    toml
}

/// A git repository in `d` with one commit (returned), configured for a unit with
/// [`BUILD_AGENT`] (written in `agents`, outside the repository) given `env`.
fn repo_with_build_agent(d: &Path, agents: &Path, env: &str) -> String {
    repo_with_build_agent_at(d, agents, env, 0)
}

/// As [`repo_with_build_agent`], the mock workers answering after `delay_ms`.
pub(super) fn repo_with_build_agent_at(
    d: &Path,
    agents: &Path,
    env: &str,
    delay_ms: u64,
) -> String {
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "dev@example.com"]);
    git(d, &["config", "user.name", "dev"]);
    std::fs::write(d.join("README.md"), "hello\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "init"]);
    let agent = agents.join("agent.py");
    std::fs::write(&agent, BUILD_AGENT).unwrap();
    std::fs::write(
        d.join("baton.toml"),
        repo_unit_config(&agent, env, delay_ms),
    )
    .unwrap();
    git(d, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn a_unit_in_a_repository_builds_in_its_worktree_is_sent_back_by_a_failing_gate_and_ends_in_the_outbox()
 {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let base = repo_with_build_agent(d, agents.path(), "");

    let out = baton(d)
        .args([
            "line",
            "Add rate limiting to the public API",
            "--repo",
            ".",
            "--gate",
            "check=grep -q fixed impl.txt",
        ])
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let unit = unit_id(&String::from_utf8_lossy(&out.stdout), 1);
    let branch = format!("baton/job-{unit}");
    assert!(
        said.contains(&format!("on branch {branch} (1 gate(s))")),
        "{said}"
    );
    assert!(said.contains("done after"), "{said}");
    assert!(said.contains("APPROVED"), "{said}");

    // The user's checkout is untouched; the unit's branch has a commit per build turn,
    // each by the agent, and ends with the fix.
    assert_eq!(git(d, &["rev-parse", "HEAD"]).trim(), base);
    assert!(!d.join("impl.txt").exists());
    let log = git(d, &["log", "--format=%s", &format!("{base}..{branch}")]);
    let commits: Vec<&str> = log.lines().collect();
    assert!(commits.len() >= 4, "{log}");
    assert!(commits.iter().all(|c| c.contains("(builder)")), "{log}");
    let fixed = git(d, &["show", &format!("{branch}:impl.txt")]);
    assert_eq!(fixed, "fixed after the gate failed\n");

    // The gate failed first (its issue sent the unit back to the build), then passed.
    let store = baton_store::SqliteStore::open(&db(d)).unwrap();
    let run = baton_core::ids::RunId(unit.clone());
    use baton_store::Store;
    let turns = store.turns(&run).unwrap();
    let gated: Vec<bool> = turns
        .iter()
        .filter(|t| t.assignment.task.starts_with("Gates at"))
        .map(|t| t.workspace.as_ref().unwrap().gates.iter().all(|g| g.passed))
        .collect();
    assert_eq!(gated, vec![false, true], "gate runs");
    // The checking seats were shown the change itself: the diff from the base.
    for seat in ["checkpoint.find", "review.fresh-eyes"] {
        let checked = turns
            .iter()
            .rfind(|t| t.lane.as_ref().is_some_and(|l| l.seat.as_str() == seat))
            .unwrap();
        let text = &checked.package.text;
        assert!(
            text.contains(&format!(
                "## The change under review (`git diff {}",
                &base[..12]
            )) && text.contains("+++ b/impl.txt"),
            "{seat}: {text}"
        );
    }
    let state: baton_core::state::ExecutionState = store.load_state(&run).unwrap();
    let gate_issue = state
        .issues
        .iter()
        .find(|i| i.gate.as_deref() == Some("check"))
        .expect("the failing gate's issue");
    assert_eq!(gate_issue.status, baton_core::state::IssueStatus::Resolved);
    assert_eq!(state.line.as_ref().unwrap().fixes, 1);

    // The outbox: the branch's patch against the base, and the unit's report.
    let outbox = d.join(".baton/worktrees/outbox");
    let patch = std::fs::read_to_string(outbox.join(format!("{unit}.patch"))).unwrap();
    assert!(patch.contains("+fixed after the gate failed"), "{patch}");
    assert!(said.contains(&format!("outbox: branch {branch}")), "{said}");
    let report = std::fs::read_to_string(outbox.join(format!("{unit}.md"))).unwrap();
    for part in [
        "## Stations",
        "| build |",
        "build.rote-step builder (acme, pool pa)",
        "## Findings",
        "## Never verified",
        ": check (`grep -q fixed impl.txt`) on ",
        ": FAILED in ",
        ": passed in ",
        "| pa |",
        &format!("Branch `{branch}`"),
    ] {
        assert!(report.contains(part), "{part:?} missing:\n{report}");
    }
}

#[test]
fn a_unit_killed_while_its_agent_builds_resumes_from_the_last_committed_turn_with_the_half_file_set_aside()
 {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let mark = agents.path().join("stalled");
    repo_with_build_agent(
        d,
        agents.path(),
        &format!("STALL_MARK = \"{}\"", mark.display()),
    );
    let mut child = baton(d)
        .args(["line", "Add rate limiting to the public API", "--repo", "."])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(&mark).map_or(true, |pid| pid.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never reached T2"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no cleanup of any kind
    let _ = child.wait();
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut said).unwrap();
    let unit = unit_id(&said, 1);
    // The agent that was left running is stopped too (its baton is gone).
    let agent_pid = std::fs::read_to_string(&mark).unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-9", agent_pid.trim()])
        .status();

    let store = baton_store::SqliteStore::open(&db(d)).unwrap();
    let run = baton_core::ids::RunId(unit.clone());
    use baton_store::Store;
    let before = store.turns(&run).unwrap().len();
    let worktree = d.join(".baton/worktrees").join(&unit);
    assert_eq!(
        std::fs::read_to_string(worktree.join("impl.txt")).unwrap(),
        "half-writ"
    );

    let out = baton(d).args(["line", "--resume", &unit]).output().unwrap();
    let resumed = text(&out);
    assert_eq!(out.status.code(), Some(0), "{resumed}");
    assert!(
        resumed.contains(&format!("unit {unit}: resumed at turn {before}")),
        "{resumed}"
    );
    assert!(
        resumed
            .contains("work after the last committed turn was set aside at refs/baton/discarded/"),
        "{resumed}"
    );
    assert!(resumed.contains("APPROVED"), "{resumed}");
    // Every build lane of the first round committed once: T2 was built once, after the
    // resume, from the last committed turn's commit.
    let turns = store.turns(&run).unwrap();
    let built: Vec<String> = turns
        .iter()
        .filter_map(|t| {
            t.lane
                .as_ref()
                .filter(|l| l.seat.as_str().starts_with("build."))
        })
        .filter_map(|l| l.step.clone())
        .collect();
    assert_eq!(built, ["T1", "T2", "T3"], "{resumed}");
    let nums: Vec<u32> = turns.iter().map(|t| t.turn).collect();
    assert_eq!(nums, (0..turns.len() as u32).collect::<Vec<_>>());
    let branch = format!("baton/job-{unit}");
    let implemented = git(d, &["show", &format!("{branch}:impl.txt")]);
    assert!(
        implemented.starts_with("first try at: Implement"),
        "{implemented}"
    );
}

/// The unit id that is word `n` of what `baton line` printed (`unit ID: …`), without
/// its colon.
pub(super) fn unit_id(said: &str, n: usize) -> String {
    said.split_whitespace()
        .nth(n)
        .unwrap_or_else(|| panic!("no unit id in: {said}"))
        .trim_end_matches(':')
        .to_string()
}

/// What a unit's record says it ran: each committed turn's lane (station, seat, lane,
/// round, step) and worker, in turn order; and its pins as (seat, phase, worker).
pub(super) type Ran = (
    Vec<(String, String, u32, u32, Option<String>, String)>,
    Vec<(String, String, String)>,
);

fn ran(d: &Path, unit: &str) -> Ran {
    ran_in(&baton_store::SqliteStore::open(&db(d)).unwrap(), unit)
}

/// As [`ran`], from any store.
pub(super) fn ran_in(store: &dyn baton_store::Store, unit: &str) -> Ran {
    let run = baton_core::ids::RunId(unit.to_string());
    let turns = store.turns(&run).unwrap();
    let nums: Vec<u32> = turns.iter().map(|t| t.turn).collect();
    assert_eq!(nums, (0..turns.len() as u32).collect::<Vec<_>>());
    let lanes = turns
        .iter()
        .map(|t| match &t.lane {
            Some(l) => (
                l.station.clone(),
                l.seat.to_string(),
                l.index,
                l.round,
                l.step.clone(),
                t.worker.to_string(),
            ),
            None => (
                t.assignment.task.split(':').next().unwrap().to_string(),
                String::new(),
                0,
                0,
                None,
                t.worker.to_string(),
            ),
        })
        .collect();
    let pins = store
        .pins(&baton_store::PinFilter::run(&run))
        .unwrap()
        .into_iter()
        .map(|p| {
            (
                p.pin.seat.to_string(),
                p.pin.phase,
                p.pin.worker.to_string(),
            )
        })
        .collect();
    (lanes, pins)
}

/// `baton` in `d` with `args`, its stdout's lines sent as they come.
fn spawn_lines(
    d: &Path,
    args: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    spawn_lines_with(baton(d), args)
}

/// `cmd` with `args`, its stdout's lines sent as they come.
pub(super) fn spawn_lines_with(
    mut cmd: std::process::Command,
    args: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = cmd
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

#[test]
fn a_unit_killed_at_each_station_resumes_from_its_last_committed_turn_and_ends_as_one_never_killed()
{
    const GATE: &str = "check=sleep 1; grep -q fixed impl.txt";
    // The same unit never killed, its mock workers answering at once: what the killed
    // one must end as, lane for lane.
    let clean = tempfile::tempdir().unwrap();
    let agents = tempfile::tempdir().unwrap();
    repo_with_build_agent(clean.path(), agents.path(), "");
    let out = baton(clean.path())
        .args([
            "line",
            "Add rate limiting to the public API",
            "--repo",
            ".",
            "--gate",
            GATE,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let clean_unit = unit_id(&String::from_utf8_lossy(&out.stdout), 1);
    let never_killed = ran(clean.path(), &clean_unit);

    // Killed by SIGKILL once at each station while a seat's call (or the gate) is in
    // flight: the printed line names the turn just committed (or the unit, before its
    // first), and what comes after it is under way (the mock workers take 500 ms a
    // call, the gate a second), or the merge station is held up at its outbox.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_build_agent_at(d, agents.path(), "", 500);
    // Each kill: after the how-many-th line saying what.
    let kills = [
        ("unit ", 1, "the intake"),
        ("As lead.intake", 1, "the four discovery lanes at once"),
        ("As lead.discovery", 1, "the two co-drafts at once"),
        ("As lead.plan", 1, "the first scrutiny"),
        ("As checkpoint.find", 1, "the confirmation, after the find"),
        (
            "As review.fresh-eyes (lane 3 of 3)",
            1,
            "the review's breadth and deep round at once",
        ),
        ("Synthesize the review", 1, "the gate"),
        // The gate fails once (a fix round), then passes: the merge station then writes
        // its patch into a pipe nobody reads, and hangs there until it is killed.
        ("Gates at gate", 2, "the merge station"),
    ];
    let outbox = d.join(".baton/worktrees/outbox");
    let mut unit = String::new();
    for (k, (after, times, in_flight)) in kills.iter().enumerate() {
        let merging = k + 1 == kills.len();
        if merging {
            std::fs::create_dir_all(&outbox).unwrap();
            let fifo = outbox.join(format!("{unit}.patch"));
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
        }
        let (mut child, lines) = if k == 0 {
            spawn_lines(
                d,
                &[
                    "line",
                    "Add rate limiting to the public API",
                    "--repo",
                    ".",
                    "--gate",
                    GATE,
                ],
            )
        } else {
            spawn_lines(d, &["line", "--resume", &unit])
        };
        let mut last_turn = None;
        let mut said = Vec::new();
        let mut seen = 0;
        loop {
            let line = lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {after:?} line: {said:#?}"));
            if unit.is_empty() && line.starts_with("unit ") {
                unit = unit_id(&line, 1);
            }
            if let Some(n) = line
                .strip_prefix("turn ")
                .and_then(|r| r.split_whitespace().next())
            {
                last_turn = n.parse::<u32>().ok();
            }
            seen += usize::from(line.contains(after));
            said.push(line);
            if seen == *times {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
        if merging {
            // Stuck at the pipe, nothing of the merge recorded.
            assert!(child.try_wait().unwrap().is_none(), "{said:#?}");
        }
        child.kill().unwrap(); // SIGKILL: no cleanup of any kind
        let _ = child.wait();
        // Nothing of what was in flight was committed: the record ends at the turn
        // the line named.
        let (lanes, _) = ran(d, &unit);
        assert_eq!(
            lanes.len() as u32,
            last_turn.map_or(0, |n| n + 1),
            "killed during {in_flight}: {said:#?}"
        );
        if merging {
            std::fs::remove_file(outbox.join(format!("{unit}.patch"))).unwrap();
        }
    }
    let out = baton(d).args(["line", "--resume", &unit]).output().unwrap();
    let resumed = text(&out);
    assert_eq!(out.status.code(), Some(0), "{resumed}");
    assert!(resumed.contains("APPROVED"), "{resumed}");
    // Each lane ran once, on the worker it was seated with, and every pin is kept: the
    // record is the unkilled unit's.
    let (lanes, pins) = ran(d, &unit);
    assert_eq!(lanes, never_killed.0);
    assert_eq!(pins, never_killed.1);
    let branch = format!("baton/job-{unit}");
    assert_eq!(
        git(d, &["show", &format!("{branch}:impl.txt")]),
        "fixed after the gate failed\n"
    );
}

/// `--merge` with the base branch where the unit left it: the merge station
/// fast-forwards the checked-out branch, files and all, and says so.
#[test]
fn merge_fast_forwards_the_checked_out_base_branch_when_it_did_not_move() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let base = repo_with_build_agent(d, agents.path(), "");
    let out = baton(d)
        .args([
            "line",
            "Add rate limiting to the public API",
            "--repo",
            ".",
            "--merge",
            "--gate",
            "check=grep -q fixed impl.txt",
        ])
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let unit = unit_id(&said, 2);
    let head = git(d, &["rev-parse", &format!("baton/job-{unit}")])
        .trim()
        .to_string();
    assert!(
        said.contains(&format!(
            "merged into main: fast-forward from {} to {}",
            &base[..12],
            &head[..12]
        )),
        "{said}"
    );
    assert_eq!(git(d, &["rev-parse", "main"]).trim(), head);
    // The checkout moved with it: the unit's files are there.
    assert_eq!(
        std::fs::read_to_string(d.join("impl.txt")).unwrap(),
        "fixed after the gate failed\n"
    );
    let report =
        std::fs::read_to_string(d.join(".baton/worktrees/outbox").join(format!("{unit}.md")))
            .unwrap();
    assert!(
        report.contains("Merged into main: fast-forward from"),
        "{report}"
    );
}

/// A unit stopped at its intake ("Fix it" is too vague) while the base branch moves,
/// then answered and resumed with `--merge`: returns the unit.
fn stopped_unit_with_merge(d: &Path, agents: &Path) -> String {
    repo_with_build_agent(d, agents, "");
    let out = baton(d)
        .args(["line", "Fix it", "--repo", ".", "--merge"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    unit_id(&String::from_utf8_lossy(&out.stdout), 1)
}

/// A colleague commits `file` on main while the unit waits for its answer; the unit is
/// then answered and resumed: returns where main moved to, and the resume's output.
fn resumed_after_a_colleague_commits(
    d: &Path,
    unit: &str,
    file: &str,
    content: &str,
) -> (String, std::process::Output) {
    std::fs::write(d.join(file), content).unwrap();
    git(d, &["add", file]);
    git(d, &["commit", "-q", "-m", "colleague"]);
    let moved = git(d, &["rev-parse", "main"]).trim().to_string();
    run_ok(
        d,
        &[
            "answer",
            unit,
            "Return 429 after 100 requests a minute per key",
        ],
    );
    let out = baton(d).args(["line", "--resume", unit]).output().unwrap();
    (moved, out)
}

#[test]
fn merge_joins_a_base_branch_that_moved_on_other_files_with_a_merge_commit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let unit = stopped_unit_with_merge(d, agents.path());
    // Someone commits on main meanwhile, on a file the unit never touches.
    let (moved, out) =
        resumed_after_a_colleague_commits(d, &unit, "CHANGELOG.md", "a colleague's change\n");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "merged into main: it had moved to {} on other files, so merge commit",
            &moved[..12]
        )),
        "{said}"
    );
    // main is the merge of both: its parents are the unit's last turn and the colleague's.
    let main = git(d, &["rev-parse", "main"]);
    assert_eq!(main, git(d, &["rev-parse", &format!("baton/job-{unit}")]));
    let parents = git(d, &["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    assert!(parents.contains(&moved), "{parents}");
    assert!(d.join("CHANGELOG.md").exists() && d.join("impl.txt").exists());
    let trailer = git(
        d,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Baton-Job,valueonly)",
            "main",
        ],
    );
    assert_eq!(trailer.trim(), unit);
}

#[test]
fn merge_refuses_a_base_branch_that_changed_the_units_files_and_leaves_everything_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let unit = stopped_unit_with_merge(d, agents.path());
    let (moved, out) =
        resumed_after_a_colleague_commits(d, &unit, "impl.txt", "a colleague's implementation\n");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains("not merged into main: main moved since the unit started and changed files the unit changed too (impl.txt); merge by hand"),
        "{said}"
    );
    assert!(said.contains("is done after"), "{said}");
    assert_eq!(git(d, &["rev-parse", "main"]).trim(), moved);
    assert_eq!(
        std::fs::read_to_string(d.join("impl.txt")).unwrap(),
        "a colleague's implementation\n"
    );
    // The patch is in the outbox all the same.
    assert!(
        d.join(".baton/worktrees/outbox")
            .join(format!("{unit}.patch"))
            .exists()
    );

    // A unit started from a commit has no branch to land on.
    let err = run_err(
        d,
        &["line", "Fix it", "--repo", ".", "--base", &moved, "--merge"],
    );
    assert!(
        err.contains("merge lands the unit on the branch it starts from"),
        "{err}"
    );
}

/// The planted bug with a coding agent in a real repository: the first find pass on the
/// implementation step raises a MAJOR finding, the agent (briefed with it) rebuilds the
/// step and names the finding it fixed, another worker confirms; the review's deep
/// round raises a second, the synthesis sends the unit to a fix round, the agent fixes
/// that too, it is confirmed, and the gate passes: APPROVED, every fix a commit.
#[test]
fn a_planted_bug_in_a_repository_is_caught_fixed_by_the_agent_and_confirmed_by_another_worker() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agents = tempfile::tempdir().unwrap();
    let base = repo_with_build_agent(d, agents.path(), "");
    let out = baton(d)
        .args([
            "line",
            "Add rate limiting to the public API, with a planted bug",
            "--repo",
            ".",
            "--gate",
            "check=grep -q 'fixed N' impl.txt",
        ])
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("APPROVED"), "{said}");
    let unit = unit_id(&said, 2);
    use baton_store::Store;
    let store = baton_store::SqliteStore::open(&db(d)).unwrap();
    let run = baton_core::ids::RunId(unit.clone());
    let state: baton_core::state::ExecutionState = store.load_state(&run).unwrap();
    let findings: Vec<(String, String, Option<String>, String)> = state
        .findings
        .iter()
        .map(|f| {
            let closed = match f.closed.as_ref().map(|c| &c.by) {
                Some(baton_core::line::ClosedBy::Confirmed { worker, .. }) => worker.to_string(),
                other => format!("{other:?}"),
            };
            (
                f.station.clone(),
                f.severity.as_str().to_string(),
                f.step.clone(),
                closed,
            )
        })
        .collect();
    assert_eq!(findings.len(), 2, "{findings:?}");
    assert_eq!(
        (findings[0].0.as_str(), findings[0].2.as_deref()),
        ("build", Some("T2"))
    );
    assert_eq!(findings[1].0, "review");
    for (station, severity, _, closed) in &findings {
        assert_eq!(severity, "MAJOR", "{station}");
        // Confirmed by a mock worker, never by the agent that fixed it.
        assert!(closed.contains('-') && closed != "builder", "{findings:?}");
    }
    // The fixes are commits by the agent on the unit's branch.
    let branch = format!("baton/job-{unit}");
    let implemented = git(d, &["show", &format!("{branch}:impl.txt")]);
    assert!(implemented.contains("fixed N1"), "{implemented}");
    let log = git(d, &["log", "--format=%s", &format!("{base}..{branch}")]);
    assert!(log.lines().count() >= 5, "{log}");
}
