//! The scenarios. Each takes the binary under test, starts what it needs and panics on a
//! contract violation. Time bounds are generous where the machine is shared, tight where the
//! contract promises a bound (the total budget).

use core::net::SocketAddr;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::path::Path;
use std::thread;
use std::time::Instant;

use weir_demo::DemoUpstream;

use crate::client::{self, Client, request};
use crate::harness::{Gateway, dead_addr};
use crate::upstreams::RawUpstream;

static KEYS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        KEYS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A config with the given upstreams (name, address) and route tables.
pub fn config(upstreams: &[(&str, SocketAddr)], routes: &str) -> String {
    config_with(upstreams, routes, "")
}

/// [`config`] with extra `[server]` lines.
pub fn config_with(upstreams: &[(&str, SocketAddr)], routes: &str, server: &str) -> String {
    let mut s = format!("[server]\nlisten = \"127.0.0.1:8080\"\ninstance = \"e2e\"\n{server}\n");
    for (name, addr) in upstreams {
        s.push_str(&format!(
            "[[upstreams]]\nname = \"{name}\"\nendpoints = [\"{addr}\"]\nconnect_timeout_ms = 200\n\n"
        ));
    }
    s.push_str(routes);
    s
}

pub(crate) fn demo(name: &str) -> DemoUpstream {
    DemoUpstream::start(name, "127.0.0.1:0").expect("demo upstream")
}

/// A gateway on `routes` with one demo upstream, named `name` in the config.
fn with_demo(bin: &Path, name: &str, routes: &str) -> (DemoUpstream, Gateway) {
    let up = demo(name);
    let gw = Gateway::start(bin, &config(&[(name, up.addr())], routes));
    (up, gw)
}

pub(crate) fn route(id: &str, prefix: &str, upstream: &str) -> String {
    format!(
        "[[routes]]\nid = \"{id}\"\nmatch = {{ path_prefix = \"{prefix}\" }}\nupstream = \"{upstream}\"\n\n"
    )
}

/// `GET path` (no headers) is answered by the gateway itself with `status` and `reason`.
fn get_made(gw: &Gateway, path: &str, status: u16, reason: &str) {
    assert_gateway_made(&client::get(gw.addr, path, &[]), status, reason);
}

pub(crate) fn assert_gateway_made(r: &client::Resp, status: u16, reason: &str) {
    assert_eq!(r.status, status, "status; response {r:?}");
    assert_eq!(r.reason(), reason, "x-weir-reason; response {r:?}");
    assert!(
        r.header("x-request-id").is_some_and(|v| !v.is_empty()),
        "x-request-id: {r:?}"
    );
    assert_eq!(
        r.header("x-weir-instance"),
        Some("e2e"),
        "x-weir-instance: {r:?}"
    );
    assert!(
        r.text().contains(&format!("\"error\":\"{reason}\""))
            || r.text().contains(&format!("\"error\": \"{reason}\"")),
        "JSON body names the reason: {}",
        r.text()
    );
}

/// A path no route matches is 404 `no_route` with the standard headers.
pub fn no_route_is_404(bin: &Path) {
    let (_blue, gw) = with_demo(bin, "blue", &route("ok", "/ok", "blue"));
    get_made(&gw, "/nowhere", 404, "no_route");
    // The main port never serves admin paths: they are routed like any other path.
    get_made(&gw, "/metrics", 404, "no_route");
}

/// Two per minute: 200, 200, then 429 with Retry-After and the RateLimit fields (T = Retry-After).
pub fn rate_limit_429_with_headers(bin: &Path) {
    let routes = format!(
        "{}[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nper = \"60s\"\nburst = 2\nkey = [\"route\"]\n\n",
        route("ok", "/ok", "blue")
    );
    let (_blue, gw) = with_demo(bin, "blue", &routes);
    for i in 0..2 {
        let r = client::get(gw.addr, "/ok", &[]);
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert_eq!(r.header("x-weir-attempts"), Some("1"));
        assert_eq!(
            r.header("ratelimit-policy"),
            Some("\"ok\";q=2;w=60"),
            "{r:?}"
        );
        assert!(
            r.header("ratelimit")
                .is_some_and(|v| v.starts_with(&format!("\"ok\";r={};t=", 1 - i))),
            "{r:?}"
        );
    }
    let r = client::get(gw.addr, "/ok", &[]);
    assert_gateway_made(&r, 429, "rate_limited");
    let ra: u64 = r
        .header("retry-after")
        .expect("retry-after")
        .parse()
        .expect("integer");
    assert!((1..=60).contains(&ra), "retry-after {ra}");
    assert_eq!(r.header("ratelimit-policy"), Some("\"ok\";q=2;w=60"));
    assert_eq!(
        r.header("ratelimit"),
        Some(format!("\"ok\";r=0;t={ra}").as_str())
    );
}

fn flaky_routes() -> String {
    format!(
        "{}[routes.retry]\nmax_attempts = 3\non = [\"connect_failure\", \"reset\", \"503\"]\nidempotency_header = \"idempotency-key\"\nmethods = [\"GET\"]\nbackoff = {{ base = \"10ms\", max = \"50ms\", jitter = \"full\" }}\n\n{}",
        route("flaky", "/flaky", "blue"),
        route("orders", "/orders", "blue"),
    )
}

/// The first attempt of a key gets 503 from the upstream; the gateway retries: 200, 2 attempts.
pub fn flaky_retried_with_idempotency_key(bin: &Path) {
    let (_blue, gw) = with_demo(bin, "blue", &flaky_routes());
    let key = unique("k");
    let r = client::get(gw.addr, "/flaky", &[&format!("idempotency-key: {key}")]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("2"), "{r:?}");
}

/// A POST without an idempotency key is never retried: the upstream's 503 passes through.
pub fn post_without_key_not_retried(bin: &Path) {
    let (_blue, gw) = with_demo(bin, "blue", &flaky_routes());
    let mut c = Client::connect(gw.addr).unwrap();
    let mut post = |path: &str, body: &[u8]| {
        let req = request("POST", path, &[], Some(body));
        c.exchange(req.as_bytes(), false).unwrap()
    };
    let r = post("/flaky", b"{}");
    assert_eq!(r.status, 503, "upstream 503 kept: {r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("1"), "{r:?}");
    let r = post("/orders", b"{\"n\":1}");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("1"), "{r:?}");
}

/// Upstream answers after 350 ms; per-try 200 ms, total 500 ms: 504 before ~600 ms.
pub fn slow_upstream_504_within_total_budget(bin: &Path) {
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"500ms\"\nper_try = \"200ms\"\n\n[routes.retry]\nmax_attempts = 3\non = [\"per_try_timeout\"]\nbackoff = {{ base = \"25ms\", max = \"50ms\", jitter = \"full\" }}\n\n",
        route("slow", "/slow", "green")
    );
    let (_green, gw) = with_demo(bin, "green", &routes);
    let t = Instant::now();
    let r = client::get(gw.addr, "/slow", &[]);
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        r.reason() == "deadline_exceeded" || r.reason() == "per_try_timeout",
        "reason {r:?}"
    );
    assert!(took >= Duration::from_millis(190), "took {took:?}");
    assert!(
        took < Duration::from_millis(650),
        "took {took:?}: total budget is 500 ms"
    );
}

fn echo_gateway(bin: &Path, server: &str) -> (RawUpstream, Gateway) {
    let up = RawUpstream::echo();
    let gw = Gateway::start(
        bin,
        &config_with(&[("echo", up.addr)], &route("all", "/", "echo"), server),
    );
    (up, gw)
}

/// A client on `gw` that has sent the head of a chunked `POST /up` (the body follows).
fn chunked_post(gw: &Gateway) -> Client {
    let mut c = Client::connect(gw.addr).unwrap();
    c.send_raw(b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n")
        .unwrap();
    c
}

fn expect_rejected_and_closed(gw: &Gateway, bytes: &[u8], status: u16, reason: &str) {
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c
        .exchange(bytes, false)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(bytes)));
    assert_gateway_made(&r, status, reason);
    assert!(
        c.is_closed(Duration::from_secs(2)),
        "connection closed after {status}"
    );
}

