//! Against a real Redis Cluster on loopback (three masters with one replica each, started
//! per test by `weir_e2e::cluster`): every algorithm on keys of every master, two clients
//! sharing one limit, scripts loaded per node after a flush, MOVED followed after a
//! planned failover, and a killed master: only its slots fail, and they recover once the
//! replica is promoted. Skips without `redis-server` unless `WEIR_REQUIRE_REDIS=1`.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::block_on;
use weir_core::{Nanos, Verdict};
use weir_e2e::cluster::{Master, RedisCluster};
use weir_redis::{Limit, RedisSettings, RedisStore};

const MINUTE: Nanos = Nanos::from_secs(60);

fn store(c: &RedisCluster, timeout_ms: u64) -> RedisStore {
    RedisStore::start(RedisSettings {
        cluster: c.seeds(),
        timeout: Duration::from_millis(timeout_ms),
        ..Default::default()
    })
    .unwrap()
}

/// A key `weir:{PREFIX-i}:d` whose slot `m` serves (the client's slot is the cluster's).
fn key_on(c: &RedisCluster, m: &Master, prefix: &str) -> String {
    let k = key_on_by_client(m, prefix);
    assert_eq!(c.slot_of(&k), weir_redis::slot(&k), "{k}");
    k
}

fn key_on_by_client(m: &Master, prefix: &str) -> String {
    (0..)
        .map(|i| format!("weir:{{{prefix}-{i}}}:d"))
        .find(|k| m.serves(weir_redis::slot(k)))
        .unwrap()
}

fn limits() -> [Limit; 5] {
    [
        Limit::token_bucket(3, MINUTE, 3).unwrap(),
        Limit::leaky_bucket(3, MINUTE, 2, 0, true).unwrap(),
        Limit::fixed_window(3, MINUTE).unwrap(),
        Limit::sliding_window(3, MINUTE).unwrap(),
        Limit::sliding_log(3, MINUTE).unwrap(),
    ]
}

/// Admissions out of `n` calls alternating between `a` and `b` on `key`.
fn admitted(a: &RedisStore, b: &RedisStore, key: &str, limit: &Limit, n: usize) -> usize {
    (0..n)
        .filter(|i| {
            let s = if i % 2 == 0 { a } else { b };
            block_on(s.acquire(key, limit, 1)).unwrap().verdict != Verdict::Reject
        })
        .count()
}

#[test]
fn every_algorithm_exact_across_two_clients_on_every_master() {
    let Some(c) = RedisCluster::start("cluster_every_algorithm") else {
        return;
    };
    let (a, b) = (store(&c, 1000), store(&c, 1000));
    let masters = c.masters();
    assert_eq!(masters.len(), 3);
    for m in &masters {
        for limit in limits() {
            let key = key_on(&c, m, &format!("{}-{}", m.port, limit.kind().as_str()));
            // Capacity 3 each (the leaky bucket: burst 2 + the request itself).
            assert_eq!(admitted(&a, &b, &key, &limit, 8), 3, "{key} {limit:?}");
        }
    }
    // Scripts are loaded per node: after a flush on every master, calls load them again.
    for m in &masters {
        assert!(c.cli(m.port, &["SCRIPT", "FLUSH"]).contains("OK"));
    }
    for m in &masters {
        let key = key_on(&c, m, "after-flush");
        let limit = Limit::fixed_window(2, MINUTE).unwrap();
        assert_eq!(admitted(&a, &b, &key, &limit, 4), 2, "{key}");
    }
}

