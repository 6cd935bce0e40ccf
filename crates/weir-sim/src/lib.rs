//! # weir-sim
//!
//! Policy experiments: a whole config run on virtual time against simulated upstreams
//! (docs/CONFIG.md, "Simulation"). `weir-gateway simulate` and `weir.Simulation` (Python)
//! are this crate behind a command line and a binding.
//!
//! Each request goes through the very steps a gateway takes — [`Engine::begin`],
//! [`Flow::admit`], [`Flow::next_attempt`] / [`Flow::on_attempt`], [`Flow::finish`] — on an
//! engine whose clock is a [`ManualClock`] that only the executor (`executor.rs`) moves.
//! Nothing here decides anything about a policy: the simulator only stands in for the
//! network (an upstream's latency, errors and outages, `upstream.rs`) and for time. Same
//! config, same seed, same trace: the same records, bit for bit.
//!
//! A crate of its own, above weir-policy rather than inside it, because it is a frontend
//! like the gateways: it drives the engine through its public API and nothing else, so the
//! engine cannot grow a shortcut only the simulator takes, and an embedder of the engine
//! alone (the Pingora module without its command line) does not build it. Of weir-policy it
//! needs one thing beyond what every frontend uses: [`Engine::for_simulation`], an engine on
//! an injected clock and seed that builds no access log and bare responses.
//!
//! Not simulated: the global store (`scope = "global"` routes meet no store and follow
//! their `on_store_error`), response bodies (an attempt ends at its response head) and
//! the client's own pace (a request's body is there at once).

mod executor;
mod upstream;

pub use upstream::UpstreamModel;
/// The `outcome` of a [`SimRecord`] (weir-policy's, re-exported so a user of the records
/// needs no other crate).
pub use weir_policy::Outcome;

use executor::{Executor, SimTimer};
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;
use upstream::SimUpstream;
use weir_core::{ManualClock, Nanos};
use weir_policy::policy::KeyPart;
use weir_policy::{
    Admission, AttemptResult, ConfigError, Engine, Flow, Next, PolicySet, RequestInfo, Timer,
};

/// One request of a trace.
#[derive(Debug, Clone, Default)]
pub struct SimRequest {
    /// Arrival, on the trace's own time line.
    pub t: Nanos,
    /// `GET` when empty.
    pub method: String,
    /// Path (and query).
    pub path: String,
    /// Request headers (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The client's address (key part `ip`).
    pub client_ip: Option<IpAddr>,
}

/// One request as the simulator reads it from a [`Trace`]: borrowed, so a trace kept as
/// columns (one path text shared by a million requests) hands it over without copying.
#[derive(Debug, Clone, Copy)]
pub struct TraceItem<'a> {
    /// `GET` when empty.
    pub method: &'a str,
    /// Path (and query).
    pub path: &'a str,
    /// Request headers (names lowercase).
    pub headers: &'a [(String, String)],
    /// The client's address (key part `ip`).
    pub client_ip: Option<IpAddr>,
}

/// The requests of a run, read by index in trace order. A slice of [`SimRequest`]s is
/// one; a caller with its own layout (the Python binding's columns) implements it rather
/// than building a `SimRequest` per request.
pub trait Trace {
    /// How many requests.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Request `i`'s arrival, on the trace's own time line.
    fn arrival(&self, i: usize) -> Nanos;
    /// Request `i`.
    fn request(&self, i: usize) -> TraceItem<'_>;
}

impl Trace for [SimRequest] {
    fn len(&self) -> usize {
        <[SimRequest]>::len(self)
    }
    fn arrival(&self, i: usize) -> Nanos {
        self[i].t
    }
    fn request(&self, i: usize) -> TraceItem<'_> {
        let r = &self[i];
        TraceItem {
            method: &r.method,
            path: &r.path,
            headers: &r.headers,
            client_ip: r.client_ip,
        }
    }
}

/// A route id in the records: one shared text per route of the run, not a copy per
/// request.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteName(Arc<str>);

impl RouteName {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for RouteName {
    fn from(s: &str) -> RouteName {
        RouteName(s.into())
    }
}

impl core::ops::Deref for RouteName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RouteName {
    fn eq(&self, o: &str) -> bool {
        *self.0 == *o
    }
}

impl PartialEq<&str> for RouteName {
    fn eq(&self, o: &&str) -> bool {
        *self.0 == **o
    }
}

impl core::fmt::Debug for RouteName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&*self.0, f)
    }
}

impl core::fmt::Display for RouteName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What happened to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRecord {
    /// Arrival.
    pub t: Nanos,
    /// The matched route id, `-` for none.
    pub route: RouteName,
    /// The status the client got.
    pub status: u16,
    /// The `outcome` label of `weir_requests_total` (`proxied`, `rate_limited`, ...).
    pub outcome: Outcome,
    /// Upstream attempts made.
    pub attempts: u32,
    /// Time in the concurrency queue.
    pub queue: Duration,
    /// Arrival to response.
    pub duration: Duration,
}

