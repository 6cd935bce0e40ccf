//! Concurrency limit with a bounded wait queue, runtime-agnostic.
//!
//! The permit count is the core semaphore's; this module adds what the core cannot
//! (it does not allocate or park): a queue bounded in *length* (`queue`) and in *age*
//! (`queue_timeout`, and never past the request's total deadline). Waiters park on an
//! `event-listener` `Event`, which works under any executor (monoio, tokio); the timeout
//! races the frontend's [`crate::Timer`]. A released permit wakes one waiter.

use crate::timer::{Either, Timer, select};
use core::num::NonZeroU64;
use event_listener::Event;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use weir_core::{OwnedPermit, Semaphore};

pub(crate) struct ConcurrencyState {
    sem: Arc<Semaphore>,
    waiting: AtomicU64,
    released: Event,
}

/// A held permit; dropping it wakes one waiter.
pub(crate) struct Permit {
    inner: Option<OwnedPermit<Arc<Semaphore>>>,
    state: Arc<ConcurrencyState>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        drop(self.inner.take());
        self.state.released.notify(1);
    }
}

/// Why no permit was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// All permits taken and the queue full (or 0).
    Full,
    /// Waited `queue_timeout`.
    QueueTimeout,
    /// Waited until the request's total deadline.
    Deadline,
}

impl ConcurrencyState {
    pub(crate) fn new(max: u64) -> Arc<ConcurrencyState> {
        Arc::new(ConcurrencyState {
            sem: Arc::new(Semaphore::new(
                NonZeroU64::new(max).unwrap_or(NonZeroU64::MIN),
            )),
            waiting: AtomicU64::new(0),
            released: Event::new(),
        })
    }

    fn try_now(self: &Arc<Self>) -> Option<Permit> {
        Semaphore::try_acquire_owned(self.sem.clone(), 1).map(|p| Permit {
            inner: Some(p),
            state: self.clone(),
        })
    }

    /// A permit now, or after waiting in the queue at most `wait` (`by_deadline`: the
    /// wait is bounded by the total deadline rather than `queue_timeout`).
    pub(crate) async fn acquire<T: Timer>(
        self: &Arc<Self>,
        queue: u64,
        wait: Duration,
        by_deadline: bool,
        timer: &T,
    ) -> Result<Permit, Refused> {
        if let Some(p) = self.try_now() {
            return Ok(p);
        }
        if wait.is_zero() && by_deadline {
            return Err(Refused::Deadline);
        }
        if queue == 0 || wait.is_zero() {
            return Err(Refused::Full);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Full);
        }
        let _guard = Waiting(self);
        let mut sleep = core::pin::pin!(timer.sleep(wait));
        loop {
            let listener = self.released.listen();
            if let Some(p) = self.try_now() {
                return Ok(p);
            }
            match select(listener, sleep.as_mut()).await {
                Either::Left(()) => {
                    if let Some(p) = self.try_now() {
                        return Ok(p);
                    }
                }
                Either::Right(()) => {
                    // One last chance: a permit freed at the same instant.
                    if let Some(p) = self.try_now() {
                        return Ok(p);
                    }
                    return Err(if by_deadline {
                        Refused::Deadline
                    } else {
                        Refused::QueueTimeout
                    });
                }
            }
        }
    }
}

struct Waiting<'a>(&'a Arc<ConcurrencyState>);
impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A route's concurrency runtime, kept across reloads while `max` is unchanged.
pub(crate) struct Concurrency {
    max: u64,
    state: Arc<ConcurrencyState>,
}

impl Concurrency {
    pub(crate) fn build(
        p: &super::ConcurrencyPolicy,
        prev: Option<&Arc<Concurrency>>,
    ) -> Arc<Concurrency> {
        prev.filter(|s| s.max == p.max).cloned().unwrap_or_else(|| {
            Arc::new(Concurrency {
                max: p.max,
                state: ConcurrencyState::new(p.max),
            })
        })
    }

    /// The concurrency step: a permit now or after queueing at most `queue_timeout` — and
    /// never past the request's deadline, of which `remaining` is left.
    pub(crate) async fn admit<T: Timer>(
        &self,
        p: &super::ConcurrencyPolicy,
        remaining: weir_core::Nanos,
        timer: &T,
    ) -> Result<Permit, crate::outcome::Outcome> {
        use crate::outcome::Outcome;
        let qt = weir_core::Nanos::from(p.queue_timeout.0);
        let by_deadline = remaining < qt;
        let wait = qt.min(remaining);
        self.state
            .acquire(p.queue, wait.into(), by_deadline, timer)
            .await
            .map_err(|r| match r {
                Refused::Full => Outcome::ConcurrencyLimited,
                Refused::QueueTimeout => Outcome::QueueTimeout,
                Refused::Deadline => Outcome::DeadlineExceeded,
            })
    }
}
