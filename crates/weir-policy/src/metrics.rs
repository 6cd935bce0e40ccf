//! The Prometheus registry with exactly the documented families (docs/HTTP.md, "Metrics").
//!
//! `prometheus-client` renders OpenMetrics, where a counter family is named without its
//! `_total` suffix. Scrapers and people grep for the documented names, so [`Metrics::render`]
//! emits the classic text format (0.0.4): `# TYPE weir_requests_total counter` followed by
//! `weir_requests_total{...}` samples. Every family is registered at start-up, so its
//! `# HELP`/`# TYPE` lines are there before the first event, and each configured route's
//! label sets are touched so its zero-valued series exist too.

use crate::outcome::Outcome;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteL {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeL {
    pub route: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultL {
    pub route: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TransitionL {
    pub route: String,
    pub from: String,
    pub to: String,
}

fn new_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

/// The engine's metric families; they survive reloads.
pub(crate) struct Metrics {
    registry: Registry,
    pub requests: Family<OutcomeL, Counter>,
    pub shadow: Family<RouteL, Counter>,
    pub attempts: Family<ResultL, Counter>,
    pub retries: Family<RouteL, Counter>,
    pub overflow: Family<RouteL, Counter>,
    pub budget_exhausted: Family<RouteL, Counter>,
    pub breaker_state: Family<RouteL, Gauge>,
    pub transitions: Family<TransitionL, Counter>,
    pub bypassed: Family<RouteL, Counter>,
    pub bypass_active: Family<RouteL, Gauge>,
    pub inflight: Family<RouteL, Gauge>,
    pub duration: Family<RouteL, Histogram, fn() -> Histogram>,
    pub auth: Family<ResultL, Counter>,
    /// `weir_endpoint_healthy`, `weir_ejections_total`, `weir_upstream_panic`.
    pub upstreams: UpstreamFamilies,
    pub quota_consumed: Family<RouteL, Counter>,
    pub quota_exhausted: Family<RouteL, Counter>,
    pub quota_duplicates: Family<RouteL, Counter>,
    /// `weir_access_log_dropped_total`: records the access log dropped (its queue was full).
    pub log_dropped: Counter,
    /// Counter family names (registered without `_total`), for rendering.
    counters: Vec<&'static str>,
}

pub(crate) fn route(r: &str) -> RouteL {
    RouteL {
        route: r.to_string(),
    }
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<OutcomeL, Counter>::default();
        let shadow = Family::<RouteL, Counter>::default();
        let attempts = Family::<ResultL, Counter>::default();
        let retries = Family::<RouteL, Counter>::default();
        let overflow = Family::<RouteL, Counter>::default();
        let budget_exhausted = Family::<RouteL, Counter>::default();
        let breaker_state = Family::<RouteL, Gauge>::default();
        let transitions = Family::<TransitionL, Counter>::default();
        let bypassed = Family::<RouteL, Counter>::default();
        let bypass_active = Family::<RouteL, Gauge>::default();
        let inflight = Family::<RouteL, Gauge>::default();
        let duration =
            Family::<RouteL, Histogram, fn() -> Histogram>::new_with_constructor(new_histogram);
        let auth = Family::<ResultL, Counter>::default();
        let quota_consumed = Family::<RouteL, Counter>::default();
        let quota_exhausted = Family::<RouteL, Counter>::default();
        let quota_duplicates = Family::<RouteL, Counter>::default();
        for (name, help, fam) in [
            (QUOTA[0].0, QUOTA[0].1, &quota_consumed),
            (QUOTA[1].0, QUOTA[1].1, &quota_exhausted),
            (QUOTA[2].0, QUOTA[2].1, &quota_duplicates),
        ] {
            registry.register(name.trim_end_matches("_total"), help, fam.clone());
        }
        registry.register(
            "weir_requests",
            "Requests by route and outcome (proxied, fallback or a reason)",
            requests.clone(),
        );
        registry.register(
            "weir_shadow_rejections",
            "Requests a shadow-mode policy would have rejected",
            shadow.clone(),
        );
        registry.register(
            "weir_upstream_attempts",
            "Upstream attempts by result",
            attempts.clone(),
        );
        registry.register("weir_retries", "Retries started", retries.clone());
        registry.register(
            "weir_keys_overflow",
            "Requests counted on the shared overflow limiter because the key table was full",
            overflow.clone(),
        );
        registry.register(
            "weir_retry_budget_exhausted",
            "Retries refused by the retry budget",
            budget_exhausted.clone(),
        );
        registry.register(
            "weir_breaker_state",
            "Breaker state (0 closed, 1 open, 2 half-open)",
            breaker_state.clone(),
        );
        registry.register(
            "weir_breaker_transitions",
            "Breaker state transitions",
            transitions.clone(),
        );
        registry.register(
            "weir_ratelimit_bypassed",
            "Requests passed because the rate-limit store failed (on_store_error = allow)",
            bypassed.clone(),
        );
        registry.register(
            "weir_ratelimit_bypass_active",
            BYPASS_ACTIVE_HELP,
            bypass_active.clone(),
        );
        registry.register(
            "weir_inflight",
            "Requests admitted and not finished",
            inflight.clone(),
        );
        registry.register(
            "weir_request_duration_seconds",
            "Request duration from begin to finish",
            duration.clone(),
        );
        registry.register(
            "weir_auth",
            "Auth decisions by route and result (ok, missing, invalid_token, invalid_api_key, insufficient_scope)",
            auth.clone(),
        );
        let log_dropped = Counter::default();
        registry.register(
            "weir_access_log_dropped",
            "Access-log records dropped because the log could not keep up (its queue was full)",
            log_dropped.clone(),
        );
        let upstreams = UpstreamFamilies::register(&mut registry);
        Metrics {
            log_dropped,
            upstreams,
            registry,
            requests,
            shadow,
            attempts,
            retries,
            overflow,
            budget_exhausted,
            breaker_state,
            transitions,
            bypassed,
            bypass_active,
            inflight,
            duration,
            auth,
            quota_consumed,
            quota_exhausted,
            quota_duplicates,
            counters: vec![
                "weir_quota_consumed",
                "weir_quota_exhausted",
                "weir_quota_duplicates",
                "weir_requests",
                "weir_shadow_rejections",
                "weir_upstream_attempts",
                "weir_retries",
                "weir_keys_overflow",
                "weir_retry_budget_exhausted",
                "weir_breaker_transitions",
                "weir_ratelimit_bypassed",
                "weir_auth",
                "weir_ejections",
                "weir_access_log_dropped",
            ],
        }
    }

    /// Creates the zero-valued series of a configured route.
    pub(crate) fn touch_route(&self, id: &str, has_breaker: bool) {
        let r = route(id);
        let _ = self.requests.get_or_create(&OutcomeL {
            route: id.to_string(),
            outcome: Outcome::Proxied.as_str().to_string(),
        });
        let _ = self.attempts.get_or_create(&ResultL {
            route: id.to_string(),
            result: "success".to_string(),
        });
        let _ = self.shadow.get_or_create(&r);
        let _ = self.retries.get_or_create(&r);
        let _ = self.overflow.get_or_create(&r);
        let _ = self.budget_exhausted.get_or_create(&r);
        let _ = self.bypassed.get_or_create(&r);
        let _ = self.bypass_active.get_or_create(&r);
        let _ = self.quota_consumed.get_or_create(&r);
        let _ = self.quota_exhausted.get_or_create(&r);
        let _ = self.quota_duplicates.get_or_create(&r);
        let _ = self.inflight.get_or_create(&r);
        let _ = self.duration.get_or_create(&r);
        if has_breaker {
            let _ = self.breaker_state.get_or_create(&r);
        }
    }

    /// The cached handles of a configured route (creates its zero-valued series).
    pub(crate) fn for_route(&self, id: &str, has_breaker: bool) -> RouteMetrics {
        self.touch_route(id, has_breaker);
        let r = route(id);
        RouteMetrics {
            id: id.to_string(),
            families: FamiliesRef {
                requests: self.requests.clone(),
                attempts: self.attempts.clone(),
                transitions: self.transitions.clone(),
                auth: self.auth.clone(),
            },
            shadow: self.shadow.get_or_create(&r).clone(),
            retries: self.retries.get_or_create(&r).clone(),
            overflow: self.overflow.get_or_create(&r).clone(),
            budget_exhausted: self.budget_exhausted.get_or_create(&r).clone(),
            bypassed: self.bypassed.get_or_create(&r).clone(),
            bypass_active: self.bypass_active.get_or_create(&r).clone(),
            quota_consumed: self.quota_consumed.get_or_create(&r).clone(),
            quota_exhausted: self.quota_exhausted.get_or_create(&r).clone(),
            quota_duplicates: self.quota_duplicates.get_or_create(&r).clone(),
            inflight: self.inflight.get_or_create(&r).clone(),
            duration: self.duration.get_or_create(&r).clone(),
            breaker_state: has_breaker.then(|| self.breaker_state.get_or_create(&r).clone()),
            outcomes: Default::default(),
            attempts: Default::default(),
            transitions: Default::default(),
            auth: Default::default(),
        }
    }

    pub(crate) fn touch_unrouted(&self) {
        let _ = self.requests.get_or_create(&OutcomeL {
            route: "-".to_string(),
            outcome: Outcome::NoRoute.as_str().to_string(),
        });
    }

    pub(crate) fn count_request(&self, route: &str, outcome: Outcome) {
        self.requests
            .get_or_create(&OutcomeL {
                route: route.to_string(),
                outcome: outcome.as_str().to_string(),
            })
            .inc();
    }

    /// The Prometheus text exposition (format 0.0.4) of every family.
    pub(crate) fn render(&self) -> String {
        let mut om = String::new();
        if prometheus_client::encoding::text::encode(&mut om, &self.registry).is_err() {
            return String::new();
        }
        let mut out = String::with_capacity(om.len() + 256);
        for line in om.lines() {
            if line == "# EOF" {
                continue;
            }
            let mut rewritten = None;
            for kind in ["# HELP ", "# TYPE "] {
                if let Some(rest) = line.strip_prefix(kind) {
                    let name = rest.split(' ').next().unwrap_or("");
                    if self.counters.contains(&name) {
                        rewritten = Some(format!("{kind}{name}_total{}", &rest[name.len()..]));
                    }
                }
            }
            out.push_str(rewritten.as_deref().unwrap_or(line));
            out.push('\n');
        }
        // prometheus-client writes nothing for a family without series; docs/HTTP.md
        // wants every family's `# TYPE` line from start-up.
        let upstream = UPSTREAM_DESCRIPTORS;
        for (name, help, kind) in DESCRIPTORS.into_iter().chain(upstream) {
            if !out.contains(&format!("# TYPE {name} ")) {
                out.push_str(&format!("# HELP {name} {help}.\n# TYPE {name} {kind}\n"));
            }
        }
        out
    }
}

/// The attempt results of `weir_upstream_attempts_total`.
pub(crate) const RESULTS: [&str; 6] = [
    "success",
    "http_5xx",
    "connect_failure",
    "reset",
    "protocol_error",
    "timeout",
];

const STATES: [weir_core::BreakerState; 3] = [
    weir_core::BreakerState::Closed,
    weir_core::BreakerState::Open,
    weir_core::BreakerState::HalfOpen,
];

/// Request outcomes cached per route: all of them.
const OUTCOMES: usize = Outcome::ALL.len();

/// One route's metric handles, resolved once per config revision so the request path
/// never formats or allocates a label set. Handles share their series with the registry
/// (prometheus-client metrics are `Arc`s), and series that do not exist yet are created
/// on first use, so `/metrics` shows the same series as without the cache.
pub(crate) struct RouteMetrics {
    id: String,
    families: FamiliesRef,
    pub shadow: Counter,
    pub retries: Counter,
    pub overflow: Counter,
    pub budget_exhausted: Counter,
    pub bypassed: Counter,
    /// 1 while some of the route's keys are passed as bypassed (set when rendered).
    pub bypass_active: Gauge,
    pub quota_consumed: Counter,
    pub quota_exhausted: Counter,
    pub quota_duplicates: Counter,
    pub inflight: Gauge,
    pub duration: Histogram,
    pub breaker_state: Option<Gauge>,
    outcomes: [std::sync::OnceLock<Counter>; OUTCOMES],
    attempts: [std::sync::OnceLock<Counter>; RESULTS.len()],
    transitions: [std::sync::OnceLock<Counter>; 9],
    auth: [std::sync::OnceLock<Counter>; AUTH_RESULTS.len()],
}

/// The `result` labels of `weir_auth_total`.
pub(crate) const AUTH_RESULTS: [&str; 5] = [
    "ok",
    "missing",
    "invalid_token",
    "invalid_api_key",
    "insufficient_scope",
];

/// Clones of the label-varying families (cheap `Arc` clones).
#[derive(Clone)]
pub(crate) struct FamiliesRef {
    requests: Family<OutcomeL, Counter>,
    attempts: Family<ResultL, Counter>,
    transitions: Family<TransitionL, Counter>,
    auth: Family<ResultL, Counter>,
}

impl RouteMetrics {
    pub(crate) fn request(&self, outcome: Outcome) {
        self.outcomes[outcome as usize]
            .get_or_init(|| {
                self.families
                    .requests
                    .get_or_create(&OutcomeL {
                        route: self.id.clone(),
                        outcome: outcome.as_str().to_string(),
                    })
                    .clone()
            })
            .inc();
    }

    pub(crate) fn attempt(&self, result: &'static str) {
        let i = RESULTS.iter().position(|r| *r == result).unwrap_or(0);
        self.attempts[i]
            .get_or_init(|| {
                self.families
                    .attempts
                    .get_or_create(&ResultL {
                        route: self.id.clone(),
                        result: result.to_string(),
                    })
                    .clone()
            })
            .inc();
    }

    pub(crate) fn auth(&self, result: &'static str) {
        let i = AUTH_RESULTS.iter().position(|r| *r == result).unwrap_or(0);
        self.auth[i]
            .get_or_init(|| {
                self.families
                    .auth
                    .get_or_create(&ResultL {
                        route: self.id.clone(),
                        result: result.to_string(),
                    })
                    .clone()
            })
            .inc();
    }

    pub(crate) fn transition(&self, from: weir_core::BreakerState, to: weir_core::BreakerState) {
        let i = from.as_gauge() as usize * 3 + to.as_gauge() as usize;
        self.transitions[i]
            .get_or_init(|| {
                self.families
                    .transitions
                    .get_or_create(&TransitionL {
                        route: self.id.clone(),
                        from: STATES[from.as_gauge() as usize].as_str().to_string(),
                        to: STATES[to.as_gauge() as usize].as_str().to_string(),
                    })
                    .clone()
            })
            .inc();
    }
}

/// Help of `weir_ratelimit_bypass_active`.
const BYPASS_ACTIVE_HELP: &str =
    "1 while some of the route's keys are passed as bypassed (store outage within allow_for)";

/// The quota families: name and help.
const QUOTA: [(&str, &str); 3] = [
    (
        "weir_quota_consumed_total",
        "Quota units consumed (committed consume events)",
    ),
    (
        "weir_quota_exhausted_total",
        "Requests refused because their quota was exhausted",
    ),
    (
        "weir_quota_duplicates_total",
        "Requests that repeated an event id already consumed this period",
    ),
];

const DESCRIPTORS: [(&str, &str, &str); 16] = [
    (
        "weir_requests_total",
        "Requests by route and outcome (proxied, fallback or a reason)",
        "counter",
    ),
    (
        "weir_shadow_rejections_total",
        "Requests a shadow-mode policy would have rejected",
        "counter",
    ),
    (
        "weir_upstream_attempts_total",
        "Upstream attempts by result",
        "counter",
    ),
    ("weir_retries_total", "Retries started", "counter"),
    (
        "weir_keys_overflow_total",
        "Requests counted on the shared overflow limiter because the key table was full",
        "counter",
    ),
    (
        "weir_retry_budget_exhausted_total",
        "Retries refused by the retry budget",
        "counter",
    ),
    (
        "weir_breaker_state",
        "Breaker state (0 closed, 1 open, 2 half-open)",
        "gauge",
    ),
    (
        "weir_breaker_transitions_total",
        "Breaker state transitions",
        "counter",
    ),
    (
        "weir_ratelimit_bypassed_total",
        "Requests passed because the rate-limit store failed (on_store_error = allow)",
        "counter",
    ),
    ("weir_ratelimit_bypass_active", BYPASS_ACTIVE_HELP, "gauge"),
    (
        "weir_inflight",
        "Requests admitted and not finished",
        "gauge",
    ),
    (
        "weir_request_duration_seconds",
        "Request duration from begin to finish",
        "histogram",
    ),
    (
        "weir_auth_total",
        "Auth decisions by route and result (ok, missing, invalid_token, invalid_api_key, insufficient_scope)",
        "counter",
    ),
    (QUOTA[0].0, QUOTA[0].1, "counter"),
    (QUOTA[1].0, QUOTA[1].1, "counter"),
    (QUOTA[2].0, QUOTA[2].1, "counter"),
];

/// The families docs/HTTP.md documents, as exposed names (for tests and `--check`).
pub const FAMILIES: [&str; 20] = [
    "weir_requests_total",
    "weir_shadow_rejections_total",
    "weir_upstream_attempts_total",
    "weir_retries_total",
    "weir_keys_overflow_total",
    "weir_retry_budget_exhausted_total",
    "weir_breaker_state",
    "weir_breaker_transitions_total",
    "weir_ratelimit_bypassed_total",
    "weir_ratelimit_bypass_active",
    "weir_inflight",
    "weir_request_duration_seconds",
    "weir_auth_total",
    "weir_endpoint_healthy",
    "weir_ejections_total",
    "weir_upstream_panic",
    QUOTA[0].0,
    QUOTA[1].0,
    QUOTA[2].0,
    "weir_access_log_dropped_total",
];

// ---- Upstream families (the upstream service counts into them) ----

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EndpointL {
    pub upstream: String,
    pub endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EjectionL {
    pub upstream: String,
    pub endpoint: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct UpstreamL {
    pub upstream: String,
}

/// The upstream metric families (`weir_endpoint_healthy`, `weir_ejections_total`,
/// `weir_upstream_panic`).
pub(crate) struct UpstreamFamilies {
    pub(crate) healthy: Family<EndpointL, Gauge>,
    pub(crate) ejections: Family<EjectionL, Counter>,
    pub(crate) panic: Family<UpstreamL, Gauge>,
}

/// Name (as exposed), help, type of each upstream family.
pub(crate) const UPSTREAM_DESCRIPTORS: [(&str, &str, &str); 3] = [
    (
        "weir_endpoint_healthy",
        "1 while the endpoint is in rotation, 0 while it is ejected",
        "gauge",
    ),
    (
        "weir_ejections_total",
        "Endpoint ejections by reason (consecutive_failures, consecutive_5xx, failure_percentage)",
        "counter",
    ),
    (
        "weir_upstream_panic",
        "1 while the upstream is in panic (every endpoint used)",
        "gauge",
    ),
];

impl UpstreamFamilies {
    pub(crate) fn register(registry: &mut Registry) -> UpstreamFamilies {
        let f = UpstreamFamilies {
            healthy: Family::default(),
            ejections: Family::default(),
            panic: Family::default(),
        };
        let [h, e, p] = UPSTREAM_DESCRIPTORS;
        registry.register(h.0, h.1, f.healthy.clone());
        registry.register(e.0.trim_end_matches("_total"), e.1, f.ejections.clone());
        registry.register(p.0, p.1, f.panic.clone());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_a_type_line_before_any_event() {
        let m = Metrics::new();
        let text = m.render();
        for f in FAMILIES {
            let kind = if f == "weir_request_duration_seconds" {
                "histogram"
            } else if f.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            assert!(
                text.contains(&format!("# TYPE {f} {kind}\n")),
                "missing {f}:\n{text}"
            );
        }
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn touched_series_render_with_contract_names() {
        let m = Metrics::new();
        let r = m.for_route("ok", true);
        r.request(Outcome::RateLimited);
        r.transition(
            weir_core::BreakerState::Closed,
            weir_core::BreakerState::Open,
        );
        let text = m.render();
        assert!(text.contains("weir_requests_total{route=\"ok\",outcome=\"rate_limited\"} 1"));
        assert!(text.contains("weir_requests_total{route=\"ok\",outcome=\"proxied\"} 0"));
        assert!(text.contains(
            "weir_breaker_transitions_total{route=\"ok\",from=\"closed\",to=\"open\"} 1"
        ));
        assert!(text.contains("weir_breaker_state{route=\"ok\"} 0"));
        assert!(text.contains("weir_request_duration_seconds_bucket{"));
    }
}
