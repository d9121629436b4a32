//! Restatement detection, data-driven: a corpus of statement pairs, each recorded by one
//! worker and then claimed by the next, with what the record must look like afterwards.
//!
//! Regression (issue 9, item 1): the near-duplicate test dropped `not`/`no` and
//! single-digit tokens before comparing word sets, so opposite or numerically different
//! statements were recorded as reaffirmations of each other ("Set the retry limit to 5"
//! reaffirmed "… to 3"). Every `Keep` row below merged before the fix. A pair that must
//! stay apart is kept as two records, and the turn warns the next worker that the new one
//! may contradict the earlier one.

use baton_core::claims::{
    DecisionClaim, FailedAttemptClaim, HandoffReport, IssueClaim, WorkerResult,
};
use baton_core::compiler::{Assignment, AssignmentKind, WorkerProfile, compile};
use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::reconciler::{Action, NoVerifier, ReconcileOutcome, TurnContext, reconcile};
use baton_core::state::{ExecutionState, RecordKind, Severity};
use baton_core::tokens::HeuristicEstimator;

use Expect::{Distinct, Keep, Merge, SeverityHeld, SeverityRaised};
use Kind::{Assumption, Completed, Decision, Failed, Issue};
use Severity::{Critical, High, Low, Medium};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Decision,
    Assumption,
    /// Both claimed on the same plan step.
    Completed,
    /// An issue first claimed at the first severity, then at the second.
    Issue(Severity, Severity),
    /// A failed attempt; the texts are its `what`, these are the two `why`s.
    Failed(&'static str, &'static str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// One record, reaffirmed by the second worker; no contradiction warning.
    Merge,
    /// Two records, and a warning naming the first one.
    Keep,
    /// Two records without a warning: completed work that differs in a number or a name
    /// is more work, not a contradiction.
    Distinct,
    /// One issue, its severity raised to the second claim's, with a warning.
    SeverityRaised,
    /// One issue, its severity kept (a claim never lowers it), with a warning.
    SeverityHeld,
}

struct Row {
    kind: Kind,
    first: &'static str,
    second: &'static str,
    expect: Expect,
}

const fn row(kind: Kind, first: &'static str, second: &'static str, expect: Expect) -> Row {
    Row {
        kind,
        first,
        second,
        expect,
    }
}

