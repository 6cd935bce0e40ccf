//! A counting semaphore: a concurrency limit with RAII permits.
//!
//! **Why.** A rate limit bounds arrivals per unit of time; it does not bound how many requests
//! are *in flight* at once, which is what exhausts an upstream's threads, sockets or memory
//! when it slows down (Little's law: in-flight = rate × latency). A semaphore bounds that
//! number directly.
//!
//! **Bounds.** `in_use() <= max()` at every instant, for any interleaving: an acquisition is a
//! single compare-and-swap that succeeds only if the new count fits. A permit owns the count it
//! acquired and gives back exactly that count when dropped, so releasing more than was acquired
//! cannot be written. A cost above `max()` can never be granted (check [`Semaphore::max`]
//! to tell "full" from "never").
//!
//! **Cost.** Acquire is one load and one CAS; release is one `fetch_sub`. There is no waiter
//! queue: the core never blocks. Frontends build their bounded wait queue on top (they own
//! the async runtime), which is why this is cheaper than `tokio::sync::Semaphore`, whose
//! release takes the waiter-list lock.
//!
//! There is no single-owner form: a semaphore only makes sense shared, and a permit must be
//! able to outlive the borrow of the code that acquired it. For that,
//! [`Semaphore::try_acquire_owned`] takes any owner that dereferences to the semaphore
//! (`Arc<Semaphore>`, `&'static Semaphore`, …) so the core needs no `alloc`.

use crate::sync::{AtomicU64, Ordering};
use core::num::NonZeroU64;
use core::ops::Deref;

/// A counting semaphore of `max` permits, shared by `&self`.
///
/// ```
/// use core::num::NonZeroU64;
/// use weir_core::Semaphore;
///
/// let sem = Semaphore::new(NonZeroU64::new(2).unwrap());
/// let a = sem.try_acquire(1).unwrap();
/// let b = sem.try_acquire(1).unwrap();
/// assert!(sem.try_acquire(1).is_none()); // full
/// drop(a);
/// assert_eq!(sem.available(), 1);
/// drop(b);
/// assert_eq!(sem.in_use(), 0);
/// ```
#[derive(Debug)]
pub struct Semaphore {
    max: u64,
    used: AtomicU64,
}

impl Semaphore {
    /// A semaphore with `max` permits, all available.
    pub fn new(max: NonZeroU64) -> Self {
        Semaphore {
            max: max.get(),
            used: AtomicU64::new(0),
        }
    }

    /// The number of permits.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Permits currently held (a snapshot; may change right after).
    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Permits currently free (a snapshot).
    pub fn available(&self) -> u64 {
        self.max.saturating_sub(self.in_use())
    }

    /// Takes `n` permits if they are free now. `None` when full, and always when
    /// `n > max()`. `n = 0` always succeeds with an empty permit.
    #[inline]
    pub fn try_acquire(&self, n: u64) -> Option<Permit<'_>> {
        if self.acquire_raw(n) {
            Some(Permit { sem: self, n })
        } else {
            None
        }
    }

    /// Like [`try_acquire`](Self::try_acquire), for a semaphore held through an owner
    /// (`Arc<Semaphore>`, `&'static Semaphore`, …): the permit keeps the owner alive.
    ///
    /// ```
    /// use core::num::NonZeroU64;
    /// use std::sync::Arc;
    /// use weir_core::Semaphore;
    ///
    /// let sem = Arc::new(Semaphore::new(NonZeroU64::new(1).unwrap()));
    /// let permit = Semaphore::try_acquire_owned(Arc::clone(&sem), 1).unwrap();
    /// assert_eq!(sem.available(), 0);
    /// drop(permit);
    /// assert_eq!(sem.available(), 1);
    /// ```
    #[inline]
    pub fn try_acquire_owned<S: Deref<Target = Semaphore>>(
        this: S,
        n: u64,
    ) -> Option<OwnedPermit<S>> {
        if this.acquire_raw(n) {
            Some(OwnedPermit { sem: this, n })
        } else {
            None
        }
    }

    #[inline]
    fn acquire_raw(&self, n: u64) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = match cur.checked_add(n) {
                Some(v) if v <= self.max => v,
                _ => return false,
            };
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    #[inline]
    fn release_raw(&self, n: u64) {
        if n != 0 {
            // Cannot underflow: every release gives back a count a permit acquired.
            self.used.fetch_sub(n, Ordering::Release);
        }
    }
}

