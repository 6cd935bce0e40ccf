//! Core primitives against the physical floor (an uncontended CAS loop).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::{
    Breaker, BreakerConfig, Deadline, Nanos, RetryBudgetConfig, Semaphore, SharedBreaker,
    SharedRetryBudget, SharedTokenBucket, SplitMix64, TokenBucket,
};

/// The physical floor, repeated in every group so each run gives the ratio.
fn cas_loop(a: &AtomicU64) {
    let mut cur = a.load(Ordering::Relaxed);
    loop {
        match a.compare_exchange_weak(cur, black_box(cur + 1), Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(v) => cur = v,
        }
    }
}

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

/// Semaphore, breaker closed path, retry budget and deadline against the CAS floor and
/// tokio's semaphore.
fn resilience(c: &mut Criterion) {
    let mut g = c.benchmark_group("resilience");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("cas_loop", |b| b.iter(|| cas_loop(&a)));

    let sem = Semaphore::new(NonZeroU64::new(64).unwrap());
    g.bench_function("semaphore_acquire_release", |b| {
        b.iter(|| drop(black_box(sem.try_acquire(black_box(1)))))
    });
    let tokio_sem = tokio::sync::Semaphore::new(64);
    g.bench_function("tokio_semaphore_try_acquire_drop", |b| {
        b.iter(|| drop(black_box(tokio_sem.try_acquire())))
    });

    let consecutive = BreakerConfig::default();
    let shared = SharedBreaker::new(consecutive, 1).unwrap();
    g.bench_function("breaker_shared_closed_allow_success", |b| {
        b.iter(|| {
            let t = shared.allow(black_box(Nanos(5))).unwrap().ticket;
            black_box(shared.record_success(t, Nanos(6), Nanos(1)))
        })
    });
    let rate = BreakerConfig {
        failure_rate_ppm: Some(500_000),
        ..BreakerConfig::default()
    };
    let shared_rate = SharedBreaker::new(rate, 1).unwrap();
    g.bench_function("breaker_shared_closed_allow_success_rate_window", |b| {
        b.iter(|| {
            let t = shared_rate.allow(black_box(Nanos(5))).unwrap().ticket;
            black_box(shared_rate.record_success(t, Nanos(6), Nanos(1)))
        })
    });
    let mut single = Breaker::new(rate, SplitMix64::new(1)).unwrap();
    g.bench_function("breaker_single_closed_allow_success_rate_window", |b| {
        b.iter(|| {
            let t = single.allow(black_box(Nanos(5))).unwrap().ticket;
            black_box(single.record_success(t, Nanos(6), Nanos(1)))
        })
    });

    let budget = SharedRetryBudget::new(
        RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).unwrap(),
    );
    let mut t = 0u64;
    g.bench_function("retry_budget_shared_deposit", |b| {
        b.iter(|| {
            t += 1000;
            budget.deposit(black_box(Nanos(t)))
        })
    });
    let mut t = 0u64;
    g.bench_function("retry_budget_shared_deposit_withdraw", |b| {
        b.iter(|| {
            t += 1000;
            budget.deposit(Nanos(t));
            black_box(budget.try_withdraw(black_box(Nanos(t))))
        })
    });

    let d = Deadline::new(Nanos(1_000), Nanos::from_millis(500));
    g.bench_function("deadline_per_try", |b| {
        b.iter(|| {
            black_box(d).per_try(
                black_box(Nanos(400_000_000)),
                black_box(Nanos::from_millis(200)),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, floor, resilience);
criterion_main!(benches);
