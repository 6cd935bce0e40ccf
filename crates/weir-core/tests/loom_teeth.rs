//! The loom models have teeth: the token bucket's own pure step (the public
//! [`Algorithm::acquire_state`] of [`TokenBucketConfig`]) applied with a load + store instead
//! of a compare-and-swap loses updates, and loom finds the interleaving that over-admits.
//! The same harness with a CAS passes.
#![cfg(weir_loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::thread;
use weir_core::token_bucket::TokenBucketState;
use weir_core::{Algorithm, Nanos, TokenBucketConfig};

/// 1 token per µs, burst 2.
fn config() -> TokenBucketConfig {
    TokenBucketConfig::new(1, Nanos(1_000), 2).unwrap()
}

/// The real GCRA step on a state word: the new word if `cost` is admitted at `now`.
fn step(cfg: &TokenBucketConfig, word: u64, now: u64, cost: u64) -> Option<u64> {
    let mut st = TokenBucketState(u128::from(word));
    let d = cfg.acquire_state(&mut st, Nanos(now), cost).ok()?;
    d.is_allowed().then_some(st.0 as u64)
}

/// Correct: the step in a CAS loop.
fn cas_acquire(cfg: &TokenBucketConfig, tat: &AtomicU64, now: u64) -> bool {
    let mut cur = tat.load(Ordering::Acquire);
    loop {
        let Some(next) = step(cfg, cur, now, 1) else {
            return false;
        };
        match tat.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(actual) => cur = actual,
        }
    }
}

/// Deliberately broken: the same step, but load then store.
fn racy_acquire(cfg: &TokenBucketConfig, tat: &AtomicU64, now: u64) -> bool {
    let cur = tat.load(Ordering::Acquire);
    match step(cfg, cur, now, 1) {
        Some(next) => {
            tat.store(next, Ordering::Release);
            true
        }
        None => false,
    }
}

/// Three threads ask for one token each from a full bucket of two at the same instant:
/// exactly two may pass.
fn three_racers(acquire: fn(&TokenBucketConfig, &AtomicU64, u64) -> bool) {
    loom::model(move || {
        let cfg = config();
        let tat = Arc::new(AtomicU64::new(0));
        let admitted = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (tat, admitted) = (tat.clone(), admitted.clone());
                thread::spawn(move || {
                    if acquire(&config(), &tat, 0) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        if acquire(&cfg, &tat, 0) {
            admitted.fetch_add(1, Ordering::Relaxed);
        }
        for h in handles {
            h.join().unwrap();
        }
        let n = admitted.load(Ordering::Relaxed) as u64;
        assert!(
            n <= cfg.burst(),
            "over-admitted: {n} > burst {}",
            cfg.burst()
        );
        assert_eq!(n, cfg.burst(), "a full bucket must admit its burst");
    });
}

#[test]
fn cas_bucket_never_over_admits() {
    three_racers(cas_acquire);
}

#[test]
#[should_panic(expected = "over-admitted")]
fn load_store_bucket_is_caught() {
    three_racers(racy_acquire);
}
