//! Loom models of [`SharedRetryBudget`]: under every interleaving concurrent withdrawals
//! never grant more than the exact budget (`ratio × deposits + reserve`, counting every
//! deposit that *could* have been seen), a refused withdrawal leaves no reservation behind
//! (the budget afterwards is exactly `budget − grants`), and a single thread's decisions
//! match the single-owner [`RetryBudget`].
#![cfg(weir_loom)]

mod loom_common;

use loom::sync::Arc;
use loom_common::{model_tests, race};
use weir_core::{Nanos, RetryBudget, RetryBudgetConfig, SharedRetryBudget};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Deposit(u64),
    Withdraw(u64),
}

fn apply(b: &SharedRetryBudget, op: Op) -> Option<bool> {
    match op {
        Op::Deposit(now) => {
            b.deposit(Nanos(now));
            None
        }
        Op::Withdraw(now) => Some(b.try_withdraw(Nanos(now))),
    }
}

/// `budget` is the exact number of retries the model allows with every deposit counted
/// (pre and concurrent); `settled` the retries available after all ops, given the number
/// of grants.
fn model(
    cfg: fn() -> RetryBudgetConfig,
    pre: &'static [Op],
    ops: &'static [Op],
    budget: u64,
    settled: fn(u64) -> u64,
    end: u64,
) {
    loom::model(move || {
        let b = Arc::new(SharedRetryBudget::new(cfg()));
        for &op in pre {
            apply(&b, op);
        }
        let res = race(ops, {
            let b = b.clone();
            move |_, op| apply(&b, op)
        });
        let grants = res.iter().filter(|r| **r == Some(true)).count() as u64;
        assert!(
            grants <= budget,
            "over-granted: {grants} > {budget} ({res:?})"
        );
        assert_eq!(
            b.available(Nanos(end)),
            settled(grants),
            "reservation leaked or lost ({res:?})"
        );
    });
}

const S: u64 = 1_000_000_000;

/// A budget of `ratio` (millionths) and `reserve` per second.
fn cfg<const RATIO: u32, const RESERVE: u32>() -> RetryBudgetConfig {
    RetryBudgetConfig::new(RATIO, RESERVE, Nanos(S)).unwrap()
}

// Rows: `name(cfg, pre, ops, budget, settled, end);`.
model_tests! { model;
    // ratio 0, reserve 1/s × 1 s = exactly 1 retry.
    reserve_of_one_is_granted_once(cfg::<0, 1>, &[],
        &[Op::Withdraw(0), Op::Withdraw(0), Op::Withdraw(0)], 1, |g| 1 - g, 0);
    // ratio 0.5, no reserve; 2 deposits before, one concurrent: at most ⌊0.5 × 3⌋ = 1.
    ratio_with_concurrent_deposit(cfg::<500_000, 0>, &[Op::Deposit(0), Op::Deposit(0)],
        &[Op::Withdraw(0), Op::Deposit(0), Op::Withdraw(0)], 1, |g| 1 - g, 0);
    // ratio 1, 2 deposits at t=0; withdrawals at 0 and one slot later (same window): the
    // head moves concurrently; at most 2.
    withdrawals_in_different_slots(cfg::<1_000_000, 0>, &[Op::Deposit(0), Op::Deposit(0)],
        &[Op::Withdraw(0), Op::Withdraw(1 << 27), Op::Withdraw(0)], 2, |g| 2 - g, 1 << 27);
}

#[test]
fn single_thread_matches_single_owner() {
    loom::model(|| {
        let cfg = RetryBudgetConfig::new(250_000, 1, Nanos(S)).unwrap();
        let s = SharedRetryBudget::new(cfg);
        let mut o = RetryBudget::new(cfg);
        let mut t = 0;
        for i in 0..12u64 {
            t += i * 37_000_000;
            if i % 3 == 0 {
                assert_eq!(s.try_withdraw(Nanos(t)), o.try_withdraw(Nanos(t)));
            } else {
                s.deposit(Nanos(t));
                o.deposit(Nanos(t));
            }
        }
    });
}
