//! A TCP forwarder to the PostgreSQL server that can be cut: while cut, every open
//! connection is closed and new ones are dropped as they arrive, as a network cut or a
//! server restart looks to a client. Shared by the store's and the CLI's suites.

use std::io::Read as _;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// `host:port` of a `postgres://` URL.
pub fn server_addr(url: &str) -> String {
    let config: ::postgres::Config = url.parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(::postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

pub struct Cuttable {
    /// `ip:port` to connect to instead of the server.
    pub addr: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Cuttable {
    /// Listening on `ip` (any address of the loopback range is this machine's, so that
    /// each simulated host can reach the server at an address of its own), forwarding
    /// to `target` (`host:port`).
    pub fn start_on(ip: &str, target: &str) -> Cuttable {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let target = target.to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(&target) else {
                    continue;
                };
                {
                    let mut open = o.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(upstream.try_clone().unwrap());
                }
                pipe(client.try_clone().unwrap(), upstream.try_clone().unwrap());
                pipe(upstream, client);
            }
        });
        Cuttable { addr, cut, open }
    }

    /// Closes every connection through the link and drops new ones until `restore`.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if std::io::Write::write_all(&mut to, &buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
