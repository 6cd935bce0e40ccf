//! Upstream balancing and outlier ejection (docs/CONFIG.md `[upstreams.outlier]`,
//! docs/HTTP.md "Upstreams"), on real sockets: upstreams are threads of the test whose
//! answer can be switched, a dead endpoint is a closed loopback port. Ejections last
//! 300ms where a scenario waits for a return, 30s where it must not see one.

use crate::client;
use crate::harness::{Gateway, dead_addr};
use crate::scenarios::metric;
use crate::upstreams::RawUpstream;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// An upstream answering every request with the status it is set to.
struct Switchable {
    up: RawUpstream,
    status: Arc<AtomicU16>,
}

impl Switchable {
    fn start(status: u16) -> Switchable {
        let s = Arc::new(AtomicU16::new(status));
        let st = s.clone();
        let up = RawUpstream::start(move |_, conn| {
            let code = st.load(Ordering::SeqCst);
            let resp = format!(
                "HTTP/1.1 {code} X\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok"
            );
            conn.write_all(resp.as_bytes()).is_ok()
        });
        Switchable { up, status: s }
    }

    fn requests(&self) -> usize {
        self.up.requests()
    }
}

/// One upstream `blue` over `endpoints`, its `[upstreams.outlier]` lines, and one route
/// retrying 5xx and connect failures up to `attempts` times with a generous budget.
fn outlier_config(endpoints: &[SocketAddr], outlier: &str, attempts: u32) -> String {
    let eps: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        "[server]\nlisten = \"127.0.0.1:8080\"\ninstance = \"e2e\"\n\n\
         [[upstreams]]\nname = \"blue\"\nendpoints = [{}]\nconnect_timeout_ms = 200\n\
         [upstreams.outlier]\n{outlier}\n\n\
         [[routes]]\nid = \"pool\"\nmatch = {{ path_prefix = \"/\" }}\nupstream = \"blue\"\n\
         [routes.retry]\nmax_attempts = {attempts}\non = [\"5xx\", \"connect_failure\"]\n\
         budget = {{ ratio = 1.0, min_per_sec = 1000 }}\n\
         backoff = {{ base = \"1ms\", max = \"2ms\" }}\n",
        eps.join(", ")
    )
}

/// Upstreams answering `statuses` behind a gateway with `outlier` (see [`outlier_config`]).
fn pool<const N: usize>(
    bin: &Path,
    statuses: [u16; N],
    outlier: &str,
    attempts: u32,
) -> ([Switchable; N], Vec<SocketAddr>, Gateway) {
    let ups = statuses.map(Switchable::start);
    let addrs: Vec<SocketAddr> = ups.iter().map(|u| u.up.addr).collect();
    let gw = Gateway::start(bin, &outlier_config(&addrs, outlier, attempts));
    (ups, addrs, gw)
}

/// `GET /admin/upstreams`: per endpoint (address, healthy, ejections, ejected_for_ms),
/// and the upstream's panic flag.
fn upstreams(gw: &Gateway) -> (Vec<(String, bool, u64, u64)>, bool) {
    let r = gw.admin("GET", "/admin/upstreams");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.text()).expect("JSON");
    let u = &v["upstreams"][0];
    assert_eq!(u["name"], "blue", "{v}");
    assert!(v["revision"].as_u64().is_some(), "{v}");
    let eps = u["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .map(|e| {
            assert!(e["inflight"].as_u64().is_some(), "{e}");
            (
                e["address"].as_str().unwrap_or("").to_string(),
                e["healthy"].as_bool().expect("healthy"),
                e["ejections"].as_u64().expect("ejections"),
                e["ejected_for_ms"].as_u64().expect("ejected_for_ms"),
            )
        })
        .collect();
    (eps, u["panic"].as_bool().expect("panic"))
}

fn healthy(gw: &Gateway) -> Vec<bool> {
    upstreams(gw).0.iter().map(|e| e.1).collect()
}

