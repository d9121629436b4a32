//! Many hosts on one PostgreSQL (issue 13). Each node is a `baton work --follow` that
//! reaches the server through a link of its own: a TCP forwarder on its own loopback
//! address (127.0.0.11, .12, …) that the test can cut, as a network partition or a
//! dead switch port looks to that host; the 200-job test runs each node in a network
//! namespace of its own where it can (`netns.rs`). The nodes share the repository's
//! disk, as hosts sharing the repository over a network file system would.
//!
//! - Four nodes work 200 two-step jobs while nodes are SIGKILLed and restarted at
//!   random: every job ends once in the outbox, no job is worked by two live nodes at
//!   once, no turn is committed twice, and every job branch holds exactly the commits
//!   of its committed turns (nothing of a killed node's half turn).
//! - A node cut off from the database for longer than its lease comes back fenced: the
//!   node that took its job over finished it, and the cut-off node commits nothing, to
//!   the store or to the branch, then goes on working.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::turn::TurnStatus;
use baton_store::{JobInfo, JobStatus, PostgresStore, Store};

use super::jobs::repo_with_agent;
use super::postgres::{Cuttable, Schema, baton_on, collect_stderr, link_on, ok_on, stop};
use super::*;

/// A coding agent that writes the file its task names and logs when it started and
/// ended, on which node, by the system-wide monotonic clock the test reads too.
const AGENT: &str = r###"
import json, os, re, sys, time
claim_file = sys.argv[1]
brief = sys.stdin.read()
m = re.search(r"## Assigned task\n(?:Step T\d+: )?(.*)", brief)
task = m.group(1).strip() if m else ""
node = os.environ.get("BATON_TEST_NODE", "?")
def note(what):
    with open(os.environ["AGENT_LOG"], "a") as f:
        f.write("%s %s %.6f %s\n" % (what, node, time.monotonic(), task))
note("start")
time.sleep(float(os.environ.get("AGENT_SLEEP", "0")))
path = task.split()[1]
with open(path, "w") as f:
    f.write(task + "\n")
note("end")
with open(claim_file, "w") as f:
    json.dump({"summary": "did " + task, "last_action": "wrote " + path, "next_action": "next",
               "artifacts": [{"name": path, "description": "written"}]}, f)
"###;

