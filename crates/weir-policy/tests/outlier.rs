//! Upstream balancing and outlier ejection through the engine, on a manual clock: the
//! config checks, the request path (ejected endpoints get no attempts, retries go
//! elsewhere, panic), the metrics and `GET /admin/upstreams`, and state across reloads.

use std::sync::Arc;
use std::time::Duration;
use weir_core::{Clock, ManualClock, Nanos};
use weir_policy::*;

struct NoTimer;
impl Timer for NoTimer {
    async fn sleep(&self, _: Duration) {}
}

const EPS: [&str; 3] = ["127.0.0.1:18181", "127.0.0.1:18183", "127.0.0.1:18184"];

fn config(outlier: &str, endpoints: &[&str], retries: u32) -> String {
    let eps: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    format!(
        r#"
[log]
access = "off"
[[upstreams]]
name = "blue"
endpoints = [{}]
{outlier}
[[routes]]
id = "r"
match = {{ path_prefix = "/" }}
upstream = "blue"
[routes.retry]
max_attempts = {retries}
on = ["connect_failure", "5xx"]
[routes.retry.backoff]
base = "1ms"
max = "1ms"
"#,
        eps.join(", ")
    )
}

const OUTLIER: &str = r#"
[upstreams.outlier]
consecutive_failures = 2
consecutive_5xx = 2
base_ejection = "300ms"
max_ejection = "3s"
max_ejection_percent = 50
panic_threshold = 30
"#;

struct Gw {
    engine: Engine,
    clock: Arc<ManualClock>,
}

fn gw(text: &str) -> Gw {
    let clock = Arc::new(ManualClock::new(Nanos::from_secs(100)));
    let c: Arc<dyn Clock + Send + Sync> = clock.clone();
    let engine = Engine::from_toml_seeded(text, "gw.toml", c, 7).unwrap();
    Gw { engine, clock }
}

impl Gw {
    /// One request; `up` answers each attempt by endpoint. Returns the status and the
    /// endpoints tried, in order.
    fn request(&self, up: impl Fn(&str) -> AttemptResult) -> (u16, Vec<String>) {
        let req = RequestInfo {
            method: "GET",
            path: "/x",
            headers: &(),
            client_ip: None,
            body_len: Some(0),
        };
        let mut flow = self.engine.begin(&req);
        assert!(matches!(
            __block_on(flow.admit(&NoTimer)),
            Admission::Proceed
        ));
        let mut tried = Vec::new();
        let status = loop {
            let a = match flow.next_attempt() {
                Ok(a) => a,
                Err(r) => break r.status,
            };
            let ep = a.endpoint.to_string();
            let result = up(&ep);
            tried.push(ep);
            match flow.on_attempt(result) {
                Next::Forward { .. } => match result {
                    AttemptResult::Response { status } => break status,
                    _ => unreachable!(),
                },
                Next::Retry { .. } => {}
                Next::Respond(r) => break r.status,
            }
        };
        flow.finish(status, None);
        (status, tried)
    }

    fn upstreams(&self) -> serde_json::Value {
        let r = self.engine.admin("GET", "/admin/upstreams");
        assert_eq!(r.status, 200);
        serde_json::from_slice(&r.body).unwrap()
    }

    fn healthy(&self) -> Vec<bool> {
        let v = self.upstreams();
        v["upstreams"][0]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["healthy"].as_bool().unwrap())
            .collect()
    }

    fn metrics(&self) -> String {
        String::from_utf8(self.engine.admin("GET", "/metrics").body).unwrap()
    }
}

fn refused_on(bad: &'static [&'static str]) -> impl Fn(&str) -> AttemptResult {
    move |ep| {
        if bad.contains(&ep) {
            AttemptResult::ConnectFailure
        } else {
            AttemptResult::Response { status: 200 }
        }
    }
}

