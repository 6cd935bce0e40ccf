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

fn unique(prefix: &str) -> String {
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

fn demo(name: &str) -> DemoUpstream {
    DemoUpstream::start(name, "127.0.0.1:0").expect("demo upstream")
}

fn route(id: &str, prefix: &str, upstream: &str) -> String {
    format!(
        "[[routes]]\nid = \"{id}\"\nmatch = {{ path_prefix = \"{prefix}\" }}\nupstream = \"{upstream}\"\n\n"
    )
}

fn assert_gateway_made(r: &client::Resp, status: u16, reason: &str) {
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
    let blue = demo("blue");
    let gw = Gateway::start(
        bin,
        &config(&[("blue", blue.addr())], &route("ok", "/ok", "blue")),
    );
    let r = client::get(gw.addr, "/nowhere", &[]);
    assert_gateway_made(&r, 404, "no_route");
    // The main port never serves admin paths: they are routed like any other path.
    let r = client::get(gw.addr, "/metrics", &[]);
    assert_gateway_made(&r, 404, "no_route");
}

/// Two per minute: 200, 200, then 429 with Retry-After and the RateLimit fields (T = Retry-After).
pub fn rate_limit_429_with_headers(bin: &Path) {
    let blue = demo("blue");
    let routes = format!(
        "{}[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nper = \"60s\"\nburst = 2\nkey = [\"route\"]\n\n",
        route("ok", "/ok", "blue")
    );
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &routes));
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
    let blue = demo("blue");
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &flaky_routes()));
    let key = unique("k");
    let r = client::get(gw.addr, "/flaky", &[&format!("idempotency-key: {key}")]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("2"), "{r:?}");
}

/// A POST without an idempotency key is never retried: the upstream's 503 passes through.
pub fn post_without_key_not_retried(bin: &Path) {
    let blue = demo("blue");
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &flaky_routes()));
    let mut c = Client::connect(gw.addr).unwrap();
    let r = c
        .exchange(
            request("POST", "/flaky", &[], Some(b"{}")).as_bytes(),
            false,
        )
        .unwrap();
    assert_eq!(r.status, 503, "upstream 503 kept: {r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("1"), "{r:?}");
    let r = c
        .exchange(
            request("POST", "/orders", &[], Some(b"{\"n\":1}")).as_bytes(),
            false,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("1"), "{r:?}");
}

/// Upstream answers after 350 ms; per-try 200 ms, total 500 ms: 504 before ~600 ms.
pub fn slow_upstream_504_within_total_budget(bin: &Path) {
    let green = demo("green");
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"500ms\"\nper_try = \"200ms\"\n\n[routes.retry]\nmax_attempts = 3\non = [\"per_try_timeout\"]\nbackoff = {{ base = \"25ms\", max = \"50ms\", jitter = \"full\" }}\n\n",
        route("slow", "/slow", "green")
    );
    let gw = Gateway::start(bin, &config(&[("green", green.addr())], &routes));
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
    let mut c = Client::connect(gw.addr).unwrap();
    c.send_raw(b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n")
        .unwrap();
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
    let r = client::get(gw.addr, "/x", &[]);
    assert_gateway_made(&r, 502, "upstream_unavailable");
}

/// `/metrics` exposes every family from start-up; `/healthz`, `/admin/config`; 404 elsewhere.
pub fn admin_metrics_healthz_config(bin: &Path) {
    let blue = demo("blue");
    let gw = Gateway::start(
        bin,
        &config(&[("blue", blue.addr())], &route("ok", "/ok", "blue")),
    );
    assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200);
    let m = gw.admin("GET", "/metrics");
    assert_eq!(m.status, 200);
    let text = m.text();
    for family in [
        "weir_requests_total",
        "weir_shadow_rejections_total",
        "weir_upstream_attempts_total",
        "weir_retries_total",
        "weir_keys_overflow_total",
        "weir_retry_budget_exhausted_total",
        "weir_breaker_state",
        "weir_breaker_transitions_total",
        "weir_ratelimit_bypassed_total",
        "weir_inflight",
        "weir_request_duration_seconds",
    ] {
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
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let r = client::get(gw.addr, "/dead", &[]);
        assert_eq!(r.status, 200, "fallback status: {r:?}");
        assert_eq!(r.text(), "{\"degraded\":true}");
        reasons.push(r.header("x-weir-degraded").unwrap_or("").to_owned());
    }
    assert_eq!(reasons[0], "upstream_unavailable", "{reasons:?}");
    assert_eq!(reasons[3], "circuit_open", "{reasons:?}");
    let b = gw.admin("GET", "/admin/breakers").text();
    assert!(b.contains("\"open\""), "{b}");
    // Without a fallback: 502 first, then 503 circuit_open.
    let r = client::get(gw.addr, "/plain", &[]);
    assert_gateway_made(&r, 502, "upstream_unavailable");
    let r = client::get(gw.addr, "/plain", &[]);
    assert_gateway_made(&r, 503, "circuit_open");
}

/// SIGINT while a request is in flight: it completes, new connections are refused, exit 0.
pub fn sigint_drains_in_flight_and_exits_0(bin: &Path) {
    let green = demo("green");
    let routes = format!(
        "{}[routes.timeouts]\ntotal = \"3s\"\n\n",
        route("slow", "/slow", "green")
    );
    let mut gw = Gateway::start(bin, &config(&[("green", green.addr())], &routes));
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