/// A config ready to be simulated, with its upstreams' models.
pub struct Simulation {
    text: String,
    origin: String,
    seed: u64,
    /// Every upstream the config names, with its model (the default until set).
    upstreams: BTreeMap<String, UpstreamModel>,
    /// The compiled config, for route lookups (key stand-ins).
    set: Arc<PolicySet>,
    /// Wall time (since the Unix epoch) at the simulation's time zero: the calendar of quota
    /// periods, token expiry and bypass episodes, which then moves with simulated time.
    start: core::time::Duration,
}

impl Simulation {
    /// Compiles `text` (`origin` names it in errors and anchors relative file paths).
    pub fn new(text: &str, origin: &str, seed: u64) -> Result<Simulation, ConfigError> {
        let set = weir_policy::config::parse(text, origin)?;
        let upstreams = set
            .upstreams
            .iter()
            .map(|u| (u.name.clone(), UpstreamModel::default()))
            .collect();
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(Simulation {
            text: text.to_owned(),
            origin: origin.to_owned(),
            seed,
            upstreams,
            set: Arc::new(set),
            start,
        })
    }

    /// Sets the wall time at the simulation's time zero (default: the system's wall time
    /// when [`Simulation::new`] ran). The engine's calendar — quota periods, JWT `exp` and
    /// `nbf`, bypass episodes — is this plus simulated time, so a run over a simulated month
    /// crosses a monthly quota period and a simulated hour expires an hour's token. Fix it
    /// for runs that must give the same records on any day.
    pub fn start_at(&mut self, unix: core::time::Duration) {
        self.start = unix;
    }

    /// Sets the model of upstream `name` (one the config declares).
    pub fn set_upstream(&mut self, name: &str, model: UpstreamModel) -> Result<(), String> {
        model.validate()?;
        let Some(slot) = self.upstreams.get_mut(name) else {
            let known: Vec<&str> = self.upstreams.keys().map(String::as_str).collect();
            return Err(format!(
                "no upstream {name:?} in the config (it has: {})",
                known.join(", ")
            ));
        };
        *slot = model;
        Ok(())
    }

    /// Whether a route of the config has this id.
    pub fn has_route(&self, id: &str) -> bool {
        self.set.routes.iter().any(|r| r.id == id)
    }

    /// Headers and client address under which `method path` has the rate-limit key
    /// `digest` stands for (an access log's `key_digest`): each header part of the route's
    /// key carries the digest, the client address is derived from it. Requests with the
    /// same digest share a key, different digests do not — the partition of traffic into
    /// keys that the log recorded.
    pub fn key_stand_in(
        &self,
        method: &str,
        path: &str,
        digest: &str,
    ) -> (Vec<(String, String)>, Option<IpAddr>) {
        let parts = self
            .set
            .route_for(method, path.split('?').next().unwrap_or(path))
            .and_then(|(_, r)| r.rate_limit.as_ref())
            .map_or(&[][..], |rl| &rl.key[..]);
        let headers = parts
            .iter()
            .filter_map(|p| match p {
                KeyPart::Header(h) => Some((h.clone(), digest.to_owned())),
                _ => None,
            })
            .collect();
        let ip = parts.contains(&KeyPart::ClientIp).then(|| {
            let d: [u8; 32] = sha2::Sha256::digest(digest.as_bytes()).into();
            let mut b = [0u8; 16];
            b.copy_from_slice(&d[..16]);
            IpAddr::V6(Ipv6Addr::from(b))
        });
        (headers, ip)
    }

    /// Runs the trace (sorted by `t` stably first) on a fresh engine from the config:
    /// one record per request, in trace order.
    pub fn run(&self, requests: &[SimRequest]) -> Result<Vec<SimRecord>, ConfigError> {
        let mut out: Vec<Option<SimRecord>> = Vec::with_capacity(requests.len());
        out.resize_with(requests.len(), || None);
        self.run_each(requests, |i, rec| out[i] = Some(rec))?;
        // (In place: the records take the buffer of their options; `run_each` handed
        // every request over.)
        Ok(out.into_iter().flatten().collect())
    }

