//! The concurrency limit's part of one request: the permit it holds from admission until
//! the request ends (dropping it wakes one waiter), and how long it queued for it.

use super::layer::ConcurrencyPolicy;
use super::service::{Concurrency, Permit};
use crate::step::{Refusal, Step, StepCtx, StepEnv};
use crate::timer::Timer;
use std::sync::Arc;
use weir_core::Nanos;

/// One request's concurrency state.
#[derive(Default)]
pub(crate) struct ConcurrencyStep {
    /// Held until the request ends (or a later step refuses it).
    permit: Option<Permit>,
    /// Time spent in the queue (the access log's `queue_ms`).
    pub queued: Nanos,
}

impl Step for ConcurrencyStep {
    type Policy = ConcurrencyPolicy;
    type Runtime = Arc<Concurrency>;

    /// A permit now, or after queueing (never past the deadline).
    async fn admit<T: Timer>(
        &mut self,
        p: &ConcurrencyPolicy,
        c: &Arc<Concurrency>,
        cx: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal> {
        let start = cx.clock.now();
        let res = c.admit(p, cx.deadline.remaining(start), cx.timer).await;
        self.queued = cx.clock.now().saturating_sub(start);
        self.permit = Some(res?);
        Ok(())
    }

    fn release(
        &mut self,
        _p: &ConcurrencyPolicy,
        _c: &Arc<Concurrency>,
        _consume: bool,
        _env: &StepEnv<'_>,
    ) {
        self.permit = None;
    }
}