/// Bytes that are not HTTP: 400 `bad_request`, connection closed.
pub fn garbage_is_400_and_close(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    expect_rejected_and_closed(
        &gw,
        b"\x16\x03\x01garbage garbage\r\n\r\n",
        400,
        "bad_request",
    );
    expect_rejected_and_closed(&gw, b"GET /\r\n\r\n", 400, "bad_request");
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n",
        400,
        "bad_request",
    );
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/1.1\r\nhost: x\r\nname : v\r\n\r\n",
        400,
        "bad_request",
    );
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/1.1\r\nhost: x\r\nx: a\0b\r\n\r\n",
        400,
        "bad_request",
    );
    assert_eq!(up.requests(), 0, "nothing malformed reaches the upstream");
}

/// Request smuggling shapes are 400 and never forwarded (the upstream sees no byte).
pub fn content_length_with_transfer_encoding_never_forwarded(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    expect_rejected_and_closed(
        &gw,
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        400,
        "bad_request",
    );
    expect_rejected_and_closed(
        &gw,
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!",
        400,
        "bad_request",
    );
    expect_rejected_and_closed(
        &gw,
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n",
        400,
        "bad_request",
    );
    // Invalid chunk framing found before anything was forwarded.
    expect_rejected_and_closed(
        &gw,
        b"POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        400,
        "bad_request",
    );
    thread::sleep(Duration::from_millis(100));
    assert_eq!(up.requests(), 0, "no request reached the upstream");
    assert_eq!(
        up.bytes.load(Ordering::Relaxed),
        0,
        "no byte reached the upstream"
    );
}

/// An obs-fold continuation line is 400.
pub fn obs_fold_is_400(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/1.1\r\nhost: x\r\nx-a: one\r\n two\r\n\r\n",
        400,
        "bad_request",
    );
    assert_eq!(up.requests(), 0);
}

/// A 64 KiB header is 431; a 9 KiB request line is 414.
pub fn huge_headers_431_and_long_uri_414(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    let big = format!(
        "GET / HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    expect_rejected_and_closed(&gw, big.as_bytes(), 431, "headers_too_large");
    let long = format!("GET /{} HTTP/1.1\r\nhost: x\r\n\r\n", "u".repeat(9 * 1024));
    expect_rejected_and_closed(&gw, long.as_bytes(), 414, "uri_too_long");
    assert_eq!(up.requests(), 0);
}

/// HTTP/2.0 (or 3.0) on the HTTP/1 port: 505.
pub fn other_http_version_505(bin: &Path) {
    let (_up, gw) = echo_gateway(bin, "");
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/2.0\r\nhost: x\r\n\r\n",
        505,
        "http_version_not_supported",
    );
}

/// A head not complete within `header_timeout`: 408 `client_timeout` and close.
pub fn slow_client_head_408(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "header_timeout = \"300ms\"");
    let mut c = Client::connect(gw.addr).unwrap();
    let t = Instant::now();
    c.send_raw(b"GET / HTTP/1.1\r\nhost: x\r\n").unwrap();
    let r = c.read_response(false).expect("408 response");
    assert_gateway_made(&r, 408, "client_timeout");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t.elapsed()
    );
    assert!(c.is_closed(Duration::from_secs(2)));
    assert_eq!(up.requests(), 0);
}

/// Three requests on one client connection travel over one upstream connection.
pub fn keep_alive_reuses_client_and_upstream_connections(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    let mut c = Client::connect(gw.addr).unwrap();
    for i in 0..3 {
        let r = c.get(&format!("/k{i}"), &[]).unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        assert!(
            r.text().contains(&format!("\"target\":\"/k{i}\"")),
            "{}",
            r.text()
        );
    }
    assert_eq!(
        up.connections.load(Ordering::Relaxed),
        1,
        "upstream connection reused"
    );
    // HTTP/1.0 without keep-alive: answered, then closed.
    let r = c.exchange(b"GET /k10 HTTP/1.0\r\n\r\n", false).unwrap();
    assert_eq!(r.status, 200);
    assert!(c.is_closed(Duration::from_secs(2)));
}

/// `x-request-id` kept end to end; hop-by-hop headers (and those named in Connection) dropped
/// in both directions.
pub fn request_id_propagated_and_hop_by_hop_removed(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    let r = client::get(
        gw.addr,
        "/rid",
        &[
            "x-request-id: abc-123",
            "connection: keep-alive, x-secret",
            "x-secret: 1",
            "keep-alive: timeout=9",
            "te: trailers",
            "x-kept: yes",
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    assert_eq!(r.header("x-weir-instance"), Some("e2e"));
    assert!(
        r.header("keep-alive").is_none(),
        "upstream keep-alive header dropped: {r:?}"
    );
    let seen = up.seen.lock().unwrap()[0].clone();
    let h = seen.head.headers();
    assert_eq!(h.get("x-request-id"), Some(&b"abc-123"[..]));
    assert_eq!(h.get("x-kept"), Some(&b"yes"[..]));
    assert!(
        h.get("x-secret").is_none() && h.get("keep-alive").is_none() && h.get("te").is_none(),
        "{h:?}"
    );
    // Without one, the gateway generates an id and sends the same one upstream.
    let r = client::get(gw.addr, "/rid2", &[]);
    let id = r.header("x-request-id").expect("generated id").to_owned();
    let seen = up.seen.lock().unwrap()[1].clone();
    assert_eq!(seen.head.header("x-request-id"), Some(id.as_bytes()));
}

/// A 300 KiB chunked upload (beyond any replay buffer) and a small one both arrive whole.
pub fn chunked_upload_streamed_beyond_replay_limit(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    let mut c = chunked_post(&gw);
    let piece = vec![b'z'; 30 * 1024];
    for _ in 0..10 {
        c.send_raw(format!("{:x}\r\n", piece.len()).as_bytes())
            .unwrap();
        c.send_raw(&piece).unwrap();
        c.send_raw(b"\r\n").unwrap();
    }
    c.send_raw(b"0\r\n\r\n").unwrap();
    let r = c.read_response(false).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-echo-body-len"), Some("307200"));
    let r = c.exchange(b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false).unwrap();
    assert_eq!(r.header("x-echo-body-len"), Some("5"), "{r:?}");
    assert_eq!(up.seen.lock().unwrap()[1].body, b"hello");
}

/// A chunked response is forwarded as it arrives: the head reaches the client before the
/// upstream sends its last chunk.
pub fn chunked_download_streamed(bin: &Path) {
    let up = RawUpstream::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n");
        thread::sleep(Duration::from_millis(400));
        let _ = s.write_all(b"6\r\nsecond\r\n0\r\n\r\n");
        true
    });
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &route("all", "/", "up")));
    let t = Instant::now();
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c.get("/stream", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "firstsecond");
    assert!(!r.truncated);
    assert!(
        r.head_at.duration_since(t) < Duration::from_millis(300),
        "head after {:?}",
        r.head_at.duration_since(t)
    );
    assert!(t.elapsed() >= Duration::from_millis(400));
    // The connection stays usable.
    let r = c.get("/stream", &[]).unwrap();
    assert_eq!(r.text(), "firstsecond");
}

/// HEAD gets the upstream's headers and no body; the connection stays in sync.
pub fn head_request_has_no_body(bin: &Path) {
    let up = RawUpstream::start(|seen, s| {
        let body: &[u8] = if seen.head.method() == "HEAD" {
            b""
        } else {
            b"hello"
        };
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
        s.write_all(head).is_ok() && s.write_all(body).is_ok()
    });
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &route("all", "/", "up")));
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c
        .exchange(b"HEAD /h HTTP/1.1\r\nhost: x\r\n\r\n", true)
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("5"));
    assert!(r.body.is_empty());
    let r = c.get("/g", &[]).unwrap();
    assert_eq!(r.text(), "hello");
}

/// An upstream body cut short after the head was forwarded reaches the client as a cut, and
/// the access log says `upstream_body_truncated`.
pub fn upstream_body_truncated_cuts_client(bin: &Path) {
    let up = RawUpstream::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b");
        false
    });
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &route("all", "/", "up")));
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c.get("/cut", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.truncated, "client sees the cut: {r:?}");
    assert_eq!(r.body, b"only ten b");
    let until = Instant::now() + Duration::from_secs(3);
    while !gw.stdout_text().contains("upstream_body_truncated") {
        assert!(Instant::now() < until, "access log: {}", gw.stdout_text());
        thread::sleep(Duration::from_millis(50));
    }
}

