//! Keyed check: 8 keys and 1 M keys (2^20), weir's concurrent `KeyedTokenBuckets` (and the
//! single-owner `KeyedLimiter` for 8 keys) against governor's `DefaultKeyedRateLimiter`
//! (dashmap, default clock); the CAS floor first. Bytes of state per key are measured with
//! a counting allocator when each table is built and printed to stderr.
//!
//! Keys are `u64`; rows visit them in a fixed pseudo-random order (an odd-multiplier
//! permutation). weir's core takes a 64-bit digest, so weir's rows hash the key first:
//! with the gateway's table hash (ahash, randomly seeded; the plain row names) and, for
//! the hash comparison, with `std`'s `RandomState` (SipHash-1-3, the hash governor's
//! dashmap uses and weir's table hash before) and with foldhash. governor hashes inside
//! `check_key`. weir's tables have 2× as many slots as keys (the sizing its docs
//! recommend); weir runs on manual time. Every call is admitted (burst `u32::MAX` /
//! 4·10^9).
//!
//! Group `keyed_2_threads_8_keys`: two threads, each visiting the same 8 keys (offset by
//! 4), ns per op per thread (the slower thread's wall time over `iters` ops): the CAS floor
//! (both threads on one atomic), governor keyed, and weir's keyed table of every algorithm
//! as the gateway builds it for `max_keys = 100000` (the config default): the lock-free
//! `KeyedShared` for the token bucket, leaky bucket, fixed window and sliding-window
//! counter, and for the sliding log weir-policy's lock-striped table (stripes of 16 keys,
//! one `Mutex` each, mirrored here: the bench depends on weir-core only).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, RateLimiter};
use std::hash::{BuildHasher, RandomState};
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};
use weir_core::keyed::{KeyedLimiter, KeyedShared, KeyedTokenBuckets, Slot};
use weir_core::{
    FixedWindowConfig, LeakyBucketConfig, Nanos, SlidingLogConfig, SlidingWindowConfig,
    TokenBucketConfig, WordStep,
};

#[global_allocator]
static ALLOC: weir_bench::CountingAlloc = weir_bench::CountingAlloc;

const MANY: u64 = 1 << 20;

/// A governor keyed limiter holding keys `0..n`, and the heap bytes it took per key.
fn governor_with(n: u64) -> (DefaultKeyedRateLimiter<u64>, f64) {
    let before = weir_bench::allocated_bytes();
    let gov = RateLimiter::keyed(weir_bench::governor_quota());
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
fn weir_with(n: u64, hasher: &impl BuildHasher) -> (KeyedTokenBuckets<Box<[Slot]>>, f64) {
    let before = weir_bench::allocated_bytes();
    let slots: Box<[Slot]> = (0..2 * n).map(|_| Slot::new()).collect();
    let t = KeyedTokenBuckets::new(weir_cfg(), slots);
    for k in 0..n {
        let _ = t.acquire(hasher.hash_one(k), Nanos(1), 1);
    }
    let bytes = (weir_bench::allocated_bytes() - before) as f64 / n as f64;
    (t, bytes)
}

/// The gateway's table hash: ahash with random seeds.
fn gateway_hasher() -> ahash::RandomState {
    let r = RandomState::new();
    ahash::RandomState::with_seeds(r.hash_one(1), r.hash_one(2), r.hash_one(3), r.hash_one(4))
}

/// The 8-key row of `table` with `hasher`.
fn row_8<H: BuildHasher>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    hasher: &H,
) {
    let (weir8, _) = weir_with(8, hasher);
    let mut i = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 1) & 7;
            let d = hasher.hash_one(black_box(i));
            black_box(weir8.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
}

/// The 1 M-key row with `hasher`; returns the table's bytes per key and overflowed keys.
fn row_many<H: BuildHasher>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    hasher: &H,
) -> (f64, usize) {
    let (weir_many, bytes) = weir_with(MANY, hasher);
    let mut i = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (MANY - 1);
            let d = hasher.hash_one(black_box(k));
            black_box(weir_many.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
    (
        bytes,
        MANY as usize - weir_many.occupied().min(MANY as usize),
    )
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

    let hasher = gateway_hasher();
    let (_, wbytes8) = weir_with(8, &hasher);
    row_8(&mut g, "weir_shared_8_keys", &hasher);
    row_8(&mut g, "weir_shared_8_keys_siphash", &RandomState::new());
    row_8(
        &mut g,
        "weir_shared_8_keys_foldhash",
        &foldhash::fast::RandomState::default(),
    );
    let mut single = KeyedLimiter::<_, 16>::new(weir_cfg());
    let mut i = 0u64;
    g.bench_function("weir_single_8_keys", |b| {
        b.iter(|| {
            i = (i + 1) & 7;
            let d = hasher.hash_one(black_box(i));
            black_box(single.acquire(d, Nanos(black_box(1)), 1)).ok()
        })
    });
    let (wbytes_many, over) = row_many(&mut g, "weir_shared_1m_keys", &hasher);
    row_many(&mut g, "weir_shared_1m_keys_siphash", &RandomState::new());
    eprintln!(
        "keyed: weir bytes of state per key (2x slots): {wbytes8:.0} (8 keys), {wbytes_many:.1} (1M keys); overflowed keys: {over}"
    );

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

/// Runs `op(thread, i)` for `i in 0..iters` on each of two threads started together; the
/// slower thread's wall time.
fn two_threads<F: Fn(u64, u64) + Sync>(iters: u64, op: F) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|t| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        op(t, i);
                    }
                    start.elapsed()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread"))
            .max()
            .unwrap_or_default()
    })
}

