//! The compiled configuration: every value parsed, defaulted and checked once, so the
//! request path never touches text it could have prepared at load time.

use crate::config::raw::{AlgorithmKind, Dur, Jitter, Mode, OnStoreError, Scope};
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
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
    #[serde(serialize_with = "ser_dur")]
    pub header_timeout: Duration,
    /// Keep-alive / pooled-connection / body inactivity timeout.
    #[serde(serialize_with = "ser_dur")]
    pub idle_timeout: Duration,
    /// Connection limit per instance.
    pub max_connections: usize,
    /// How long SIGTERM waits for in-flight requests (`drain_timeout`, default 10s).
    #[serde(serialize_with = "ser_dur")]
    pub drain_timeout: Duration,
    /// Where the access log goes.
    pub log: AccessLogTarget,
}

/// `[log] access`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogTarget {
    /// One JSON line per request on standard output (the default).
    Stdout,
    /// Appended to this file.
    File(PathBuf),
    /// No access log.
    Off,
}

/// One `[[upstreams]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamSettings {
    /// Name routes refer to.
    pub name: String,
    /// Endpoints, used round robin.
    pub endpoints: Vec<SocketAddr>,
    /// `connect_timeout_ms` (default 1000).
    #[serde(serialize_with = "ser_dur")]
    pub connect_timeout: Duration,
}

/// `[store]`: what the global-store implementation connects to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    /// Store kind (`"redis"`).
    pub kind: String,
    /// Connection URL.
    pub url: String,
    /// How long the engine waits for one answer (`timeout_ms`, default 100).
    #[serde(serialize_with = "ser_dur")]
    pub timeout: Duration,
    /// Tokens an instance may prefetch per key (0 = ask every time).
    pub lease: u64,
}

/// A limiter's algorithm and numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "algorithm", rename_all = "snake_case")]
pub enum Algorithm {
    /// GCRA token bucket.
    TokenBucket {
        /// Admissions per `per`.
        rate: u64,
        /// Period of `rate`.
        per: Dur,
        /// Bucket size.
        burst: u64,
    },
    /// nginx `limit_req`.
    LeakyBucket {
        /// Admissions per `per`.
        rate: u64,
        /// Period of `rate`.
        per: Dur,
        /// Excess requests that may queue.
        burst: u64,
        /// Excess passed without delay.
        delay: u64,
        /// Pass all of `burst` without delay.
        nodelay: bool,
    },
    /// Fixed window counter.
    FixedWindow {
        /// Admissions per window.
        limit: u64,
        /// Window length.
        window: Dur,
    },
    /// Sliding window counter.
    SlidingWindow {
        /// Admissions per window.
        limit: u64,
        /// Window length.
        window: Dur,
    },
    /// Exact sliding log.
    SlidingLog {
        /// Admissions per window.
        limit: u64,
        /// Window length.
        window: Dur,
    },
}

impl Algorithm {
    /// The config name.
    pub fn kind(&self) -> AlgorithmKind {
        match self {
            Algorithm::TokenBucket { .. } => AlgorithmKind::TokenBucket,
            Algorithm::LeakyBucket { .. } => AlgorithmKind::LeakyBucket,
            Algorithm::FixedWindow { .. } => AlgorithmKind::FixedWindow,
            Algorithm::SlidingWindow { .. } => AlgorithmKind::SlidingWindow,
            Algorithm::SlidingLog { .. } => AlgorithmKind::SlidingLog,
        }
    }
    /// `(Q, W)` of the `RateLimit-Policy` field: quota and window in whole seconds (≥ 1).
    pub fn quota_window(&self) -> (u64, u64) {
        let (q, w) = match *self {
            Algorithm::TokenBucket { rate, per, .. } | Algorithm::LeakyBucket { rate, per, .. } => {
                (rate, per.0)
            }
            Algorithm::FixedWindow { limit, window }
            | Algorithm::SlidingWindow { limit, window }
            | Algorithm::SlidingLog { limit, window } => (limit, window.0),
        };
        (q, secs_ceil(w).max(1))
    }
}

pub(crate) fn secs_ceil(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000_000_000).min(u64::MAX as u128) as u64
}

/// One part of a rate-limit descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// The route id.
    Route,
    /// The request method.
    Method,
    /// A request header (name lowercased); empty = missing.
    Header(String),
    /// The client's IP address.
    ClientIp,
}

impl core::fmt::Display for KeyPart {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyPart::Route => f.write_str("route"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Header(h) => write!(f, "header:{h}"),
            KeyPart::ClientIp => f.write_str("client_ip"),
        }
    }
}

