//! The demo upstream server: an accept thread plus one thread per connection.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use weir_http::{
    BodyDecoder, LAST_CHUNK, Limits, RequestHead, Version, encode_chunk, parse_request_into,
    reason_phrase, write_header, write_response,
};

use crate::json;

/// Most connections served at once; further ones are closed on accept.
pub const MAX_CONNECTIONS: usize = 512;
/// Distinct `/flaky` idempotency keys remembered; the table is cleared when full.
const MAX_FLAKY_KEYS: usize = 100_000;
/// A kept-alive connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(60);
/// How often blocked reads wake up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Request bodies beyond this are counted but not kept.
const MAX_KEPT_BODY: usize = 1 << 20;

#[derive(Debug, Default)]
struct Counters {
    total: u64,
    paths: BTreeMap<String, u64>,
    flaky_keys: BTreeMap<String, u64>,
    flaky_keyless: u64,
    orders: u64,
}

#[derive(Debug)]
struct Shared {
    name: String,
    stop: AtomicBool,
    down: AtomicBool,
    conns: AtomicUsize,
    counters: Mutex<Counters>,
}

impl Shared {
    fn counters(&self) -> MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A snapshot of a demo upstream's attempt counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DemoStats {
    /// Requests answered (or dropped while down), `/stats` excluded.
    pub total: u64,
    /// Requests per path (query strings stripped).
    pub paths: BTreeMap<String, u64>,
    /// `/flaky` attempts per idempotency key.
    pub flaky_keys: BTreeMap<String, u64>,
    /// `/flaky` attempts without a key.
    pub flaky_keyless: u64,
    /// `POST /orders` calls.
    pub orders: u64,
}

impl DemoStats {
    /// Requests seen for `path` (0 if none).
    pub fn path(&self, path: &str) -> u64 {
        self.paths.get(path).copied().unwrap_or(0)
    }
}

