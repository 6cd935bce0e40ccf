//! Core primitives against the physical floor (an uncontended CAS loop).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::{Nanos, SharedTokenBucket, TokenBucket};

fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("cas_loop", |b| {
        b.iter(|| {
            let mut cur = a.load(Ordering::Relaxed);
            loop {
                match a.compare_exchange_weak(
                    cur,
                    black_box(cur + 1),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(v) => cur = v,
                }
            }
        })
    });
    // Token bucket on a manual time that advances one emission interval's worth per call
    // (3 per second, burst 1000: every call is admitted, the exact-arithmetic path).
    let mut tb = TokenBucket::new(3, Nanos::from_secs(1), 1000).expect("valid");
    let mut now = 0u64;
    g.bench_function("token_bucket", |b| {
        b.iter(|| {
            now += 333_333_333;
            black_box(tb.acquire(Nanos(black_box(now)), 1))
        })
    });
    let shared = SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).expect("valid");
    let mut now = 0u64;
    g.bench_function("shared_token_bucket", |b| {
        b.iter(|| {
            now += 333_333_333;
            black_box(shared.acquire(Nanos(black_box(now)), 1))
        })
    });
    g.finish();
}

criterion_group!(benches, floor);
criterion_main!(benches);
