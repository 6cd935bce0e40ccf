//! Global limits on a real Redis Cluster (docs/CONFIG.md, "Redis Cluster"), and fail-open
//! that expires with its evidence (`allow_for`, `GET /admin/bypass`, docs/HTTP.md).
//!
//! The cluster is three masters with one replica each on loopback ([`crate::cluster`]).
//! A route's keys share one hash slot (`weir:{route}:digest`), so the scenarios pick route
//! ids whose slot lies on the master they need. Each route's path is `/ID`, which the
//! demo upstream answers with its own 404: "proxied" below means the upstream answered
//! (no `x-weir-reason`).

use core::time::Duration;
use std::path::Path;
use std::thread;
use std::time::Instant;

use crate::client::{self, Resp};
use crate::cluster::{Master, RedisCluster};
use crate::harness::Gateway;
use crate::scenarios::{
    assert_gateway_made, config, demo, metric, metrics_when, route, token_bucket,
};

/// A route id `PREFIX-i` whose store keys (`weir:{id}:...`) live on master `m`.
fn route_on(c: &RedisCluster, m: &Master, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|id| m.serves(c.slot_of(&format!("weir:{{{id}}}:x"))))
        .unwrap_or_default()
}

/// `[store]` on the cluster's seeds.
fn cluster_store(c: &RedisCluster) -> String {
    format!(
        "[store]\nkind = \"redis\"\ncluster = {}\ntimeout_ms = 250\nlease = 0\n\n",
        c.seeds_toml()
    )
}

/// A global route `id` at `/id`: a token bucket of `n` per minute, and `extra` keys.
fn global_route(id: &str, n: u32, extra: &str) -> String {
    format!(
        "{}{}",
        route(id, &format!("/{id}"), "blue"),
        token_bucket(n, "60s", n, &format!("scope = \"global\"\n{extra}"))
    )
}

/// Two instances on one cluster: a route on every master admits exactly its limit in
/// total, the requests alternating between the instances.
pub fn cluster_limits_exact_across_two_instances_on_every_master(bin: &Path) {
    let Some(c) = RedisCluster::start("cluster_limits_exact") else {
        return;
    };
    let blue = demo("blue");
    let masters = c.masters();
    let ids: Vec<String> = masters.iter().map(|m| route_on(&c, m, "m")).collect();
    let routes: String = ids
        .iter()
        .map(|id| global_route(id, 3, "on_store_error = \"deny\""))
        .collect();
    let cfg = config(
        &[("blue", blue.addr())],
        &format!("{}{routes}", cluster_store(&c)),
    );
    let (a, b) = (Gateway::start(bin, &cfg), Gateway::start(bin, &cfg));
    for id in &ids {
        let got: Vec<String> = (0..8)
            .map(|i| {
                let gw = if i % 2 == 0 { &a } else { &b };
                outcome(&client::get(gw.addr, &format!("/{id}"), &[]))
            })
            .collect();
        let want = [["proxied"; 3].as_slice(), &["rate_limited"; 5]].concat();
        assert_eq!(got, want, "route {id}");
        assert_eq!(
            blue.stats().path(&format!("/{id}")),
            3,
            "upstream saw 3 on {id}"
        );
    }
}

/// `proxied` when the upstream answered, else the gateway's reason.
fn outcome(r: &Resp) -> String {
    match r.reason() {
        "" => "proxied".to_string(),
        reason => reason.to_string(),
    }
}

/// Proxied and not marked bypassed: the store decided.
fn limited(r: &Resp) -> bool {
    outcome(r) == "proxied" && r.header("x-weir-ratelimit").is_none()
}

