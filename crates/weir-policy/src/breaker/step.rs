//! The breaker's part of one request: the ticket of the call in progress. Admission takes
//! the first attempt's ticket; every retry takes its own ([`BreakerStep::ticket`]), the
//! attempt's result is recorded on it, and a request that ends without a result gives it
//! back.

use super::layer::BreakerPolicy;
use super::service::Breaker;
use crate::attempt::AttemptResult;
use crate::metrics::RouteMetrics;
use crate::step::{Refusal, Step, StepCtx, StepEnv};
use crate::timer::Timer;
use std::sync::Arc;
use weir_core::{Nanos, Ticket};

/// One request's breaker state.
#[derive(Default)]
pub(crate) struct BreakerStep {
    ticket: Option<Ticket>,
}

impl BreakerStep {
    /// A ticket for the next attempt unless one is held; `circuit_open` (which the route's
    /// fallback may answer) when the breaker refuses.
    pub(crate) fn ticket(
        &mut self,
        b: &Breaker,
        m: &RouteMetrics,
        now: Nanos,
    ) -> Result<(), Refusal> {
        if self.ticket.is_none() {
            let t = b.admit(m, now).map_err(|o| Refusal::new(o).or_fallback())?;
            self.ticket = Some(t);
        }
        Ok(())
    }

    /// Records the attempt's result on its ticket.
    pub(crate) fn record(
        &mut self,
        b: &Breaker,
        m: &RouteMetrics,
        now: Nanos,
        elapsed: Nanos,
        result: &AttemptResult,
    ) {
        if let Some(t) = self.ticket.take() {
            b.record(m, t, now, elapsed, result);
        }
    }
}

impl Step for BreakerStep {
    type Policy = BreakerPolicy;
    type Runtime = Arc<Breaker>;

    /// The first attempt's ticket.
    async fn admit<T: Timer>(
        &mut self,
        _p: &BreakerPolicy,
        b: &Arc<Breaker>,
        cx: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal> {
        self.ticket(b, cx.metrics, cx.clock.now())
    }

    /// An unused ticket goes back.
    fn release(
        &mut self,
        _p: &BreakerPolicy,
        b: &Arc<Breaker>,
        _consume: bool,
        _env: &StepEnv<'_>,
    ) {
        if let Some(t) = self.ticket.take() {
            b.cancel(t);
        }
    }
}
