//! Outlier-ejection bookkeeping per attempt: what the engine adds around every upstream
//! attempt (choose the endpoint, count it in flight, record the outcome, end it) against
//! what it replaced (one shared round-robin counter), on three endpoints and manual time.
//!
//! Rows: the CAS floor; `rr_counter_baseline` (a `fetch_add` modulo the count, the choice
//! before ejection existed); the choice alone with nothing ejected; a whole attempt's
//! bookkeeping with a success (round robin and `least_request`); the same with one of the
//! three endpoints ejected (every pick then scans the endpoints' words).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use weir_core::{
    AttemptKind, Choice, EndpointState, Nanos, OutlierConfig, SharedOutlier, SplitMix64,
};

mod common;
use common::bench_per_micro;

/// One attempt's bookkeeping: pick, start, record `kind`, end.
fn attempt(
    o: &SharedOutlier,
    cfg: &OutlierConfig,
    eps: &[EndpointState],
    now: Nanos,
    choice: Choice,
) -> usize {
    let p = o.pick(cfg, eps, now, choice, None).map_or(0, |p| p.index);
    eps[p].start();
    black_box(o.record(cfg, eps, p, AttemptKind::Success, now, 0));
    eps[p].end();
    p
}

fn outlier(c: &mut Criterion) {
    let mut g = c.benchmark_group("outlier");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));
    let rr = AtomicUsize::new(0);
    g.bench_function("rr_counter_baseline", |b| {
        b.iter(|| black_box(rr.fetch_add(1, Ordering::Relaxed) % black_box(3)))
    });

    let cfg = OutlierConfig {
        max_ejection_percent: 50,
        ..OutlierConfig::default()
    };
    let eps: Vec<EndpointState> = (0..3).map(|_| EndpointState::new()).collect();
    let o = SharedOutlier::new();
    let cursor = AtomicUsize::new(0);
    let next = || Choice::RoundRobin(cursor.fetch_add(1, Ordering::Relaxed));
    bench_per_micro(&mut g, "pick_round_robin", |t| {
        black_box(o.pick(&cfg, &eps, t, next(), None))
    });
    bench_per_micro(&mut g, "attempt_round_robin_success", |t| {
        attempt(&o, &cfg, &eps, t, next())
    });
    let mut rng = SplitMix64::new(7);
    bench_per_micro(&mut g, "attempt_least_request_success", |t| {
        use weir_core::Rng;
        attempt(&o, &cfg, &eps, t, Choice::TwoRandom(rng.next_u64()))
    });

    // Endpoint 1 ejected for far longer than the run.
    let long = OutlierConfig {
        consecutive_failures: Some(1),
        base_ejection: Nanos::from_secs(1_000_000),
        max_ejection: Nanos::from_secs(1_000_000),
        ..cfg
    };
    let ejected: Vec<EndpointState> = (0..3).map(|_| EndpointState::new()).collect();
    let o2 = SharedOutlier::new();
    let e = o2.record(&long, &ejected, 1, AttemptKind::GatewayFailure, Nanos(0), 0);
    assert!(e.is_some(), "endpoint 1 ejected");
    bench_per_micro(&mut g, "attempt_round_robin_success_one_ejected", |t| {
        attempt(&o2, &long, &ejected, t, next())
    });
    g.finish();
}

criterion_group!(benches, outlier);
criterion_main!(benches);
