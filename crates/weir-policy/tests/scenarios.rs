//! The seed scenarios users check first, on a manual clock: a simulated client and upstream drive
//! `Engine` through whole requests. No sockets, no sleeping, deterministic.

use std::collections::HashMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use weir_core::{Clock, ManualClock, Nanos};
use weir_policy::config::writer::{ConfigText, Value as Toml};
use weir_policy::*;

mod common;

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
            Admission::Respond(r) => (r.status, strings(r.headers), r.body),
            Admission::Proceed => loop {
                let a = match flow.next_attempt() {
                    Ok(a) => a,
                    Err(r) => break (r.status, strings(r.headers), r.body),
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
                        break (status, strings(headers), b"upstream".to_vec());
                    }
                    Next::Retry { backoff } => self.clock.advance(backoff.into()),
                    Next::Respond(r) => break (r.status, strings(r.headers), r.body),
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

    /// Whether `/metrics` has this line (or this text).
    fn has_metric(&self, line: &str) -> bool {
        self.metrics().contains(line)
    }

    /// The same simulation with `store` as the engine's global store.
    fn with_store(self, store: &Arc<FakeStore>) -> Sim {
        Sim {
            engine: self.engine.with_store(store.clone()),
            ..self
        }
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

/// A route `id` for the paths under `prefix`, to the one upstream.
fn route(id: &str, prefix: &str) -> ConfigText {
    ConfigText::new().route(id, prefix, "blue")
}

/// Route `ok`: a token bucket of 2 per minute, burst 2; its `key` and scope follow.
fn two_per_minute() -> ConfigText {
    route("ok", "/ok")
        .rate_limit("token_bucket")
        .set("rate", 2)
        .set("per", "60s")
        .set("burst", 2)
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

impl FakeStore {
    /// A store admitting `limit` units per key.
    fn admitting(limit: u64) -> Arc<FakeStore> {
        Arc::new(FakeStore {
            limit,
            ..FakeStore::default()
        })
    }
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
            return Box::pin(async {
                Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    "connection refused",
                ))
            });
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

fn global_ok() -> String {
    two_per_minute()
        .set("key", &["route", "header:x-consumer-id"])
        .set("scope", "global")
        .set("on_store_error", "deny")
        .render()
}

#[test]
fn replicas_share_a_global_limit() {
    let store = FakeStore::admitting(2);
    let a = sim(&cfg(&global_ok()));
    let b = a.replica(&cfg(&global_ok()));
    let a = a.with_store(&store);
    let b = b.with_store(&store);
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
    let store = FakeStore::admitting(100);
    let s = sim(&cfg(&global_ok()));
    let s = s.with_store(&store);
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
        s.has_metric("weir_requests_total{route=\"ok\",outcome=\"ratelimit_store_unavailable\"} 2")
    );
}

#[test]
fn store_failure_fail_open_is_marked_and_counted() {
    let s = sim(&cfg(&global_ok().replace("\"deny\"", "\"allow\"")));
    // No store installed at all behaves as a failing store.
    let o = s.run("GET", "/ok", &[("x-consumer-id", "c")], |_| {
        Up::Status(200, 1)
    });
    assert_eq!(o.status, 200);
    assert_eq!(o.h("x-weir-ratelimit"), Some("bypassed"));
    assert_eq!(o.upstream_calls, 1);
    assert!(s.has_metric("weir_ratelimit_bypassed_total{route=\"ok\"} 1"));
}

#[test]
fn fail_open_expires_after_allow_for_with_bypass_evidence() {
    let toml = global_ok().replace("\"deny\"", "\"allow\"\nallow_for = \"1s\"");
    let store = FakeStore::admitting(2);
    let s = sim(&cfg(&toml));
    let s = s.with_store(&store);
    let go = |who: &str| {
        s.run("GET", "/ok", &[("x-consumer-id", who)], |_| {
            Up::Status(200, 1)
        })
    };
    let active = |v: u8| format!("weir_ratelimit_bypass_active{{route=\"ok\"}} {v}");
    assert!(s.metrics().contains(&active(0)));
    // alice used 1 of 2 while the store answered.
    assert_eq!(go("alice").status, 200);
    store.fail.store(true, Ordering::SeqCst);
    let codes: Vec<(u16, Option<String>)> = ["alice", "alice", "alice", "bob"]
        .iter()
        .map(|w| {
            let o = go(w);
            (o.status, o.h("x-weir-ratelimit").map(str::to_string))
        })
        .collect();
    assert!(
        codes
            .iter()
            .all(|(c, h)| *c == 200 && h.as_deref() == Some("bypassed")),
        "{codes:?}"
    );
    assert!(s.metrics().contains(&active(1)));
    let bypass = || -> serde_json::Value {
        serde_json::from_slice(&s.engine.admin("GET", "/admin/bypass").body).unwrap()
    };
    let e = &bypass()["episodes"][0];
    assert!(e["ended"].is_null(), "{e}");
    // 4 passed; 2 consumers; alice had 1 left, so 2 of her 3 would have been refused.
    assert_eq!(
        (
            &e["route"],
            &e["requests"],
            &e["consumers"],
            &e["over_limit"]
        ),
        (&"ok".into(), &4.into(), &2.into(), &2.into())
    );
    // allow_for of continuous outage: fail closed, and the episode has ended.
    s.clock.advance(Nanos::from_secs(1));
    let o = go("carol");
    assert_eq!(
        (o.status, o.reason()),
        (503, Some("ratelimit_store_unavailable"))
    );
    assert!(s.metrics().contains(&active(0)));
    let e = &bypass()["episodes"][0];
    assert!(e["ended"].is_string() && e["ended"] != e["started"], "{e}");
    assert_eq!(e["requests"], 4);
    // The store answers again: limits apply; the next outage may bypass again.
    store.fail.store(false, Ordering::SeqCst);
    assert_eq!(go("alice").status, 200);
    store.fail.store(true, Ordering::SeqCst);
    assert_eq!(go("alice").h("x-weir-ratelimit"), Some("bypassed"));
    let all = bypass();
    assert_eq!(all["episodes"].as_array().map(Vec::len), Some(2), "{all}");
}

fn flaky() -> String {
    route("flaky", "/flaky")
        .table("routes.timeouts")
        .set("total", "2s")
        .set("per_try", "500ms")
        .table("routes.retry")
        .set("max_attempts", 3)
        .set(
            "backoff",
            Toml::Raw(r#"{ base = "25ms", max = "250ms", jitter = "none" }"#),
        )
        .table("[[routes]]")
        .set("id", "orders")
        .set(
            "match",
            Toml::Raw(r#"{ path_prefix = "/orders", methods = ["POST"] }"#),
        )
        .set("upstream", "blue")
        .table("routes.retry")
        .set("max_attempts", 2)
        .set("on", &["503"])
        .render()
}

#[test]
fn retries_need_an_idempotent_request() {
    let s = sim(&cfg(&flaky()));
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
    let routes = route("dead", "/dead")
        .route("soft", "/soft", "blue")
        .table("routes.fallback")
        .set("status", 200)
        .set("body", r#"{"degraded":true}"#)
        .render();
    let s = sim(&cfg(&routes));
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

fn slow() -> String {
    route("slow", "/slow")
        .table("routes.timeouts")
        .set("total", "500ms")
        .set("per_try", "200ms")
        .set("min_try", "10ms")
        .table("routes.retry")
        .set("max_attempts", 2)
        .set("on", &["per_try_timeout"])
        .set(
            "backoff",
            Toml::Raw(r#"{ base = "25ms", max = "25ms", jitter = "none" }"#),
        )
        .render()
}

#[test]
fn per_try_inside_total() {
    let s = sim(&cfg(&slow()));
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 350));
    assert_eq!(o.status, 504);
    assert_eq!(o.reason(), Some("per_try_timeout"));
    assert_eq!(o.upstream_calls, 2);
    assert_eq!(o.elapsed_ms, 425, "200 + 25 backoff + 200");
    assert!(o.elapsed_ms <= 500);

    // With more attempts the last try is cut by the total budget: deadline_exceeded at 500.
    let s = sim(&cfg(&slow().replace("max_attempts = 2", "max_attempts = 5")));
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 350));
    assert_eq!(o.status, 504);
    assert_eq!(o.reason(), Some("deadline_exceeded"));
    assert_eq!(o.upstream_calls, 3);
    assert_eq!(o.elapsed_ms, 500);

    // A fast answer is forwarded.
    let o = s.run("GET", "/slow", &[], |_| Up::Status(200, 50));
    assert_eq!(o.status, 200);
}

/// Routes `keyed`, `lax` and `shadowed`: 100 per second per consumer id, each with one
/// more key (`max_key_bytes = 8`, `deny_empty_key = false`, `mode = "shadow"`).
fn keyed() -> String {
    [
        ("keyed", "max_key_bytes", Toml::Int(8)),
        ("lax", "deny_empty_key", Toml::Raw("false")),
        ("shadowed", "mode", Toml::Str("shadow")),
    ]
    .into_iter()
    .fold(ConfigText::new(), |c, (id, key, value)| {
        c.route(id, &format!("/{id}"), "blue")
            .rate_limit("token_bucket")
            .set("rate", 100)
            .set("per", "1s")
            .set("key", &["header:x-consumer-id"])
            .set(key, value)
    })
    .render()
}

#[test]
fn descriptor_outcomes() {
    let s = sim(&cfg(&keyed()));
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
    assert!(s.has_metric("weir_shadow_rejections_total{route=\"shadowed\"} 1"));
}

#[test]
fn ids_instance_and_no_route() {
    let s = sim(&cfg(&flaky()));
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
    assert!(s.has_metric("weir_requests_total{route=\"-\",outcome=\"no_route\"} 1"));
    let r = s.engine.reject_malformed(Outcome::HeadersTooLarge, None);
    assert_eq!(r.status, 431);
    assert_eq!(r.header("x-weir-reason"), Some("headers_too_large"));
}

#[test]
fn metrics_expose_every_family_at_start_up() {
    let s = sim(&cfg(&flaky()));
    let m = s.metrics();
    for f in FAMILIES {
        assert!(m.contains(&format!("# TYPE {f} ")), "missing {f}\n{m}");
    }
    assert!(m.contains("weir_inflight{route=\"flaky\"} 0"));
}

#[test]
fn admin_api() {
    let (dir, _) = common::scratch_log("admin");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, cfg(&flaky())).unwrap();
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
        cfg(&flaky()).replace("max_attempts = 3", "max_attempts = 0"),
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
    let (_dir, log) = common::scratch_log("log-sc");
    let text = cfg(&format!("{}{}", flaky(), keyed())).replace(
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

// ---- local limiters and the breaker (weir-core) ----------------------------------------

fn local_ok() -> String {
    two_per_minute().set("key", &["route"]).render()
}

/// The one sliding-log cap (`weir_core::MAX_SLIDING_LOG_LIMIT`) holds for local routes
/// too: a log of 2000 events (above the 1024-entry local ring) is exact, and 32769 is an
/// error naming the key.
#[test]
fn local_sliding_log_up_to_the_one_cap() {
    let route = |limit: u64| {
        route("log", "/log")
            .rate_limit("sliding_log")
            .set("limit", Toml::Raw(&limit.to_string()))
            .set("window", "60s")
            .render()
    };
    let s = sim(&cfg(&route(2000)));
    for i in 0..2000 {
        let o = s.run("GET", "/log", &[], |_| Up::Status(200, 0));
        assert_eq!(o.status, 200, "event {i}");
    }
    assert_eq!(
        s.run("GET", "/log", &[], |_| Up::Status(200, 0)).status,
        429
    );
    let e = weir_policy::config::parse(&cfg(&route(MAX_SLIDING_LOG_LIMIT + 1)), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("routes[0].rate_limit.limit: sliding_log keeps every event: at most 32768"),
        "{e}"
    );
}

#[test]
fn replicas_multiply_local_limits() {
    let a = sim(&cfg(&local_ok()));
    let b = a.replica(&cfg(&local_ok()));
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

fn reload_keeps_state_of_unchanged_policies() {
    let s = sim(&cfg(&local_ok()));
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
    let rev = s
        .engine
        .reload_from_toml(&cfg(&format!("{}{}", local_ok(), flaky())), "t.toml")
        .unwrap();
    assert_eq!(rev, 2);
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 429);
    // Changed parameters: fresh state.
    s.engine
        .reload_from_toml(
            &cfg(&local_ok().replace("burst = 2", "burst = 3")),
            "t.toml",
        )
        .unwrap();
    assert_eq!(s.run("GET", "/ok", &[], |_| Up::Status(200, 1)).status, 200);
}

/// Route `b` tripping after `consecutive_failures`, 5 s first cooldown, one probe.
fn breaker(consecutive_failures: i64) -> ConfigText {
    route("b", "/b")
        .table("routes.breaker")
        .set("consecutive_failures", consecutive_failures)
        .set(
            "cooldown",
            Toml::Raw("{ base = \"5s\", max = \"60s\", multiplier = 2.0, jitter = 0.0 }"),
        )
        .set("half_open", Toml::Raw("{ probes = 1, successes = 1 }"))
}

#[test]
fn breaker_three_phases_with_fallback() {
    let routes = breaker(3)
        .table("routes.fallback")
        .set("status", 200)
        .set("body", "degraded")
        .render();
    let s = sim(&cfg(&routes));
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

// ---- concurrent flows on the manual clock --------------------------------------------

/// A timer whose sleeps end when the manual clock reaches their end (the test advances
/// the clock), so several flows can wait at once.
struct ClockTimer(Arc<ManualClock>);
struct Sleep {
    clock: Arc<ManualClock>,
    until: Nanos,
}
impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
impl Timer for ClockTimer {
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        Sleep {
            clock: self.0.clone(),
            until: self.0.now() + Nanos::from(d),
        }
    }
}

/// Admits `flow` on the first poll, or panics.
fn admitted_now(flow: &mut Flow, timer: &ClockTimer) {
    assert!(proceeds(poll_once(pin!(flow.admit(timer)))));
}

fn proceeds(p: Poll<Admission>) -> bool {
    matches!(p, Poll::Ready(Admission::Proceed))
}

/// The response of an admission that is ready and refused, or a panic naming `who`.
fn refused(p: Poll<Admission>, who: &str) -> GatewayResponse {
    match p {
        Poll::Ready(Admission::Respond(r)) => r,
        other => panic!("{who}: {:?}", other.map(|_| ())),
    }
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

fn begin(s: &Sim, path: &str, headers: &[(&str, &str)]) -> Flow {
    s.engine.begin(&RequestInfo {
        method: "GET",
        path,
        headers: &headers,
        client_ip: None,
        body_len: Some(0),
    })
}

/// Forwarded headers as the `(name, String)` pairs gateway responses carry.
fn strings(headers: Vec<(&'static str, HeaderText)>) -> Vec<(&'static str, String)> {
    headers.into_iter().map(|(k, v)| (k, v.into())).collect()
}

/// One upstream attempt answered 200 at once; returns the forwarded headers.
fn proxy_ok(flow: &mut Flow) -> Vec<(&'static str, String)> {
    flow.next_attempt().expect("attempt");
    match flow.on_attempt(AttemptResult::Response { status: 200 }) {
        Next::Forward { headers } => strings(headers),
        other => panic!("expected forward, got {other:?}"),
    }
}

/// On `/q`: A admitted (holding the only permit), B and C begun behind it, not yet polled.
fn holder_and_two_more(s: &Sim, timer: &ClockTimer) -> (Flow, Flow, Flow) {
    let mut a = begin(s, "/q", &[]);
    admitted_now(&mut a, timer);
    (a, begin(s, "/q", &[]), begin(s, "/q", &[]))
}

fn reason(r: &GatewayResponse) -> Option<&str> {
    r.header("x-weir-reason")
}

#[test]
fn micro_burst_is_shaped_by_a_leaky_bucket() {
    let routes = route("shaped", "/shaped")
        .table("routes.timeouts")
        .set("total", "2s")
        .rate_limit("leaky_bucket")
        .set("rate", 10)
        .set("per", "1s")
        .set("burst", 5)
        .set("delay", 1)
        .render();
    let s = sim(&cfg(&routes));
    let timer = ClockTimer(s.clock.clone());
    let t0 = s.clock.now();
    // Ten requests arrive in the same instant.
    let mut flows: Vec<Flow> = (0..10).map(|_| begin(&s, "/shaped", &[])).collect();
    let mut done: Vec<Option<(u16, u64, Option<String>)>> = vec![None; 10];
    {
        let mut futs: Vec<_> = flows
            .iter_mut()
            .map(|f| Box::pin(f.admit(&timer)))
            .collect();
        for _ in 0..=100 {
            for (i, f) in futs.iter_mut().enumerate() {
                if done[i].is_none()
                    && let Poll::Ready(a) = poll_once(f.as_mut())
                {
                    let waited = (s.clock.now() - t0).as_millis();
                    done[i] = Some(match a {
                        Admission::Proceed => (200, waited, None),
                        Admission::Respond(r) => (
                            r.status,
                            waited,
                            r.header("retry-after").map(str::to_string),
                        ),
                    });
                }
            }
            s.clock.advance(Nanos::from_millis(10));
        }
    }
    let done: Vec<_> = done.into_iter().map(Option::unwrap).collect();
    let immediate = done.iter().filter(|d| d.0 == 200 && d.1 == 0).count();
    let mut delayed: Vec<u64> = done
        .iter()
        .filter(|d| d.0 == 200 && d.1 > 0)
        .map(|d| d.1)
        .collect();
    delayed.sort();
    let rejected: Vec<_> = done.iter().filter(|d| d.0 == 429).collect();
    // nginx limit_req: 1 + `delay` pass at once, the rest of `burst` is spaced at the
    // rate (100 ms), and the excess beyond `burst` is rejected at once with Retry-After.
    assert_eq!(immediate, 2, "{done:?}");
    assert_eq!(delayed, [100, 200, 300, 400], "{done:?}");
    assert_eq!(rejected.len(), 4, "{done:?}");
    assert!(
        rejected
            .iter()
            .all(|d| d.1 == 0 && d.2.as_deref() == Some("1"))
    );
    for (f, d) in flows.iter_mut().zip(&done) {
        if d.0 == 200 {
            proxy_ok(f);
        }
    }
    for (f, d) in flows.into_iter().zip(&done) {
        f.finish(d.0, None);
    }
    let m = s.metrics();
    assert!(m.contains("weir_requests_total{route=\"shaped\",outcome=\"rate_limited\"} 4"));
    assert!(m.contains("weir_requests_total{route=\"shaped\",outcome=\"proxied\"} 6"));
}

/// Routes `q` (total 2s, one permit, queue 1 for 100ms) and `qd` (`/deadline`: total 50ms,
/// one permit, queue 4 for 1s).
fn queued() -> String {
    [
        ("q", "/q", "2s", 1, "100ms"),
        ("qd", "/deadline", "50ms", 4, "1s"),
    ]
    .into_iter()
    .fold(ConfigText::new(), |c, (id, prefix, total, queue, wait)| {
        c.route(id, prefix, "blue")
            .table("routes.timeouts")
            .set("total", total)
            .table("routes.concurrency")
            .set("max", 1)
            .set("queue", queue)
            .set("queue_timeout", wait)
    })
    .render()
}

#[test]
fn concurrency_queue_full_timeout_and_handoff() {
    let s = sim(&cfg(&queued()));
    let timer = ClockTimer(s.clock.clone());

    // A holds the only permit; B waits in the queue (length 1).
    let (mut a, mut b, mut c) = holder_and_two_more(&s, &timer);
    {
        let mut fb = Box::pin(b.admit(&timer));
        assert!(poll_once(fb.as_mut()).is_pending(), "B queued");
        // C: permit taken and queue full -> 503 concurrency_limited, at once.
        let r = refused(poll_once(pin!(c.admit(&timer))), "C");
        assert_eq!((r.status, reason(&r)), (503, Some("concurrency_limited")));
        // A finishes after 30 ms: its permit goes to B, which proceeds.
        s.clock.advance(Nanos::from_millis(30));
        proxy_ok(&mut a);
        a.finish(200, None);
        assert!(proceeds(poll_once(fb.as_mut())));
    }
    c.finish(503, None);

    // D queues behind B and its wait ends at queue_timeout: 503 queue_timeout.
    let mut d = begin(&s, "/q", &[]);
    {
        let mut fd = Box::pin(d.admit(&timer));
        assert!(poll_once(fd.as_mut()).is_pending());
        s.clock.advance(Nanos::from_millis(99));
        assert!(poll_once(fd.as_mut()).is_pending());
        s.clock.advance(Nanos::from_millis(1));
        let r = refused(poll_once(fd.as_mut()), "D");
        assert_eq!((r.status, reason(&r)), (503, Some("queue_timeout")));
    }
    d.finish(503, None);
    proxy_ok(&mut b);
    b.finish(200, None);

    // A wait cut by the route's total budget (50 ms < queue_timeout) is a 504.
    let mut e = begin(&s, "/deadline", &[]);
    admitted_now(&mut e, &timer);
    let mut f = begin(&s, "/deadline", &[]);
    {
        let mut ff = Box::pin(f.admit(&timer));
        assert!(poll_once(ff.as_mut()).is_pending());
        s.clock.advance(Nanos::from_millis(50));
        let r = refused(poll_once(ff.as_mut()), "F");
        assert_eq!((r.status, reason(&r)), (504, Some("deadline_exceeded")));
    }
    f.finish(504, None);
    // E's own 50 ms are spent too: no attempt starts.
    let r = e.next_attempt().unwrap_err();
    assert_eq!((r.status, reason(&r)), (504, Some("deadline_exceeded")));
    e.finish(504, None);

    let m = s.metrics();
    for line in [
        "weir_requests_total{route=\"q\",outcome=\"concurrency_limited\"} 1",
        "weir_requests_total{route=\"q\",outcome=\"queue_timeout\"} 1",
        "weir_requests_total{route=\"q\",outcome=\"proxied\"} 2",
        "weir_requests_total{route=\"qd\",outcome=\"deadline_exceeded\"} 2",
        "weir_inflight{route=\"q\"} 0",
    ] {
        assert!(m.contains(line), "missing {line}\n{m}");
    }
}

#[test]
fn a_dropped_waiter_passes_the_permit_on() {
    let s = sim(&cfg(&queued().replace("queue = 1\n", "queue = 2\n")));
    let timer = ClockTimer(s.clock.clone());
    let (a, mut b, mut c) = holder_and_two_more(&s, &timer);
    let mut fb = Box::pin(b.admit(&timer));
    let mut fc = Box::pin(c.admit(&timer));
    assert!(poll_once(fb.as_mut()).is_pending());
    assert!(poll_once(fc.as_mut()).is_pending());
    a.finish(200, None);
    // B's client goes away before it is polled again: the wakeup must reach C.
    drop(fb);
    assert!(proceeds(poll_once(fc.as_mut())));
}

/// Routes `k` (token bucket) and `w` (fixed window): one per minute per consumer id,
/// two keys at most.
fn overflow() -> String {
    route("k", "/k")
        .rate_limit("token_bucket")
        .set("rate", 1)
        .set("per", "60s")
        .set("burst", 1)
        .set("key", &["header:x-consumer-id"])
        .set("max_keys", 2)
        .route("w", "/w", "blue")
        .rate_limit("fixed_window")
        .set("limit", 1)
        .set("window", "60s")
        .set("key", &["header:x-consumer-id"])
        .set("max_keys", 2)
        .render()
}

#[test]
fn keyed_state_overflow_never_refreshes_an_exhausted_key() {
    let s = sim(&cfg(&overflow()));
    for route in ["k", "w"] {
        let path = format!("/{route}");
        let go = |who: &str| {
            s.run("GET", &path, &[("x-consumer-id", who)], |_| {
                Up::Status(200, 0)
            })
            .status
        };
        // Two keys fill the table and exhaust their limits.
        assert_eq!(go("alice"), 200, "{route}");
        assert_eq!(go("bob"), 200, "{route}");
        assert_eq!(go("alice"), 429, "{route}");
        // New keys share one overflow limiter: the first passes, the rest are throttled.
        assert_eq!(go("carol"), 200, "{route}");
        for i in 0..20 {
            assert_eq!(go(&format!("churn-{i}")), 429, "{route}");
        }
        // Churn never hands the exhausted key a fresh limiter.
        assert_eq!(go("alice"), 429, "{route}");
        assert_eq!(go("bob"), 429, "{route}");
        let m = s.metrics();
        let line = format!("weir_keys_overflow_total{{route=\"{route}\"}} 21");
        assert!(m.contains(&line), "missing {line}\n{m}");
    }
}

#[test]
fn breaker_metrics_and_admin_view() {
    let s = sim(&cfg(&breaker(2).render()));
    let state = |s: &Sim| -> serde_json::Value {
        let r = s.engine.admin("GET", "/admin/breakers");
        assert_eq!(r.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["revision"], 1);
        v["breakers"][0].clone()
    };
    assert_eq!(state(&s)["state"], "closed");
    assert!(s.metrics().contains("weir_breaker_state{route=\"b\"} 0"));
    for _ in 0..2 {
        s.run("GET", "/b", &[], |_| Up::Refused);
    }
    let v = state(&s);
    assert_eq!(
        (v["route"].as_str(), v["state"].as_str()),
        (Some("b"), Some("open"))
    );
    assert_eq!(v["last_transition"]["to"], "open");
    assert_eq!(v["config"]["consecutive_failures"], 2);
    assert!(s.metrics().contains("weir_breaker_state{route=\"b\"} 1"));
    let o = s.run("GET", "/b", &[], |_| Up::Status(200, 0));
    assert_eq!((o.status, o.reason()), (503, Some("circuit_open")));
    assert_eq!(o.upstream_calls, 0);

    // Past the cooldown the next call is a probe: the gauge reads half-open.
    s.clock.advance(Nanos::from_secs(5));
    assert_eq!(state(&s)["state"], "half_open");
    assert!(s.metrics().contains("weir_breaker_state{route=\"b\"} 2"));
    // The probe fails: OPEN again, and the next cooldown doubles (10 s).
    assert_eq!(s.run("GET", "/b", &[], |_| Up::Refused).status, 502);
    let v = state(&s);
    assert_eq!(v["state"], "open");
    assert_eq!(v["failed_recoveries"], 1);
    s.clock.advance(Nanos::from_secs(5));
    assert_eq!(s.run("GET", "/b", &[], |_| Up::Status(200, 0)).status, 503);
    s.clock.advance(Nanos::from_secs(5));
    assert_eq!(s.run("GET", "/b", &[], |_| Up::Status(200, 0)).status, 200);
    assert_eq!(state(&s)["state"], "closed");

    let m = s.metrics();
    for (from, to, n) in [
        ("closed", "open", 1),
        ("open", "half_open", 2),
        ("half_open", "open", 1),
        ("half_open", "closed", 1),
    ] {
        let line = format!(
            "weir_breaker_transitions_total{{route=\"b\",from=\"{from}\",to=\"{to}\"}} {n}"
        );
        assert!(m.contains(&line), "missing {line}\n{m}");
    }
    assert!(m.contains("weir_breaker_state{route=\"b\"} 0"));
    assert!(m.contains("weir_requests_total{route=\"b\",outcome=\"circuit_open\"} 2"));
}

#[test]
fn ratelimit_fields_for_windows() {
    let routes = [
        ("fw", "fixed_window", 3),
        ("log", "sliding_log", 2),
        ("sw", "sliding_window", 2),
    ]
    .into_iter()
    .fold(ConfigText::new(), |c, (id, algorithm, limit)| {
        c.route(id, &format!("/{id}"), "blue")
            .rate_limit(algorithm)
            .set("limit", limit)
            .set("window", "10s")
    })
    .render();
    let s = sim(&cfg(&routes));
    let get = |p: &str| s.run("GET", p, &[], |_| Up::Status(200, 0));
    let fields = |o: &Out| {
        (
            o.status,
            o.h("ratelimit").unwrap_or("-").to_string(),
            o.h("retry-after").map(str::to_string),
        )
    };
    let mut seen = Vec::new();
    // The clock starts at 1000 s, a multiple of the 10 s window.
    seen.push(("fw", fields(&get("/fw"))));
    s.clock.advance(Nanos::from_secs(4));
    seen.push(("fw", fields(&get("/fw"))));
    seen.push(("fw", fields(&get("/fw"))));
    seen.push(("fw", fields(&get("/fw"))));
    seen.push(("log", fields(&get("/log"))));
    s.clock.advance(Nanos::from_secs(3));
    seen.push(("log", fields(&get("/log"))));
    seen.push(("log", fields(&get("/log"))));
    seen.push(("sw", fields(&get("/sw"))));
    seen.push(("sw", fields(&get("/sw"))));
    seen.push(("sw", fields(&get("/sw"))));
    let o = get("/fw");
    assert_eq!(o.h("ratelimit-policy"), Some("\"fw\";q=3;w=10"));
    let o = get("/log");
    assert_eq!(o.h("ratelimit-policy"), Some("\"log\";q=2;w=10"));
    let want = |st: u16, rl: &str, ra: Option<&str>| (st, rl.to_string(), ra.map(str::to_string));
    assert_eq!(
        seen,
        vec![
            // fixed: R = limit − used; T = until the window ends (at 1010 s).
            ("fw", want(200, "\"fw\";r=2;t=10", None)),
            ("fw", want(200, "\"fw\";r=1;t=6", None)),
            ("fw", want(200, "\"fw\";r=0;t=6", None)),
            ("fw", want(429, "\"fw\";r=0;t=6", Some("6"))),
            // log: T = until the oldest counted event leaves the window.
            ("log", want(200, "\"log\";r=1;t=10", None)),
            ("log", want(200, "\"log\";r=0;t=7", None)),
            ("log", want(429, "\"log\";r=0;t=7", Some("7"))),
            // sliding counter at 1007 s (window [1000, 1010), previous one empty): the
            // count is prev × (1 − elapsed/window) + cur, so one event stops counting
            // only when it has decayed out of the previous window (1020 s: T = 13), and
            // of two, one unit frees when 2 × (1 − x/10) ≤ 1 (1015 s: T = 8).
            ("sw", want(200, "\"sw\";r=1;t=13", None)),
            ("sw", want(200, "\"sw\";r=0;t=8", None)),
            ("sw", want(429, "\"sw\";r=0;t=8", Some("8"))),
        ]
    );
}

#[test]
fn frontend_rejection_after_begin_counts_once_under_the_route() {
    let s = sim(&cfg(&flaky()));
    let timer = ManualTimer(s.clock.clone());
    let mut flow = begin(&s, "/flaky", &[("x-request-id", "bad-body-1")]);
    assert!(matches!(__block_on(flow.admit(&timer)), Admission::Proceed));
    flow.next_attempt().expect("attempt");
    // The request body's chunk framing turns out invalid while it streams.
    let r = flow.reject(Outcome::BadRequest);
    assert_eq!(r.status, 400);
    assert_eq!(reason(&r), Some("bad_request"));
    assert_eq!(r.header("x-request-id"), Some("bad-body-1"));
    assert_eq!(r.header("x-weir-instance"), Some("gw-a"));
    assert!(String::from_utf8_lossy(&r.body).contains("\"route\":\"flaky\""));
    flow.finish(400, Some(Outcome::BadRequest));
    let m = s.metrics();
    assert!(
        m.contains("weir_requests_total{route=\"flaky\",outcome=\"bad_request\"} 1"),
        "{m}"
    );
    assert!(!m.contains("route=\"-\",outcome=\"bad_request\""), "{m}");
    assert!(m.contains("weir_inflight{route=\"flaky\"} 0"), "{m}");
}

/// A quota on the engine: one consumption per admitted request (not per attempt), event-id
/// duplicates free, a later gate's rejection consumes nothing, 429 `quota_exhausted` with
/// the `"ROUTE.quota"` items and `Retry-After` to the period's end, admin state and
/// adjustments, and a restart that reads the ledger back.
#[test]
fn quota_counts_admitted_requests_once_and_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("weir-quota-engine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let text = cfg(&format!(
        r#"
[quota]
dir = "{}"
sync = "always"
[[routes]]
upstream = "blue"
id = "q"
match = {{ path_prefix = "/q" }}
quota = {{ limit = 3, period = "day", key = ["header:x-consumer"], event_id = "header:idempotency-key" }}
rate_limit = {{ algorithm = "token_bucket", rate = 1, per = "60s", burst = 4, key = ["header:x-lane"], deny_empty_key = false }}
retry = {{ max_attempts = 2, on = ["503"] }}
"#,
        dir.display()
    ));
    let s = sim(&text);
    let a = [("x-consumer", "acme")];
    let ok = |_| Up::Status(200, 1);
    // Retried once (503 then 200): one consumption.
    let r = s.run("GET", "/q", &a, |n| {
        if n == 1 {
            Up::Status(503, 1)
        } else {
            Up::Status(200, 1)
        }
    });
    assert_eq!((r.status, r.upstream_calls), (200, 2), "{r:?}");
    let policy = r.h("ratelimit-policy").unwrap();
    assert!(
        policy.starts_with("\"q\";q=1;w=60, \"q.quota\";q=3;w=86400"),
        "{policy}"
    );
    assert!(
        r.h("ratelimit").unwrap().contains("\"q.quota\";r=2;t="),
        "{r:?}"
    );
    // The same event id twice: the second consumes nothing.
    let with_id = [
        ("x-consumer", "acme"),
        ("idempotency-key", "ev-1"),
        ("x-lane", "b"),
    ];
    assert_eq!(s.run("GET", "/q", &with_id, ok).status, 200);
    let r = s.run("GET", "/q", &with_id, ok);
    assert_eq!(r.status, 200);
    assert!(
        r.h("ratelimit").unwrap().contains("\"q.quota\";r=1;"),
        "{r:?}"
    );
    // A rate-limit rejection (lane "c" spent) consumes nothing.
    let lane = [("x-consumer", "acme"), ("x-lane", "c")];
    for who in ["o1", "o2", "o3", "o4"] {
        let _ = s.run("GET", "/q", &[("x-consumer", who), ("x-lane", "c")], ok);
    }
    let r = s.run("GET", "/q", &lane, ok);
    assert_eq!(r.reason(), Some("rate_limited"), "{r:?}");
    let state = |s: &Sim| -> serde_json::Value {
        let r = s.engine.admin("GET", "/admin/quota?route=q&key=acme");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        serde_json::from_slice(&r.body).unwrap()
    };
    let st = state(&s);
    assert_eq!(
        (st["used"].as_u64(), st["ledger_sum"].as_u64()),
        (Some(2), Some(2)),
        "{st}"
    );
    // The last unit, then exhausted.
    assert_eq!(s.run("GET", "/q", &a, ok).status, 200);
    let r = s.run("GET", "/q", &a, ok);
    assert_eq!(
        (r.status, r.reason()),
        (429, Some("quota_exhausted")),
        "{r:?}"
    );
    assert_eq!(r.upstream_calls, 0);
    let t = r.h("retry-after").unwrap();
    assert!(
        r.h("ratelimit")
            .unwrap()
            .ends_with(&format!("\"q.quota\";r=0;t={t}")),
        "{r:?}"
    );
    assert!(t.parse::<u64>().unwrap() <= 86_400);
    let m = s.metrics();
    for want in [
        "weir_quota_consumed_total{route=\"q\"} 7",
        "weir_quota_exhausted_total{route=\"q\"} 1",
        "weir_quota_duplicates_total{route=\"q\"} 1",
    ] {
        assert!(m.contains(want), "{want}:\n{m}");
    }
    // A credit of 2, idempotent by its event id.
    let body = br#"{"route":"q","key":"acme","amount":2,"reason":"top-up","event_id":"adj-1"}"#;
    for applied in [true, false] {
        let r = s
            .engine
            .admin_request("POST", "/admin/quota/adjust", &(), body);
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            (r.status, v["applied"].as_bool()),
            (200, Some(applied)),
            "{v}"
        );
        assert_eq!(
            (v["adjusted"].as_i64(), v["remaining"].as_u64()),
            (Some(2), Some(2)),
            "{v}"
        );
    }
    assert_eq!(s.run("GET", "/q", &a, ok).status, 200);
    let period = state(&s)["period"].as_str().unwrap().to_string();
    let r = s.engine.admin(
        "GET",
        &format!("/admin/quota/ledger?route=q&period={period}"),
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(r.body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    // acme ×2, o1..o4, acme, the credit, acme.
    assert_eq!(
        kinds,
        [
            "consume", "consume", "consume", "consume", "consume", "consume", "consume", "adjust",
            "consume"
        ]
    );
    let ids: Vec<_> = lines
        .iter()
        .filter_map(|l| l["event_id"].as_str())
        .collect();
    assert_eq!(ids, ["ev-1", "adj-1"]);
    assert!(
        lines
            .iter()
            .all(|l| l["key_digest"].as_str().unwrap().len() == 32 && l["instance"] == "gw-a")
    );
    // A new engine on the same directory (a restart) reads the same state back.
    drop(s);
    let again = sim(&text);
    let st = state(&again);
    assert_eq!(
        (
            st["used"].as_u64(),
            st["adjusted"].as_i64(),
            st["remaining"].as_u64()
        ),
        (Some(4), Some(2), Some(1)),
        "{st}"
    );
    assert_eq!(
        again.engine.admin("GET", "/admin/quota?route=q").status,
        400
    );
    assert_eq!(
        again
            .engine
            .admin("GET", "/admin/quota?route=nope&key=a")
            .status,
        404
    );
    let _ = std::fs::remove_dir_all(&dir);
}