/// `n` permits of a borrowed [`Semaphore`], given back on drop.
#[derive(Debug)]
#[must_use = "the permits are released as soon as this is dropped"]
pub struct Permit<'a> {
    sem: &'a Semaphore,
    n: u64,
}

impl Permit<'_> {
    /// The number of permits held.
    pub fn count(&self) -> u64 {
        self.n
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.sem.release_raw(self.n);
    }
}

/// `n` permits of a [`Semaphore`] reached through an owner `S` (e.g. `Arc<Semaphore>`),
/// given back on drop.
#[derive(Debug)]
#[must_use = "the permits are released as soon as this is dropped"]
pub struct OwnedPermit<S: Deref<Target = Semaphore>> {
    sem: S,
    n: u64,
}

impl<S: Deref<Target = Semaphore>> OwnedPermit<S> {
    /// The number of permits held.
    pub fn count(&self) -> u64 {
        self.n
    }
    /// The semaphore the permits belong to.
    pub fn semaphore(&self) -> &Semaphore {
        &self.sem
    }
}

impl<S: Deref<Target = Semaphore>> Drop for OwnedPermit<S> {
    #[inline]
    fn drop(&mut self) {
        self.sem.release_raw(self.n);
    }
}

#[cfg(all(test, not(weir_loom)))]
mod tests {
    use super::*;

    fn sem(n: u64) -> Semaphore {
        Semaphore::new(NonZeroU64::new(n).unwrap())
    }

    #[test]
    fn never_over_grants_and_releases_exactly() {
        let s = sem(5);
        let a = s.try_acquire(3).unwrap();
        assert!(s.try_acquire(3).is_none());
        let b = s.try_acquire(2).unwrap();
        assert_eq!((s.in_use(), s.available()), (5, 0));
        assert!(s.try_acquire(1).is_none());
        assert_eq!(s.try_acquire(0).unwrap().count(), 0);
        drop(a);
        assert_eq!(s.available(), 3);
        drop(b);
        assert_eq!(s.in_use(), 0);
    }

    #[test]
    fn extremes() {
        let s = sem(u64::MAX);
        let a = s.try_acquire(u64::MAX).unwrap();
        assert!(s.try_acquire(1).is_none());
        drop(a);
        let _b = s.try_acquire(1).unwrap();
        assert!(s.try_acquire(u64::MAX).is_none()); // overflow is a denial
        assert!(sem(1).try_acquire(2).is_none());
    }

    #[test]
    fn owned_by_reference() {
        let s = sem(1);
        let p = Semaphore::try_acquire_owned(&s, 1).unwrap();
        assert_eq!(p.semaphore().in_use(), 1);
        assert!(Semaphore::try_acquire_owned(&s, 1).is_none());
        drop(p);
        assert_eq!(s.in_use(), 0);
    }
}

#[cfg(all(test, weir_loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn two_threads_never_over_grant() {
        loom::model(|| {
            let s = loom::sync::Arc::new(Semaphore::new(NonZeroU64::new(1).unwrap()));
            let s2 = s.clone();
            let t = loom::thread::spawn(move || {
                let p = s2.try_acquire(1);
                let got = p.is_some();
                drop(p);
                got
            });
            let p = s.try_acquire(1);
            assert!(s.in_use() <= 1);
            drop(p);
            let _ = t.join().unwrap();
            assert_eq!(s.in_use(), 0);
        });
    }
}