/// CLOCK_MONOTONIC in seconds: Python's `time.monotonic()` reads the same clock.
fn monotonic_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// A repository with the agent, and a roster of one worker running it. The node's
/// number and the agent's sleep come from each node's own environment.
fn fleet_dir(d: &Path, log: &Path) {
    repo_with_agent(d);
    let agent = d.join("fleet_agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"fast\"\nmodel = \"command/fast\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", \
             pass_env = [\"PATH\", \"BATON_TEST_NODE\", \"AGENT_SLEEP\"], \
             env = {{ AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        ),
    )
    .unwrap();
}

/// One simulated host: its link to the database and its `baton work` process.
pub(super) struct Node {
    pub(super) index: usize,
    pub(super) link: Cuttable,
    url: String,
    /// The network namespace it runs in, if it has one of its own.
    netns: Option<String>,
    lease_s: u32,
    sleep: &'static str,
    child: Option<Child>,
    /// Its stderr, across restarts.
    said: Arc<Mutex<String>>,
    /// When it was SIGKILLed (monotonic seconds).
    kills: Vec<f64>,
}

impl Node {
    pub(super) fn new(index: usize, schema: &Schema, lease_s: u32, sleep: &'static str) -> Node {
        let link = link_on(&format!("127.0.0.{}", 11 + index));
        Node::on(index, schema, lease_s, sleep, link, None)
    }

    /// A node whose `baton work` runs in network namespace `netns`, reaching the
    /// server through `link`.
    pub(super) fn on(
        index: usize,
        schema: &Schema,
        lease_s: u32,
        sleep: &'static str,
        link: Cuttable,
        netns: Option<String>,
    ) -> Node {
        let url = schema.url_via(Some(&link.addr));
        Node {
            index,
            link,
            url,
            netns,
            lease_s,
            sleep,
            child: None,
            said: Arc::default(),
            kills: Vec::new(),
        }
    }

    pub(super) fn start(&mut self, d: &Path) {
        let mut cmd = match &self.netns {
            None => baton_on(d, &self.url),
            Some(ns) => {
                // `ip netns exec NS baton …`, with the environment `baton()` gives.
                let plain = baton_on(d, &self.url);
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns])
                    .arg(plain.get_program())
                    .current_dir(d);
                for (key, value) in plain.get_envs() {
                    match value {
                        Some(v) => cmd.env(key, v),
                        None => cmd.env_remove(key),
                    };
                }
                cmd
            }
        };
        let mut child = cmd
            .args(["work", "--follow", "--concurrency", "2", "--poll-ms", "200"])
            .args(["--lease-s", &self.lease_s.to_string()])
            .env("BATON_TEST_NODE", self.index.to_string())
            .env("AGENT_SLEEP", self.sleep)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let seen = collect_stderr(&mut child);
        let into = self.said.clone();
        // Appended to the node's whole log as it comes.
        std::thread::spawn(move || {
            let mut taken = 0;
            loop {
                std::thread::sleep(Duration::from_millis(100));
                // Read before the copy: once the collector is gone, this copy is the
                // last and holds everything.
                let collector_gone = Arc::strong_count(&seen) == 1;
                let now = seen.lock().unwrap().clone();
                if now.len() > taken {
                    into.lock().unwrap().push_str(&now[taken..]);
                    taken = now.len();
                }
                if collector_gone {
                    break;
                }
            }
        });
        self.child = Some(child);
    }

    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            self.kills.push(monotonic_s());
            child.wait().unwrap();
        }
    }

    pub(super) fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child);
        }
    }

    pub(super) fn said(&self) -> String {
        self.said.lock().unwrap().clone()
    }
}

/// xorshift64*: reproducible from the seed the test prints.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

/// One run of the agent, from its log.
#[derive(Debug, Clone)]
pub(super) struct Execution {
    pub(super) node: usize,
    pub(super) start: f64,
    pub(super) end: Option<f64>,
}

/// Every task's executions in the order they started.
pub(super) fn executions(log: &Path) -> BTreeMap<String, Vec<Execution>> {
    let mut by_task: BTreeMap<String, Vec<Execution>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let mut parts = line.splitn(4, ' ');
        let (what, node, at, task) = (
            parts.next().unwrap(),
            parts.next().unwrap().parse::<usize>().unwrap(),
            parts.next().unwrap().parse::<f64>().unwrap(),
            parts.next().unwrap().to_string(),
        );
        let runs = by_task.entry(task).or_default();
        match what {
            "start" => runs.push(Execution {
                node,
                start: at,
                end: None,
            }),
            "end" => {
                let open = runs
                    .iter_mut()
                    .rev()
                    .find(|e| e.node == node && e.end.is_none())
                    .unwrap_or_else(|| panic!("an end with no start: {line}"));
                open.end = Some(at);
            }
            other => panic!("unknown log line {other}: {line}"),
        }
    }
    for runs in by_task.values_mut() {
        runs.sort_by(|a, b| a.start.total_cmp(&b.start));
    }
    by_task
}

