//! Two threads on one limiter (`iter_custom`): ns per operation *per thread* (each thread
//! does `iters` operations; the reported time is the wall time of the slower thread, so
//! criterion's per-iteration figure is ns per op per thread). Rows: the CAS loop floor,
//! weir's shared token bucket on manual time, governor's `check()` with its default clock
//! and with its fake clock.
//!
//! Every call is admitted: weir is 1 per second with a burst of 4·10^9 at a fixed instant,
//! governor 1 per second with a burst of `u32::MAX` (a fresh limiter per measurement).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::RateLimiter;
use governor::clock::FakeRelativeClock;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use weir_core::{Nanos, SharedTokenBucket};

/// Runs `op` `iters` times on each of two threads started together; the slower thread's
/// wall time.
fn two_threads<F: Fn() + Sync>(iters: u64, op: F) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        op();
                    }
                    t.elapsed()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread"))
            .max()
            .unwrap_or_default()
    })
}

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("contention_2_threads");
    g.throughput(Throughput::Elements(1));

    g.bench_function("floor_cas_loop", |b| {
        b.iter_custom(|iters| {
            let a = AtomicU64::new(0);
            two_threads(iters, || {
                weir_bench::cas_step(&a);
            })
        })
    });
    g.bench_function("weir_shared_manual", |b| {
        b.iter_custom(|iters| {
            let tb = SharedTokenBucket::new(1, Nanos::from_secs(1), 4_000_000_000).expect("ok");
            two_threads(iters, || {
                black_box(tb.acquire(Nanos(black_box(1)), 1)).ok();
            })
        })
    });
    g.bench_function("governor_default_clock", |b| {
        b.iter_custom(|iters| {
            let gov = RateLimiter::direct(weir_bench::governor_quota());
            two_threads(iters, || {
                black_box(gov.check()).ok();
            })
        })
    });
    g.bench_function("governor_fake_clock", |b| {
        b.iter_custom(|iters| {
            let gov = RateLimiter::direct_with_clock(
                weir_bench::governor_quota(),
                FakeRelativeClock::default(),
            );
            two_threads(iters, || {
                black_box(gov.check()).ok();
            })
        })
    });
    g.finish();
}

criterion_group!(benches, contention);
criterion_main!(benches);