impl Serialize for KeyPart {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `[routes.rate_limit]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimitPolicy {
    /// Algorithm and numbers.
    #[serde(flatten)]
    pub algorithm: Algorithm,
    /// Descriptor parts.
    pub key: Vec<KeyPart>,
    /// Missing part → 403 `empty_key` (else the part counts as an empty string).
    pub deny_empty_key: bool,
    /// Local or global state.
    pub scope: Scope,
    /// Global scope: deny or allow when the store fails.
    pub on_store_error: OnStoreError,
    /// Enforce or shadow.
    pub mode: Mode,
    /// Bound on local keyed state.
    pub max_keys: u64,
    /// Longest key part in bytes (→ 400 `key_too_long`).
    pub max_key_bytes: u64,
}

/// `[routes.concurrency]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConcurrencyPolicy {
    /// Permits.
    pub max: u64,
    /// Waiting requests allowed (0 = reject at once).
    pub queue: u64,
    /// Longest wait in the queue (default: the route's total timeout).
    pub queue_timeout: Dur,
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

/// Attempt results a list like `on` / `failure_on` can name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ResultSet {
    /// The list as written.
    pub names: Vec<String>,
    #[serde(skip)]
    pub(crate) connect_failure: bool,
    #[serde(skip)]
    pub(crate) reset: bool,
    #[serde(skip)]
    pub(crate) protocol_error: bool,
    #[serde(skip)]
    pub(crate) timeout: bool,
    #[serde(skip)]
    pub(crate) any_5xx: bool,
    #[serde(skip)]
    pub(crate) statuses: Vec<u16>,
}

impl ResultSet {
    /// Parses one list; `Err(entry)` names the first entry that is not understood.
    pub(crate) fn parse(names: &[String]) -> Result<ResultSet, String> {
        let mut s = ResultSet {
            names: names.to_vec(),
            ..ResultSet::default()
        };
        for n in names {
            match n.as_str() {
                "connect_failure" => s.connect_failure = true,
                "reset" => s.reset = true,
                "protocol_error" => s.protocol_error = true,
                "per_try_timeout" | "timeout" => s.timeout = true,
                "5xx" => s.any_5xx = true,
                code => match code.parse::<u16>() {
                    Ok(c) if (100..=599).contains(&c) && code.len() == 3 => s.statuses.push(c),
                    _ => return Err(n.clone()),
                },
            }
        }
        Ok(s)
    }

    pub(crate) fn matches(&self, r: &crate::flow::AttemptResult) -> bool {
        use crate::flow::AttemptResult as R;
        match *r {
            R::Response { status } => {
                (self.any_5xx && (500..=599).contains(&status)) || self.statuses.contains(&status)
            }
            R::ConnectFailure => self.connect_failure,
            R::Reset => self.reset,
            R::ProtocolError => self.protocol_error,
            R::PerTryTimeout => self.timeout,
        }
    }
}

/// `[routes.retry]` (a route without it has `max_attempts = 1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryPolicy {
    /// Attempts including the first.
    pub max_attempts: u32,
    /// Retryable results.
    pub on: ResultSet,
    /// A non-empty header of this name makes any method retryable (lowercase).
    pub idempotency_header: String,
    /// Methods retried without an idempotency key.
    pub methods: Vec<String>,
    /// Backoff between attempts.
    pub backoff: BackoffPolicy,
    /// Retry budget.
    pub budget: BudgetPolicy,
    /// Larger (or chunked) request bodies are never retried (default 65536).
    pub max_replay_bytes: u64,
}

/// `backoff = { base, max, jitter }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackoffPolicy {
    /// First retry's delay.
    pub base: Dur,
    /// Cap.
    pub max: Dur,
    /// Jitter kind.
    pub jitter: Jitter,
}

/// `budget = { ratio, min_per_sec, ttl }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BudgetPolicy {
    /// Retries per request.
    pub ratio: f64,
    /// Reserve of retries per second.
    pub min_per_sec: u64,
    /// How long a deposit counts.
    pub ttl: Dur,
}

/// `[routes.breaker]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerPolicy {
    /// Results counted as failures.
    pub failure_on: ResultSet,
    /// Trip after this many consecutive failures.
    pub consecutive_failures: Option<u32>,
    /// Trip when the failure rate in the window reaches this.
    pub failure_rate: Option<f64>,
    /// Calls in the rate window.
    pub window: u32,
    /// Calls needed before a rate trips.
    pub min_calls: u32,
    /// A call slower than this is slow.
    pub slow_call: Option<Dur>,
    /// Trip when the slow-call rate reaches this.
    pub slow_call_rate: Option<f64>,
    /// First OPEN period.
    pub cooldown_base: Dur,
    /// Longest OPEN period.
    pub cooldown_max: Dur,
    /// Growth per failed recovery.
    pub cooldown_multiplier: f64,
    /// Relative jitter of the OPEN period.
    pub cooldown_jitter: f64,
    /// Probes admitted in HALF_OPEN.
    pub probes: u32,
    /// Successful probes needed to close.
    pub successes: u32,
    /// Gradual re-admission after closing.
    pub ramp: Dur,
}

