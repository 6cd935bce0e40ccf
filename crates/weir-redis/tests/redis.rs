//! Against a real `redis-server` on loopback (started per test on its own port).
//! Skips with a message when `redis-server` is not installed, unless
//! `WEIR_REQUIRE_REDIS=1` (`cargo xtask test` installs Redis and sets it, so CI always runs
//! these).

mod common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{Server, block_on, free_port};
use weir_core::{Decision, Nanos, Verdict};
use weir_redis::{Limit, RedisSettings, RedisStore, StoreErrorKind};

fn store(url: &str, lease: u64, timeout_ms: u64) -> RedisStore {
    RedisStore::start(RedisSettings {
        url: url.into(),
        timeout: Duration::from_millis(timeout_ms),
        lease,
        ..Default::default()
    })
    .unwrap()
}

const MINUTE: Nanos = Nanos::from_secs(60);

/// `n` calls of cost 1 on `key`, in order.
fn calls(s: &RedisStore, key: &str, limit: &Limit, n: usize) -> Vec<Decision> {
    (0..n)
        .map(|_| block_on(s.acquire(key, limit, 1)).unwrap())
        .collect()
}

/// Whether `ok` holds within 50 tries `pause` apart.
fn eventually(pause: Duration, mut ok: impl FnMut() -> bool) -> bool {
    (0..50).any(|_| {
        ok() || {
            thread::sleep(pause);
            false
        }
    })
}

#[test]
fn two_instances_share_one_bucket() {
    let Some(srv) = Server::start() else { return };
    let a = store(&srv.url(), 0, 500);
    let b = store(&srv.url(), 0, 500);
    let limit = Limit::token_bucket(2, MINUTE, 2).unwrap();
    let key = "weir:{ok:abc}";
    let d1 = block_on(a.acquire(key, &limit, 1)).unwrap();
    let d2 = block_on(b.acquire(key, &limit, 1)).unwrap();
    let d3 = block_on(a.acquire(key, &limit, 1)).unwrap();
    let d4 = block_on(b.acquire(key, &limit, 1)).unwrap();
    assert_eq!((d1.verdict, d1.remaining), (Verdict::Admit, 1));
    assert_eq!((d2.verdict, d2.remaining), (Verdict::Admit, 0));
    assert_eq!(d3.verdict, Verdict::Reject);
    assert_eq!(d4.verdict, Verdict::Reject);
    // One token every 30 s: the retry is just under 30 s, never more.
    let secs = d3.retry_after.as_secs_ceil();
    assert!(
        (29..=30).contains(&secs),
        "retry_after {:?}",
        d3.retry_after
    );
    assert_eq!(d3.reset_after, d3.retry_after);
    // Another key is independent.
    assert_eq!(
        block_on(a.acquire("weir:{ok:other}", &limit, 2))
            .unwrap()
            .verdict,
        Verdict::Admit
    );
}

#[test]
fn key_expires_when_state_is_fresh_again() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 500);
    let limit = Limit::token_bucket(10, Nanos::from_millis(100), 5).unwrap();
    assert!(
        block_on(s.acquire("weir:{ttl:k}", &limit, 5))
            .unwrap()
            .is_allowed()
    );
    let out = Command::new("redis-cli")
        .args(["-p", &srv.port.to_string(), "PTTL", "weir:{ttl:k}"])
        .output()
        .unwrap();
    let pttl: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // 5 tokens at 10 per 100 ms refill in 50 ms: the key lives no longer than that (+1 ms).
    assert!((1..=51).contains(&pttl), "pttl {pttl}");
}

#[test]
fn windows_count_on_the_server() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 500);
    for limit in [
        Limit::fixed_window(3, MINUTE).unwrap(),
        Limit::sliding_window(3, MINUTE).unwrap(),
    ] {
        let key = format!("weir:{{w:{limit:?}}}");
        let got = calls(&s, &key, &limit, 4);
        assert!(
            got[..3].iter().all(|d| d.is_allowed()),
            "{limit:?}: {got:?}"
        );
        assert_eq!(got[2].remaining, 0);
        assert_eq!(got[3].verdict, Verdict::Reject, "{limit:?}");
        assert!(
            got[3].retry_after > Nanos::ZERO && got[3].retry_after <= Nanos::from_secs(120),
            "{got:?}"
        );
    }
}

#[test]
fn cost_above_capacity_is_an_error_not_a_denial() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 500);
    let e = block_on(s.acquire("weir:{c:k}", &Limit::token_bucket(1, MINUTE, 2).unwrap(), 3))
        .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Config);
}