/// The gateway's default `max_keys`.
const MAX_KEYS: usize = 100_000;

/// The key thread `t` visits at its step `i`: the 8 keys, the threads 4 apart.
fn key_of(t: u64, i: u64) -> u64 {
    (i + 4 * t) & 7
}

/// The 2-thread row of a lock-free table of `alg`.
fn row_2t<A: WordStep + Sync + Copy>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    alg: A,
    hasher: &ahash::RandomState,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            // A fresh table per sample, so that no window fills up.
            let slots: Box<[Slot]> = (0..MAX_KEYS).map(|_| Slot::new()).collect();
            let table = KeyedShared::new(alg, slots);
            two_threads(iters, |t, i| {
                let d = hasher.hash_one(key_of(t, i));
                black_box(table.acquire(d, Nanos(black_box(1)), 1)).ok();
            })
        })
    });
}

/// One stripe: 16 keys' logs, built on first use.
type LogStripe = Mutex<Option<Box<KeyedLimiter<SlidingLogConfig<16>, 16>>>>;

/// weir-policy's striped sliding-log table (stripes of 16 keys, one mutex each).
struct StripedLogs {
    alg: SlidingLogConfig<16>,
    stripes: Box<[LogStripe]>,
}

impl StripedLogs {
    fn acquire(&self, key: u64, now: Nanos) -> bool {
        let i = ((key as u32 as u64 * self.stripes.len() as u64) >> 32) as usize;
        let mut s = self.stripes[i].lock().unwrap_or_else(|p| p.into_inner());
        let t = s.get_or_insert_with(|| Box::new(KeyedLimiter::new(self.alg)));
        t.acquire(key, now, 1)
            .is_ok_and(|d| d.decision.is_allowed())
    }
}

fn keyed_two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_2_threads_8_keys");
    g.throughput(Throughput::Elements(1));
    g.bench_function("floor_cas_loop", |b| {
        b.iter_custom(|iters| {
            let a = AtomicU64::new(0);
            two_threads(iters, |_, _| {
                weir_bench::cas_step(&a);
            })
        })
    });
    let (gov, _) = governor_with(8);
    g.bench_function("governor_token_bucket", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |t, i| {
                black_box(gov.check_key(&key_of(t, i))).ok();
            })
        })
    });
    let hasher = gateway_hasher();
    row_2t(&mut g, "weir_token_bucket", weir_cfg(), &hasher);
    let lb = LeakyBucketConfig::new(1, Nanos::from_secs(1), 4_000_000_000, 0, true).expect("valid");
    row_2t(&mut g, "weir_leaky_bucket", lb, &hasher);
    let fw = FixedWindowConfig::new(u32::MAX as u64, Nanos::from_secs(1 << 20)).expect("valid");
    row_2t(&mut g, "weir_fixed_window", fw, &hasher);
    let sw = SlidingWindowConfig::new((1 << 24) - 1, Nanos::from_secs(1 << 20)).expect("valid");
    row_2t(&mut g, "weir_sliding_window", sw, &hasher);
    // The log admits at most 16 per window: the row measures the table and its locks on
    // a mix of admissions and rejections (a log decision is a scan of its live entries).
    let log = StripedLogs {
        alg: SlidingLogConfig::new(16, Nanos(1)).expect("valid"),
        stripes: (0..MAX_KEYS.div_ceil(16))
            .map(|_| Mutex::new(None))
            .collect(),
    };
    g.bench_function("weir_sliding_log_striped", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |t, i| {
                let d = hasher.hash_one(key_of(t, i));
                black_box(log.acquire(d, Nanos(black_box(i))));
            })
        })
    });
    g.finish();
}

criterion_group!(benches, keyed, keyed_two_threads);
criterion_main!(benches);
