//! Keyed check: 8 keys and 1 M keys (2^20), weir's concurrent `KeyedTokenBuckets` (and the
//! single-owner `KeyedLimiter` for 8 keys) against governor's `DefaultKeyedRateLimiter`
//! (dashmap, default clock); the CAS floor first. Bytes of state per key are measured with
//! a counting allocator when each table is built and printed to stderr.
//!
//! Keys are `u64`; rows visit them in a fixed pseudo-random order (an odd-multiplier
//! permutation). weir's core takes a 64-bit digest, so weir's rows hash the key with the
//! same `std` `RandomState` (SipHash) that governor's dashmap uses: both pay one hash.
//! weir's tables have 2× as many slots as keys (the sizing its docs recommend); weir runs
//! on manual time. Every call is admitted (burst `u32::MAX` / 4·10^9).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::hash::{BuildHasher, RandomState};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use weir_core::keyed::{KeyedLimiter, KeyedTokenBuckets, Slot};
use weir_core::{Nanos, TokenBucketConfig};

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

fn weir_cfg() -> TokenBucketConfig {
    TokenBucketConfig::new(1, Nanos::from_secs(1), 4_000_000_000).expect("valid")
}

/// A weir concurrent table with `2n` slots holding keys `0..n`, and its bytes per key.
fn weir_with(n: u64, hasher: &RandomState) -> (KeyedTokenBuckets<Box<[Slot]>>, f64) {
    let before = weir_bench::allocated_bytes();
    let slots: Box<[Slot]> = (0..2 * n).map(|_| Slot::new()).collect();
    let t = KeyedTokenBuckets::new(weir_cfg(), slots);
    for k in 0..n {
        let _ = t.acquire(hasher.hash_one(k), Nanos(1), 1);
    }
    let bytes = (weir_bench::allocated_bytes() - before) as f64 / n as f64;
    (t, bytes)
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

    let hasher = RandomState::new();
    let (weir8, wbytes8) = weir_with(8, &hasher);
    let mut i = 0u64;
    g.bench_function("weir_shared_8_keys", |b| {
        b.iter(|| {
            i = (i + 1) & 7;
            let d = hasher.hash_one(black_box(i));
            black_box(weir8.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
    let mut single = KeyedLimiter::<_, 16>::new(weir_cfg());
    let mut i = 0u64;
    g.bench_function("weir_single_8_keys", |b| {
        b.iter(|| {
            i = (i + 1) & 7;
            let d = hasher.hash_one(black_box(i));
            black_box(single.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
    let (weir_many, wbytes_many) = weir_with(MANY, &hasher);
    let mut i = 0u64;
    g.bench_function("weir_shared_1m_keys", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (MANY - 1);
            let d = hasher.hash_one(black_box(k));
            black_box(weir_many.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
    eprintln!(
        "keyed: weir bytes of state per key (2x slots): {wbytes8:.0} (8 keys), {wbytes_many:.1} (1M keys); overflowed keys: {}",
        MANY as usize - weir_many.occupied().min(MANY as usize)
    );
    drop(weir_many);

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
