//! The engine: the compiled policy set with its runtime state, reload, admin API.

use crate::accesslog::{AccessLog, AttemptRec, Record, now_rfc3339};
use crate::concurrency::ConcurrencyState;
use crate::config::raw::Scope;
use crate::config::{self, ConfigError};
use crate::flow::{Flow, RequestInfo};
use crate::glue::{self, BreakerState, SharedBreaker, SharedRetryBudget, Transition};
use crate::metrics::{Metrics, RouteMetrics};
use crate::policy::*;
use crate::response::{GatewayResponse, SimpleResponse, error_response};
use crate::store::{GlobalLimit, GlobalStore};
use crate::text::HeaderText;
use arc_swap::{ArcSwap, ArcSwapOption};
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use weir_core::{Clock, Nanos, QuantaClock};

/// CLI overrides applied on top of the file (and re-applied after every reload).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<String>,
    /// `--admin ADDR` (or `"off"`).
    pub admin: Option<String>,
    /// `--workers N`.
    pub workers: Option<usize>,
}

pub(crate) struct LimiterState {
    pub params: (Algorithm, u64),
    pub limiter: Box<dyn glue::KeyedLimiter>,
}

pub(crate) struct BreakerRuntime {
    pub params: BreakerPolicy,
    pub cfg: weir_core::BreakerConfig,
    pub core: SharedBreaker,
    /// The latest transition (for `/admin/breakers`).
    pub last: Mutex<Option<Transition>>,
}

pub(crate) struct BudgetState {
    pub cfg: weir_core::RetryBudgetConfig,
    pub core: SharedRetryBudget,
}

pub(crate) struct ConcState {
    pub max: u64,
    pub state: Arc<ConcurrencyState>,
}

/// A route with its runtime state.
pub(crate) struct RouteRuntime {
    pub policy: RoutePolicy,
    pub upstream: Arc<UpstreamSettings>,
    pub limiter: Option<Arc<LimiterState>>,
    pub global: Option<GlobalLimit>,
    pub concurrency: Option<Arc<ConcState>>,
    pub breaker: Option<Arc<BreakerRuntime>>,
    pub budget: Option<Arc<BudgetState>>,
    /// The retry backoff (core), built once.
    pub backoff: weir_core::Backoff,
    /// Metric handles with this route's labels, resolved once.
    pub metrics: RouteMetrics,
    pub rr: AtomicUsize,
    /// `"ROUTE";q=Q;w=W`, prepared once.
    pub ratelimit_policy: Option<HeaderText>,
}

/// One revision of the config with its state.
pub(crate) struct Live {
    pub revision: u64,
    pub set: Arc<PolicySet>,
    pub routes: Vec<Arc<RouteRuntime>>,
    /// `x-weir-instance`, prepared once.
    pub instance: HeaderText,
}

enum Source {
    File(PathBuf),
    Text(String, String),
}

pub(crate) struct Inner {
    pub live: ArcSwap<Live>,
    pub clock: Arc<dyn Clock + Send + Sync>,
    source: Source,
    overrides: Mutex<Overrides>,
    pub store: ArcSwapOption<Arc<dyn GlobalStore>>,
    pub metrics: Metrics,
    pub log: AccessLog,
    reload_lock: Mutex<()>,
    pub table_key: (u64, u64),
    pub seq: AtomicU64,
    /// Flows begun (seeds each flow's jitter generator).
    pub flows: AtomicU64,
    /// The engine's seed: request ids, breaker jitter, retry-backoff jitter.
    pub seed: u64,
}

/// The policy engine shared by every frontend thread. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl core::fmt::Debug for Engine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("revision", &self.revision())
            .finish_non_exhaustive()
    }
}

fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}