/// The commits of a job's branch after `main`, oldest first.
fn branch_commits(d: &Path, job: &str) -> Vec<String> {
    git(
        d,
        &["rev-list", "--reverse", &format!("main..baton/job-{job}")],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Checks a finished job: exactly its steps' turns committed, once each, and its
/// branch holding exactly those turns' commits, each naming its run and turn.
fn check_job(d: &Path, store: &dyn Store, job: &JobInfo, steps: usize) {
    assert_eq!(job.status, JobStatus::Outbox, "{job:?}");
    let run = job.run_id.clone().expect("a worked job has a run");
    let turns = store.turns(&run).unwrap();
    assert_eq!(
        turns.len(),
        steps,
        "job {}: {} turns committed for {steps} steps",
        job.id,
        turns.len()
    );
    let mut commits = Vec::new();
    for (n, turn) in turns.iter().enumerate() {
        assert_eq!(turn.turn as usize, n);
        assert_eq!(turn.status, TurnStatus::Committed, "{}: {turn:?}", job.id);
        let ws = turn.workspace.as_ref().expect("a job's turn has a commit");
        assert!(ws.changed, "{}: turn {n} changed nothing", job.id);
        commits.push(ws.commit.clone());
    }
    assert_eq!(
        branch_commits(d, &job.id),
        commits,
        "job {}: the branch is not exactly its committed turns",
        job.id
    );
    for (n, commit) in commits.iter().enumerate() {
        let message = git(d, &["show", "-s", "--format=%B", commit]);
        assert!(
            message.contains(&format!("Baton-Run: {run}"))
                && message.contains(&format!("Baton-Turn: {n}\n")),
            "{commit}: {message}"
        );
    }
}

/// Queues a one-step job of the fleet roster.
fn enqueue_one(d: &Path, url: &str, task: &str) {
    ok_on(
        d,
        url,
        &[
            "enqueue",
            "--objective",
            "Write a file",
            "--worker",
            "fast",
            "--task",
            task,
        ],
    );
}

/// Waits for `done`, failing with what `node` said.
fn wait_on(node: &Node, what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < limit,
            "timed out waiting for {what}; node {} said:\n{}",
            node.index,
            node.said()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A repository with the fleet's agent and roster, on a schema of its own.
pub(super) struct Fleet {
    pub(super) schema: Schema,
    _dir: tempfile::TempDir,
    pub(super) d: PathBuf,
    pub(super) log: PathBuf,
    pub(super) url: String,
    pub(super) store: PostgresStore,
}

impl Fleet {
    pub(super) fn new(tag: &str) -> Fleet {
        let schema = Schema::new(tag);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let log = d.join("agent.log");
        fleet_dir(&d, &log);
        let url = schema.url();
        ok_on(&d, &url, &["migrate"]);
        let store = schema.store();
        Fleet {
            schema,
            _dir: dir,
            d,
            log,
            url,
            store,
        }
    }

    /// Node 0 has claimed the only job and its agent runs: the job, as it is then.
    pub(super) fn node_0_at_work(&self, node: &Node) -> JobInfo {
        enqueue_one(&self.d, &self.url, "write slow.txt");
        wait_on(
            node,
            "node 0's agent to start",
            Duration::from_secs(30),
            || std::fs::read_to_string(&self.log).is_ok_and(|l| l.contains("start 0 ")),
        );
        let job = self.store.list_jobs().unwrap()[0].clone();
        assert!(
            job.lease_owner.is_some() && job.status == JobStatus::Running,
            "{job:?}"
        );
        job
    }

    /// Waits for `other` to finish `job`; the number of events its run has then.
    pub(super) fn taken_over(&self, job: &str, other: &Node) -> usize {
        wait_on(
            other,
            "the job to be taken over",
            Duration::from_secs(60),
            || self.store.job(job).unwrap().status == JobStatus::Outbox,
        );
        let run = self.store.job(job).unwrap().run_id.unwrap();
        self.store.events(&run, 0).unwrap().len()
    }

    /// After node 1 took the job over and finished it, and node 0 came back: node 0
    /// said it lost the job, committed nothing (the job is exactly node 1's one turn,
    /// and the branch exactly its commit) and recorded nothing but that loss.
    pub(super) fn fenced_off(&self, job: &str, node_0: &Node, events_before: usize) {
        wait_on(
            node_0,
            "node 0 to say it lost the job",
            Duration::from_secs(30),
            || node_0.said().contains("lease lost"),
        );
        // Whatever its agent does after, nothing of it is committed.
        std::thread::sleep(Duration::from_secs(2));
        let job = self.store.job(job).unwrap();
        assert_eq!(job.attempts, 2, "{job:?}");
        check_job(&self.d, &self.store, &job, 1);
        let runs = executions(&self.log);
        let slow = &runs["write slow.txt"];
        assert_eq!(slow.len(), 2, "{slow:?}");
        assert_eq!((slow[0].node, slow[1].node), (0, 1), "{slow:?}");
        let run = job.run_id.unwrap();
        let after: Vec<&str> = self.store.events(&run, 0).unwrap()[events_before..]
            .iter()
            .map(|e| e.event.kind.name())
            .collect();
        assert!(
            after.iter().all(|&k| k == "lease_lost"),
            "node 0 wrote {after:?}\n{}",
            node_0.said()
        );
    }

    /// With `other` gone, `node_0` works the next job: it is back at work.
    pub(super) fn works_again(&self, node_0: &mut Node, mut other: Node) {
        other.stop();
        enqueue_one(&self.d, &self.url, "write after.txt");
        wait_on(
            node_0,
            "node 0 to work the next job",
            Duration::from_secs(90),
            || (self.store.list_jobs().unwrap().iter()).all(|j| j.status == JobStatus::Outbox),
        );
        node_0.stop();
        let runs = executions(&self.log);
        let after = &runs["write after.txt"];
        assert!(after.iter().all(|e| e.node == 0), "{after:?}");
        for job in self.store.list_jobs().unwrap() {
            check_job(&self.d, &self.store, &job, 1);
        }
    }
}

#[test]
fn four_nodes_work_200_jobs_exactly_once_while_nodes_are_killed_at_random() {
    const NODES: usize = 4;
    const JOBS: usize = 200;
    let fleet = Fleet::new("fleet");
    let (schema, d, log, url) = (&fleet.schema, fleet.d.as_path(), &fleet.log, &fleet.url);
    let seed = std::env::var("BATON_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("fleet: seed {seed} (BATON_TEST_SEED={seed} repeats the kills)");
    let mut rng = Rng(seed);

    // Hosts of their own (network namespaces) where this may make them; else each
    // node on its own loopback address.
    let hosts = super::netns::hosts(NODES as u32);
    let mut nodes: Vec<Node> = match &hosts {
        Some(hosts) => (hosts.iter().enumerate())
            .map(|(i, host)| super::netns::node_on(host, i, schema, "0.05"))
            .collect(),
        None => (0..NODES)
            .map(|i| Node::new(i, schema, 3, "0.05"))
            .collect(),
    };
    for node in &mut nodes {
        node.start(d);
    }
    // The work arrives while the nodes follow the queue: from four shells at once.
    let enqueuers: Vec<_> = (0..4)
        .map(|shell| {
            let (d, url) = (d.to_path_buf(), url.clone());
            std::thread::spawn(move || {
                for j in (shell..JOBS).step_by(4) {
                    let (a, b) = (format!("write j{j}a.txt"), format!("write j{j}b.txt"));
                    ok_on(
                        &d,
                        &url,
                        &[
                            "enqueue",
                            "--objective",
                            "Write two files",
                            "--worker",
                            "fast",
                            "--task",
                            &a,
                            "--task",
                            &b,
                        ],
                    );
                }
            })
        })
        .collect();

    let store = &fleet.store;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(420);
    let mut next_kill = Instant::now() + rng.millis(500, 1500);
    let mut restart_at: Vec<Option<Instant>> = vec![None; NODES];
    let mut kills = 0;
    let mut enqueuers = Some(enqueuers);
    loop {
        let now = Instant::now();
        if enqueuers
            .as_ref()
            .is_some_and(|e| e.iter().all(|h| h.is_finished()))
        {
            for h in enqueuers.take().unwrap() {
                h.join().unwrap();
            }
        }
        let jobs = store.list_jobs().unwrap();
        let done = jobs
            .iter()
            .filter(|j| j.status == JobStatus::Outbox)
            .count();
        if enqueuers.is_none() && done == JOBS {
            break;
        }
        if let Some(failed) = jobs.iter().find(|j| j.status == JobStatus::Failed) {
            panic!(
                "a job failed: {failed:?}\nnodes said:\n{}",
                nodes
                    .iter()
                    .map(Node::said)
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            );
        }
        assert!(
            now < deadline,
            "{done}/{JOBS} jobs done after {:?} and {kills} kills",
            started.elapsed()
        );
        if now >= next_kill {
            let running: Vec<usize> = (0..NODES).filter(|&i| nodes[i].child.is_some()).collect();
            if !running.is_empty() {
                let victim = running[rng.below(running.len() as u64) as usize];
                nodes[victim].kill();
                kills += 1;
                restart_at[victim] = Some(now + rng.millis(200, 1000));
            }
            next_kill = now + rng.millis(700, 2000);
        }
        for (i, at) in restart_at.iter_mut().enumerate() {
            if at.is_some_and(|at| at <= now) {
                nodes[i].start(d);
                *at = None;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = started.elapsed();
    for node in &mut nodes {
        node.stop();
    }

    // Every job ended once, in the outbox, with exactly its two turns.
    let jobs = store.list_jobs().unwrap();
    assert_eq!(jobs.len(), JOBS);
    for job in &jobs {
        check_job(d, store, job, 2);
    }
    // No task was worked by two live nodes at once: a run that ended (its node alive
    // through it) was never overlapped by a later one, unless its node was killed
    // between the two starts (the killed node's agent may outlive it by a moment).
    let runs = executions(log);
    assert_eq!(runs.len(), 2 * JOBS, "every task ran");
    let mut redone = 0;
    for (task, runs) in &runs {
        redone += runs.len() - 1;
        for pair in runs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let killed_between = nodes[a.node]
                .kills
                .iter()
                .any(|&k| k >= a.start && k <= b.start);
            if let Some(end) = a.end
                && !killed_between
            {
                assert!(
                    b.start >= end,
                    "{task} ran on node {} while node {} still ran it: {a:?} {b:?}",
                    b.node,
                    a.node
                );
            }
        }
    }
    let reclaimed = jobs.iter().filter(|j| j.attempts > 1).count();
    eprintln!(
        "fleet: {JOBS} jobs ({} turns) on {NODES} nodes ({}) in {took:.1?}, {kills} kills, \
         {reclaimed} jobs taken over, {redone} agent runs redone",
        2 * JOBS,
        if hosts.is_some() {
            "network namespaces"
        } else {
            "loopback addresses"
        },
    );
    assert!(kills >= 5, "only {kills} kills: the test did not test much");
}

#[test]
fn a_node_cut_off_for_longer_than_its_lease_comes_back_fenced() {
    let fleet = Fleet::new("partition");
    // Node 0's agent takes 8 s; its lease holds 3 s without a heartbeat.
    let mut cut_off = Node::new(0, &fleet.schema, 3, "8");
    cut_off.start(&fleet.d);
    let job = fleet.node_0_at_work(&cut_off);

    // The partition: node 0 keeps running, but nothing it sends arrives.
    cut_off.link.cut();
    let mut other = Node::new(1, &fleet.schema, 3, "0");
    other.start(&fleet.d);
    let events_before = fleet.taken_over(&job.id, &other);
    let running = cut_off
        .child
        .as_mut()
        .unwrap()
        .try_wait()
        .unwrap()
        .is_none();
    assert!(
        running,
        "node 0 outlives the partition:\n{}",
        cut_off.said()
    );

    // Node 0 comes back while its agent would still be at work (8 s from its start).
    cut_off.link.restore();
    fleet.fenced_off(&job.id, &cut_off, events_before);
    fleet.works_again(&mut cut_off, other);
}

/// A node that stops dead without dying (SIGSTOP: a VM paused, a laptop lid closed)
/// longer than its lease, while its agent goes on: when it wakes the job is another
/// node's, and the turn its agent finished meanwhile is refused by the store's fence
/// (its heartbeat could not stop it: it was frozen too).
#[test]
fn a_node_frozen_for_longer_than_its_lease_wakes_fenced() {
    let fleet = Fleet::new("frozen");
    let mut frozen = Node::new(0, &fleet.schema, 3, "2");
    frozen.start(&fleet.d);
    let job = fleet.node_0_at_work(&frozen);
    let pid = frozen.child.as_ref().unwrap().id().to_string();
    // baton alone: its agent, a process of its own, finishes meanwhile.
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    let mut other = Node::new(1, &fleet.schema, 3, "0");
    other.start(&fleet.d);
    let events_before = fleet.taken_over(&job.id, &other);
    wait_on(
        &frozen,
        "node 0's agent to finish",
        Duration::from_secs(30),
        || executions(&fleet.log)["write slow.txt"][0].end.is_some(),
    );
    signal("-CONT");
    fleet.fenced_off(&job.id, &frozen, events_before);
    fleet.works_again(&mut frozen, other);
}

/// A database that drops every connection for a moment (a server restart, a network
/// blip) while a turn is in flight: the job is not failed for it. The turn commits on
/// a fresh connection, or is redone from the last committed turn; each step's turn
/// commits once.
#[test]
fn a_blip_of_the_database_mid_turn_fails_no_job() {
    let fleet = Fleet::new("blip");
    let (d, url, store, log) = (&fleet.d, &fleet.url, &fleet.store, &fleet.log);
    let mut node = Node::new(0, &fleet.schema, 30, "1");
    node.start(d);
    for round in 0..3 {
        let task = format!("write blip{round}.txt");
        enqueue_one(d, url, &task);
        wait_on(&node, "the agent to start", Duration::from_secs(30), || {
            executions(log).contains_key(&task)
        });
        node.link.cut();
        std::thread::sleep(Duration::from_millis(200));
        node.link.restore();
        wait_on(&node, "the job to end", Duration::from_secs(60), || {
            store
                .list_jobs()
                .unwrap()
                .iter()
                .all(|j| matches!(j.status, JobStatus::Outbox | JobStatus::Failed))
        });
    }
    node.stop();
    for job in store.list_jobs().unwrap() {
        assert_eq!(job.status, JobStatus::Outbox, "{job:?}\n{}", node.said());
        check_job(d, store, &job, 1);
    }
}

/// A job's write that the database refuses for a passing reason (here the run's row
/// locked past the store's 5 s wait, as a long migration or a stuck session would)
/// does not fail the job: it goes back to the queue and continues from its last
/// committed turn. Regression: the job ended `failed` with "the database is busy".
#[test]
fn a_write_refused_for_a_passing_reason_fails_no_job() {
    let fleet = Fleet::new("busy");
    let (d, url, store, schema) = (&fleet.d, &fleet.url, &fleet.store, &fleet.schema);
    let mut node = Node::new(0, schema, 30, "1");
    node.start(d);
    enqueue_one(d, url, "write busy.txt");
    wait_on(&node, "the job's run", Duration::from_secs(30), || {
        store.list_jobs().unwrap()[0].run_id.is_some()
    });
    let job = store.list_jobs().unwrap()[0].clone();
    let run = job.run_id.clone().unwrap();
    // Another session holds the run's row past the store's 5 s wait.
    let mut raw =
        ::postgres::Client::connect(&super::postgres::server(), ::postgres::NoTls).unwrap();
    let mut lock = raw.transaction().unwrap();
    lock.execute(
        &format!(
            "SELECT 1 FROM \"{}\".runs WHERE id = $1 FOR UPDATE",
            schema.name
        ),
        &[&run.0],
    )
    .unwrap();
    wait_on(
        &node,
        "the write to be refused",
        Duration::from_secs(30),
        || node.said().contains("busy"),
    );
    lock.rollback().unwrap();
    wait_on(&node, "the job to end", Duration::from_secs(60), || {
        matches!(
            store.job(&job.id).unwrap().status,
            JobStatus::Outbox | JobStatus::Failed
        )
    });
    node.stop();
    check_job(d, store, &store.job(&job.id).unwrap(), 1);
    assert!(node.said().contains("queued again"), "{}", node.said());
}
