//! Differential tests of the generic concurrent keyed table ([`KeyedShared`]) against the
//! single-owner [`KeyedLimiter`] over the same algorithm, for every [`WordStep`]
//! algorithm: on one thread, with time moving forward within the algorithm's horizon, both
//! tables give the same decisions, the same overflow flags and the same peeks, through
//! claims, reclaims of fresh slots and overflow (4 slots, up to 8 keys).
//!
//! Why equal although the tables may place keys differently (the concurrent one claims the
//! first empty slot, the single-owner one prefers an earlier fresh slot): a slot holding a
//! fresh state and an empty slot answer alike, so both tables hold the same set of keys
//! with non-fresh states, and overflow exactly when that set fills the probe window.
#![cfg(not(miri))]

use proptest::prelude::*;
use weir_core::keyed::{KeyedLimiter, KeyedShared, Slot};
use weir_core::{
    FixedWindowConfig, LeakyBucketConfig, Nanos, SlidingWindowConfig, TokenBucketConfig, WordStep,
};

/// `(key, time step, cost, peek)`.
type Step = (u64, u64, u64, bool);

fn steps(max_dt: u64, max_cost: u64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0..8u64,
            prop_oneof![Just(0u64), 0..max_dt],
            0..=max_cost + 1,
            prop::bool::weighted(0.2),
        ),
        1..120,
    )
}

/// Spreads small keys over the table like digests do (0 stays 0: the empty marker).
fn digest(k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn agree<A: WordStep + Clone>(alg: A, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut single = KeyedLimiter::<A, 4>::new(alg.clone());
    let slots: [Slot; 4] = core::array::from_fn(|_| Slot::new());
    let shared = KeyedShared::new(alg, &slots[..]);
    let mut now = 0u64;
    for (i, &(k, dt, cost, peek)) in steps.iter().enumerate() {
        now += dt;
        let key = digest(k);
        if peek {
            prop_assert_eq!(
                single.peek(key, Nanos(now), cost),
                shared.peek(key, Nanos(now), cost),
                "peek {} at step {}",
                k,
                i
            );
        } else {
            prop_assert_eq!(
                single.acquire(key, Nanos(now), cost),
                shared.acquire(key, Nanos(now), cost),
                "key {} at step {}",
                k,
                i
            );
        }
    }
    Ok(())
}

const S: u64 = 1_000_000_000;

proptest! {
    #[test]
    fn keyed_token_buckets_equal_single_owner(rate in 1..6u64, per in prop_oneof![Just(S), 1..2 * S], burst in 1..5u64, st in steps(S, 5)) {
        agree(TokenBucketConfig::new(rate, Nanos(per), burst).unwrap(), &st)?;
    }

    #[test]
    fn keyed_leaky_buckets_equal_single_owner(rate in 1..6u64, per in prop_oneof![Just(S), 1..2 * S], burst in 0..4u64, delay in 0..3u64, nodelay: bool, st in steps(S, 5)) {
        agree(LeakyBucketConfig::new(rate, Nanos(per), burst, delay, nodelay).unwrap(), &st)?;
    }

    #[test]
    fn keyed_fixed_windows_equal_single_owner(limit in 1..6u64, window in prop_oneof![Just(S), 1..1000u64], st in steps(S, 6)) {
        agree(FixedWindowConfig::new(limit, Nanos(window)).unwrap(), &st)?;
    }

    #[test]
    fn keyed_sliding_windows_equal_single_owner(limit in 1..8u64, window in prop_oneof![Just(S), 1..1000u64], st in steps(S, 8)) {
        agree(SlidingWindowConfig::new(limit, Nanos(window)).unwrap(), &st)?;
    }
}
