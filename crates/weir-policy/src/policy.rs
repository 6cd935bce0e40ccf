//! The compiled configuration: every value parsed, defaulted and checked once, so the
//! request path never touches text it could have prepared at load time.

pub use crate::accesslog::AccessLogTarget;
pub use crate::auth::{AuthPolicy, IdentityKind, IdentityPolicy};
pub use crate::breaker::BreakerPolicy;
pub use crate::concurrency::ConcurrencyPolicy;
use crate::dur::Dur;
pub use crate::quota::{Cost, QuotaPolicy, QuotaSettings, SyncPolicy};
pub use crate::ratelimit::{KeyPart, Mode, OnStoreError, RateLimitPolicy, Scope};
pub use crate::response::FallbackPolicy;
pub use crate::retry::{BackoffPolicy, BudgetPolicy, RetryPolicy};
pub use crate::secret::Secret;
pub use crate::store::{StoreConfig, StoreTls};
pub use crate::upstream::{Balance, OutlierPolicy, UpstreamSettings};
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `[server]` after defaults and CLI overrides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSettings {
    /// Main listening address.
    pub listen: SocketAddr,
    /// Admin API address; `None` when `admin = "off"`.
    pub admin: Option<SocketAddr>,
    /// Instance name (logs, metrics, `x-weir-instance`).
    pub instance: String,
    /// Worker threads; 0 = one per core.
    pub workers: usize,
    /// Request head size limit (→ 431).
    pub max_header_bytes: usize,
    /// Time allowed for a complete request head (→ 408).
    #[serde(serialize_with = "crate::dur::ser_duration")]
    pub header_timeout: Duration,
    /// Keep-alive / pooled-connection / body inactivity timeout.
    #[serde(serialize_with = "crate::dur::ser_duration")]
    pub idle_timeout: Duration,
    /// Connection limit per instance.
    pub max_connections: usize,
    /// How long SIGTERM waits for in-flight requests (`drain_timeout`, default 10s).
    #[serde(serialize_with = "crate::dur::ser_duration")]
    pub drain_timeout: Duration,
    /// Where the access log goes.
    pub log: AccessLogTarget,
    /// `admin_token_env`: the variable's name (never its value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token_env: Option<String>,
    /// SHA-256 of the admin token read from `admin_token_env` (compared in constant time).
    #[serde(skip)]
    pub admin_token_sha256: Option<[u8; 32]>,
    /// `admin_read_only`: every POST on the admin port is 405.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub admin_read_only: bool,
    /// `evidence_headers` (default true): responses carry `x-weir-instance` and
    /// `x-weir-attempts`. Off, they leave them out; the access log still has both.
    pub evidence_headers: bool,
    /// `trusted_proxies`: peers whose `Forwarded` / `X-Forwarded-For` name the client
    /// (empty: no header is believed; the TCP peer is the client).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl ServerSettings {
    /// An admin address that is not loopback needs an admin token (never an open admin
    /// port by accident).
    pub fn admin_exposed_without_token(&self) -> bool {
        self.admin
            .is_some_and(|a| !a.ip().is_loopback() && self.admin_token_sha256.is_none())
    }
}

/// `[routes.timeouts]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimeoutPolicy {
    /// The whole request until response headers.
    pub total: Dur,
    /// One attempt until its response headers.
    pub per_try: Dur,
    /// No retry starts with less budget left than this.
    pub min_try: Dur,
}

/// One compiled `[[routes]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutePolicy {
    /// Route id (metrics label, logs, `RateLimit` policy name).
    pub id: String,
    /// Path prefix matched against the path without query.
    pub path_prefix: String,
    /// Methods matched (uppercase); `None` = any.
    pub methods: Option<Vec<String>>,
    /// Upstream name.
    pub upstream: String,
    /// Auth (`[routes.auth]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthPolicy>,
    /// Rate limit.
    pub rate_limit: Option<RateLimitPolicy>,
    /// Quota (`[routes.quota]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaPolicy>,
    /// Concurrency limit.
    pub concurrency: Option<ConcurrencyPolicy>,
    /// Timeouts (defaults: total 30s, per_try = total).
    pub timeouts: TimeoutPolicy,
    /// Retries (default: 1 attempt).
    pub retry: RetryPolicy,
    /// Breaker.
    pub breaker: Option<BreakerPolicy>,
    /// Fallback response.
    pub fallback: Option<FallbackPolicy>,
}

impl RoutePolicy {
    /// Whether this route matches a method and a path (without query).
    pub fn matches(&self, method: &str, path: &str) -> bool {
        path.starts_with(self.path_prefix.as_str())
            && self
                .methods
                .as_ref()
                .is_none_or(|m| m.iter().any(|x| x.eq_ignore_ascii_case(method)))
    }
}

