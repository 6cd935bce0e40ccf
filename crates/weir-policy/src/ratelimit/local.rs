//! The keyed local limiters: one table of limiter states per route, keyed by descriptor
//! hash, shared by all threads (`scope = "local"`).
//!
//! Every table is built from the route's one [`Limit`]; this file only picks the core's
//! bounded keyed form for its algorithm and puts it behind one object-safe trait, so
//! routes with different algorithms look the same to the rate-limit step.

use weir_core::{
    Algorithm, Decision, InsufficientCapacity, Limit, Nanos, SlidingLogConfig, SlidingLogLimit,
    Verdict,
};

/// The longest ring of the local sliding log's stripes of 16 keys (entries per key); a
/// limit above it (up to [`weir_core::MAX_SLIDING_LOG_LIMIT`]) gets a full-size ring in a
/// stripe of its own.
pub(crate) const SLIDING_LOG_CAPACITY: usize = 1024;

// ---- keyed local limiters ---------------------------------------------------------------
//
// Every local keyed algorithm runs on a table sized at load time with at least `max_keys`
// keys and no lock shared by the whole route:
//
// | algorithm | table | memory per key |
// |---|---|---|
// | token bucket, leaky bucket, fixed window, sliding-window counter | weir-core's lock-free `KeyedShared` (one CAS per decision) | 16 bytes (digest + state word) |
// | sliding log | `StripedLogs`: stripes of 16 keys, each a core `KeyedLimiter` behind its own `Mutex`, allocated on first use | about `8·N + 40` bytes, `N` the log length class ≥ `limit` (16, 128 or 1024): 168 B, 1 064 B or 8 232 B; a limit above 1024 gets a stripe of one key and its own overflow log (2 × 256 KiB, allocated on first use) |
//
// Capacity is `max_keys` slots exactly (16 slots per stripe for the log, rounded up),
// capped at `MAX_KEYED_SLOTS` (2^24 keys: 256 MiB of word slots). A key lives within 16
// slots of its home, so a table runs full of *active* keys before every slot is taken: size
// `max_keys` at about twice the keys expected to be active at once. Keys beyond that share
// the table's overflow limiter (counted as `weir_keys_overflow_total`).
//
// Why a mutex per stripe for the log and no lock-free form: a log's state is up to 1024
// instants, so one update writes several words (entries, head, length) that no single CAS
// covers. weir-core has no lock of its own (a spin lock guarding caller memory needs
// `unsafe`, which the core forbids). A `std::sync::Mutex` per stripe is one uncontended CAS
// to take and one store to release, like a spin lock, but parks a waiter instead of
// spinning when the holder is preempted (two workers on two shared cores). Two requests
// contend only when their keys share a stripe (`max_keys / 16` stripes), so a route's
// workers do not serialise as they did on one mutex per route.

use std::sync::Mutex as StripeLock;
use weir_core::keyed::KeyedLimiter as CoreKeyed;
use weir_core::{KeyedDecision, KeyedShared, Slot, WordStep};

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

