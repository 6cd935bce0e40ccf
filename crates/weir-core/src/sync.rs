//! The one place atomics come from: `portable-atomic` normally, `loom` under the
//! namespaced `--cfg weir_loom` (a plain `--cfg loom` would switch dependencies too).
//!
//! Under `weir_loom`, `AtomicU64` is a thin wrapper over loom's. Loom 0.7 models a
//! `SeqCst` *access* as `AcqRel` (tokio-rs/loom#180), so it reports store-buffering
//! outcomes that `SeqCst` forbids — e.g. two withdrawals of the retry budget that reserve
//! in different slots and each miss the other's reservation. Loom does model `SeqCst`
//! *fences* exactly, so the wrapper puts a `SeqCst` fence after every `SeqCst`
//! read-modify-write or store and before every `SeqCst` load. That forbids everything
//! `SeqCst` accesses forbid (it is slightly stronger: see `docs/VERIFICATION.md`), and
//! leaves every other ordering as loom models it.

#[cfg(not(weir_loom))]
#[allow(unused_imports)]
pub(crate) use portable_atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(weir_loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

#[cfg(weir_loom)]
pub(crate) use loom_seqcst::AtomicU64;

#[cfg(weir_loom)]
#[allow(dead_code)]
mod loom_seqcst {
    use loom::sync::atomic::{self, Ordering, fence};

    /// Loom's `AtomicU64` with `SeqCst` accesses strengthened by `SeqCst` fences.
    #[derive(Debug, Default)]
    pub(crate) struct AtomicU64(atomic::AtomicU64);

    #[inline]
    fn before(o: Ordering) {
        if o == Ordering::SeqCst {
            fence(Ordering::SeqCst);
        }
    }

    #[inline]
    fn after(o: Ordering) {
        if o == Ordering::SeqCst {
            fence(Ordering::SeqCst);
        }
    }

    /// The value-taking read-modify-writes: the inner op, then the fence `after` puts in.
    macro_rules! rmw {
        ($($name:ident),*) => {$(
            pub(crate) fn $name(&self, v: u64, o: Ordering) -> u64 {
                let r = self.0.$name(v, o);
                after(o);
                r
            }
        )*};
    }

    /// The compare-exchanges: the fence follows the ordering the outcome used.
    macro_rules! cas {
        ($($name:ident),*) => {$(
            pub(crate) fn $name(
                &self,
                current: u64,
                new: u64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<u64, u64> {
                let r = self.0.$name(current, new, success, failure);
                after(if r.is_ok() { success } else { failure });
                r
            }
        )*};
    }

    impl AtomicU64 {
        pub(crate) fn new(v: u64) -> Self {
            AtomicU64(atomic::AtomicU64::new(v))
        }
        pub(crate) fn load(&self, o: Ordering) -> u64 {
            before(o);
            self.0.load(o)
        }
        pub(crate) fn store(&self, v: u64, o: Ordering) {
            self.0.store(v, o);
            after(o);
        }
        cas!(compare_exchange, compare_exchange_weak);
        rmw!(
            swap, fetch_add, fetch_sub, fetch_max, fetch_min, fetch_or, fetch_and
        );
        pub(crate) fn fetch_update<F: FnMut(u64) -> Option<u64>>(
            &self,
            set: Ordering,
            fetch: Ordering,
            f: F,
        ) -> Result<u64, u64> {
            before(fetch);
            let r = self.0.fetch_update(set, fetch, f);
            after(if r.is_ok() { set } else { fetch });
            r
        }
    }
}

/// A spin-wait hint. Under loom a spinning thread must yield, or the model checker would
/// explore the spin forever.
#[inline]
#[allow(dead_code)]
pub(crate) fn spin_loop() {
    #[cfg(not(weir_loom))]
    core::hint::spin_loop();
    #[cfg(weir_loom)]
    loom::thread::yield_now();
}