/// GET `/id` on `gw` until `done` holds for the answer, at most `limit`; the time it took.
fn until(gw: &Gateway, id: &str, limit: Duration, done: impl Fn(&Resp) -> bool) -> Duration {
    let t = Instant::now();
    loop {
        let r = client::get(gw.addr, &format!("/{id}"), &[]);
        if done(&r) {
            return t.elapsed();
        }
        assert!(t.elapsed() < limit, "/{id} still {r:?} after {limit:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A master is killed: its replica is promoted and limits recover without a restart.
/// Meanwhile only the routes on that master follow `on_store_error` — deny answers 503,
/// allow passes as bypassed until its `allow_for` (500 ms, shorter than any failover)
/// runs out and then answers 503 too — while a route on another master keeps limiting.
pub fn cluster_master_killed_only_its_slots_fail_then_recover(bin: &Path) {
    let Some(mut c) = RedisCluster::start("cluster_master_killed") else {
        return;
    };
    let blue = demo("blue");
    let masters = c.masters();
    let deny = route_on(&c, &masters[0], "deny");
    let allow = route_on(&c, &masters[0], "allow");
    let other = route_on(&c, &masters[1], "other");
    let routes = format!(
        "{}{}{}{}",
        cluster_store(&c),
        global_route(&deny, 1000, "on_store_error = \"deny\""),
        global_route(
            &allow,
            1000,
            "on_store_error = \"allow\"\nallow_for = \"500ms\""
        ),
        global_route(&other, 2, "on_store_error = \"deny\""),
    );
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &routes));
    for id in [&deny, &allow] {
        let r = client::get(gw.addr, &format!("/{id}"), &[]);
        assert!(limited(&r), "{r:?}");
    }
    let r = client::get(gw.addr, &format!("/{other}"), &[]);
    assert!(limited(&r), "{r:?}");

    c.kill(masters[0].port);
    let kill = Instant::now();
    until(&gw, &deny, Duration::from_secs(5), |r| r.status == 503);
    let r = client::get(gw.addr, &format!("/{allow}"), &[]);
    assert_eq!(r.header("x-weir-ratelimit"), Some("bypassed"), "{r:?}");
    // The other master keeps its exact count: 1 of 2 left, then 429.
    let r = client::get(gw.addr, &format!("/{other}"), &[]);
    assert!(limited(&r), "a route on a live master keeps working: {r:?}");
    assert_gateway_made(
        &client::get(gw.addr, &format!("/{other}"), &[]),
        429,
        "rate_limited",
    );
    // allow_for ran out: fail closed while the slot is still down.
    until(&gw, &allow, Duration::from_secs(5), |r| {
        r.status == 503 && r.reason() == "ratelimit_store_unavailable"
    });
    // Promotion: both routes of the failed master answer again, no restart.
    until(&gw, &deny, Duration::from_secs(20), limited);
    let recovered = kill.elapsed();
    until(&gw, &allow, Duration::from_secs(5), limited);
    eprintln!(
        "cluster failover: routes on the killed master limited again {recovered:?} after the kill"
    );
    let m = metrics_when(
        &gw,
        &[(
            &format!("weir_ratelimit_bypass_active{{route=\"{allow}\"}}"),
            0.0,
        )],
    );
    assert_eq!(
        metric(
            &m,
            &format!("weir_ratelimit_bypass_active{{route=\"{allow}\"}}")
        ),
        Some(0.0)
    );
    let v = bypass_episodes(&gw);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0]["route"], allow.as_str());
    assert!(v[0]["ended"].is_string(), "{v:?}");
}

/// `GET /admin/bypass` → its `episodes`.
fn bypass_episodes(gw: &Gateway) -> Vec<serde_json::Value> {
    let r = gw.admin("GET", "/admin/bypass");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("bypass JSON");
    v["episodes"].as_array().cloned().unwrap_or_default()
}

/// Fail-open that expires on a single server: with `allow_for = "1s"` requests pass as
/// bypassed (gauge 1) for a second of outage, then answer 503 (gauge 0); the episode
/// records the requests, the distinct consumers and how many a per-key bucket started from
/// the last known state would have refused; the store's return ends the outage.
pub fn fail_open_expires_with_bypass_episode(bin: &Path) {
    let Some(mut redis) = crate::redis::RedisServer::start("fail_open_expires") else {
        return;
    };
    let store = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout_ms = 250\n\n",
        redis.url()
    );
    let limit = "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nper = \"60s\"\n\
                 burst = 2\nkey = [\"header:x-c\"]\nscope = \"global\"\n\
                 on_store_error = \"allow\"\nallow_for = \"1s\"\n";
    let blue = demo("blue");
    let api = format!("{store}{}{limit}", route("api", "/api", "blue"));
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &api));
    let go = |who: &str| client::get(gw.addr, "/api", &[&format!("x-c: {who}")]);
    let gauge = "weir_ratelimit_bypass_active{route=\"api\"}";
    assert_eq!(
        metric(&gw.admin("GET", "/metrics").text(), gauge),
        Some(0.0)
    );
    // alice used 1 of her 2 while the store answered.
    assert!(limited(&go("alice")));
    redis.stop();
    // The outage starts at the first failed call, which ends before its response does.
    let mut first: Option<Instant> = None;
    let mut passed = 0;
    for who in ["alice", "alice", "alice", "bob"] {
        let r = go(who);
        first.get_or_insert_with(Instant::now);
        assert_eq!(r.header("x-weir-ratelimit"), Some("bypassed"), "{r:?}");
        passed += 1;
    }
    let first = first.unwrap_or_else(Instant::now);
    if first.elapsed() < Duration::from_millis(800) {
        assert_eq!(
            metric(&gw.admin("GET", "/metrics").text(), gauge),
            Some(1.0)
        );
        let e = bypass_episodes(&gw);
        assert!(e[0]["ended"].is_null(), "{e:?}");
    }
    thread::sleep(Duration::from_millis(1100).saturating_sub(first.elapsed()));
    let r = go("carol");
    assert_gateway_made(&r, 503, "ratelimit_store_unavailable");
    assert_eq!(
        metric(&gw.admin("GET", "/metrics").text(), gauge),
        Some(0.0)
    );
    let e = bypass_episodes(&gw);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0]["ended"].is_string() && e[0]["started"].is_string(),
        "{e:?}"
    );
    assert_eq!(e[0]["requests"], passed);
    assert_eq!(e[0]["consumers"], 2);
    // alice: 1 left of 2, 3 passed → 2 over; bob: 1 of 2 → none over.
    assert_eq!(e[0]["over_limit"], 2);
    // The store is back (empty): limits apply again.
    redis.restart();
    let t = Instant::now();
    while go("dave").status == 503 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "store never answered again"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let r = go("dave");
    assert!(limited(&r), "{r:?}");
}