/// An invalid upstream status line: 502 `upstream_unavailable`.
pub fn invalid_upstream_response_502(bin: &Path) {
    let up = RawUpstream::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 abc what\r\n\r\n");
        false
    });
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &route("all", "/", "up")));
    get_made(&gw, "/x", 502, "upstream_unavailable");
}

/// `/metrics` exposes every family (`weir_policy::FAMILIES`) from start-up; `/healthz`, `/admin/config`; 404 elsewhere.
pub fn admin_metrics_healthz_config(bin: &Path) {
    let (_blue, gw) = with_demo(bin, "blue", &route("ok", "/ok", "blue"));
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    let m = gw.admin("GET", "/metrics");
    assert_eq!(m.status, 200);
    let text = m.text();
    for family in weir_policy::FAMILIES {
        let family_typed = text.lines().any(|l| {
            l.starts_with("# TYPE ")
                && (l[7..].starts_with(&format!("{family} "))
                    || l[7..].starts_with(&format!("{} ", family.trim_end_matches("_total"))))
        });
        assert!(family_typed, "# TYPE line for {family} in:\n{text}");
    }
    assert!(
        text.contains("weir_requests_total{") && text.contains("proxied"),
        "{text}"
    );
    assert_eq!(gw.admin("GET", "/healthz").status, 200);
    let cfg = gw.admin("GET", "/admin/config");
    assert_eq!(cfg.status, 200);
    assert!(cfg.text().contains("\"revision\""), "{}", cfg.text());
    assert_eq!(gw.admin("GET", "/admin/nope").status, 404);
    assert_eq!(gw.admin("GET", "/admin/reload").status, 405);
    let b = gw.admin("GET", "/admin/breakers");
    assert_eq!(b.status, 200);
    assert!(b.text().contains("\"breakers\""), "{}", b.text());
}

/// A bad file on reload: 400 and the old config keeps serving; a good one: 200, new revision.
pub fn admin_reload_bad_then_good(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    let gw = Gateway::start(bin, &config(&ups, &route("ok", "/ok", "blue")));
    std::fs::write(&gw.config_path, "[server]\nlisten = 42\nbogus = true\n").unwrap();
    let r = gw.admin("POST", "/admin/reload");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("\"error\""), "{}", r.text());
    assert_eq!(
        client::get(gw.addr, "/ok", &[]).status,
        200,
        "old config keeps serving"
    );
    let routes = format!(
        "{}{}",
        route("ok", "/ok", "blue"),
        route("new", "/stats", "blue")
    );
    std::fs::write(&gw.config_path, config(&ups, &routes)).unwrap();
    let r = gw.admin("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.text().contains("\"revision\""), "{}", r.text());
    let r = client::get(gw.addr, "/stats", &[]);
    assert_ne!(r.reason(), "no_route", "new route serves: {r:?}");
}

/// A dead upstream: connect failures open the breaker; the fallback answers both
/// `upstream_unavailable` and `circuit_open`, marked `x-weir-degraded`.
pub fn breaker_opens_then_fallback(bin: &Path) {
    let routes = format!(
        "{}[routes.breaker]\nfailure_on = [\"5xx\", \"connect_failure\", \"timeout\"]\nconsecutive_failures = 2\ncooldown = {{ base = \"30s\", max = \"60s\" }}\n\n[routes.fallback]\nstatus = 200\ncontent_type = \"application/json\"\nbody = '{{\"degraded\":true}}'\n\n{}[routes.breaker]\nfailure_on = [\"connect_failure\"]\nconsecutive_failures = 1\ncooldown = {{ base = \"30s\", max = \"60s\" }}\n\n",
        route("dead", "/dead", "dead"),
        route("plain", "/plain", "dead"),
    );
    let gw = Gateway::start(bin, &config(&[("dead", dead_addr())], &routes));
    let reasons = degraded_reasons(&gw, "/dead", 4);
    assert_eq!(reasons[0], "upstream_unavailable", "{reasons:?}");
    assert_eq!(reasons[3], "circuit_open", "{reasons:?}");
    let b = gw.admin("GET", "/admin/breakers").text();
    assert!(b.contains("\"open\""), "{b}");
    // Without a fallback: 502 first, then 503 circuit_open.
    get_made(&gw, "/plain", 502, "upstream_unavailable");
    get_made(&gw, "/plain", 503, "circuit_open");
}

/// SIGINT while a request is in flight: it completes, new connections are refused, exit 0.
pub fn sigint_drains_in_flight_and_exits_0(bin: &Path) {
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"3s\"\n\n",
        route("slow", "/slow", "green")
    );
    let (_green, mut gw) = with_demo(bin, "green", &routes);
    let addr = gw.addr;
    let inflight = thread::spawn(move || client::get(addr, "/slow", &[]));
    // An idle keep-alive connection must not hold the drain up.
    let mut idle = Client::connect(addr).unwrap();
    assert_eq!(idle.get("/slow", &[]).unwrap().status, 200);
    let inflight2 = thread::spawn(move || client::get(addr, "/slow", &[]));
    thread::sleep(Duration::from_millis(100));
    gw.signal("INT");
    let r = inflight2.join().expect("in-flight request");
    assert_eq!(r.status, 200, "in-flight request completed: {r:?}");
    let _ = inflight.join();
    let st = gw
        .wait_exit(Duration::from_secs(10))
        .expect("exited after drain");
    assert!(
        st.success(),
        "exit status {st}; stderr:\n{}",
        gw.stderr_text()
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no longer accepting"
    );
    let mut b = [0u8; 1];
    assert!(matches!(idle.stream().read(&mut b), Ok(0) | Err(_)));
}

/// The value of one metric series (`name{labels}` exactly as exposed), if present.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The `/metrics` text once every `(series, value)` in `want` reads as given, or after 3 s
/// (the caller's assertions then say what differs). Requests are counted when they are
/// complete — in Pingora's logging phase, after the response went out — so a scrape right
/// after a response may precede its count.
/// `n` GETs of `path`, each answered by the JSON fallback `{"degraded":true}` with 200; the
/// `x-weir-degraded` reason of each.
fn degraded_reasons(gw: &Gateway, path: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let r = client::get(gw.addr, path, &[]);
            assert_eq!(r.status, 200, "fallback status #{i}: {r:?}");
            assert_eq!(r.text(), "{\"degraded\":true}");
            r.header("x-weir-degraded").unwrap_or("").to_owned()
        })
        .collect()
}

