//! Bounded keyed state: the single-owner table and the concurrent table (driven from one
//! thread), each against a per-key reference — one plain token bucket per key, plus one
//! for the overflow — that never forgets anything.
//!
//! Checked, while the clock is monotone (and, for the concurrent table, within the token
//! bucket's horizon): every decision for a key served by a slot equals that key's own
//! reference bucket — so reusing a slot never handed a key a fresher bucket than it had
//! (no eviction of an active key); every overflow decision equals the shared overflow
//! reference; `occupied` never exceeds the capacity. Always: no panic, and a cost above
//! the burst is `InsufficientCapacity`.

use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::keyed::{KeyedLimiter, KeyedTokenBuckets, Slot};
use weir_core::{Decision, Nanos, TokenBucket, TokenBucketConfig};

/// Slots in the tables (small, so that probe windows fill up).
const SLOTS: usize = 8;

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    rate: N,
    per: N,
    burst: N,
    ops: Vec<Op>,
}

/// A key: one of a few digests that spread over the table, or an arbitrary one.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Key {
    /// A small key index, spread by a multiplicative hash.
    Spread(u8),
    /// A small raw digest (all share home slot 0; includes 0 and 1, which alias).
    Raw(u8),
    /// Any digest.
    Any(u64),
}

impl Key {
    fn digest(self) -> u64 {
        match self {
            Key::Spread(i) => u64::from(i % 24).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            Key::Raw(i) => u64::from(i % 24),
            Key::Any(k) => k,
        }
    }
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// Acquire a cost for a key.
    Acquire(Key, N),
    /// Peek a cost for a key.
    Peek(Key, N),
    /// Move the clock.
    Clock(Tick),
}

/// Per-key reference buckets.
struct Reference {
    cfg: TokenBucketConfig,
    keys: Vec<(u64, TokenBucket)>,
    overflow: TokenBucket,
}

impl Reference {
    fn new(cfg: TokenBucketConfig) -> Self {
        Reference {
            cfg,
            keys: Vec::new(),
            overflow: TokenBucket::from_algorithm(cfg),
        }
    }
    fn bucket(&mut self, key: u64, overflow: bool) -> &mut TokenBucket {
        if overflow {
            return &mut self.overflow;
        }
        let key = if key == 0 { 1 } else { key }; // the tables alias digest 0 to 1
        let i = match self.keys.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.keys.push((key, TokenBucket::from_algorithm(self.cfg)));
                self.keys.len() - 1
            }
        };
        &mut self.keys[i].1
    }
}

fn same(what: &str, got: Decision, want: Decision, key: u64, now: u64) {
    assert_eq!(got, want, "{what}: key {key:#x} at {now}");
}

/// Runs one input.
pub fn check(input: Input) {
    let Ok(cfg) = TokenBucketConfig::new(input.rate.0, Nanos(input.per.0), input.burst.0) else {
        return;
    };
    let mut single = KeyedLimiter::<TokenBucketConfig, SLOTS>::new(cfg);
    let slots: Vec<Slot> = (0..SLOTS).map(|_| Slot::new()).collect();
    let shared = KeyedTokenBuckets::new(cfg, slots.into_boxed_slice());
    let mut ref_single = Reference::new(cfg);
    let mut ref_shared = Reference::new(cfg);
    let horizon = cfg.horizon().0;
    let (mut now, mut latest) = (0u64, 0u64);
    let mut monotone = true;
    for op in input.ops.into_iter().take(256) {
        let t = Nanos(now);
        match op {
            Op::Clock(tick) => {
                now = tick.apply(now);
                monotone &= now >= latest;
                latest = latest.max(now);
            }
            Op::Acquire(key, N(cost)) => {
                let k = key.digest();
                let a = single.acquire(k, t, cost);
                let b = shared.acquire(k, t, cost);
                assert_eq!(a.is_err(), cost > cfg.burst());
                assert_eq!(b.is_err(), cost > cfg.burst());
                let (Ok(a), Ok(b)) = (a, b) else { continue };
                if monotone {
                    let want = ref_single.bucket(k, a.overflow).acquire(t, cost).unwrap();
                    same("single-owner table vs reference", a.decision, want, k, now);
                }
                if monotone && latest <= horizon {
                    let want = ref_shared.bucket(k, b.overflow).acquire(t, cost).unwrap();
                    same("concurrent table vs reference", b.decision, want, k, now);
                }
            }
            Op::Peek(key, N(cost)) => {
                let k = key.digest();
                let (Ok(a), Ok(b)) = (single.peek(k, t, cost), shared.peek(k, t, cost)) else {
                    assert!(cost > cfg.burst());
                    continue;
                };
                // A key without a slot is answered as fresh; with a monotone clock that is
                // also its reference (its slot was only reused once it was fresh).
                if monotone {
                    let want = ref_single.bucket(k, false).peek(t, cost).unwrap();
                    same("single-owner table peek vs reference", a, want, k, now);
                }
                if monotone && latest <= horizon {
                    let want = ref_shared.bucket(k, false).peek(t, cost).unwrap();
                    same("concurrent table peek vs reference", b, want, k, now);
                }
            }
        }
        assert!(single.occupied() <= SLOTS);
        assert!(shared.occupied() <= SLOTS);
    }
}
