//! Retry machinery against the CAS floor: retry budget deposit / withdraw (shared and
//! single-owner), deadline `per_try`, backoff `delay` (full jitter, SplitMix64).
//!
//! Budgets run with ratio 1.0 so that a deposit followed by a withdraw always succeeds
//! (the steady state of a healthy service); `now` advances 1 µs per call.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use weir_core::{
    Backoff, Deadline, Jitter, Nanos, RetryBudget, RetryBudgetConfig, SharedRetryBudget, SplitMix64,
};

mod common;
use common::bench_per_micro;

fn cfg() -> RetryBudgetConfig {
    RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).expect("valid")
}

fn retry(c: &mut Criterion) {
    let mut g = c.benchmark_group("retry");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));

    let shared = SharedRetryBudget::new(cfg());
    bench_per_micro(&mut g, "budget_shared_deposit", |t| shared.deposit(t));
    let shared = SharedRetryBudget::new(cfg());
    bench_per_micro(&mut g, "budget_shared_deposit_withdraw", |t| {
        shared.deposit(t);
        black_box(shared.try_withdraw(t))
    });
    let mut single = RetryBudget::new(cfg());
    bench_per_micro(&mut g, "budget_single_deposit_withdraw", |t| {
        single.deposit(t);
        black_box(single.try_withdraw(t))
    });

    let d = Deadline::new(Nanos::from_secs(1), Nanos::from_millis(800));
    let mut now = 1_000_000_000u64;
    g.bench_function("deadline_per_try", |b| {
        b.iter(|| {
            now = (now + 7_919) & ((1 << 31) - 1);
            black_box(d.per_try(Nanos(black_box(now)), Nanos::from_millis(250)))
        })
    });

    let bo = Backoff::exponential(Nanos::from_millis(10), Nanos::from_secs(10), Jitter::Full)
        .expect("valid");
    let mut rng = SplitMix64::new(42);
    let mut attempt = 0u32;
    g.bench_function("backoff_delay_full_jitter", |b| {
        b.iter(|| {
            attempt = (attempt + 1) & 15;
            black_box(bo.delay(black_box(attempt), &mut rng))
        })
    });
    g.finish();
}

criterion_group!(benches, retry);
criterion_main!(benches);
