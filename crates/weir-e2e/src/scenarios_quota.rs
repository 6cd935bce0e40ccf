//! Quotas end to end (docs/CONFIG.md `[routes.quota]`, docs/HTTP.md "Quotas"): exhaustion
//! with its headers, event-id duplicates, adjustments, later-gate rejections and retries,
//! reload, and `kill -9` under load with both sync settings.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::path::Path;
use std::thread;
use std::time::Instant;

use crate::client::{self, Client, request};
use crate::harness::{Gateway, scratch_dir};
use crate::scenarios::{
    assert_gateway_made, config, demo, metric, metrics_when, route, token_bucket, unique,
};

/// A `[quota]` section in `dir` and one route `q` on `/ok` with `[routes.quota]` `extra`.
fn quota_routes(dir: &Path, sync: &str, quota: &str, more: &str) -> String {
    format!(
        "{}[routes.quota]\n{quota}\n{more}\n[quota]\ndir = \"{}\"\nsync = \"{sync}\"\n",
        route("q", "/ok", "blue"),
        dir.display()
    )
}

/// `GET /admin/quota` for key `key` of route `q`, as JSON.
fn state(gw: &Gateway, key: &str) -> serde_json::Value {
    let r = gw.admin("GET", &format!("/admin/quota?route=q&key={key}"));
    assert_eq!(r.status, 200, "{r:?}");
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// `POST /admin/quota/adjust` with `body`.
fn adjust(gw: &Gateway, body: &str) -> client::Resp {
    let raw = request("POST", "/admin/quota/adjust", &[], Some(body.as_bytes()));
    Client::connect(gw.admin)
        .and_then(|mut c| c.exchange(raw.as_bytes(), false))
        .expect("admin adjust")
}

fn used(st: &serde_json::Value) -> u64 {
    let used = st["used"].as_u64().expect("used");
    assert_eq!(
        st["ledger_sum"].as_u64(),
        Some(used),
        "ledger_sum == used: {st}"
    );
    used
}

/// Exhaustion: 429 `quota_exhausted` with `Retry-After` equal to the quota item's `t` and
/// the `"q.quota"` RateLimit items; a repeated event id passes free; an adjustment raises
/// the limit (idempotently); the ledger lists every event of the period.
pub fn quota_exhausted_duplicates_free_adjust_raises(bin: &Path) {
    let blue = demo("blue");
    let dir = scratch_dir();
    let routes = quota_routes(
        dir.path(),
        "1s",
        "limit = 2\nperiod = \"month\"\nkey = [\"header:x-consumer\"]\nevent_id = \"header:x-event\"",
        "",
    );
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &routes));
    let who = unique("acme");
    let c = format!("x-consumer: {who}");
    let ev = format!("x-event: {}", unique("ev"));
    let r = client::get(gw.addr, "/ok", &[&c, &ev]);
    assert_eq!(r.status, 200, "{r:?}");
    let w = r.header("ratelimit-policy").unwrap_or_default().to_string();
    assert!(w.starts_with("\"q.quota\";q=2;w="), "{r:?}");
    let secs: u64 = w.rsplit("w=").next().unwrap().parse().unwrap();
    assert!((28 * 86_400..=31 * 86_400).contains(&secs), "{w}");
    assert!(
        r.header("ratelimit")
            .unwrap()
            .starts_with("\"q.quota\";r=1;t="),
        "{r:?}"
    );
    // The same event id again: admitted, nothing consumed.
    let r = client::get(gw.addr, "/ok", &[&c, &ev]);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("ratelimit")
            .unwrap()
            .starts_with("\"q.quota\";r=1;"),
        "{r:?}"
    );
    assert_eq!(client::get(gw.addr, "/ok", &[&c]).status, 200);
    let r = client::get(gw.addr, "/ok", &[&c]);
    assert_gateway_made(&r, 429, "quota_exhausted");
    let t = r.header("retry-after").expect("retry-after");
    assert_eq!(
        r.header("ratelimit"),
        Some(format!("\"q.quota\";r=0;t={t}").as_str()),
        "{r:?}"
    );
    assert_eq!(used(&state(&gw, &who)), 2);
    let body = format!(
        r#"{{"route":"q","key":"{who}","amount":1,"reason":"support ticket","event_id":"adj-1"}}"#
    );
    for applied in [true, false] {
        let r = adjust(&gw, &body);
        assert_eq!(r.status, 200, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["applied"].as_bool(), Some(applied), "{v}");
        assert_eq!(
            (v["adjusted"].as_i64(), v["remaining"].as_u64()),
            (Some(1), Some(1))
        );
    }
    assert_eq!(client::get(gw.addr, "/ok", &[&c]).status, 200);
    assert_gateway_made(&client::get(gw.addr, "/ok", &[&c]), 429, "quota_exhausted");
    let st = state(&gw, &who);
    assert_eq!((used(&st), st["limit"].as_u64()), (3, Some(2)), "{st}");
    let period = st["period"].as_str().unwrap();
    let lines = gw
        .admin(
            "GET",
            &format!("/admin/quota/ledger?route=q&period={period}"),
        )
        .text();
    let kinds: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"].to_string())
        .collect();
    assert_eq!(
        kinds,
        ["\"consume\"", "\"consume\"", "\"adjust\"", "\"consume\""],
        "{lines}"
    );
    assert!(
        !lines.contains(&who),
        "the raw key never reaches the ledger: {lines}"
    );
    let m = metrics_when(
        &gw,
        &[
            ("weir_quota_consumed_total{route=\"q\"}", 3.0),
            ("weir_quota_exhausted_total{route=\"q\"}", 2.0),
            ("weir_quota_duplicates_total{route=\"q\"}", 1.0),
        ],
    );
    for (s, v) in [("consumed", 3.0), ("exhausted", 2.0), ("duplicates", 1.0)] {
        let series = format!("weir_quota_{s}_total{{route=\"q\"}}");
        assert_eq!(metric(&m, &series), Some(v), "{series}:\n{m}");
    }
}