#[test]
fn unreachable_store_fails_fast_and_recovers_without_restart() {
    let port = free_port();
    let s = store(&format!("redis://127.0.0.1:{port}/0"), 0, 200);
    let limit = Limit::token_bucket(100, Nanos::from_secs(1), 100).unwrap();
    let t = Instant::now();
    let e = block_on(s.acquire("weir:{r:k}", &limit, 1)).unwrap_err();
    assert!(
        matches!(
            e.kind,
            StoreErrorKind::Unavailable | StoreErrorKind::Timeout
        ),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    // The same store object works once Redis comes up...
    let Some(srv) = Server::start_on(port) else {
        return;
    };
    let answers = || block_on(s.acquire("weir:{r:k}", &limit, 1)).is_ok();
    assert!(
        eventually(Duration::from_millis(50), answers),
        "store did not recover after redis came up"
    );
    // ...fails when it dies...
    drop(srv);
    assert!(
        eventually(Duration::from_millis(20), || !answers()),
        "store kept answering after redis died"
    );
    // ...and recovers again when it is back.
    let _srv = Server::start_on(port).unwrap();
    assert!(
        eventually(Duration::from_millis(50), answers),
        "store did not reconnect"
    );
}

#[test]
fn a_stalled_server_is_a_timeout() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 100);
    let limit = Limit::fixed_window(10, MINUTE).unwrap();
    assert!(block_on(s.acquire("weir:{t:k}", &limit, 1)).is_ok());
    let port = srv.port;
    let sleeper = thread::spawn(move || {
        let _ = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "DEBUG", "SLEEP", "0.6"])
            .output();
    });
    thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let e = block_on(s.acquire("weir:{t:k}", &limit, 1)).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Timeout, "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(450),
        "took {:?}",
        t.elapsed()
    );
    sleeper.join().unwrap();
    srv.cli(&["PING"]);
}

/// With leases of `p`, the fleet never admits more than the exact single-bucket ideal
/// plus `instances × p` over the measured span (the documented bound). Three instances,
/// four threads each, for ~0.6 s.
#[test]
fn lease_over_admission_is_bounded() {
    let Some(srv) = Server::start() else { return };
    let (rate, burst, lease) = (200u64, 20u64, 10u64);
    let limit = Limit::token_bucket(rate, Nanos::from_secs(1), burst).unwrap();
    let stores: Vec<_> = (0..3).map(|_| store(&srv.url(), lease, 500)).collect();
    let start = Instant::now();
    let admitted: u64 = thread::scope(|sc| {
        let hs: Vec<_> = stores
            .iter()
            .flat_map(|s| (0..4).map(move |_| s))
            .map(|s| {
                sc.spawn(move || {
                    let mut n = 0;
                    while start.elapsed() < Duration::from_millis(600) {
                        if block_on(s.acquire("weir:{lease:k}", &limit, 1))
                            .unwrap()
                            .is_allowed()
                        {
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let span = start.elapsed().as_secs_f64();
    weir_e2e::redis::assert_lease_bound(
        admitted,
        (rate, burst, span),
        (stores.len() as u64, lease),
        0.5,
    );
}

#[test]
fn leaky_bucket_shapes_like_nginx() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 500);
    // 2 per second, burst 2, delay 1: pass, pass (within delay), delay ~500ms, reject.
    let limit = Limit::leaky_bucket(2, Nanos::from_secs(1), 2, 1, false).unwrap();
    let got = calls(&s, "weir:{lk:k}", &limit, 4);
    assert_eq!(got[0].verdict, Verdict::Admit, "{got:?}");
    assert_eq!(got[1].verdict, Verdict::Admit, "{got:?}");
    match got[2].verdict {
        Verdict::Delay(d) => assert!(
            d > Nanos::from_millis(400) && d <= Nanos::from_millis(500),
            "{d:?}"
        ),
        v => panic!("expected a delay, got {v:?}"),
    }
    assert_eq!(got[3].verdict, Verdict::Reject, "{got:?}");
    assert!(
        got[3].retry_after > Nanos::ZERO && got[3].retry_after <= Nanos::from_millis(500),
        "{got:?}"
    );
    // nodelay: the accepted excess passes at once.
    let nd = Limit::leaky_bucket(2, Nanos::from_secs(1), 2, 0, true).unwrap();
    let got: Vec<_> = calls(&s, "weir:{lk:nd}", &nd, 4)
        .iter()
        .map(|d| d.verdict)
        .collect();
    assert_eq!(
        got,
        [
            Verdict::Admit,
            Verdict::Admit,
            Verdict::Admit,
            Verdict::Reject
        ]
    );
}

#[test]
fn sliding_log_is_exact() {
    let Some(srv) = Server::start() else { return };
    let s = store(&srv.url(), 0, 500);
    let limit = Limit::sliding_log(3, Nanos::from_millis(300)).unwrap();
    let got = calls(&s, "weir:{sl:k}", &limit, 4);
    assert!(got[..3].iter().all(|d| d.is_allowed()), "{got:?}");
    assert_eq!(got[3].verdict, Verdict::Reject);
    assert!(got[3].retry_after <= Nanos::from_millis(300), "{got:?}");
    thread::sleep(Duration::from(got[3].retry_after) + Duration::from_millis(5));
    assert!(
        block_on(s.acquire("weir:{sl:k}", &limit, 1))
            .unwrap()
            .is_allowed()
    );
}
