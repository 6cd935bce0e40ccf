//! The rate limit's part of one request: the descriptor (built when the request begins,
//! since its key may name the verified consumer), and what the check found — for the
//! access log (`remaining`, the bypass marker, shadow mode's would-be rejection) and for
//! the response (the `RateLimit` fields, collected in the step context).

use super::layer::{Mode, RateLimitPolicy};
use super::service::{RateLimiter, check};
use crate::descriptor::{self, Descriptor, DescriptorError};
use crate::outcome::Outcome;
use crate::step::{Refusal, Step, StepCtx, StepRequest};
use crate::timer::Timer;

/// One request's rate-limit state.
#[derive(Default)]
pub(crate) struct RateStep {
    /// The request's key (`None`: no rate limit, or its key failed in shadow mode).
    pub descriptor: Option<Descriptor>,
    /// `remaining` of the decision (the access log's `remaining`).
    pub remaining: Option<u64>,
    /// The store failed and `on_store_error = "allow"` let the request pass.
    pub bypassed: bool,
    /// Shadow mode: the first would-be rejection.
    pub shadow: Option<Outcome>,
}

impl Step for RateStep {
    type Policy = RateLimitPolicy;
    type Runtime = RateLimiter;

    /// The descriptor (the route's fixed digest when the key does not depend on the
    /// request). A key that cannot be built refuses the request, or in shadow mode is
    /// only recorded.
    fn prepare(
        &mut self,
        rl: &RateLimitPolicy,
        rt: &RateLimiter,
        req: &StepRequest<'_>,
    ) -> Result<(), Outcome> {
        let built = match rt.fixed_digest {
            Some(digest) => digest.map(|digest| Descriptor {
                table_hash: descriptor::table_hash(digest, req.table_key),
                digest,
            }),
            None => descriptor::build(
                rl,
                req.route_id,
                req.method,
                req.headers,
                req.client,
                req.table_key,
            ),
        };
        match built {
            Ok(d) => self.descriptor = Some(d),
            Err(e) => {
                let outcome = match e {
                    DescriptorError::Empty => Outcome::EmptyKey,
                    DescriptorError::TooLong => Outcome::KeyTooLong,
                };
                if rl.mode != Mode::Shadow {
                    return Err(outcome);
                }
                self.shadow = Some(outcome);
                req.metrics.shadow.inc();
            }
        }
        Ok(())
    }

    /// One check (local table or global store, perhaps a shaping delay); its `RateLimit`
    /// items lead the fields collected so far.
    async fn admit<T: Timer>(
        &mut self,
        rl: &RateLimitPolicy,
        rt: &RateLimiter,
        cx: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal> {
        let Some(desc) = self.descriptor else {
            return Ok(());
        };
        let c = check(rl, rt, desc, cx).await;
        self.remaining = c.remaining.or(self.remaining);
        self.bypassed |= c.bypassed;
        cx.lead_fields(c.headers);
        if self.shadow.is_none() {
            self.shadow = c.shadow;
        }
        match c.reject {
            None => Ok(()),
            Some((o, t)) => Err(Refusal::new(o).retry_after(t)),
        }
    }
}
