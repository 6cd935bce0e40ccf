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

/// 2^53: integers below this are exact in Redis' Lua numbers (IEEE doubles).
const LUA_EXACT: u128 = 1 << 53;

/// Whether a global store can evaluate `limit` exactly: periods of at least 1 µs and every
/// intermediate (level × period in µs) below 2^53, where Redis' Lua numbers stop being
/// integers. The config checks this at load for `scope = "global"`, so a limit too large
/// for the store fails `--check` instead of every request (into `on_store_error`); the
/// Redis store checks it again per call.
///
/// # Errors
/// Why not, in words a config error can carry.
pub fn check_exact(limit: &Limit) -> Result<(), String> {
    let (q, period) = limit.quota_window();
    let p = u128::from(period.as_u64() / 1_000);
    if p == 0 {
        return Err(format!(
            "{} needs a period of at least 1us in a global store",
            limit.kind().as_str()
        ));
    }
    // The largest level a script keeps, in units of 1/period_us.
    let top = match limit {
        Limit::TokenBucket(c) => u128::from(c.burst()),
        Limit::LeakyBucket(c) => u128::from(c.burst()) + 2,
        _ => u128::from(q),
    };
    if top * p >= LUA_EXACT || u128::from(q) * p >= LUA_EXACT {
        return Err(format!(
            "{} too large for exact evaluation in the global store: capacity x period in microseconds must stay below 2^53 (~9.0e15); lower the rate/burst or the period",
            limit.kind().as_str()
        ));
    }
    Ok(())
}

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

    /// One quota operation on a descriptor's keys (global quotas, `[routes.quota] scope =
    /// "global"`), atomically (one script call). The operation is **sent when this is
    /// called**: dropping the future does not cancel it (the engine gives a reservation
    /// back from synchronous code that way). A store without quotas answers an error, so
    /// a global quota then follows `on_store_error`.
    fn quota(
        &self,
        req: QuotaRequest,
    ) -> Pin<Box<dyn Future<Output = Result<QuotaReply, StoreError>> + Send>> {
        let _ = req;
        Box::pin(core::future::ready(Err(StoreError(
            "this store has no quotas".into(),
        ))))
    }
}

/// One quota operation against the store: the keys of one descriptor in one period
/// ([`QuotaKeys`]), what to do, and when its keys expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRequest {
    /// The descriptor's keys in this period (one hash slot).
    pub keys: QuotaKeys,
    /// What to do.
    pub op: QuotaOp,
    /// Unix second at which the period's idempotency markers expire (the period's end
    /// plus a grace for in-flight requests and bypass write-back).
    pub markers_until: u64,
    /// Unix second at which the counters and ledger events expire (kept one more period,
    /// so the previous period stays readable from `/admin/quota/ledger`).
    pub keep_until: u64,
}

/// A global quota's Redis keys for one route, period and key digest. All carry the hash
/// tag `{ROUTE}` (the route's rate-limit keys have the same one), so one script's keys
/// are on one cluster node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaKeys {
    /// `weirq:{ROUTE}:PERIOD:` — the period's prefix.
    pub prefix: String,
    /// The descriptor digest (32 hex digits; never the raw key).
    pub digest: String,
}

impl QuotaKeys {
    /// The keys of `route`'s digest `digest` in period `period` (its name).
    pub fn new(route: &str, period: &str, digest: &str) -> QuotaKeys {
        QuotaKeys {
            prefix: format!("weirq:{{{route}}}:{period}:"),
            digest: digest.to_string(),
        }
    }
    /// Hash `used`, `adjusted`.
    pub fn counter(&self) -> String {
        format!("{}{}", self.prefix, self.digest)
    }
    /// Set of consumed (`c:ID`) and adjustment (`a:ID`) event ids: the idempotency markers.
    pub fn ids(&self) -> String {
        format!("{}{}:ids", self.prefix, self.digest)
    }
    /// Stream of the key's ledger events (fields `k` kind, `a` amount, `e` the JSON event).
    pub fn log(&self) -> String {
        format!("{}{}:log", self.prefix, self.digest)
    }
    /// Set of the period's key digests (for the period's ledger).
    pub fn index(&self) -> String {
        format!("{}keys", self.prefix)
    }
}

/// What a [`QuotaRequest`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaOp {
    /// The quota gate: passes a consumed `event_id` (duplicate), refuses when
    /// `used + cost > limit + adjusted`, else consumes `cost` and appends `event` (JSON)
    /// as a `consume` event — provisionally: [`QuotaOp::Release`] takes it back when a
    /// later gate rejects the request.
    Consume {
        /// The route's limit.
        limit: u64,
        /// Units.
        cost: u64,
        /// The request's event id.
        event_id: Option<String>,
        /// The ledger event, JSON.
        event: String,
    },
    /// Gives back a consumption a later gate made void: deletes its ledger entry,
    /// un-counts it and forgets its event id (nothing if the entry is already gone).
    Release {
        /// The ledger entry the consumption returned.
        entry: String,
        /// Units.
        cost: u64,
        /// Its event id.
        event_id: Option<String>,
    },
    /// Writes back a request admitted while the store was down: counted and appended as
    /// a `bypass` event unless `event_id` was already consumed (idempotent).
    Bypass {
        /// Units.
        cost: u64,
        /// The bypass event's id (the request's, or one the gateway made).
        event_id: String,
        /// The ledger event, JSON.
        event: String,
    },
    /// A signed adjustment, idempotent by `event_id`.
    Adjust {
        /// Signed units (positive = credit).
        amount: i64,
        /// Its id.
        event_id: String,
        /// The ledger event, JSON.
        event: String,
    },
    /// Reads the key's state and recomputes its ledger sum.
    Report,
    /// Lists the period's ledger events of every key (JSON, one per entry).
    Ledger,
}

/// The store's answer to a [`QuotaRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaReply {
    /// What happened.
    pub status: QuotaStatus,
    /// The key's `used` after the operation.
    pub used: u64,
    /// The key's `adjusted` after the operation.
    pub adjusted: i64,
    /// [`QuotaOp::Report`]: `consume` + `bypass` amounts of the key's ledger.
    pub ledger_sum: u64,
    /// [`QuotaOp::Consume`]: the ledger entry (for a release).
    pub entry: String,
    /// [`QuotaOp::Ledger`]: the events, JSON.
    pub events: Vec<String>,
}

/// How a [`QuotaRequest`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaStatus {
    /// Done (consumed, released, written, adjusted, read).
    Done,
    /// The event id was already there: nothing changed.
    Duplicate,
    /// `Consume`: does not fit.
    Exhausted,
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
