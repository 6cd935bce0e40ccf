//! The runtime state behind one config revision: each route with its policies' state,
//! built by each policy's own `build` step (which keeps the previous revision's state when
//! the policy is unchanged), and what every request shares (clock, store, metrics, log).

use crate::accesslog::AccessLog;
use crate::breaker::service::Breaker;
use crate::concurrency::service::Concurrency;
use crate::metrics::{Metrics, RouteMetrics};
use crate::policy::{PolicySet, RoutePolicy, UpstreamSettings};
use crate::quota::ledger::RouteLedger;
use crate::quota::service::Ledgers;
use crate::ratelimit::service::RateLimiter;
use crate::response::{ErrorIds, json_string};
use crate::retry::service::Retry;
use crate::store::GlobalStore;
use crate::text::HeaderText;
use crate::upstream::service::UpstreamRuntime;
use arc_swap::{ArcSwap, ArcSwapOption};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_core::Nanos;

/// What every request of every revision shares.
pub(crate) struct Shared {
    pub live: ArcSwap<Live>,
    /// Monotonic instants and the wall time derived from them ([`crate::wall`]).
    pub clock: crate::wall::WallClock,
    pub store: ArcSwapOption<Arc<dyn GlobalStore>>,
    pub metrics: Metrics,
    pub log: AccessLog,
    /// The keyed-table hash key (random per engine).
    pub table_key: (u64, u64),
    /// Request ids generated.
    pub seq: AtomicU64,
    /// Flows begun (seeds each flow's jitter generator).
    pub flows: AtomicU64,
    /// The engine's seed: request ids, breaker jitter, retry-backoff jitter.
    pub seed: u64,
    /// [`Engine::for_simulation`](crate::Engine::for_simulation): the frontend reads only
    /// the status of the engine's responses and the flow's outcome, so flows build no
    /// response headers or bodies and generate no request ids. Every decision is taken as
    /// with it off.
    pub bare: bool,
}

impl Shared {
    /// A fresh request id: 32 hex digits, a random draw then the sequence number (masked by
    /// the seed). Made as [`HeaderText::from_ascii`], since every proxied request sends it
    /// twice (upstream and downstream).
    pub(crate) fn new_request_id(&self) -> HeaderText {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut r = weir_core::SplitMix64::new(self.seed ^ n.rotate_left(17));
        use weir_core::Rng;
        let id = (u128::from(r.next_u64()) << 64) | u128::from(n ^ self.seed);
        HeaderText::from_ascii(crate::descriptor::hex::<32>(id))
    }
}

/// A route with its runtime state.
pub(crate) struct RouteRuntime {
    pub policy: RoutePolicy,
    pub upstream: Arc<UpstreamSettings>,
    /// The upstream's endpoint choice and ejection state (shared by its routes).
    pub endpoints: Arc<UpstreamRuntime>,
    pub rate_limit: Option<RateLimiter>,
    /// The quota's ledger (`[routes.quota]`).
    pub quota: Option<Arc<RouteLedger>>,
    pub concurrency: Option<Arc<Concurrency>>,
    pub breaker: Option<Arc<Breaker>>,
    pub retry: Retry,
    /// Metric handles with this route's labels, resolved once.
    pub metrics: RouteMetrics,
    /// `x-weir-budget-ms` of an attempt with the whole per-try timeout, made once.
    pub budget_ms: HeaderText,
    /// The route id as a JSON string, for the body of the gateway's own responses.
    pub id_json: Box<str>,
}

/// One revision of the config with its state.
pub(crate) struct Live {
    pub revision: u64,
    pub set: Arc<PolicySet>,
    pub routes: Vec<Arc<RouteRuntime>>,
    /// The upstreams in file order.
    pub upstreams: Vec<Arc<UpstreamRuntime>>,
    /// `x-weir-instance`, prepared once.
    pub instance: HeaderText,
    /// The instance name as a JSON string, for the body of the gateway's own responses.
    pub instance_json: Box<str>,
    /// The quota ledgers of this revision's routes (by route id).
    pub ledgers: Ledgers,
}

