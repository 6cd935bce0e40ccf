//! Circuit breaker, closed path (allow, then record a success): weir's shared
//! (`SharedBreaker`) and single-owner (`Breaker`) forms against failsafe 1.3 `call` with
//! its default policy and with the consecutive-failures policy; the CAS floor first.
//!
//! failsafe's `call` runs the closure itself (here a no-op returning `Ok`); weir's rows do
//! the same two steps a frontend does around a call: `allow(now)` and
//! `record_success(ticket, now, duration)`, on manual time.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use failsafe::{CircuitBreaker, Config, backoff, failure_policy};
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use weir_core::{Breaker, BreakerConfig, Nanos, SharedBreaker, SplitMix64};

mod common;
use common::bench_per_micro;

fn breaker(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));

    let fs_default = Config::new().build();
    g.bench_function("failsafe_default_call", |b| {
        b.iter(|| black_box(fs_default.call(|| Ok::<u32, ()>(black_box(1)))))
    });
    let fs_consecutive = Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    g.bench_function("failsafe_consecutive_call", |b| {
        b.iter(|| black_box(fs_consecutive.call(|| Ok::<u32, ()>(black_box(1)))))
    });

    let shared = SharedBreaker::new(BreakerConfig::default(), 7).expect("valid");
    bench_per_micro(&mut g, "weir_shared_allow_success", |t| {
        match shared.allow(t) {
            Ok(adm) => black_box(shared.record_success(adm.ticket, t, Nanos(500))),
            Err(r) => black_box(r.transition),
        }
    });
    // With the failure-rate rule on as well (a count window of 20), closer to failsafe's
    // default policy (success rate over a time window, or consecutive failures).
    let rate = BreakerConfig {
        failure_rate_ppm: Some(500_000),
        ..BreakerConfig::default()
    };
    let shared_rate = SharedBreaker::new(rate, 7).expect("valid");
    bench_per_micro(
        &mut g,
        "weir_shared_rate_window_allow_success",
        |t| match shared_rate.allow(t) {
            Ok(adm) => black_box(shared_rate.record_success(adm.ticket, t, Nanos(500))),
            Err(r) => black_box(r.transition),
        },
    );
    let mut single = Breaker::new(BreakerConfig::default(), SplitMix64::new(7)).expect("valid");
    bench_per_micro(&mut g, "weir_single_allow_success", |t| {
        match single.allow(t) {
            Ok(adm) => black_box(single.record_success(adm.ticket, t, Nanos(500))),
            Err(r) => black_box(r.transition),
        }
    });
    g.finish();
}

criterion_group!(benches, breaker);
criterion_main!(benches);
