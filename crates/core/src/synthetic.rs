//! Deterministic, realistic-looking states for benchmarks, property tests and
//! `baton bench`. The same `(n, seed)` always gives the same state, on every platform.

use crate::ids::{RunId, Timestamp, WorkerId};
use crate::state::{
    Artifact, ArtifactVersion, Assumption, CompletedWork, Decision, ExecutionState, FailedAttempt,
    HandoffRecord, Issue, IssueStatus, PlanStep, Provenance, Reaffirmation, ResolutionClaim,
    Severity, Stamped, StepStatus, WorkerRecord,
};

/// splitmix64: tiny, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const OBJECTIVE: &str = "Build a task management REST API with users, projects and tasks: \
PostgreSQL storage, token authentication, pagination, and an OpenAPI description.";

const STEPS: &[&str] = &[
    "Design the PostgreSQL schema for users, projects and tasks",
    "Implement user registration and password hashing",
    "Implement token authentication with refresh token rotation",
    "Add CRUD endpoints for projects",
    "Add CRUD endpoints for tasks with assignment and due dates",
    "Add cursor pagination to list endpoints",
    "Write the OpenAPI description",
    "Add rate limiting to the authentication endpoints",
    "Write integration tests against a real database",
    "Add structured logging and request ids",
    "Prepare the migration and deployment notes",
    "Review error responses for consistency",
];

const SUBJECTS: &[&str] = &[
    "the tasks table",
    "refresh tokens",
    "project membership",
    "the pagination cursor",
    "password hashes",
    "the OpenAPI document",
    "rate limit counters",
    "due date handling",
    "the users endpoint",
    "database migrations",
    "error responses",
    "request logging",
    "the auth middleware",
    "task assignment",
    "soft deletes",
];

const VERBS: &[&str] = &[
    "store",
    "validate",
    "index",
    "rotate",
    "encode",
    "paginate",
    "version",
    "cache",
    "serialise",
    "lock",
    "audit",
    "hash",
];

const CHOICES: &[&str] = &[
    "with PostgreSQL 16 and a partial index on open tasks",
    "as opaque base64 cursors over (created_at, id)",
    "with argon2id and per-user salts",
    "in a single transaction per request",
    "as RFC 7807 problem documents",
    "with a sliding window in Redis",
    "behind a feature flag until the tests pass",
    "using UUIDv7 primary keys",
    "with ON DELETE CASCADE from projects",
    "as JWTs signed with Ed25519, 15 minute lifetime",
];

const REASONS: &[&str] = &[
    "keeps list queries fast at a million rows",
    "clients must not depend on offsets",
    "the security review asked for it",
    "it avoids a race between concurrent writers",
    "it matches what the frontend already expects",
    "the hosting plan includes it at no cost",
    "it keeps the migration reversible",
    "the load test showed lock contention otherwise",
];

const PROBLEMS: &[&str] = &[
    "returns 500 instead of 404",
    "leaks the internal error message",
    "is not covered by any test",
    "breaks when the cursor is malformed",
    "allows a revoked token to be reused once",
    "double counts requests behind the proxy",
    "ignores the project permission check",
    "times out on large projects",
];

const FAILURES: &[&str] = &[
    "the migration locked the table for minutes",
    "the ORM generated N+1 queries",
    "the tokenizer library is not maintained",
    "offset pagination skipped rows under concurrent inserts",
    "the test database was shared between tests",
    "the middleware ran after the handler",
    "bcrypt cost 14 made login take two seconds",
];

const ARTIFACT_KINDS: &[&str] = &["code", "sql", "doc", "test", "config"];

const WORKERS: &[(&str, &str, &str)] = &[
    ("w1", "mock/alpha-large", "alpha"),
    ("w2", "mock/beta-pro", "beta"),
    ("w3", "mock/gamma-fast", "gamma"),
    ("w4", "mock/alpha-small", "alpha"),
    ("w5", "mock/delta", "delta"),
];