const CORPUS: &[Row] = &[
    // --- must merge: the same statement, reworded -------------------------------------
    row(
        Decision,
        "Use PostgreSQL 16 as the primary datastore",
        "use postgresql 16 as the primary datastore.",
        Merge,
    ),
    row(
        Decision,
        "Issue short-lived JWT access tokens (15 minutes) with rotating refresh tokens",
        "Access tokens are short-lived JWT tokens expiring after 15 minutes, and refresh tokens rotate",
        Merge,
    ),
    row(
        Decision,
        "Modelled task status as a PostgreSQL ENUM type",
        "Modelling task status as a native PostgreSQL enum type",
        Merge,
    ),
    row(
        Decision,
        "The admin API must never be exposed publicly",
        "Never expose the admin API publicly",
        Merge,
    ),
    row(
        Decision,
        "Set the retry limit to 5",
        "The retry limit is set to 5",
        Merge,
    ),
    row(
        Decision,
        "Cache project lists for 5 minutes",
        "Project lists are cached for 5 minutes",
        Merge,
    ),
    row(
        Decision,
        "Passwords are hashed with argon2id",
        "Hash passwords with argon2id",
        Merge,
    ),
    row(
        Decision,
        "Store sessions in Redis 7.2",
        "Sessions are stored in Redis 7.2",
        Merge,
    ),
    row(
        Decision,
        "Limit each API token to 100 requests per minute",
        "Each API token is limited to 100 requests per minute",
        Merge,
    ),
    row(
        Decision,
        "Return Retry-After headers on every 429 response",
        "Every 429 response returns a Retry-After header",
        Merge,
    ),
    row(
        Decision,
        "Map domain errors to HTTP status codes in one exception handler",
        "Domain errors are mapped to HTTP status codes in one exception handler",
        Merge,
    ),
    row(
        Decision,
        "Deploy without downtime using blue-green releases",
        "Deploy using blue-green releases without downtime",
        Merge,
    ),
    row(
        Decision,
        "Use Redis, not Memcached, for the session cache",
        "Use Redis for the session cache, not Memcached",
        Merge,
    ),
    row(
        Decision,
        "Reject uploads larger than 10 MB",
        "Uploads larger than 10 MB are rejected",
        Merge,
    ),
    row(
        Decision,
        "Disable caching for the admin API",
        "Caching is disabled for the admin API",
        Merge,
    ),
    row(
        Decision,
        "Migrate the users table in step T3",
        "Migrating the users table in step T3",
        Merge,
    ),
    row(
        Decision,
        "Decision D2 stands: tokens expire after 15 minutes",
        "D2 stands: tokens expire after 15 minutes",
        Merge,
    ),
    row(
        Decision,
        "Bump the public API version to v2",
        "Bump public API version to v2",
        Merge,
    ),
    row(
        Decision,
        "Retry failed webhooks 3 times with exponential backoff",
        "Retry failed webhooks three times, with exponential backoff",
        Merge,
    ),
    row(
        Assumption,
        "The service runs in a single region at first",
        "At first the service runs in a single region",
        Merge,
    ),
    row(
        Assumption,
        "Login endpoint is not rate limited",
        "The login endpoint is not rate-limited",
        Merge,
    ),
    row(
        Completed,
        "Wrote schema.sql with seven tables",
        "wrote schema.sql, with seven tables.",
        Merge,
    ),
    row(
        Completed,
        "Added the unit tests for parser.rs",
        "Added unit tests for parser.rs",
        Merge,
    ),
    row(
        Issue(High, High),
        "Refresh token rotation is not specified",
        "Refresh-token rotation is not specified",
        Merge,
    ),
    row(
        Failed(
            "SQLite does not support transactional DDL",
            "SQLite does not support transactional DDL.",
        ),
        "Run all migrations inside one transaction",
        "Running all migrations inside one transaction",
        Merge,
    ),
    row(
        Failed("every change then rippled into the callers", ""),
        "A first design where the cache shared state with its callers",
        "A first design where the cache shared state with its callers",
        Merge,
    ),
    row(
        Failed(
            "adding a status needs a migration that locks the tasks table; switched to a task_statuses lookup table",
            "each new status needs a table-locking migration",
        ),
        "Modelled task status as a PostgreSQL ENUM type",
        "Modelling task status as a native PostgreSQL ENUM type",
        Merge,
    ),
    // --- must not merge: polarity -----------------------------------------------------
    row(
        Decision,
        "Expose the admin API publicly",
        "Never expose the admin API publicly",
        Keep,
    ),
    row(
        Decision,
        "Never expose the admin API publicly",
        "Expose the admin API publicly",
        Keep,
    ),
    row(
        Decision,
        "Cache responses for anonymous users",
        "Do not cache responses for anonymous users",
        Keep,
    ),
    row(
        Decision,
        "Enable verbose request logging for the staging and production clusters",
        "Disable verbose request logging for the staging and production clusters",
        Keep,
    ),
    row(
        Decision,
        "Anonymous users can read public projects",
        "Anonymous users cannot read public projects",
        Keep,
    ),
    row(
        Decision,
        "Run the schema migration for the users table inside a single transaction",
        "Run the schema migration for the users table without a single transaction",
        Keep,
    ),
    row(
        Decision,
        "Use Redis, not Memcached, for the session cache",
        "Use Memcached, not Redis, for the session cache",
        Keep,
    ),
    row(
        Decision,
        "Don't retry POST requests on timeout",
        "Retry POST requests on timeout",
        Keep,
    ),
    row(
        Decision,
        "Always validate the webhook signature before parsing the request body",
        "Never validate the webhook signature before parsing the request body",
        Keep,
    ),
    row(
        Decision,
        "The response cache is enabled by default in the production deployment profile",
        "The response cache is disabled by default in the production deployment profile",
        Keep,
    ),
    row(
        Decision,
        "Include archived tasks in the full-text search results for project owners",
        "Exclude archived tasks from the full-text search results for project owners",
        Keep,
    ),
    row(
        Assumption,
        "Passwords are stored in plain text",
        "Passwords are never stored in plain text",
        Keep,
    ),
    row(
        Assumption,
        "Email addresses are unique per tenant",
        "Email addresses are not unique per tenant",
        Keep,
    ),
    row(
        Assumption,
        "Uploads are scanned for viruses before storage",
        "Uploads are not scanned for viruses before storage",
        Keep,
    ),
    row(
        Issue(Low, Critical),
        "Login endpoint is rate limited",
        "Login endpoint is not rate limited",
        Keep,
    ),
    row(
        Issue(Medium, Medium),
        "Block the deploy if the gate fails",
        "Do not block the deploy if the gate fails",
        Keep,
    ),
    row(
        Completed,
        "All integration tests pass on the main branch after the migration",
        "All integration tests fail on the main branch after the migration",
        Keep,
    ),
    // --- must not merge: numbers, single digits included --------------------------------
    row(
        Decision,
        "Set the retry limit to 3",
        "Set the retry limit to 5",
        Keep,
    ),
    row(Decision, "Cache for 5 minutes", "Cache for 9 minutes", Keep),
    row(
        Decision,
        "Limit each API token to 100 requests per minute",
        "Limit each API token to 1000 requests per minute",
        Keep,
    ),
    row(
        Decision,
        "Short-lived JWT access tokens expire after 15 minutes",
        "Short-lived JWT access tokens expire after 30 minutes",
        Keep,
    ),
    row(
        Decision,
        "Keep 7 days of audit logs",
        "Keep 30 days of audit logs",
        Keep,
    ),
    row(
        Decision,
        "Run the cleanup job every 2 hours",
        "Run the cleanup job every 12 hours",
        Keep,
    ),
    row(
        Decision,
        "Use PostgreSQL 15 as the primary datastore for projects, tasks and users",
        "Use PostgreSQL 16 as the primary datastore for projects, tasks and users",
        Keep,
    ),
    row(
        Decision,
        "Set the trace sampling rate to 0.5",
        "Set the trace sampling rate to 0.05",
        Keep,
    ),
    row(
        Decision,
        "Alert when the error rate exceeds 5%",
        "Alert when the error rate exceeds 50%",
        Keep,
    ),
    row(
        Issue(High, High),
        "Index 2 is missing",
        "Index 3 is missing",
        Keep,
    ),
    row(
        Issue(High, High),
        "Lane 1 of 2 timed out in round 2",
        "Lane 2 of 2 timed out in round 1",
        Keep,
    ),
    row(
        Completed,
        "Migrated 3 of the 7 tables to the new schema",
        "Migrated 5 of the 7 tables to the new schema",
        Distinct,
    ),
    row(
        Failed("the upload timed out", "the upload timed out"),
        "Retried the avatar upload 3 times",
        "Retried the avatar upload 5 times",
        Keep,
    ),
    // --- must not merge: units ----------------------------------------------------------
    row(
        Decision,
        "Cache the project list responses in Redis for 9 minutes per user",
        "Cache the project list responses in Redis for 9 seconds per user",
        Keep,
    ),
    row(
        Decision,
        "Reject avatar and attachment uploads larger than 10 MB at the API gateway",
        "Reject avatar and attachment uploads larger than 10 GB at the API gateway",
        Keep,
    ),
    // --- must not merge: identifiers, file names, versions ------------------------------
    row(
        Decision,
        "Decision D2 is superseded by the new token rotation policy",
        "Decision D3 is superseded by the new token rotation policy",
        Keep,
    ),
    row(
        Issue(High, High),
        "Step T3 is blocked on the missing staging database credentials",
        "Step T4 is blocked on the missing staging database credentials",
        Keep,
    ),
    row(
        Completed,
        "Add unit tests for parser.rs in the core crate",
        "Add unit tests for lexer.rs in the core crate",
        Distinct,
    ),
    row(
        Decision,
        "Pin serde to version 1.0.190 in the workspace Cargo.toml",
        "Pin serde to version 1.0.210 in the workspace Cargo.toml",
        Keep,
    ),
    row(
        Decision,
        "Upgrade the public REST API to v2 before the launch",
        "Upgrade the public REST API to v3 before the launch",
        Keep,
    ),
    row(
        Issue(Medium, Medium),
        "Fix the failing test in src/auth/login.rs",
        "Fix the failing test in src/auth/logout.rs",
        Keep,
    ),
    row(
        Assumption,
        "Issue I4 blocks the release of the billing service this week",
        "Issue I5 blocks the release of the billing service this week",
        Keep,
    ),
    row(
        Decision,
        "Serve the API on port 8080 behind the nginx reverse proxy",
        "Serve the API on port 8443 behind the nginx reverse proxy",
        Keep,
    ),
    row(
        Decision,
        "Set MAX_POOL_SIZE to the number of CPU cores",
        "Set MIN_POOL_SIZE to the number of CPU cores",
        Keep,
    ),
    row(
        Decision,
        "Revert commit 3f2a9c1 on the main branch before the Friday deploy",
        "Revert commit 7b1e0d4 on the main branch before the Friday deploy",
        Keep,
    ),
    // --- failed attempts restated with a contradicting reason ---------------------------
    row(
        Failed(
            "SQLite does not support transactional DDL",
            "SQLite supports transactional DDL but the lock timed out",
        ),
        "Run all migrations inside one transaction",
        "Run all migrations inside one transaction",
        Keep,
    ),
    row(
        Failed(
            "the migration lock timed out after 30 seconds",
            "the migration lock timed out after 60 seconds",
        ),
        "Run all migrations inside one transaction",
        "Run all migrations inside one transaction",
        Keep,
    ),
    // --- severity: a restated issue never silently changes its severity ---------------
    row(
        Issue(Low, Critical),
        "Login endpoint is not rate limited",
        "Login endpoint is not rate limited",
        SeverityRaised,
    ),
    row(
        Issue(Medium, High),
        "Refresh token rotation is not specified",
        "Refresh-token rotation is not specified",
        SeverityRaised,
    ),
    row(
        Issue(Critical, Low),
        "Login endpoint is not rate limited",
        "The login endpoint is not rate-limited",
        SeverityHeld,
    ),
];