pub(crate) fn metrics_when(gw: &Gateway, want: &[(&str, f64)]) -> String {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let text = gw.admin("GET", "/metrics").text();
        if want.iter().all(|&(s, v)| metric(&text, s) == Some(v)) || Instant::now() >= until {
            return text;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to 3 s for the access log (stdout or a file) to contain `needle`.
pub(crate) fn wait_for_log(read: impl Fn() -> String, needle: &str) -> String {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let text = read();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < until,
            "access log lacks {needle:?} after 3 s:\n{text}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn token_bucket(rate: u32, per: &str, burst: u32, extra: &str) -> String {
    format!(
        "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = {rate}\nper = \"{per}\"\nburst = {burst}\nkey = [\"route\"]\n{extra}\n"
    )
}

/// Route `id` on `/ok` to `blue`, limited to `n` per minute (burst `n`) plus `extra` keys.
fn limited_route(id: &str, n: u32, extra: &str) -> String {
    format!(
        "{}{}",
        route(id, "/ok", "blue"),
        token_bucket(n, "60s", n, extra)
    )
}

/// Seed 000: two instances with a *local* limit of 2 per minute admit 4 between them
/// (replicas multiply local limits); the upstream saw 4.
pub fn two_instances_local_limits_multiply(bin: &Path) {
    let blue = demo("blue");
    let routes = limited_route("ok", 2, "");
    let cfg = config(&[("blue", blue.addr())], &routes);
    let (a, b) = (Gateway::start(bin, &cfg), Gateway::start(bin, &cfg));
    let statuses: Vec<u16> = (0..6usize)
        .map(|i| {
            client::get(
                if i.is_multiple_of(2) { a.addr } else { b.addr },
                "/ok",
                &[],
            )
            .status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429], "alternating A, B");
    assert_eq!(blue.stats().path("/ok"), 4, "upstream saw 4");
}

/// Seeds 000/002 with a real Redis: two instances on one *global* bucket of 2 per minute
/// admit 2 in total whichever is hit; with Redis stopped a `deny` route answers 503
/// `ratelimit_store_unavailable` without an upstream attempt and an `allow` route proxies
/// marked `x-weir-ratelimit: bypassed`; after Redis restarts on the same port, both
/// recover without a gateway restart. Skips when `redis-server` is missing (unless
/// `WEIR_REQUIRE_REDIS=1`).
pub fn global_limit_shared_and_store_failure_explicit(bin: &Path) {
    let Some(mut redis) = crate::redis::RedisServer::start("global_limit") else {
        return;
    };
    let blue = demo("blue");
    let routes = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout_ms = 250\nlease = 0\n\n{}{}{}{}",
        redis.url(),
        route("deny", "/ok", "blue"),
        token_bucket(2, "60s", 2, "scope = \"global\"\non_store_error = \"deny\""),
        route("allow", "/echo", "blue"),
        token_bucket(
            2,
            "60s",
            2,
            "scope = \"global\"\non_store_error = \"allow\""
        ),
    );
    let cfg = config(&[("blue", blue.addr())], &routes);
    let (a, b) = (Gateway::start(bin, &cfg), Gateway::start(bin, &cfg));
    let pick = |i: usize| if i.is_multiple_of(2) { a.addr } else { b.addr };

    // One bucket for both instances: 2 admitted in total, in either order.
    let got: Vec<client::Resp> = (0..4).map(|i| client::get(pick(i), "/ok", &[])).collect();
    let statuses: Vec<u16> = got.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 429, 429], "{got:?}");
    assert_gateway_made(&got[2], 429, "rate_limited");
    assert_eq!(blue.stats().path("/ok"), 2, "upstream saw 2");
    let r = client::get(b.addr, "/ok", &[]);
    assert_eq!(r.status, 429, "B after A's admissions: {r:?}");

    // Store down: deny → 503 without an upstream attempt; allow → proxied, marked, counted.
    redis.stop();
    let before = blue.stats().path("/ok");
    for gw in [&a, &b] {
        let r = client::get(gw.addr, "/ok", &[]);
        assert_gateway_made(&r, 503, "ratelimit_store_unavailable");
        let r = client::get(gw.addr, "/echo", &[]);
        assert_eq!(r.status, 200, "fail-open route proxies: {r:?}");
        assert_eq!(r.header("x-weir-ratelimit"), Some("bypassed"), "{r:?}");
    }
    assert_eq!(
        blue.stats().path("/ok"),
        before,
        "no upstream attempt while the store is down"
    );
    let m = metrics_when(
        &a,
        &[
            ("weir_ratelimit_bypassed_total{route=\"allow\"}", 1.0),
            (
                "weir_requests_total{route=\"deny\",outcome=\"ratelimit_store_unavailable\"}",
                1.0,
            ),
        ],
    );
    assert_eq!(
        metric(&m, "weir_ratelimit_bypassed_total{route=\"allow\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "weir_requests_total{route=\"deny\",outcome=\"ratelimit_store_unavailable\"}"
        ),
        Some(1.0),
        "{m}"
    );

    // Store back (empty: nothing is persisted): limiting resumes, no gateway restart.
    redis.restart();
    // The first answer of `gw` that is not a 503, within 10 s.
    let recovered = |gw: &Gateway, name: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let r = client::get(gw.addr, "/ok", &[]);
            if r.status != 503 {
                break r;
            }
            assert!(Instant::now() < until, "{name} never recovered: {r:?}");
            thread::sleep(Duration::from_millis(100));
        }
    };
    let first = recovered(&a, "A");
    assert_eq!(first.status, 200, "{first:?}");
    let second = recovered(&b, "B");
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(
        client::get(a.addr, "/ok", &[]).status,
        429,
        "one bucket again"
    );
    let r = client::get(b.addr, "/echo", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-weir-ratelimit"),
        None,
        "no longer bypassed: {r:?}"
    );
}

/// A leaky bucket (nginx `limit_req` semantics: rate 10/s, burst 5, every excess request
/// delayed) shapes a burst of 8: 6 pass, spread ~100 ms apart, 2 get 429 with Retry-After.
pub fn leaky_bucket_shapes_a_burst(bin: &Path) {
    let routes = format!(
        "{}[routes.rate_limit]\nalgorithm = \"leaky_bucket\"\nrate = 10\nper = \"1s\"\nburst = 5\nkey = [\"route\"]\n\n",
        route("shaped", "/ok", "blue")
    );
    let (blue, gw) = with_demo(bin, "blue", &routes);
    let addr = gw.addr;
    // Connect first, then fire all heads together.
    let clients: Vec<Client> = (0..8).map(|_| Client::connect(addr).unwrap()).collect();
    let go = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            let go = go.clone();
            thread::spawn(move || {
                go.wait();
                let t = Instant::now();
                let r = c.get("/ok", &[]).expect("response");
                (r, t.elapsed())
            })
        })
        .collect();
    let mut results: Vec<(client::Resp, Duration)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    results.sort_by_key(|(_, d)| *d);
    let passed: Vec<Duration> = results
        .iter()
        .filter(|(r, _)| r.status == 200)
        .map(|(_, d)| *d)
        .collect();
    let rejected: Vec<&client::Resp> = results
        .iter()
        .filter(|(r, _)| r.status == 429)
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        (passed.len(), rejected.len()),
        (6, 2),
        "statuses: {:?}",
        results
            .iter()
            .map(|(r, d)| (r.status, *d))
            .collect::<Vec<_>>()
    );
    for r in &rejected {
        assert_gateway_made(r, 429, "rate_limited");
        let ra: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .unwrap();
        assert!(ra >= 1, "{r:?}");
    }
    // The 6th admitted request waited for 5 emission intervals (500 ms); none was cut short.
    assert!(passed[0] < Duration::from_millis(300), "first: {passed:?}");
    assert!(
        passed[5] >= Duration::from_millis(400),
        "the burst was shaped: {passed:?}"
    );
    assert_eq!(blue.stats().path("/ok"), 6);
}

fn slow_raw_upstream(ms: u64) -> RawUpstream {
    RawUpstream::start(move |_, s| {
        thread::sleep(Duration::from_millis(ms));
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .is_ok()
    })
}

/// Concurrency 1 with a queue of 1: a queued request proceeds when the permit frees; a
/// third finds the queue full (503 `concurrency_limited`); a queue wait longer than
/// `queue_timeout` is 503 `queue_timeout`.
pub fn concurrency_queue_full_timeout_and_proceed(bin: &Path) {
    let up = slow_raw_upstream(600);
    let routes = format!(
        "{}[routes.concurrency]\nmax = 1\nqueue = 1\nqueue_timeout = \"5s\"\n\n{}[routes.concurrency]\nmax = 1\nqueue = 1\nqueue_timeout = \"150ms\"\n\n",
        route("q", "/q", "up"),
        route("qt", "/t", "up"),
    );
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &routes));
    let addr = gw.addr;
    let timed = move |path: &'static str| {
        thread::spawn(move || {
            let t = Instant::now();
            let r = client::get(addr, path, &[]);
            (r, t.elapsed())
        })
    };
    let first = timed("/q");
    thread::sleep(Duration::from_millis(150));
    let queued = timed("/q");
    thread::sleep(Duration::from_millis(150));
    let (full, full_took) = timed("/q").join().unwrap();
    assert_gateway_made(&full, 503, "concurrency_limited");
    assert!(
        full_took < Duration::from_millis(400),
        "at once: {full_took:?}"
    );
    let (r1, _) = first.join().unwrap();
    assert_eq!(r1.status, 200, "{r1:?}");
    let (r2, took2) = queued.join().unwrap();
    assert_eq!(r2.status, 200, "queued request proceeds: {r2:?}");
    assert!(
        took2 >= Duration::from_millis(700),
        "it waited for the permit: {took2:?}"
    );

    let holder = timed("/t");
    thread::sleep(Duration::from_millis(150));
    let (r, took) = timed("/t").join().unwrap();
    assert_gateway_made(&r, 503, "queue_timeout");
    assert!(
        took >= Duration::from_millis(120) && took < Duration::from_millis(550),
        "queue_timeout 150 ms: {took:?}"
    );
    assert_eq!(holder.join().unwrap().0.status, 200);
    let m = metrics_when(
        &gw,
        &[
            (
                "weir_requests_total{route=\"q\",outcome=\"concurrency_limited\"}",
                1.0,
            ),
            (
                "weir_requests_total{route=\"qt\",outcome=\"queue_timeout\"}",
                1.0,
            ),
        ],
    );
    assert_eq!(
        metric(
            &m,
            "weir_requests_total{route=\"q\",outcome=\"concurrency_limited\"}"
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "weir_requests_total{route=\"qt\",outcome=\"queue_timeout\"}"
        ),
        Some(1.0),
        "{m}"
    );
}

