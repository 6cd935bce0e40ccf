//! What several suites share (`mod common;`): rows on a fake clock whose `now` advances
//! 1 µs per call, from 0 (a fresh `now` per row).

use criterion::BenchmarkGroup;
use criterion::measurement::WallTime;
use std::hint::black_box;
use weir_core::Nanos;

/// A row named `name` in group `g` calling `f` with a time 1 µs later each iteration (the
/// time passes through `black_box`, so the compiler cannot precompute it).
pub fn bench_per_micro<R>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut f: impl FnMut(Nanos) -> R,
) {
    let mut now = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            now += 1_000;
            f(Nanos(black_box(now)))
        })
    });
}
