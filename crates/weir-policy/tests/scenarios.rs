//! Seed scenarios (PRODUCT.md) on a manual clock: a simulated client and upstream drive
//! `Engine` through whole requests. No sockets, no sleeping, deterministic.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir_core::{Clock, ManualClock, Nanos};
use weir_policy::*;

struct ManualTimer(Arc<ManualClock>);
impl Timer for ManualTimer {
    async fn sleep(&self, d: Duration) {
        self.0.advance(Nanos::from(d));
    }
}

/// What the simulated upstream does for one attempt.
#[derive(Clone, Copy)]
enum Up {
    /// Answers with this status after this long.
    Status(u16, u64),
    /// Connection refused.
    Refused,
}

struct Sim {
    engine: Engine,
    clock: Arc<ManualClock>,
    calls: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Out {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    upstream_calls: u64,
    elapsed_ms: u64,
}

impl Out {
    fn h(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn reason(&self) -> Option<&str> {
        self.h("x-weir-reason")
    }
}

fn sim(toml: &str) -> Sim {
    let clock = Arc::new(ManualClock::new(Nanos::from_secs(1000)));
    let c: Arc<dyn Clock + Send + Sync> = clock.clone();
    let engine = Engine::from_toml_with_clock(toml, "test.toml", c).unwrap();
    Sim {
        engine,
        clock,
        calls: Arc::new(AtomicU64::new(0)),
    }
}

impl Sim {
    fn replica(&self, toml: &str) -> Sim {
        let c: Arc<dyn Clock + Send + Sync> = self.clock.clone();
        Sim {
            engine: Engine::from_toml_with_clock(toml, "test.toml", c).unwrap(),
            clock: self.clock.clone(),
            calls: self.calls.clone(),
        }
    }

    fn run(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        mut upstream: impl FnMut(u32) -> Up,
    ) -> Out {
        let timer = ManualTimer(self.clock.clone());
        let start = self.clock.now();
        let calls_before = self.calls.load(Ordering::SeqCst);
        let req = RequestInfo {
            method,
            path,
            headers: &headers,
            client_ip: Some("10.0.0.7".parse().unwrap()),
            body_len: Some(0),
        };
        let mut flow = self.engine.begin(&req);
        let resp = match __block_on(flow.admit(&timer)) {
            Admission::Respond(r) => (r.status, r.headers, r.body),
            Admission::Proceed => loop {
                let a = match flow.next_attempt() {
                    Ok(a) => a,
                    Err(r) => break (r.status, r.headers, r.body),
                };
                self.calls.fetch_add(1, Ordering::SeqCst);
                let result = match upstream(a.number) {
                    Up::Refused => AttemptResult::ConnectFailure,
                    Up::Status(s, ms) => {
                        let d = Duration::from_millis(ms);
                        if d > a.per_try_timeout {
                            self.clock.advance(a.per_try_timeout.into());
                            AttemptResult::PerTryTimeout
                        } else {
                            self.clock.advance(d.into());
                            AttemptResult::Response { status: s }
                        }
                    }
                };
                match flow.on_attempt(result) {
                    Next::Forward { headers } => {
                        let AttemptResult::Response { status } = result else {
                            panic!("forward without response")
                        };
                        break (status, headers, b"upstream".to_vec());
                    }
                    Next::Retry { backoff } => self.clock.advance(backoff.into()),
                    Next::Respond(r) => break (r.status, r.headers, r.body),
                }
            },
        };
        flow.finish(resp.0, None);
        Out {
            status: resp.0,
            headers: resp.1,
            body: resp.2,
            upstream_calls: self.calls.load(Ordering::SeqCst) - calls_before,
            elapsed_ms: (self.clock.now() - start).as_millis(),
        }
    }

