//! The global store interface (implemented by the Redis crate), its one error type, and
//! what a store is built from and how a route uses it (`[store]`'s [`StoreConfig`],
//! [`Scope`], [`OnStoreError`]): a leaf, because the rate limit and the quota both read
//! them and the policies do not import each other.
//!
//! Semantics owned here, not by the store: the engine bounds every call with
//! `[store] timeout_ms` (racing the future against the frontend's [`crate::Timer`]);
//! an error or a timeout is never a 429 — the route's `on_store_error` decides between
//! 503 `ratelimit_store_unavailable` (deny, no upstream attempt) and a bypassed pass
//! (allow, `x-weir-ratelimit: bypassed`, `weir_ratelimit_bypassed_total`). No store
//! installed behaves as a failing store, and recovery needs no restart: every request
//! asks again.

use crate::dur::Dur;
use crate::secret::{REDACTED, Secret, redact_url};
use core::future::Future;
use core::pin::Pin;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;
use weir_core::{Decision, Limit};

/// Where rate-limit state lives.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Per gateway process (all workers share one state).
    Local,
    /// In the shared [`crate::GlobalStore`] (Redis).
    Global,
}

impl Scope {
    /// The config spelling (also the access log's `scope`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Global => "global",
        }
    }
}

/// What a global route does when its store cannot answer in time.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreError {
    /// Fail closed: 503 `ratelimit_store_unavailable`, no upstream attempt.
    Deny,
    /// Fail open: proxy, mark `x-weir-ratelimit: bypassed`, count it.
    Allow,
}

/// `[store]`: what the global-store implementation connects to. The one model of the
/// store's settings: weir-redis takes it as it is (`weir_redis::RedisSettings`).
/// `Debug`, `Serialize` and [`StoreConfig::describe`] show the URL with its password
/// redacted and the password as `***`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    /// Store kind (`"redis"`).
    pub kind: String,
    /// Connection URL (`""` with `cluster`). Shown with its password redacted.
    #[serde(serialize_with = "ser_url")]
    pub url: String,
    /// Redis Cluster seed nodes, `host:port` each (empty: the single server at `url`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<String>,
    /// `username`: the ACL user (Redis 6+); none: the default user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// `password` or the value of `password_env` (shown as `***`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// `tls`: TLS to every node (also implied by a `rediss://` URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<StoreTls>,
    /// How long the engine waits for one answer (`timeout_ms`, default 100).
    #[serde(serialize_with = "crate::dur::ser_duration")]
    pub timeout: Duration,
    /// Tokens an instance may prefetch per key (0 = ask every time).
    pub lease: u64,
}

/// `[store] tls`: server certificates checked against `ca` (a PEM file, read when the
/// config is loaded), or against the system's roots when `ca` is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreTls {
    /// The CA file as resolved (relative to the config file) and its PEM text.
    #[serde(serialize_with = "ser_ca")]
    pub ca: Option<(PathBuf, Vec<u8>)>,
}

fn ser_url<S: serde::Serializer>(u: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(u))
}

fn ser_ca<S: serde::Serializer>(ca: &Option<(PathBuf, Vec<u8>)>, s: S) -> Result<S::Ok, S::Error> {
    match ca {
        Some((p, _)) => s.serialize_some(&p.display().to_string()),
        None => s.serialize_none(),
    }
}

impl core::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("kind", &self.kind)
            .field("url", &redact_url(&self.url))
            .field("cluster", &self.cluster)
            .field("username", &self.username)
            .field("password", &self.password)
            .field(
                "tls",
                &self.tls.as_ref().map(|t| t.ca.as_ref().map(|c| &c.0)),
            )
            .field("timeout", &self.timeout)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Default for StoreConfig {
    /// A Redis store with no address yet: the defaults of `[store]`.
    fn default() -> Self {
        StoreConfig {
            kind: "redis".to_string(),
            url: String::new(),
            cluster: Vec::new(),
            username: None,
            password: None,
            tls: None,
            timeout: Duration::from_millis(100),
            lease: 0,
        }
    }
}

impl StoreConfig {
    /// What `--check` prints of the store: kind, where (password redacted), auth, TLS.
    pub fn describe(&self) -> String {
        let mut o = format!("{} ", self.kind);
        if self.cluster.is_empty() {
            o.push_str(&redact_url(&self.url));
        } else {
            let _ = write!(o, "cluster [{}]", self.cluster.join(", "));
        }
        if let Some(u) = &self.username {
            let _ = write!(o, ", user {u}");
        }
        if self.password.is_some() {
            let _ = write!(o, ", password {REDACTED}");
        }
        match &self.tls {
            Some(StoreTls { ca: Some((p, _)) }) => {
                let _ = write!(o, ", tls (ca {})", p.display());
            }
            Some(StoreTls { ca: None }) => o.push_str(", tls (system roots)"),
            None if self.url.starts_with("rediss://") => o.push_str(", tls (system roots)"),
            None => {}
        }
        let _ = write!(o, " (timeout {}, lease {})", Dur(self.timeout), self.lease);
        o
    }
}

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
        Box::pin(core::future::ready(Err(StoreError::new(
            StoreErrorKind::Config,
            "this store has no quotas",
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

/// Why the store could not answer (one type for the engine and every store
/// implementation: weir-redis re-exports it). Never a rate-limit denial: the route's
/// `on_store_error` decides what the request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// What failed.
    pub kind: StoreErrorKind,
    /// Human-readable detail (no keys, no secrets).
    pub message: String,
}

/// The class of a [`StoreError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// No answer within the store timeout.
    Timeout,
    /// No store, could not connect, or the connection broke.
    Unavailable,
    /// The store answered with an error, or an answer of the wrong shape.
    Protocol,
    /// The limit, the URL or the store kind cannot be used.
    Config,
}

impl StoreError {
    /// An error of this kind.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> StoreError {
        StoreError {
            kind,
            message: message.into(),
        }
    }
}

impl core::fmt::Display for StoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let k = match self.kind {
            StoreErrorKind::Timeout => "timeout",
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::Protocol => "protocol error",
            StoreErrorKind::Config => "configuration",
        };
        write!(f, "rate limit store {k}: {}", self.message)
    }
}

impl std::error::Error for StoreError {}

/// The store key of a descriptor: hash-tagged by route so one route's keys share a slot.
pub fn store_key(route: &str, digest: &str) -> String {
    format!("weir:{{{route}}}:{digest}")
}