/// How many records of each kind a synthetic state gets.
#[derive(Debug, Clone, Copy)]
struct Counts {
    decisions: usize,
    completed: usize,
    artifacts: usize,
    issues: usize,
    failed: usize,
    assumptions: usize,
    handoffs: usize,
    turns: u32,
    steps: usize,
}

/// A state with about `n` records spread across every category (decisions, completed
/// work, artifacts, issues, failed attempts, assumptions, handoffs), recorded over
/// `max(1, n / 8)` turns by five workers.
pub fn state_with_items(n: usize, seed: u64) -> ExecutionState {
    // Shares in percent: decisions 20, completed 18, artifacts 12, issues 15, failed 10,
    // assumptions 10, handoffs the rest.
    let decisions = n * 20 / 100;
    let completed = n * 18 / 100;
    let artifacts = n * 12 / 100;
    let issues = n * 15 / 100;
    let failed = n * 10 / 100;
    let assumptions = n * 10 / 100;
    let handoffs = n - decisions - completed - artifacts - issues - failed - assumptions;
    let turns = u32::try_from((n / 8).max(1)).unwrap_or(u32::MAX);
    build(
        Counts {
            decisions,
            completed,
            artifacts,
            issues,
            failed,
            assumptions,
            handoffs,
            turns,
            steps: 4 + (seed % 9) as usize,
        },
        seed,
    )
}

/// A state the size of a short demo run: five turns, 10 decisions, 6 completed items,
/// 8 artifacts, 6 issues, 4 failed attempts, 5 assumptions and 5 handoffs.
pub fn demo_sized_state() -> ExecutionState {
    build(
        Counts {
            decisions: 10,
            completed: 6,
            artifacts: 8,
            issues: 6,
            failed: 4,
            assumptions: 5,
            handoffs: 5,
            turns: 5,
            steps: 7,
        },
        7,
    )
}

fn prov(rng: &mut Rng, turn: u32) -> Provenance {
    let (id, model, _) = WORKERS[turn as usize % WORKERS.len()];
    // Mostly the turn's worker; now and then a record restated by someone else.
    let (id, model) = if rng.chance(10) {
        let (i, m, _) = WORKERS[rng.below(WORKERS.len())];
        (i, m)
    } else {
        (id, model)
    };
    Provenance {
        recorded_by: WorkerId::new(id),
        model: model.to_string(),
        turn,
        recorded_at: Timestamp(1_767_225_600_000 + i64::from(turn) * 60_000),
    }
}

/// The turn of the `i`-th of `len` records: records are appended as turns go by.
fn turn_of(i: usize, len: usize, turns: u32) -> u32 {
    if len == 0 {
        return 0;
    }
    ((i as u64 * u64::from(turns)) / len as u64) as u32
}

fn reaffirmations(rng: &mut Rng, turn: u32, turns: u32) -> Vec<Reaffirmation> {
    let mut out = Vec::new();
    if turns > turn + 1 && rng.chance(25) {
        for _ in 0..1 + rng.below(2) {
            let later = turn + 1 + rng.below((turns - turn - 1) as usize) as u32;
            out.push(Reaffirmation {
                by: WorkerId::new(WORKERS[later as usize % WORKERS.len()].0),
                turn: later,
                wording: None,
                severity: None,
            });
        }
    }
    out
}