fn worker(id: &str) -> WorkerProfile {
    WorkerProfile {
        id: WorkerId::new(id),
        model: format!("mock/{id}"),
        family: "mock".into(),
        role: None,
    }
}

fn step(id: &str) -> Assignment {
    Assignment {
        kind: AssignmentKind::Step,
        step_id: Some(id.into()),
        task: "do the step".into(),
    }
}

/// The claims of one turn that states `text` as a record of `kind`.
fn claims(kind: Kind, text: &str, second: bool) -> (WorkerResult, HandoffReport) {
    let mut result = WorkerResult {
        summary: "worked".into(),
        completed: vec!["did the step".into()],
        last_action: "worked".into(),
        ..WorkerResult::default()
    };
    match kind {
        Decision => result.decisions.push(DecisionClaim {
            text: text.into(),
            reason: Some("the brief says so".into()),
        }),
        Assumption => result.assumptions.push(text.into()),
        Completed => result.completed = vec![text.into()],
        Issue(first, then) => result.issues.push(IssueClaim {
            title: text.into(),
            severity: if second { then } else { first },
            detail: None,
            gate: None,
        }),
        Failed(first, then) => result.failed_attempts.push(FailedAttemptClaim {
            what: text.into(),
            why: if second { then } else { first }.into(),
        }),
    }
    let report = HandoffReport {
        notes: "see the record".into(),
        last_action: "worked".into(),
        next_action: "continue".into(),
        ..HandoffReport::default()
    };
    (result, report)
}

