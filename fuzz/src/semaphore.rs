//! Semaphore: the real one vs a plain counter. Permits are held as real RAII guards
//! (borrowed and owned) and dropped in arbitrary order. Checked on every operation: the
//! grant decision equals the model's, `in_use` and `available` equal the model's (so
//! never over-granted, and every drop gives back exactly what was acquired), and after
//! everything is dropped nothing is held.

use crate::num::N;
use arbitrary::Arbitrary;
use core::num::NonZeroU64;
use weir_core::reference::SemaphoreModel;
use weir_core::{OwnedPermit, Permit, Semaphore};

/// A size and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    max: N,
    ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// `try_acquire(n)`, keeping the permit.
    Acquire(N),
    /// `try_acquire_owned(&sem, n)`, keeping the permit.
    AcquireOwned(N),
    /// Drop the held permit at this index (modulo the number held).
    Drop(u8),
}

#[allow(dead_code)] // held only to be dropped
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit<&'a Semaphore>),
}

/// Runs one input.
pub fn check(input: Input) {
    let Some(max) = NonZeroU64::new(input.max.0) else {
        return;
    };
    let sem = Semaphore::new(max);
    let mut model = SemaphoreModel::new(max.get());
    let mut held: Vec<(Held<'_>, u64)> = Vec::new();
    for op in input.ops.into_iter().take(512) {
        match op {
            Op::Acquire(N(n)) | Op::AcquireOwned(N(n)) => {
                let owned = matches!(op, Op::AcquireOwned(_));
                let want = model.try_acquire(n);
                let got = if owned {
                    Semaphore::try_acquire_owned(&sem, n).map(|p| {
                        assert_eq!(p.count(), n);
                        Held::Owned(p)
                    })
                } else {
                    sem.try_acquire(n).map(|p| {
                        assert_eq!(p.count(), n);
                        Held::Borrowed(p)
                    })
                };
                assert_eq!(got.is_some(), want, "grant of {n} differs from the model");
                if let Some(p) = got {
                    held.push((p, n));
                }
            }
            Op::Drop(i) => {
                if !held.is_empty() {
                    let (p, n) = held.swap_remove(usize::from(i) % held.len());
                    drop(p);
                    model.release(n);
                }
            }
        }
        assert!(sem.in_use() <= sem.max(), "over-granted");
        assert_eq!(sem.in_use(), model.used);
        assert_eq!(sem.available(), model.max - model.used);
    }
    drop(held);
    assert_eq!(sem.in_use(), 0, "permits not returned");
}