/// A whole compiled config file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicySet {
    /// Name used in errors (file path or given origin).
    pub origin: String,
    /// Server settings.
    pub server: Arc<ServerSettings>,
    /// Global store settings.
    pub store: Option<StoreConfig>,
    /// `[quota]` (defaults when absent).
    pub quota: QuotaSettings,
    /// Upstreams in file order.
    pub upstreams: Vec<Arc<UpstreamSettings>>,
    /// `[[identities]]` in file order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub identities: Vec<Arc<IdentityPolicy>>,
    /// Routes in file order (first match wins).
    pub routes: Vec<RoutePolicy>,
}

fn opt_addr(a: &Option<SocketAddr>) -> String {
    a.map_or_else(|| "off".to_string(), |a| a.to_string())
}

impl PolicySet {
    /// The upstream of this name.
    pub fn upstream(&self, name: &str) -> Option<&Arc<UpstreamSettings>> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The first route matching, with its index.
    pub fn route_for(&self, method: &str, path: &str) -> Option<(usize, &RoutePolicy)> {
        self.routes
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(method, path))
    }

    /// What `--check` prints: the routes and policies as understood.
    pub fn describe(&self) -> String {
        let s = &self.server;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{}: OK — {} route(s), {} upstream(s)",
            self.origin,
            self.routes.len(),
            self.upstreams.len()
        );
        let log = match &s.log {
            AccessLogTarget::Stdout => "stdout".to_string(),
            AccessLogTarget::File(p) => p.display().to_string(),
            AccessLogTarget::Off => "off".to_string(),
        };
        let _ = writeln!(
            o,
            "server: listen {}, admin {}, instance {:?}, workers {}, max_connections {}, access log {}",
            s.listen,
            opt_addr(&s.admin),
            s.instance,
            s.workers,
            s.max_connections,
            log
        );
        if !s.trusted_proxies.is_empty() {
            let nets: Vec<String> = s.trusted_proxies.iter().map(|n| n.to_string()).collect();
            let _ = writeln!(
                o,
                "client address: from Forwarded / X-Forwarded-For past trusted proxies [{}]",
                nets.join(", ")
            );
        }
        if let Some(st) = &self.store {
            let _ = writeln!(o, "store: {}", st.describe());
        }
        if self.routes.iter().any(|r| r.quota.is_some()) {
            let _ = writeln!(
                o,
                "quota: dir {}, sync {}",
                self.quota.dir.display(),
                match self.quota.sync {
                    SyncPolicy::Always => "always".to_string(),
                    SyncPolicy::Every(d) => Dur(d).to_string(),
                }
            );
        }
        for u in &self.upstreams {
            let eps: Vec<String> = u.endpoints.iter().map(|e| e.to_string()).collect();
            let _ = writeln!(
                o,
                "upstream {}: {} (connect timeout {})",
                u.name,
                eps.join(", "),
                Dur(u.connect_timeout)
            );
            let _ = writeln!(
                o,
                "  {}",
                crate::upstream::layer::describe(u.balance, u.outlier.as_ref())
            );
        }
        for i in &self.identities {
            let _ = writeln!(
                o,
                "identity {}: {}",
                i.name,
                crate::auth::layer::describe_identity(i)
            );
        }
        for r in &self.routes {
            let methods = r
                .methods
                .as_ref()
                .map_or_else(|| "any method".to_string(), |m| m.join("|"));
            let _ = writeln!(
                o,
                "route {}: {} {} -> {}",
                r.id, methods, r.path_prefix, r.upstream
            );
            if let Some(a) = &r.auth {
                let _ = writeln!(o, "  auth: {}", crate::auth::layer::describe(a));
            }
            if let Some(q) = &r.quota {
                let _ = writeln!(o, "  quota: {}", crate::quota::layer::describe(q));
            }
            if let Some(rl) = &r.rate_limit {
                let _ = writeln!(o, "  rate_limit: {}", crate::ratelimit::layer::describe(rl));
            }
            if let Some(c) = &r.concurrency {
                let _ = writeln!(
                    o,
                    "  concurrency: {}",
                    crate::concurrency::layer::describe(c)
                );
            }
            let t = &r.timeouts;
            let _ = writeln!(
                o,
                "  timeouts: total {}, per_try {}, min_try {}",
                t.total, t.per_try, t.min_try
            );
            let _ = writeln!(o, "  retry: {}", crate::retry::layer::describe(&r.retry));
            if let Some(b) = &r.breaker {
                let _ = writeln!(o, "  breaker: {}", crate::breaker::layer::describe(b));
            }
            if let Some(f) = &r.fallback {
                let _ = writeln!(
                    o,
                    "  fallback: {} {} ({} bytes)",
                    f.status,
                    f.content_type,
                    f.body.len()
                );
            }
        }
        o
    }
}

/// The quota's descriptor rules. Here rather than in `quota/layer.rs` (next to
/// `RateLimitPolicy`'s in `ratelimit/layer.rs`) only because quota/ is being rewritten
/// at the same time: it moves there with that rewrite.
impl crate::descriptor::KeyRules for QuotaPolicy {
    fn parts(&self) -> &[KeyPart] {
        &self.key
    }
    fn deny_empty_key(&self) -> bool {
        true
    }
    fn max_key_bytes(&self) -> u64 {
        crate::quota::layer::MAX_KEY_BYTES
    }
}
