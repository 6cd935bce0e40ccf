//! The engine: loading and reloading the config ([`Engine`]), the global store's
//! lifetime (a [`StoreFactory`] given once) and CLI [`Overrides`]; the admin API is in
//! `admin.rs` (`impl Engine` there: it uses this file, this file does not use it). The
//! runtime state a request reads lives in [`crate::runtime`].

mod admin;
mod history;
mod overrides;

pub use history::RollbackError;
pub use overrides::Overrides;

use crate::accesslog::AccessLog;
use crate::check::ConfigError;
use crate::config;
use crate::flow::{Flow, RequestInfo};
use crate::metrics::Metrics;
use crate::policy::*;
use crate::quota::service::open_ledgers;
use crate::runtime::{Live, Shared};
use crate::store::GlobalStore;
use crate::wall::WallClock;
use arc_swap::{ArcSwap, ArcSwapOption};
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_core::{Clock, Nanos, QuantaClock};

/// Makes the global store of a `[store]` section (e.g. `weir_redis::attach` installs
/// Redis'). Given once with [`Engine::with_store_factory`]; the engine calls it at once
/// and again after every reload whose `[store]` changed. An `Err` is a message.
pub type StoreFactory =
    Arc<dyn Fn(&StoreConfig) -> Result<Arc<dyn GlobalStore>, String> + Send + Sync>;

enum Source {
    File(PathBuf),
    Text(String, String),
}

/// What only loading and reloading touch.
struct Control {
    source: Source,
    overrides: Overrides,
    factory: Option<StoreFactory>,
    /// What the engine had to say since the last [`Engine::take_notices`].
    notices: Vec<String>,
    /// The last good revisions, for `GET /admin/config` and rollback.
    history: history::History,
}

struct Inner {
    shared: Arc<Shared>,
    /// Held for a whole reload, so reloads do not interleave.
    control: Mutex<Control>,
}

/// The policy engine shared by every frontend thread. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
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

fn read(path: &Path) -> Result<(String, String), ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::plain(&origin, format!("cannot read: {e}")))?;
    Ok((text, origin))
}

impl Engine {
    /// Reads, validates and compiles a config file. Errors name file, line, key.
    pub fn load(path: &Path) -> Result<Engine, ConfigError> {
        let (text, origin) = read(path)?;
        let set = config::parse(&text, &origin)?;
        Self::build(
            set,
            &text,
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
            text,
            Source::Text(text.to_string(), origin.to_string()),
            clock,
            seed,
        )
    }

    /// For a simulator (the `weir-sim` crate): an engine on `clock` whose every random
    /// choice, the keyed tables' hash key included, follows `seed`, with no access log (the
    /// simulator reports each request itself) and bare responses (the simulator reads
    /// their status only: no headers, bodies or request ids are built). Every decision is
    /// the one [`Engine::from_toml_seeded`] would take; only what a client would see of it
    /// beyond the status, and the log line, are left out.
    ///
    /// Public because the simulator lives in a crate of its own above this one; it is the
    /// only engine constructor that crate needs. Not for a frontend: its responses have no
    /// headers or bodies.
    ///
    /// `unix_start` is the wall time (since the Unix epoch) at `clock`'s current reading:
    /// the simulated calendar moves with `clock`, so quota periods, token expiry and bypass
    /// episodes follow simulated time.
    pub fn for_simulation(
        text: &str,
        origin: &str,
        clock: Arc<dyn Clock + Send + Sync>,
        unix_start: core::time::Duration,
        seed: u64,
    ) -> Result<Engine, ConfigError> {
        let mut set = config::parse(text, origin)?;
        let mut server = (*set.server).clone();
        server.log = AccessLogTarget::Off;
        set.server = Arc::new(server);
        let source = Source::Text(text.to_string(), origin.to_string());
        let mut k = weir_core::SplitMix64::new(seed);
        use weir_core::Rng;
        let key = (k.next_u64(), k.next_u64());
        let clock = WallClock::starting_at(clock, unix_start);
        Self::build_keyed(set, text, source, clock, seed, key, true)
    }

