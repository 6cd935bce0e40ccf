//! Core primitives against the physical floor (an uncontended CAS loop).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

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
    g.finish();
}

criterion_group!(benches, floor);
criterion_main!(benches);
