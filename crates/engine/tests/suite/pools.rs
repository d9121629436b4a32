//! Pools in runs: every call a run makes counts against its worker's pool, and a
//! provider's word that the quota is spent marks the pool exhausted until its reset.

use baton_core::ids::Timestamp;
use baton_core::router::PoolId;
use baton_engine::config::Price;

use super::providers::{
    anthropic_worker, chat, one_worker_spec, openai_worker, run_blocked, run_in,
};
use super::server::{TestServer, json as reply};
use super::*;

/// The whole of time: every call counts.
fn ever(store: &Arc<dyn Store>, pool: &str) -> baton_core::router::PoolUsage {
    store
        .pool_usage(&PoolId::new(pool), Timestamp(i64::MIN), Timestamp(i64::MAX))
        .unwrap()
}

/// Every call counts the tokens its provider reported, and their cost, against the
/// pool its worker is in, and nothing against another pool.
#[test]
fn every_call_of_a_run_counts_against_its_workers_pool() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        chat(&ok_result("migrated"), "stop", 100, 10),
        chat(&ok_result("billed"), "stop", 200, 20),
        chat(&ok_result("tested"), "stop", 300, 30),
    ]);
    let workers = [("w1", "a"), ("w2", "b")].map(|(id, pool)| {
        let mut w = openai_worker(id, &server, 0);
        w.pool = Some(PoolId::new(pool));
        w.price = Some(Price {
            input: 1.0,
            output: 2.0,
            cached: None,
        });
        w
    });
    let spec = spec(
        &[
            "Migrate the billing module",
            "Bill the customers",
            "Test it",
        ],
        Roster {
            workers: workers.to_vec(),
        },
    );
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let workers: Vec<String> = store
        .turns(&id)
        .unwrap()
        .iter()
        .map(|t| t.worker.to_string())
        .collect();
    assert_eq!(workers, ["w1", "w2", "w1"]);
    let a = ever(&store, "a");
    assert_eq!((a.tokens, a.requests), (110 + 330, 2));
    assert!((a.usd - (120.0 + 360.0) / 1e6).abs() < 1e-12, "{}", a.usd);
    let b = ever(&store, "b");
    assert_eq!((b.tokens, b.requests), (220, 1));
    assert_eq!(
        ever(&store, "c"),
        baton_core::router::PoolUsage::none(PoolId::new("c"))
    );
}

/// Anthropic's spend limit names its reset: the worker's pool is exhausted until then.
#[test]
fn a_spent_quota_marks_the_workers_pool_exhausted_until_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![reply(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2050-01-01 at 00:00 UTC."}}"#,
    )]);
    let mut worker = anthropic_worker("w1", &server);
    worker.pool = Some(PoolId::new("claude"));
    let (store, _, _) = run_blocked(dir.path(), &one_worker_spec(worker));
    let until = ever(&store, "claude")
        .exhausted_until
        .expect("the pool is marked exhausted")
        .0;
    let expected_ms: i64 = 2_524_608_000_000;
    assert!(
        (until - expected_ms).abs() < 5_000,
        "{until} vs {expected_ms}"
    );
    assert_eq!(ever(&store, "claude").requests, 1);
}