impl Engine {
    /// Reads, validates and compiles a config file. Errors name file, line, key.
    pub fn load(path: &Path) -> Result<Engine, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::plain(&origin, format!("cannot read: {e}")))?;
        let set = config::parse(&text, &origin)?;
        Self::build(
            set,
            Source::File(path.to_path_buf()),
            Arc::new(QuantaClock::new()),
            random_u64(),
        )
    }

    /// Same from text; `origin` is the name used in errors (e.g. `"demo.toml"`).
    /// `reload` re-reads nothing and keeps this text.
    pub fn from_toml(text: &str, origin: &str) -> Result<Engine, ConfigError> {
        Self::from_toml_with_clock(text, origin, Arc::new(QuantaClock::new()))
    }

    /// For tests and simulations: an engine on an injected clock (e.g. a `ManualClock`).
    #[doc(hidden)]
    pub fn from_toml_with_clock(
        text: &str,
        origin: &str,
        clock: Arc<dyn Clock + Send + Sync>,
    ) -> Result<Engine, ConfigError> {
        Self::from_toml_seeded(text, origin, clock, random_u64())
    }

    /// For tests and simulations: an injected clock and a fixed seed for every random
    /// choice the engine makes (backoff and cooldown jitter, breaker ramp, request ids), so
    /// a run is reproducible.
    #[doc(hidden)]
    pub fn from_toml_seeded(
        text: &str,
        origin: &str,
        clock: Arc<dyn Clock + Send + Sync>,
        seed: u64,
    ) -> Result<Engine, ConfigError> {
        let set = config::parse(text, origin)?;
        Self::build(
            set,
            Source::Text(text.to_string(), origin.to_string()),
            clock,
            seed,
        )
    }

    /// Only validates and compiles (what `--check` uses before printing
    /// [`PolicySet::describe`]); starts no log thread.
    pub fn check(path: &Path) -> Result<PolicySet, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::plain(&origin, format!("cannot read: {e}")))?;
        config::parse(&text, &origin)
    }

    fn build(
        set: PolicySet,
        source: Source,
        clock: Arc<dyn Clock + Send + Sync>,
        seed: u64,
    ) -> Result<Engine, ConfigError> {
        let log = AccessLog::start(&set.server.log).map_err(|e| {
            ConfigError::plain(&set.origin, format!("log.access: cannot open: {e}"))
        })?;
        let metrics = Metrics::new();
        metrics.touch_unrouted();
        let live = build_live(1, Arc::new(set), None, seed, &metrics);
        Ok(Engine {
            inner: Arc::new(Inner {
                live: ArcSwap::from_pointee(live),
                clock,
                source,
                overrides: Mutex::new(Overrides::default()),
                store: ArcSwapOption::empty(),
                metrics,
                log,
                reload_lock: Mutex::new(()),
                table_key: (random_u64(), random_u64()),
                seq: AtomicU64::new(0),
                flows: AtomicU64::new(0),
                seed,
            }),
        })
    }

    /// Overrides from the CLI applied on top of the file (and after every reload).
    /// An invalid address is reported on stderr and ignored; use
    /// [`Engine::try_with_overrides`] to get the error instead.
    pub fn with_overrides(self, o: Overrides) -> Engine {
        match self.clone().try_with_overrides(o) {
            Ok(e) => e,
            Err(err) => {
                eprintln!("weir: ignoring override: {err}");
                self
            }
        }
    }

    /// [`Engine::with_overrides`], failing on an invalid address.
    pub fn try_with_overrides(self, o: Overrides) -> Result<Engine, ConfigError> {
        let cur = self.inner.live.load_full();
        let server = apply_overrides(&cur.set.server, &o)?;
        let mut set = (*cur.set).clone();
        set.server = Arc::new(server);
        *self
            .inner
            .overrides
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = o;
        self.inner.live.store(Arc::new(Live {
            revision: cur.revision,
            instance: HeaderText::from(set.server.instance.clone()),
            set: Arc::new(set),
            routes: cur.routes.clone(),
        }));
        Ok(self)
    }

    /// Installs the global store used by routes with `scope = "global"`.
    pub fn with_store(self, store: Arc<dyn GlobalStore>) -> Engine {
        self.inner.store.store(Some(Arc::new(store)));
        self
    }

    /// The `[store]` section, for the store implementation to connect.
    pub fn store_config(&self) -> Option<StoreConfig> {
        self.inner.live.load().set.store.clone()
    }

    /// Server settings after overrides.
    pub fn server(&self) -> Arc<ServerSettings> {
        self.inner.live.load().set.server.clone()
    }

    /// An upstream by name.
    pub fn upstream(&self, name: &str) -> Option<Arc<UpstreamSettings>> {
        self.inner.live.load().set.upstream(name).cloned()
    }

    /// The compiled set now serving.
    pub fn policy_set(&self) -> Arc<PolicySet> {
        self.inner.live.load().set.clone()
    }

    /// What `--check` prints.
    pub fn describe(&self) -> String {
        self.inner.live.load().set.describe()
    }

    /// The config revision (1 at start, +1 per successful reload).
    pub fn revision(&self) -> u64 {
        self.inner.live.load().revision
    }

    /// The engine's clock.
    pub fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    /// Access-log records dropped because the log queue was full.
    pub fn access_log_dropped(&self) -> u64 {
        self.inner.log.dropped.load(Ordering::Relaxed)
    }

    /// Blocks until the access-log records sent so far are written.
    pub fn flush_access_log(&self) {
        self.inner.log.flush();
    }

    /// Prometheus text of every family.
    pub fn metrics_text(&self) -> String {
        self.refresh_breaker_gauges();
        self.inner.metrics.render()
    }

    /// Re-reads the file (or the original text) and swaps the set atomically, keeping the
    /// state of every policy whose route id and parameters are unchanged. On error the old
    /// set keeps serving.
    pub fn reload(&self) -> Result<u64, ConfigError> {
        let set = match &self.inner.source {
            Source::File(p) => {
                let origin = p.display().to_string();
                let text = std::fs::read_to_string(p)
                    .map_err(|e| ConfigError::plain(&origin, format!("cannot read: {e}")))?;
                config::parse(&text, &origin)?
            }
            Source::Text(t, o) => config::parse(t, o)?,
        };
        self.install(set)
    }

    /// Replaces the set with a new config text (tests, embedding). Same rules as reload.
    #[doc(hidden)]
    pub fn reload_from_toml(&self, text: &str, origin: &str) -> Result<u64, ConfigError> {
        let set = config::parse(text, origin)?;
        self.install(set)
    }

    fn install(&self, mut set: PolicySet) -> Result<u64, ConfigError> {
        let _g = self
            .inner
            .reload_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let o = self
            .inner
            .overrides
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        set.server = Arc::new(apply_overrides(&set.server, &o)?);
        let old = self.inner.live.load_full();
        let rev = old.revision + 1;
        let live = build_live(
            rev,
            Arc::new(set),
            Some(&old),
            self.inner.seed,
            &self.inner.metrics,
        );
        self.inner.live.store(Arc::new(live));
        Ok(rev)
    }

    /// Starts one request: route match, descriptor, request id, deadline start.
    pub fn begin(&self, req: &RequestInfo<'_>) -> Flow {
        Flow::begin(self.inner.clone(), req)
    }

    /// For responses the frontend makes before a request is understood
    /// (400/408/414/431/505): counted under route `-` and logged.
    pub fn reject_malformed(
        &self,
        status: u16,
        reason: &'static str,
        request_id: Option<&str>,
    ) -> GatewayResponse {
        let inner = &self.inner;
        let live = inner.live.load();
        let rid = request_id
            .and_then(|r| crate::response::acceptable_request_id(r.as_bytes()))
            .map(str::to_string)
            .unwrap_or_else(|| inner.new_request_id());
        let instance = &live.set.server.instance;
        inner.metrics.count_request("-", reason);
        inner.log.write(&Record {
            ts: now_rfc3339(),
            request_id: rid.clone(),
            instance: instance.clone(),
            route: "-".into(),
            method: String::new(),
            path: String::new(),
            status,
            reason: Some(reason),
            key_digest: None,
            scope: None,
            remaining: None,
            attempts: Vec::<AttemptRec>::new(),
            queue_ms: 0,
            duration_ms: 0,
            revision: live.revision,
            shadow: None,
            ratelimit: None,
            error: None,
        });
        error_response(status, reason, "-", instance, &rid, &[])
    }

    fn refresh_breaker_gauges(&self) {
        let live = self.inner.live.load();
        let now = self.now();
        for r in &live.routes {
            if let Some(b) = &r.breaker {
                self.inner.observe_breaker(r, b, now);
            }
        }
    }

    /// The admin API of CONTRACT §4: `/metrics`, `/healthz`, `/admin/config`,
    /// `/admin/reload`, `/admin/breakers`; 405 for other methods there, 404 elsewhere.
    pub fn admin(&self, method: &str, path: &str) -> SimpleResponse {
        let path = path.split('?').next().unwrap_or(path);
        let (allowed, known) = match path {
            "/metrics" | "/healthz" | "/admin/config" | "/admin/breakers" => ("GET", true),
            "/admin/reload" => ("POST", true),
            _ => ("", false),
        };
        if !known {
            return GatewayResponse::json(
                404,
                &serde_json::json!({"error": "not_found", "path": path}),
            );
        }
        let method_ok = method == allowed || (allowed == "GET" && method == "HEAD");
        if !method_ok {
            let mut r = GatewayResponse::json(
                405,
                &serde_json::json!({"error": "method_not_allowed", "allow": allowed}),
            );
            r.headers.push((
                "allow",
                if allowed == "GET" {
                    "GET, HEAD".to_string()
                } else {
                    allowed.to_string()
                },
            ));
            return r;
        }
        match path {
            "/metrics" => GatewayResponse::text(
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                self.metrics_text(),
            ),
            "/healthz" => {
                let live = self.inner.live.load();
                GatewayResponse::json(
                    200,
                    &serde_json::json!({"status": "ok", "instance": live.set.server.instance, "revision": live.revision}),
                )
            }
            "/admin/config" => {
                let live = self.inner.live.load();
                let mut v = serde_json::to_value(&*live.set).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("revision".into(), live.revision.into());
                }
                GatewayResponse::json(200, &v)
            }
            "/admin/breakers" => {
                let live = self.inner.live.load();
                let now = self.now();
                let list: Vec<serde_json::Value> = live
                    .routes
                    .iter()
                    .filter_map(|r| {
                        let b = r.breaker.as_ref()?;
                        let st = self.inner.observe_breaker(r, b, now);
                        Some(breaker_json(r, b, st, now))
                    })
                    .collect();
                GatewayResponse::json(
                    200,
                    &serde_json::json!({"revision": live.revision, "breakers": list}),
                )
            }
            "/admin/reload" => match self.reload() {
                Ok(rev) => GatewayResponse::json(200, &serde_json::json!({"revision": rev})),
                Err(e) => GatewayResponse::json(
                    400,
                    &serde_json::json!({"error": e.to_string(), "revision": self.revision()}),
                ),
            },
            _ => GatewayResponse::json(404, &serde_json::json!({"error": "not_found"})),
        }
    }
}