fn turn(
    s: &mut ExecutionState,
    who: &str,
    n: u32,
    r: &(WorkerResult, HandoffReport),
) -> ReconcileOutcome {
    let w = worker(who);
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn: n,
        at: Timestamp(1_000 + i64::from(n)),
        assignment: &a,
        seen: Default::default(),
    };
    reconcile(s, &ctx, &r.0, &r.1, Vec::new(), &NoVerifier)
}

fn record_kind(kind: Kind) -> RecordKind {
    match kind {
        Decision => RecordKind::Decision,
        Assumption => RecordKind::Assumption,
        Completed => RecordKind::Completed,
        Issue(..) => RecordKind::Issue,
        Failed(..) => RecordKind::FailedAttempt,
    }
}

/// Ids of the records of `kind`, in order.
fn ids(s: &ExecutionState, kind: Kind) -> Vec<String> {
    match kind {
        Decision => s.decisions.iter().map(|d| d.id.clone()).collect(),
        Assumption => s.assumptions.iter().map(|d| d.id.clone()).collect(),
        Completed => s.completed.iter().map(|d| d.id.clone()).collect(),
        Issue(..) => s.issues.iter().map(|d| d.id.clone()).collect(),
        Failed(..) => s.failed_attempts.iter().map(|d| d.id.clone()).collect(),
    }
}

