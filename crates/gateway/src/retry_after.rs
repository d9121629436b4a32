//! How long the provider asked us to wait. Every provider says it differently, so one
//! function reads them all and is tested on each form:
//!
//! - `retry-after-ms: 1500` (OpenAI, Azure)
//! - `Retry-After: 8` (seconds) or `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`
//! - Gemini's `RetryInfo` detail in the error body: `"retryDelay": "8s"` / `"8.4s"`
//! - a phrase in the error message: "try again in 8.4s", "Please try again in 1m30s",
//!   "retry after 20 seconds", "Please retry in 8.403s"
//! - OpenAI's `x-ratelimit-reset-requests` / `x-ratelimit-reset-tokens` ("1s", "6m0s",
//!   "20ms") and Anthropic's `anthropic-ratelimit-*-reset` (an RFC 3339 instant); when
//!   a matching `*-remaining-*` header says which limit is spent, that one's reset wins.
//!
//! The explicit forms come first: a reset header says when a bucket refills, which is
//! only an upper bound on when a retry may succeed.

use std::time::{Duration, SystemTime};

/// The delay a failed response asks for, from its headers (names in any case) and body.
/// `now` anchors absolute times (HTTP dates, RFC 3339 instants); one already past gives
/// a zero delay.
pub fn retry_delay<N: AsRef<str>, V: AsRef<str>>(
    headers: &[(N, V)],
    body: &str,
    now: SystemTime,
) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref().trim())
    };
    // A number too large for any clock (`Retry-After: 99999999999999999999`) is read
    // as the longest delay we represent: far beyond any retry policy's `max_wait`, so
    // the caller declines to wait instead of panicking on `Duration` overflow.
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms >= 0.0
    {
        return Some(bounded_seconds(ms / 1000.0));
    }
    if let Some(v) = header("retry-after") {
        if let Ok(secs) = v.parse::<f64>()
            && secs >= 0.0
        {
            return Some(bounded_seconds(secs));
        }
        if let Some(at) = parse_http_date(v) {
            return Some(until(at, now));
        }
    }
    if let Some(d) = body_delay(body) {
        return Some(d);
    }
    reset_headers(headers, now)
}

/// OpenAI and Anthropic reset headers: the spent limit's reset if the remaining
/// headers say which one is spent, otherwise the latest reset (a safe upper bound).
fn reset_headers<N: AsRef<str>, V: AsRef<str>>(
    headers: &[(N, V)],
    now: SystemTime,
) -> Option<Duration> {
    let mut spent: Option<Duration> = None;
    let mut any: Option<Duration> = None;
    for (name, value) in headers {
        let name = name.as_ref().to_ascii_lowercase();
        let value = value.as_ref().trim();
        let (delay, remaining_name) = if let Some(kind) = name.strip_prefix("x-ratelimit-reset-") {
            (
                parse_go_duration(value),
                format!("x-ratelimit-remaining-{kind}"),
            )
        } else if let Some(kind) = name
            .strip_prefix("anthropic-ratelimit-")
            .and_then(|rest| rest.strip_suffix("-reset"))
        {
            (
                parse_rfc3339(value).map(|at| until(at, now)),
                format!("anthropic-ratelimit-{kind}-remaining"),
            )
        } else {
            continue;
        };
        let Some(delay) = delay else { continue };
        any = any.max(Some(delay));
        let is_spent = headers.iter().any(|(n, v)| {
            n.as_ref().eq_ignore_ascii_case(&remaining_name) && v.as_ref().trim() == "0"
        });
        if is_spent {
            spent = spent.max(Some(delay));
        }
    }
    spent.or(any)
}

/// When a spent quota comes back, as the provider's message words it: Anthropic's
/// spend limit says "You will regain access on 2026-04-01 at 00:00 UTC." `None` when
/// the message names no reset (or names one no calendar holds).
pub fn quota_reset(message: &str, now: SystemTime) -> Option<Duration> {
    const LEAD: &str = "regain access on ";
    let lower = message.to_ascii_lowercase();
    let start = lower.find(LEAD)? + LEAD.len();
    // "2026-04-01 at 00:00 UTC"
    let rest = message.get(start..)?;
    let mut words = rest.split_whitespace();
    let date = words.next()?;
    let (at, time, zone) = (words.next()?, words.next()?, words.next()?);
    let zone = zone.trim_end_matches(['.', ',', ';']);
    if !at.eq_ignore_ascii_case("at") || !zone.eq_ignore_ascii_case("utc") {
        return None;
    }
    let time = time.trim_end_matches(['.', ',', ';']);
    let seconds = if time.matches(':').count() == 1 {
        ":00"
    } else {
        ""
    };
    parse_rfc3339(&format!("{date}T{time}{seconds}Z")).map(|reset| until(reset, now))
}

fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now)
        .unwrap_or(Duration::ZERO)
        .min(bounded_seconds(MAX_SECONDS))
}

/// Gemini's `RetryInfo` detail, then a "try again in …" phrase anywhere in the body.
fn body_delay(body: &str) -> Option<Duration> {
    if body.contains("retryDelay")
        && let Ok(json) = serde_json::from_str::<serde_json::Value>(body)
        && let Some(details) = json.pointer("/error/details").and_then(|d| d.as_array())
    {
        for detail in details {
            let is_retry_info = detail
                .get("@type")
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.ends_with("RetryInfo"));
            if is_retry_info
                && let Some(d) = detail
                    .get("retryDelay")
                    .and_then(|d| d.as_str())
                    .and_then(parse_go_duration)
            {
                return Some(d);
            }
        }
    }
    phrase_delay(body)
}

/// "try again in 8.4s", "Please try again in 1m30s", "retry after 20 seconds",
/// "retry in 8.403s" — case-insensitive, first match wins.
fn phrase_delay(text: &str) -> Option<Duration> {
    const LEADS: [&str; 4] = [
        "try again in ",
        "retry after ",
        "retry in ",
        "try again after ",
    ];
    let lower = text.to_ascii_lowercase();
    for lead in LEADS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(lead) {
            let start = from + i + lead.len();
            if let Some(d) = parse_spoken_duration(&lower[start..]) {
                return Some(d);
            }
            from = start;
        }
    }
    None
}

/// "8.4s", "1m30s", "20ms" (Go's duration format, as OpenAI and Gemini use), or
/// "20 seconds", "1 minute", "500 milliseconds", at the start of `text`.
fn parse_spoken_duration(text: &str) -> Option<Duration> {
    let token: String = text
        .chars()
        // Not ASCII only: Go writes microseconds as "µs".
        .take_while(|c| c.is_alphanumeric() || *c == '.')
        .collect();
    let token = token.trim_end_matches('.');
    // A number and the unit spelled out after it: read together, or the unit is lost.
    if token.parse::<f64>().is_ok() {
        let unit: String = text[token.len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect();
        if !unit.is_empty()
            && let Some(d) = parse_go_duration(&format!("{token} {unit}"))
        {
            return Some(d);
        }
    }
    parse_go_duration(token)
}

/// A duration as providers write one, read by jiff's friendly format: Go's ("6m0s",
/// "1.5s", "20ms", "1h2m", `us`/`µs`, `ns`) and spelled-out units ("20 seconds",
/// "2 mins"). Units run from the largest down, a fraction only on the last, as Go
/// prints them. A bare number is seconds. A count past `u64` is no duration.
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    static PARSER: jiff::fmt::friendly::SpanParser = jiff::fmt::friendly::SpanParser::new();
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return seconds(secs);
    }
    PARSER.parse_unsigned_duration(text).ok().map(bounded)
}

/// A parsed number of seconds: negative or NaN is no delay at all; a huge one is
/// clamped (see [`bounded_seconds`]).
fn seconds(secs: f64) -> Option<Duration> {
    (secs >= 0.0).then(|| bounded_seconds(secs))
}

/// The longest outside duration baton represents, in seconds (about 31 years): every
/// delay, timeout or date a server or a roster gives is clamped to it, so adding it
/// to an `Instant` or a `SystemTime` cannot overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// `d`, clamped to [`MAX_SECONDS`]: for durations that came from outside (a roster,
/// a stored job spec, a command-line flag) before they meet `Instant` arithmetic.
pub fn bounded(d: Duration) -> Duration {
    d.min(bounded_seconds(MAX_SECONDS))
}

