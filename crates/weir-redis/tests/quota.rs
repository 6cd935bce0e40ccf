//! Global quotas (`[routes.quota] scope = "global"`) on a real `redis-server`: the scripts
//! on their own, then the policy engine — one quota exact across two instances, duplicates
//! free, a later gate's rejection giving the unit back, the admin API reading Redis, and
//! a store outage under `on_store_error = "allow"` whose bypass events are written back
//! once after recovery (and not again when a restarted instance sends them a second time).
//! Skips without `redis-server` unless `WEIR_REQUIRE_REDIS=1`.

mod common;

use std::thread;
use std::time::{Duration, Instant};
use tempfile::TempDir;

use common::{Server, SleepTimer, block_on, free_port};
use weir_policy::config::writer::ConfigText;
use weir_policy::{Admission, Engine, QuotaKeys, QuotaOp, QuotaRequest, QuotaStatus, RequestInfo};
use weir_redis::{RedisSettings, RedisStore};

/// A fresh directory for one engine's local ledger (the bypass journal), removed when the
/// guard is dropped.
fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("weir-redis-quota-{name}-"))
        .tempdir()
        .unwrap()
}

fn store(port: u16) -> RedisStore {
    RedisStore::start(RedisSettings {
        url: format!("redis://127.0.0.1:{port}/0"),
        timeout: Duration::from_millis(500),
        ..Default::default()
    })
    .unwrap()
}

fn req(keys: &QuotaKeys, op: QuotaOp) -> QuotaRequest {
    let far = 4_000_000_000;
    QuotaRequest {
        keys: keys.clone(),
        op,
        markers_until: far,
        keep_until: far,
    }
}

fn consume(cost: u64, id: Option<&str>) -> QuotaOp {
    QuotaOp::Consume {
        limit: 3,
        cost,
        event_id: id.map(str::to_string),
        event: format!("{{\"amount\":{cost}}}"),
    }
}

#[test]
fn scripts_consume_once_release_and_write_back_idempotently() {
    let Some(srv) = Server::start() else { return };
    let s = store(srv.port);
    let k = QuotaKeys::new("r", "2026-12", &"ab".repeat(16));
    let q = |op| block_on(s.quota(req(&k, op))).unwrap();
    let a = q(consume(1, Some("e1")));
    assert_eq!((a.status, a.used), (QuotaStatus::Done, 1));
    assert!(!a.entry.is_empty(), "a consumption names its ledger entry");
    let dup = q(consume(1, Some("e1")));
    assert_eq!((dup.status, dup.used), (QuotaStatus::Duplicate, 1));
    let b = q(consume(2, None));
    assert_eq!((b.status, b.used), (QuotaStatus::Done, 3));
    assert_eq!(q(consume(1, None)).status, QuotaStatus::Exhausted);
    // A later gate rejected `b`: given back once (a second release changes nothing).
    let rel = || QuotaOp::Release {
        entry: b.entry.clone(),
        cost: 2,
        event_id: None,
    };
    assert_eq!(q(rel()).used, 1);
    assert_eq!(q(rel()).status, QuotaStatus::Duplicate);
    assert_eq!(q(rel()).used, 1);
    // A bypass event written back twice counts once.
    let by = || QuotaOp::Bypass {
        cost: 1,
        event_id: "bypass-gw-1".into(),
        event: "{}".into(),
    };
    assert_eq!(q(by()).status, QuotaStatus::Done);
    assert_eq!(q(by()).status, QuotaStatus::Duplicate);
    // A bypass with an id already consumed is a duplicate too.
    let by_e1 = QuotaOp::Bypass {
        cost: 1,
        event_id: "e1".into(),
        event: "{}".into(),
    };
    assert_eq!(q(by_e1).status, QuotaStatus::Duplicate);
    let adj = || QuotaOp::Adjust {
        amount: 5,
        event_id: "top-up".into(),
        event: "{}".into(),
    };
    assert_eq!(q(adj()).adjusted, 5);
    assert_eq!(q(adj()).status, QuotaStatus::Duplicate);
    let r = q(QuotaOp::Report);
    assert_eq!((r.used, r.adjusted, r.ledger_sum), (2, 5, 2));
    let l = q(QuotaOp::Ledger);
    // e1 consume, the bypass, the adjustment (b's entry was deleted by its release).
    assert_eq!(l.events.len(), 3, "{:?}", l.events);
    // Keys are in the route's slot; markers and counters expire.
    assert_eq!(
        weir_redis::slot(&k.counter()),
        weir_redis::slot("weir:{r}:x")
    );
    assert_eq!(weir_redis::slot(&k.ids()), weir_redis::slot(&k.log()));
}

