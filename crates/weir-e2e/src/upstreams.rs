//! Scriptable loopback upstreams for behaviours the demo upstreams do not have: echoing what
//! arrived, streaming slowly, cutting a body short, answering garbage, counting connections.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use weir_http::{BodyDecoder, Limits, Parsed, RequestHead};

/// A request as an upstream received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The head as parsed.
    pub head: RequestHead,
    /// The decoded body.
    pub body: Vec<u8>,
}

/// What the script answers.
pub type Script = dyn Fn(&Seen, &mut TcpStream) -> bool + Send + Sync;

/// A thread-per-connection upstream running a script per request. The script writes the
/// response itself and returns whether the connection may be kept.
pub struct RawUpstream {
    /// Its address.
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// Requests received so far.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Raw bytes received on any connection.
    pub bytes: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl RawUpstream {
    /// Starts an upstream running `script` for every request.
    pub fn start(script: impl Fn(&Seen, &mut TcpStream) -> bool + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (c, s, b, st) = (
            connections.clone(),
            seen.clone(),
            bytes.clone(),
            stop.clone(),
        );
        thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                c.fetch_add(1, Ordering::Relaxed);
                let (script, s, b) = (script.clone(), s.clone(), b.clone());
                thread::spawn(move || serve(conn, &*script, &s, &b));
            }
        });
        RawUpstream {
            addr,
            connections,
            seen,
            bytes,
            stop,
        }
    }

    /// An upstream that answers every request with 200 and a JSON echo of the request:
    /// method, target, headers and body length (header `x-echo-body-len`).
    pub fn echo() -> Self {
        Self::start(|seen, s| {
            let mut body = String::from("{");
            body.push_str(&format!(
                "\"method\":\"{}\",\"target\":\"{}\"",
                seen.head.method(),
                seen.head.target()
            ));
            for (n, v) in seen.head.headers().iter() {
                body.push_str(&format!(
                    ",\"h:{}\":\"{}\"",
                    n.to_ascii_lowercase(),
                    String::from_utf8_lossy(v)
                ));
            }
            body.push('}');
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-echo-body-len: {}\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\ncontent-length: {}\r\n\r\n{}",
                seen.body.len(),
                body.len(),
                body
            );
            s.write_all(resp.as_bytes()).is_ok()
        })
    }

    /// Number of requests seen.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(mut conn: TcpStream, script: &Script, seen: &Mutex<Vec<Seen>>, bytes: &AtomicUsize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let limits = Limits {
        require_host: false,
        ..Limits::with_max_head_bytes(1 << 20)
    };
    loop {
        let (head, len) = loop {
            match weir_http::parse_request(&buf, &limits) {
                Ok(Parsed::Complete(h, n)) => break (h, n),
                Ok(Parsed::Partial) => match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        bytes.fetch_add(n, Ordering::Relaxed);
                        buf.extend_from_slice(&chunk[..n]);
                    }
                },
                Err(_) => {
                    let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    return;
                }
            }
        };
        buf.drain(..len);
        let mut dec = BodyDecoder::new(head.framing());
        let mut body = Vec::new();
        loop {
            while !buf.is_empty() && !dec.is_done() {
                let Ok(step) = dec.decode(&buf) else { return };
                body.extend_from_slice(&buf[step.data]);
                buf.drain(..step.consumed);
                if step.consumed == 0 {
                    break;
                }
            }
            if dec.is_done() {
                break;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    bytes.fetch_add(n, Ordering::Relaxed);
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        let s = Seen { head, body };
        seen.lock().unwrap().push(s.clone());
        if !script(&s, &mut conn) {
            return;
        }
    }
}
