//! The loom models have teeth: the same pure step applied with a load + store instead of a
//! compare-and-swap loses updates, and loom finds the interleaving that over-admits.
//!
//! Run with `cargo xtask test --only loom` (release, `--cfg weir_loom`, bounded preemptions).
#![cfg(weir_loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::thread;

/// A pure GCRA step: the theoretical arrival time `tat` after admitting `cost` at `now`,
/// or `None` when that would exceed `burst` (all in nanoseconds, emission interval `t`).
fn gcra_step(tat: u64, now: u64, cost: u64, t: u64, burst: u64) -> Option<u64> {
    let tau = t * burst;
    let new_tat = tat.max(now) + cost * t;
    if new_tat - now <= tau {
        Some(new_tat)
    } else {
        None
    }
}

const T: u64 = 1_000;
const BURST: u64 = 2;

/// The correct shared form: the pure step in a CAS loop.
struct CasBucket {
    tat: AtomicU64,
}

impl CasBucket {
    fn try_acquire(&self, now: u64) -> bool {
        let mut cur = self.tat.load(Ordering::Acquire);
        loop {
            let Some(next) = gcra_step(cur, now, 1, T, BURST) else {
                return false;
            };
            match self
                .tat
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }
}

/// The deliberately broken shared form: the same step, but load then store.
struct RacyBucket {
    tat: AtomicU64,
}

impl RacyBucket {
    fn try_acquire(&self, now: u64) -> bool {
        let cur = self.tat.load(Ordering::Acquire);
        match gcra_step(cur, now, 1, T, BURST) {
            Some(next) => {
                self.tat.store(next, Ordering::Release);
                true
            }
            None => false,
        }
    }
}

/// Three threads ask for one token each from a full bucket of two at the same instant:
/// exactly two may pass.
fn three_racers<B: Send + Sync + 'static>(bucket: fn() -> B, acquire: fn(&B, u64) -> bool) {
    loom::model(move || {
        let b = Arc::new(bucket());
        let admitted = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (b, admitted) = (b.clone(), admitted.clone());
                thread::spawn(move || {
                    if acquire(&b, 0) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        if acquire(&b, 0) {
            admitted.fetch_add(1, Ordering::Relaxed);
        }
        for h in handles {
            h.join().unwrap();
        }
        let n = admitted.load(Ordering::Relaxed);
        assert!(n as u64 <= BURST, "over-admitted: {n} > burst {BURST}");
        assert_eq!(n as u64, BURST, "a full bucket must admit its burst");
    });
}

#[test]
fn cas_bucket_never_over_admits() {
    three_racers(
        || CasBucket {
            tat: AtomicU64::new(0),
        },
        CasBucket::try_acquire,
    );
}

#[test]
#[should_panic(expected = "over-admitted")]
fn load_store_bucket_is_caught() {
    three_racers(
        || RacyBucket {
            tat: AtomicU64::new(0),
        },
        RacyBucket::try_acquire,
    );
}