fn config(port: u16, dir: &std::path::Path, on_error: &str, rate_limit: bool) -> String {
    let mut c = ConfigText::new()
        .table("server")
        .set("listen", "127.0.0.1:0")
        .set("instance", "gw")
        .log("off")
        .table("store")
        .set("kind", "redis")
        .set("url", format!("redis://127.0.0.1:{port}/0").as_str())
        .set("timeout_ms", 200)
        .table("quota")
        .set("dir", dir.display().to_string().as_str())
        .set("sync", "always")
        .upstream("blue", "127.0.0.1:9")
        .route("q", "/q", "blue")
        .table("routes.quota")
        .set("limit", 5)
        .set("period", "month")
        .set("key", &["header:x-consumer"])
        .set("event_id", "header:idempotency-key")
        .set("scope", "global")
        .set("on_store_error", on_error);
    if rate_limit {
        c = c
            .rate_limit("token_bucket")
            .set("rate", 1)
            .set("per", "60s")
            .set("burst", 1)
            .set("key", &["header:x-consumer"]);
    }
    c.render()
}

fn engine(port: u16, dir: &std::path::Path, on_error: &str, rate_limit: bool) -> Engine {
    weir_redis::attach(
        Engine::from_toml(&config(port, dir, on_error, rate_limit), "gw.toml").unwrap(),
    )
    .unwrap()
}

/// One request to `/q`; 0 when it was proxied (the upstream answering 200), else the
/// gateway's status; with the response headers.
fn send(e: &Engine, consumer: &str, id: Option<&str>) -> (u16, Vec<(&'static str, String)>) {
    let mut headers = vec![("x-consumer", consumer)];
    if let Some(id) = id {
        headers.push(("idempotency-key", id));
    }
    let req = RequestInfo {
        method: "GET",
        path: "/q",
        headers: &&headers[..],
        client_ip: None,
        body_len: Some(0),
    };
    let mut flow = e.begin(&req);
    match block_on(flow.admit(&SleepTimer)) {
        Admission::Proceed => {
            let _ = flow.next_attempt().expect("an attempt");
            let h = match flow.on_attempt(weir_policy::AttemptResult::Response { status: 200 }) {
                weir_policy::Next::Forward { headers } => headers
                    .into_iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect(),
                other => panic!("{other:?}"),
            };
            flow.finish(200, None);
            (0, h)
        }
        Admission::Respond(r) => {
            let h = r.headers.iter().map(|(k, v)| (*k, v.to_string())).collect();
            let out = (r.status, h);
            flow.finish(r.status, None);
            out
        }
    }
}

fn admin_json(e: &Engine, target: &str) -> serde_json::Value {
    let r = e.admin("GET", target);
    assert_eq!(
        r.status,
        200,
        "{target}: {}",
        String::from_utf8_lossy(&r.body)
    );
    serde_json::from_slice(&r.body).unwrap()
}

fn used(e: &Engine, key: &str) -> (u64, u64) {
    let v = admin_json(e, &format!("/admin/quota?route=q&key={key}"));
    (
        v["used"].as_u64().unwrap(),
        v["ledger_sum"].as_u64().unwrap(),
    )
}

#[test]
fn one_global_quota_across_two_instances_duplicates_free() {
    let Some(srv) = Server::start() else { return };
    let (dir_a, dir_b) = (temp_dir("a"), temp_dir("b"));
    let a = engine(srv.port, dir_a.path(), "deny", false);
    let b = engine(srv.port, dir_b.path(), "deny", false);
    let mut admitted = 0;
    for i in 0..10 {
        let e = if i % 2 == 0 { &a } else { &b };
        let id = format!("req-{i}");
        let (st, h) = send(e, "acme", Some(&id));
        if st == 0 {
            admitted += 1;
            // The same event id again, on the other instance: passes, consumes nothing.
            let other = if i % 2 == 0 { &b } else { &a };
            assert_eq!(send(other, "acme", Some(&id)).0, 0, "a duplicate passes");
        } else {
            assert_eq!(st, 429);
            let v = h
                .iter()
                .find(|(k, _)| *k == "x-weir-reason")
                .map(|(_, v)| v.as_str());
            assert_eq!(v, Some("quota_exhausted"));
            assert!(h.iter().any(|(k, _)| *k == "retry-after"));
        }
    }
    assert_eq!(admitted, 5, "exactly the limit across two instances");
    assert_eq!(used(&a, "acme"), (5, 5));
    assert_eq!(used(&b, "acme"), (5, 5));
    assert!(
        a.metrics_text()
            .contains("weir_quota_duplicates_total{route=\"q\"}")
    );
    // Another consumer has its own count.
    assert_eq!(send(&b, "other", None).0, 0);
    // The period's ledger from Redis: 6 consume events, as JSON lines.
    let r = a.admin("GET", "/admin/quota/ledger?route=q");
    assert_eq!(r.status, 200);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&r.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    assert!(
        lines
            .iter()
            .all(|e| e["kind"] == "consume" && e["route"] == "q")
    );
    // An adjustment on one instance is seen by the other, idempotent by event id.
    let body = br#"{"route":"q","key":"acme","amount":2,"reason":"top-up","event_id":"adj-1"}"#;
    for applied in [true, false] {
        let r = a.admin_request("POST", "/admin/quota/adjust", &(), body);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["applied"], applied);
        assert_eq!(v["adjusted"], 2);
    }
    assert_eq!(send(&b, "acme", Some("after-top-up")).0, 0);
    assert_eq!(used(&a, "acme"), (6, 6));
}