    fn metrics(&self) -> String {
        String::from_utf8(self.engine.admin("GET", "/metrics").body).unwrap()
    }
}

const UPSTREAMS: &str = r#"
[server]
instance = "gw-a"
[log]
access = "off"
[store]
kind = "redis"
url = "redis://127.0.0.1:6379/0"
timeout_ms = 100
[[upstreams]]
name = "blue"
endpoints = ["127.0.0.1:18181"]
"#;

fn cfg(routes: &str) -> String {
    format!("{UPSTREAMS}{routes}")
}

/// A fake shared store: admits the first `limit` units per key; can fail or hang.
#[derive(Default)]
struct FakeStore {
    used: Mutex<HashMap<String, u64>>,
    limit: u64,
    fail: AtomicBool,
    hang: AtomicBool,
    keys: Mutex<Vec<String>>,
}

impl GlobalStore for FakeStore {
    fn acquire(
        &self,
        req: StoreRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send>> {
        if self.hang.load(Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        if self.fail.load(Ordering::SeqCst) {
            return Box::pin(async { Err(StoreError("connection refused".into())) });
        }
        self.keys.lock().unwrap().push(req.key.clone());
        let mut used = self.used.lock().unwrap();
        let u = used.entry(req.key).or_default();
        let d = if *u + req.cost <= self.limit {
            *u += req.cost;
            Decision {
                verdict: Verdict::Admit,
                remaining: self.limit - *u,
                retry_after: Nanos::ZERO,
                reset_after: Nanos::from_secs(30),
            }
        } else {
            Decision {
                verdict: Verdict::Reject,
                remaining: 0,
                retry_after: Nanos::from_millis(29_500),
                reset_after: Nanos::from_millis(29_500),
            }
        };
        Box::pin(async move { Ok(d) })
    }
}

const GLOBAL_OK: &str = r#"
[[routes]]
id = "ok"
match = { path_prefix = "/ok" }
upstream = "blue"
[routes.rate_limit]
algorithm = "token_bucket"
rate = 2
per = "60s"
burst = 2
key = ["route", "header:x-consumer-id"]
scope = "global"
on_store_error = "deny"
"#;

#[test]
fn replicas_share_a_global_limit() {
    let store = Arc::new(FakeStore {
        limit: 2,
        ..FakeStore::default()
    });
    let a = sim(&cfg(GLOBAL_OK));
    let b = a.replica(&cfg(GLOBAL_OK));
    let a = Sim {
        engine: a.engine.with_store(store.clone()),
        ..a
    };
    let b = Sim {
        engine: b.engine.with_store(store.clone()),
        ..b
    };
    let h = [("x-consumer-id", "alice")];
    let mut statuses = Vec::new();
    for i in 0..4 {
        let s = if i % 2 == 0 { &a } else { &b };
        statuses.push(s.run("GET", "/ok", &h, |_| Up::Status(200, 1)));
    }
    let codes: Vec<u16> = statuses.iter().map(|o| o.status).collect();
    assert_eq!(codes, [200, 200, 429, 429]);
    assert_eq!(a.calls.load(Ordering::SeqCst), 2, "upstream saw 2");
    let rejected = &statuses[2];
    assert_eq!(rejected.reason(), Some("rate_limited"));
    assert_eq!(rejected.h("retry-after"), Some("30"));
    assert_eq!(rejected.h("ratelimit-policy"), Some("\"ok\";q=2;w=60"));
    assert_eq!(rejected.h("ratelimit"), Some("\"ok\";r=0;t=30"));
    assert_eq!(statuses[0].h("ratelimit"), Some("\"ok\";r=1;t=30"));
    // Keys are hash-tagged by route and never contain the raw consumer id.
    let keys = store.keys.lock().unwrap();
    assert!(keys[0].starts_with("weir:{ok}:"), "{}", keys[0]);
    assert!(!keys[0].contains("alice"));
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "same key from both replicas"
    );
}

#[test]
fn store_failure_is_explicit_deny() {
    let store = Arc::new(FakeStore {
        limit: 100,
        ..FakeStore::default()
    });
    let s = sim(&cfg(GLOBAL_OK));
    let s = Sim {
        engine: s.engine.with_store(store.clone()),
        ..s
    };
    let h = [("x-consumer-id", "c")];
    store.fail.store(true, Ordering::SeqCst);
    let o = s.run("GET", "/ok", &h, |_| Up::Status(200, 1));
    assert_eq!(o.status, 503);
    assert_eq!(o.reason(), Some("ratelimit_store_unavailable"));
    assert_eq!(o.upstream_calls, 0);
    // A hanging store times out after timeout_ms; still never a 429.
    store.fail.store(false, Ordering::SeqCst);
    store.hang.store(true, Ordering::SeqCst);
    let o = s.run("GET", "/ok", &h, |_| Up::Status(200, 1));
    assert_eq!(o.status, 503);
    assert_eq!(o.elapsed_ms, 100);
    // Recovery needs no restart.
    store.hang.store(false, Ordering::SeqCst);
    let o = s.run("GET", "/ok", &h, |_| Up::Status(200, 1));
    assert_eq!(o.status, 200);
    assert!(
        s.metrics().contains(
            "weir_requests_total{route=\"ok\",outcome=\"ratelimit_store_unavailable\"} 2"
        )
    );
}

#[test]
fn store_failure_fail_open_is_marked_and_counted() {
    let s = sim(&cfg(&GLOBAL_OK.replace("\"deny\"", "\"allow\"")));
    // No store installed at all behaves as a failing store.
    let o = s.run("GET", "/ok", &[("x-consumer-id", "c")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!(o.status, 200);
    assert_eq!(o.h("x-weir-ratelimit"), Some("bypassed"));
    assert_eq!(o.upstream_calls, 1);
    assert!(
        s.metrics()
            .contains("weir_ratelimit_bypassed_total{route=\"ok\"} 1")
    );
}

const FLAKY: &str = r#"
[[routes]]
id = "flaky"
match = { path_prefix = "/flaky" }
upstream = "blue"
[routes.timeouts]
total = "2s"
per_try = "500ms"
[routes.retry]
max_attempts = 3
backoff = { base = "25ms", max = "250ms", jitter = "none" }

[[routes]]
id = "orders"
match = { path_prefix = "/orders", methods = ["POST"] }
upstream = "blue"
[routes.retry]
max_attempts = 2
on = ["503"]
"#;

#[test]
fn retries_need_an_idempotent_request() {
    let s = sim(&cfg(FLAKY));
    let first_503 = |n: u32| {
        if n == 1 {
            Up::Status(503, 5)
        } else {
            Up::Status(200, 5)
        }
    };
    let o = s.run("GET", "/flaky", &[], first_503);
    assert_eq!(o.status, 200);
    assert_eq!(o.h("x-weir-attempts"), Some("2"));
    assert_eq!(o.upstream_calls, 2);

    // POST without a key: never retried, the upstream 503 passes through unchanged.
    let o = s.run("POST", "/orders", &[], first_503);
    assert_eq!(o.status, 503);
    assert_eq!(o.reason(), None, "upstream status, not a gateway error");
    assert_eq!(o.h("x-weir-attempts"), Some("1"));
    assert_eq!(o.upstream_calls, 1);

    // POST with an idempotency key: retried.
    let o = s.run("POST", "/orders", &[("idempotency-key", "k1")], first_503);
    assert_eq!(o.status, 200);
    assert_eq!(o.upstream_calls, 2);
    // An empty key does not count.
    let o = s.run("POST", "/orders", &[("idempotency-key", "")], first_503);
    assert_eq!(o.upstream_calls, 1);

    let m = s.metrics();
    assert!(m.contains("weir_retries_total{route=\"flaky\"} 1"), "{m}");
    assert!(m.contains("weir_upstream_attempts_total{route=\"orders\",result=\"http_5xx\"} 3"));
}

#[test]
fn connect_failures_become_502_or_fallback() {
    let routes = r#"
[[routes]]
id = "dead"
match = { path_prefix = "/dead" }
upstream = "blue"
[[routes]]
id = "soft"
match = { path_prefix = "/soft" }
upstream = "blue"
[routes.fallback]
status = 200
body = '{"degraded":true}'
"#;
    let s = sim(&cfg(routes));
    let o = s.run("GET", "/dead", &[], |_| Up::Refused);
    assert_eq!(o.status, 502);
    assert_eq!(o.reason(), Some("upstream_unavailable"));
    let v: serde_json::Value = serde_json::from_slice(&o.body).unwrap();
    assert_eq!(v["error"], "upstream_unavailable");
    assert_eq!(v["route"], "dead");
    assert_eq!(v["instance"], "gw-a");
    let o = s.run("GET", "/soft", &[], |_| Up::Refused);
    assert_eq!(o.status, 200);
    assert_eq!(o.h("x-weir-degraded"), Some("upstream_unavailable"));
    assert_eq!(o.body, br#"{"degraded":true}"#);
}

const SLOW: &str = r#"
[[routes]]
id = "slow"
match = { path_prefix = "/slow" }
upstream = "blue"
[routes.timeouts]
total = "500ms"
per_try = "200ms"
min_try = "10ms"
[routes.retry]
max_attempts = 2
on = ["per_try_timeout"]
backoff = { base = "25ms", max = "25ms", jitter = "none" }
"#;

#[test]
fn per_try_inside_total() {
    let s = sim(&cfg(SLOW));
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 350));
    assert_eq!(o.status, 504);
    assert_eq!(o.reason(), Some("per_try_timeout"));
    assert_eq!(o.upstream_calls, 2);
    assert_eq!(o.elapsed_ms, 425, "200 + 25 backoff + 200");
    assert!(o.elapsed_ms <= 500);

    // With more attempts the last try is cut by the total budget: deadline_exceeded at 500.
    let s = sim(&cfg(&SLOW.replace("max_attempts = 2", "max_attempts = 5")));
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 350));
    assert_eq!(o.status, 504);
    assert_eq!(o.reason(), Some("deadline_exceeded"));
    assert_eq!(o.upstream_calls, 3);
    assert_eq!(o.elapsed_ms, 500);

