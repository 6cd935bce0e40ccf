//! The only place weir-policy turns its compiled policies into weir-core primitives.
//!
//! Every decision — limiter verdicts, breaker states, retry budget, backoff delays,
//! semaphore permits, deadlines — is weir-core's; this module only maps config values to
//! core parameters (once, at load time: errors surface as config errors naming the key)
//! and wraps the keyed limiter state behind one object-safe trait so routes with
//! different algorithms look the same to the flow.

use crate::policy::{Algorithm, BackoffPolicy, BreakerPolicy, BudgetPolicy};
use std::sync::Mutex;
use weir_core::keyed::KeyedLimiter as CoreKeyed;
use weir_core::retry_budget::ratio_ppm_from_f64;
use weir_core::{
    Backoff, BreakerConfig, Cooldown, Decision, FixedWindowConfig, InsufficientCapacity,
    KeyedDecision, KeyedTokenBuckets, LeakyBucketConfig, Nanos, Rng, SlidingLogConfig,
    SlidingWindowConfig, Slot, SlowCall, TokenBucketConfig, Verdict,
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
///   per-key state is the whole log) — never more keys than `max_keys`.
///
/// `None` only for parameters the config compiler already rejected.
pub(crate) fn keyed_limiter(alg: &Algorithm, max_keys: u64) -> Option<Box<dyn KeyedLimiter>> {
    Some(match *alg {
        Algorithm::TokenBucket { rate, per, burst } => {
            let cfg = TokenBucketConfig::new(rate, per.0.into(), burst).ok()?;
            let n = usize::try_from(max_keys)
                .unwrap_or(usize::MAX)
                .min(MAX_TB_SLOTS);
            let slots: Box<[Slot]> = (0..n).map(|_| Slot::new()).collect();
            Box::new(KeyedTokenBuckets::new(cfg, slots))
        }
        Algorithm::LeakyBucket {
            rate,
            per,
            burst,
            delay,
            nodelay,
        } => sized(
            LeakyBucketConfig::new(rate, per.0.into(), burst, delay, nodelay).ok()?,
            max_keys,
        ),
        Algorithm::FixedWindow { limit, window } => sized(
            FixedWindowConfig::new(limit, window.0.into()).ok()?,
            max_keys,
        ),
        Algorithm::SlidingWindow { limit, window } => sized(
            SlidingWindowConfig::new(limit, window.0.into()).ok()?,
            max_keys,
        ),
        Algorithm::SlidingLog { limit, window } => {
            sized_log(LogConfig::new(limit, window.0.into()).ok()?, max_keys)
        }
    })
}

/// The sliding log's fixed capacity (its config limit is bounded by it).
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
