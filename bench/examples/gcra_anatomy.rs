//! Where the shared token bucket's cost over the CAS floor goes: interleaved rounds of the
//! floor, `SharedTokenBucket::try_acquire`, and stripped-down steps that each keep one part
//! of it, as ratios to the floor measured in the same round (medians printed at the end).
//!
//! `cargo run --release -p weir-bench --example gcra_anatomy [ROUNDS]` (default 31)
//!
//! Rows (every one advances `now` by 1/3 s through `black_box` per call, as the criterion
//! suite's weir rows do, and stays admitted):
//! - `floor`: `weir_bench::cas_step`, the criterion suite's first row;
//! - `floor+now`: the same CAS loop adding the advancing `now` (the harness alone);
//! - `weir`: `SharedTokenBucket::try_acquire(now, 1)` at 3 per second, burst 1000;
//! - `mul only`: load, CAS of `s + T + (now·k & 1)` — the `now·k` multiply feeding the CAS
//!   and nothing else (no over-limit test: not a limiter, a lower bound for exact GCRA,
//!   which needs `now·k` whenever `per / rate` is not whole nanoseconds);
//! - `select`: the whole step with the new word chosen by a select instead of a branch (the
//!   CAS then waits for `now·k` and the compare).
//!
//! Not a test and not a criterion suite: a tool for reading the cost of one step. Timings
//! on a shared machine drift between rounds; compare the per-round ratios.

use std::hint::{black_box, select_unpredictable};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use weir_core::{Nanos, SharedTokenBucket};

const CALLS: u64 = 20_000_000;
const STEP_NS: u64 = 333_333_333;
const HALF: u64 = 1 << 63;

/// The shared step's inputs, as plain fields (k = 3, T = 10^9 units, W = 1000·T).
struct Model {
    k: u64,
    t: u64,
    w: u64,
    tat: AtomicU64,
}

impl Model {
    fn new() -> Model {
        Model {
            k: black_box(3),
            t: black_box(1_000_000_000),
            w: black_box(1000 * 1_000_000_000),
            tat: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    fn mul_only(&self, now: u64) -> bool {
        let now_u = now.wrapping_mul(self.k);
        let s = self.tat.load(Ordering::Relaxed);
        let new = s.wrapping_add(self.t).wrapping_add(now_u & 1);
        self.tat
            .compare_exchange_weak(s, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    #[inline(always)]
    fn select(&self, now: u64) -> bool {
        let now_u = now.wrapping_mul(self.k);
        let limit = self.w - self.t;
        let s = self.tat.load(Ordering::Relaxed);
        let d = s.wrapping_sub(now_u);
        if d.wrapping_sub(limit + 1) < HALF - 1 - limit {
            return false; // over the limit: limit < d < 2^63
        }
        let base = select_unpredictable(d < HALF, s, now_u);
        self.tat
            .compare_exchange_weak(
                s,
                base.wrapping_add(self.t),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }
}

/// ns per call of `f` over `CALLS` calls, `now` advanced by `STEP_NS` per call.
#[inline(always)]
fn time(now: &mut u64, mut f: impl FnMut(u64) -> bool) -> f64 {
    let start = Instant::now();
    let mut t = *now;
    for _ in 0..CALLS {
        t += STEP_NS;
        black_box(f(black_box(t)));
    }
    *now = t;
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

#[inline(never)]
fn floor(a: &AtomicU64) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(weir_bench::cas_step(a));
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

#[inline(never)]
fn floor_now(a: &AtomicU64, now: &mut u64) -> f64 {
    time(now, |t| {
        let mut cur = a.load(Ordering::Relaxed);
        loop {
            match a.compare_exchange_weak(
                cur,
                cur.wrapping_add(t),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    })
}

#[inline(never)]
fn weir(b: &SharedTokenBucket, now: &mut u64) -> f64 {
    time(now, |t| b.try_acquire(Nanos(t), 1))
}

#[inline(never)]
fn mul_only(m: &Model, now: &mut u64) -> f64 {
    time(now, |t| m.mul_only(t))
}

#[inline(never)]
fn select(m: &Model, now: &mut u64) -> f64 {
    time(now, |t| m.select(t))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = match std::env::args().nth(1) {
        None => 31,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: gcra_anatomy [ROUNDS]  (a positive number)");
                std::process::exit(2);
            }
        },
    };
    let a = AtomicU64::new(0);
    let b = SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).expect("valid config");
    let (m1, m2) = (Model::new(), Model::new());
    let mut nows = [0u64; 4];
    let names = ["floor+now", "weir", "mul only", "select"];
    let mut ratios: [Vec<f64>; 4] = Default::default();
    for round in 1..=rounds {
        let f1 = floor(&a);
        let row = [
            floor_now(&a, &mut nows[0]),
            weir(&b, &mut nows[1]),
            mul_only(&m1, &mut nows[2]),
            select(&m2, &mut nows[3]),
        ];
        let f = (f1 + floor(&a)) / 2.0;
        print!("round {round:2}: floor {f:.2} ns");
        for (i, ns) in row.iter().enumerate() {
            ratios[i].push(ns / f);
            print!(" | {} {ns:.2} ({:.3})", names[i], ns / f);
        }
        println!();
    }
    print!("median ratio to the floor over {rounds} rounds:");
    for (name, r) in names.iter().zip(ratios) {
        print!(" {name} {:.3}", median(r));
    }
    println!();
}
