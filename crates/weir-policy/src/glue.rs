//! The only place weir-policy turns its compiled policies into weir-core primitives.
//!
//! Every decision — limiter verdicts, breaker states, retry budget, backoff delays,
//! semaphore permits, deadlines — is weir-core's; this module only maps config values to
//! core parameters (once, at load time: errors surface as config errors naming the key)
//! and wraps the keyed limiter state behind one object-safe trait so routes with
//! different algorithms look the same to the flow.

use crate::policy::{Algorithm, BackoffPolicy, BreakerPolicy, BudgetPolicy};
use weir_core::retry_budget::ratio_ppm_from_f64;
use weir_core::{
    Backoff, BreakerConfig, Cooldown, Decision, FixedWindowConfig, InsufficientCapacity,
    LeakyBucketConfig, Nanos, Rng, SlidingLogConfig, SlidingWindowConfig, SlowCall,
    TokenBucketConfig, Verdict,
};

pub(crate) use weir_core::ConfigError as CoreError;
pub(crate) use weir_core::{BreakerState, SharedBreaker, SharedRetryBudget, Ticket, Transition};

/// The most events a `sliding_log` limit may keep (the core log is fixed-capacity).
pub(crate) const SLIDING_LOG_CAPACITY: usize = 1024;

/// How long a HALF_OPEN episode may stay undecided before it counts as a failed
/// recovery: generous (sparse traffic may need a while to send `successes` probes), and
/// never shorter than twice the route's total timeout. Probe tickets are always recorded
/// or cancelled by the flow, so this only matters for a frontend that leaks a flow.
pub(crate) fn probe_timeout(total: Nanos) -> Nanos {
    Nanos::from_secs(60).max(total.saturating_mul(2))
}

fn ppm(f: f64) -> Result<u32, CoreError> {
    ratio_ppm_from_f64(f).ok_or(CoreError::OutOfRange("rate"))
}