impl Live {
    /// The store's per-call timeout (`[store] timeout_ms`; 100 ms without a store).
    pub(crate) fn store_timeout(&self) -> std::time::Duration {
        self.set
            .store
            .as_ref()
            .map_or(std::time::Duration::from_millis(100), |s| s.timeout)
    }

    /// What the gateway's own responses of this revision say about the request: the route
    /// (as a JSON string, [`NO_ROUTE_JSON`](crate::response::NO_ROUTE_JSON) without one), the instance when
    /// `[server] evidence_headers` is on, and the request id.
    pub(crate) fn error_ids<'a>(
        &'a self,
        route_json: &'a str,
        request_id: &'a HeaderText,
    ) -> ErrorIds<'a> {
        ErrorIds {
            route_json,
            instance: self.set.server.evidence_headers.then_some(&self.instance),
            instance_json: &self.instance_json,
            request_id,
        }
    }

    /// Revision `revision` of `set`; state of unchanged policies is taken from `old`.
    pub(crate) fn build(
        revision: u64,
        set: Arc<PolicySet>,
        old: Option<&Live>,
        seed: u64,
        metrics: &Metrics,
        ledgers: Ledgers,
    ) -> Live {
        let upstreams: Vec<Arc<UpstreamRuntime>> = set
            .upstreams
            .iter()
            .map(|u| {
                let prev = old.and_then(|o| o.upstreams.iter().find(|p| p.settings.name == u.name));
                Arc::new(UpstreamRuntime::build(
                    u.clone(),
                    prev.map(|p| &**p),
                    metrics,
                ))
            })
            .collect();
        let routes = set
            .routes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let prev = old.and_then(|o| o.routes.iter().find(|r| r.policy.id == p.id));
                let endpoints = upstreams
                    .iter()
                    .find(|u| u.settings.name == p.upstream)
                    .cloned()
                    .expect("validated: route upstream exists");
                let mut rt = route_runtime(i, p, endpoints, prev.map(|r| &**r), seed, metrics);
                rt.quota = ledgers.get(&p.id).cloned();
                Arc::new(rt)
            })
            .collect();
        let (instance, instance_json) = instance_texts(&set.server.instance);
        Live {
            revision,
            upstreams,
            instance,
            instance_json,
            set,
            routes,
            ledgers,
        }
    }
}

/// The instance name as `x-weir-instance` and as a JSON string, made once per revision.
pub(crate) fn instance_texts(name: &str) -> (HeaderText, Box<str>) {
    (HeaderText::from(name.to_string()), json_string(name))
}

fn route_runtime(
    i: usize,
    p: &RoutePolicy,
    endpoints: Arc<UpstreamRuntime>,
    prev: Option<&RouteRuntime>,
    seed: u64,
    metrics: &Metrics,
) -> RouteRuntime {
    let upstream = endpoints.settings.clone();
    let total = Nanos::from(p.timeouts.total.0);
    let breaker = p.breaker.as_ref().map(|b| {
        let seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Breaker::build(b, total, seed, prev.and_then(|r| r.breaker.as_ref()))
    });
    RouteRuntime {
        rate_limit: p
            .rate_limit
            .as_ref()
            .map(|rl| RateLimiter::build(rl, &p.id, prev.and_then(|r| r.rate_limit.as_ref()))),
        quota: None,
        concurrency: p
            .concurrency
            .as_ref()
            .map(|c| Concurrency::build(c, prev.and_then(|r| r.concurrency.as_ref()))),
        retry: Retry::build(&p.retry, prev.map(|r| &r.retry)),
        metrics: metrics.for_route(&p.id, breaker.is_some()),
        budget_ms: HeaderText::from_u64(
            u64::try_from(p.timeouts.per_try.0.as_millis()).unwrap_or(u64::MAX),
        ),
        id_json: json_string(&p.id),
        breaker,
        policy: p.clone(),
        upstream,
        endpoints,
    }
}
