//! # weir-redis — one limit across gateway instances, on Redis
//!
//! Two replicas with a local bucket of 2 admit 4. A [`RedisStore`] makes
//! every instance consume from one counter per descriptor in Redis instead:
//!
//! * **Same algorithms as the core, on the server's clock.** Each decision is one atomic
//!   Lua script ([`scripts`]) reading Redis' `TIME`, so instance clocks never arbitrate.
//!   The token bucket is exact (integer units of `1/per_us` tokens, no rounded emission
//!   interval); fixed window and sliding-window counter match `weir-core`'s definitions.
//!   Keys expire exactly when their state is equivalent to a fresh one, so state is
//!   bounded by the set of *active* descriptors.
//! * **One server or a Redis Cluster.** `url` names one server; `cluster` names seed nodes
//!   and the `redis` crate's async cluster client follows MOVED/ASK, refreshes its slot
//!   map and reconnects nodes. The engine passes keys like `weir:{route}:digest`: the hash
//!   tag keeps every key of a route (and the sliding log's `:seq` companion) in one slot,
//!   so each script's keys are on one node. Scripts are loaded per node on demand
//!   (`EVALSHA`, then on `NOSCRIPT` one `EVAL` of the same call, routed by its key like
//!   any command and so following `MOVED`; `EVAL` caches the script on the node that ran
//!   it), so a failed-over or flushed node learns them again and a dead node never blocks
//!   the others. A separate `SCRIPT LOAD` would go by the client's slot map, which is
//!   stale right after a failover: it loaded the script on the demoted master while
//!   `EVALSHA` was redirected to the promoted one. [`GlobalStore::shard`](weir_policy::GlobalStore::shard) reports the key's hash
//!   slot ([`slot`]): the engine tracks outages per slot.
//! * **Leases bound the cost of batching.** With `lease = p`, an instance takes up to `p`
//!   tokens in one round trip and spends them locally; it never holds more than `p`
//!   unspent. Tokens are deducted in Redis when granted, so over any interval `[s, e]` the
//!   fleet admits at most what Redis grants in `[s, e]` (≤ the exact single-bucket ideal)
//!   plus what the instances held at `s`: **over-admission ≤ instances × `p`**. Unspent
//!   tokens also expire after `max(p × per / rate, 1 s)`, which gives a second bound —
//!   ideal plus `rate × that horizon` — tight for slow buckets (ideal + `p` when the refill
//!   horizon is over a second), while fast buckets keep their lease long enough to save
//!   round trips. The fleet is always within the smaller of the two. `tests/redis.rs` and
//!   the shared e2e suite measure it.
//! * **Failures are explicit.** Every call is bounded by the store timeout; a lost
//!   connection is re-established on the next call (no restart); errors come back as
//!   [`StoreError`] so the policy engine can apply `on_store_error` (deny → 503, allow →
//!   bypass) — never as a fake 429.
//!
//! ## Why a dedicated client thread
//! The monoio gateway's workers run io_uring event loops that the `redis` crate cannot
//! drive. Rather than a second RESP client over monoio sockets, one thread runs a
//! current-thread tokio runtime with a multiplexed `redis` connection; requests reach it
//! over a channel and answers come back on a `tokio::sync::oneshot`, whose receiver is a
//! plain `Future` any executor (monoio or Pingora's tokio) can await. One pipelined
//! connection serves all workers; the extra hop is a channel send and a wake-up, small
//! next to the network round trip: measured with `examples/hop.rs`, a sequential call costs
//! 1.05× a direct tokio call on the same connection; with 8 concurrent callers the single
//! client thread reaches 0.51× the direct throughput, so hot keys should use leases
//! (`docs/perf-log/2026-11-29-redis-client-thread-and-leases.md`).

use redis::IntoConnectionInfo as _;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use weir_core::{Clock, Decision, Nanos, StdClock, Verdict};

pub mod scripts;

/// The limit a store call applies: the engine's own [`weir_core::Limit`] (one type for the
/// config, the local tables and Redis), so the scripts run the very numbers the config
/// compiled. Sliding logs are bounded by [`weir_core::MAX_SLIDING_LOG_LIMIT`] everywhere.
pub use weir_core::Limit;
use weir_core::LimitKind;