/// A request a later gate rejects consumes nothing; a retried request consumes once;
/// `headers = false` leaves the quota items out; a reload keeps the state.
pub fn quota_later_gate_rejection_free_retries_once_reload_keeps(bin: &Path) {
    let blue = demo("blue");
    let dir = scratch_dir();
    let retry = "[routes.retry]\nmax_attempts = 3\non = [\"503\"]\nmethods = [\"GET\"]\n";
    let routes = quota_routes(
        dir.path(),
        "always",
        "limit = 3\nperiod = \"day\"\nkey = [\"header:x-consumer\"]\nheaders = false",
        &format!("{}{retry}", token_bucket(2, "60s", 2, "")),
    );
    let ups = [("blue", blue.addr())];
    let gw = Gateway::start(bin, &config(&ups, &routes));
    let who = unique("c");
    let c = format!("x-consumer: {who}");
    // The rate limit admits 2 of the route's requests.
    let r = client::get(gw.addr, "/ok", &[&c]);
    assert_eq!(r.status, 200, "{r:?}");
    let policy = r.header("ratelimit-policy").unwrap_or_default();
    assert!(!policy.contains("q.quota"), "headers = false: {r:?}");
    assert_eq!(client::get(gw.addr, "/ok", &[&c]).status, 200);
    assert_gateway_made(&client::get(gw.addr, "/ok", &[&c]), 429, "rate_limited");
    assert_eq!(
        used(&state(&gw, &who)),
        2,
        "the rate-limited request consumed nothing"
    );
    // A reload (the rate limit removed, a flaky route added) keeps the quota's count.
    let flaky = format!(
        "{}{}",
        route("flaky", "/flaky", "blue"),
        "[routes.retry]\nmax_attempts = 3\non = [\"503\"]\nidempotency_header = \"idempotency-key\"\n"
    );
    let reloaded = format!(
        "{flaky}{}",
        quota_routes(
            dir.path(),
            "always",
            "limit = 3\nperiod = \"day\"\nkey = [\"header:x-consumer\"]",
            retry
        )
    );
    std::fs::write(&gw.config_path, config(&ups, &reloaded)).unwrap();
    assert_eq!(gw.admin("POST", "/admin/reload").status, 200);
    assert_eq!(used(&state(&gw, &who)), 2, "reload keeps the state");
    let r = client::get(gw.addr, "/ok", &[&c]);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("ratelimit").unwrap().contains("\"q.quota\";r=0;"),
        "{r:?}"
    );
    assert_gateway_made(&client::get(gw.addr, "/ok", &[&c]), 429, "quota_exhausted");
    assert_eq!(used(&state(&gw, &who)), 3);
    drop(gw);
    // Retries: the demo's /flaky answers a key's first attempt with 503; one consumption.
    let retried = format!(
        "{}[routes.quota]\nlimit = 5\nperiod = \"day\"\nkey = [\"header:x-consumer\"]\n\n[quota]\ndir = \"{}\"\n",
        flaky,
        dir.path().display()
    );
    let gw = Gateway::start(bin, &config(&ups, &retried));
    let k = format!("idempotency-key: {}", unique("k"));
    let r = client::get(gw.addr, "/flaky", &[&c, &k]);
    assert_eq!(
        (r.status, r.header("x-weir-attempts")),
        (200, Some("2")),
        "{r:?}"
    );
    let r = gw.admin("GET", &format!("/admin/quota?route=flaky&key={who}"));
    let st: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(used(&st), 1, "two attempts, one consumption: {st}");
}