/// What went wrong with `row`, or `None` when the record looks as expected.
fn check(row: &Row) -> Option<String> {
    let mut s = ExecutionState::new(RunId("r".into()), "Build an API", &["one".into()]);
    turn(&mut s, "w1", 0, &claims(row.kind, row.first, false));
    let before = ids(&s, row.kind);
    if before.len() != 1 {
        return Some(format!("the first statement made {} records", before.len()));
    }
    let first_id = &before[0];
    let out = turn(&mut s, "w2", 1, &claims(row.kind, row.second, true));
    let after = ids(&s, row.kind);
    let reaffirmed = out
        .accepted
        .iter()
        .any(|a| a.kind == record_kind(row.kind) && a.action == Action::Reaffirmed);
    let contradiction = format!("possible contradiction of {first_id}");
    let warned = out.warnings.iter().any(|w| w.contains(&contradiction));
    let severity_warned = out
        .warnings
        .iter()
        .any(|w| w.contains(first_id.as_str()) && w.contains("severity"));
    let problem = match row.expect {
        Merge if after.len() != 1 => Some(format!("not merged: {after:?}")),
        Merge if !reaffirmed => Some("merged without a recorded reaffirmation".into()),
        Merge if warned => Some("merged but warned of a contradiction".into()),
        Keep | Distinct if after.len() != 2 => Some(format!("merged into {first_id}")),
        Distinct if warned => Some(format!(
            "more work warned as a contradiction: {:?}",
            out.warnings
        )),
        Keep if !warned => Some(format!(
            "kept apart but no \"{contradiction}\" warning: {:?}",
            out.warnings
        )),
        SeverityRaised | SeverityHeld if after.len() != 1 => Some(format!("not merged: {after:?}")),
        SeverityRaised | SeverityHeld if !severity_warned => {
            Some(format!("severity changed silently: {:?}", out.warnings))
        }
        _ => None,
    };
    if problem.is_some() {
        return problem;
    }
    if let Issue(first, then) = row.kind
        && matches!(row.expect, Merge | SeverityRaised | SeverityHeld)
    {
        let want = first.max(then);
        let got = s.issues[0].severity;
        if got != want {
            return Some(format!(
                "severity is {got:?}, the stricter claim was {want:?}"
            ));
        }
    }
    None
}