/// Builds the keyed limiter of a local rate limit: a lock-free [`weir_core::KeyedShared`]
/// of `max_keys` slots for every algorithm with a one-word state, a [`StripedLogs`] of at
/// least `max_keys` keys for the sliding log (see the block comment above for memory per
/// key and the cap).
///
/// `None` only for parameters the config compiler already rejected.
pub(crate) fn keyed_limiter(alg: &Limit, max_keys: u64) -> Option<Box<dyn KeyedLimiter>> {
    let keys = usize::try_from(max_keys)
        .unwrap_or(usize::MAX)
        .clamp(1, MAX_KEYED_SLOTS);
    Some(match *alg {
        Limit::TokenBucket(cfg) => word_table(cfg, keys),
        Limit::LeakyBucket(cfg) => word_table(cfg, keys),
        Limit::FixedWindow(cfg) => word_table(cfg, keys),
        Limit::SlidingWindow(cfg) => word_table(cfg, keys),
        Limit::SlidingLog(cfg) => {
            let (limit, window) = (cfg.limit(), cfg.window());
            // The shortest log class that holds `limit` entries.
            if limit <= 16 {
                StripedLogs::<16, LOG_STRIPE_KEYS>::boxed(
                    SlidingLogConfig::new(limit, window).ok()?,
                    keys,
                )
            } else if limit <= 128 {
                StripedLogs::<128, LOG_STRIPE_KEYS>::boxed(
                    SlidingLogConfig::new(limit, window).ok()?,
                    keys,
                )
            } else if limit <= SLIDING_LOG_CAPACITY as u64 {
                StripedLogs::<SLIDING_LOG_CAPACITY, LOG_STRIPE_KEYS>::boxed(
                    SlidingLogConfig::new(limit, window).ok()?,
                    keys,
                )
            } else {
                // 256 KiB per log: one key per stripe, each log boxed on its own.
                BigLogs::boxed(cfg, keys)
            }
        }
    })
}

/// The most keys of one keyed table (16 bytes each in a word table: 256 MiB).
const MAX_KEYED_SLOTS: usize = 1 << 24;

/// A lock-free table of `keys` slots.
fn word_table<A>(alg: A, keys: usize) -> Box<dyn KeyedLimiter>
where
    A: WordStep + Send + Sync + 'static,
{
    let slots: Box<[Slot]> = (0..keys).map(|_| Slot::new()).collect();
    Box::new(KeyedShared::new(alg, slots))
}

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

impl<A, S> KeyedLimiter for KeyedShared<A, S>
where
    A: WordStep + Send + Sync,
    S: AsRef<[Slot]> + Send + Sync,
{
    #[inline]
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        local(KeyedShared::acquire(self, key, now, cost))
    }
}

/// Keys per stripe of a [`StripedLogs`] (one probe window of the core table).
const LOG_STRIPE_KEYS: usize = 16;

/// One stripe: a core single-owner table of `K` logs (16, or 1 for the longest logs),
/// built on first use.
type LogStripe<const N: usize, const K: usize> = Option<Box<CoreKeyed<SlidingLogConfig<N>, K>>>;

/// The sliding log's keyed table: `⌈keys / K⌉` stripes, each its own lock. A key's
/// stripe is chosen by its low 32 bits, its slot inside the stripe by its high bits (the
/// core's home slot), so the two choices are independent. Each stripe has its own
/// overflow log: a key whose stripe is full of active logs shares it with that stripe's
/// other overflowing keys (conservative, as in the core).
struct StripedLogs<const N: usize, const K: usize> {
    alg: SlidingLogConfig<N>,
    stripes: Box<[StripeLock<LogStripe<N, K>>]>,
}

impl<const N: usize, const K: usize> StripedLogs<N, K> {
    fn boxed(alg: SlidingLogConfig<N>, keys: usize) -> Box<dyn KeyedLimiter> {
        let n = keys.div_ceil(K);
        Box::new(StripedLogs::<N, K> {
            alg,
            stripes: (0..n).map(|_| StripeLock::new(None)).collect(),
        })
    }
}

impl<const N: usize, const K: usize> KeyedLimiter for StripedLogs<N, K> {
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        let i = ((key as u32 as u64 * self.stripes.len() as u64) >> 32) as usize;
        let mut stripe = self.stripes[i].lock().unwrap_or_else(|p| p.into_inner());
        let table = stripe.get_or_insert_with(|| Box::new(CoreKeyed::new(self.alg)));
        local(table.acquire(key, now, cost))
    }
}

/// The keyed table of sliding logs above [`SLIDING_LOG_CAPACITY`] entries (256 KiB each at
/// the cap): one key per stripe, each stripe its own lock, its log and its overflow log
/// boxed one by one on first use (a core table of them would be built on the stack first,
/// more than a worker thread has). The slot rule is the core table's: a stripe's key is
/// replaced only when its log is equivalent to a fresh one; otherwise the new key shares
/// the stripe's overflow log (conservative).
struct BigLogs {
    alg: SlidingLogLimit,
    stripes: Box<[StripeLock<BigLogStripe>]>,
}

