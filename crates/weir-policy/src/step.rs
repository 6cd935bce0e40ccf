//! The one shape of an admission step.
//!
//! A request is admitted by a fixed sequence of policy steps (quota, rate limit,
//! concurrency, breaker). Each step's per-request state lives in its policy's folder
//! (`quota/step.rs`, ...) and implements [`Step`]: one `admit` with the same arguments for
//! every policy — its compiled policy, its route runtime, and a [`StepCtx`] with everything
//! the steps share — and one `release` for what it holds. So `Flow` walks a list of step
//! values instead of calling a method of its own per policy, and a step never sees `Flow`,
//! the runtime or the engine: it answers "go on" or a [`Refusal`], and only `Flow` turns a
//! refusal into a response (it owns the request id, the fallback and the headers of the
//! gateway's own responses).
//!
//! Dispatch is static (native `async fn` in a crate-private trait, no `dyn`): walking the
//! steps costs what the hand-written calls cost, and the context is built once per
//! admission on the stack.
//!
//! This module is a leaf of the policy folders: it may only use leaf modules (clock, timer,
//! metrics, store, text, outcome) and weir-core, never `flow`, `runtime`, `engine`,
//! `policy` or `config`.

use crate::descriptor::Headers;
use crate::metrics::RouteMetrics;
use crate::outcome::Outcome;
use crate::store::GlobalStore;
use crate::text::HeaderText;
use crate::timer::Timer;
use crate::wall::WallClock;
use arc_swap::ArcSwapOption;
use core::net::IpAddr;
use core::ops::Deref;
use std::sync::Arc;
use std::time::Duration;
use weir_core::Deadline;

/// Why a step did not admit the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The outcome to respond with (its status, `x-weir-reason`, the metric label).
    pub outcome: Outcome,
    /// `Retry-After` in seconds, when the client is told when to come back.
    pub retry_after: Option<u64>,
    /// The route's fallback, when configured, may answer instead (an open breaker).
    pub fallback: bool,
}

impl Refusal {
    /// A refusal answered by the gateway's own error response.
    pub(crate) fn new(outcome: Outcome) -> Refusal {
        Refusal {
            outcome,
            retry_after: None,
            fallback: false,
        }
    }

    /// With `Retry-After: secs`.
    pub(crate) fn retry_after(mut self, secs: Option<u64>) -> Refusal {
        self.retry_after = secs;
        self
    }

    /// The route's fallback may answer instead.
    pub(crate) fn or_fallback(mut self) -> Refusal {
        self.fallback = true;
        self
    }
}

impl From<Outcome> for Refusal {
    fn from(o: Outcome) -> Refusal {
        Refusal::new(o)
    }
}

/// What every step of one request shares and only reads: time, the route's identity and
/// metrics, the store, and who writes events. Also the context of [`Step::release`], which
/// may run without a timer (a flow dropped mid-way).
pub(crate) struct StepEnv<'a> {
    /// The engine's clock: monotonic instants for decisions, wall time for calendars.
    pub clock: &'a WallClock,
    /// The request's total deadline (shaping delays and queueing count against it).
    pub deadline: Deadline,
    /// The route id (store keys, `RateLimit` items, ledger events).
    pub route_id: &'a str,
    /// The route's metric handles.
    pub metrics: &'a RouteMetrics,
    /// The installed global store, loaded only by a step that asks it
    /// ([`StepEnv::store`]): a local limit pays no reference-count round trip.
    pub store: &'a ArcSwapOption<Arc<dyn GlobalStore>>,
    /// `[store] timeout_ms`.
    pub store_timeout: Duration,
    /// The config revision (written with ledger events).
    pub revision: u64,
    /// `[server] instance` (written with ledger events).
    pub instance: &'a str,
    /// A simulation's engine: responses carry their status only, so steps build no
    /// header fields. Every decision is taken as with it off.
    pub bare: bool,
}

impl StepEnv<'_> {
    /// The installed global store (`None`: behaves as a failing store).
    pub(crate) fn store(&self) -> Option<Arc<dyn GlobalStore>> {
        self.store.load_full().map(|s| (*s).clone())
    }
}

/// What [`Step::admit`] gets besides its policy and runtime: the shared [`StepEnv`]
/// (reachable directly, `cx.clock`), the frontend's timer, and the response fields the
/// steps collected so far.
pub(crate) struct StepCtx<'a, T> {
    pub env: StepEnv<'a>,
    /// Sleeping (shaping delays, the concurrency queue, store timeouts).
    pub timer: &'a T,
    /// Header fields for every response of this request (`RateLimit-Policy`, `RateLimit`,
    /// `x-weir-ratelimit`), in order. A field two steps set is one field with two items:
    /// see [`StepCtx::lead_fields`].
    pub fields: &'a mut Vec<(&'static str, HeaderText)>,
}

