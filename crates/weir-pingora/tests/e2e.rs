//! End-to-end checks specific to `weir-pingora` (the contract's scenarios are the shared
//! suite, `tests/shared.rs`): the example config, `--check`, SIGTERM, the admin port,
//! streaming under Pingora's per-try read timeout, and `max_connections` in the
//! [`HeadGuard`](weir_pingora::HeadGuard).

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use weir_demo::DemoUpstream;
use weir_e2e::client::{self, Client, request};
use weir_e2e::upstreams::RawUpstream;
use weir_e2e::{Gateway, scenarios};

const BIN: &str = env!("CARGO_BIN_EXE_weir-pingora");

fn bin() -> &'static Path {
    Path::new(BIN)
}

struct Demo {
    blue: DemoUpstream,
    _green: DemoUpstream,
}

/// `examples/gateway.toml` pointed at two fresh demo upstreams, with a catch-all route to
/// blue (per-try 300 ms) for the demo's `/stream` and `/echo`.
fn example(catch_all: bool) -> (Demo, Gateway) {
    let blue = DemoUpstream::start("blue", "127.0.0.1:0").unwrap();
    let green = DemoUpstream::start("green", "127.0.0.1:0").unwrap();
    let mut config = weir_cli::demo::config(blue.addr(), green.addr());
    if catch_all {
        config.push_str(
            "\n[[routes]]\nid = \"misc\"\nmatch = { path_prefix = \"/\" }\nupstream = \"blue\"\n\n\
             [routes.timeouts]\ntotal = \"5s\"\nper_try = \"300ms\"\n",
        );
    }
    let gw = Gateway::start(bin(), &config);
    (
        Demo {
            blue,
            _green: green,
        },
        gw,
    )
}

#[test]
fn example_config_proxies_unchanged_with_weir_headers() {
    let (_d, gw) = example(false);
    let r = client::get(gw.addr, "/ok", &["x-request-id: abc-123"]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-upstream"), Some("blue"));
    assert_eq!(r.header("x-weir-attempts"), Some("1"));
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    assert_eq!(r.header("x-weir-instance"), Some("gw-a"));
    assert!(r.header("x-weir-reason").is_none());
    assert!(r.text().contains("\"upstream\":\"blue\""), "{}", r.text());
}

#[test]
fn admin_port_proxies_nothing() {
    let (d, gw) = example(false);
    assert_eq!(gw.admin("GET", "/ok").status, 404);
    assert_eq!(d.blue.stats().total, 0);
}

/// Pingora's SIGTERM would sleep a fixed grace period: weir-pingora drains and exits 0 as
/// soon as the in-flight request is answered.
#[test]
fn sigterm_drains_and_exits_0() {
    let (_d, mut gw) = example(false);
    let addr = gw.addr;
    let inflight = thread::spawn(move || client::get(addr, "/slow", &[]));
    thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    gw.signal("TERM");
    let st = gw.wait_exit(Duration::from_secs(10)).expect("exited");
    assert!(st.success(), "{st}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let r = inflight.join().unwrap();
    assert_eq!(r.status, 504, "the in-flight request was answered: {r:?}");
}

#[test]
fn check_validates_the_config() {
    let dir = weir_e2e::harness::scratch_dir();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, weir_cli::demo::EXAMPLE).unwrap();
    let out = std::process::Command::new(bin())
        .args(["--check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("flaky") && text.contains("orders"), "{text}");

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        weir_cli::demo::EXAMPLE.replace("burst = 2", "burst = 0"),
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

/// A taken listen or admin port is an immediate error (exit 1, the address in the message),
/// not Pingora's 30 s of silent bind retries with the admin port already answering.
#[test]
fn taken_port_is_an_immediate_error() {
    let dir = weir_e2e::harness::scratch_dir();
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, weir_cli::demo::EXAMPLE).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    for (listen, admin) in [
        (taken_addr.clone(), "127.0.0.1:0".to_owned()),
        ("127.0.0.1:0".to_owned(), taken_addr.clone()),
    ] {
        let mut child = std::process::Command::new(bin())
            .arg("--config")
            .arg(&config)
            .args(["--listen", &listen, "--admin", &admin])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Without the check the process would keep running (Pingora's bind fails in a
        // service thread); bound the wait instead of hanging.
        let until = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > until {
                let _ = child.kill();
                panic!("--listen {listen} --admin {admin}: still running with a taken port");
            }
            thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("cannot listen on {taken_addr}")) && err.contains("in use"),
            "{err}"
        );
    }
    drop(taken);
}

/// Pingora applies the per-try timeout to every upstream read: a body whose chunks come
/// 100 ms apart streams for longer than per_try (300 ms) in total; the upstream sees the
/// request id.
#[test]
fn streaming_body_longer_than_per_try_and_request_headers_pass_through() {
    let (_d, gw) = example(true);
    let t = Instant::now();
    let r = client::get(gw.addr, "/stream?chunks=5&delay_ms=100", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.header("x-weir-attempts"), Some("1"));
    let r = Client::connect(gw.addr)
        .and_then(|mut c| {
            c.exchange(
                request("POST", "/echo", &["x-request-id: echo-1"], Some(b"hello")).as_bytes(),
                false,
            )
        })
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let body = r.text();
    assert!(
        body.contains("echo-1") && body.contains("\"body\":\"hello\""),
        "{body}"
    );
}

/// `max_connections = 1`: a second connection is not served while the first is open (a
/// kept-alive idle one counts), and is served once it closes.
#[test]
fn max_connections_holds_new_connections_until_one_closes() {
    let up = RawUpstream::echo();
    let gw = Gateway::start(
        bin(),
        &scenarios::config_with(
            &[("echo", up.addr)],
            "[[routes]]\nid = \"all\"\nmatch = { path_prefix = \"/\" }\nupstream = \"echo\"\n",
            "max_connections = 1",
        ),
    );
    // The harness's readiness probe connected once; let its slot go.
    thread::sleep(Duration::from_millis(100));
    let mut first = Client::connect(gw.addr).unwrap();
    assert_eq!(first.get("/a", &[]).unwrap().status, 200);
    let addr = gw.addr;
    let t = Instant::now();
    let second = thread::spawn(move || {
        let r = client::get(addr, "/b", &[]);
        (r, t.elapsed())
    });
    thread::sleep(Duration::from_millis(400));
    assert!(!second.is_finished(), "second connection served while full");
    drop(first);
    let (r, took) = second.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(took >= Duration::from_millis(400), "{took:?}");
}
