//! Measures what the monoio gateway pays for reaching Redis through `RedisStore`'s client
//! thread (a channel send, a wake-up and a oneshot back) against calling the same Lua
//! script from a tokio runtime that owns the connection directly (what a frontend with a
//! native async Redis client would do). Same server, same script, interleaved rounds.
//!
//! `cargo run --release -p weir-redis --example hop` (needs `redis-server` on PATH).

// The tests' redis-server child and runtime-free executor.
#[path = "../tests/common/mod.rs"]
mod common;

use common::{Server, block_on};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use weir_core::Nanos;
use weir_redis::{Limit, RedisSettings, RedisStore};

const CALLS: usize = 2_000;
const PARALLEL: usize = 8;
const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let srv = Server::start().expect("redis-server on PATH");
    let url = srv.url();
    let limit = Limit::token_bucket(1_000_000, Nanos::from_secs(1), 1_000_000).unwrap();
    let store = RedisStore::start(RedisSettings {
        url: url.clone(),
        timeout: Duration::from_secs(1),
        lease: 0,
        ..Default::default()
    })
    .unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let script = Arc::new(redis::Script::new(weir_redis::scripts::TOKEN_BUCKET));
    let conn = rt.block_on(async {
        redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    });
    let direct_call = |conn: redis::aio::MultiplexedConnection,
                       script: Arc<redis::Script>,
                       key: String| async move {
        let mut c = conn;
        let _: Vec<i64> = script
            .key(key)
            .arg(1_000_000u64)
            .arg(1_000_000u64)
            .arg(1_000_000u64)
            .arg(1u64)
            .arg(1u64)
            .invoke_async(&mut c)
            .await
            .unwrap();
    };

    let (mut s_lat, mut d_lat, mut s_tp, mut d_tp) = (vec![], vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        // Sequential latency: store (client thread) from a plain thread.
        let t = Instant::now();
        for _ in 0..CALLS {
            block_on(store.acquire("weir:{hop:s}", &limit, 1)).unwrap();
        }
        s_lat.push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        // Sequential latency: direct on the runtime.
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..CALLS {
                direct_call(conn.clone(), script.clone(), "weir:{hop:d}".into()).await;
            }
        });
        d_lat.push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        // Throughput with PARALLEL callers.
        let t = Instant::now();
        thread::scope(|sc| {
            for _ in 0..PARALLEL {
                sc.spawn(|| {
                    for _ in 0..CALLS / PARALLEL {
                        block_on(store.acquire("weir:{hop:s}", &limit, 1)).unwrap();
                    }
                });
            }
        });
        s_tp.push(CALLS as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        rt.block_on(async {
            let hs: Vec<_> = (0..PARALLEL)
                .map(|_| {
                    let (c, s) = (conn.clone(), script.clone());
                    tokio::spawn(async move {
                        for _ in 0..CALLS / PARALLEL {
                            direct_call(c.clone(), s.clone(), "weir:{hop:d}".into()).await;
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        });
        d_tp.push(CALLS as f64 / t.elapsed().as_secs_f64());
        eprintln!("round {round}: done");
    }
    let (sl, dl, st, dt) = (median(s_lat), median(d_lat), median(s_tp), median(d_tp));
    println!("| path | sequential µs/call | {PARALLEL} callers, calls/s |");
    println!("|---|---:|---:|");
    println!("| RedisStore (client thread, any executor) | {sl:.1} | {st:.0} |");
    println!("| same script, direct on a tokio runtime | {dl:.1} | {dt:.0} |");
    println!("| ratio store / direct | {:.2} | {:.2} |", sl / dl, st / dt);
    drop(srv);
}