/// Shadow mode never rejects: would-be rejections are counted in
/// `weir_shadow_rejections_total` and logged with `"shadow"`.
pub fn shadow_mode_counts_but_never_rejects(bin: &Path) {
    let routes = limited_route("sh", 1, "mode = \"shadow\"");
    let (blue, gw) = with_demo(bin, "blue", &routes);
    for i in 0..3 {
        let r = client::get(gw.addr, "/ok", &[]);
        assert_eq!(r.status, 200, "request {i} passes in shadow mode: {r:?}");
    }
    assert_eq!(blue.stats().path("/ok"), 3);
    let m = metrics_when(&gw, &[("weir_shadow_rejections_total{route=\"sh\"}", 2.0)]);
    assert_eq!(
        metric(&m, "weir_shadow_rejections_total{route=\"sh\"}"),
        Some(2.0),
        "{m}"
    );
    let log = wait_for_log(|| gw.stdout_text(), "\"shadow\"");
    assert!(log.contains("\"shadow\":\"rate_limited\""), "{log}");
}

/// A missing key part is 403 `empty_key` (an empty header value counts as missing); a key
/// part longer than `max_key_bytes` is 400 `key_too_long`. Neither reaches the upstream.
pub fn empty_key_403_and_key_too_long_400(bin: &Path) {
    let routes = format!(
        "{}[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 100\nper = \"1s\"\nburst = 100\nkey = [\"route\", \"header:x-consumer-id\"]\ndeny_empty_key = true\nmax_key_bytes = 16\n\n",
        route("keyed", "/ok", "blue")
    );
    let (blue, gw) = with_demo(bin, "blue", &routes);
    assert_gateway_made(&client::get(gw.addr, "/ok", &[]), 403, "empty_key");
    assert_gateway_made(
        &client::get(gw.addr, "/ok", &["x-consumer-id: "]),
        403,
        "empty_key",
    );
    assert_gateway_made(
        &client::get(
            gw.addr,
            "/ok",
            &[&format!("x-consumer-id: {}", "a".repeat(40))],
        ),
        400,
        "key_too_long",
    );
    assert_eq!(blue.stats().path("/ok"), 0);
    let r = client::get(gw.addr, "/ok", &["x-consumer-id: alice"]);
    assert_eq!(r.status, 200, "{r:?}");
}

/// `[log] access = PATH`: one JSON line per request with the contract's fields, written
/// within a second; never the Authorization header, cookies, the raw key or the query string.
pub fn access_log_fields_and_redaction(bin: &Path) {
    let dir = crate::harness::scratch_dir();
    let log_path = dir.path().join("access.log");
    let routes = format!(
        "{}[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 100\nper = \"1s\"\nburst = 100\nkey = [\"route\", \"header:x-consumer-id\"]\n\n[log]\naccess = {:?}\n",
        route("ok", "/ok", "blue"),
        log_path.display().to_string()
    );
    let (_blue, gw) = with_demo(bin, "blue", &routes);
    let r = client::get(
        gw.addr,
        "/ok?token=s3cr3t-query",
        &[
            "authorization: Bearer s3cr3t-bearer",
            "cookie: session=s3cr3t-cookie",
            "x-consumer-id: s3cr3t-consumer",
            "x-request-id: log-rid-1",
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let t = Instant::now();
    let text = wait_for_log(
        || std::fs::read_to_string(&log_path).unwrap_or_default(),
        "log-rid-1",
    );
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    let line = text
        .lines()
        .find(|l| l.contains("log-rid-1"))
        .expect("record");
    assert!(
        line.starts_with('{') && line.ends_with('}'),
        "one JSON object: {line}"
    );
    for field in [
        "\"ts\":",
        "\"request_id\":\"log-rid-1\"",
        "\"instance\":\"e2e\"",
        "\"route\":\"ok\"",
        "\"method\":\"GET\"",
        "\"path\":\"/ok\"",
        "\"status\":200",
        "\"reason\":",
        "\"key_digest\":\"",
        "\"scope\":\"local\"",
        "\"remaining\":",
        "\"attempts\":[{\"status\":200",
        "\"queue_ms\":",
        "\"duration_ms\":",
        "\"revision\":1",
    ] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert!(
        !text.contains("s3cr3t"),
        "secrets or the raw key leaked: {text}"
    );
    assert!(!text.contains("token="), "query string leaked: {text}");
    drop(gw);
}

/// A reload that leaves a route's limit unchanged keeps its state: an exhausted bucket
/// stays exhausted.
pub fn reload_keeps_limiter_state(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    let limited = limited_route("ok", 2, "");
    let gw = Gateway::start(bin, &config(&ups, &limited));
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    let more = format!("{limited}{}", route("stats", "/stats", "blue"));
    std::fs::write(&gw.config_path, config(&ups, &more)).unwrap();
    let r = gw.admin("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{r:?}");
    get_made(&gw, "/ok", 429, "rate_limited");
    assert_eq!(client::get(gw.addr, "/stats", &[]).status, 200);
}

/// A SIGHUP reload under load keeps the limiter's state: clients hammer an exhausted
/// route while the config (limit unchanged, one route added) is reloaded by signal; every
/// answer is a 200 or a 429 (none lost to the reload), the bucket stays exhausted after it,
/// and the new route serves.
pub fn sighup_reload_under_load_keeps_limiter_state(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    let limited = limited_route("ok", 3, "");
    let gw = Gateway::start(bin, &config(&ups, &limited));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let statuses = std::sync::Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = client::get(gw.addr, "/ok", &[]);
                    statuses.lock().unwrap().push(r.status);
                }
            });
        }
        let until = Instant::now() + Duration::from_secs(5);
        while !statuses.lock().unwrap().contains(&429) {
            assert!(Instant::now() < until, "the bucket never ran out");
            thread::sleep(Duration::from_millis(5));
        }
        let more = format!("{limited}{}", route("stats", "/stats", "blue"));
        std::fs::write(&gw.config_path, config(&ups, &more)).unwrap();
        gw.signal("HUP");
        while !gw.stderr_text().contains("SIGHUP: reloaded, revision 2") {
            assert!(Instant::now() < until, "stderr:\n{}", gw.stderr_text());
            thread::sleep(Duration::from_millis(10));
        }
        // Some requests after the reload, still under load.
        thread::sleep(Duration::from_millis(100));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let statuses = statuses.into_inner().unwrap();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        3,
        "exactly the burst admitted across the reload: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|&s| s == 200 || s == 429),
        "every answer a 200 or a 429: {statuses:?}"
    );
    get_made(&gw, "/ok", 429, "rate_limited");
    assert_eq!(client::get(gw.addr, "/stats", &[]).status, 200);
}

/// Every response through the gateway carries `x-request-id` and `x-weir-instance`:
/// proxied, gateway-made, fallback-free errors, malformed input.
pub fn every_response_has_request_id_and_instance(bin: &Path) {
    let blue = demo("blue");
    let routes = format!(
        "{}{}{}",
        route("ok", "/ok", "blue"),
        token_bucket(1, "60s", 1, ""),
        route("dead", "/dead", "dead")
    );
    let gw = Gateway::start(
        bin,
        &config(&[("blue", blue.addr()), ("dead", dead_addr())], &routes),
    );
    let check = |what: &str, r: &client::Resp| {
        assert!(
            r.header("x-request-id").is_some_and(|v| !v.is_empty()),
            "{what}: x-request-id: {r:?}"
        );
        assert_eq!(r.header("x-weir-instance"), Some("e2e"), "{what}: {r:?}");
    };
    check("proxied", &client::get(gw.addr, "/ok", &[]));
    check("429", &client::get(gw.addr, "/ok", &[]));
    check("404", &client::get(gw.addr, "/none", &[]));
    check("502", &client::get(gw.addr, "/dead", &[]));
    check(
        "400",
        &client::raw(gw.addr, b"GET / HTTP/1.1\r\nbad\r\n\r\n"),
    );
    check(
        "505",
        &client::raw(gw.addr, b"GET / HTTP/3.0\r\nhost: x\r\n\r\n"),
    );
    let r = client::raw(
        gw.addr,
        b"HEAD /ok HTTP/1.1\r\nhost: x\r\nx-request-id: h-1\r\n\r\n",
    );
    check("HEAD 429", &r);
    assert_eq!(r.header("x-request-id"), Some("h-1"));
}

