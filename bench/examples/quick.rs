//! CPU time per operation, for machines too loaded for wall-clock criterion figures:
//! `perf stat -e task-clock:u target/release/examples/quick <row>` runs 20 M iterations of
//! one row (`cas`, `load`, `semaphore`, `tokio_semaphore`, `breaker_shared`,
//! `breaker_shared_rate`, `breaker_single`, `budget_deposit`, `budget_withdraw`, `deadline`);
//! task-clock counts only the time the process was on a CPU.
use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::*;
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
            for _ in 0..n {
                let t = b.allow(black_box(Nanos(5))).unwrap().ticket;
                black_box(b.record_success(t, Nanos(6), Nanos(1)));
            }
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
            for _ in 0..n {
                let t = b.allow(black_box(Nanos(5))).unwrap().ticket;
                black_box(b.record_success(t, Nanos(6), Nanos(1)));
            }
        }
        "breaker_single" => {
            let mut b = Breaker::new(BreakerConfig::default(), SplitMix64::new(1)).unwrap();
            for _ in 0..n {
                let t = b.allow(black_box(Nanos(5))).unwrap().ticket;
                black_box(b.record_success(t, Nanos(6), Nanos(1)));
            }
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
            let mut t = 0u64;
            for _ in 0..n {
                t += 1000;
                b.deposit(black_box(Nanos(t)));
            }
        }
        "budget_withdraw" => {
            let b = SharedRetryBudget::new(
                RetryBudgetConfig::new(1_000_000, 10, Nanos::from_secs(10)).unwrap(),
            );
            let mut t = 0u64;
            for _ in 0..n {
                t += 1000;
                b.deposit(Nanos(t));
                black_box(b.try_withdraw(black_box(Nanos(t))));
            }
        }
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