#[test]
fn a_failing_endpoint_is_ejected_retried_around_and_comes_back() {
    let g = gw(&config(OUTLIER, &EPS, 2));
    // Every request succeeds: a failed attempt is retried on another endpoint.
    let mut tried = Vec::new();
    for _ in 0..6 {
        let (status, t) = g.request(refused_on(&["127.0.0.1:18183"]));
        assert_eq!(status, 200);
        if t.len() == 2 {
            assert_ne!(t[0], t[1], "a retry goes to a different endpoint");
        }
        tried.extend(t);
    }
    assert_eq!(g.healthy(), [true, false, true]);
    let bad_attempts = tried.iter().filter(|e| *e == EPS[1]).count();
    assert_eq!(bad_attempts, 2, "ejected after 2 failures: {tried:?}");
    // While ejected, it gets no attempts.
    for _ in 0..6 {
        let (_, t) = g.request(refused_on(&[]));
        assert!(!t.contains(&EPS[1].to_string()));
    }
    let v = g.upstreams();
    let e = &v["upstreams"][0]["endpoints"][1];
    assert_eq!(e["address"], EPS[1]);
    assert_eq!(e["ejections"], 1);
    assert_eq!(e["ejected_for_ms"], 300);
    assert_eq!(e["inflight"], 0);
    assert_eq!(v["upstreams"][0]["panic"], false);
    let m = g.metrics();
    for line in [
        "weir_endpoint_healthy{upstream=\"blue\",endpoint=\"127.0.0.1:18183\"} 0",
        "weir_endpoint_healthy{upstream=\"blue\",endpoint=\"127.0.0.1:18181\"} 1",
        "weir_ejections_total{upstream=\"blue\",endpoint=\"127.0.0.1:18183\",reason=\"consecutive_failures\"} 1",
        "weir_upstream_panic{upstream=\"blue\"} 0",
    ] {
        assert!(m.contains(line), "{line} missing:\n{m}");
    }
    // After 1 × base it is back; failing again, the second ejection lasts 2 × base.
    g.clock.advance(Nanos::from_millis(300));
    assert_eq!(g.healthy(), [true, true, true]);
    for _ in 0..6 {
        g.request(refused_on(&["127.0.0.1:18183"]));
    }
    let v = g.upstreams();
    assert_eq!(v["upstreams"][0]["endpoints"][1]["ejected_for_ms"], 600);
    assert_eq!(v["upstreams"][0]["endpoints"][1]["ejections"], 2);
}

#[test]
fn the_maximum_holds_and_panic_uses_every_endpoint() {
    // Two of three failing with 50 %: one ejected, the other keeps its share.
    let g = gw(&config(OUTLIER, &EPS, 1));
    for _ in 0..12 {
        g.request(refused_on(&["127.0.0.1:18181", "127.0.0.1:18183"]));
    }
    assert_eq!(g.healthy().iter().filter(|h| !**h).count(), 1);
    // 100 % allowed and a 50 % threshold: two ejected of three is panic, all used.
    let panicky = OUTLIER
        .replace("max_ejection_percent = 50", "max_ejection_percent = 100")
        .replace("panic_threshold = 30", "panic_threshold = 50");
    let g = gw(&config(&panicky, &EPS, 1));
    for _ in 0..12 {
        g.request(refused_on(&["127.0.0.1:18181", "127.0.0.1:18183"]));
    }
    assert_eq!(g.healthy(), [false, false, true]);
    assert_eq!(g.upstreams()["upstreams"][0]["panic"], true);
    assert!(
        g.metrics()
            .contains("weir_upstream_panic{upstream=\"blue\"} 1")
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        seen.extend(g.request(refused_on(&[])).1);
    }
    assert_eq!(
        seen.len(),
        3,
        "panic: every endpoint gets traffic: {seen:?}"
    );
}

#[test]
fn five_xx_streaks_eject_and_a_lone_host_stays() {
    let five = |_: &str| AttemptResult::Response { status: 503 };
    let g = gw(&config(OUTLIER, &EPS[..2], 1));
    for _ in 0..4 {
        g.request(five);
    }
    assert_eq!(g.healthy().iter().filter(|h| !**h).count(), 1);
    assert!(g.metrics().contains("reason=\"consecutive_5xx\"} 1"));
    let g = gw(&config(OUTLIER, &EPS[..1], 1));
    for _ in 0..10 {
        g.request(five);
    }
    assert_eq!(g.healthy(), [true]);
}