/// Whole microseconds of `n` (the scripts' unit).
fn us(n: Nanos) -> u64 {
    n.as_u64() / 1_000
}

/// Checks that `limit` can be evaluated exactly by the scripts: periods of at least 1 µs
/// and every intermediate below 2^53 ([`weir_policy::check_exact`], which the config also
/// applies at load to every global limit).
pub fn check_exact(limit: &Limit) -> Result<(), StoreError> {
    weir_policy::check_exact(limit).map_err(|m| config_error(&m))
}

/// Why the store could not answer: the engine's own error type (one for the engine and
/// every store), so [`RedisStore`]'s errors reach the engine with their kind.
pub use weir_policy::{StoreError, StoreErrorKind};

/// A [`StoreErrorKind::Config`] error.
fn config_error(m: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Config, m)
}

/// Settings of a [`RedisStore`]: the `[store]` section as the config compiled it (one
/// model of the store's settings, not a copy). `url` (one server) or `cluster` (seed nodes
/// `host:port`), `username` / `password` (AUTH, to every node), `tls` (or a `rediss://`
/// URL), `timeout` (a bound on every call, connecting included) and `lease` (tokens an
/// instance may take at once per key; token buckets only).
pub type RedisSettings = weir_policy::StoreConfig;

/// What the client thread is asked to do.
enum Msg {
    /// A rate-limit script.
    Limit(Job),
    /// A quota script.
    Quota(QuotaJob),
}

/// One global-quota script call (see [`scripts::quota`]).
struct QuotaJob {
    script: QuotaScript,
    keys: Vec<String>,
    args: Vec<String>,
    reply: oneshot::Sender<Result<Vec<String>, StoreError>>,
}

/// The quota scripts, in [`QUOTA_SCRIPTS`] order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuotaScript {
    Consume,
    Release,
    Bypass,
    Adjust,
    Report,
    Ledger,
}

const QUOTA_SCRIPTS: [&str; 6] = [
    scripts::quota::CONSUME,
    scripts::quota::RELEASE,
    scripts::quota::BYPASS,
    scripts::quota::ADJUST,
    scripts::quota::REPORT,
    scripts::quota::LEDGER,
];

struct Job {
    script: LimitKind,
    key: String,
    args: [u64; 6],
    nargs: usize,
    reply: oneshot::Sender<Result<[u64; 5], StoreError>>,
}

#[derive(Debug)]
struct Lease {
    tokens: u64,
    expires: Nanos,
    remaining_hint: u64,
}

/// Leases live at least this long, so fast buckets save round trips.
const LEASE_MIN_TTL: Nanos = Nanos::from_secs(1);

/// Upper bound on cached leases; expired ones are pruned when it is reached.
const MAX_LEASES: usize = 100_000;

/// A global-limit store on Redis. Cheap to clone; all clones share one client thread and
/// one multiplexed connection.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    tx: mpsc::UnboundedSender<Msg>,
    /// A cluster: outages are per hash slot.
    cluster: bool,
    lease: u64,
    leases: Mutex<HashMap<String, Lease>>,
    clock: StdClock,
    timeout: Duration,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("lease", &self.inner.lease)
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