    /// Only validates and compiles (what `--check` uses before printing
    /// [`PolicySet::describe`]); starts no log thread.
    pub fn check(path: &Path) -> Result<PolicySet, ConfigError> {
        let (text, origin) = read(path)?;
        config::parse(&text, &origin)
    }

    fn build(
        set: PolicySet,
        text: &str,
        source: Source,
        clock: Arc<dyn Clock + Send + Sync>,
        seed: u64,
    ) -> Result<Engine, ConfigError> {
        Self::build_keyed(
            set,
            text,
            source,
            WallClock::anchored(clock),
            seed,
            (random_u64(), random_u64()),
            false,
        )
    }

    /// [`Engine::build`] with the keyed tables' hash key given; `bare`: responses carry
    /// their status only (a simulation, [`Shared::bare`]).
    fn build_keyed(
        set: PolicySet,
        text: &str,
        source: Source,
        clock: WallClock,
        seed: u64,
        table_key: (u64, u64),
        bare: bool,
    ) -> Result<Engine, ConfigError> {
        let metrics = Metrics::new();
        let log = AccessLog::start(&set.server.log, metrics.log_dropped.clone()).map_err(|e| {
            ConfigError::plain(&set.origin, format!("log.access: cannot open: {e}"))
        })?;
        let (ledgers, notices) = open_ledgers(&set, None, clock.unix_secs())
            .map_err(|e| ConfigError::plain(&set.origin, e))?;
        metrics.touch_unrouted();
        let mut history = history::History::default();
        history.push(1, text, &set.origin, clock.unix_millis());
        let live = Live::build(1, Arc::new(set), None, seed, &metrics, ledgers);
        Ok(Engine {
            inner: Arc::new(Inner {
                shared: Arc::new(Shared {
                    live: ArcSwap::from_pointee(live),
                    clock,
                    store: ArcSwapOption::empty(),
                    metrics,
                    log,
                    table_key,
                    seq: AtomicU64::new(0),
                    flows: AtomicU64::new(0),
                    seed,
                    bare,
                }),
                control: Mutex::new(Control {
                    source,
                    overrides: Overrides::default(),
                    factory: None,
                    notices,
                    history,
                }),
            }),
        })
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        self.inner.control.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self) -> arc_swap::Guard<Arc<Live>> {
        self.inner.shared.live.load()
    }

    /// Overrides from the CLI applied on top of the file (and after every reload).
    /// An invalid address leaves the engine as it was and comes back as the warning;
    /// use [`Engine::try_with_overrides`] to fail instead.
    pub fn with_overrides(self, o: Overrides) -> (Engine, Option<ConfigError>) {
        match self.clone().try_with_overrides(o) {
            Ok(e) => (e, None),
            Err(err) => (self, Some(err)),
        }
    }

    /// [`Engine::with_overrides`], failing on an invalid address.
    pub fn try_with_overrides(self, o: Overrides) -> Result<Engine, ConfigError> {
        let cur = self.inner.shared.live.load_full();
        let mut set = (*cur.set).clone();
        set.server = Arc::new(overrides::apply(&cur.set.server, &o)?);
        self.control().overrides = o;
        let (instance, instance_json) = crate::runtime::instance_texts(&set.server.instance);
        self.inner.shared.live.store(Arc::new(Live {
            revision: cur.revision,
            instance,
            instance_json,
            set: Arc::new(set),
            routes: cur.routes.clone(),
            upstreams: cur.upstreams.clone(),
            ledgers: cur.ledgers.clone(),
        }));
        Ok(self)
    }

    /// Installs the global store used by routes with `scope = "global"` (kept until
    /// another is installed; without a factory, reloads never replace it).
    pub fn with_store(self, store: Arc<dyn GlobalStore>) -> Engine {
        self.inner.shared.store.store(Some(Arc::new(store)));
        self
    }

