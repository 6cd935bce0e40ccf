//! Semaphore acquire + release: weir's lock-free `Semaphore::try_acquire` + drop of the
//! permit against tokio's `Semaphore::try_acquire` + drop, with the CAS floor first.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::AtomicU64;

fn semaphore(c: &mut Criterion) {
    let mut g = c.benchmark_group("semaphore");
    g.throughput(Throughput::Elements(1));
    let a = AtomicU64::new(0);
    g.bench_function("floor_cas_loop", |b| b.iter(|| weir_bench::cas_step(&a)));

    let tokio_sem = tokio::sync::Semaphore::new(64);
    g.bench_function("tokio_try_acquire_drop", |b| {
        b.iter(|| drop(black_box(tokio_sem.try_acquire())))
    });
    let weir_sem = weir_core::Semaphore::new(NonZeroU64::new(64).expect("non-zero"));
    g.bench_function("weir_try_acquire_drop", |b| {
        b.iter(|| drop(black_box(weir_sem.try_acquire(1))))
    });
    g.finish();
}

criterion_group!(benches, semaphore);
criterion_main!(benches);
