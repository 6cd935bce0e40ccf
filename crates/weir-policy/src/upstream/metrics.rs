//! The upstream metric families, registered with the engine's others: endpoint health,
//! ejections by reason, panic. Apart from the service so that `metrics.rs` can own them
//! without importing the service (which uses `metrics.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
pub(crate) const DESCRIPTORS: [(&str, &str, &str); 3] = [
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
        let [h, e, p] = DESCRIPTORS;
        registry.register(h.0, h.1, f.healthy.clone());
        registry.register(e.0.trim_end_matches("_total"), e.1, f.ejections.clone());
        registry.register(p.0, p.1, f.panic.clone());
        f
    }
}
