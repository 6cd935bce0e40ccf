//! The admin listener (`server.admin`): a small blocking HTTP/1.1 server on its own thread
//! that hands every request to [`Engine::admin`] and writes the answer.
//!
//! Admin traffic is rare and must never compete with the workers' rings, so it gets a plain
//! std thread; each exchange is one request per connection (`connection: close`) under short
//! socket timeouts, so a stuck admin client cannot hold it for long.

use core::net::SocketAddr;
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use weir_http::{self as http, Limits, Parsed, Persistence};
use weir_policy::{Engine, HeaderText, Outcome};

const ADMIN_IO_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_ADMIN_BODY: u64 = 1 << 20;

/// Binds `addr` and serves the admin API on a new thread; returns the bound address.
pub(crate) fn spawn(engine: Engine, addr: SocketAddr) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    thread::Builder::new()
        .name("weir-admin".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(s) => {
                        let engine = engine.clone();
                        // One short-lived thread per admin connection: admin calls may be slow
                        // (a reload reads a file) and must not queue behind each other.
                        let _ = thread::Builder::new().name("weir-admin-conn".into()).spawn(
                            move || {
                                let _ = serve(&engine, s);
                            },
                        );
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        })?;
    Ok(bound)
}

fn serve(engine: &Engine, mut s: TcpStream) -> io::Result<()> {
    s.set_read_timeout(Some(ADMIN_IO_TIMEOUT))?;
    s.set_write_timeout(Some(ADMIN_IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let limits = Limits::default();
    let (head, len) = loop {
        match http::parse_request(&buf, &limits) {
            Ok(Parsed::Complete(head, len)) => break (head, len),
            Ok(Parsed::Partial) => {
                let n = s.read(&mut chunk)?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) => {
                let resp = engine.reject_malformed(Outcome::malformed(e.reason()), None);
                return write(&mut s, resp.status, &resp.headers, &resp.body, false);
            }
        }
    };
    // Read a small body (`POST /admin/rollback` carries `{"revision": N}`, `POST
    // /admin/quota/adjust` JSON; anything else is drained so the client sees a clean close).
    let mut body = buf[len..].to_vec();
    if let http::BodyFraming::ContentLength(n) = head.framing() {
        let want = n.min(MAX_ADMIN_BODY) as usize;
        while body.len() < want {
            let k = s.read(&mut chunk)?;
            if k == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..k]);
        }
        body.truncate(want);
    } else {
        body.clear();
    }
    // Only the credential is handed over (admin_token_env); it is never logged.
    let auth: Vec<(String, String)> = head
        .headers()
        .get("authorization")
        .map(|v| {
            (
                "authorization".to_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .into_iter()
        .collect();
    let resp = engine.admin_request(head.method(), head.target(), &auth, &body);
    // The engine re-attaches its store on reload itself; it only reports what it did.
    for n in engine.take_notices() {
        weir_cli::say(format_args!("weir-gateway: {n}"));
    }
    write(
        &mut s,
        resp.status,
        &resp.headers,
        &resp.body,
        head.is_head(),
    )
}

fn write(
    s: &mut TcpStream,
    status: u16,
    headers: &[(&'static str, HeaderText)],
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(256 + body.len());
    http::write_response_with(
        &mut out,
        status,
        headers,
        Persistence::Close,
        body,
        head_only,
    );
    s.write_all(&out)?;
    s.flush()
}
