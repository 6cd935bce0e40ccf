//! Keyed check: 8 keys and 1 M keys, governor's `DefaultKeyedRateLimiter` (dashmap) with
//! its default clock; the CAS floor first. Bytes of state per key are measured with a
//! counting allocator when the table is built and printed to stderr (and recorded in
//! docs/BENCHMARKS.md).
//!
//! TODO(issue 9): weir's keyed table is still being written (branch `core-limiters`); its
//! rows (same key sequences, same quota) go here when it lands on `main`.
//!
//! Keys are `u64`; the 1 M-key row visits the keys in a fixed pseudo-random order (an
//! odd-multiplier permutation) so the hash table is not walked sequentially. Every call is
//! admitted (burst `u32::MAX`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

#[global_allocator]
static ALLOC: weir_bench::CountingAlloc = weir_bench::CountingAlloc;

const MANY: u64 = 1 << 20;

fn quota() -> Quota {
    Quota::with_period(Duration::from_secs(1))
        .expect("non-zero")
        .allow_burst(NonZeroU32::MAX)
}

/// A governor keyed limiter holding keys `0..n`, and the heap bytes it took per key.
fn governor_with(n: u64) -> (DefaultKeyedRateLimiter<u64>, f64) {
    let before = weir_bench::allocated_bytes();
    let gov = RateLimiter::keyed(quota());
    for k in 0..n {
        let _ = gov.check_key(&k);
    }
    let bytes = (weir_bench::allocated_bytes() - before) as f64 / n as f64;
    (gov, bytes)
}

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));

    let (gov8, bytes8) = governor_with(8);
    let mut i = 0u64;
    g.bench_function("governor_8_keys", |b| {
        b.iter(|| {
            i = (i + 1) & 7;
            black_box(gov8.check_key(&black_box(i))).ok()
        })
    });
    drop(gov8);

    let (gov_many, bytes_many) = governor_with(MANY);
    eprintln!(
        "keyed: governor bytes of state per key: {bytes8:.0} (8 keys), {bytes_many:.1} (1M keys)"
    );
    let mut i = 0u64;
    g.bench_function("governor_1m_keys", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (MANY - 1);
            black_box(gov_many.check_key(&black_box(k))).ok()
        })
    });
    g.finish();
}

criterion_group!(benches, keyed);
criterion_main!(benches);