/// A running demo upstream. Stops (and frees its port) on [`stop`](Self::stop) or drop.
#[derive(Debug)]
pub struct DemoUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl DemoUpstream {
    /// Bind `addr` (loopback only; port 0 picks a free one) and serve on background threads.
    pub fn start(name: &str, addr: impl ToSocketAddrs) -> io::Result<Self> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        if addrs.is_empty() || addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "demo upstreams bind loopback addresses only",
            ));
        }
        let listener = TcpListener::bind(&addrs[..])?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            stop: AtomicBool::new(false),
            down: AtomicBool::new(false),
            conns: AtomicUsize::new(0),
            counters: Mutex::new(Counters::default()),
        });
        let s = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name(format!("demo-{name}-accept"))
            .spawn(move || accept_loop(&listener, &s))?;
        Ok(Self {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The upstream's name (shows in bodies and `x-upstream`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// While `true`, accepted connections are closed at once and requests on existing
    /// connections are dropped without an answer (the connection closes), like a dead backend.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// Whether [`set_down`](Self::set_down) is in effect.
    pub fn is_down(&self) -> bool {
        self.shared.down.load(Ordering::SeqCst)
    }

    /// Connections currently open.
    pub fn connections(&self) -> usize {
        self.shared.conns.load(Ordering::SeqCst)
    }

    /// A snapshot of the attempt counts.
    pub fn stats(&self) -> DemoStats {
        let c = self.shared.counters();
        DemoStats {
            total: c.total,
            paths: c.paths.clone(),
            flaky_keys: c.flaky_keys.clone(),
            flaky_keyless: c.flaky_keyless,
            orders: c.orders,
        }
    }

    /// Zero every count (the `/flaky` schedule starts over too).
    pub fn reset_stats(&self) {
        *self.shared.counters() = Counters::default();
    }

    /// Stop accepting, close connections (within ~50 ms) and wait for the accept thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        let _ = accept.join();
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.shared.conns.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for DemoUpstream {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping() {
            return;
        }
        let Ok(stream) = stream else {
            // EMFILE and friends: back off a little instead of spinning.
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        if shared.down.load(Ordering::SeqCst)
            || shared.conns.load(Ordering::SeqCst) >= MAX_CONNECTIONS
        {
            drop(stream);
            continue;
        }
        shared.conns.fetch_add(1, Ordering::SeqCst);
        let s = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("demo-{}-conn", shared.name))
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = serve(stream, &s);
                s.conns.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.conns.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Read more bytes into `buf`, waking every [`POLL`] to honour stop; `Ok(0)` on EOF, stop or
/// idle timeout.
fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> io::Result<usize> {
    let mut tmp = [0u8; 16 * 1024];
    let idle_until = Instant::now() + IDLE;
    loop {
        if shared.stopping() || Instant::now() >= idle_until {
            return Ok(0);
        }
        match stream.read(&mut tmp) {
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                return Ok(n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The request as the handlers see it.
struct Request<'a> {
    head: &'a RequestHead,
    body: &'a [u8],
    body_len: u64,
}

fn serve(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    let limits = Limits {
        require_host: false,
        ..Limits::default()
    };
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut head = RequestHead::default();
    let mut out = Vec::with_capacity(1024);
    loop {
        let head_len = loop {
            match parse_request_into(&mut head, &buf, &limits) {
                Ok(Some(len)) => break len,
                Ok(None) => {
                    if fill(&mut stream, &mut buf, shared)? == 0 {
                        return Ok(());
                    }
                }
                Err(e) => {
                    out.clear();
                    let body = format!("{{\"error\":\"{}\"}}", e.reason());
                    let name = shared.name.as_bytes();
                    let hs: [(&str, &[u8]); 3] = [
                        ("x-upstream", name),
                        ("content-type", b"application/json"),
                        ("connection", b"close"),
                    ];
                    write_response(&mut out, e.status(), &hs, body.as_bytes());
                    stream.write_all(&out)?;
                    return Ok(());
                }
            }
        };
        buf.drain(..head_len);
        if shared.down.load(Ordering::SeqCst) {
            shared.counters().total += 1;
            let _ = stream.shutdown(Shutdown::Both);
            return Ok(());
        }
        if head.expect_continue() && head.framing().has_body() {
            stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        // Read the whole request body (bounded copy kept for handlers).
        let mut dec = BodyDecoder::new(head.framing());
        let mut body = Vec::new();
        let mut body_len = 0u64;
        while !dec.is_done() {
            if buf.is_empty() && fill(&mut stream, &mut buf, shared)? == 0 {
                return Ok(());
            }
            let step = match dec.decode(&buf) {
                Ok(step) => step,
                Err(_) => {
                    out.clear();
                    let name = shared.name.as_bytes();
                    write_response(
                        &mut out,
                        400,
                        &[("x-upstream", name), ("connection", b"close")],
                        b"",
                    );
                    stream.write_all(&out)?;
                    return Ok(());
                }
            };
            let data = &buf[step.data];
            body_len += data.len() as u64;
            let keep = data.len().min(MAX_KEPT_BODY.saturating_sub(body.len()));
            body.extend_from_slice(&data[..keep]);
            buf.drain(..step.consumed);
        }
        let req = Request {
            head: &head,
            body: &body,
            body_len,
        };
        let keep_alive = head.keep_alive();
        let go_on = respond(&mut stream, &req, shared, keep_alive, &mut out)?;
        if !go_on || !keep_alive {
            let _ = stream.shutdown(Shutdown::Write);
            return Ok(());
        }
    }
}

/// What a handler answers.
enum Reply {
    /// A complete response with a JSON (or empty) body.
    Full {
        status: u16,
        body: String,
        extra: Vec<(&'static str, String)>,
    },
    /// A slowly streamed chunked body.
    Stream { chunks: u64, delay: Duration },
    /// A head promising more body than is sent, then close.
    Truncated { chunked: bool },
}

fn query_param<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then_some(v)
    })
}

fn query_u64(query: Option<&str>, key: &str, default: u64, max: u64) -> u64 {
    query_param(query, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .min(max)
}

/// Sleep `d`, returning early when the server stops.
fn sleep_unless_stopped(d: Duration, shared: &Shared) {
    let until = Instant::now() + d;
    while !shared.stopping() {
        let now = Instant::now();
        if now >= until {
            return;
        }
        thread::sleep((until - now).min(POLL));
    }
}

fn handle(req: &Request<'_>, shared: &Shared) -> Reply {
    let head = req.head;
    let path = head.path();
    let name = &shared.name;
    let mut up = String::new();
    json::string(&mut up, name);
    if path != "/stats" {
        let mut c = shared.counters();
        c.total += 1;
        if let Some(n) = c.paths.get_mut(path) {
            *n += 1;
        } else {
            c.paths.insert(path.to_owned(), 1);
        }
    }
    let ok = |status: u16, body: String| Reply::Full {
        status,
        body,
        extra: Vec::new(),
    };
    match path {
        "/ok" => {
            let mut p = String::new();
            json::string(&mut p, path);
            ok(200, format!("{{\"upstream\":{up},\"path\":{p}}}"))
        }
        "/flaky" => {
            let key = head.header("idempotency-key").filter(|k| !k.is_empty());
            let (attempt, fail) = {
                let mut c = shared.counters();
                match key {
                    Some(k) => {
                        let k = String::from_utf8_lossy(k).into_owned();
                        if c.flaky_keys.len() >= MAX_FLAKY_KEYS && !c.flaky_keys.contains_key(&k) {
                            c.flaky_keys.clear();
                        }
                        let n = c.flaky_keys.entry(k).or_insert(0);
                        *n += 1;
                        (*n, *n == 1)
                    }
                    None => {
                        c.flaky_keyless += 1;
                        (c.flaky_keyless, c.flaky_keyless % 2 == 1)
                    }
                }
            };
            let status = if fail { 503 } else { 200 };
            ok(
                status,
                format!("{{\"upstream\":{up},\"path\":\"/flaky\",\"attempt\":{attempt}}}"),
            )
        }
        "/slow" => {
            let ms = query_u64(head.query(), "ms", 350, 30_000);
            sleep_unless_stopped(Duration::from_millis(ms), shared);
            ok(
                200,
                format!("{{\"upstream\":{up},\"path\":\"/slow\",\"ms\":{ms}}}"),
            )
        }
        "/orders" if head.method() == "POST" => {
            let n = {
                let mut c = shared.counters();
                c.orders += 1;
                c.orders
            };
            ok(200, format!("{{\"upstream\":{up},\"order\":{n}}}"))
        }
        "/orders" => Reply::Full {
            status: 405,
            body: format!("{{\"upstream\":{up},\"error\":\"method_not_allowed\"}}"),
            extra: vec![("allow", "POST".to_owned())],
        },
        "/stats" => {
            let c = shared.counters();
            let mut s = format!("{{\"upstream\":{up},\"total\":{},\"paths\":", c.total);
            json::counts(&mut s, &c.paths);
            s.push_str(",\"flaky_keys\":");
            json::counts(&mut s, &c.flaky_keys);
            s.push_str(&format!(
                ",\"flaky_keyless\":{},\"orders\":{}}}",
                c.flaky_keyless, c.orders
            ));
            ok(200, s)
        }
        "/stream" => Reply::Stream {
            chunks: query_u64(head.query(), "chunks", 5, 10_000),
            delay: Duration::from_millis(query_u64(head.query(), "delay_ms", 100, 10_000)),
        },
        "/close" => Reply::Truncated {
            chunked: query_param(head.query(), "chunked") == Some("1"),
        },
        "/echo" => {
            let mut s = format!("{{\"upstream\":{up},\"method\":");
            json::string(&mut s, head.method());
            s.push_str(",\"target\":");
            json::string(&mut s, head.target());
            s.push_str(&format!(
                ",\"version\":\"{}\",\"headers\":[",
                head.version().as_str()
            ));
            for (i, (n, v)) in head.headers().iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push('[');
                json::string(&mut s, n);
                s.push(',');
                json::string(&mut s, &String::from_utf8_lossy(v));
                s.push(']');
            }
            s.push_str(&format!("],\"body_len\":{},\"body\":", req.body_len));
            json::string(&mut s, &String::from_utf8_lossy(req.body));
            s.push('}');
            ok(200, s)
        }
        _ => {
            if let Some(code) = path.strip_prefix("/status/")
                && let Ok(status @ 200..=599) = code.parse::<u16>()
            {
                return ok(status, format!("{{\"upstream\":{up},\"status\":{status}}}"));
            }
            let mut p = String::new();
            json::string(&mut p, path);
            ok(
                404,
                format!("{{\"upstream\":{up},\"error\":\"not_found\",\"path\":{p}}}"),
            )
        }
    }
}

/// Write the reply; `Ok(false)` when the connection must close afterwards.
fn respond(
    stream: &mut TcpStream,
    req: &Request<'_>,
    shared: &Shared,
    keep_alive: bool,
    out: &mut Vec<u8>,
) -> io::Result<bool> {
    let reply = handle(req, shared);
    let is_head = req.head.is_head();
    let name = shared.name.as_bytes();
    out.clear();
    match reply {
        Reply::Full {
            status,
            body,
            extra,
        } => {
            let mut hs: Vec<(&str, &[u8])> = vec![("x-upstream", name)];
            hs.extend(extra.iter().map(|(n, v)| (*n, v.as_bytes())));
            if !keep_alive {
                hs.push(("connection", b"close"));
            }
            if status == 204 || status == 304 {
                // No body and no Content-Length for these (RFC 9110 §8.6).
                out.extend_from_slice(
                    format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status)).as_bytes(),
                );
                for (n, v) in &hs {
                    write_header(out, n, v);
                }
                out.extend_from_slice(b"\r\n");
            } else {
                hs.push(("content-type", b"application/json"));
                write_response(out, status, &hs, body.as_bytes());
                if is_head {
                    out.truncate(out.len() - body.len());
                }
            }
            stream.write_all(out)?;
            Ok(true)
        }
        Reply::Stream { chunks, delay } => {
            let chunked = req.head.version() == Version::Http11;
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            write_header(out, "x-upstream", name);
            write_header(out, "content-type", b"application/x-ndjson");
            if chunked {
                write_header(out, "transfer-encoding", b"chunked");
            }
            if !keep_alive || !chunked {
                write_header(out, "connection", b"close");
            }
            out.extend_from_slice(b"\r\n");
            stream.write_all(out)?;
            if is_head {
                return Ok(chunked);
            }
            for i in 0..chunks {
                if i > 0 {
                    sleep_unless_stopped(delay, shared);
                }
                if shared.stopping() {
                    return Ok(false);
                }
                out.clear();
                let line = format!("{{\"chunk\":{i}}}\n");
                if chunked {
                    encode_chunk(line.as_bytes(), out);
                } else {
                    out.extend_from_slice(line.as_bytes());
                }
                stream.write_all(out)?;
            }
            if chunked {
                stream.write_all(LAST_CHUNK)?;
            }
            Ok(chunked)
        }
        Reply::Truncated { chunked } => {
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            write_header(out, "x-upstream", name);
            if chunked {
                write_header(out, "transfer-encoding", b"chunked");
                out.extend_from_slice(b"\r\n");
                encode_chunk(b"truncated-", out);
            } else {
                write_header(out, "content-length", b"100");
                out.extend_from_slice(b"\r\ntruncated-");
            }
            stream.write_all(out)?;
            stream.flush()?;
            let _ = stream.shutdown(Shutdown::Both);
            Ok(false)
        }
    }
}
