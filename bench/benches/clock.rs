//! The real clock the frontends use (`weir_core::QuantaClock`, feature `quanta`, the
//! engine's default) and the OS clock (`weir_core::StdClock`) against `Instant::now()` and
//! quanta itself; then the token bucket *with* those clocks against governor's `check()`
//! with its default (quanta) clock — the comparison with governor in docs/BENCHMARKS.md is
//! `weir_tb_*_quanta_clock` against `governor_check_default_clock`.
//!
//! `Instant::now()` is first in the group (row `floor_instant_now`): the ratio column reads
//! "× one OS clock read". `quanta_clock_raw` (one TSC read, no scaling) is the floor of any
//! TSC-based clock, governor's included.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use governor::RateLimiter;
use std::hint::black_box;
use std::time::Instant;
use weir_core::{Clock, Nanos, QuantaClock, SharedTokenBucket, StdClock, TokenBucket};

fn clock(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    g.throughput(Throughput::Elements(1));

    g.bench_function("floor_instant_now", |b| {
        b.iter(|| black_box(Instant::now()))
    });
    let std_clock = StdClock::new();
    g.bench_function("weir_std_clock_now", |b| {
        b.iter(|| black_box(std_clock.now()))
    });
    let qc = QuantaClock::new();
    g.bench_function("weir_quanta_clock_now", |b| b.iter(|| black_box(qc.now())));
    let q = quanta::Clock::new();
    g.bench_function("quanta_clock_now", |b| b.iter(|| black_box(q.now())));
    g.bench_function("quanta_clock_raw", |b| b.iter(|| black_box(q.raw())));

    // Token bucket + real clock. Quota/bucket sized so that every call is admitted.
    let gov = RateLimiter::direct(weir_bench::governor_quota());
    g.bench_function("governor_check_default_clock", |b| {
        b.iter(|| black_box(gov.check()))
    });
    tb_rows(&mut g, "std", &std_clock);
    tb_rows(&mut g, "quanta", &qc);
    g.finish();
}

/// `weir_tb_single_{name}_clock` and `weir_tb_shared_{name}_clock`: a token bucket of 10^9
/// per second, burst 10^9 (real time refills as fast as the loop can spend), reading `clock`
/// on every call.
fn tb_rows<C: Clock>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, clock: &C) {
    let mut tb = TokenBucket::new(1_000_000_000, Nanos::from_secs(1), 1_000_000_000).expect("ok");
    g.bench_function(format!("weir_tb_single_{name}_clock"), |b| {
        b.iter(|| black_box(tb.acquire(clock.now(), 1)))
    });
    let shared =
        SharedTokenBucket::new(1_000_000_000, Nanos::from_secs(1), 1_000_000_000).expect("ok");
    shared.reset(clock.now());
    g.bench_function(format!("weir_tb_shared_{name}_clock"), |b| {
        b.iter(|| black_box(shared.acquire(clock.now(), 1)))
    });
}

criterion_group!(benches, clock);
criterion_main!(benches);
