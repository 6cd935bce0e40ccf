//! The only place weir-policy turns its compiled policies into weir-core primitives.
//!
//! Every decision — limiter verdicts, breaker states, retry budget, backoff delays,
//! semaphore permits, deadlines — is weir-core's; this module only maps config values to
//! core parameters (once, at load time: errors surface as config errors naming the key)
//! and wraps the keyed limiter state behind one object-safe trait so routes with
//! different algorithms look the same to the flow.

use crate::policy::{Algorithm, BackoffPolicy, BreakerPolicy, BudgetPolicy};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::retry_budget::ratio_ppm_from_f64;
use weir_core::{
    Backoff, BreakerConfig, Cooldown, Decision, InsufficientCapacity, Nanos, Rng, SlowCall,
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
        // CORE-PENDING (core-limiters): leaky bucket and windows are checked by the
        // policy compiler only until their core constructors land.
        _ => Ok(()),
    }
}

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

/// Builds the keyed limiter of a local rate limit. `None` when the algorithm is not yet
/// available from weir-core (the route then admits, see ENGINE_API.md).
pub(crate) fn keyed_limiter(alg: &Algorithm, max_keys: u64) -> Option<Box<dyn KeyedLimiter>> {
    match *alg {
        Algorithm::TokenBucket { rate, per, burst } => {
            let cfg = TokenBucketConfig::new(rate, per.0.into(), burst).ok()?;
            Some(Box::new(InterimKeyed::new(cfg, max_keys)))
        }
        // CORE-PENDING (core-limiters): leaky bucket, windows, sliding log.
        _ => None,
    }
}

fn unlimited() -> Decision {
    Decision {
        verdict: Verdict::Admit,
        remaining: 0,
        retry_after: Nanos::ZERO,
        reset_after: Nanos::ZERO,
    }
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

const SHARDS: usize = 16;

/// CORE-PENDING (core-limiters keyed table): an interim bounded keyed store over any core
/// [`weir_core::Algorithm`] — storage only, every decision is the algorithm's pure step.
/// At most `max_keys` states; a new key when full first evicts *fresh* states of its shard
/// (equivalent to a new limiter, so forgetting them grants nothing), and if none, is counted
/// on one shared overflow limiter with the route's parameters. Exhausted keys are never
/// evicted, so churn cannot refresh them.
struct InterimKeyed<A: weir_core::Algorithm> {
    alg: A,
    max_keys: u64,
    len: AtomicU64,
    shards: [Mutex<HashMap<u64, A::State>>; SHARDS],
    overflow: Mutex<A::State>,
}

impl<A: weir_core::Algorithm> InterimKeyed<A> {
    fn new(alg: A, max_keys: u64) -> Self {
        let overflow = Mutex::new(alg.fresh_state());
        InterimKeyed {
            alg,
            max_keys,
            len: AtomicU64::new(0),
            shards: core::array::from_fn(|_| Mutex::new(HashMap::new())),
            overflow,
        }
    }
}

impl<A> KeyedLimiter for InterimKeyed<A>
where
    A: weir_core::Algorithm + Send + Sync,
    A::State: Send,
{
    fn acquire(&self, key: u64, now: Nanos, cost: u64) -> LocalAcquire {
        let mut shard = self.shards[(key >> 60) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(st) = shard.get_mut(&key) {
            let decision = self.alg.acquire_state(st, now, cost).unwrap_or_else(never);
            return LocalAcquire {
                decision,
                overflow: false,
            };
        }
        if self.len.load(Ordering::Acquire) >= self.max_keys {
            let before = shard.len();
            shard.retain(|_, st| !self.alg.is_fresh_state(st, now));
            self.len
                .fetch_sub((before - shard.len()) as u64, Ordering::AcqRel);
        }
        if self.len.fetch_add(1, Ordering::AcqRel) >= self.max_keys {
            self.len.fetch_sub(1, Ordering::AcqRel);
            drop(shard);
            let mut st = self.overflow.lock().unwrap_or_else(|p| p.into_inner());
            let decision = self
                .alg
                .acquire_state(&mut st, now, cost)
                .unwrap_or_else(never);
            return LocalAcquire {
                decision,
                overflow: true,
            };
        }
        let mut st = self.alg.fresh_state();
        let decision = self
            .alg
            .acquire_state(&mut st, now, cost)
            .unwrap_or_else(never);
        shard.insert(key, st);
        LocalAcquire {
            decision,
            overflow: false,
        }
    }
}

/// Admits everything: the stand-in for a local algorithm weir-core does not have yet.
#[allow(dead_code)]
pub(crate) fn pass_decision() -> Decision {
    unlimited()
}
