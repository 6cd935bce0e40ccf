//! CPU time per operation, for machines too loaded for wall-clock criterion figures:
//! `perf stat -e task-clock:u target/release/examples/quick <row>` runs 20 M iterations of
//! one row (`cas`, `load`, `semaphore`, `tokio_semaphore`, `breaker_shared`,
//! `breaker_shared_rate`, `breaker_single`, `budget_deposit`, `budget_withdraw`,
//! `budget_single_withdraw`, `deadline`, `tb_single`, `tb_shared`, `tb_single_check`,
//! `tb_shared_check`, `tb_single_try`, `tb_shared_try` (the `token_bucket` suite's
//! workloads), `std_clock`, `quanta_raw`, `governor_check`, `tb_shared_std_clock`,
//! `tb_single_std_clock`, `quanta_clock`, `tb_shared_quanta_clock`,
//! `tb_single_quanta_clock`); task-clock counts only the time the process was on a CPU.
//! Without clock reads, the rows are deterministic: `valgrind --tool=callgrind` gives their
//! instruction counts (divide the total by the iterations).
use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::*;
/// One allow + record_success round on breaker `b`, `n` times (the `breaker_*` rows).
macro_rules! allow_success {
    ($b:expr, $n:expr) => {
        for _ in 0..$n {
            let t = $b.allow(black_box(Nanos(5))).unwrap().ticket;
            black_box($b.record_success(t, Nanos(6), Nanos(1)));
        }
    };
}

/// `f` at `n` times a third of a second apart: the 3-per-second buckets of the `tb_*` rows
/// admit every call.
fn thirds(n: u64, mut f: impl FnMut(Nanos)) {
    let mut t = 0u64;
    for _ in 0..n {
        t += 333_333_333;
        f(Nanos(t));
    }
}

/// `f` at `n` times a microsecond apart (the `budget_*` rows).
fn micros(n: u64, mut f: impl FnMut(Nanos)) {
    let mut t = 0u64;
    for _ in 0..n {
        t += 1000;
        f(Nanos(t));
    }
}

fn main() {
    let n = 20_000_000u64;
    let row = std::env::args().nth(1).unwrap_or_default();
    match row.as_str() {
        "cas" => {
            let a = AtomicU64::new(0);
            for _ in 0..n {
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
            }
        }
        "empty" => {
            for i in 0..n {
                black_box(i);
            }
        }
        "breaker_shared" => {
            let b = SharedBreaker::new(BreakerConfig::default(), 1).unwrap();
            allow_success!(b, n);
        }
        "load" => {
            let a = AtomicU64::new(0);
            for _ in 0..n {
                black_box(a.load(Ordering::Acquire));
            }
        }
        "breaker_shared_rate" => {
            let cfg = BreakerConfig {
                failure_rate_ppm: Some(500_000),
                ..BreakerConfig::default()
            };
            let b = SharedBreaker::new(cfg, 1).unwrap();
            allow_success!(b, n);
        }
        "breaker_single" => {
            let mut b = Breaker::new(BreakerConfig::default(), SplitMix64::new(1)).unwrap();
            allow_success!(b, n);
        }
        "semaphore" => {
            let s = Semaphore::new(NonZeroU64::new(64).unwrap());
            for _ in 0..n {
                drop(black_box(s.try_acquire(black_box(1))));
            }
        }
        "tokio_semaphore" => {
            let s = tokio::sync::Semaphore::new(64);
            for _ in 0..n {
                drop(black_box(s.try_acquire()));
            }
        }
        "budget_deposit" => {
            let b = SharedRetryBudget::new(
                RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).unwrap(),
            );
            micros(n, |t| b.deposit(black_box(t)));
        }
        "budget_withdraw" => {
            let b = SharedRetryBudget::new(
                RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).unwrap(),
            );
            micros(n, |t| {
                b.deposit(t);
                black_box(b.try_withdraw(black_box(t)));
            });
        }
        "budget_single_withdraw" => {
            let mut b = RetryBudget::new(
                RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).unwrap(),
            );
            micros(n, |t| {
                b.deposit(t);
                black_box(b.try_withdraw(black_box(t)));
            });
        }
        "tb_single" => {
            let mut tb = TokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                let _ = black_box(tb.acquire(black_box(t), 1));
            });
        }
        "tb_single_check" => {
            let mut tb = TokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                let _ = black_box(tb.check(black_box(t), 1));
            });
        }
        "tb_shared_check" => {
            let tb = SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                let _ = black_box(tb.check(black_box(t), 1));
            });
        }
        "tb_single_try" => {
            let mut tb = TokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                black_box(tb.try_acquire(black_box(t), 1));
            });
        }
        "tb_shared_try" => {
            let tb = SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                black_box(tb.try_acquire(black_box(t), 1));
            });
        }
        "tb_shared" => {
            let tb = SharedTokenBucket::new(3, Nanos::from_secs(1), 1000).unwrap();
            thirds(n, |t| {
                let _ = black_box(tb.acquire(black_box(t), 1));
            });
        }
        "std_clock" => {
            let c = StdClock::new();
            for _ in 0..n {
                black_box(c.now());
            }
        }
        "quanta_raw" => {
            let c = quanta::Clock::new();
            for _ in 0..n {
                black_box(c.raw());
            }
        }
        "governor_check" => {
            let gov = governor::RateLimiter::direct(
                governor::Quota::with_period(std::time::Duration::from_secs(1))
                    .unwrap()
                    .allow_burst(std::num::NonZeroU32::MAX),
            );
            for _ in 0..n {
                let _ = black_box(gov.check());
            }
        }
        "tb_shared_std_clock" => tb_shared_on(StdClock::new(), n),
        "tb_single_std_clock" => tb_single_on(StdClock::new(), n),
        "quanta_clock" => {
            let c = QuantaClock::new();
            for _ in 0..n {
                black_box(c.now());
            }
        }
        "tb_shared_quanta_clock" => tb_shared_on(QuantaClock::new(), n),
        "tb_single_quanta_clock" => tb_single_on(QuantaClock::new(), n),
        "deadline" => {
            let d = Deadline::new(Nanos(1_000), Nanos::from_millis(500));
            for _ in 0..n {
                black_box(black_box(d).per_try(
                    black_box(Nanos(400_000_000)),
                    black_box(Nanos::from_millis(200)),
                ));
            }
        }
        _ => eprintln!("unknown row"),
    }
}

/// `n` admitted acquisitions on a shared bucket reading clock `c` each call.
fn tb_shared_on<C: Clock>(c: C, n: u64) {
    let tb = SharedTokenBucket::new(1_000_000_000, Nanos::from_secs(1), 1_000_000_000).unwrap();
    tb.reset(c.now());
    for _ in 0..n {
        let _ = black_box(tb.acquire(c.now(), 1));
    }
}

/// `n` admitted acquisitions on a single-owner bucket reading clock `c` each call.
fn tb_single_on<C: Clock>(c: C, n: u64) {
    let mut tb = TokenBucket::new(1_000_000_000, Nanos::from_secs(1), 1_000_000_000).unwrap();
    for _ in 0..n {
        let _ = black_box(tb.acquire(c.now(), 1));
    }
}