/// What one load run saw before the gateway was killed.
struct Load {
    /// Requests sent (each may or may not have been admitted).
    sent: u64,
    /// 200 responses received.
    ok: u64,
    /// 200 responses received more than [`SYNC_1S_WINDOW`] before the kill was sent.
    ok_before_window: u64,
}

/// What `sync = "1s"` may lose in a process crash: the consumptions of the writer's last
/// batch (it gathers for 1 ms, then writes). The window checked is wider — 100 ms — because
/// on two busy cores the writer thread can wait that long for a core; an answer older than
/// that must have survived.
const SYNC_1S_WINDOW: Duration = Duration::from_millis(100);

/// Clients hammer `/ok` for `run`, then the gateway gets SIGKILL while they still do.
fn load_then_kill(gw: &mut Gateway, key: &str, run: Duration) -> Load {
    let sent = AtomicU64::new(0);
    let ok = AtomicU64::new(0);
    let answered_at = std::sync::Mutex::new(Vec::<Instant>::new());
    let stop = AtomicBool::new(false);
    let addr = gw.addr;
    let killed = thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let h = format!("x-consumer: {key}");
                let mut c = None;
                while !stop.load(Ordering::Relaxed) {
                    let conn = match c.as_mut() {
                        Some(c) => c,
                        None => match Client::connect(addr) {
                            Ok(n) => c.insert(n),
                            Err(_) => break,
                        },
                    };
                    sent.fetch_add(1, Ordering::SeqCst);
                    match conn.get("/ok", &[&h]) {
                        Ok(r) if r.status == 200 => {
                            ok.fetch_add(1, Ordering::SeqCst);
                            answered_at
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(Instant::now());
                        }
                        Ok(_) => {}
                        Err(_) => c = None,
                    }
                }
            });
        }
        thread::sleep(run);
        let killed = Instant::now();
        gw.signal("KILL");
        let _ = gw.wait_exit(Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        killed
    });
    let cutoff = killed.checked_sub(SYNC_1S_WINDOW).unwrap_or(killed);
    let answered_at = answered_at.into_inner().unwrap_or_else(|e| e.into_inner());
    Load {
        sent: sent.into_inner(),
        ok: ok.into_inner(),
        ok_before_window: answered_at.iter().filter(|&&t| t < cutoff).count() as u64,
    }
}

/// `kill -9` under load, with `sync = "always"` and `sync = "1s"`: after a restart on the
/// same directory, the key's count is at most what was sent (nothing counted twice) and at
/// least every 200 a client received — with `"always"` all of them (each consumption is
/// fsynced before its response goes out); with `"1s"` all but those answered in the last
/// [`SYNC_1S_WINDOW`] before the kill (the writer thread's last batch, docs/CONFIG.md
/// "What a crash leaves").
pub fn quota_survives_kill_9_under_load(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    for sync in ["always", "1s"] {
        let dir = scratch_dir();
        let routes = quota_routes(
            dir.path(),
            sync,
            "limit = 100000000\nperiod = \"day\"\nkey = [\"header:x-consumer\"]",
            "",
        );
        let cfg = config(&ups, &routes);
        let key = unique("load");
        let mut gw = Gateway::start(bin, &cfg);
        let started = Instant::now();
        let load = load_then_kill(&mut gw, &key, Duration::from_millis(1500));
        drop(gw);
        assert!(
            load.ok > 10,
            "{sync}: too little load to judge ({} ok)",
            load.ok
        );
        let gw = Gateway::start(bin, &cfg);
        let n = used(&state(&gw, &key));
        eprintln!(
            "quota kill -9 (sync = {sync}): sent {}, 200s {}, used after restart {n} ({:?})",
            load.sent,
            load.ok,
            started.elapsed()
        );
        let must_survive = if sync == "always" {
            load.ok
        } else {
            load.ok_before_window
        };
        assert!(
            n >= must_survive,
            "{sync}: lost consumptions: used {n} < {must_survive} answered (of {} in all)",
            load.ok
        );
        assert!(
            n <= load.sent,
            "{sync}: counted twice: used {n} > {} sent",
            load.sent
        );
    }
}

