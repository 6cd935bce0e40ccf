//! The retry step after an attempt: whether another attempt may start, and after which
//! backoff — the route's retry policy, the core's backoff sequence, the request's deadline,
//! the breaker, and the route's shared retry budget (kept across reloads while unchanged).

use super::layer::{RetryPolicy, backoff, budget_config};
use crate::attempt::AttemptResult;
use crate::metrics::RouteMetrics;
use std::sync::Arc;
use weir_core::{
    BackoffSequence, Deadline, Nanos, RetryBudgetConfig, SharedRetryBudget, SplitMix64,
};

struct Budget {
    cfg: RetryBudgetConfig,
    core: SharedRetryBudget,
}

/// A route's retry runtime.
pub(crate) struct Retry {
    /// Only routes that retry keep a budget.
    budget: Option<Arc<Budget>>,
    /// The backoff (validated by the compiler).
    backoff: weir_core::Backoff,
}

impl Retry {
    pub(crate) fn build(p: &RetryPolicy, prev: Option<&Retry>) -> Retry {
        let budget = (p.max_attempts > 1).then(|| {
            let cfg = budget_config(&p.budget).expect("validated budget");
            prev.and_then(|r| r.budget.as_ref())
                .filter(|s| s.cfg == cfg)
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(Budget {
                        cfg,
                        core: SharedRetryBudget::new(cfg),
                    })
                })
        });
        Retry {
            budget,
            backoff: backoff(&p.backoff).expect("validated backoff"),
        }
    }

    /// An admitted request earns the budget its share of retries.
    pub(crate) fn deposit(&self, now: Nanos) {
        if let Some(b) = &self.budget {
            b.core.deposit(now);
        }
    }

    /// A request's retry state: starts before its first attempt.
    pub(crate) fn start(&self, idempotent: bool, replayable: bool, rng: SplitMix64) -> RetryState {
        RetryState {
            idempotent,
            replayable,
            backoff: self.backoff.sequence(),
            rng,
        }
    }

    /// The retry step: `Some(backoff)` when the attempt that just ended (`ended`) may be
    /// followed by another — the result is retryable, attempts are left, the request may
    /// be replayed, the backoff and one useful try fit in the deadline, the breaker is not
    /// open, and the budget has a retry.
    pub(crate) fn next(
        &self,
        p: &RetryPolicy,
        st: &mut RetryState,
        ended: &Ended<'_>,
        breaker_open: impl FnOnce() -> bool,
        metrics: &RouteMetrics,
    ) -> Option<Nanos> {
        let Ended {
            result,
            attempts,
            now,
            deadline,
            min_try,
        } = *ended;
        if !p.on.matches(result) || attempts >= p.max_attempts || !st.idempotent || !st.replayable {
            return None;
        }
        // The core's sequence (decorrelated jitter needs the previous delay); committed
        // only when the retry happens.
        let mut seq = st.backoff;
        let delay = seq.next_delay(&mut st.rng);
        if !deadline.can_start_attempt(now, delay, min_try) || breaker_open() {
            return None;
        }
        if let Some(b) = &self.budget
            && !b.core.try_withdraw(now)
        {
            metrics.budget_exhausted.inc();
            return None;
        }
        st.backoff = seq;
        Some(delay)
    }
}

/// The attempt that just ended, as the retry step sees it.
#[derive(Clone, Copy)]
pub(crate) struct Ended<'a> {
    /// What it produced.
    pub result: &'a AttemptResult,
    /// Attempts made so far (its 1-based number).
    pub attempts: u32,
    /// Now.
    pub now: Nanos,
    /// The request's total deadline.
    pub deadline: &'a Deadline,
    /// `timeouts.min_try`: the least time a retry must have left to be worth starting.
    pub min_try: Nanos,
}

/// One request's retry state.
pub(crate) struct RetryState {
    /// The method (or an idempotency key) allows retries.
    pub idempotent: bool,
    /// The body is small enough to send again.
    pub replayable: bool,
    backoff: BackoffSequence,
    rng: SplitMix64,
}
