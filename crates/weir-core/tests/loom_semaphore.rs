//! Loom models of [`Semaphore`]: under every interleaving the permits held never exceed
//! `max` (checked by a witness counter that each holder raises after acquiring and lowers
//! before releasing: its value is at most the permits really held), a request that fits when nothing else is held is granted, and every
//! permit is returned when its guard drops.
#![cfg(weir_loom)]

use core::num::NonZeroU64;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use weir_core::Semaphore;

/// Acquires `n`, holds (witness up), releases (witness down). Returns whether granted.
fn hold(sem: &Semaphore, held: &AtomicU64, n: u64, owned: bool) -> bool {
    let witness = |n: u64| {
        let now = held.fetch_add(n, Ordering::SeqCst) + n;
        assert!(now <= sem.max(), "over-granted: {now} > {}", sem.max());
        // Our own permits are still held: the counter cannot be below them.
        assert!(
            sem.in_use() >= n,
            "in_use {} below our own {n}",
            sem.in_use()
        );
        held.fetch_sub(n, Ordering::SeqCst);
    };
    if owned {
        match Semaphore::try_acquire_owned(sem, n) {
            Some(p) => {
                assert_eq!(p.count(), n);
                witness(n);
                drop(p);
                true
            }
            None => false,
        }
    } else {
        match sem.try_acquire(n) {
            Some(p) => {
                witness(n);
                drop(p);
                true
            }
            None => false,
        }
    }
}

fn model(max: u64, asks: &'static [u64]) {
    loom::model(move || {
        let sem = Arc::new(Semaphore::new(NonZeroU64::new(max).unwrap()));
        let held = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = asks[1..]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let (sem, held) = (sem.clone(), held.clone());
                thread::spawn(move || hold(&sem, &held, n, i % 2 == 0))
            })
            .collect();
        let mut granted = vec![hold(&sem, &held, asks[0], false)];
        granted.extend(handles.into_iter().map(|h| h.join().unwrap()));
        assert_eq!(sem.in_use(), 0, "permits not all returned");
        // A lone request that fits alone may only fail because another held permits: at
        // least one request that fits alone is always granted.
        if asks.iter().any(|&n| n <= max) {
            assert!(
                granted.iter().zip(asks).any(|(&g, &n)| g && n <= max),
                "nothing granted: {granted:?}"
            );
        }
        for (&g, &n) in granted.iter().zip(asks) {
            assert!(!(g && n > max), "granted {n} > max {max}");
        }
    });
}

#[test]
fn three_holders_of_a_two_permit_semaphore() {
    model(2, &[1, 2, 1]);
}

#[test]
fn single_permit_contention() {
    model(1, &[1, 1, 1]);
}

#[test]
fn oversized_and_zero_requests() {
    model(3, &[4, 0, 3]);
}

#[test]
fn near_u64_max_does_not_overflow() {
    model(u64::MAX, &[u64::MAX, 1, u64::MAX - 1]);
}