/// `[routes.fallback]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FallbackPolicy {
    /// Status of the degraded response.
    pub status: u16,
    /// Its content type.
    pub content_type: String,
    /// Its body.
    pub body: String,
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
    /// Rate limit.
    pub rate_limit: Option<RateLimitPolicy>,
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
    /// Upstreams in file order.
    pub upstreams: Vec<Arc<UpstreamSettings>>,
    /// Routes in file order (first match wins).
    pub routes: Vec<RoutePolicy>,
}

fn ser_dur<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    Dur(*d).serialize(s)
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
        if let Some(st) = &self.store {
            let _ = writeln!(
                o,
                "store: {} {} (timeout {}, lease {})",
                st.kind,
                st.url,
                Dur(st.timeout),
                st.lease
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
            if let Some(rl) = &r.rate_limit {
                let alg = match rl.algorithm {
                    Algorithm::TokenBucket { rate, per, burst } => {
                        format!("token_bucket {rate} per {per}, burst {burst}")
                    }
                    Algorithm::LeakyBucket {
                        rate,
                        per,
                        burst,
                        delay,
                        nodelay,
                    } => format!(
                        "leaky_bucket {rate} per {per}, burst {burst}, {}",
                        if nodelay {
                            "nodelay".to_string()
                        } else {
                            format!("delay {delay}")
                        }
                    ),
                    Algorithm::FixedWindow { limit, window } => {
                        format!("fixed_window {limit} per {window}")
                    }
                    Algorithm::SlidingWindow { limit, window } => {
                        format!("sliding_window {limit} per {window}")
                    }
                    Algorithm::SlidingLog { limit, window } => {
                        format!("sliding_log {limit} per {window}")
                    }
                };
                let key: Vec<String> = rl.key.iter().map(|k| k.to_string()).collect();
                let _ = writeln!(
                    o,
                    "  rate_limit: {alg}; key [{}]{}; scope {:?}{}; mode {:?}; max_keys {}, max_key_bytes {}",
                    key.join(", "),
                    if rl.deny_empty_key {
                        ", empty key -> 403"
                    } else {
                        ""
                    },
                    rl.scope,
                    if rl.scope == Scope::Global {
                        format!(", on_store_error {:?}", rl.on_store_error)
                    } else {
                        String::new()
                    },
                    rl.mode,
                    rl.max_keys,
                    rl.max_key_bytes
                );
            }
            if let Some(c) = &r.concurrency {
                let _ = writeln!(
                    o,
                    "  concurrency: max {}, queue {}, queue_timeout {}",
                    c.max, c.queue, c.queue_timeout
                );
            }
            let t = &r.timeouts;
            let _ = writeln!(
                o,
                "  timeouts: total {}, per_try {}, min_try {}",
                t.total, t.per_try, t.min_try
            );
            let rt = &r.retry;
            if rt.max_attempts <= 1 {
                let _ = writeln!(o, "  retry: none (1 attempt)");
            } else {
                let _ = writeln!(
                    o,
                    "  retry: {} attempts on [{}]; idempotent: {} or header {}; backoff {}..{} jitter {:?}; budget ratio {} + {}/s over {}; max_replay_bytes {}",
                    rt.max_attempts,
                    rt.on.names.join(", "),
                    rt.methods.join("|"),
                    rt.idempotency_header,
                    rt.backoff.base,
                    rt.backoff.max,
                    rt.backoff.jitter,
                    rt.budget.ratio,
                    rt.budget.min_per_sec,
                    rt.budget.ttl,
                    rt.max_replay_bytes
                );
            }
            if let Some(b) = &r.breaker {
                let mut trips = Vec::new();
                if let Some(n) = b.consecutive_failures {
                    trips.push(format!("{n} consecutive failures"));
                }
                if let Some(fr) = b.failure_rate {
                    trips.push(format!(
                        "failure rate {fr} over {} calls (min {})",
                        b.window, b.min_calls
                    ));
                }
                if let (Some(sc), Some(sr)) = (b.slow_call, b.slow_call_rate) {
                    trips.push(format!("slow-call rate {sr} (slower than {sc})"));
                }
                let _ = writeln!(
                    o,
                    "  breaker: failure_on [{}]; trips on {}; cooldown {}..{} x{} jitter {}; half_open {} probes / {} successes; ramp {}",
                    b.failure_on.names.join(", "),
                    trips.join(" or "),
                    b.cooldown_base,
                    b.cooldown_max,
                    b.cooldown_multiplier,
                    b.cooldown_jitter,
                    b.probes,
                    b.successes,
                    b.ramp
                );
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