/// Every metric family has its `# TYPE` line from start-up, before any request; after
/// traffic the series carry the route label.
pub fn metrics_families_from_start_up_with_route_labels(bin: &Path) {
    let routes = limited_route("ok", 1, "");
    let (_blue, gw) = with_demo(bin, "blue", &routes);
    let text = gw.admin("GET", "/metrics").text();
    for (family, kind) in [
        ("weir_requests_total", "counter"),
        ("weir_shadow_rejections_total", "counter"),
        ("weir_upstream_attempts_total", "counter"),
        ("weir_retries_total", "counter"),
        ("weir_keys_overflow_total", "counter"),
        ("weir_retry_budget_exhausted_total", "counter"),
        ("weir_breaker_state", "gauge"),
        ("weir_breaker_transitions_total", "counter"),
        ("weir_ratelimit_bypassed_total", "counter"),
        ("weir_inflight", "gauge"),
        ("weir_request_duration_seconds", "histogram"),
    ] {
        assert!(
            text.lines().any(|l| l == format!("# TYPE {family} {kind}")),
            "# TYPE {family} {kind} before any request:\n{text}"
        );
    }
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 429);
    assert_eq!(client::get(gw.addr, "/nope", &[]).status, 404);
    let want = [
        ("weir_requests_total{route=\"ok\",outcome=\"proxied\"}", 1.0),
        (
            "weir_requests_total{route=\"ok\",outcome=\"rate_limited\"}",
            1.0,
        ),
        ("weir_requests_total{route=\"-\",outcome=\"no_route\"}", 1.0),
        (
            "weir_upstream_attempts_total{route=\"ok\",result=\"success\"}",
            1.0,
        ),
        ("weir_inflight{route=\"ok\"}", 0.0),
        ("weir_request_duration_seconds_count{route=\"ok\"}", 2.0),
    ];
    let text = metrics_when(&gw, &want);
    for (series, v) in want {
        assert_eq!(metric(&text, series), Some(v), "{series} in:\n{text}");
    }
}

/// Slowloris: a client trickling one header byte every 50 ms is answered 408 and closed
/// once `header_timeout` has passed since the connection was accepted — each byte does not
/// restart the clock.
pub fn slowloris_trickle_gets_408(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "header_timeout = \"500ms\"");
    let mut c = Client::connect(gw.addr).unwrap();
    let mut w = c.stream().try_clone().unwrap();
    let t = Instant::now();
    let trickle = thread::spawn(move || {
        let head = b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        for b in head {
            if w.write_all(&[*b]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
    });
    let r = c.read_response(false).expect("408 response");
    let took = t.elapsed();
    assert_gateway_made(&r, 408, "client_timeout");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(2000),
        "408 at header_timeout (500 ms), not later: {took:?}"
    );
    assert!(c.is_closed(Duration::from_secs(2)));
    let _ = trickle.join();
    assert_eq!(up.requests(), 0);
}

/// A request without `Host` (HTTP/1.1 or 1.0) is proxied with the upstream's address as
/// Host; two Host headers are 400.
pub fn missing_host_accepted_duplicate_host_400(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    for raw in [
        &b"GET /nohost HTTP/1.1\r\n\r\n"[..],
        &b"GET /nohost10 HTTP/1.0\r\n\r\n"[..],
    ] {
        let r = client::raw(gw.addr, raw);
        assert_eq!(r.status, 200, "{r:?}");
    }
    {
        let seen = up.seen.lock().unwrap();
        for s in seen.iter() {
            assert_eq!(
                s.head.header("host"),
                Some(up.addr.to_string().as_bytes()),
                "{:?}",
                s.head
            );
        }
    }
    let r = client::raw(gw.addr, b"GET /h HTTP/1.1\r\nhost: keep.example\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(
        up.seen.lock().unwrap()[2].head.header("host"),
        Some(&b"keep.example"[..])
    );
    expect_rejected_and_closed(
        &gw,
        b"GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n",
        400,
        "bad_request",
    );
    assert_eq!(up.requests(), 3);
}

/// Invalid chunk framing found after the request was forwarded: 400 to the client, the
/// upstream connection closed without a complete request, and the request counted once,
/// under its route.
pub fn bad_chunk_after_forwarding_counted_once(bin: &Path) {
    let (up, gw) = echo_gateway(bin, "");
    let mut c = chunked_post(&gw);
    // A valid first chunk beyond the replay limit makes the gateway start streaming.
    let piece = vec![b'z'; 70 * 1024];
    c.send_raw(format!("{:x}\r\n", piece.len()).as_bytes())
        .unwrap();
    c.send_raw(&piece).unwrap();
    c.send_raw(b"\r\nzz\r\nbad\r\n0\r\n\r\n").unwrap();
    let r = c.read_response(false).expect("response");
    assert_gateway_made(&r, 400, "bad_request");
    assert!(c.is_closed(Duration::from_secs(2)));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        up.requests(),
        0,
        "the upstream never saw a complete request"
    );
    let m = metrics_when(
        &gw,
        &[(
            "weir_requests_total{route=\"all\",outcome=\"bad_request\"}",
            1.0,
        )],
    );
    assert_eq!(
        metric(
            &m,
            "weir_requests_total{route=\"all\",outcome=\"bad_request\"}"
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "weir_requests_total{route=\"-\",outcome=\"bad_request\"}"
        ),
        None,
        "not also counted under \"-\": {m}"
    );
}

/// Seed 001's three phases end to end: a backend dies (fallback, then the breaker opens
/// and the dead backend sees no more attempts), it comes back, and the breaker recovers
/// through HALF_OPEN by itself — no restart, no operator.
pub fn breaker_three_phases_recover_through_half_open(bin: &Path) {
    let routes = format!(
        "{}[routes.breaker]\nfailure_on = [\"5xx\", \"connect_failure\", \"timeout\", \"reset\", \"protocol_error\"]\nconsecutive_failures = 2\ncooldown = {{ base = \"400ms\", max = \"2s\", multiplier = 2.0, jitter = 0.0 }}\nhalf_open = {{ probes = 1, successes = 1 }}\nramp = \"0s\"\n\n[routes.fallback]\nstatus = 200\ncontent_type = \"application/json\"\nbody = '{{\"degraded\":true}}'\n\n",
        route("api", "/ok", "blue")
    );
    let (up, gw) = with_demo(bin, "blue", &routes);
    up.set_down(true);
    let attempts = |gw: &Gateway| -> f64 {
        let m = gw.admin("GET", "/metrics").text();
        [
            "connect_failure",
            "reset",
            "protocol_error",
            "http_5xx",
            "timeout",
            "success",
        ]
        .iter()
        .filter_map(|r| {
            metric(
                &m,
                &format!("weir_upstream_attempts_total{{route=\"api\",result=\"{r}\"}}"),
            )
        })
        .sum()
    };
    // Phase 1: the backend is dead; clients get the fallback, never a bare 500.
    let reasons = degraded_reasons(&gw, "/ok", 6);
    assert_eq!(reasons[0], "upstream_unavailable", "{reasons:?}");
    assert_eq!(reasons[5], "circuit_open", "{reasons:?}");
    // Phase 2: while OPEN the dead backend sees no attempts at all. (Attempts are counted
    // as requests complete: let phase 1's count settle first.)
    let mut before = attempts(&gw);
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = attempts(&gw);
        if now == before || Instant::now() >= until {
            break;
        }
        before = now;
    }
    assert!(before >= 2.0, "the trip took real attempts: {before}");
    for _ in 0..5 {
        let r = client::get(gw.addr, "/ok", &[]);
        assert_eq!(r.header("x-weir-degraded"), Some("circuit_open"), "{r:?}");
    }
    assert_eq!(
        attempts(&gw),
        before,
        "short-circuited requests reached the backend"
    );
    assert!(
        gw.admin("GET", "/admin/breakers")
            .text()
            .contains("\"open\"")
    );
    // Phase 3: the backend recovers; after the cooldown one probe closes the breaker.
    up.set_down(false);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let r = client::get(gw.addr, "/ok", &[]);
        if r.status == 200 && r.header("x-weir-degraded").is_none() {
            assert!(r.text().contains("blue"), "proxied body: {r:?}");
            break;
        }
        assert!(Instant::now() < until, "breaker never recovered: {r:?}");
        thread::sleep(Duration::from_millis(50));
    }
    let b = gw.admin("GET", "/admin/breakers").text();
    assert!(b.contains("\"closed\""), "{b}");
    let m = gw.admin("GET", "/metrics").text();
    for (from, to) in [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ] {
        let series =
            format!("weir_breaker_transitions_total{{route=\"api\",from=\"{from}\",to=\"{to}\"}}");
        assert!(
            metric(&m, &series).is_some_and(|v| v >= 1.0),
            "{series} missing from\n{m}"
        );
    }
    // And it stays closed under normal traffic.
    for _ in 0..3 {
        let r = client::get(gw.addr, "/ok", &[]);
        assert_eq!(r.status, 200);
        assert!(r.header("x-weir-degraded").is_none(), "{r:?}");
    }
}

