//! An upstream at run time: its endpoints' shared ejection state (kept across reloads
//! while the endpoint list is unchanged), the choice of an attempt's endpoint, the
//! counting of each attempt's outcome, and the metric series and admin view of it.
//!
//! Both frontends reach this only through the flow (`Flow::next_attempt` picks,
//! `Flow::on_attempt` records), so there is one code path for ejection.

use crate::attempt::AttemptResult;
use crate::metrics::{EjectionL, EndpointL, Metrics, UpstreamL};
use crate::upstream::{Balance, UpstreamSettings};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use weir_core::{
    AttemptKind, Choice, EjectReason, EndpointState, Nanos, OutlierConfig, SharedOutlier,
};

const REASONS: [EjectReason; 3] = [
    EjectReason::ConsecutiveFailures,
    EjectReason::Consecutive5xx,
    EjectReason::FailurePercentage,
];

/// What the workers of an instance share about one upstream's endpoints.
struct State {
    outlier: SharedOutlier,
    eps: Vec<EndpointState>,
    rr: AtomicUsize,
}

/// One endpoint's metric handles.
struct EndpointMetrics {
    healthy: Gauge,
    ejections: [Counter; 3],
}

/// An upstream of one config revision.
pub(crate) struct UpstreamRuntime {
    pub settings: Arc<UpstreamSettings>,
    state: Arc<State>,
    /// The rules in force (a config that never ejects without `[upstreams.outlier]`).
    cfg: OutlierConfig,
    metrics: Vec<EndpointMetrics>,
    panic: Gauge,
}

impl UpstreamRuntime {
    /// The runtime of `settings`, keeping `prev`'s state when its endpoints are the same.
    pub(crate) fn build(
        settings: Arc<UpstreamSettings>,
        prev: Option<&UpstreamRuntime>,
        metrics: &Metrics,
    ) -> UpstreamRuntime {
        let state = match prev {
            Some(p) if p.settings.endpoints == settings.endpoints => p.state.clone(),
            _ => Arc::new(State {
                outlier: SharedOutlier::new(),
                eps: settings
                    .endpoints
                    .iter()
                    .map(|_| EndpointState::new())
                    .collect(),
                rr: AtomicUsize::new(0),
            }),
        };
        let f = &metrics.upstreams;
        let name = settings.name.clone();
        let per_endpoint: Vec<EndpointMetrics> = settings
            .endpoints
            .iter()
            .map(|e| {
                let endpoint = e.to_string();
                let healthy = f
                    .healthy
                    .get_or_create(&EndpointL {
                        upstream: name.clone(),
                        endpoint: endpoint.clone(),
                    })
                    .clone();
                let ejections = REASONS.map(|r| {
                    f.ejections
                        .get_or_create(&EjectionL {
                            upstream: name.clone(),
                            endpoint: endpoint.clone(),
                            reason: r.as_str().to_string(),
                        })
                        .clone()
                });
                EndpointMetrics { healthy, ejections }
            })
            .collect();
        let panic = f.panic.get_or_create(&UpstreamL { upstream: name }).clone();
        let cfg = settings.outlier.as_ref().map_or(
            OutlierConfig {
                max_ejection_percent: 0,
                panic_threshold: 0,
                ..OutlierConfig::default()
            },
            |o| o.core,
        );
        let fresh = !prev.is_some_and(|p| Arc::ptr_eq(&p.state, &state));
        if fresh {
            for m in per_endpoint.iter() {
                m.healthy.set(1);
            }
            panic.set(0);
        }
        UpstreamRuntime {
            settings,
            state,
            cfg,
            metrics: per_endpoint,
            panic,
        }
    }

    /// The endpoint (index) of the next attempt; `avoid` is the one the last attempt
    /// failed on. `draw` is a uniform random value (used by `least_request`).
    pub(crate) fn pick(&self, now: Nanos, avoid: Option<usize>, draw: u64) -> usize {
        let s = &*self.state;
        let choice = match self.settings.balance {
            Balance::RoundRobin => Choice::RoundRobin(s.rr.fetch_add(1, Ordering::Relaxed)),
            Balance::LeastRequest => Choice::TwoRandom(draw),
        };
        let i = s
            .outlier
            .pick(&self.cfg, &s.eps, now, choice, avoid)
            .map_or(0, |p| p.index);
        s.eps[i].start();
        i
    }

    /// The attempt on endpoint `i` is over (its in-flight count goes down).
    pub(crate) fn end(&self, i: usize) {
        if let Some(e) = self.state.eps.get(i) {
            e.end();
        }
    }

    /// Counts what an attempt on endpoint `i` produced; ejects when a rule is met.
    pub(crate) fn record(&self, i: usize, result: &AttemptResult, now: Nanos, draw: u64) {
        if self.settings.outlier.is_none() {
            return;
        }
        let kind = match result {
            AttemptResult::Response { status } if *status >= 500 => AttemptKind::Http5xx,
            AttemptResult::Response { .. } => AttemptKind::Success,
            _ => AttemptKind::GatewayFailure,
        };
        let s = &*self.state;
        if let Some(e) = s.outlier.record(&self.cfg, &s.eps, i, kind, now, draw) {
            let m = &self.metrics[i];
            m.ejections[REASONS.iter().position(|r| *r == e.reason).unwrap_or(0)].inc();
            m.healthy.set(0);
        }
    }

    /// Brings the gauges up to date at `now` (endpoints back from ejection, panic).
    pub(crate) fn observe(&self, now: Nanos) {
        let s = &*self.state;
        s.outlier.refresh(&s.eps, now);
        for (e, m) in s.eps.iter().zip(&self.metrics) {
            m.healthy.set(i64::from(e.healthy(now)));
        }
        self.panic
            .set(i64::from(s.outlier.in_panic(&self.cfg, s.eps.len())));
    }

    /// The `GET /admin/upstreams` entry.
    pub(crate) fn json(&self, now: Nanos) -> serde_json::Value {
        self.observe(now);
        let s = &*self.state;
        let endpoints: Vec<serde_json::Value> = self
            .settings
            .endpoints
            .iter()
            .zip(&s.eps)
            .map(|(a, e)| {
                json!({
                    "address": a.to_string(),
                    "healthy": e.healthy(now),
                    "ejections": e.ejections(),
                    "ejected_for_ms": e.ejected_for(now).as_millis(),
                    "inflight": e.inflight(),
                })
            })
            .collect();
        json!({
            "name": self.settings.name,
            "panic": s.outlier.in_panic(&self.cfg, s.eps.len()),
            "endpoints": endpoints,
        })
    }
}