/// `n` requests; every answer must be `want` (the gateway's own or forwarded).
fn requests_all(gw: &Gateway, n: usize, want: u16) {
    for i in 0..n {
        let r = client::get(gw.addr, "/x", &[]);
        assert_eq!(r.status, want, "request {i}: {r:?}\n{}", gw.stderr_text());
    }
}

fn series(gw: &Gateway, name: &str, endpoint: SocketAddr, extra: &str) -> Option<f64> {
    let m = gw.admin("GET", "/metrics").text();
    metric(
        &m,
        &format!("{name}{{upstream=\"blue\",endpoint=\"{endpoint}\"{extra}}}"),
    )
}

/// Requests until endpoint `i` is ejected; returns an instant before the ejection (the
/// start of the request that caused it), so time measured from it is never short.
fn eject(gw: &Gateway, i: usize) -> Instant {
    let limit = Instant::now() + Duration::from_secs(5);
    loop {
        let before = Instant::now();
        requests_all(gw, 1, 200);
        if !healthy(gw)[i] {
            return before;
        }
        assert!(Instant::now() < limit, "endpoint {i} never ejected");
    }
}

/// Waits (bounded) until endpoint `i` is back in rotation; the time since `since`.
fn back_after(gw: &Gateway, i: usize, since: Instant) -> Duration {
    while !healthy(gw)[i] {
        thread::sleep(Duration::from_millis(5));
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "endpoint {i} never came back"
        );
    }
    since.elapsed()
}

/// One endpoint answering 503 is ejected after two in a row; clients keep getting 200
/// (the retry goes to another endpoint); it gets nothing while ejected, comes back after
/// 1 × base (300ms), and its second ejection lasts 2 × base. Attempts in the access log
/// name their endpoint.
pub fn outlier_failing_endpoint_ejected_and_back_after_base(bin: &Path) {
    let outlier = "consecutive_5xx = 2\nbase_ejection = \"300ms\"\nmax_ejection = \"3s\"\nmax_ejection_percent = 50";
    let (ups, addrs, gw) = pool(bin, [200, 503, 200], outlier, 3);
    let started = eject(&gw, 1);
    assert_eq!(ups[1].requests(), 2, "ejected after exactly two 5xx");
    let (eps, panic) = upstreams(&gw);
    assert_eq!(eps[1].0, addrs[1].to_string());
    assert_eq!((eps[1].2, panic), (1, false), "{eps:?}");
    assert!((1..=300).contains(&eps[1].3), "ejected_for_ms: {eps:?}");
    assert_eq!(
        series(&gw, "weir_endpoint_healthy", addrs[1], ""),
        Some(0.0)
    );
    assert_eq!(
        series(&gw, "weir_endpoint_healthy", addrs[0], ""),
        Some(1.0)
    );
    let reason = ",reason=\"consecutive_5xx\"";
    assert_eq!(
        series(&gw, "weir_ejections_total", addrs[1], reason),
        Some(1.0)
    );
    // While ejected it gets no attempts (checked only while surely within the 300ms).
    ups[1].status.store(200, Ordering::SeqCst);
    requests_all(&gw, 6, 200);
    if started.elapsed() < Duration::from_millis(250) {
        assert_eq!(ups[1].requests(), 2, "an ejected endpoint got an attempt");
    }
    let back = back_after(&gw, 1, started);
    assert!(
        back >= Duration::from_millis(300),
        "back after {back:?}, base is 300ms"
    );
    let before = ups[1].requests();
    requests_all(&gw, 6, 200);
    assert!(ups[1].requests() > before, "back in rotation");
    // The second ejection lasts 2 × base.
    ups[1].status.store(503, Ordering::SeqCst);
    let started = eject(&gw, 1);
    let (eps, _) = upstreams(&gw);
    assert_eq!(eps[1].2, 2, "{eps:?}");
    assert!((1..=600).contains(&eps[1].3), "{eps:?}");
    ups[1].status.store(200, Ordering::SeqCst);
    let back = back_after(&gw, 1, started);
    assert!(
        back >= Duration::from_millis(600),
        "back after {back:?}, 2 x base is 600ms"
    );
    let log = gw.stdout_text();
    assert!(
        log.contains(&format!("\"endpoint\":\"{}\"", addrs[1])),
        "access log attempts name their endpoint:\n{log}"
    );
}

