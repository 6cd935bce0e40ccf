//! End-to-end: the real `weir-pingora` binary on loopback ports, in front of the demo
//! upstreams, on the project's example config (CONTRACT §3, §4, §6).
//!
//! The scenarios only use the binary path and the harness, so they can move to the shared
//! frontend suite unchanged: set `WEIR_E2E_BIN` to run them against another frontend.

mod harness;

use std::path::PathBuf;
use std::time::Duration;

use harness::{Proc, raw_exchange, request};
use weir_demo::DemoUpstream;

fn bin() -> PathBuf {
    std::env::var_os("WEIR_E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_weir-pingora")))
}

/// The example config with the demo upstreams' ports, access log off unless asked for.
fn example_config(blue: &DemoUpstream, green: &DemoUpstream) -> String {
    weir_pingora::demo::demo_config(blue.addr(), green.addr())
}

struct Setup {
    blue: DemoUpstream,
    green: DemoUpstream,
    gw: Proc,
}

fn setup_with(edit: impl FnOnce(String) -> String) -> Setup {
    let blue = DemoUpstream::start("blue", "127.0.0.1:0").unwrap();
    let green = DemoUpstream::start("green", "127.0.0.1:0").unwrap();
    let config = edit(example_config(&blue, &green));
    let gw = Proc::spawn(&bin(), &config);
    Setup { blue, green, gw }
}

fn setup() -> Setup {
    setup_with(|c| c)
}

fn assert_gateway_made(r: &harness::Response, status: u16, reason: &str) {
    assert_eq!(r.status, status, "{r:?}");
    assert_eq!(r.header("x-weir-reason"), Some(reason), "{r:?}");
    assert!(
        r.header("x-request-id").is_some_and(|v| !v.is_empty()),
        "{r:?}"
    );
    assert_eq!(r.header("x-weir-instance"), Some("gw-a"), "{r:?}");
    assert!(
        r.header("content-type").is_some_and(|v| v.contains("json")),
        "{r:?}"
    );
    assert!(
        r.text().contains(&format!("\"error\":\"{reason}\"")),
        "{}",
        r.text()
    );
}

#[test]
fn no_route_is_404() {
    let s = setup();
    let r = s.gw.get("/nope");
    assert_gateway_made(&r, 404, "no_route");
    assert!(r.text().contains("\"route\":\"-\""), "{}", r.text());
    // The main port never serves admin paths: they are routed like any other.
    assert_gateway_made(&s.gw.get("/metrics"), 404, "no_route");
    assert_eq!(s.blue.stats().total + s.green.stats().total, 0);
}

#[test]
fn oversized_heads_are_431_and_414() {
    let s = setup();
    let big = "a".repeat(17 * 1024);
    let r = request(s.gw.listen, "GET", "/ok", &[("x-big", &big)], b"");
    assert_gateway_made(&r, 431, "headers_too_large");
    let r = request(
        s.gw.listen,
        "GET",
        &format!("/ok?{}", "q".repeat(9 * 1024)),
        &[],
        b"",
    );
    assert_gateway_made(&r, 414, "uri_too_long");
    assert_eq!(s.blue.stats().total, 0);
    let m = s.gw.admin_req("GET", "/metrics").text();
    assert!(
        m.contains("weir_requests_total{route=\"-\",outcome=\"headers_too_large\"} 1"),
        "{m}"
    );
}