/// `secs` as a `Duration`, clamped to `0..=MAX_SECONDS` (NaN reads as the maximum: a
/// delay nobody can name is not a reason to hurry).
pub fn bounded_seconds(secs: f64) -> Duration {
    if secs.is_nan() {
        return Duration::from_secs_f64(MAX_SECONDS);
    }
    Duration::from_secs_f64(secs.clamp(0.0, MAX_SECONDS))
}

/// An HTTP-date (`Wed, 21 Oct 2015 07:28:00 GMT`, or the obsolete RFC 850 and asctime
/// forms), as `httpdate` reads it: years 1970 to 9999, the weekday checked.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text).ok()
}

/// RFC 3339: `2025-01-02T03:04:05Z`, `2025-01-02T03:04:05.123+01:00`, as `jiff` reads
/// it (years 1970 to 9999, offsets under a day; anything else is no instant).
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let pieces = jiff::fmt::temporal::Pieces::parse(text).ok()?;
    // An instant needs a time and an offset: a bare date or a local time names none.
    let time = pieces.time()?;
    let offset = pieces.offset()?.to_numeric_offset();
    // Civil arithmetic rather than `jiff::Timestamp`, whose range ends a day before
    // 9999-12-31 (it leaves room for any offset): the last instant a server can write
    // still reads as a (clamped) delay.
    let epoch = jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0);
    let since = (pieces.date().to_datetime(time).duration_since(epoch))
        .checked_sub(offset.duration_since(jiff::tz::Offset::UTC))?;
    let secs = u64::try_from(since.as_secs()).ok()?;
    let nanos = u32::try_from(since.subsec_nanos()).ok()?;
    std::time::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    const NONE: [(&str, &str); 0] = [];

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn d(secs: f64) -> Option<Duration> {
        Some(Duration::from_secs_f64(secs))
    }

    #[test]
    fn headers_in_every_form() {
        let now = at(1_445_412_470); // 2015-10-21T07:27:50Z
        assert_eq!(retry_delay(&[("Retry-After", "8")], "", now), d(8.0));
        assert_eq!(
            retry_delay(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], "", now),
            d(10.0)
        );
        assert_eq!(
            retry_delay(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")], "", now),
            d(0.0),
            "a date in the past means now"
        );
        assert_eq!(retry_delay(&[("retry-after-ms", "1500")], "", now), d(1.5));
        // retry-after-ms is the more precise of the two and wins.
        assert_eq!(
            retry_delay(&[("retry-after", "2"), ("retry-after-ms", "1500")], "", now),
            d(1.5)
        );
        assert_eq!(
            retry_delay(&[("x-ratelimit-reset-requests", "6m0s")], "", now),
            d(360.0)
        );
        assert_eq!(
            retry_delay(&[("x-ratelimit-reset-tokens", "20ms")], "", now),
            d(0.02)
        );
        // Both present: the spent one's reset, else the later one.
        let both = [
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(retry_delay(&both, "", now), d(360.0));
        let spent = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "5000"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(retry_delay(&spent, "", now), d(1.0));
        assert_eq!(
            retry_delay(
                &[("anthropic-ratelimit-requests-reset", "2015-10-21T07:28:20Z")],
                "",
                now
            ),
            d(30.0)
        );
        assert_eq!(
            retry_delay(
                &[(
                    "anthropic-ratelimit-tokens-reset",
                    "2015-10-21T09:28:05.5+02:00"
                )],
                "",
                now
            ),
            d(15.5)
        );
        assert_eq!(retry_delay(&[("retry-after", "soon")], "", now), None);
        assert_eq!(retry_delay(&NONE, "", now), None);
    }

    #[test]
    fn bodies_in_every_form() {
        let now = at(0);
        let gemini = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota exceeded","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"8s"}]}}"#;
        assert_eq!(retry_delay(&NONE, gemini, now), d(8.0));
        assert_eq!(
            retry_delay(&NONE, &gemini.replace("\"8s\"", "\"8.4s\""), now),
            d(8.4)
        );
        let groq = r#"{"error":{"message":"Rate limit reached for model `llama` on tokens per minute (TPM): Limit 6000, Used 5800. Please try again in 8.4s. Visit https://console.groq.com","type":"tokens"}}"#;
        assert_eq!(retry_delay(&NONE, groq, now), d(8.4));
        assert_eq!(
            retry_delay(&NONE, "Please try again in 1m30s.", now),
            d(90.0)
        );
        assert_eq!(
            retry_delay(&NONE, "Too many requests; retry after 20 seconds", now),
            d(20.0)
        );
        assert_eq!(retry_delay(&NONE, "Please retry in 8.403s.", now), d(8.403));
        assert_eq!(retry_delay(&NONE, "Try again in 500ms", now), d(0.5));
        assert_eq!(retry_delay(&NONE, "try again in a while", now), None);
        // A header beats a phrase in the body.
        assert_eq!(
            retry_delay(&[("retry-after", "3")], "try again in 8s", now),
            d(3.0)
        );
    }

    /// Regression: the number was read on its own, as seconds, before the unit after
    /// it was looked at: "try again in 1 minute" waited one second.
    #[test]
    fn a_spelled_out_unit_scales_its_number() {
        let now = at(0);
        for (body, secs) in [
            ("Please try again in 1 minute.", 60.0),
            ("try again in 2 mins", 120.0),
            ("retry after 500 milliseconds", 0.5),
            ("retry in 1 hour", 3600.0),
            ("retry after 1.5 minutes", 90.0),
            ("try again in 3 secs", 3.0),
            ("retry after 20 seconds", 20.0),
            ("retry after 7 sec", 7.0),
            // An unknown word after the number: the number alone, in seconds.
            ("try again in 5 moments", 5.0),
            // Regression: a non-ASCII unit ended the token, so 500µs waited 500 s.
            ("try again in 500µs", 0.0005),
            ("retry after 250 µs", 0.00025),
        ] {
            assert_eq!(retry_delay(&NONE, body, now), d(secs), "{body}");
        }
    }

    #[test]
    fn a_quota_reset_in_the_providers_words() {
        let now = at(1_445_412_470); // 2015-10-21T07:27:50Z
        let message = "You have reached your specified API usage limits. You will regain access on 2015-11-01 at 00:00 UTC.";
        assert_eq!(
            quota_reset(message, now),
            d((11.0 * 24.0 - 7.0) * 3600.0 - 27.0 * 60.0 - 50.0)
        );
        assert_eq!(
            quota_reset("You will regain access on 2015-10-21 at 07:28:20 UTC", now),
            d(30.0)
        );
        assert_eq!(quota_reset("Your credit balance is too low", now), None);
        assert_eq!(
            quota_reset("You will regain access on 2015-13-45 at 00:00 UTC.", now),
            None,
            "no such day"
        );
        assert_eq!(
            quota_reset("You will regain access on 2015-11-01 at 00:00 PST.", now),
            None,
            "a zone baton cannot place names no instant"
        );
        assert_eq!(quota_reset("regain access on ", now), None);
    }

    #[test]
    fn go_durations() {
        // Every form the providers' reset headers and `retryDelay` use.
        for (text, secs) in [
            ("6m0s", 360.0),
            ("1s", 1.0),
            ("20ms", 0.02),
            ("59.123s", 59.123),
            ("8.403265939s", 8.403265939),
            ("1h30m", 5400.0),
            ("1.5h", 5400.0),
            ("2m30.5s", 150.5),
            ("250us", 0.00025),
            ("250µs", 0.00025),
            ("100ns", 0.0000001),
            ("0.5", 0.5),
        ] {
            assert_eq!(parse_go_duration(text), d(secs), "{text}");
        }
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("1h2m3.5s"), d(3723.5));
        assert_eq!(parse_go_duration("0s"), d(0.0));
        assert_eq!(parse_go_duration("2"), d(2.0));
        assert_eq!(parse_go_duration("s"), None);
        assert_eq!(parse_go_duration("3x"), None);
        assert_eq!(parse_go_duration("-1s"), None);
    }

    /// Regression: `Retry-After: 99999999999999999999`, a millisecond count past
    /// `u64`, an HTTP date in year 99999999999 and a reset phrase in the billions of
    /// hours panicked on `Duration` overflow. They are clamped to the longest delay
    /// baton represents, which no retry policy waits for (or, past what the duration
    /// parser reads, not read as a delay at all).
    #[test]
    fn absurd_delays_are_clamped_instead_of_panicking() {
        let now = at(1_445_412_470);
        let max = Some(bounded_seconds(MAX_SECONDS));
        assert_eq!(
            retry_delay(&[("Retry-After", "99999999999999999999")], "", now),
            max
        );
        assert_eq!(retry_delay(&[("retry-after-ms", "1e300")], "", now), max);
        assert_eq!(retry_delay(&[("retry-after", "inf")], "", now), max);
        assert_eq!(
            retry_delay(
                &[("retry-after", "Wed, 21 Oct 99999999999 07:28:00 GMT")],
                "",
                now
            ),
            None,
            "a year no server means is not a date"
        );
        assert_eq!(
            retry_delay(
                &[(
                    "anthropic-ratelimit-tokens-reset",
                    "9999-12-31T23:59:59+99999999999:00"
                )],
                "",
                now
            ),
            None
        );
        assert_eq!(
            retry_delay(
                &[("anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z")],
                "",
                now
            ),
            max
        );
        assert_eq!(retry_delay(&NONE, "try again in 99999999999h", now), max);
        assert_eq!(
            retry_delay(&[("x-ratelimit-reset-tokens", "99999999999h1s")], "", now),
            max
        );
        // A count of hours past `u64` is no duration jiff reads: no delay is read
        // (the policy's own backoff applies), and nothing panics.
        assert_eq!(
            retry_delay(&NONE, "try again in 99999999999999999999h", now),
            None
        );
        assert_eq!(
            retry_delay(
                &[("x-ratelimit-reset-tokens", "99999999999999999999h1s")],
                "",
                now
            ),
            None
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn header_name() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("retry-after".to_string()),
                Just("Retry-After-Ms".to_string()),
                Just("x-ratelimit-reset-requests".to_string()),
                Just("x-ratelimit-remaining-requests".to_string()),
                Just("anthropic-ratelimit-tokens-reset".to_string()),
                Just("anthropic-ratelimit-tokens-remaining".to_string()),
                "[a-z-]{1,30}",
            ]
        }

        fn header_value() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-9]{1,40}",
                "[0-9]{0,20}\\.[0-9]{0,20}(e[+-]?[0-9]{1,4})?",
                "([0-9]{1,25}(h|m|s|ms|us|ns)){1,4}",
                "(Mon|Wed), [0-9]{1,3} (Jan|Oct|Dec) -?[0-9]{1,25} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} GMT",
                "-?[0-9]{1,25}-[0-9]{1,3}-[0-9]{1,3}T[0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3}(\\.[0-9]{0,30})?(Z|[+-][0-9]{1,25}:[0-9]{1,25})",
                ".{0,40}",
            ]
        }

        fn body() -> impl Strategy<Value = String> {
            prop_oneof![
                "(try again in|retry after|retry in) -?[0-9.e]{0,30} ?(ms|s|seconds|minutes|h|hours)?",
                "\\{\"error\":\\{\"details\":\\[\\{\"@type\":\"RetryInfo\",\"retryDelay\":\"[0-9.e+-]{0,30}[a-z]{0,2}\"\\}\\]\\}\\}",
                ".{0,80}",
            ]
        }

        proptest! {
            /// Whatever a server sends, the parser returns a delay within bounds (which
            /// `Instant` and `SystemTime` arithmetic can take) and never panics.
            #[test]
            fn retry_delay_is_total_and_bounded(
                headers in proptest::collection::vec((header_name(), header_value()), 0..5),
                body in body(),
                now_secs in 0u64..(1u64 << 40),
            ) {
                let now = at(now_secs);
                if let Some(d) = retry_delay(&headers, &body, now) {
                    prop_assert!(d <= bounded_seconds(MAX_SECONDS), "{d:?}");
                    prop_assert!(std::time::Instant::now().checked_add(d).is_some());
                    prop_assert!(now.checked_add(d).is_some());
                }
            }

            #[test]
            fn go_durations_are_total_and_bounded(text in ".{0,40}|([0-9.]{1,30}(h|m|s|ms|us|µs|ns)){1,5}") {
                if let Some(d) = parse_go_duration(&text) {
                    prop_assert!(d <= bounded_seconds(MAX_SECONDS));
                }
            }

            #[test]
            fn bounded_seconds_never_panics(secs in proptest::num::f64::ANY) {
                prop_assert!(bounded_seconds(secs) <= bounded_seconds(MAX_SECONDS));
            }
        }
    }
}