/// Two of three endpoints failing with `max_ejection_percent = 50`: exactly one is
/// ejected (⌊3 × 50 %⌋ = 1), however many failures the other one has.
pub fn outlier_two_of_three_failing_at_half_ejects_one(bin: &Path) {
    let outlier = "consecutive_5xx = 2\nbase_ejection = \"30s\"\nmax_ejection_percent = 50";
    let (ups, _, gw) = pool(bin, [503, 503, 200], outlier, 3);
    requests_all(&gw, 30, 200);
    let h = healthy(&gw);
    assert_eq!(h.iter().filter(|h| !**h).count(), 1, "{h:?}");
    assert!(h[2], "the healthy endpoint stays: {h:?}");
    let (eps, panic) = upstreams(&gw);
    assert_eq!(eps.iter().map(|e| e.2).sum::<u64>(), 1, "{eps:?}");
    assert!(!panic);
    // The one left failing kept its share of first attempts.
    let still = if h[0] { &ups[0] } else { &ups[1] };
    assert!(still.requests() >= 8, "{} attempts", still.requests());
}

/// A dead port is ejected on connect failures (`consecutive_failures`); clients keep
/// getting 200 from the other endpoint.
pub fn outlier_dead_port_ejected_on_connect_failures(bin: &Path) {
    let good = Switchable::start(200);
    let dead = dead_addr();
    let outlier = "consecutive_failures = 2\nbase_ejection = \"30s\"\nmax_ejection_percent = 50";
    let gw = Gateway::start(bin, &outlier_config(&[dead, good.up.addr], outlier, 2));
    requests_all(&gw, 10, 200);
    assert_eq!(healthy(&gw), [false, true]);
    let reason = ",reason=\"consecutive_failures\"";
    assert_eq!(series(&gw, "weir_ejections_total", dead, reason), Some(1.0));
    let attempts = good.requests();
    requests_all(&gw, 5, 200);
    assert_eq!(
        good.requests(),
        attempts + 5,
        "one attempt each, on the live endpoint"
    );
}

/// Panic: with 100 % ejectable and a 50 % threshold, two of three ejected leaves 33 %
/// healthy, so every endpoint gets traffic again (their health stays 0).
pub fn outlier_panic_sends_traffic_to_all(bin: &Path) {
    let outlier = "consecutive_5xx = 1\nbase_ejection = \"30s\"\nmax_ejection_percent = 100\npanic_threshold = 50";
    let (ups, _, gw) = pool(bin, [503, 503, 200], outlier, 1);
    let started = Instant::now();
    while upstreams(&gw).0.iter().filter(|e| !e.1).count() < 2 {
        let _ = client::get(gw.addr, "/x", &[]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never two ejected"
        );
    }
    let (eps, panic) = upstreams(&gw);
    assert!(panic, "{eps:?}");
    assert_eq!(healthy(&gw), [false, false, true]);
    let m = gw.admin("GET", "/metrics").text();
    assert_eq!(
        metric(&m, "weir_upstream_panic{upstream=\"blue\"}"),
        Some(1.0)
    );
    let before = [ups[0].requests(), ups[1].requests()];
    for _ in 0..9 {
        let _ = client::get(gw.addr, "/x", &[]);
    }
    assert!(
        ups[0].requests() > before[0] && ups[1].requests() > before[1],
        "in panic the ejected endpoints get traffic: {before:?} -> {} {}",
        ups[0].requests(),
        ups[1].requests()
    );
    assert_eq!(
        healthy(&gw),
        [false, false, true],
        "health stays 0 in panic"
    );
}