impl<'a, T> Deref for StepCtx<'a, T> {
    type Target = StepEnv<'a>;
    fn deref(&self) -> &StepEnv<'a> {
        &self.env
    }
}

impl<T> StepCtx<'_, T> {
    /// Adds a step's fields *ahead of* those collected so far: a field already present gets
    /// `item` as its first item, a new field goes before the earlier steps' other fields.
    /// So the rate limit's item is a field's first although the quota step runs first
    /// (docs/HTTP.md: a quota adds a *second* item, `"ROUTE.quota"`), and the fields come
    /// out exactly as when the quota's items were merged after the rate limit's.
    ///
    /// With nothing collected yet, `items` becomes the collection (no copy).
    pub(crate) fn lead_fields(&mut self, items: Vec<(&'static str, HeaderText)>) {
        if self.fields.is_empty() {
            *self.fields = items;
            return;
        }
        let mut at = 0;
        for (name, item) in items {
            match self.fields.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => *v = HeaderText::from(format!("{item}, {v}")),
                None => {
                    self.fields.insert(at, (name, item));
                    at += 1;
                }
            }
        }
    }
}

/// What a step may read of the request when it begins (`Engine::begin`, before any step
/// admits): what its key and cost are made of.
pub(crate) struct StepRequest<'a> {
    /// The route id (a key part).
    pub route_id: &'a str,
    /// The method as received.
    pub method: &'a str,
    /// The request headers, with the verified identity's `consumer` and claims.
    pub headers: &'a dyn Headers,
    /// The client's address (behind trusted proxies: the one they named).
    pub client: Option<IpAddr>,
    /// The engine's keyed-table hash key.
    pub table_key: (u64, u64),
    /// The route's metric handles.
    pub metrics: &'a RouteMetrics,
}

/// One admission step of a policy; see the module docs.
pub(crate) trait Step {
    /// The compiled policy (`[routes.NAME]`).
    type Policy;
    /// The route's runtime state of the policy (tables, ledgers, semaphores, breakers).
    type Runtime;

    /// Reads what the step needs of the request (its key, its cost) when the request
    /// begins; an outcome refuses the request before any step admits (`empty_key`, ...).
    fn prepare(
        &mut self,
        _policy: &Self::Policy,
        _rt: &Self::Runtime,
        _req: &StepRequest<'_>,
    ) -> Result<(), Outcome> {
        Ok(())
    }

    /// Admits the request (perhaps after waiting on `cx.timer`), keeping in `self` what it
    /// holds until [`release`](Step::release), or refuses it.
    async fn admit<T: Timer>(
        &mut self,
        policy: &Self::Policy,
        rt: &Self::Runtime,
        cx: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal>;

    /// Lets go of what [`admit`](Step::admit) holds: kept as spent when `consume` (the
    /// request went on; a quota unit is consumed), given back otherwise. Called when a
    /// later step refused the request (`consume` false) and again when the request ends,
    /// so a second call finds nothing held and does nothing.
    fn release(
        &mut self,
        _policy: &Self::Policy,
        _rt: &Self::Runtime,
        _consume: bool,
        _env: &StepEnv<'_>,
    ) {
    }
}

/// [`Step::prepare`] when the route configures the policy.
pub(crate) fn prepare<S: Step>(
    step: &mut S,
    policy: Option<&S::Policy>,
    rt: Option<&S::Runtime>,
    req: &StepRequest<'_>,
) -> Result<(), Outcome> {
    match (policy, rt) {
        (Some(p), Some(rt)) => step.prepare(p, rt, req),
        _ => Ok(()),
    }
}

/// Runs `step` when the route configures its policy (both `policy` and `rt` present).
pub(crate) async fn admit<S: Step, T: Timer>(
    step: &mut S,
    policy: Option<&S::Policy>,
    rt: Option<&S::Runtime>,
    cx: &mut StepCtx<'_, T>,
) -> Result<(), Refusal> {
    match (policy, rt) {
        (Some(p), Some(rt)) => step.admit(p, rt, cx).await,
        _ => Ok(()),
    }
}

/// [`Step::release`] when the route configures the policy.
pub(crate) fn release<S: Step>(
    step: &mut S,
    policy: Option<&S::Policy>,
    rt: Option<&S::Runtime>,
    consume: bool,
    env: &StepEnv<'_>,
) {
    if let (Some(p), Some(rt)) = (policy, rt) {
        step.release(p, rt, consume, env);
    }
}