    /// Runs the trace (sorted by arrival stably first) on a fresh engine from the config,
    /// handing request `i`'s record to `record(i, ..)` exactly once per request, as
    /// requests finish (so not in trace order); a request that never finished (parked on
    /// something nothing signalled: none is expected, the engine bounds every wait by a
    /// timer) is handed over at the end as `499 aborted`.
    pub fn run_each<T: Trace + ?Sized>(
        &self,
        trace: &T,
        mut record: impl FnMut(usize, SimRecord),
    ) -> Result<(), ConfigError> {
        let clock = Arc::new(ManualClock::new(Nanos::ZERO));
        let engine = Engine::for_simulation(
            &self.text,
            &self.origin,
            clock.clone(),
            self.start,
            self.seed,
        )?;
        let ups: Vec<SimUpstream> = self
            .upstreams
            .iter()
            .map(|(n, m)| SimUpstream::new(n, m.clone(), self.seed))
            .collect();
        let n = trace.len();
        // The k-th arrival is request `order[k]` (a trace in time order, the usual case,
        // needs no permutation).
        let sorted = (1..n).all(|i| trace.arrival(i - 1) <= trace.arrival(i));
        let mut order: Vec<usize> = Vec::new();
        if !sorted {
            order = (0..n).collect();
            order.sort_by_key(|&i| trace.arrival(i));
        }
        let at = |k: usize| if sorted { k } else { order[k] };
        let ex = Executor::new(clock);
        let timer = ex.timer();
        let names = Names::new(&self.set);
        let (engine, ups, names) = (&engine, &ups[..], &names);
        let unfinished = ex.run(
            n,
            |k| trace.arrival(at(k)),
            |k| {
                let i = at(k);
                one(
                    engine,
                    timer,
                    ups,
                    names,
                    trace.arrival(i),
                    trace.request(i),
                )
            },
            |k, rec| record(at(k), rec),
        );
        for k in unfinished {
            let i = at(k);
            record(
                i,
                SimRecord {
                    t: trace.arrival(i),
                    route: names.none.clone(),
                    status: 499,
                    outcome: Outcome::Aborted,
                    attempts: 0,
                    queue: Duration::ZERO,
                    duration: Duration::ZERO,
                },
            );
        }
        Ok(())
    }
}

/// `{route: {outcome: count}}` of some records.
pub fn summary(records: &[SimRecord]) -> BTreeMap<String, BTreeMap<&'static str, u64>> {
    let mut m: BTreeMap<String, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for r in records {
        let per_route = match m.get_mut(r.route.as_str()) {
            Some(o) => o,
            None => m.entry(r.route.to_string()).or_default(),
        };
        *per_route.entry(r.outcome.as_str()).or_default() += 1;
    }
    m
}

/// The route ids of a config as [`RouteName`]s, shared by the records of a run.
struct Names {
    by_id: std::collections::HashMap<String, RouteName, ahash::RandomState>,
    /// `-`: no route.
    none: RouteName,
}

impl Names {
    fn new(set: &PolicySet) -> Names {
        // Fixed seeds: a lookup table of the config's own ids, nothing an input chooses.
        let mut by_id =
            std::collections::HashMap::with_hasher(ahash::RandomState::with_seeds(1, 2, 3, 4));
        for r in &set.routes {
            by_id.insert(r.id.clone(), RouteName::from(r.id.as_str()));
        }
        Names {
            by_id,
            none: RouteName::from("-"),
        }
    }

    fn get(&self, id: Option<&str>) -> RouteName {
        match id {
            None => self.none.clone(),
            Some(id) => self
                .by_id
                .get(id)
                .cloned()
                .unwrap_or_else(|| RouteName::from(id)),
        }
    }
}

/// One request through the engine, as a gateway runs it, with the upstream simulated.
async fn one(
    engine: &Engine,
    timer: &SimTimer,
    ups: &[SimUpstream],
    names: &Names,
    t: Nanos,
    req: TraceItem<'_>,
) -> SimRecord {
    let start = timer.now();
    let method = if req.method.is_empty() {
        "GET"
    } else {
        req.method
    };
    let info = RequestInfo {
        method,
        path: req.path,
        headers: &req.headers,
        client_ip: req.client_ip,
        body_len: Some(0),
    };
    let mut flow = engine.begin(&info);
    let route = names.get(flow.route());
    let mut attempts = 0;
    let status = match flow.admit(timer).await {
        Admission::Respond(r) => r.status,
        Admission::Proceed => attempt_loop(&mut flow, timer, ups, &mut attempts).await,
    };
    let rec = SimRecord {
        t,
        route,
        status,
        outcome: flow.outcome().unwrap_or(Outcome::Aborted),
        attempts,
        queue: flow.queue_time(),
        duration: timer.now().saturating_sub(start).into(),
    };
    flow.finish(status, None);
    rec
}

/// Attempts, backoffs and the final status.
async fn attempt_loop(
    flow: &mut Flow,
    timer: &SimTimer,
    ups: &[SimUpstream],
    attempts: &mut u32,
) -> u16 {
    loop {
        let a = match flow.next_attempt() {
            Ok(a) => a,
            Err(r) => return r.status,
        };
        *attempts += 1;
        let answer = match ups.iter().find(|u| u.name == a.upstream.name) {
            Some(u) => u.attempt(timer.now(), a.per_try_timeout),
            None => upstream::Answer {
                result: AttemptResult::ConnectFailure,
                after: Duration::ZERO,
            },
        };
        timer.sleep(answer.after).await;
        match flow.on_attempt(answer.result) {
            Next::Forward { .. } => {
                return match answer.result {
                    AttemptResult::Response { status } => status,
                    _ => 502,
                };
            }
            Next::Retry { backoff } => timer.sleep(backoff).await,
            Next::Respond(r) => return r.status,
        }
    }
}

#[cfg(test)]
mod tests;