    /// Gives the engine its store factory: a store is made now for the current `[store]`
    /// (if any; its error is returned), and after every reload whose `[store]` section
    /// changed the engine makes and installs a new one itself. A reload whose new store
    /// cannot start keeps the previous store and says so in [`Engine::take_notices`]; a
    /// removed `[store]` keeps the old store installed (no global route can use it any
    /// more).
    pub fn with_store_factory(self, factory: StoreFactory) -> Result<Engine, String> {
        if let Some(sc) = self.store_config() {
            self.with_store_from(&factory, &sc)?;
        }
        self.control().factory = Some(factory);
        Ok(self)
    }

    fn with_store_from(&self, f: &StoreFactory, sc: &StoreConfig) -> Result<(), String> {
        let store = f(sc)?;
        self.inner.shared.store.store(Some(Arc::new(store)));
        Ok(())
    }

    /// Messages about the engine's own actions since the last call (e.g. a store
    /// re-attached on reload), for the frontend to log; a library prints nothing itself.
    pub fn take_notices(&self) -> Vec<String> {
        core::mem::take(&mut self.control().notices)
    }

    /// The `[store]` section, for the store implementation to connect.
    pub fn store_config(&self) -> Option<StoreConfig> {
        self.live().set.store.clone()
    }

    /// Server settings after overrides.
    pub fn server(&self) -> Arc<ServerSettings> {
        self.live().set.server.clone()
    }

    /// An upstream by name.
    pub fn upstream(&self, name: &str) -> Option<Arc<UpstreamSettings>> {
        self.live().set.upstream(name).cloned()
    }

    /// The compiled set now serving.
    pub fn policy_set(&self) -> Arc<PolicySet> {
        self.live().set.clone()
    }

    /// What `--check` prints.
    pub fn describe(&self) -> String {
        self.live().set.describe()
    }

    /// The config revision (1 at start, +1 per successful reload).
    pub fn revision(&self) -> u64 {
        self.live().revision
    }

    /// Wall time now, from the engine's clock (see [`crate::wall`]): what quota periods,
    /// token expiry and log timestamps read.
    pub fn unix_now(&self) -> Nanos {
        self.inner.shared.clock.unix()
    }

    /// The engine's clock.
    pub fn now(&self) -> Nanos {
        self.inner.shared.clock.now()
    }

    /// Access-log records dropped because the log queue was full.
    pub fn access_log_dropped(&self) -> u64 {
        self.inner.shared.log.dropped.get()
    }

    /// Reopens the access log at the path the live config names (rotation: the frontends
    /// call this on `SIGUSR1`; a reload does it too). Records written before are flushed to
    /// the file that was open. On error the old file stays in use.
    ///
    /// # Errors
    /// The file cannot be opened (the message names it), or the log was `off` at start.
    pub fn reopen_access_log(&self) -> Result<(), String> {
        let target = self.live().set.server.log.clone();
        self.inner
            .shared
            .log
            .reopen(&target)
            .map_err(|e| match &target {
                AccessLogTarget::File(p) => {
                    format!("log.access: cannot reopen {}: {e}", p.display())
                }
                _ => format!("log.access: {e}"),
            })
    }

    /// Blocks until the access-log records sent so far are written.
    pub fn flush_access_log(&self) {
        self.inner.shared.log.flush();
    }

    /// Prometheus text of every family.
    pub fn metrics_text(&self) -> String {
        let live = self.live();
        let now = self.now();
        for r in &live.routes {
            if let Some(b) = &r.breaker {
                b.observe(&r.metrics, now);
            }
            if let (Some(b), Some(d)) = (
                r.rate_limit.as_ref().and_then(|l| l.bypass.as_ref()),
                r.policy.rate_limit.as_ref().and_then(|p| p.allow_for),
            ) {
                r.metrics
                    .bypass_active
                    .set(i64::from(b.active(now, d.nanos())));
            }
        }
        for u in &live.upstreams {
            u.observe(now);
        }
        self.inner.shared.metrics.render()
    }

