//! The demo upstreams over real loopback sockets.

use core::time::Duration;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use weir_demo::{Client, DemoUpstream};

fn start(name: &str) -> DemoUpstream {
    DemoUpstream::start(name, "127.0.0.1:0").expect("bind loopback")
}

#[test]
fn ok_and_keep_alive() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    for _ in 0..3 {
        let r = c.get("/ok").unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text(), r#"{"upstream":"blue","path":"/ok"}"#);
        assert_eq!(r.header("x-upstream").as_deref(), Some("blue"));
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json")
        );
        assert!(r.complete && r.head.keep_alive());
    }
    assert_eq!(blue.connections(), 1);
    let s = blue.stats();
    assert_eq!((s.total, s.path("/ok")), (3, 3));
    // HEAD: same head, no body.
    let r = c.request("HEAD", "/ok", &[], b"").unwrap();
    assert_eq!((r.status(), r.body.len()), (200, 0));
    assert_eq!(r.header("content-length").as_deref(), Some("32"));
    assert_eq!(c.get("/ok").unwrap().status(), 200);
}

#[test]
fn flaky_with_and_without_keys() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    let with = |c: &mut Client, k: &str| {
        c.request("GET", "/flaky", &[("idempotency-key", k)], b"")
            .unwrap()
            .status()
    };
    assert_eq!(with(&mut c, "k1"), 503);
    assert_eq!(with(&mut c, "k1"), 200);
    assert_eq!(with(&mut c, "k1"), 200);
    assert_eq!(with(&mut c, "k2"), 503);
    assert_eq!(with(&mut c, "k2"), 200);
    let keyless: Vec<u16> = (0..4).map(|_| c.get("/flaky").unwrap().status()).collect();
    assert_eq!(keyless, [503, 200, 503, 200]);
    let s = blue.stats();
    assert_eq!(s.flaky_keys.get("k1"), Some(&3));
    assert_eq!(s.flaky_keys.get("k2"), Some(&2));
    assert_eq!((s.flaky_keyless, s.path("/flaky")), (4, 9));
    let stats = c.get("/stats").unwrap().text();
    assert!(stats.contains(r#""paths":{"/flaky":9}"#), "{stats}");
    assert!(stats.contains(r#""flaky_keys":{"k1":3,"k2":2}"#), "{stats}");
    blue.reset_stats();
    assert_eq!(c.get("/flaky").unwrap().status(), 503);
}

#[test]
fn slow_waits() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    let t = Instant::now();
    assert_eq!(c.get("/slow").unwrap().status(), 200);
    let e = t.elapsed();
    assert!(
        e >= Duration::from_millis(350) && e < Duration::from_secs(3),
        "{e:?}"
    );
    let t = Instant::now();
    let r = c.get("/slow?ms=20").unwrap();
    assert!(t.elapsed() < Duration::from_millis(340));
    assert!(r.text().contains(r#""ms":20"#));
}

#[test]
fn orders_count_and_methods() {
    let green = start("green");
    let mut c = Client::connect(green.addr()).unwrap();
    let r = c
        .request(
            "POST",
            "/orders",
            &[("content-type", "application/json")],
            br#"{"item":1}"#,
        )
        .unwrap();
    assert_eq!(
        (r.status(), r.text().as_str()),
        (200, r#"{"upstream":"green","order":1}"#)
    );
    let r = c.request("POST", "/orders", &[], b"").unwrap();
    assert!(r.text().contains(r#""order":2"#));
    let r = c.get("/orders").unwrap();
    assert_eq!(
        (r.status(), r.header("allow").as_deref()),
        (405, Some("POST"))
    );
    assert_eq!(green.stats().orders, 2);
    // Chunked request body with Expect: 100-continue.
    let raw = b"POST /orders HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let r = c.send(raw, false).unwrap();
    assert!(r.text().contains(r#""order":3"#));
}

#[test]
fn status_stream_echo() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    for s in [200u16, 204, 404, 429, 500, 502, 503, 504] {
        let r = c.get(&format!("/status/{s}")).unwrap();
        assert_eq!(r.status(), s);
        assert!(r.complete);
    }
    assert_eq!(c.get("/status/99").unwrap().status(), 404);
    assert_eq!(c.get("/nope").unwrap().status(), 404);

    let t = Instant::now();
    let r = c.get("/stream?chunks=4&delay_ms=30").unwrap();
    assert!(t.elapsed() >= Duration::from_millis(90));
    assert_eq!(r.head.framing(), weir_http::BodyFraming::Chunked);
    assert_eq!(
        r.text(),
        "{\"chunk\":0}\n{\"chunk\":1}\n{\"chunk\":2}\n{\"chunk\":3}\n"
    );
    assert!(r.complete);

    let r = c
        .request(
            "PUT",
            "/echo?q=1",
            &[("X-Request-Id", "abc"), ("x-a", "\"quoted\"")],
            b"hi",
        )
        .unwrap();
    let body = r.text();
    assert!(body.contains(r#""method":"PUT""#), "{body}");
    assert!(body.contains(r#""target":"/echo?q=1""#), "{body}");
    assert!(body.contains(r#"["X-Request-Id","abc"]"#), "{body}");
    assert!(body.contains(r#"["x-a","\"quoted\""]"#), "{body}");
    assert!(body.contains(r#""body_len":2,"body":"hi""#), "{body}");
    // Still usable after all of that.
    assert_eq!(c.get("/ok").unwrap().status(), 200);
}

#[test]
fn close_truncates() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c.get("/close").unwrap();
    assert_eq!(
        (r.status(), r.body.as_slice(), r.complete),
        (200, &b"truncated-"[..], false)
    );
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c.get("/close?chunked=1").unwrap();
    assert_eq!((r.body.as_slice(), r.complete), (&b"truncated-"[..], false));
}

#[test]
fn down_and_up() {
    let blue = start("blue");
    let mut kept = Client::connect(blue.addr()).unwrap();
    assert_eq!(kept.get("/ok").unwrap().status(), 200);
    blue.set_down(true);
    assert!(blue.is_down());
    // A request on an existing connection gets no answer.
    assert!(kept.get("/ok").is_err());
    // New connections are closed at once.
    let mut s = TcpStream::connect(blue.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\n");
    let mut buf = [0u8; 64];
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    blue.set_down(false);
    let mut c = Client::connect(blue.addr()).unwrap();
    assert_eq!(c.get("/ok").unwrap().status(), 200);
}

#[test]
fn bad_requests_get_400_and_close() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c
        .send(b"POST /orders HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n", false)
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(!r.head.keep_alive());
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c.send(b"GET / HTTP/2.0\r\n\r\n", false).unwrap();
    assert_eq!(r.status(), 505);
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c
        .send(
            b"POST /orders HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            false,
        )
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(blue.stats().orders, 0);
}

#[test]
fn http10_and_pipelining() {
    let blue = start("blue");
    let mut c = Client::connect(blue.addr()).unwrap();
    let r = c.send(b"GET /ok HTTP/1.0\r\n\r\n", false).unwrap();
    assert_eq!(
        (r.status(), r.header("connection").as_deref()),
        (200, Some("close"))
    );
    let mut c = Client::connect(blue.addr()).unwrap();
    c.stream()
        .write_all(
            b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\nGET /status/503 HTTP/1.1\r\nhost: x\r\n\r\n",
        )
        .unwrap();
    assert_eq!(c.read_response(false).unwrap().status(), 200);
    assert_eq!(c.read_response(false).unwrap().status(), 503);
}

#[test]
fn loopback_only_and_stop() {
    assert!(DemoUpstream::start("x", "0.0.0.0:0").is_err());
    let blue = start("blue");
    let addr = blue.addr();
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(c.get("/ok").unwrap().status(), 200);
    let t = Instant::now();
    blue.stop();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(c.get("/ok").is_err());
    // The port is free again.
    let again = DemoUpstream::start("blue", addr).unwrap();
    assert_eq!(again.addr(), addr);
}

#[test]
fn names_in_bodies() {
    let green = start("green");
    assert_eq!(green.name(), "green");
    let mut c = Client::connect(green.addr()).unwrap();
    assert!(
        c.get("/flaky")
            .unwrap()
            .text()
            .starts_with(r#"{"upstream":"green""#)
    );
}