/// Polls `ok` every 20 ms for up to `limit`; the time it took, or `None`.
fn within(limit: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if ok() {
            return Some(t.elapsed());
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn moved_followed_after_a_planned_failover_state_kept() {
    let Some(c) = RedisCluster::start("cluster_moved") else {
        return;
    };
    let s = store(&c, 1000);
    let m = c.masters()[0].clone();
    let key = key_on(&c, &m, "moved");
    let limit = Limit::token_bucket(4, MINUTE, 4).unwrap();
    assert_eq!(admitted(&s, &s, &key, &limit, 2), 2);
    // The replica of that master takes over (no data lost): the client's slot map is
    // stale, the old master answers MOVED, and the client follows it.
    let replica = c
        .cli(m.port, &["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix("slave0:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("port=")))
        .and_then(|p| p.trim().parse::<u16>().ok())
        .expect("the master has a replica");
    assert!(c.cli(replica, &["CLUSTER", "FAILOVER"]).contains("OK"));
    within(Duration::from_secs(10), || {
        c.master_of(weir_redis::slot(&key)).port == replica
    })
    .expect("replica promoted");
    // Same bucket: 2 of 4 were taken before the failover.
    assert_eq!(admitted(&s, &s, &key, &limit, 4), 2);
}

#[test]
fn killed_master_fails_only_its_slots_and_recovers_after_promotion() {
    let Some(mut c) = RedisCluster::start("cluster_killed_master") else {
        return;
    };
    let s = store(&c, 200);
    let masters = c.masters();
    let limit = Limit::token_bucket(1000, MINUTE, 1000).unwrap();
    let keys: Vec<String> = masters.iter().map(|m| key_on(&c, m, "kill")).collect();
    for k in &keys {
        block_on(s.acquire(k, &limit, 1)).unwrap();
    }
    c.kill(masters[0].port);
    let t0 = Instant::now();
    let ok = |k: &str| block_on(s.acquire(k, &limit, 1)).is_ok();
    // The killed master's slot fails while the others keep answering.
    within(Duration::from_secs(2), || !ok(&keys[0])).expect("the killed slot fails");
    for k in &keys[1..] {
        assert!(ok(k), "{k} on a live master must keep working");
    }
    // The replica is promoted (node timeout 1 s) and the client finds it: no restart.
    let took = within(Duration::from_secs(20), || ok(&keys[0])).unwrap_or_else(|| {
        panic!(
            "slot not recovered: {:?}; masters now {:?}",
            block_on(s.acquire(&keys[0], &limit, 1)),
            c.masters()
        )
    });
    let total = t0.elapsed();
    eprintln!(
        "cluster failover: the killed master's slots answered again {total:?} after the kill (last wait {took:?})"
    );
    for k in &keys[1..] {
        assert!(ok(k), "{k}");
    }
}

/// Global quotas on the cluster: a route whose hash tag every master serves in turn, one
/// count across two clients, the ledger and report scripts reading the same slot, and the
/// quota scripts loaded again after a flush.
#[test]
fn global_quota_exact_across_two_clients_on_every_master() {
    use weir_policy::{QuotaKeys, QuotaOp, QuotaRequest, QuotaStatus};
    let Some(c) = RedisCluster::start("cluster_quota") else {
        return;
    };
    let (a, b) = (store(&c, 1000), store(&c, 1000));
    let far = 4_000_000_000;
    let req = |k: &QuotaKeys, op| QuotaRequest {
        keys: k.clone(),
        op,
        markers_until: far,
        keep_until: far,
    };
    let consume = |i: usize| QuotaOp::Consume {
        limit: 3,
        cost: 1,
        event_id: Some(format!("ev-{}", i / 2)),
        event: format!("{{\"n\":{i}}}"),
    };
    for m in &c.masters() {
        let route = (0..)
            .map(|i| format!("q-{}-{i}", m.port))
            .find(|r| m.serves(weir_redis::slot(&format!("{{{r}}}"))))
            .unwrap();
        let k = QuotaKeys::new(&route, "2026-12", &"0f".repeat(16));
        assert_eq!(c.slot_of(&k.counter()), weir_redis::slot(&k.log()));
        // Pairs of calls share an event id: the second of each pair is a duplicate.
        let done = (0..12)
            .filter(|&i| {
                let s = if i % 2 == 0 { &a } else { &b };
                block_on(s.quota(req(&k, consume(i)))).unwrap().status == QuotaStatus::Done
            })
            .count();
        assert_eq!(done, 3, "{route}");
        let r = block_on(a.quota(req(&k, QuotaOp::Report))).unwrap();
        assert_eq!((r.used, r.ledger_sum), (3, 3), "{route}");
        let l = block_on(b.quota(req(&k, QuotaOp::Ledger))).unwrap();
        assert_eq!(l.events.len(), 3, "{route}");
        assert!(c.cli(m.port, &["SCRIPT", "FLUSH"]).contains("OK"));
        let adj = QuotaOp::Adjust {
            amount: 1,
            event_id: "adj".into(),
            event: "{}".into(),
        };
        assert_eq!(block_on(a.quota(req(&k, adj))).unwrap().adjusted, 1);
        let r = block_on(b.quota(req(&k, consume(100)))).unwrap();
        assert_eq!((r.status, r.used), (QuotaStatus::Done, 4), "{route}");
    }
}
