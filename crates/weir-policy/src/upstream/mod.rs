//! `[[upstreams]]` balancing and `[upstreams.outlier]`: the config and compile step
//! ([`layer`]) and the per-attempt step ([`service`]: choose an endpoint, count its
//! outcome, eject). The ejection machine itself is `weir_core::outlier`.

pub(crate) mod layer;
pub(crate) mod service;

pub use layer::{Balance, OutlierPolicy, UpstreamSettings};