/// One stripe of [`BigLogs`].
#[derive(Default)]
struct BigLogStripe {
    slot: Option<(u64, Box<<SlidingLogLimit as Algorithm>::State>)>,
    overflow: Option<Box<<SlidingLogLimit as Algorithm>::State>>,
}

impl BigLogs {
    fn boxed(alg: SlidingLogLimit, keys: usize) -> Box<dyn KeyedLimiter> {
        Box::new(BigLogs {
            alg,
            stripes: (0..keys).map(|_| StripeLock::default()).collect(),
        })
    }
}

impl KeyedLimiter for BigLogs {
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        let i = ((key as u32 as u64 * self.stripes.len() as u64) >> 32) as usize;
        let mut stripe = self.stripes[i].lock().unwrap_or_else(|p| p.into_inner());
        let stripe = &mut *stripe;
        let alg = &self.alg;
        let mine = match &mut stripe.slot {
            Some((k, state)) if *k == key => Some(state),
            Some((k, state)) if alg.is_fresh_state(state, now) => {
                *k = key;
                **state = alg.fresh_state();
                Some(state)
            }
            Some(_) => None,
            slot @ None => Some(&mut slot.insert((key, Box::new(alg.fresh_state()))).1),
        };
        let (state, overflow) = match mine {
            Some(state) => (state, false),
            None => (
                stripe
                    .overflow
                    .get_or_insert_with(|| Box::new(alg.fresh_state())),
                true,
            ),
        };
        match alg.acquire_state(state, now, cost) {
            Ok(decision) => LocalAcquire { decision, overflow },
            Err(e) => LocalAcquire {
                decision: never(e),
                overflow: false,
            },
        }
    }
}

#[cfg(test)]
mod keyed_tests {
    use super::*;

    fn every_algorithm() -> Vec<Limit> {
        let s = Nanos::from_secs(1);
        vec![
            Limit::token_bucket(1, s, 1).unwrap(),
            Limit::leaky_bucket(1, s, 0, 0, false).unwrap(),
            Limit::fixed_window(1, s).unwrap(),
            Limit::sliding_window(1, s).unwrap(),
            Limit::sliding_log(1, s).unwrap(),
            Limit::sliding_log(100, s).unwrap(),
            Limit::sliding_log(1000, s).unwrap(),
        ]
    }

    /// `max_keys = 10000` holds thousands of exhausted keys (a 4096-slot table could not),
    /// each keeping its own state.
    #[test]
    fn max_keys_is_honoured_for_every_algorithm() {
        for alg in every_algorithm() {
            let t = keyed_limiter(&alg, 10_000).unwrap();
            let keys = 3_000u64;
            let digest = |k: u64| (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let cost = |alg: &Limit| match alg {
                Limit::SlidingLog(c) => c.limit(),
                _ => 1,
            };
            for k in 0..keys {
                let a = t.acquire(digest(k), Nanos(0), cost(&alg));
                assert!(a.decision.is_allowed() && !a.overflow, "{alg:?} key {k}");
            }
            for k in 0..keys {
                let a = t.acquire(digest(k), Nanos(0), 1);
                assert!(!a.decision.is_allowed() && !a.overflow, "{alg:?} key {k}");
            }
        }
    }

    #[test]
    fn tiny_and_huge_max_keys_build() {
        let mut all = every_algorithm();
        all.push(
            Limit::sliding_log(weir_core::MAX_SLIDING_LOG_LIMIT, Nanos::from_secs(1)).unwrap(),
        );
        for alg in all {
            for n in [0, 1, 1 << 20] {
                let t = keyed_limiter(&alg, n).unwrap();
                assert!(t.acquire(7, Nanos(0), 1).decision.is_allowed());
            }
        }
    }
}