#[test]
fn least_request_and_no_outlier_section_never_eject() {
    let g = gw(&config("", &EPS, 1));
    for _ in 0..10 {
        g.request(refused_on(&["127.0.0.1:18181"]));
    }
    assert_eq!(g.healthy(), [true, true, true]);
    let lr = format!("balance = \"least_request\"\n{OUTLIER}");
    let g = gw(&config(&lr, &EPS, 1));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        seen.extend(g.request(refused_on(&["127.0.0.1:18184"])).1);
    }
    assert_eq!(seen.len(), 3);
    assert_eq!(g.healthy(), [true, true, false]);
}

#[test]
fn state_survives_a_reload_with_the_same_endpoints() {
    let g = gw(&config(OUTLIER, &EPS, 1));
    for _ in 0..6 {
        g.request(refused_on(&["127.0.0.1:18183"]));
    }
    assert_eq!(g.healthy(), [true, false, true]);
    let same = config(
        &OUTLIER.replace("consecutive_5xx = 2", "consecutive_5xx = 3"),
        &EPS,
        1,
    );
    g.engine.reload_from_toml(&same, "gw.toml").unwrap();
    assert_eq!(g.healthy(), [true, false, true]);
    let other = config(OUTLIER, &EPS[..2], 1);
    g.engine.reload_from_toml(&other, "gw.toml").unwrap();
    assert_eq!(g.healthy(), [true, true]);
}

#[test]
fn every_key_is_checked_and_check_prints_the_settings() {
    let cases = [
        (
            "max_ejection_percent = 50",
            "max_ejection_percent = 101",
            "max_ejection_percent: must be a percentage between 0 and 100",
        ),
        (
            "panic_threshold = 30",
            "panic_threshold = 200",
            "panic_threshold: must be a percentage between 0 and 100",
        ),
        (
            "consecutive_failures = 2",
            "consecutive_failures = 0",
            "consecutive_failures: must be at least 1",
        ),
        (
            "consecutive_5xx = 2",
            "consecutive_5xx = 70000",
            "consecutive_5xx: out of range (at most 65535)",
        ),
        (
            "base_ejection = \"300ms\"",
            "base_ejection = \"5s\"",
            "max_ejection: max_ejection (3s) must not be less than base_ejection (5s)",
        ),
        (
            "base_ejection = \"300ms\"",
            "base_ejection = \"0ms\"",
            "base_ejection: must be longer than 0",
        ),
        (
            "base_ejection = \"300ms\"",
            "base_ejection = 300",
            "base_ejection: duration 300 has no unit",
        ),
        (
            "panic_threshold = 30",
            "jitter = 1.5",
            "jitter: must be between 0 and 1",
        ),
        (
            "panic_threshold = 30",
            "failure_percentage = -0.1",
            "failure_percentage: must be between 0 and 1",
        ),
        (
            "panic_threshold = 30",
            "min_requests = 0",
            "min_requests: must be at least 1",
        ),
        (
            "panic_threshold = 30",
            "interval = \"10\"",
            "interval: duration \"10\" has no unit",
        ),
        (
            "panic_threshold = 30",
            "ejection = \"1s\"",
            "ejection: unknown field",
        ),
    ];
    for (from, to, want) in cases {
        let text = config(&OUTLIER.replace(from, to), &EPS, 1);
        let e = config::parse(&text, "gw.toml").unwrap_err().to_string();
        // The line of the key the error names.
        let key = want.split(':').next().unwrap();
        let line = text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        let prefix = format!("gw.toml:{line}: upstreams[0].outlier.{key}");
        assert!(e.starts_with(&prefix) && e.contains(want), "{to}: {e}");
    }
    let text = config("balance = \"random\"", &EPS, 1);
    let e = config::parse(&text, "gw.toml").unwrap_err().to_string();
    assert!(
        e.contains("upstreams[0].balance") && e.contains("round_robin"),
        "{e}"
    );
    let set = config::parse(&config(OUTLIER, &EPS, 1), "gw.toml").unwrap();
    let d = set.describe();
    assert!(
        d.contains("balance round_robin, outlier: consecutive_failures 2, consecutive_5xx 2, failure_percentage off (min_requests 20 per 10s), ejection 300ms x n up to 3s (jitter 0), max_ejection_percent 50, panic_threshold 30"),
        "{d}"
    );
    let d = config::parse(&config("", &EPS, 1), "gw.toml")
        .unwrap()
        .describe();
    assert!(
        d.contains("balance round_robin, no outlier ejection"),
        "{d}"
    );
}
