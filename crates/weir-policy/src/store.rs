//! The global store interface (implemented by the Redis crate).
//!
//! Semantics owned here, not by the store: the engine bounds every call with
//! `[store] timeout_ms` (racing the future against the frontend's [`crate::Timer`]);
//! an error or a timeout is never a 429 — the route's `on_store_error` decides between
//! 503 `ratelimit_store_unavailable` (deny, no upstream attempt) and a bypassed pass
//! (allow, `x-weir-ratelimit: bypassed`, `weir_ratelimit_bypassed_total`). No store
//! installed behaves as a failing store, and recovery needs no restart: every request
//! asks again.

use core::future::Future;
use core::pin::Pin;
use weir_core::{Decision, Limit};

/// A shared rate-limit store: one limit for every gateway instance.
pub trait GlobalStore: Send + Sync + 'static {
    /// Consumes `req.cost` from the limit at `req.key`, atomically, on the store's clock.
    fn acquire(
        &self,
        req: StoreRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send>>;

    /// The shard that holds `key`: 0 for a single server, a Redis Cluster's hash slot.
    /// The engine tracks store outages per route and shard (`allow_for`), so keys on a
    /// reachable shard keep working while another one fails.
    fn shard(&self, key: &str) -> u32 {
        let _ = key;
        0
    }
}

/// One acquisition against the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRequest {
    /// `weir:{ROUTE}:DIGEST` — hash-tagged by route for Redis Cluster; the digest is the
    /// descriptor digest (never the raw key).
    pub key: String,
    /// Route id.
    pub route: String,
    /// The route's limit, exactly as the config compiled it: the store applies the same
    /// algorithm with the same numbers (and the same sliding-log cap) as a local table.
    pub limit: Limit,
    /// Units to consume (1 per request).
    pub cost: u64,
}

/// The store could not answer (connection, protocol, script error...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl core::fmt::Display for StoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "rate-limit store error: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

/// The store key of a descriptor: hash-tagged by route so one route's keys share a slot.
pub fn store_key(route: &str, digest: &str) -> String {
    format!("weir:{{{route}}}:{digest}")
}
