//! Token bucket, one thread: weir's single-owner and shared forms on manual time against
//! governor 0.10 `check()` (default quanta clock, and its fake clock), ratelimit 2
//! `try_wait`, with the uncontended CAS loop (the floor) first.
//!
//! Rows: `weir_*_manual` call `acquire` (the full `Decision`: `remaining`, `reset_after`);
//! `weir_tb_*_check_manual_clock` call the lean `check` (same step, returns only the fill
//! level as `Granted`, 8 bytes); `weir_tb_*_try_acquire_manual_clock` call `try_acquire`
//! (a `bool`, what governor's `check()` answers minus its `NotUntil`). The new rows, like
//! the floor row, leave the result to criterion's own `black_box` (the older rows wrap it
//! in a second one, a store and reload more per call).
//!
//! Workload: every call is admitted (no row measures a rejection path).
//! - weir: 3 per second, burst 1000, `now` advanced by 333 333 333 ns per call (a local
//!   add: weir takes the instant as an argument), so the bucket stays near full.
//! - governor: a quota of 1 per second with a burst of `u32::MAX`, so `check()` admits
//!   without time passing (advancing its fake clock would add an atomic RMW per call that
//!   weir's rows do not pay). Its default-clock row reads quanta each call.
//! - ratelimit: a huge rate and bucket, so `try_wait` always succeeds (it reads its own
//!   std clock each call; it has no way to inject time).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use governor::RateLimiter;
use governor::clock::FakeRelativeClock;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use weir_core::{Nanos, SharedTokenBucket, TokenBucket};

mod common;

/// The weir rows' bucket: 3 per second, burst 1000.
fn bucket() -> TokenBucket {
    TokenBucket::new(3, Nanos::from_secs(1), 1000).expect("valid")
}

fn shared_bucket() -> SharedTokenBucket {
    SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).expect("valid")
}

/// A weir row: `op` at a manual `now` advanced by 333 333 333 ns per call (a local add).
fn manual_clock<R>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, op: impl FnMut(Nanos) -> R) {
    common::bench_every::<333_333_333, R>(g, name, op)
}

fn token_bucket(c: &mut Criterion) {
    let mut g = c.benchmark_group("token_bucket");
    g.throughput(Throughput::Elements(1));

    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));

    let mut tb = bucket();
    manual_clock(&mut g, "weir_single_manual", |now| {
        black_box(tb.acquire(now, 1))
    });
    let shared = shared_bucket();
    manual_clock(&mut g, "weir_shared_manual", |now| {
        black_box(shared.acquire(now, 1))
    });
    let mut tb = bucket();
    manual_clock(&mut g, "weir_tb_single_check_manual_clock", |now| {
        tb.check(now, 1)
    });
    let shared = shared_bucket();
    manual_clock(&mut g, "weir_tb_shared_check_manual_clock", |now| {
        shared.check(now, 1)
    });
    let mut tb = bucket();
    manual_clock(&mut g, "weir_tb_single_try_acquire_manual_clock", |now| {
        tb.try_acquire(now, 1)
    });
    let shared = shared_bucket();
    manual_clock(&mut g, "weir_tb_shared_try_acquire_manual_clock", |now| {
        shared.try_acquire(now, 1)
    });

    let gov = RateLimiter::direct(weir_bench::governor_quota());
    g.bench_function("governor_default_clock", |b| {
        b.iter(|| black_box(gov.check()))
    });

    let gov_fake =
        RateLimiter::direct_with_clock(weir_bench::governor_quota(), FakeRelativeClock::default());
    g.bench_function("governor_fake_clock", |b| {
        b.iter(|| black_box(gov_fake.check()))
    });

    let rl = ratelimit::Ratelimiter::builder(1 << 40)
        .max_tokens(1 << 40)
        .initial_available(1 << 40)
        .build()
        .expect("valid");
    g.bench_function("ratelimit_try_wait", |b| {
        b.iter(|| black_box(rl.try_wait()))
    });
    g.finish();
}

criterion_group!(benches, token_bucket);
criterion_main!(benches);