impl RedisStore {
    /// Starts the client thread. Does not need Redis to be up: connecting happens on the
    /// first call and again after any connection error.
    pub fn start(settings: RedisSettings) -> Result<RedisStore, StoreError> {
        let target = Target::open(&settings)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let timeout = settings.timeout;
        std::thread::Builder::new()
            .name("weir-redis".into())
            .spawn(move || client_thread(target, rx, timeout))
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!("cannot start client thread: {e}"),
                )
            })?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                tx,
                cluster: !settings.cluster.is_empty(),
                lease: settings.lease,
                leases: Mutex::new(HashMap::new()),
                clock: StdClock::new(),
                timeout,
            }),
        })
    }

    /// Asks the store to admit `cost` units under `limit` for `key`. The future is
    /// runtime-agnostic (awaitable from monoio or tokio) and resolves within the store
    /// timeout (plus scheduling).
    pub fn acquire(
        &self,
        key: &str,
        limit: &Limit,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, StoreError>> + Send + 'static {
        let inner = self.inner.clone();
        let key = key.to_owned();
        let limit = *limit;
        let early = self.prepare(&key, &limit, cost);
        async move {
            let (job, rx) = match early {
                Prepared::Done(r) => return r,
                Prepared::Send(job, rx) => (job, rx),
            };
            if inner.tx.send(Msg::Limit(job)).is_err() {
                return Err(client_gone("client thread stopped"));
            }
            let out = rx
                .await
                .map_err(|_| client_gone("client thread dropped the request"))??;
            Ok(inner.absorb(&key, &limit, cost, out))
        }
    }

    fn prepare(&self, key: &str, limit: &Limit, cost: u64) -> Prepared {
        if let Err(e) = check_exact(limit) {
            return Prepared::Done(Err(e));
        }
        if cost > limit.capacity() {
            return Prepared::Done(Err(config_error("cost exceeds the limit's capacity")));
        }
        // ARGV of each script (see `scripts`): the limit's numbers, then the cost.
        let (args, nargs): ([u64; 6], usize) = match *limit {
            Limit::TokenBucket(c) => {
                if self.inner.lease > 0
                    && let Some(d) = self.inner.spend_lease(key, cost)
                {
                    return Prepared::Done(Ok(d));
                }
                let want = cost.max(self.inner.lease).min(c.burst());
                ([c.rate(), us(c.per()), c.burst(), cost, want, 0], 5)
            }
            Limit::LeakyBucket(c) => (
                [
                    c.rate(),
                    us(c.per()),
                    c.burst(),
                    c.delay(),
                    u64::from(c.nodelay()),
                    cost,
                ],
                6,
            ),
            _ => {
                let (q, window) = limit.quota_window();
                ([q, us(window), cost, 0, 0, 0], 3)
            }
        };
        let (reply, rx) = oneshot::channel();
        Prepared::Send(
            Job {
                script: limit.kind(),
                key: key.to_owned(),
                args,
                nargs,
                reply,
            },
            rx,
        )
    }

    /// One global-quota operation (one script call on the descriptor's node). The call is
    /// sent now, before the future is first polled: dropping the future does not cancel
    /// it (the engine gives reservations back from synchronous code that way).
    pub fn quota(
        &self,
        req: weir_policy::QuotaRequest,
    ) -> impl Future<Output = Result<weir_policy::QuotaReply, StoreError>> + Send + 'static {
        use weir_policy::QuotaOp;
        let k = &req.keys;
        let (mk, ku) = (req.markers_until.to_string(), req.keep_until.to_string());
        let four = vec![k.counter(), k.ids(), k.log(), k.index()];
        let opt = |id: &Option<String>| id.clone().unwrap_or_default();
        let (script, keys, args) = match &req.op {
            QuotaOp::Consume {
                limit,
                cost,
                event_id,
                event,
            } => (
                QuotaScript::Consume,
                four,
                vec![
                    limit.to_string(),
                    cost.to_string(),
                    opt(event_id),
                    event.clone(),
                    mk,
                    ku,
                    k.digest.clone(),
                ],
            ),
            QuotaOp::Release {
                entry,
                cost,
                event_id,
            } => (
                QuotaScript::Release,
                four,
                vec![entry.clone(), cost.to_string(), opt(event_id)],
            ),
            QuotaOp::Bypass {
                cost,
                event_id,
                event,
            } => (
                QuotaScript::Bypass,
                four,
                vec![
                    cost.to_string(),
                    event_id.clone(),
                    event.clone(),
                    mk,
                    ku,
                    k.digest.clone(),
                ],
            ),
            QuotaOp::Adjust {
                amount,
                event_id,
                event,
            } => (
                QuotaScript::Adjust,
                four,
                vec![
                    amount.to_string(),
                    event_id.clone(),
                    event.clone(),
                    mk,
                    ku,
                    k.digest.clone(),
                ],
            ),
            QuotaOp::Report => (QuotaScript::Report, four, Vec::new()),
            QuotaOp::Ledger => (QuotaScript::Ledger, vec![k.index()], vec![k.prefix.clone()]),
        };
        let (reply, rx) = oneshot::channel();
        let sent = self
            .inner
            .tx
            .send(Msg::Quota(QuotaJob {
                script,
                keys,
                args,
                reply,
            }))
            .is_ok();
        async move {
            if !sent {
                return Err(client_gone("client thread stopped"));
            }
            let v = rx
                .await
                .map_err(|_| client_gone("client thread dropped the request"))??;
            quota_reply(script, v)
        }
    }

    /// The store timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }
}