#[test]
fn restatement_corpus_merges_only_what_says_the_same_thing() {
    assert!(CORPUS.len() >= 50, "{} pairs", CORPUS.len());
    let keep = (CORPUS.iter())
        .filter(|r| matches!(r.expect, Keep | Distinct))
        .count();
    assert!(keep >= 25 && CORPUS.len() - keep >= 20);
    let failures: Vec<String> = CORPUS
        .iter()
        .filter_map(|row| {
            check(row).map(|p| {
                format!(
                    "{:?} {:?}: \"{}\" then \"{}\": {p}",
                    row.expect, row.kind, row.first, row.second
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} pairs wrong:\n{}",
        failures.len(),
        CORPUS.len(),
        failures.join("\n")
    );
}

#[test]
fn a_possible_contradiction_reaches_the_next_briefing() {
    let mut s = ExecutionState::new(RunId("r".into()), "Build an API", &["one".into()]);
    let first = claims(Decision, "Set the retry limit to 3", false);
    turn(&mut s, "w1", 0, &first);
    let second = claims(Decision, "Set the retry limit to 5", true);
    let out = turn(&mut s, "w2", 1, &second);
    assert_eq!(s.decisions.len(), 2, "both decisions kept");
    let warning = out
        .warnings
        .iter()
        .find(|w| w.contains("possible contradiction of D1"))
        .expect("the turn warns");
    assert!(warning.contains("D2") && warning.contains("Set the retry limit to 3"));

    let p = compile(&s, &step("T1"), &worker("w3"), 2_000, &HeuristicEstimator);
    assert!(
        p.text.contains("possible contradiction of D1"),
        "the next worker is told:\n{}",
        p.text
    );
}

/// Regression (issue 9, item 2): completed-work claims were dropped when they resembled
/// any earlier item, whatever the step; 100 completion claims left 10 records, with no
/// warning. Over 100 turns on 10 steps, every distinct piece of work is kept, the same
/// words on another step are another piece of work, and a claim that is not a new record
/// is a recorded reaffirmation.
#[test]
fn a_long_run_keeps_every_distinct_completion_and_drops_none_silently() {
    let steps: Vec<String> = (1..=10).map(|n| format!("Build part {n}")).collect();
    let mut s = ExecutionState::new(RunId("r".into()), "Build it", &steps);
    let mut distinct = std::collections::BTreeSet::new();
    for t in 0..100u32 {
        let step_id = format!("T{}", t / 10 + 1);
        let claims = vec![
            // The same words on every step: one piece of work per step.
            "Wrote the handler and its unit tests".to_string(),
            // Differs only in a (single-digit) number: one piece of work per turn.
            format!("Migrated batch {} of the step's records", t % 10),
        ];
        for c in &claims {
            distinct.insert((step_id.clone(), c.clone()));
        }
        let result = WorkerResult {
            summary: "worked".into(),
            completed: claims.clone(),
            last_action: "worked".into(),
            ..WorkerResult::default()
        };
        let report = HandoffReport {
            notes: "see the record".into(),
            last_action: "worked".into(),
            next_action: "continue".into(),
            ..HandoffReport::default()
        };
        let w = worker(&format!("w{}", t % 3));
        let a = step(&step_id);
        let ctx = TurnContext {
            worker: &w,
            turn: t,
            at: Timestamp(1_000 + i64::from(t)),
            assignment: &a,
            seen: Default::default(),
        };
        let out = reconcile(&mut s, &ctx, &result, &report, Vec::new(), &NoVerifier);
        let accounted = out
            .accepted
            .iter()
            .filter(|a| {
                a.kind == RecordKind::Completed
                    && matches!(a.action, Action::Created | Action::Reaffirmed)
            })
            .count();
        assert_eq!(
            accounted,
            claims.len(),
            "turn {t}: every completion claim is a record or a reaffirmation: {:?} {:?}",
            out.accepted,
            out.warnings
        );
        assert!(
            !out.warnings.iter().any(|w| w.contains("contradiction")),
            "more work is not a contradiction: {:?}",
            out.warnings
        );
    }
    let kept: std::collections::BTreeSet<(String, String)> = s
        .completed
        .iter()
        .map(|c| (c.step.clone().unwrap_or_default(), c.text.clone()))
        .collect();
    assert_eq!(
        s.completed.len(),
        distinct.len(),
        "one record per distinct completion"
    );
    assert_eq!(kept, distinct);
}
