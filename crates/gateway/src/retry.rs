//! Retry as a value: which failures to retry, how long to wait, and one loop that
//! applies it around any gateway. Providers never loop themselves; they classify the
//! failure and put the server's requested delay on the error.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{Error, ErrorClass, Gateway, ModelRequest, ModelResponse, Result, Usage};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so at most `max_retries + 1` calls).
    pub max_retries: u32,
    /// The first backoff delay; doubled on every further retry.
    pub base: Duration,
    /// The longest backoff of our own.
    pub cap: Duration,
    /// The longest wait a provider may ask for. Its delay is honoured exactly up to
    /// this; a provider that asks for longer is not retried, and the error (with its
    /// `retry_after`) goes back to the caller, which fails the turn.
    pub max_wait: Duration,
    /// The fraction of a backoff delay that is randomised, in `0.0..=1.0`: a delay `d`
    /// becomes uniform in `[d * (1 - jitter), d]`, so workers that failed together do
    /// not retry together. Provider-given delays are never jittered.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::new(3)
    }
}

impl RetryPolicy {
    pub fn new(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(60),
            max_wait: Duration::from_secs(600),
            jitter: 0.5,
        }
    }

    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy::new(0)
    }

    /// How long to wait before retry number `attempt` (1-based) after `error`, or
    /// `None` when the error must not be retried or the retries are spent. The
    /// provider's own delay wins over backoff on every retry, not just the first.
    pub fn delay(&self, attempt: u32, error: &Error) -> Option<Duration> {
        self.delay_with(attempt, error, random_unit(attempt))
    }

    /// The provider's delay when it is longer than this policy waits: baton declines
    /// to wait it out (the error goes back to the caller, which must say so).
    pub fn declined_wait(&self, error: &Error) -> Option<Duration> {
        error.retry_after().filter(|asked| *asked > self.max_wait)
    }

    /// [`delay`](Self::delay) with the jitter's random draw given (`unit` in `0..1`).
    pub fn delay_with(&self, attempt: u32, error: &Error, unit: f64) -> Option<Duration> {
        if attempt == 0 || attempt > self.max_retries || !error.is_retryable() {
            return None;
        }
        if let Some(asked) = error.retry_after() {
            return (asked <= self.max_wait).then_some(asked);
        }
        let exp = self
            .base
            .saturating_mul(1u32 << (attempt - 1).min(20))
            .min(self.cap);
        let jitter = self.jitter.clamp(0.0, 1.0) * unit.clamp(0.0, 1.0);
        Some(exp.mul_f64(1.0 - jitter))
    }
}

/// One call made by [`complete_with_retry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// The failure's [`Error::class`], or `None` for the call that succeeded.
    pub error_class: Option<ErrorClass>,
    /// The delay the provider asked for, if any.
    pub retry_after: Option<Duration>,
    /// How long we waited before the next attempt; `None` when there was none.
    pub delay: Option<Duration>,
    /// Wall time of the call itself.
    pub elapsed: Duration,
    /// What the provider reported using for this attempt, rejected replies included
    /// (they are billed); zero when it reported nothing.
    pub usage: Usage,
    /// Whether the request may have reached the provider ([`Error::was_sent`]): a
    /// connection refused is an attempt nobody received or billed.
    pub sent: bool,
}

/// Calls `gateway` until it succeeds, fails with something not worth retrying, or the
/// policy's retries are spent. Waits through `sleep` (pass `std::thread::sleep`, or a
/// recorder in tests). Returns the last result and every attempt made.
pub fn complete_with_retry(
    gateway: &dyn Gateway,
    request: &ModelRequest<'_>,
    policy: &RetryPolicy,
    sleep: &mut dyn FnMut(Duration),
) -> (Result<ModelResponse>, Vec<Attempt>) {
    let mut attempts = Vec::new();
    let mut number = 1u32;
    loop {
        // Only before a retry: a call asked for before the interrupt is made (its turn
        // may have a billed answer already); no further attempt is.
        if number > 1 && request.cancel.is_some_and(crate::Cancel::is_cancelled) {
            return (Err(Error::Cancelled), attempts);
        }
        let started = Instant::now();
        let result = gateway.complete(request);
        let elapsed = started.elapsed();
        match result {
            Ok(response) => {
                attempts.push(Attempt {
                    number,
                    error_class: None,
                    retry_after: None,
                    delay: None,
                    elapsed,
                    usage: response.usage,
                    sent: true,
                });
                return (Ok(response), attempts);
            }
            Err(error) => {
                let delay = policy.delay(number, &error);
                attempts.push(Attempt {
                    number,
                    error_class: Some(error.class()),
                    retry_after: error.retry_after(),
                    delay,
                    elapsed,
                    usage: error.usage().unwrap_or_default(),
                    sent: error.was_sent(),
                });
                match delay {
                    Some(d) => sleep(d),
                    None => return (Err(error), attempts),
                }
            }
        }
        number += 1;
    }
}