enum Prepared {
    Done(Result<Decision, StoreError>),
    Send(Job, oneshot::Receiver<Result<[u64; 5], StoreError>>),
}

impl Inner {
    fn spend_lease(&self, key: &str, cost: u64) -> Option<Decision> {
        let now = self.clock.now();
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let l = leases.get_mut(key)?;
        if now >= l.expires || l.tokens < cost {
            return None;
        }
        l.tokens -= cost;
        Some(Decision {
            verdict: Verdict::Admit,
            remaining: l.tokens + l.remaining_hint,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        })
    }

    /// Turns a script answer into a decision, keeping any extra leased tokens.
    fn absorb(&self, key: &str, limit: &Limit, cost: u64, out: [u64; 5]) -> Decision {
        let [allowed, taken, remaining, retry_us, reset_us] = out;
        let mut extra = 0;
        if allowed == 1
            && let Limit::TokenBucket(c) = *limit
            && self.lease > 0
            && taken > cost
        {
            extra = taken - cost;
            // The refill horizon of `p` tokens, at least a second (see the crate docs).
            let ttl = Nanos(
                ((u128::from(c.per().as_u64()) * u128::from(self.lease)) / u128::from(c.rate()))
                    .min(u128::from(u64::MAX)) as u64,
            )
            .max(LEASE_MIN_TTL);
            let now = self.clock.now();
            let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
            if leases.len() >= MAX_LEASES {
                leases.retain(|_, l| l.expires > now && l.tokens > 0);
            }
            if leases.len() < MAX_LEASES {
                let held = leases
                    .get(key)
                    .filter(|l| l.expires > now)
                    .map_or(0, |l| l.tokens);
                let tokens = (held + extra).min(self.lease);
                leases.insert(
                    key.to_owned(),
                    Lease {
                        tokens,
                        expires: now + ttl,
                        remaining_hint: remaining,
                    },
                );
                extra = tokens;
            } else {
                extra = 0;
            }
        }
        let verdict = match (allowed, limit) {
            (1, Limit::LeakyBucket(_)) if taken > 0 => Verdict::Delay(Nanos::from_micros(taken)),
            (1, _) => Verdict::Admit,
            _ => Verdict::Reject,
        };
        Decision {
            verdict,
            remaining: remaining + extra,
            retry_after: if allowed == 1 {
                Nanos::ZERO
            } else {
                Nanos::from_micros(retry_us.max(1))
            },
            reset_after: Nanos::from_micros(reset_us),
        }
    }
}

/// A quota script's answer (`{status, used, adjusted, ledger_sum, entry}`, or the
/// ledger's events) as the engine's [`weir_policy::QuotaReply`].
fn quota_reply(script: QuotaScript, v: Vec<String>) -> Result<weir_policy::QuotaReply, StoreError> {
    use weir_policy::{QuotaReply, QuotaStatus};
    if script == QuotaScript::Ledger {
        return Ok(QuotaReply {
            status: QuotaStatus::Done,
            used: 0,
            adjusted: 0,
            ledger_sum: 0,
            entry: String::new(),
            events: v,
        });
    }
    let bad = || {
        StoreError::new(
            StoreErrorKind::Protocol,
            "quota script answered an unexpected shape",
        )
    };
    let [st, used, adj, sum, entry]: [String; 5] = v.try_into().map_err(|_| bad())?;
    let status = match st.as_str() {
        "ok" => QuotaStatus::Done,
        "dup" => QuotaStatus::Duplicate,
        "exhausted" => QuotaStatus::Exhausted,
        _ => return Err(bad()),
    };
    // Lua numbers print as integers below 2^53 (`%.17g`); anything else is a protocol error.
    let int = |s: &str| s.parse::<i64>().map_err(|_| bad());
    Ok(QuotaReply {
        status,
        used: u64::try_from(int(&used)?).unwrap_or(0),
        adjusted: int(&adj)?,
        ledger_sum: u64::try_from(int(&sum)?).unwrap_or(0),
        entry,
        events: Vec::new(),
    })
}