    /// Re-reads the file (or the original text) and swaps the set atomically, keeping the
    /// state of every policy whose route id and parameters are unchanged. On error the old
    /// set keeps serving. A changed `[store]` gets a new store from the factory.
    pub fn reload(&self) -> Result<u64, ConfigError> {
        let mut c = self.control();
        let (text, origin) = match &c.source {
            Source::File(p) => read(p)?,
            Source::Text(t, o) => (t.clone(), o.clone()),
        };
        let set = config::parse(&text, &origin)?;
        self.install(&mut c, set, &text)
    }

    /// Makes a remembered revision's config text live again as a new revision, with the
    /// same rules as a reload (state of unchanged policies kept; on error nothing
    /// changes). The text is compiled again, so the files it refers to are read as they
    /// are now. The config file is not rewritten: the next [`Engine::reload`] reads it.
    pub fn rollback(&self, revision: u64) -> Result<u64, RollbackError> {
        let mut c = self.control();
        let (text, origin) = c
            .history
            .find(revision)
            .ok_or(RollbackError::Unknown(revision))?;
        let set = config::parse(&text, &origin).map_err(RollbackError::Config)?;
        self.install(&mut c, set, &text)
            .map_err(RollbackError::Config)
    }

    /// `[{"revision", "loaded_at", "sha256"}]` of the remembered good revisions, oldest
    /// first.
    fn history_json(&self) -> serde_json::Value {
        self.control().history.json()
    }

    /// Replaces the set with a new config text (tests, embedding). Same rules as reload.
    #[doc(hidden)]
    pub fn reload_from_toml(&self, text: &str, origin: &str) -> Result<u64, ConfigError> {
        let mut c = self.control();
        let set = config::parse(text, origin)?;
        self.install(&mut c, set, text)
    }

    /// Makes `set` (compiled from `text`) live as the next revision and remembers it.
    fn install(&self, c: &mut Control, mut set: PolicySet, text: &str) -> Result<u64, ConfigError> {
        set.server = Arc::new(overrides::apply(&set.server, &c.overrides)?);
        let shared = &self.inner.shared;
        let old = shared.live.load_full();
        let rev = old.revision + 1;
        let new_store = set
            .store
            .clone()
            .filter(|s| Some(s) != old.set.store.as_ref());
        let (ledgers, notices) = open_ledgers(&set, Some(&old.ledgers), shared.clock.unix_secs())
            .map_err(|e| ConfigError::plain(&set.origin, e))?;
        c.notices.extend(notices);
        c.history
            .push(rev, text, &set.origin, shared.clock.unix_millis());
        let live = Live::build(
            rev,
            Arc::new(set),
            Some(&old),
            shared.seed,
            &shared.metrics,
            ledgers,
        );
        shared.live.store(Arc::new(live));
        // A reload also rotates the access log (and follows a changed `log.access`).
        if let Err(e) = self.reopen_access_log() {
            c.notices
                .push(format!("{e}; the previous log file stays in use"));
        }
        if let (Some(sc), Some(f)) = (new_store, c.factory.clone()) {
            let notice = match self.with_store_from(&f, &sc) {
                Ok(()) => "[store] changed on reload: new store attached".to_string(),
                Err(e) => format!(
                    "[store] changed on reload but the new store cannot start ({e}); \
                     the previous store keeps serving"
                ),
            };
            c.notices.push(notice);
        }
        Ok(rev)
    }

    /// Starts one request: route match, descriptor, request id, deadline start.
    pub fn begin(&self, req: &RequestInfo<'_>) -> Flow {
        Flow::begin(self.inner.shared.clone(), req)
    }
}
