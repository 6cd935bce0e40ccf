//! The keyed local limiters: one table of limiter states per route, keyed by descriptor
//! hash, shared by all threads (`scope = "local"`).
//!
//! Every table is built from the route's one [`Limit`]; this file only picks the core's
//! bounded keyed form for its algorithm and puts it behind one object-safe trait, so
//! routes with different algorithms look the same to the rate-limit step.

use std::sync::Mutex;
use weir_core::keyed::KeyedLimiter as CoreKeyed;
use weir_core::{
    Decision, InsufficientCapacity, KeyedDecision, KeyedTokenBuckets, Limit, Nanos,
    SlidingLogConfig, Slot, Verdict,
};

/// The ring of the local sliding log's single-owner form (entries per key).
pub(crate) const SLIDING_LOG_CAPACITY: usize = 1024;

// ---- keyed local limiters ---------------------------------------------------------------

/// What a local keyed limiter answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalAcquire {
    pub decision: Decision,
    /// The key was counted on the shared overflow limiter (table full of active keys).
    pub overflow: bool,
}

/// A per-route table of limiter states keyed by descriptor hash, shared by all threads.
pub(crate) trait KeyedLimiter: Send + Sync {
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire;
}

/// Builds the keyed limiter of a local rate limit (the core's bounded keyed tables).
///
/// - `token_bucket`: [`weir_core::KeyedTokenBuckets`] over `max_keys` slots — concurrent,
///   lock-free, one shared overflow bucket.
/// - other algorithms: the core's single-owner [`weir_core::KeyedLimiter`] (generic over
///   the algorithm, `N` slots inline, one overflow state) behind one mutex per route. Its
///   size is a compile-time constant, so the table gets the largest supported `N ≤
///   max_keys` (one of 65536, 16384, 4096, 1024, 256, 64, 16, 8, 4, 2, 1; at most 256 for `sliding_log`, whose
///   per-key state is the whole log, and at most 16 for a log above 1024 entries) — never more keys than `max_keys`.
///
/// `None` only for parameters the config compiler already rejected.
pub(crate) fn keyed_limiter(alg: &Limit, max_keys: u64) -> Option<Box<dyn KeyedLimiter>> {
    Some(match *alg {
        Limit::TokenBucket(cfg) => {
            let n = usize::try_from(max_keys)
                .unwrap_or(usize::MAX)
                .min(MAX_TB_SLOTS);
            let slots: Box<[Slot]> = (0..n).map(|_| Slot::new()).collect();
            Box::new(KeyedTokenBuckets::new(cfg, slots))
        }
        Limit::LeakyBucket(cfg) => sized(cfg, max_keys),
        Limit::FixedWindow(cfg) => sized(cfg, max_keys),
        Limit::SlidingWindow(cfg) => sized(cfg, max_keys),
        Limit::SlidingLog(cfg) => match LogConfig::new(cfg.limit(), cfg.window()) {
            Ok(small) => sized_log(small, max_keys),
            // Above the 1024-entry ring: full-size logs (256 KiB each), at most 16 keys.
            Err(_) => sized_big_log(cfg, max_keys),
        },
    })
}

/// The ring of a local sliding log up to 1024 entries (larger limits, up to
/// [`weir_core::MAX_SLIDING_LOG_LIMIT`], use a full-size ring).
type LogConfig = SlidingLogConfig<SLIDING_LOG_CAPACITY>;

/// The most token-bucket slots (16 bytes each): 64 MiB.
const MAX_TB_SLOTS: usize = 1 << 22;

fn never(e: InsufficientCapacity) -> Decision {
    // Cost is 1 and every capacity is at least 1: unreachable in practice; refuse.
    let _ = e;
    Decision {
        verdict: Verdict::Reject,
        remaining: 0,
        retry_after: Nanos::MAX,
        reset_after: Nanos::ZERO,
    }
}

fn local(r: Result<KeyedDecision, InsufficientCapacity>) -> LocalAcquire {
    match r {
        Ok(k) => LocalAcquire {
            decision: k.decision,
            overflow: k.overflow,
        },
        Err(e) => LocalAcquire {
            decision: never(e),
            overflow: false,
        },
    }
}

impl<S: AsRef<[Slot]> + Send + Sync> KeyedLimiter for KeyedTokenBuckets<S> {
    #[inline]
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        local(KeyedTokenBuckets::acquire(self, key, now, cost))
    }
}

/// A core single-owner keyed table shared by the route's threads.
struct Locked<A: weir_core::Algorithm, const N: usize>(Mutex<Box<CoreKeyed<A, N>>>);

impl<A, const N: usize> KeyedLimiter for Locked<A, N>
where
    A: weir_core::Algorithm + Send,
    A::State: Send,
{
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        local(t.acquire(key, now, cost))
    }
}

fn locked<A, const N: usize>(alg: A) -> Box<dyn KeyedLimiter>
where
    A: weir_core::Algorithm + Send + 'static,
    A::State: Send,
{
    // The table is built by value before it is boxed; large ones are built on a helper
    // thread with a stack big enough for them (load/reload time only).
    // (`build` is a separate frame: unoptimised builds reserve stack for every local of
    // a function, taken branch or not.)
    let size = core::mem::size_of::<CoreKeyed<A, N>>();
    let table = if size <= 64 * 1024 {
        build::<A, N>(alg)
    } else {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("weir-keyed-init".into())
                .stack_size(size * 16 + (8 << 20))
                .spawn_scoped(s, move || build::<A, N>(alg))
                .expect("spawn table builder")
                .join()
                .expect("table builder")
        })
    };
    Box::new(Locked(Mutex::new(table)))
}

#[inline(never)]
fn build<A: weir_core::Algorithm, const N: usize>(alg: A) -> Box<CoreKeyed<A, N>> {
    Box::new(CoreKeyed::<A, N>::new(alg))
}

macro_rules! pick_size {
    ($alg:expr, $max:expr; $($n:literal),*) => {{
        $( if $max >= $n { return locked::<_, $n>($alg); } )*
        locked::<_, 1>($alg)
    }};
}

fn sized<A>(alg: A, max_keys: u64) -> Box<dyn KeyedLimiter>
where
    A: weir_core::Algorithm + Send + 'static,
    A::State: Send,
{
    pick_size!(alg, max_keys; 65536, 16384, 4096, 1024, 256, 64, 16, 8, 4, 2)
}

fn sized_log(alg: LogConfig, max_keys: u64) -> Box<dyn KeyedLimiter> {
    pick_size!(alg, max_keys; 256, 64, 16, 8, 4, 2)
}

fn sized_big_log(alg: weir_core::SlidingLogLimit, max_keys: u64) -> Box<dyn KeyedLimiter> {
    pick_size!(alg, max_keys; 16, 8, 4, 2)
}