/// The CA of `[store] tls = { ca = ... }` for the redis client; `None`: system roots.
fn tls_certificates(settings: &RedisSettings) -> Option<redis::TlsCertificates> {
    let (_, pem) = settings.tls.as_ref()?.ca.as_ref()?;
    Some(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.clone()),
    })
}

/// rustls needs one process-wide crypto provider; weir builds rustls with *ring* only, and
/// installs it here in case another part of the process enabled a second provider (then
/// rustls cannot pick one by itself). A provider already installed is kept.
///
/// rustls 0.23.48 deprecates *ring*'s provider because it lacks post-quantum key exchange;
/// aws-lc-rs has it but adds a long C build to every fresh build of the gateway. For the
/// link to a Redis server in the same network that trade is taken knowingly.
#[allow(deprecated)]
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What the client thread connects to: one server, or a cluster from its seed nodes.
#[derive(Clone)]
enum Target {
    Single(Box<redis::Client>),
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// A live connection of a [`Target`]. Both kinds multiplex one socket per server and are
/// cheap to clone; the cluster one keeps a slot map, follows MOVED/ASK, refreshes the map
/// and reconnects to nodes by itself.
#[derive(Clone)]
enum Conn {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Target {
    /// `settings.cluster` (seed nodes `host:port`) when given, else `settings.url`; with
    /// the settings' username, password and TLS. No error names the URL (it may carry a
    /// password).
    fn open(settings: &RedisSettings) -> Result<Target, StoreError> {
        let tls = settings.tls.is_some() || settings.url.starts_with("rediss://");
        let certs = tls_certificates(settings);
        if tls {
            install_crypto_provider();
        }
        if settings.cluster.is_empty() {
            let mut info = settings
                .url
                .as_str()
                .into_connection_info()
                .map_err(|e| config_error(&format!("invalid store url: {e}")))?;
            if tls && let redis::ConnectionAddr::Tcp(host, port) = info.addr().clone() {
                info = info.set_addr(redis::ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: false,
                    tls_params: None,
                });
            }
            let mut auth = info.redis_settings().clone();
            if let Some(u) = &settings.username {
                auth = auth.set_username(u);
            }
            if let Some(p) = &settings.password {
                auth = auth.set_password(p.expose());
            }
            let info = info.set_redis_settings(auth);
            let client = match certs {
                Some(c) => redis::Client::build_with_tls(info, c),
                None => redis::Client::open(info),
            };
            return client
                .map(|c| Target::Single(Box::new(c)))
                .map_err(|e| config_error(&format!("invalid store url: {e}")));
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let seeds: Vec<String> = settings
            .cluster
            .iter()
            .map(|s| format!("{scheme}://{s}"))
            .collect();
        // Few, quick retries: a redirect or a refreshed slot map needs one or two, and the
        // whole call is bounded by the store timeout anyway; a dead master must surface as
        // an error for its slots (on_store_error) rather than queue calls behind backoff.
        let mut b = redis::cluster::ClusterClientBuilder::new(seeds)
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait(100)
            .connection_timeout(settings.timeout)
            .response_timeout(settings.timeout);
        if let Some(u) = &settings.username {
            b = b.username(u);
        }
        if let Some(p) = &settings.password {
            b = b.password(p.expose());
        }
        if tls {
            b = b.tls(redis::TlsMode::Secure);
        }
        if let Some(c) = certs {
            b = b.certs(c);
        }
        b.build()
            .map(|c| Target::Cluster(Box::new(c)))
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Config,
                    format!("invalid store cluster: {e}"),
                )
            })
    }

    async fn connect(&self) -> redis::RedisResult<Conn> {
        match self {
            Target::Single(c) => {
                let cfg = redis::AsyncConnectionConfig::new();
                c.get_multiplexed_async_connection_with_config(&cfg)
                    .await
                    .map(Conn::Single)
            }
            Target::Cluster(c) => c.get_async_connection().await.map(Conn::Cluster),
        }
    }
}

impl Conn {
    async fn query(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::Single(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => cmd.query_async(c).await,
        }
    }
}

/// The Redis Cluster hash slot of `key`: CRC16/XMODEM of its hash tag (the text between
/// the first `{` and the next `}`, when not empty), else of the key, mod 16384. Public so
/// the engine's outage tracking and the tests name the same shard Redis does.
pub fn slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tag = b
        .iter()
        .position(|&c| c == b'{')
        .and_then(|o| {
            let close = b[o + 1..].iter().position(|&c| c == b'}')?;
            (close > 0).then(|| &b[o + 1..o + 1 + close])
        })
        .unwrap_or(b);
    crc16::State::<crc16::XMODEM>::calculate(tag) % 16384
}