/// The total budget ends with the response head: a live body that streams for longer than
/// `total` (each gap shorter than `per_try`) reaches the client whole.
pub fn slow_streaming_body_not_cut_by_deadlines(bin: &Path) {
    let up = RawUpstream::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        for i in 0..6 {
            let _ = s.write_all(format!("2\r\nc{i}\r\n").as_bytes());
            thread::sleep(Duration::from_millis(120));
        }
        let _ = s.write_all(b"0\r\n\r\n");
        true
    });
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"500ms\"\nper_try = \"200ms\"\n\n",
        route("all", "/", "up")
    );
    let gw = Gateway::start(bin, &config(&[("up", up.addr)], &routes));
    get_whole_after(
        &gw,
        "/stream",
        "c0c1c2c3c4c5",
        700,
        "streamed past the total budget",
    );
}

/// `GET path` answers 200 with the whole `body`, taking at least `ms` (`why` says why).
fn get_whole_after(gw: &Gateway, path: &str, body: &str, ms: u64, why: &str) {
    let t = Instant::now();
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c.get(path, &[]).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(!r.truncated, "body cut: {r:?}");
    assert_eq!(r.text(), body);
    assert!(t.elapsed() >= Duration::from_millis(ms), "{why}");
}

/// The per-try timeout ends with the response head: a body that pauses for longer than
/// `per_try` (but less than `idle_timeout`) reaches the client whole; a body silent for longer
/// than `idle_timeout` is cut (the client sees no final chunk, the access log says
/// `upstream_body_truncated`) even though the upstream would have finished it later.
pub fn body_pause_beyond_per_try_streams_until_idle_timeout(bin: &Path) {
    let up = RawUpstream::start(|seen, s| {
        let pause = if seen.head.target().starts_with("/stall") {
            900
        } else {
            250
        };
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n");
        thread::sleep(Duration::from_millis(pause));
        let _ = s.write_all(b"1\r\nb\r\n");
        thread::sleep(Duration::from_millis(pause));
        let _ = s.write_all(b"1\r\nc\r\n0\r\n\r\n");
        true
    });
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"500ms\"\nper_try = \"100ms\"\n\n",
        route("all", "/", "up")
    );
    let server = "idle_timeout = \"400ms\"";
    let gw = Gateway::start(bin, &config_with(&[("up", up.addr)], &routes, server));

    get_whole_after(
        &gw,
        "/pause",
        "abc",
        500,
        "both pauses were streamed through",
    );

    let t = Instant::now();
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c.get("/stall", &[]).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.truncated, "cut after idle_timeout: {r:?}");
    assert_eq!(r.text(), "a");
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "cut by idle_timeout, not by the upstream: {:?}",
        t.elapsed()
    );
    wait_for_log(|| gw.stdout_text(), "upstream_body_truncated");
}

