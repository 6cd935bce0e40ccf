//! What several suites share (`mod common;`): rows on a fake clock whose `now` advances
//! a fixed step per call (1 µs, or the suite's own), from 0 (a fresh `now` per row).

use criterion::BenchmarkGroup;
use criterion::measurement::WallTime;
use std::hint::black_box;
use weir_core::Nanos;

/// A row named `name` in group `g` calling `f` with a time 1 µs later each iteration (the
/// time passes through `black_box`, so the compiler cannot precompute it).
#[allow(dead_code)] // not every suite has 1 µs rows
pub(crate) fn bench_per_micro<R>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    f: impl FnMut(Nanos) -> R,
) {
    bench_every::<1_000, R>(g, name, f)
}

/// Like [`bench_per_micro`], the time advancing `STEP` ns per iteration.
pub(crate) fn bench_every<const STEP: u64, R>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut f: impl FnMut(Nanos) -> R,
) {
    let mut now = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            now += STEP;
            f(Nanos(black_box(now)))
        })
    });
}