impl Inner {
    pub(crate) fn new_request_id(&self) -> String {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut r = weir_core::SplitMix64::new(self.seed ^ n.rotate_left(17));
        use weir_core::Rng;
        let id = crate::descriptor::push_hex(String::with_capacity(32), r.next_u64().into(), 16);
        crate::descriptor::push_hex(id, (n ^ self.seed).into(), 16)
    }

    /// Reads the breaker's state, counting any transitions into the metrics.
    pub(crate) fn breaker_transition(
        &self,
        route: &RouteRuntime,
        b: &BreakerRuntime,
        t: Option<Transition>,
        now: Nanos,
    ) {
        if let Some(t) = t {
            route.metrics.transition(t.from, t.to);
            *b.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        }
        self.observe_breaker(route, b, now);
    }

    /// Reads the breaker's state into the gauge.
    pub(crate) fn observe_breaker(
        &self,
        route: &RouteRuntime,
        b: &BreakerRuntime,
        now: Nanos,
    ) -> BreakerState {
        let st = b.core.state(now);
        if let Some(g) = &route.metrics.breaker_state {
            g.set(i64::from(st.as_gauge()));
        }
        st
    }
}

/// One entry of `/admin/breakers`.
fn breaker_json(
    r: &RouteRuntime,
    b: &BreakerRuntime,
    st: BreakerState,
    now: Nanos,
) -> serde_json::Value {
    let p = &b.params;
    let last = *b.last.lock().unwrap_or_else(|p| p.into_inner());
    serde_json::json!({
        "route": r.policy.id,
        "state": st.as_str(),
        "gauge": st.as_gauge(),
        "failed_recoveries": b.core.failed_recoveries(),
        "probes_in_flight": b.core.probes_in_flight(),
        "last_transition": last.map(|t| serde_json::json!({
            "from": t.from.as_str(),
            "to": t.to.as_str(),
            "ago_ms": now.saturating_sub(t.at).as_millis(),
        })),
        "config": {
            "failure_on": p.failure_on.names,
            "consecutive_failures": p.consecutive_failures,
            "failure_rate": p.failure_rate,
            "window": p.window,
            "min_calls": p.min_calls,
            "slow_call": p.slow_call,
            "slow_call_rate": p.slow_call_rate,
            "cooldown": {
                "base": p.cooldown_base,
                "max": p.cooldown_max,
                "multiplier": p.cooldown_multiplier,
                "jitter": p.cooldown_jitter,
            },
            "half_open": {"probes": p.probes, "successes": p.successes},
            "ramp": p.ramp,
            "probe_timeout": crate::config::raw::Dur(b.cfg.probe_timeout.into()),
        },
    })
}