fn build(c: Counts, seed: u64) -> ExecutionState {
    let mut rng = Rng(seed ^ 0x5eed_ba70_0000_0001);
    let steps: Vec<String> = (0..c.steps)
        .map(|i| STEPS[i % STEPS.len()].to_string())
        .collect();
    let mut s = ExecutionState::new(RunId(format!("run-{seed}")), OBJECTIVE, &steps);
    s.turns = c.turns;
    let done = (c.steps * c.turns as usize / (c.turns as usize + 4)).min(c.steps);
    for (i, step) in s.plan.iter_mut().enumerate().take(done) {
        let turn = turn_of(i, done, c.turns);
        *step = PlanStep {
            status: StepStatus::Done,
            done_by: Some(WorkerId::new(WORKERS[turn as usize % WORKERS.len()].0)),
            done_at_turn: Some(turn),
            ..step.clone()
        };
    }

    for i in 0..c.decisions {
        let turn = turn_of(i, c.decisions, c.turns);
        let text = format!(
            "{} {} {}",
            capitalise(rng.pick(VERBS)),
            rng.pick(SUBJECTS),
            rng.pick(CHOICES)
        );
        s.decisions.push(Decision {
            id: format!("D{}", i + 1),
            text,
            reason: rng.chance(85).then(|| rng.pick(REASONS).to_string()),
            provenance: prov(&mut rng, turn),
            reaffirmed: reaffirmations(&mut rng, turn, c.turns),
        });
    }
    for i in 0..c.completed {
        let turn = turn_of(i, c.completed, c.turns);
        let step = s
            .plan
            .get(rng.below(s.plan.len().max(1)))
            .map(|p| p.id.clone());
        s.completed.push(CompletedWork {
            id: format!("C{}", i + 1),
            text: format!(
                "Implemented {} for {} {}",
                rng.pick(VERBS),
                rng.pick(SUBJECTS),
                rng.pick(CHOICES)
            ),
            step,
            provenance: prov(&mut rng, turn),
            reaffirmed: Vec::new(),
        });
    }
    for i in 0..c.artifacts {
        let turn = turn_of(i, c.artifacts, c.turns);
        let kind = rng.pick(ARTIFACT_KINDS);
        let subject = rng
            .pick(SUBJECTS)
            .trim_start_matches("the ")
            .replace(' ', "_");
        let name = match kind {
            "sql" => format!("migrations/{:04}_{subject}.sql", i + 1),
            "doc" => format!("docs/{subject}.md"),
            "test" => format!("tests/{subject}_{}.rs", i + 1),
            "config" => format!("config/{subject}.toml"),
            _ => format!("src/{subject}_{}.rs", i + 1),
        };
        let mut versions = Vec::new();
        let n_versions = 1 + rng.below(3);
        for v in 0..n_versions {
            let vturn = (turn + v as u32).min(c.turns.saturating_sub(1).max(turn));
            let verified = rng.chance(40);
            versions.push(ArtifactVersion {
                version: v as u32 + 1,
                description: format!("{} {}", capitalise(rng.pick(VERBS)), rng.pick(CHOICES)),
                content_hash: Some(format!("{:016x}", rng.next())),
                content: None,
                provenance: prov(&mut rng, vturn),
                verified,
                verified_by: verified.then(|| "gate:tests".to_string()),
            });
        }
        s.artifacts.push(Artifact {
            id: format!("A{}", i + 1),
            name,
            kind: kind.to_string(),
            versions,
            mentions: Vec::new(),
        });
    }
    for i in 0..c.issues {
        let turn = turn_of(i, c.issues, c.turns);
        let severity = match rng.below(10) {
            0 => Severity::Critical,
            1..=3 => Severity::High,
            4..=6 => Severity::Medium,
            _ => Severity::Low,
        };
        let resolved = rng.chance(30);
        let claimed = !resolved && rng.chance(30);
        let (by, _, _) = WORKERS[rng.below(WORKERS.len())];
        s.issues.push(Issue {
            id: format!("I{}", i + 1),
            title: format!("{} {}", capitalise(rng.pick(SUBJECTS)), rng.pick(PROBLEMS)),
            detail: if rng.chance(50) {
                format!("Seen while testing {}", rng.pick(SUBJECTS))
            } else {
                String::new()
            },
            severity,
            status: if resolved {
                IssueStatus::Resolved
            } else {
                IssueStatus::Open
            },
            provenance: prov(&mut rng, turn),
            resolution_claimed_by: (claimed || resolved).then(|| ResolutionClaim {
                by: WorkerId::new(by),
                turn: (turn + 1).min(c.turns),
                at: Timestamp(1_767_225_600_000 + i64::from(turn + 1) * 60_000),
                note: Some("fixed in the latest version".to_string()),
            }),
            verified_by: resolved.then(|| "gate:tests".to_string()),
            gate: None,
            reaffirmed: reaffirmations(&mut rng, turn, c.turns),
        });
    }
    for i in 0..c.failed {
        let turn = turn_of(i, c.failed, c.turns);
        s.failed_attempts.push(FailedAttempt {
            id: format!("F{}", i + 1),
            what: format!("Tried to {} {}", rng.pick(VERBS), rng.pick(SUBJECTS)),
            why: rng.pick(FAILURES).to_string(),
            provenance: prov(&mut rng, turn),
            reaffirmed: reaffirmations(&mut rng, turn, c.turns),
        });
    }
    for i in 0..c.assumptions {
        let turn = turn_of(i, c.assumptions, c.turns);
        s.assumptions.push(Assumption {
            id: format!("S{}", i + 1),
            text: format!(
                "{} can {} {}",
                capitalise(rng.pick(SUBJECTS)),
                rng.pick(VERBS),
                rng.pick(CHOICES)
            ),
            provenance: prov(&mut rng, turn),
            reaffirmed: reaffirmations(&mut rng, turn, c.turns),
        });
    }
    for i in 0..c.handoffs {
        let turn = turn_of(i, c.handoffs, c.turns);
        let mut warnings = Vec::new();
        for _ in 0..rng.below(3) {
            warnings.push(format!(
                "Do not assume {} {}; {} was never verified",
                rng.pick(SUBJECTS),
                rng.pick(PROBLEMS).replace("is not", "is"),
                rng.pick(SUBJECTS)
            ));
        }
        s.handoffs.push(HandoffRecord {
            id: format!("H{}", i + 1),
            notes: format!(
                "Worked on {}. {} {} still needs a look; {}.",
                rng.pick(SUBJECTS),
                capitalise(rng.pick(SUBJECTS)),
                rng.pick(PROBLEMS),
                rng.pick(REASONS)
            ),
            warnings,
            engine_warnings: Vec::new(),
            provenance: prov(&mut rng, turn),
        });
    }
    if c.turns > 0 && (c.decisions + c.completed + c.artifacts) > 0 {
        let last = c.turns - 1;
        s.last_action = Some(Stamped {
            text: format!("Committed {} {}", rng.pick(SUBJECTS), rng.pick(CHOICES)),
            provenance: prov(&mut rng, last),
        });
        s.next_action = Some(Stamped {
            text: format!(
                "{} {} and run the integration tests",
                capitalise(rng.pick(VERBS)),
                rng.pick(SUBJECTS)
            ),
            provenance: prov(&mut rng, last),
        });
    }
    for (i, (id, model, family)) in WORKERS.iter().enumerate() {
        let turns: Vec<u32> = (0..c.turns)
            .filter(|t| *t as usize % WORKERS.len() == i)
            .collect();
        if !turns.is_empty() {
            s.workers.push(WorkerRecord {
                id: WorkerId::new(*id),
                model: (*model).to_string(),
                family: (*family).to_string(),
                turns,
            });
        }
    }
    s
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_state_and_sizes_add_up() {
        let a = state_with_items(1000, 42);
        assert_eq!(a, state_with_items(1000, 42));
        assert_ne!(a, state_with_items(1000, 43));
        assert_eq!(a.item_count(), 1000);
        assert!(a.decisions.len() >= 150 && a.open_issues().count() > 0);
        assert_eq!(state_with_items(0, 1).item_count(), 0);
    }

    #[test]
    fn demo_state_has_the_documented_shape() {
        let s = demo_sized_state();
        assert_eq!(s.turns, 5);
        assert_eq!(
            (
                s.decisions.len(),
                s.artifacts.len(),
                s.issues.len(),
                s.failed_attempts.len(),
                s.assumptions.len(),
                s.handoffs.len()
            ),
            (10, 8, 6, 4, 5, 5)
        );
        assert!(s.handoffs.iter().any(|h| !h.warnings.is_empty()));
    }
}