fn client_thread(target: Target, mut rx: mpsc::UnboundedReceiver<Msg>, timeout: Duration) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return, // every request then fails with "client thread stopped"
    };
    let scripts = Arc::new(LimitKind::ALL.map(|k| redis::Script::new(scripts::for_kind(k))));
    let quota = Arc::new(QUOTA_SCRIPTS.map(redis::Script::new));
    let conn: Arc<tokio::sync::Mutex<Option<Conn>>> = Arc::new(tokio::sync::Mutex::new(None));
    rt.block_on(async move {
        while let Some(msg) = rx.recv().await {
            let target = target.clone();
            let conn = conn.clone();
            let job = match msg {
                Msg::Limit(job) => job,
                Msg::Quota(job) => {
                    let quota = quota.clone();
                    tokio::spawn(async move {
                        let out = bounded(timeout, run_quota(&target, &conn, &quota, &job)).await;
                        let _ = job.reply.send(out);
                    });
                    continue;
                }
            };
            let scripts = scripts.clone();
            tokio::spawn(async move {
                let out = bounded(timeout, run_job(&target, &conn, &scripts, &job)).await;
                let _ = job.reply.send(out);
            });
        }
    });
}

/// `EVALSHA`; on `NOSCRIPT` (a fresh, flushed or failed-over node), the same call as
/// `EVAL` with the script's text, which runs it and caches it on that node.
async fn eval(
    c: &mut Conn,
    script: &redis::Script,
    code: &str,
    job: &Job,
) -> redis::RedisResult<redis::Value> {
    let call = |verb: &str, body: &str| {
        let mut cmd = redis::cmd(verb);
        cmd.arg(body);
        if job.script == LimitKind::SlidingLog {
            cmd.arg(2).arg(&job.key).arg(format!("{}:seq", job.key));
        } else {
            cmd.arg(1).arg(&job.key);
        }
        for a in &job.args[..job.nargs] {
            cmd.arg(*a);
        }
        cmd
    };
    match c.query(&call("EVALSHA", script.get_hash())).await {
        Err(e) if is_noscript(&e) => c.query(&call("EVAL", code)).await,
        r => r,
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// The shared connection, made on first use and again after a single server's
/// connection broke.
async fn connection(
    target: &Target,
    conn: &tokio::sync::Mutex<Option<Conn>>,
) -> Result<Conn, StoreError> {
    let mut guard = conn.lock().await;
    match guard.as_ref() {
        Some(c) => Ok(c.clone()),
        None => {
            let c = target.connect().await.map_err(|e| {
                StoreError::new(StoreErrorKind::Unavailable, format!("connect: {e}"))
            })?;
            *guard = Some(c.clone());
            Ok(c)
        }
    }
}

/// A Redis error as a [`StoreError`]; a broken single-server connection is dropped so
/// the next call makes a new one.
async fn redis_error(
    e: redis::RedisError,
    c: &Conn,
    conn: &tokio::sync::Mutex<Option<Conn>>,
) -> StoreError {
    if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_cluster_error()
    {
        if matches!(c, Conn::Single(_)) {
            *conn.lock().await = None;
        }
        StoreError::new(StoreErrorKind::Unavailable, e.to_string())
    } else {
        StoreError::new(StoreErrorKind::Protocol, e.to_string())
    }
}

/// The store's client thread is gone (or never started): `what` says which way.
fn client_gone(what: &'static str) -> StoreError {
    StoreError::new(StoreErrorKind::Unavailable, what)
}

/// `f` within `timeout`, or a timeout error naming it.
async fn bounded<T>(
    timeout: Duration,
    f: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, f).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::new(
            StoreErrorKind::Timeout,
            format!("no answer within {} ms", timeout.as_millis()),
        )),
    }
}

