//! The quota's part of one request: what it asks (key, cost, event id, read when the
//! request begins) and the reservation it holds from the gate until the request is
//! settled — committed when the request was served, given back when a later step refused
//! it (see [`super::service`] for why a reservation and not a direct consume).

use super::layer::QuotaPolicy;
use super::ledger::{RouteLedger, Writer};
use super::service::{Ask, GlobalCtx, Held, ask, gate, gate_global};
use crate::descriptor::{self, DescriptorError};
use crate::outcome::Outcome;
use crate::step::{Refusal, Step, StepCtx, StepEnv, StepRequest};
use crate::store::Scope;
use crate::timer::Timer;
use std::sync::Arc;

/// One request's quota state.
#[derive(Default)]
pub(crate) struct QuotaStep {
    /// Key, cost and event id, read when the request begins.
    ask: Option<Ask>,
    /// The reservation until the request is settled.
    held: Option<Held>,
}

impl QuotaStep {
    /// Settles the reservation once: one `consume` event (`consume`), or given back.
    pub(crate) fn settle(&mut self, consume: bool, env: &StepEnv<'_>) {
        let Some(held) = self.held.take() else {
            return;
        };
        let w = Writer {
            revision: env.revision,
            instance: env.instance,
            unix: env.clock.unix_secs(),
        };
        // A ledger write error leaves the unit counted in memory; the request goes on.
        let _ = held.settle(consume, w, env.metrics);
    }
}

impl Step for QuotaStep {
    type Policy = QuotaPolicy;
    type Runtime = Arc<RouteLedger>;

    /// The key's digest, and the cost and event id from the request (400 `bad_request`
    /// when they cannot be read).
    fn prepare(
        &mut self,
        q: &QuotaPolicy,
        _ledger: &Arc<RouteLedger>,
        req: &StepRequest<'_>,
    ) -> Result<(), Outcome> {
        let built = descriptor::build(
            q,
            req.route_id,
            req.method,
            req.headers,
            req.client,
            req.table_key,
        );
        let asked = match built {
            Ok(d) => ask(q, d.digest, req.headers).map_err(|_| Outcome::BadRequest),
            Err(DescriptorError::Empty) => Err(Outcome::EmptyKey),
            Err(DescriptorError::TooLong) => Err(Outcome::KeyTooLong),
        };
        self.ask = Some(asked?);
        Ok(())
    }

    /// The gate: reserve this request's cost, pass a repeated event id, or 429
    /// `quota_exhausted` (`Retry-After`: the period's end).
    async fn admit<T: Timer>(
        &mut self,
        q: &QuotaPolicy,
        ledger: &Arc<RouteLedger>,
        cx: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal> {
        let Some(a) = &self.ask else {
            return Ok(());
        };
        let gate = match q.scope {
            Scope::Local => {
                gate(q, ledger, cx.route_id, a, cx.clock.unix_secs(), cx.metrics).map_err(|_| ())
            }
            Scope::Global => {
                let g = GlobalCtx {
                    store: cx.store(),
                    timeout: cx.store_timeout,
                    timer: cx.timer,
                    writer: Writer {
                        revision: cx.revision,
                        instance: cx.instance,
                        unix: cx.clock.unix_secs(),
                    },
                };
                gate_global(q, ledger, cx.route_id, a, cx.metrics, g)
                    .await
                    .map_err(|_| ())
            }
        };
        // The ledger's period file cannot be opened, or the global store failed with
        // `on_store_error = "deny"`: fail closed.
        let gate = gate.map_err(|()| Refusal::new(Outcome::RatelimitStoreUnavailable))?;
        self.held = gate.held;
        cx.lead_fields(gate.headers);
        match gate.exhausted {
            None => Ok(()),
            Some(t) => Err(Refusal::new(Outcome::QuotaExhausted).retry_after(Some(t))),
        }
    }

    fn release(
        &mut self,
        _q: &QuotaPolicy,
        _ledger: &Arc<RouteLedger>,
        consume: bool,
        env: &StepEnv<'_>,
    ) {
        self.settle(consume, env);
    }
}