/// `scope = "global"`: two instances share one count in Redis — the limit is exact across
/// them and a repeated event id is free on either; with the store down and
/// `on_store_error = "allow"` requests pass as bypassed and are kept as `bypass` events,
/// which the first request after recovery writes to Redis once (not again afterwards).
pub fn quota_global_exact_across_instances_bypass_written_back_once(bin: &Path) {
    let Some(mut redis) = crate::redis::RedisServer::start("quota_global") else {
        return;
    };
    let blue = demo("blue");
    let cfg = |dir: &Path| {
        let store = format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout_ms = 250\n\n",
            redis.url()
        );
        let routes = quota_routes(
            dir,
            "always",
            "limit = 4\nperiod = \"month\"\nkey = [\"header:x-consumer\"]\n\
             event_id = \"header:x-event\"\nscope = \"global\"\non_store_error = \"allow\"",
            "",
        );
        config(&[("blue", blue.addr())], &format!("{store}{routes}"))
    };
    let (dir_a, dir_b) = (scratch_dir(), scratch_dir());
    let (a, b) = (
        Gateway::start(bin, &cfg(dir_a.path())),
        Gateway::start(bin, &cfg(dir_b.path())),
    );
    let who = unique("acme");
    let c = format!("x-consumer: {who}");
    let mut admitted = 0;
    for i in 0..8 {
        let (gw, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let ev = format!("x-event: {}", unique("ev"));
        let r = client::get(gw.addr, "/ok", &[&c, &ev]);
        if r.status == 200 {
            admitted += 1;
            // The same event id on the other instance: passes, consumes nothing.
            assert_eq!(client::get(other.addr, "/ok", &[&c, &ev]).status, 200);
        } else {
            assert_gateway_made(&r, 429, "quota_exhausted");
            assert!(r.header("retry-after").is_some(), "{r:?}");
        }
    }
    assert_eq!(admitted, 4, "exactly the limit across two instances");
    assert_eq!(used(&state(&a, &who)), 4);
    assert_eq!(used(&state(&b, &who)), 4);

    // Store down: a fresh consumer's requests pass as bypassed (a repeated id once).
    redis.stop();
    let late = unique("late");
    let l = format!("x-consumer: {late}");
    for ev in ["x-event: b-1", "x-event: b-1", "x-event: b-2"] {
        let r = client::get(a.addr, "/ok", &[&l, ev]);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("x-weir-ratelimit"), Some("bypassed"), "{r:?}");
    }
    // Store back (empty: the e2e Redis keeps nothing): the first request through `a`
    // writes the two bypass events back before it consumes.
    redis.restart();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = client::get(a.addr, "/ok", &[&l, "x-event: after"]);
        if r.status == 200 && r.header("x-weir-ratelimit").is_none() {
            break;
        }
        assert!(Instant::now() < until, "never recovered: {r:?}");
        thread::sleep(Duration::from_millis(100));
    }
    // `b` has not talked to Redis since its restart: its first call may find the old
    // connection broken (503, and a new connection for the next call).
    let until = Instant::now() + Duration::from_secs(5);
    let path = format!("/admin/quota?route=q&key={late}");
    while b.admin("GET", &path).status != 200 {
        assert!(
            Instant::now() < until,
            "b's admin never reached Redis again"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let st = state(&b, &late);
    assert_eq!(used(&st), 3, "2 bypass events + 1 consumption, once: {st}");
    for _ in 0..3 {
        assert_eq!(
            client::get(a.addr, "/ok", &[&l, "x-event: after"]).status,
            200
        );
    }
    assert_eq!(used(&state(&b, &late)), 3, "never written back twice");
    let period = st["period"].as_str().unwrap();
    let lines = b
        .admin(
            "GET",
            &format!("/admin/quota/ledger?route=q&period={period}"),
        )
        .text();
    assert_eq!(lines.matches("\"bypass\"").count(), 2, "{lines}");
    assert!(!lines.contains(&late), "no raw key in the ledger: {lines}");
}
