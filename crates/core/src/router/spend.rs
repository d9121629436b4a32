//! What one model call spent against its worker's pool: the numbers the store sums into
//! a pool's usage in a window, and the exhaustion mark a spent quota leaves.

use serde::{Deserialize, Serialize};

use crate::error_class::ErrorClass;
use crate::ids::Timestamp;
use crate::turn::CallRecord;

/// One call's spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSpend {
    /// Input plus output tokens as the provider reported them. A call whose provider
    /// reported nothing (a failed call, an agent CLI) spends no tokens here: headroom
    /// is computed from what providers said, never from baton's own estimate.
    pub tokens: u64,
    /// Millionths of a US dollar, from the reported tokens and the worker's prices.
    pub cost_micro_usd: u64,
    /// Requests that reached the provider: one per attempt, less the attempts that
    /// never left baton (no connection, a configuration refused before sending) and
    /// those cut short by a cancel (stopped while sending, or during a wait before
    /// it: baton cannot tell that the provider got them, and counts only what it knows
    /// was delivered).
    pub requests: u64,
    /// The provider answered that the quota is spent.
    pub exhausted: bool,
    /// The reset it named, when it named one. An exhausted call without one holds
    /// its pool until the pool's window ends.
    pub exhausted_until: Option<Timestamp>,
}

impl CallSpend {
    pub fn of(call: &CallRecord) -> CallSpend {
        let tokens = call
            .usage
            .map_or(0, |u| u.input_tokens.saturating_add(u.output_tokens));
        let reached = |class: Option<&ErrorClass>| {
            !matches!(
                class,
                Some(ErrorClass::Unreachable | ErrorClass::Config | ErrorClass::Cancelled)
            )
        };
        let requests = if call.attempts.is_empty() {
            u64::from(reached(call.error_class.as_ref()))
        } else {
            call.attempts
                .iter()
                .filter(|a| reached(a.error.as_ref()))
                .count() as u64
        };
        let exhausted = call.error_class == Some(ErrorClass::QuotaExhausted);
        CallSpend {
            tokens,
            cost_micro_usd: call.cost_micro_usd.unwrap_or(0),
            requests,
            exhausted,
            exhausted_until: call.quota_reset_at.filter(|_| exhausted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkerId;
    use crate::turn::{AttemptRecord, CallKind, ReportedUsage};

    fn call() -> CallRecord {
        CallRecord {
            call: CallKind::Combined,
            worker: WorkerId::new("w"),
            model: "m".into(),
            messages: 2,
            request_hash: String::new(),
            sent_hash: None,
            tokens_sent: 900,
            tokens_received: 100,
            output: None,
            error: None,
            error_class: None,
            error_message: None,
            partial_output: None,
            started_at: Timestamp(5),
            duration_ms: 1,
            usage: None,
            cost_micro_usd: None,
            attempts: Vec::new(),
            retry_after_ms: None,
            quota_reset_at: None,
        }
    }

    #[test]
    fn reported_usage_counts_and_baton_estimates_do_not() {
        let unreported = CallSpend::of(&call());
        assert_eq!((unreported.tokens, unreported.requests), (0, 1));
        let reported = CallSpend::of(&CallRecord {
            usage: Some(ReportedUsage {
                input_tokens: 700,
                output_tokens: 80,
                cached_tokens: 500,
            }),
            cost_micro_usd: Some(1_234),
            ..call()
        });
        assert_eq!(
            (reported.tokens, reported.cost_micro_usd, reported.exhausted),
            (780, 1_234, false)
        );
    }

    #[test]
    fn every_attempt_that_reached_the_provider_is_a_request() {
        let attempt = |error| AttemptRecord {
            error,
            retry_after_ms: None,
            waited_ms: None,
        };
        let retried = CallSpend::of(&CallRecord {
            attempts: vec![
                attempt(Some(ErrorClass::RateLimited)),
                attempt(Some(ErrorClass::Unreachable)),
                attempt(Some(ErrorClass::ServerError)),
                attempt(None),
            ],
            ..call()
        });
        assert_eq!(retried.requests, 3);
        let never_sent = CallSpend::of(&CallRecord {
            error_class: Some(ErrorClass::Unreachable),
            ..call()
        });
        assert_eq!(never_sent.requests, 0);
        let stopped = CallSpend::of(&CallRecord {
            attempts: vec![
                attempt(Some(ErrorClass::RateLimited)),
                attempt(Some(ErrorClass::Cancelled)),
            ],
            error_class: Some(ErrorClass::Cancelled),
            ..call()
        });
        assert_eq!(stopped.requests, 1);
    }

    #[test]
    fn a_spent_quota_marks_exhaustion_with_the_reset_it_named() {
        let named = CallSpend::of(&CallRecord {
            error_class: Some(ErrorClass::QuotaExhausted),
            quota_reset_at: Some(Timestamp(99)),
            ..call()
        });
        assert!(named.exhausted);
        assert_eq!(named.exhausted_until, Some(Timestamp(99)));
        let unnamed = CallSpend::of(&CallRecord {
            error_class: Some(ErrorClass::QuotaExhausted),
            ..call()
        });
        assert!(unnamed.exhausted && unnamed.exhausted_until.is_none());
        // A reset on any other failure is no exhaustion mark.
        let other = CallSpend::of(&CallRecord {
            error_class: Some(ErrorClass::RateLimited),
            quota_reset_at: Some(Timestamp(99)),
            ..call()
        });
        assert!(!other.exhausted && other.exhausted_until.is_none());
    }
}