#[test]
fn a_later_gate_rejection_consumes_nothing() {
    let Some(srv) = Server::start() else { return };
    let dir = temp_dir("later");
    let e = engine(srv.port, dir.path(), "deny", true);
    assert_eq!(send(&e, "acme", None).0, 0);
    // The rate limit (1 per minute) refuses the next ones: the quota gives them back.
    assert_eq!(send(&e, "acme", None).0, 429);
    assert_eq!(send(&e, "acme", Some("x")).0, 429);
    let t = Instant::now();
    while used(&e, "acme") != (1, 1) && t.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(used(&e, "acme"), (1, 1));
}

#[test]
fn outage_allow_passes_as_bypass_and_writes_back_once() {
    let Some(probe) = Server::start() else { return };
    drop(probe);
    let port = free_port();
    let dir = temp_dir("outage");
    let closed_dir = temp_dir("outage-deny");
    let closed = engine(port, closed_dir.path(), "deny", false);
    assert_eq!(
        send(&closed, "acme", None).0,
        503,
        "deny: 503 while the store is down"
    );
    let e = engine(port, dir.path(), "allow", false);
    // Store down: three requests pass as bypassed (one repeating an event id: one event).
    for id in [Some("b-1"), Some("b-1"), None, None] {
        let (st, h) = send(&e, "acme", id);
        assert_eq!(st, 0);
        assert!(
            h.iter()
                .any(|(k, v)| *k == "x-weir-ratelimit" && v == "bypassed")
        );
    }
    let local = std::fs::read_dir(dir.path().join("q")).unwrap().count();
    assert_eq!(local, 1, "the bypass events are in the local ledger");
    // Redis comes back: the next request writes the 3 bypass events back, then consumes.
    let srv = Server::start_on(port).expect("redis-server on its port");
    let t = Instant::now();
    loop {
        let (st, h) = send(&e, "acme", Some("after"));
        if st == 0 && !h.iter().any(|(_, v)| v == "bypassed") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "did not recover");
        thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(used(&e, "acme"), (4, 4), "3 bypass events + 1 consumption");
    let r = e.admin("GET", "/admin/quota/ledger?route=q");
    let body = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(body.matches("\"bypass\"").count(), 3, "{body}");
    // A restarted instance re-reads its journal and sends the bypass events again: the
    // store recognises their ids, nothing is counted twice.
    drop(e);
    let again = engine(port, dir.path(), "allow", false);
    assert_eq!(
        send(&again, "acme", Some("after")).0,
        0,
        "a duplicate of `after`"
    );
    assert_eq!(used(&again, "acme"), (4, 4), "written back exactly once");
    drop(srv);
}