/// Issue 7's bounded load run: two instances on one global token bucket with leases
/// (`lease = 5`), hammered at several times the limit for ~3 s by 4 clients each. The
/// fleet admits at most the exact single-bucket ideal plus the documented lease bound
/// (`instances × lease`), and uses most of the limit. Skips when `redis-server` is
/// missing (unless `WEIR_REQUIRE_REDIS=1`). The store timeout is generous (2 s): this run
/// is about the bound, and a 250 ms timeout (`on_store_error = "deny"`: 503) is the likely
/// cause of 3 unexpected answers in one loaded CI run. Any answer other than 200 / 429 is
/// reported with its status and reason.
pub fn global_lease_over_admission_bounded_under_load(bin: &Path) {
    let Some(redis) = crate::redis::RedisServer::start("global_lease") else {
        return;
    };
    let blue = demo("blue");
    let (rate, burst, lease, instances) = (40u32, 10u32, 5u64, 2u64);
    let routes = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout_ms = 2000\nlease = {lease}\n\n{}{}",
        redis.url(),
        route("g", "/ok", "blue"),
        token_bucket(
            rate,
            "1s",
            burst,
            "scope = \"global\"\non_store_error = \"deny\""
        ),
    );
    let cfg = config(&[("blue", blue.addr())], &routes);
    let gws = [Gateway::start(bin, &cfg), Gateway::start(bin, &cfg)];
    let start = Instant::now();
    let run = Duration::from_secs(3);
    let (admitted, other): (u64, Vec<String>) = thread::scope(|sc| {
        let hs: Vec<_> = gws
            .iter()
            .flat_map(|g| (0..4).map(move |_| g.addr))
            .map(|addr| {
                sc.spawn(move || {
                    let (mut ok, mut bad) = (0u64, Vec::new());
                    let mut c = Client::connect(addr).unwrap();
                    while start.elapsed() < run {
                        match c.get("/ok", &[]) {
                            Ok(r) if r.status == 200 => ok += 1,
                            Ok(r) if r.status == 429 => {}
                            Ok(r) => bad.push(format!(
                                "{} {}",
                                r.status,
                                r.header("x-weir-reason").unwrap_or("-")
                            )),
                            Err(_) => c = Client::connect(addr).unwrap(),
                        }
                    }
                    (ok, bad)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, Vec::new()), |(a, mut b), (x, y)| {
                b.extend(y);
                (a + x, b)
            })
    });
    let span = start.elapsed().as_secs_f64();
    assert!(other.is_empty(), "only 200 and 429 expected: {other:?}");
    crate::redis::assert_lease_bound(
        admitted,
        (u64::from(rate), u64::from(burst), span),
        (instances, lease),
        0.6,
    );
    assert_eq!(
        blue.stats().path("/ok"),
        admitted,
        "upstream saw exactly the admitted"
    );
}

pub(crate) const JWT_SECRET: &str = "e2e-hs256-secret-test-only";
pub(crate) const ADMIN_TOKEN: &str = "e2e-admin-token-test-only";

/// `[server]` lines of an admin API behind [`ADMIN_TOKEN`] that refuses every POST.
pub(crate) const READ_ONLY_ADMIN: &str =
    "admin_token_env = \"WEIR_E2E_ADMIN_TOKEN\"\nadmin_read_only = true\n";

/// A gateway with one route `/ok` to `ups`' "blue" and a [`READ_ONLY_ADMIN`] admin API.
pub(crate) fn read_only_admin_gateway(bin: &Path, ups: &[(&str, SocketAddr)]) -> Gateway {
    Gateway::start_with_env(
        bin,
        &config_with(ups, &route("ok", "/ok", "blue"), READ_ONLY_ADMIN),
        &[],
        &[("WEIR_E2E_ADMIN_TOKEN", ADMIN_TOKEN)],
    )
}

/// An HS256 token for `sub` with `scope`, valid for 10 minutes.
pub(crate) fn hs256(sub: &str, scope: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": sub, "scope": scope, "iss": "e2e", "exp": now + 600}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

pub(crate) fn jwt_identity() -> &'static str {
    "[[identities]]\nname = \"users\"\nkind = \"jwt\"\nsecret_env = \"WEIR_E2E_JWT_SECRET\"\nissuer = \"e2e\"\n\n"
}

/// Identity (docs/CONFIG.md, "Identities"): a per-consumer limit keyed by the verified
/// subject; a forged consumer header is replaced upstream and buys no fresh bucket; 401 /
/// 403 with their `WWW-Authenticate` consume nothing; no credential in any output.
pub fn auth_limits_by_verified_consumer_and_failures_consume_nothing(bin: &Path) {
    let dir = crate::harness::scratch_dir();
    let log_path = dir.path().join("access.log");
    let blue = demo("blue");
    let routes = format!(
        "{}{}[routes.auth]\nidentity = \"users\"\nscopes = [\"read\"]\n\n\
         [routes.rate_limit]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1h\"\nkey = [\"consumer\"]\n\n\
         [routes.concurrency]\nmax = 1\n\n[log]\naccess = {:?}\n",
        jwt_identity(),
        route("api", "/echo", "blue"),
        log_path.display().to_string()
    );
    let gw = Gateway::start_with_env(
        bin,
        &config(&[("blue", blue.addr())], &routes),
        &[],
        &[("WEIR_E2E_JWT_SECRET", JWT_SECRET)],
    );
    let alice = hs256("alice", "read");
    let bob = hs256("bob", "read write");
    let carol = hs256("carol", "write");
    let forged = format!("{}x", hs256("alice", "read"));
    let no_token = String::new();
    let forged_h = format!("authorization: Bearer {forged}");
    let carol_h = format!("authorization: Bearer {carol}");
    // (header, status, reason, WWW-Authenticate, a token that must not be echoed)
    let failures = [
        (&no_token, 401, "unauthenticated", "Bearer", None),
        (
            &forged_h,
            401,
            "invalid_token",
            "Bearer error=\"invalid_token\"",
            Some(&forged),
        ),
        (
            &carol_h,
            403,
            "insufficient_scope",
            "Bearer error=\"insufficient_scope\", scope=\"read\"",
            None,
        ),
    ];
    for _ in 0..4 {
        for (header, status, reason, challenge, secret) in &failures {
            let headers: Vec<&str> = [header.as_str()]
                .into_iter()
                .filter(|h| !h.is_empty())
                .collect();
            let r = client::get(gw.addr, "/echo", &headers);
            assert_gateway_made(&r, *status, reason);
            assert_eq!(r.header("www-authenticate"), Some(*challenge), "{r:?}");
            if let Some(t) = secret {
                assert!(!r.text().contains(t.as_str()), "token echoed: {r:?}");
            }
        }
    }
    // The limit (2 per consumer) is untouched by the 12 failures.
    let auth_alice = format!("authorization: Bearer {alice}");
    for i in 0..2 {
        let r = client::get(
            gw.addr,
            "/echo?token=s3cr3t-query",
            &[
                &auth_alice,
                "x-weir-consumer: bob",
                "x-weir-consumer: mallory",
            ],
        );
        assert_eq!(r.status, 200, "alice #{i}: {r:?}");
        let t = r.text();
        assert!(t.contains("[\"x-weir-consumer\",\"alice\"]"), "{t}");
        assert!(
            !t.contains("mallory") && !t.contains("\"bob\""),
            "forged header kept: {t}"
        );
    }
    let r = client::get(gw.addr, "/echo", &[&auth_alice, "x-weir-consumer: mallory"]);
    assert_gateway_made(&r, 429, "rate_limited");
    let r = client::get(gw.addr, "/echo", &[&format!("authorization: Bearer {bob}")]);
    assert_eq!(r.status, 200, "bob has his own budget: {r:?}");

    let auth = [
        ("weir_auth_total{route=\"api\",result=\"ok\"}", 4.0),
        ("weir_auth_total{route=\"api\",result=\"missing\"}", 4.0),
        (
            "weir_auth_total{route=\"api\",result=\"invalid_token\"}",
            4.0,
        ),
        (
            "weir_auth_total{route=\"api\",result=\"insufficient_scope\"}",
            4.0,
        ),
    ];
    let m = metrics_when(&gw, &auth);
    let limited = (
        "weir_requests_total{route=\"api\",outcome=\"rate_limited\"}",
        1.0,
    );
    for (series, v) in auth.into_iter().chain([limited]) {
        assert_eq!(metric(&m, series), Some(v), "{series}:\n{m}");
    }
    let log = wait_for_log(
        || std::fs::read_to_string(&log_path).unwrap_or_default(),
        "\"status\":429",
    );
    assert!(log.contains("\"consumer_digest\":\""), "{log}");
    let outputs = [log, m, gw.stdout_text(), gw.stderr_text()];
    for out in &outputs {
        for secret in [
            alice.as_str(),
            bob.as_str(),
            carol.as_str(),
            forged.as_str(),
            JWT_SECRET,
            "s3cr3t-query",
            "Bearer ",
            "alice",
        ] {
            assert!(!out.contains(secret), "{secret:?} in an output:\n{out}");
        }
    }
    drop(gw);
}

/// Admin access (docs/HTTP.md, "Admin API"): with `admin_token_env`, everything but
/// `GET /healthz` needs the Bearer token; `admin_read_only` refuses every POST, and SIGHUP
/// still reloads (the outcome on stderr).
pub fn admin_token_required_read_only_and_sighup_reload(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    let server = READ_ONLY_ADMIN;
    let gw = read_only_admin_gateway(bin, &ups);
    assert_eq!(gw.admin("GET", "/healthz").status, 200);
    let good = format!("authorization: Bearer {ADMIN_TOKEN}");
    for (m, p) in [
        ("GET", "/metrics"),
        ("GET", "/admin/config"),
        ("POST", "/admin/reload"),
    ] {
        let r = gw.admin(m, p);
        assert_eq!(r.status, 401, "{m} {p}: {r:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{r:?}");
        let r = gw.admin_with(m, p, &["authorization: Bearer wrong-token"]);
        assert_eq!(r.status, 401, "{m} {p} wrong token: {r:?}");
    }
    assert_eq!(gw.admin_with("GET", "/metrics", &[&good]).status, 200);
    let cfg = gw.admin_with("GET", "/admin/config", &[&good]);
    assert_eq!(cfg.status, 200, "{cfg:?}");
    assert!(!cfg.text().contains(ADMIN_TOKEN), "{}", cfg.text());
    let r = gw.admin_with("POST", "/admin/reload", &[&good]);
    assert_eq!(r.status, 405, "read-only: {r:?}");
    // Reload by SIGHUP: a new route serves, the outcome is on stderr.
    let routes = format!(
        "{}{}",
        route("ok", "/ok", "blue"),
        route("new", "/stats", "blue")
    );
    std::fs::write(&gw.config_path, config_with(&ups, &routes, server)).unwrap();
    gw.signal("HUP");
    let until = Instant::now() + Duration::from_secs(5);
    while !gw.stderr_text().contains("SIGHUP: reloaded, revision 2") {
        assert!(Instant::now() < until, "stderr:\n{}", gw.stderr_text());
        thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(client::get(gw.addr, "/stats", &[]).reason(), "no_route");
    std::fs::write(&gw.config_path, "[server]\nlisten = 42\n").unwrap();
    gw.signal("HUP");
    while !gw.stderr_text().contains("revision 2 keeps serving") {
        assert!(Instant::now() < until, "stderr:\n{}", gw.stderr_text());
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    for out in [gw.stdout_text(), gw.stderr_text()] {
        assert!(
            !out.contains(ADMIN_TOKEN),
            "admin token in an output:\n{out}"
        );
    }
}

/// A non-loopback `admin` address without `admin_token_env` is a config error: `--check`
/// fails naming the key, and so does start-up.
pub fn non_loopback_admin_without_token_refused(bin: &Path) {
    let dir = crate::harness::scratch_dir();
    let path = dir.path().join("open-admin.toml");
    let port = crate::harness::free_port();
    let text = config_with(
        &[("blue", dead_addr())],
        &route("ok", "/ok", "blue"),
        &format!("admin = \"0.0.0.0:{port}\"\n"),
    );
    std::fs::write(&path, text).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(bin)
            .arg("--config")
            .arg(&path)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    for args in [&["--check"][..], &["--listen", "127.0.0.1:0"][..]] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted: {err}");
        assert!(
            err.contains("server.admin") && err.contains("admin_token_env"),
            "{args:?}: {err}"
        );
    }
}

pub use crate::scenarios_cluster::*;
pub use crate::scenarios_headers::*;
pub use crate::scenarios_outlier::*;
pub use crate::scenarios_proxies::*;
pub use crate::scenarios_quota::*;
pub use crate::scenarios_secrets::*;
pub use crate::scenarios_sim::*;