/// One quota script: `EVALSHA` with its keys and arguments, `EVAL` on `NOSCRIPT` (as
/// [`eval`]).
async fn run_quota(
    target: &Target,
    conn: &tokio::sync::Mutex<Option<Conn>>,
    scripts: &[redis::Script; 6],
    job: &QuotaJob,
) -> Result<Vec<String>, StoreError> {
    let mut c = connection(target, conn).await?;
    let i = job.script as usize;
    let call = |verb: &str, body: &str| {
        let mut cmd = redis::cmd(verb);
        cmd.arg(body).arg(job.keys.len());
        for k in &job.keys {
            cmd.arg(k);
        }
        for a in &job.args {
            cmd.arg(a);
        }
        cmd
    };
    let answer = match c.query(&call("EVALSHA", scripts[i].get_hash())).await {
        Err(e) if is_noscript(&e) => c.query(&call("EVAL", QUOTA_SCRIPTS[i])).await,
        r => r,
    };
    match answer.and_then(|v| redis::from_redis_value::<Vec<String>>(v).map_err(Into::into)) {
        Ok(v) => Ok(v),
        Err(e) => Err(redis_error(e, &c, conn).await),
    }
}

async fn run_job(
    target: &Target,
    conn: &tokio::sync::Mutex<Option<Conn>>,
    scripts: &[redis::Script; 5],
    job: &Job,
) -> Result<[u64; 5], StoreError> {
    let mut c = connection(target, conn).await?;
    let code = scripts::for_kind(job.script);
    let answer = eval(&mut c, &scripts[job.script as usize], code, job).await;
    match answer.and_then(|v| redis::from_redis_value::<Vec<i64>>(v).map_err(Into::into)) {
        Ok(v) if v.len() == 5 => {
            let mut out = [0u64; 5];
            for (o, x) in out.iter_mut().zip(v) {
                *o = u64::try_from(x).unwrap_or(0);
            }
            Ok(out)
        }
        Ok(v) => Err(StoreError::new(
            StoreErrorKind::Protocol,
            format!("script answered {} values, expected 5", v.len()),
        )),
        // A single server's connection is made again on the next call; the cluster
        // connection reconnects nodes and refreshes its slot map itself.
        Err(e) => Err(redis_error(e, &c, conn).await),
    }
}

/// The store as the policy engine's [`weir_policy::GlobalStore`].
impl weir_policy::GlobalStore for RedisStore {
    fn acquire(
        &self,
        req: weir_policy::StoreRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send>> {
        Box::pin(RedisStore::acquire(self, &req.key, &req.limit, req.cost))
    }

    fn quota(
        &self,
        req: weir_policy::QuotaRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<weir_policy::QuotaReply, StoreError>> + Send>>
    {
        Box::pin(RedisStore::quota(self, req))
    }

    /// A cluster's hash slot of `key`; 0 for the single server.
    fn shard(&self, key: &str) -> u32 {
        if self.inner.cluster {
            u32::from(slot(key))
        } else {
            0
        }
    }
}

/// The [`weir_policy::StoreFactory`] of `[store] kind = "redis"`: a [`RedisStore`] for the
/// section's URL, timeout and lease.
pub fn factory() -> weir_policy::StoreFactory {
    std::sync::Arc::new(|sc: &weir_policy::StoreConfig| {
        if sc.kind != "redis" {
            return Err(config_error(&format!("unknown store kind {:?}", sc.kind)).to_string());
        }
        let store = RedisStore::start(sc.clone()).map_err(|e| e.to_string())?;
        Ok(std::sync::Arc::new(store) as std::sync::Arc<dyn weir_policy::GlobalStore>)
    })
}

/// Gives `engine` the Redis [`factory`] (both frontends call this at start-up): a store is
/// made now when the config has a `[store]`, and the engine makes a new one itself after a
/// reload that changed `[store]`. Without a `[store]`, nothing connects.
pub fn attach(engine: weir_policy::Engine) -> Result<weir_policy::Engine, String> {
    engine.with_store_factory(factory())
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_is_redis_keyslot() {
        // `CLUSTER KEYSLOT` answers (the cluster tests also compare against a live one).
        assert_eq!(super::slot("foo"), 12182);
        assert_eq!(super::slot("123456789"), 12739);
        assert_eq!(super::slot("weir:{ok}:abc"), super::slot("ok"));
        assert_eq!(super::slot("a{}b"), super::slot("a{}b"));
        assert_ne!(super::slot("a{}b"), super::slot(""));
    }
}
