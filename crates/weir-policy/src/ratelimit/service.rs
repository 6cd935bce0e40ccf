//! The rate-limit step of a request: the route's limiter state (kept across reloads while
//! its limit is unchanged) and the per-request check — local table or global store,
//! shadow mode, the IETF `RateLimit` fields, and the leaky bucket's shaping delay.

use super::bypass::{Bypass, OnFailure, Params};
use super::layer::{Mode, OnStoreError, RateLimitPolicy, Scope};
use super::local::{KeyedLimiter, keyed_limiter};
use crate::descriptor::{Descriptor, DescriptorError};
use crate::outcome::Outcome;
use crate::step::StepCtx;
use crate::store::{GlobalStore, StoreError, StoreErrorKind, StoreRequest, store_key};
use crate::text::HeaderText;
use crate::timer::{Either, Timer, select};
use std::sync::Arc;
use std::time::Duration;
use weir_core::{Clock, Decision, Limit, Verdict};

/// A route's local keyed table, with the parameters it was built for.
pub(crate) struct LocalTable {
    params: (Limit, u64),
    limiter: Box<dyn KeyedLimiter>,
}

/// A route's rate-limit runtime.
pub(crate) struct RateLimiter {
    /// `scope = "local"`: the keyed table (`None` for global routes).
    local: Option<Arc<LocalTable>>,
    /// `"ROUTE";q=Q;w=W`, prepared once.
    policy_header: HeaderText,
    /// The key's digest when it does not depend on the request
    /// ([`descriptor::fixed_digest`](crate::descriptor::fixed_digest)).
    pub(crate) fixed_digest: Option<Result<u128, DescriptorError>>,
    /// Global routes that fail open: the outage and episode tracker (kept across reloads).
    pub(crate) bypass: Option<Arc<Bypass>>,
}

impl RateLimiter {
    /// The runtime of `p` on route `id`, keeping `prev`'s table when its limit and
    /// `max_keys` are unchanged (a reload keeps the counts).
    pub(crate) fn build(p: &RateLimitPolicy, id: &str, prev: Option<&RateLimiter>) -> RateLimiter {
        let (q, w) = p.quota_window();
        let local = match p.scope {
            Scope::Global => None,
            Scope::Local => {
                let params = (p.limit, p.max_keys);
                prev.and_then(|r| r.local.as_ref())
                    .filter(|t| t.params == params)
                    .cloned()
                    .or_else(|| {
                        Some(Arc::new(LocalTable {
                            params,
                            limiter: keyed_limiter(&p.limit, p.max_keys)?,
                        }))
                    })
            }
        };
        let bypass =
            (p.scope == Scope::Global && p.on_store_error == OnStoreError::Allow).then(|| {
                prev.and_then(|r| r.bypass.clone())
                    .unwrap_or_else(|| Arc::new(Bypass::new()))
            });
        RateLimiter {
            local,
            bypass,
            fixed_digest: crate::descriptor::fixed_digest(p, id),
            policy_header: HeaderText::from(format!("\"{id}\";q={q};w={w}")),
        }
    }
}

/// Where a global limit is asked, and how long the engine waits for it.
pub(crate) struct Store<'a> {
    /// The installed store (`None`: behaves as a failing store).
    pub store: Option<Arc<dyn GlobalStore>>,
    /// `[store] timeout_ms`.
    pub timeout: Duration,
    /// The engine's clock.
    pub clock: &'a (dyn Clock + Send + Sync),
}

