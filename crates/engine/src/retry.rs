//! Retry as a value: which errors to retry, and how long to wait.

use std::time::Duration;

use baton_gateway::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl RetryPolicy {
    pub fn new(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            base: Duration::from_millis(250),
            cap: Duration::from_secs(30),
        }
    }

    /// How long to wait before retry number `attempt` (1-based) after `error`, or
    /// `None` when the error must not be retried or the retries are spent. The
    /// provider's own delay wins over backoff.
    pub fn delay(&self, attempt: u32, error: &Error) -> Option<Duration> {
        if attempt > self.max_retries || !error.is_retryable() {
            return None;
        }
        if let Error::RateLimited {
            retry_after: Some(d),
        } = error
        {
            return Some((*d).min(self.cap));
        }
        let exp = self.base.saturating_mul(1u32 << (attempt - 1).min(16));
        Some(exp.min(self.cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_the_provider_delay_and_never_retries_what_cannot_succeed() {
        let p = RetryPolicy::new(2);
        let rl = Error::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(p.delay(1, &rl), Some(Duration::from_secs(3)));
        assert_eq!(p.delay(2, &rl), Some(Duration::from_secs(3)));
        assert_eq!(p.delay(3, &rl), None);
        let server = Error::Server {
            message: "boom".into(),
        };
        assert_eq!(p.delay(1, &server), Some(Duration::from_millis(250)));
        assert_eq!(p.delay(2, &server), Some(Duration::from_millis(500)));
        assert_eq!(
            p.delay(
                1,
                &Error::Auth {
                    message: "bad key".into()
                }
            ),
            None
        );
        assert_eq!(
            p.delay(
                1,
                &Error::ContextTooLong {
                    message: String::new()
                }
            ),
            None
        );
    }
}
