//! A small HTTP/1.1 server on 127.0.0.1 that answers from a script, one action per
//! connection, and captures every request (request line, headers, body, arrival) for
//! asserts. The engine's suite uses it too, for turns against real wire formats.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Captured {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When the request had arrived in full (read by the engine's suite, which checks
    /// how long turns wait between requests).
    #[allow(dead_code)]
    pub at: Instant,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Debug, Clone)]
pub enum Action {
    /// A complete response.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Waits, then responds (for client timeouts).
    Delay(Duration, Box<Action>),
    /// Headers promise more body than is sent, then the socket closes cleanly.
    Truncate { status: u16, body: String },
    /// Closes the socket with the request body unread, so the kernel resets the
    /// connection; `mid_response` first sends the status line, headers and a few
    /// bytes of the body.
    Reset { mid_response: bool },
    /// Answers what the request asks: the action is chosen from the request as it
    /// arrived (a server that behaves like a model, or one that serves several paths).
    Decide(Decider),
}

/// Chooses a response from a request, for [`Action::Decide`].
#[derive(Clone)]
pub struct Decider(pub Arc<dyn Fn(&Captured) -> Action + Send + Sync>);

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decider")
    }
}

/// A server script that answers every request with `decide`.
#[allow(dead_code)]
pub fn deciding(
    requests: usize,
    decide: impl Fn(&Captured) -> Action + Send + Sync + 'static,
) -> Vec<Action> {
    let decider = Decider(Arc::new(decide));
    (0..requests)
        .map(|_| Action::Decide(decider.clone()))
        .collect()
}

pub fn json(status: u16, body: &str) -> Action {
    Action::Respond {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

pub fn json_with(status: u16, headers: &[(&str, &str)], body: &str) -> Action {
    Action::Respond {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: body.to_string(),
    }
}

pub struct TestServer {
    addr: SocketAddr,
    captured: Arc<Mutex<Vec<Captured>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(script: Vec<Action>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let captured = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (cap, halt) = (captured.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let action = script.next().unwrap_or_else(|| {
                    json(
                        500,
                        r#"{"error":{"message":"test server script exhausted"}}"#,
                    )
                });
                // Slow actions run on their own thread so a retry is not blocked.
                let cap = cap.clone();
                std::thread::spawn(move || serve(stream, action, &cap));
            }
        });
        TestServer {
            addr,
            captured,
            stop,
            handle: Some(handle),
        }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.captured.lock().unwrap().clone()
    }

    pub fn only_request(&self) -> Captured {
        let all = self.requests();
        assert_eq!(
            all.len(),
            1,
            "expected exactly one request, got {}",
            all.len()
        );
        all.into_iter().next().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag and ends.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut stream: TcpStream, action: Action, captured: &Mutex<Vec<Captured>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    if let Action::Reset { mid_response } = action {
        // Read a few bytes only: closing with the rest of the request unread makes the
        // kernel answer with RST instead of FIN.
        let mut first = [0u8; 16];
        let _ = stream.read(&mut first);
        captured.lock().unwrap().push(Captured {
            method: "RESET".into(),
            path: String::new(),
            headers: vec![],
            body: String::new(),
            at: Instant::now(),
        });
        if mid_response {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"cho");
        }
        return;
    }
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request = Captured {
        method,
        path,
        headers,
        body: String::from_utf8(body).unwrap(),
        at: Instant::now(),
    };
    let action = match action {
        Action::Decide(Decider(decide)) => decide(&request),
        other => other,
    };
    captured.lock().unwrap().push(request);
    respond(&mut stream, action);
}

fn respond(stream: &mut TcpStream, action: Action) {
    match action {
        Action::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
        Action::Delay(d, then) => {
            std::thread::sleep(d);
            respond(stream, *then);
        }
        Action::Truncate { status, body } => {
            let head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                reason(status),
                body.len() + 1000
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        Action::Reset { .. } | Action::Decide(_) => {}
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