fn apply_overrides(s: &ServerSettings, o: &Overrides) -> Result<ServerSettings, ConfigError> {
    let mut s = s.clone();
    if let Some(l) = &o.listen {
        s.listen = l
            .parse()
            .map_err(|_| ConfigError::plain("--listen", format!("invalid address {l:?}")))?;
    }
    if let Some(a) = &o.admin {
        s.admin = if a == "off" {
            None
        } else {
            Some(
                a.parse()
                    .map_err(|_| ConfigError::plain("--admin", format!("invalid address {a:?}")))?,
            )
        };
    }
    if let Some(w) = o.workers {
        s.workers = w;
    }
    Ok(s)
}

fn build_live(
    revision: u64,
    set: Arc<PolicySet>,
    old: Option<&Live>,
    seed: u64,
    metrics: &Metrics,
) -> Live {
    let mut routes = Vec::with_capacity(set.routes.len());
    for (i, p) in set.routes.iter().enumerate() {
        let prev = old.and_then(|o| o.routes.iter().find(|r| r.policy.id == p.id));
        let upstream = set
            .upstream(&p.upstream)
            .cloned()
            .expect("validated: route upstream exists");
        let (limiter, global, ratelimit_policy) = match &p.rate_limit {
            Some(rl) => {
                let (q, w) = rl.algorithm.quota_window();
                let hdr = Some(HeaderText::from(format!("\"{}\";q={q};w={w}", p.id)));
                match rl.scope {
                    Scope::Local => {
                        let params = (rl.algorithm, rl.max_keys);
                        let kept = prev
                            .and_then(|r| r.limiter.as_ref())
                            .filter(|l| l.params == params)
                            .cloned();
                        let l = kept.or_else(|| {
                            Some(Arc::new(LimiterState {
                                params,
                                limiter: glue::keyed_limiter(&rl.algorithm, rl.max_keys)?,
                            }))
                        });
                        (l, None, hdr)
                    }
                    Scope::Global => (None, Some(GlobalLimit::from(&rl.algorithm)), hdr),
                }
            }
            None => (None, None, None),
        };
        let concurrency = p.concurrency.as_ref().map(|c| {
            prev.and_then(|r| r.concurrency.as_ref())
                .filter(|s| s.max == c.max)
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(ConcState {
                        max: c.max,
                        state: ConcurrencyState::new(c.max),
                    })
                })
        });
        let total = Nanos::from(p.timeouts.total.0);
        let breaker = p.breaker.as_ref().map(|b| {
            // Validated at config time (glue::breaker_config via the compiler).
            let cfg = glue::breaker_config(b, total).expect("validated breaker");
            prev.and_then(|r| r.breaker.as_ref())
                .filter(|s| s.params == *b && s.cfg == cfg)
                .cloned()
                .unwrap_or_else(|| {
                    let seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    Arc::new(BreakerRuntime {
                        params: b.clone(),
                        cfg,
                        core: SharedBreaker::new(cfg, seed).expect("validated breaker"),
                        last: Mutex::new(None),
                    })
                })
        });
        let budget = (p.retry.max_attempts > 1).then(|| {
            let cfg = glue::budget_config(&p.retry.budget).expect("validated budget");
            prev.and_then(|r| r.budget.as_ref())
                .filter(|s| s.cfg == cfg)
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(BudgetState {
                        cfg,
                        core: SharedRetryBudget::new(cfg),
                    })
                })
        });
        let backoff = glue::backoff(&p.retry.backoff).expect("validated backoff");
        let route_metrics = metrics.for_route(&p.id, breaker.is_some());
        routes.push(Arc::new(RouteRuntime {
            policy: p.clone(),
            upstream,
            limiter,
            global,
            concurrency,
            breaker,
            budget,
            backoff,
            metrics: route_metrics,
            rr: AtomicUsize::new(prev.map_or(0, |r| r.rr.load(Ordering::Relaxed))),
            ratelimit_policy,
        }));
    }
    Live {
        revision,
        instance: HeaderText::from(set.server.instance.clone()),
        set,
        routes,
    }
}