/// What the rate-limit step decided for one request.
#[derive(Default)]
pub(crate) struct Checked {
    /// `remaining` of the decision, for the access log.
    pub remaining: Option<u64>,
    /// Headers for the response (`RateLimit-Policy`, `RateLimit`, `x-weir-ratelimit`).
    pub headers: Vec<(&'static str, HeaderText)>,
    /// The store failed and `on_store_error = "allow"` let the request pass.
    pub bypassed: bool,
    /// Shadow mode: what would have been rejected.
    pub shadow: Option<Outcome>,
    /// Enforced rejection: the outcome and, for 429, `Retry-After` in seconds.
    pub reject: Option<(Outcome, Option<u64>)>,
}

/// The rate-limit check: one acquisition (local table or global store) for the request's
/// descriptor, then the `RateLimit` fields (when `p.headers`, and not on a simulation's
/// bare engine), the verdict and any shaping delay (slept on `cx.timer`; it counts against
/// the deadline).
///
/// A leaky-bucket delay that would end after the total deadline is answered at once with
/// 429 `rate_limited` (`Retry-After` = the delay): the request could not be served in its
/// budget, and the client learns when its turn would come, rather than waiting for a
/// certain 504.
pub(crate) async fn check<T: Timer>(
    p: &RateLimitPolicy,
    rt: &RateLimiter,
    key: Descriptor,
    cx: &StepCtx<'_, T>,
) -> Checked {
    let route_id = cx.route_id;
    let metrics = cx.metrics;
    let timer = cx.timer;
    let store = Store {
        // A local limit never asks the store: no reference-count round trip for it.
        store: match p.scope {
            Scope::Global => cx.store(),
            Scope::Local => None,
        },
        timeout: cx.store_timeout,
        clock: cx.clock,
    };
    let mut out = Checked::default();
    let shadow = p.mode == Mode::Shadow;
    let decision = match (&rt.local, p.scope) {
        (Some(t), _) => {
            let a = t.limiter.acquire(key.table_hash, store.clock.now(), 1);
            if a.overflow {
                metrics.overflow.inc();
            }
            Some(a.decision)
        }
        (None, Scope::Local) => None,
        (None, Scope::Global) => {
            let req = StoreRequest {
                key: store_key(route_id, &key.digest_hex()),
                route: route_id.to_string(),
                limit: p.limit,
                cost: 1,
            };
            let shard = store.store.as_ref().map_or(0, |s| s.shard(&req.key));
            let tracked = rt.bypass.as_deref().zip(p.allow_for).map(|(b, d)| {
                let params = Params {
                    limit: &p.limit,
                    max_keys: p.max_keys,
                    allow_for: d.nanos(),
                    wall_offset: cx.clock.wall_offset(),
                };
                (b, params)
            });
            let answer = store_acquire(&store, timer, req).await;
            let now = store.clock.now();
            // Fail-open that expires: past `allow_for`, the shard's keys fail closed.
            let on_error = match (&answer, tracked) {
                (Ok(d), Some((b, params))) => {
                    b.success(shard, key.table_hash, d.remaining, now, params);
                    p.on_store_error
                }
                (Err(_), Some((b, params))) => {
                    match b.failure(shard, key.table_hash, now, params) {
                        OnFailure::Bypass => OnStoreError::Allow,
                        OnFailure::Expired => OnStoreError::Deny,
                    }
                }
                _ => p.on_store_error,
            };
            match answer {
                Ok(d) => Some(d),
                Err(_) => {
                    match on_error {
                        OnStoreError::Deny if !shadow => {
                            out.reject = Some((Outcome::RatelimitStoreUnavailable, None));
                            return out;
                        }
                        OnStoreError::Deny => {
                            out.shadow = Some(Outcome::RatelimitStoreUnavailable);
                            metrics.shadow.inc();
                        }
                        OnStoreError::Allow => {
                            out.bypassed = true;
                            out.headers
                                .push(("x-weir-ratelimit", HeaderText::from_static("bypassed")));
                            metrics.bypassed.inc();
                        }
                    }
                    None
                }
            }
        }
    };
    let Some(d) = decision else { return out };
    out.remaining = Some(d.remaining);
    let over_budget =
        matches!(d.verdict, Verdict::Delay(dl) if dl > cx.deadline.remaining(store.clock.now()));
    let rejected = d.verdict == Verdict::Reject || over_budget;
    let t = if d.verdict == Verdict::Reject {
        d.retry_after.as_secs_ceil().max(1)
    } else if over_budget {
        d.delay().as_secs_ceil().max(1)
    } else {
        d.reset_after.as_secs_ceil()
    };
    if p.headers && !cx.bare {
        out.headers.reserve_exact(2);
        out.headers
            .push(("ratelimit-policy", rt.policy_header.clone()));
        out.headers
            .push(("ratelimit", ratelimit_field(route_id, &d, t)));
    }
    if rejected {
        if shadow {
            if out.shadow.is_none() {
                out.shadow = Some(Outcome::RateLimited);
            }
            metrics.shadow.inc();
        } else {
            out.reject = Some((Outcome::RateLimited, Some(t)));
        }
    } else if let Verdict::Delay(dl) = d.verdict
        && !shadow
    {
        // Shaping: hold the request; the time counts against the deadline.
        timer.sleep(dl.into()).await;
    }
    out
}

/// Asks the store, bounded by the store timeout raced against the frontend's timer.
async fn store_acquire<T: Timer>(
    s: &Store<'_>,
    timer: &T,
    req: StoreRequest,
) -> Result<Decision, StoreError> {
    let Some(store) = &s.store else {
        return Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "no global store installed",
        ));
    };
    let fut = store.acquire(req);
    let sleep = core::pin::pin!(timer.sleep(s.timeout));
    match select(fut, sleep).await {
        Either::Left(r) => r,
        Either::Right(()) => Err(StoreError::new(
            StoreErrorKind::Timeout,
            format!("timed out after {:?}", s.timeout),
        )),
    }
}

/// `"<id>";r=<remaining>;t=<seconds>`, built without `format!` (hot path) and, for a route
/// id of up to ~20 characters, held in place ([`HeaderText::from_parts`]).
fn ratelimit_field(id: &str, d: &Decision, t: u64) -> HeaderText {
    let (mut r, mut s) = (itoa::Buffer::new(), itoa::Buffer::new());
    HeaderText::from_parts(&["\"", id, "\";r=", r.format(d.remaining), ";t=", s.format(t)])
}