/// The core breaker parameters of a `[routes.breaker]` section.
pub(crate) fn breaker_config(p: &BreakerPolicy, total: Nanos) -> Result<BreakerConfig, CoreError> {
    let mult = p.cooldown_multiplier * 1000.0;
    if !(mult.is_finite() && (1000.0..=1_000_000.0).contains(&mult)) {
        return Err(CoreError::OutOfRange("cooldown.multiplier"));
    }
    let cfg = BreakerConfig {
        consecutive_failures: p.consecutive_failures,
        failure_rate_ppm: p
            .failure_rate
            .map(ppm)
            .transpose()
            .map_err(|_| CoreError::OutOfRange("failure_rate"))?,
        slow_call: match (p.slow_call, p.slow_call_rate) {
            (Some(t), Some(r)) => Some(SlowCall {
                threshold: t.0.into(),
                rate_ppm: ppm(r).map_err(|_| CoreError::OutOfRange("slow_call_rate"))?,
            }),
            _ => None,
        },
        window: p.window,
        min_calls: p.min_calls,
        cooldown: Cooldown {
            base: p.cooldown_base.0.into(),
            max: p.cooldown_max.0.into(),
            multiplier_milli: mult.round() as u32,
            jitter_ppm: ppm(p.cooldown_jitter)
                .map_err(|_| CoreError::OutOfRange("cooldown.jitter"))?,
        },
        probes: p.probes,
        successes: p.successes,
        ramp: p.ramp.0.into(),
        probe_timeout: probe_timeout(total),
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The core retry-budget parameters of `budget = {...}`.
pub(crate) fn budget_config(p: &BudgetPolicy) -> Result<weir_core::RetryBudgetConfig, CoreError> {
    let ratio = ratio_ppm_from_f64(p.ratio).ok_or(CoreError::OutOfRange("ratio"))?;
    let min = u32::try_from(p.min_per_sec).map_err(|_| CoreError::OutOfRange("min_per_sec"))?;
    weir_core::RetryBudgetConfig::new(ratio, min, p.ttl.0.into())
}

/// The core backoff of `backoff = {...}` (doubling; the contract has no multiplier).
pub(crate) fn backoff(p: &BackoffPolicy) -> Result<Backoff, CoreError> {
    use crate::config::raw::Jitter as J;
    let jitter = match p.jitter {
        J::None => weir_core::Jitter::None,
        J::Full => weir_core::Jitter::Full,
        J::Equal => weir_core::Jitter::Equal,
        J::Decorrelated => weir_core::Jitter::Decorrelated,
    };
    Backoff::exponential(p.base.0.into(), p.max.0.into(), jitter)
}

/// The delay before retry number `retry` (1 = first retry); `prev` = the previous delay
/// (decorrelated jitter), zero before the first retry.
pub(crate) fn backoff_delay(b: &Backoff, retry: u32, prev: Nanos, rng: &mut impl Rng) -> Nanos {
    if b.jitter() == weir_core::Jitter::Decorrelated && !prev.is_zero() {
        b.delay_after(prev, rng)
    } else {
        b.delay(retry, rng)
    }
}

/// Checks a limiter's numbers against the core's constructors (config time).
pub(crate) fn check_algorithm(alg: &Algorithm) -> Result<(), CoreError> {
    match *alg {
        Algorithm::TokenBucket { rate, per, burst } => {
            TokenBucketConfig::new(rate, per.0.into(), burst).map(|_| ())
        }
        Algorithm::LeakyBucket {
            rate,
            per,
            burst,
            delay,
            nodelay,
        } => LeakyBucketConfig::new(rate, per.0.into(), burst, delay, nodelay).map(|_| ()),
        Algorithm::FixedWindow { limit, window } => {
            FixedWindowConfig::new(limit, window.0.into()).map(|_| ())
        }
        Algorithm::SlidingWindow { limit, window } => {
            SlidingWindowConfig::new(limit, window.0.into()).map(|_| ())
        }
        Algorithm::SlidingLog { limit, window } => {
            LogConfig::new(limit, window.0.into()).map(|_| ())
        }
    }
}

// ---- keyed local limiters ---------------------------------------------------------------
//
// Every local keyed algorithm runs on a table sized at load time with at least `max_keys`
// keys and no lock shared by the whole route:
//
// | algorithm | table | memory per key |
// |---|---|---|
// | token bucket, leaky bucket, fixed window, sliding-window counter | weir-core's lock-free `KeyedShared` (one CAS per decision) | 16 bytes (digest + state word) |
// | sliding log | `StripedLogs`: stripes of 16 keys, each a core `KeyedLimiter` behind its own `Mutex`, allocated on first use | about `8·N + 40` bytes, `N` the log length class ≥ `limit` (16, 128 or 1024): 168 B, 1 064 B or 8 232 B |
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
pub(crate) fn keyed_limiter(alg: &Algorithm, max_keys: u64) -> Option<Box<dyn KeyedLimiter>> {
    let keys = usize::try_from(max_keys)
        .unwrap_or(usize::MAX)
        .clamp(1, MAX_KEYED_SLOTS);
    Some(match *alg {
        Algorithm::TokenBucket { rate, per, burst } => word_table(
            TokenBucketConfig::new(rate, per.0.into(), burst).ok()?,
            keys,
        ),
        Algorithm::LeakyBucket {
            rate,
            per,
            burst,
            delay,
            nodelay,
        } => word_table(
            LeakyBucketConfig::new(rate, per.0.into(), burst, delay, nodelay).ok()?,
            keys,
        ),
        Algorithm::FixedWindow { limit, window } => {
            word_table(FixedWindowConfig::new(limit, window.0.into()).ok()?, keys)
        }
        Algorithm::SlidingWindow { limit, window } => {
            word_table(SlidingWindowConfig::new(limit, window.0.into()).ok()?, keys)
        }
        Algorithm::SlidingLog { limit, window } => {
            let window: Nanos = window.0.into();
            // The shortest log class that holds `limit` entries.
            if limit <= 16 {
                StripedLogs::<16>::boxed(SlidingLogConfig::new(limit, window).ok()?, keys)
            } else if limit <= 128 {
                StripedLogs::<128>::boxed(SlidingLogConfig::new(limit, window).ok()?, keys)
            } else {
                StripedLogs::<SLIDING_LOG_CAPACITY>::boxed(
                    LogConfig::new(limit, window).ok()?,
                    keys,
                )
            }
        }
    })
}

/// The sliding log's fixed capacity (its config limit is bounded by it).
type LogConfig = SlidingLogConfig<SLIDING_LOG_CAPACITY>;

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

/// One stripe: a core single-owner table of 16 logs, built on first use.
type LogStripe<const N: usize> = Option<Box<CoreKeyed<SlidingLogConfig<N>, LOG_STRIPE_KEYS>>>;

/// The sliding log's keyed table: `⌈keys / 16⌉` stripes, each its own lock. A key's
/// stripe is chosen by its low 32 bits, its slot inside the stripe by its high bits (the
/// core's home slot), so the two choices are independent. Each stripe has its own
/// overflow log: a key whose stripe is full of active logs shares it with that stripe's
/// other overflowing keys (conservative, as in the core).
struct StripedLogs<const N: usize> {
    alg: SlidingLogConfig<N>,
    stripes: Box<[StripeLock<LogStripe<N>>]>,
}

impl<const N: usize> StripedLogs<N> {
    fn boxed(alg: SlidingLogConfig<N>, keys: usize) -> Box<dyn KeyedLimiter> {
        let n = keys.div_ceil(LOG_STRIPE_KEYS);
        Box::new(StripedLogs {
            alg,
            stripes: (0..n).map(|_| StripeLock::new(None)).collect(),
        })
    }
}

impl<const N: usize> KeyedLimiter for StripedLogs<N> {
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        let i = ((key as u32 as u64 * self.stripes.len() as u64) >> 32) as usize;
        let mut stripe = self.stripes[i].lock().unwrap_or_else(|p| p.into_inner());
        let table = stripe.get_or_insert_with(|| Box::new(CoreKeyed::new(self.alg)));
        local(table.acquire(key, now, cost))
    }
}

#[cfg(test)]
mod keyed_tests {
    use super::*;
    use crate::config::raw::Dur;
    use std::time::Duration;

    fn every_algorithm() -> Vec<Algorithm> {
        let d = Dur(Duration::from_secs(1));
        vec![
            Algorithm::TokenBucket {
                rate: 1,
                per: d,
                burst: 1,
            },
            Algorithm::LeakyBucket {
                rate: 1,
                per: d,
                burst: 0,
                delay: 0,
                nodelay: false,
            },
            Algorithm::FixedWindow {
                limit: 1,
                window: d,
            },
            Algorithm::SlidingWindow {
                limit: 1,
                window: d,
            },
            Algorithm::SlidingLog {
                limit: 1,
                window: d,
            },
            Algorithm::SlidingLog {
                limit: 100,
                window: d,
            },
            Algorithm::SlidingLog {
                limit: 1000,
                window: d,
            },
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
            let cost = |alg: &Algorithm| match alg {
                Algorithm::SlidingLog { limit, .. } => *limit,
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
        for alg in every_algorithm() {
            for n in [0, 1, 1 << 20] {
                let t = keyed_limiter(&alg, n).unwrap();
                assert!(t.acquire(7, Nanos(0), 1).decision.is_allowed());
            }
        }
    }
}
