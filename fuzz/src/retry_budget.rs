//! Retry budget: single-owner vs shared (identical on one thread) vs the exact event-list
//! model. Checked on every operation: single-owner and shared grant the same and report
//! the same `available`; every grant is allowed by the exact model (never over-grants);
//! `available` never exceeds the exact model's.

use crate::num::Tick;
use arbitrary::Arbitrary;
use weir_core::reference::RetryBudgetModel;
use weir_core::{Nanos, RetryBudget, RetryBudgetConfig, SharedRetryBudget};

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    ratio_ppm: u32,
    min_per_sec: u16,
    /// The window: `ttl_s` seconds plus `ttl_extra` ns.
    ttl_s: u8,
    ttl_extra: u32,
    ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// One request.
    Deposit,
    /// Several requests.
    Deposits(u8),
    /// One retry.
    Withdraw,
    /// Ask how many retries are available.
    Available,
    /// Move the clock.
    Clock(Tick),
    /// Move the clock by a fraction of a second (slot-boundary territory).
    Step(u32),
}

/// Runs one input.
pub fn check(input: Input) {
    let ttl =
        Nanos::from_secs(u64::from(input.ttl_s)).saturating_add(Nanos(u64::from(input.ttl_extra)));
    let min = u32::from(input.min_per_sec);
    let Ok(cfg) = RetryBudgetConfig::new(input.ratio_ppm, min, ttl) else {
        return;
    };
    let mut single = RetryBudget::new(cfg);
    let shared = SharedRetryBudget::new(cfg);
    let mut model = RetryBudgetModel::new(input.ratio_ppm, min, ttl);
    let mut now = 0u64;
    // The model holds at most 8192 events per window.
    let mut events = 0usize;
    for op in input.ops.into_iter().take(1024) {
        let t = Nanos(now);
        match op {
            Op::Deposit | Op::Deposits(_) => {
                let n = match op {
                    Op::Deposits(n) => usize::from(n),
                    _ => 1,
                };
                if events + n > 8000 {
                    continue;
                }
                events += n;
                for _ in 0..n {
                    single.deposit(t);
                    shared.deposit(t);
                    model.deposit(t);
                }
            }
            Op::Withdraw => {
                let a = single.try_withdraw(t);
                let b = shared.try_withdraw(t);
                assert_eq!(a, b, "shared vs single-owner withdrawal at {now}");
                if a {
                    events += 1;
                    assert!(model.check_grant(t), "over-granted a retry at {now}");
                } else {
                    // The implementation saw this instant too: the model must, or after a
                    // rewind it would place later events at an earlier "latest instant".
                    let _ = model.available(t);
                }
            }
            Op::Available => {
                let a = single.available(t);
                assert_eq!(a, shared.available(t), "available differs at {now}");
                assert!(
                    u128::from(a) <= model.available(t),
                    "available above the exact model"
                );
            }
            Op::Clock(tick) => now = tick.apply(now),
            Op::Step(d) => now = now.saturating_add(u64::from(d)),
        }
    }
}