/// A draw in `0..1` for jitter. Jitter only has to decorrelate workers, not resist an
/// adversary, so the clock's nanoseconds mixed with the attempt number (splitmix64)
/// are enough and spare the crate a random-number dependency.
fn random_unit(attempt: u32) -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut z = (u64::from(nanos) << 32 | u64::from(attempt)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_limited(secs: u64) -> Error {
        Error::RateLimited {
            retry_after: Some(Duration::from_secs(secs)),
            message: String::new(),
        }
    }

    #[test]
    fn honours_the_provider_delay_on_every_retry() {
        let p = RetryPolicy::new(3);
        for attempt in 1..=3 {
            assert_eq!(
                p.delay(attempt, &rate_limited(7)),
                Some(Duration::from_secs(7))
            );
        }
        assert_eq!(p.delay(4, &rate_limited(7)), None);
        let overloaded = Error::Overloaded {
            message: "busy".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(p.delay(2, &overloaded), Some(Duration::from_secs(2)));
        // "Try again in 1m30s" is honoured, beyond the backoff cap.
        assert_eq!(p.delay(1, &rate_limited(90)), Some(Duration::from_secs(90)));
        // Longer than `max_wait`: hand it back to the caller instead of sleeping, which
        // must say it declined to wait.
        assert_eq!(p.delay(1, &rate_limited(3600)), None);
        assert_eq!(
            p.declined_wait(&rate_limited(3600)),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(p.declined_wait(&rate_limited(600)), None);
    }

    #[test]
    fn backs_off_exponentially_with_jitter_and_a_cap() {
        let p = RetryPolicy {
            max_retries: 10,
            base: Duration::from_millis(250),
            cap: Duration::from_secs(2),
            max_wait: Duration::from_secs(600),
            jitter: 0.5,
        };
        let server = Error::Server {
            message: "boom".into(),
        };
        assert_eq!(
            p.delay_with(1, &server, 0.0),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            p.delay_with(2, &server, 0.0),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            p.delay_with(3, &server, 1.0),
            Some(Duration::from_millis(500))
        );
        assert_eq!(p.delay_with(9, &server, 0.0), Some(Duration::from_secs(2)));
        for attempt in 1..=10 {
            let d = p.delay(attempt, &server).unwrap();
            assert!(d <= Duration::from_secs(2), "{d:?}");
        }
    }

    #[test]
    fn never_retries_what_cannot_succeed() {
        let p = RetryPolicy::new(5);
        let never = [
            Error::Auth {
                message: "bad key".into(),
            },
            Error::ContextTooLong {
                message: String::new(),
            },
            Error::BadRequest {
                message: String::new(),
            },
            Error::UnknownModel {
                model: "x".into(),
                message: String::new(),
            },
            Error::Truncated {
                message: String::new(),
                usage: crate::Usage::default(),
                partial: String::new(),
            },
            Error::QuotaExhausted {
                message: String::new(),
                resets_after: Some(Duration::from_secs(60)),
            },
            Error::Config("x".into()),
        ];
        for e in never {
            assert_eq!(p.delay(1, &e), None, "{e}");
        }
        assert_eq!(p.delay(1, &Error::Timeout(Duration::from_secs(1))), None);
        let always = [
            Error::Unreachable {
                detail: "reset".into(),
                sent: true,
            },
            Error::Unparseable {
                detail: "cut".into(),
            },
        ];
        for e in always {
            assert!(p.delay(1, &e).is_some(), "{e}");
        }
    }
}