#[test]
fn proxied_response_is_unchanged_with_weir_headers() {
    let s = setup();
    let r = request(
        s.gw.listen,
        "GET",
        "/ok",
        &[("x-request-id", "abc-123")],
        b"",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-upstream"), Some("blue"));
    assert_eq!(r.header("x-weir-attempts"), Some("1"));
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    assert_eq!(r.header("x-weir-instance"), Some("gw-a"));
    assert!(r.header("x-weir-reason").is_none());
    assert!(r.text().contains("\"upstream\":\"blue\""), "{}", r.text());
}

#[test]
fn rate_limit_429_with_retry_after_and_ratelimit_fields() {
    let s = setup();
    let get = || request(s.gw.listen, "GET", "/ok", &[("x-consumer-id", "c1")], b"");
    for _ in 0..2 {
        let r = get();
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.header("ratelimit-policy"),
            Some("\"ok\";q=2;w=60"),
            "{r:?}"
        );
        assert!(
            r.header("ratelimit")
                .is_some_and(|v| v.starts_with("\"ok\";r=")),
            "{r:?}"
        );
    }
    let r = get();
    assert_gateway_made(&r, 429, "rate_limited");
    let retry_after: u64 = r
        .header("retry-after")
        .expect("retry-after")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{r:?}");
    assert_eq!(r.header("ratelimit-policy"), Some("\"ok\";q=2;w=60"));
    assert_eq!(
        r.header("ratelimit"),
        Some(format!("\"ok\";r=0;t={retry_after}").as_str()),
        "{r:?}"
    );
    assert_eq!(
        s.blue.stats().path("/ok"),
        2,
        "the rejected request never reached blue"
    );
    // Another consumer has its own bucket.
    let r = request(s.gw.listen, "GET", "/ok", &[("x-consumer-id", "c2")], b"");
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn flaky_is_retried_with_an_idempotency_key() {
    let s = setup();
    let r = request(
        s.gw.listen,
        "GET",
        "/flaky",
        &[("idempotency-key", "k1")],
        b"",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("2"), "{r:?}");
    assert_eq!(s.blue.stats().flaky_keys.get("k1"), Some(&2));
    let m = s.gw.admin_req("GET", "/metrics").text();
    assert!(m.contains("weir_retries_total{route=\"flaky\"} 1"), "{m}");
}

#[test]
fn post_orders_is_not_retried() {
    let s = setup();
    let r = request(s.gw.listen, "POST", "/orders", &[], b"{}");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-weir-attempts"), Some("1"));
    // A dead upstream: the POST without a key gets one attempt and a 502.
    s.blue.set_down(true);
    let attempts = || {
        s.gw.metric_sum("weir_upstream_attempts_total{route=\"orders\"")
    };
    let before = attempts();
    let r = request(s.gw.listen, "POST", "/orders", &[], b"{}");
    assert_gateway_made(&r, 502, "upstream_unavailable");
    assert_eq!(attempts() - before, 1.0, "exactly one attempt");
    // With an idempotency key the same request may be retried.
    let before = attempts();
    let r = request(
        s.gw.listen,
        "POST",
        "/orders",
        &[("idempotency-key", "o-1")],
        b"{}",
    );
    assert_gateway_made(&r, 502, "upstream_unavailable");
    assert_eq!(attempts() - before, 2.0, "max_attempts = 2");
}

#[test]
fn dead_upstream_gets_the_fallback_then_the_breaker_opens() {
    let Setup {
        blue,
        green: _green,
        gw,
    } = setup();
    blue.stop(); // connection refused from now on
    let r = gw.get("/flaky");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "{\"degraded\":true}");
    assert_eq!(
        r.header("x-weir-degraded"),
        Some("upstream_unavailable"),
        "{r:?}"
    );
    // Three connect failures per request; the breaker opens after five in a row.
    let mut reasons = Vec::new();
    for _ in 0..3 {
        let r = gw.get("/flaky");
        assert_eq!(r.status, 200, "{r:?}");
        reasons.push(r.header("x-weir-degraded").unwrap_or_default().to_owned());
    }
    assert_eq!(
        reasons.last().map(String::as_str),
        Some("circuit_open"),
        "{reasons:?}"
    );
    let b = gw.admin_req("GET", "/admin/breakers").text();
    assert!(b.contains("\"open\""), "{b}");
    let m = gw.admin_req("GET", "/metrics").text();
    assert!(m.contains("weir_breaker_state{route=\"flaky\"} 1"), "{m}");
}

#[test]
fn slow_is_504_within_the_total_budget() {
    let s = setup();
    let r = s.gw.get("/slow");
    assert_eq!(r.status, 504, "{r:?}");
    let reason = r.header("x-weir-reason").unwrap_or_default();
    assert!(
        reason == "per_try_timeout" || reason == "deadline_exceeded",
        "{r:?}"
    );
    // total = 500ms (two tries of 200ms); generous slack for a loaded CI machine.
    assert!(r.elapsed >= Duration::from_millis(350), "{:?}", r.elapsed);
    assert!(r.elapsed < Duration::from_millis(1000), "{:?}", r.elapsed);
    assert_eq!(s.green.stats().path("/slow"), 2);
}

#[test]
fn admin_api() {
    let s = setup();
    let m = s.gw.admin_req("GET", "/metrics");
    assert_eq!(m.status, 200);
    for family in weir_pingora::weir_policy::FAMILIES {
        assert!(
            m.text().contains(&format!("# TYPE {}", family)),
            "{family:?}"
        );
    }
    let h = s.gw.admin_req("GET", "/healthz");
    assert_eq!(h.status, 200, "{h:?}");
    assert_eq!(s.gw.admin_req("GET", "/admin/nope").status, 404);
    assert_eq!(s.gw.admin_req("GET", "/admin/reload").status, 405);
    let b = s.gw.admin_req("GET", "/admin/breakers");
    assert_eq!(b.status, 200);
    assert!(b.text().contains("\"breakers\""), "{}", b.text());
    let c = s.gw.admin_req("GET", "/admin/config");
    assert!(c.text().contains("\"revision\":1"), "{}", c.text());
    // The admin port proxies nothing.
    assert_eq!(s.gw.admin_req("GET", "/ok").status, 404);
    assert_eq!(s.blue.stats().total, 0);

    // Reload: a good file bumps the revision; a bad one is a 400 and the old set keeps serving.
    let r = s.gw.admin_req("POST", "/admin/reload");
    assert_eq!(
        (r.status, r.text().contains("\"revision\":2")),
        (200, true),
        "{r:?}"
    );
    let good = std::fs::read_to_string(&s.gw.config).unwrap();
    std::fs::write(&s.gw.config, good.replace("rate = 2", "rate = 0")).unwrap();
    let r = s.gw.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("\"error\""), "{}", r.text());
    assert_eq!(s.gw.get("/ok").status, 200);
    assert!(
        s.gw.admin_req("GET", "/admin/config")
            .text()
            .contains("\"revision\":2")
    );
}

