//! The one HTTP seam every provider goes through: a blocking `ureq` agent with the
//! worker's timeouts, which returns any status as a reply (providers classify their
//! own error bodies) and maps transport failures to error classes.

use std::io;
use std::sync::mpsc;
use std::time::Duration;

use crate::{Cancel, Error, Result};

/// How often a cancellable call looks at its token: well inside the second a cancel
/// must take.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Responses larger than this are refused rather than buffered; model answers are
/// kilobytes, so hitting it means the server is not what we think it is.
const MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Clone)]
pub(crate) struct Transport {
    agent: ureq::Agent,
    connect_timeout: Duration,
    timeout: Duration,
}

/// A response of any status.
pub(crate) struct Reply {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Transport {
    pub fn new(connect_timeout: Duration, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(connect_timeout))
            .timeout_global(Some(timeout))
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Transport {
            agent,
            connect_timeout,
            timeout,
        }
    }

    /// A POST; with `cancel`, it returns [`Error::Cancelled`] within a poll of the
    /// token being cancelled, whatever the server does meanwhile.
    ///
    /// ureq blocks and has no way to abort a call from another thread, so a
    /// cancellable call runs on a thread of its own and is abandoned when cancelled:
    /// its reply, should one still come, is dropped unread, and nothing waits for it
    /// (the thread ends when the server answers or the call's own timeout passes).
    pub fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        cancel: Option<&Cancel>,
    ) -> Result<Reply> {
        let Some(cancel) = cancel else {
            return self.call(url, headers, body);
        };
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let me = self.clone();
        let url = url.to_string();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let (tx, rx) = mpsc::sync_channel(1);
        let host_of_url = host(&url).to_string();
        let spawned = std::thread::Builder::new()
            .name("baton-http".into())
            .spawn(move || {
                let headers: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                // The receiver is gone when the call was abandoned: nobody wants it.
                let _ = tx.send(me.call(&url, &headers, body));
            });
        if let Err(e) = spawned {
            return Err(Error::Unreachable {
                detail: format!("cannot start the call to {host_of_url}: {e}"),
                sent: false,
            });
        }
        loop {
            match rx.recv_timeout(CANCEL_POLL) {
                Ok(reply) => return reply,
                Err(mpsc::RecvTimeoutError::Timeout) if cancel.is_cancelled() => {
                    return Err(Error::Cancelled);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Unreachable {
                        detail: format!("the call to {host_of_url} ended without a result"),
                        sent: true,
                    });
                }
            }
        }
    }

    fn call(&self, url: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Result<Reply> {
        let mut request = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send(body).map_err(|e| self.map(e, url, false))?;
        self.read(response, url)
    }

    /// A GET (a server's own description of itself: llama.cpp's `/props`, …).
    pub fn get(&self, url: &str) -> Result<Reply> {
        let response = self
            .agent
            .get(url)
            .call()
            .map_err(|e| self.map(e, url, false))?;
        self.read(response, url)
    }

    fn read(&self, mut response: ureq::http::Response<ureq::Body>, url: &str) -> Result<Reply> {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec()
            .map_err(|e| self.map(e, url, true))?;
        let body = String::from_utf8(bytes).map_err(|_| Error::Unparseable {
            detail: format!("HTTP {status} body from {} is not UTF-8", host(url)),
        })?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Transport failures by class. `in_body`: the status line and headers had
    /// arrived, so the exchange broke off mid-response.
    fn map(&self, error: ureq::Error, url: &str, in_body: bool) -> Error {
        let host = host(url);
        match error {
            ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
                Error::Timeout(self.connect_timeout)
            }
            ureq::Error::Timeout(_) => Error::Timeout(self.timeout),
            ureq::Error::Io(e) => match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error::Timeout(self.timeout),
                io::ErrorKind::UnexpectedEof if in_body => Error::Unparseable {
                    detail: format!("the response body from {host} was cut short"),
                },
                io::ErrorKind::ConnectionRefused => Error::Unreachable {
                    detail: format!("connection refused by {host}"),
                    sent: false,
                },
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => Error::Unreachable {
                    detail: format!(
                        "connection to {host} closed {}",
                        if in_body {
                            "mid-response"
                        } else {
                            "before a response"
                        }
                    ),
                    sent: true,
                },
                _ => Error::Unreachable {
                    detail: format!("{host}: {e}"),
                    sent: true,
                },
            },
            ureq::Error::HostNotFound => Error::Unreachable {
                detail: format!("cannot resolve {host}"),
                sent: false,
            },
            ureq::Error::ConnectionFailed => Error::Unreachable {
                detail: format!("cannot connect to {host}"),
                sent: false,
            },
            ureq::Error::Protocol(e) => Error::Unparseable {
                detail: format!("malformed HTTP response from {host}: {e}"),
            },
            ureq::Error::BodyExceedsLimit(limit) => Error::Unparseable {
                detail: format!("response from {host} exceeds {limit} bytes"),
            },
            ureq::Error::BadUri(detail) => Error::Config(format!("bad api_base URL: {detail}")),
            ureq::Error::Http(e) => Error::Config(format!("cannot build the request: {e}")),
            other => Error::Unreachable {
                detail: format!("{host}: {other}"),
                sent: true,
            },
        }
    }
}

/// `scheme://host:port` of a URL, for messages (never the path or query).
fn host(url: &str) -> &str {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    let end = url[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(url.len());
    &url[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_keeps_only_scheme_and_authority() {
        assert_eq!(
            super::host("https://api.openai.com/v1/chat/completions"),
            "https://api.openai.com"
        );
        assert_eq!(
            super::host("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080"
        );
    }
}