    // A fast answer is forwarded.
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 50));
    assert_eq!(o.status, 200);
}

const KEYED: &str = r#"
[[routes]]
id = "keyed"
match = { path_prefix = "/keyed" }
upstream = "blue"
[routes.rate_limit]
algorithm = "token_bucket"
rate = 100
per = "1s"
key = ["header:x-consumer-id"]
max_key_bytes = 8

[[routes]]
id = "lax"
match = { path_prefix = "/lax" }
upstream = "blue"
[routes.rate_limit]
algorithm = "token_bucket"
rate = 100
per = "1s"
key = ["header:x-consumer-id"]
deny_empty_key = false

[[routes]]
id = "shadowed"
match = { path_prefix = "/shadowed" }
upstream = "blue"
[routes.rate_limit]
algorithm = "token_bucket"
rate = 100
per = "1s"
key = ["header:x-consumer-id"]
mode = "shadow"
"#;

#[test]
fn descriptor_outcomes() {
    let s = sim(&cfg(KEYED));
    let o = s.run("GET", "/keyed", &[], |_| Up::Status(200, 1));
    assert_eq!((o.status, o.reason()), (403, Some("empty_key")));
    assert_eq!(o.upstream_calls, 0);
    let o = s.run("GET", "/keyed", &[("x-consumer-id", "")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!((o.status, o.reason()), (403, Some("empty_key")));
    let o = s.run("GET", "/keyed", &[("x-consumer-id", "123456789")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!((o.status, o.reason()), (400, Some("key_too_long")));
    let o = s.run("GET", "/lax", &[], |_| Up::Status(200, 1));
    assert_eq!(o.status, 200);
    // Shadow: would-reject is counted, the request passes.
    let o = s.run("GET", "/shadowed", &[], |_| Up::Status(200, 1));
    assert_eq!(o.status, 200);
    assert!(
        s.metrics()
            .contains("weir_shadow_rejections_total{route=\"shadowed\"} 1")
    );
}

#[test]
fn ids_instance_and_no_route() {
    let s = sim(&cfg(FLAKY));
    let o = s.run("GET", "/nowhere", &[("x-request-id", "abc-123")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!(o.status, 404);
    assert_eq!(o.reason(), Some("no_route"));
    assert_eq!(o.h("x-request-id"), Some("abc-123"));
    assert_eq!(o.h("x-weir-instance"), Some("gw-a"));
    let v: serde_json::Value = serde_json::from_slice(&o.body).unwrap();
    assert_eq!(v["route"], "-");
    let o = s.run("GET", "/flaky?q=1", &[("x-request-id", "bad id")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!(o.status, 200);
    let rid = o.h("x-request-id").unwrap();
    assert!(rid != "bad id" && rid.len() == 32, "{rid}");
    assert_eq!(o.h("x-weir-instance"), Some("gw-a"));
    assert!(
        s.metrics()
            .contains("weir_requests_total{route=\"-\",outcome=\"no_route\"} 1")
    );
    let r = s.engine.reject_malformed(431, "headers_too_large", None);
    assert_eq!(r.status, 431);
    assert_eq!(r.header("x-weir-reason"), Some("headers_too_large"));
}

#[test]
fn metrics_expose_every_family_at_start_up() {
    let s = sim(&cfg(FLAKY));
    let m = s.metrics();
    for f in FAMILIES {
        assert!(m.contains(&format!("# TYPE {f} ")), "missing {f}\n{m}");
    }
    assert!(m.contains("weir_inflight{route=\"flaky\"} 0"));
}

#[test]
fn admin_api() {
    let dir = std::env::temp_dir().join(format!("weir-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.toml");
    std::fs::write(&path, cfg(FLAKY)).unwrap();
    let e = Engine::load(&path).unwrap();
    assert_eq!(e.admin("GET", "/healthz").status, 200);
    assert_eq!(e.admin("GET", "/nope").status, 404);
    assert_eq!(e.admin("POST", "/metrics").status, 405);
    assert_eq!(e.admin("GET", "/admin/reload").status, 405);
    let c = e.admin("GET", "/admin/config");
    let v: serde_json::Value = serde_json::from_slice(&c.body).unwrap();
    assert_eq!(v["revision"], 1);
    assert_eq!(v["routes"][0]["id"], "flaky");
    let r = e.admin("POST", "/admin/reload");
    assert_eq!(r.status, 200);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["revision"],
        2
    );
    std::fs::write(
        &path,
        cfg(FLAKY).replace("max_attempts = 3", "max_attempts = 0"),
    )
    .unwrap();
    let r = e.admin("POST", "/admin/reload");
    assert_eq!(r.status, 400);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("routes[0].retry.max_attempts"),
        "{v}"
    );
    assert_eq!(e.revision(), 2, "old set keeps serving");
    let b = e.admin("GET", "/admin/breakers");
    assert_eq!(b.status, 200);
}

#[test]
fn access_log_records_the_decision() {
    let dir = std::env::temp_dir().join(format!("weir-log-sc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let _ = std::fs::remove_file(&log);
    let text = cfg(&format!("{FLAKY}{KEYED}")).replace(
        "access = \"off\"",
        &format!("access = {:?}", log.display().to_string()),
    );
    let s = sim(&text);
    s.run(
        "GET",
        "/flaky?token=secret",
        &[("authorization", "Bearer xyz"), ("x-request-id", "r-1")],
        |n| {
            if n == 1 {
                Up::Status(503, 5)
            } else {
                Up::Status(200, 7)
            }
        },
    );
    s.run("GET", "/keyed", &[("x-consumer-id", "alice")], |_| {
        Up::Status(200, 1)
    });
    s.engine.flush_access_log();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("secret") && !text.contains("xyz") && !text.contains("alice"));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let r = &lines[0];
    for k in [
        "ts",
        "request_id",
        "instance",
        "route",
        "method",
        "path",
        "status",
        "reason",
        "key_digest",
        "scope",
        "remaining",
        "attempts",
        "queue_ms",
        "duration_ms",
        "revision",
    ] {
        assert!(r.get(k).is_some(), "missing {k}: {r}");
    }
    assert_eq!(r["request_id"], "r-1");
    assert_eq!(r["path"], "/flaky");
    assert_eq!(r["status"], 200);
    assert_eq!(r["attempts"][0]["status"], 503);
    assert_eq!(r["attempts"][0]["ms"], 5);
    assert_eq!(r["attempts"][1]["ms"], 7);
    assert_eq!(r["revision"], 1);
    assert_eq!(lines[1]["scope"], "local");
    assert_eq!(lines[1]["key_digest"].as_str().unwrap().len(), 32);
}

// ---- scenarios that need weir-core's limiters / breaker (CORE-PENDING) --------------

const LOCAL_OK: &str = r#"
[[routes]]
id = "ok"
match = { path_prefix = "/ok" }
upstream = "blue"
[routes.rate_limit]
algorithm = "token_bucket"
rate = 2
per = "60s"
burst = 2
key = ["route"]
"#;

#[test]
#[ignore = "CORE-PENDING: needs weir-core's keyed token bucket on main"]
fn replicas_multiply_local_limits() {
    let a = sim(&cfg(LOCAL_OK));
    let b = a.replica(&cfg(LOCAL_OK));
    let mut ok = 0;
    for i in 0..8 {
        let s = if i % 2 == 0 { &a } else { &b };
        if s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status == 200 {
            ok += 1;
        }
    }
    assert_eq!(ok, 4, "two instances with a local bucket of 2 admit 4");
    let o = a.run("GET", "/ok", &[], |_| Up::Status(200, 1));
    assert_eq!(o.status, 429);
    assert_eq!(o.h("ratelimit-policy"), Some("\"ok\";q=2;w=60"));
    assert_eq!(o.h("retry-after"), Some("30"));
    assert_eq!(o.h("ratelimit"), Some("\"ok\";r=0;t=30"));
}

#[test]
#[ignore = "CORE-PENDING: needs weir-core's keyed token bucket on main"]
fn reload_keeps_state_of_unchanged_policies() {
    let s = sim(&cfg(LOCAL_OK));
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
    let rev = s
        .engine
        .reload_from_toml(&cfg(&format!("{LOCAL_OK}{FLAKY}")), "t.toml")
        .unwrap();
    assert_eq!(rev, 2);
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 429);
    // Changed parameters: fresh state.
    s.engine
        .reload_from_toml(&cfg(&LOCAL_OK.replace("burst = 2", "burst = 3")), "t.toml")
        .unwrap();
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
}

#[test]
#[ignore = "CORE-PENDING: needs weir-core's shared breaker on main"]
fn breaker_three_phases_with_fallback() {
    let routes = r#"
[[routes]]
id = "b"
match = { path_prefix = "/b" }
upstream = "blue"
[routes.breaker]
consecutive_failures = 3
cooldown = { base = "5s", max = "60s", multiplier = 2.0, jitter = 0.0 }
half_open = { probes = 1, successes = 1 }
[routes.fallback]
status = 200
body = "degraded"
"#;
    let s = sim(&cfg(routes));
    for _ in 0..3 {
        assert_eq!(s.run("GET", "/b", &[], |_| Up::Status(500, 1)).status, 500);
    }
    let o = s.run("GET", "/b", &[], |_| Up::Status(200, 1));
    assert_eq!(o.h("x-weir-degraded"), Some("circuit_open"));
    assert_eq!(o.upstream_calls, 0);
    s.clock.advance(Nanos::from_secs(5));
    let o = s.run("GET", "/b", &[], |_| Up::Status(200, 1));
    assert_eq!((o.status, o.upstream_calls), (200, 1), "probe");
    let m = s.metrics();
    assert!(
        m.contains("weir_breaker_transitions_total{route=\"b\",from=\"closed\",to=\"open\"} 1")
    );
    assert!(m.contains(
        "weir_breaker_transitions_total{route=\"b\",from=\"half_open\",to=\"closed\"} 1"
    ));
    assert!(m.contains("weir_breaker_state{route=\"b\"} 0"));
}

#[test]
#[ignore = "CORE-PENDING: needs weir-core's leaky bucket on main"]
fn micro_burst_is_shaped_by_a_leaky_bucket() {
    let routes = r#"
[[routes]]
id = "shaped"
match = { path_prefix = "/shaped" }
upstream = "blue"
[routes.timeouts]
total = "2s"
[routes.rate_limit]
algorithm = "leaky_bucket"
rate = 10
per = "1s"
burst = 5
delay = 1
"#;
    let s = sim(&cfg(routes));
    let mut statuses = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..10 {
        let t0 = s.clock.now();
        let o = s.run("GET", "/shaped", &[], |_| Up::Status(200, 0));
        statuses.push(o.status);
        waits.push((s.clock.now() - t0).as_millis());
    }
    assert!(
        statuses.contains(&429),
        "excess beyond burst is rejected: {statuses:?}"
    );
    assert!(
        waits.iter().any(|&w| w > 0),
        "some requests were delayed: {waits:?}"
    );
}