#[test]
fn access_log_line_per_request() {
    let s = setup();
    let r = request(
        s.gw.listen,
        "GET",
        "/ok?secret=1",
        &[("authorization", "Bearer x")],
        b"",
    );
    assert_eq!(r.status, 200);
    let id = r.header("x-request-id").unwrap().to_owned();
    let t = std::time::Instant::now();
    let line = loop {
        if let Some(l) = s.gw.stdout_text().lines().find(|l| l.contains(&id)) {
            break l.to_owned();
        }
        assert!(t.elapsed() < Duration::from_secs(3), "no access log line");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        line.contains("\"route\":\"ok\"") && line.contains("\"status\":200"),
        "{line}"
    );
    assert!(line.contains("\"path\":\"/ok\""), "{line}");
    assert!(
        !line.contains("secret") && !line.contains("Bearer"),
        "{line}"
    );
}

#[test]
fn sigint_and_sigterm_exit_0() {
    let mut s = setup();
    assert_eq!(s.gw.get("/ok").status, 200);
    let (status, took) = s.gw.signal("INT", Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    // SIGTERM with a request in flight: it completes, then the process exits 0.
    let mut s = setup_with(|c| c);
    let listen = s.gw.listen;
    let inflight = std::thread::spawn(move || request(listen, "GET", "/slow", &[], b""));
    std::thread::sleep(Duration::from_millis(100));
    let (status, took) = s.gw.signal("TERM", Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let r = inflight.join().unwrap();
    assert_eq!(r.status, 504, "the in-flight request was answered: {r:?}");
    let _ = &s.green;
}

#[test]
fn check_validates_the_config() {
    let dir = std::env::temp_dir().join(format!("weir-pingora-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, weir_pingora::demo::EXAMPLE_CONFIG).unwrap();
    let out = std::process::Command::new(bin())
        .args(["--check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("flaky") && text.contains("orders"), "{text}");

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        weir_pingora::demo::EXAMPLE_CONFIG.replace("burst = 2", "burst = 0"),
    )
    .unwrap();
    let out = std::process::Command::new(bin())
        .args(["--check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("burst"), "{err}");
}

/// The example config plus a catch-all route to blue (per-try 300 ms), for the demo's
/// `/stream`, `/close`, `/echo` endpoints.
fn with_catch_all(c: String) -> String {
    c + r#"
[[routes]]
id = "misc"
match = { path_prefix = "/" }
upstream = "blue"

[routes.timeouts]
total = "5s"
per_try = "300ms"
"#
}

#[test]
fn upstream_body_cut_reaches_the_client_as_a_cut_and_is_logged() {
    let s = setup_with(with_catch_all);
    let raw = raw_exchange(
        s.gw.listen,
        b"GET /close HTTP/1.1\r\nhost: x\r\nx-request-id: cut-1\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("content-length: 100"),
        "{head}"
    );
    assert!(
        body.len() < 100,
        "the body must arrive cut, got {} bytes",
        body.len()
    );
    let t = std::time::Instant::now();
    while !s.gw.stdout_text().lines().any(|l| l.contains("cut-1")) {
        assert!(t.elapsed() < Duration::from_secs(3), "no access log line");
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = s.gw.stdout_text();
    let line = log.lines().find(|l| l.contains("cut-1")).unwrap();
    assert!(line.contains("upstream_body_truncated"), "{line}");
}

#[test]
fn streaming_body_and_request_headers_pass_through() {
    let s = setup_with(with_catch_all);
    // Chunks 100 ms apart: longer in total than per_try (300 ms), each gap shorter.
    let r = s.gw.get("/stream?chunks=5&delay_ms=100");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.elapsed >= Duration::from_millis(400), "{:?}", r.elapsed);
    assert_eq!(r.header("x-weir-attempts"), Some("1"));
    // The upstream sees the request id weir assigned.
    let r = request(
        s.gw.listen,
        "POST",
        "/echo",
        &[("x-request-id", "echo-1")],
        b"hello",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let body = r.text();
    assert!(
        body.contains("echo-1") && body.contains("\"body\":\"hello\""),
        "{body}"
    );
}
