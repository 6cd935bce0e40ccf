//! The only place weir-policy touches weir-core's primitives.
//!
//! Each primitive is reached through a small internal trait so the engine does not care
//! which core type (or which shared/atomic form) sits behind it. The algorithms
//! themselves are weir-core's; nothing here re-implements them.
//!
//! CORE-PENDING: the core limiters (token/leaky bucket, windows, keyed table), the
//! semaphore, retry budget, backoff and breaker had not landed on `main` when this
//! module was written. Until they do, `build_*` return pass-through placeholders
//! (admit everything, never trip) marked `Pending*`, and the scenario tests that need
//! real decisions are `#[ignore]`d with the reason.

use crate::policy::{Algorithm, BackoffPolicy, BreakerPolicy, BudgetPolicy};
use weir_core::{Decision, Nanos, SplitMix64, Verdict};

/// The most events a `sliding_log` limit may keep (the core log is fixed-capacity).
pub(crate) const SLIDING_LOG_CAPACITY: usize = 1024;

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

/// Breaker states with the contract's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub(crate) fn label(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
    pub(crate) fn gauge(self) -> i64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }
}

/// A circuit breaker shared by all requests of a route.
pub(crate) trait Breaker: Send + Sync {
    /// May a call start now? (HALF_OPEN: takes a probe slot; ramp: admitted fraction.)
    fn allow(&self, now: Nanos) -> bool;
    /// The outcome of a call that `allow` admitted.
    fn record(&self, now: Nanos, failure: bool, elapsed: Nanos);
    /// The state now.
    fn state(&self, now: Nanos) -> BreakerState;
    /// Transitions since the last call, oldest first.
    fn take_transitions(&self, out: &mut Vec<(BreakerState, BreakerState)>);
}

/// Retries ≤ ratio × requests + reserve.
pub(crate) trait RetryBudget: Send + Sync {
    fn deposit(&self, now: Nanos);
    fn try_withdraw(&self, now: Nanos) -> bool;
}

/// A counting semaphore whose permits are released by dropping them.
pub(crate) trait Semaphore: Send + Sync {
    fn try_acquire(self: std::sync::Arc<Self>) -> Option<Box<dyn Send + Sync>>;
}

pub(crate) fn keyed_limiter(
    _alg: &Algorithm,
    _max_keys: u64,
    _now: Nanos,
) -> Box<dyn KeyedLimiter> {
    Box::new(PendingLimiter)
}

pub(crate) fn breaker(_p: &BreakerPolicy, _seed: u64, _now: Nanos) -> Box<dyn Breaker> {
    Box::new(PendingBreaker)
}

pub(crate) fn retry_budget(_p: &BudgetPolicy, _now: Nanos) -> Box<dyn RetryBudget> {
    Box::new(PendingBudget)
}

pub(crate) fn semaphore(_max: u64) -> std::sync::Arc<dyn Semaphore> {
    std::sync::Arc::new(PendingSemaphore)
}

/// The delay before retry number `retry` (1 = first retry).
pub(crate) fn backoff_delay(
    p: &BackoffPolicy,
    _retry: u32,
    _prev: Nanos,
    _rng: &mut SplitMix64,
) -> Nanos {
    // CORE-PENDING: weir_core::Backoff.
    p.base.0.into()
}

/// CORE-PENDING placeholder: admits everything.
struct PendingLimiter;
impl KeyedLimiter for PendingLimiter {
    fn acquire(&self, _key: u64, _now: Nanos, _cost: u64) -> LocalAcquire {
        LocalAcquire {
            decision: Decision {
                verdict: Verdict::Admit,
                remaining: 0,
                retry_after: Nanos::ZERO,
                reset_after: Nanos::ZERO,
            },
            overflow: false,
        }
    }
}

/// CORE-PENDING placeholder: never trips.
struct PendingBreaker;
impl Breaker for PendingBreaker {
    fn allow(&self, _now: Nanos) -> bool {
        true
    }
    fn record(&self, _now: Nanos, _failure: bool, _elapsed: Nanos) {}
    fn state(&self, _now: Nanos) -> BreakerState {
        BreakerState::Closed
    }
    fn take_transitions(&self, _out: &mut Vec<(BreakerState, BreakerState)>) {}
}

/// CORE-PENDING placeholder: always has budget.
struct PendingBudget;
impl RetryBudget for PendingBudget {
    fn deposit(&self, _now: Nanos) {}
    fn try_withdraw(&self, _now: Nanos) -> bool {
        true
    }
}

/// CORE-PENDING placeholder: unlimited permits.
struct PendingSemaphore;
impl Semaphore for PendingSemaphore {
    fn try_acquire(self: std::sync::Arc<Self>) -> Option<Box<dyn Send + Sync>> {
        Some(Box::new(()))
    }
}
