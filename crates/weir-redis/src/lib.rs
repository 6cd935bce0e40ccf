//! # weir-redis — one limit across gateway instances, on Redis
//!
//! Two replicas with a local bucket of 2 admit 4 (seeds 000, 002). A [`RedisStore`] makes
//! every instance consume from one counter per descriptor in Redis instead:
//!
//! * **Same algorithms as the core, on the server's clock.** Each decision is one atomic
//!   Lua script ([`scripts`]) reading Redis' `TIME`, so instance clocks never arbitrate.
//!   The token bucket is exact (integer units of `1/per_us` tokens, no rounded emission
//!   interval); fixed window and sliding-window counter match `weir-core`'s definitions.
//!   Keys expire exactly when their state is equivalent to a fresh one, so state is
//!   bounded by the set of *active* descriptors.
//! * **Cluster-ready keys.** The engine passes keys like `weir:{route:digest}`; the hash
//!   tag keeps a key's data in one slot.
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
//! (`docs/BENCHMARKS.md`).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use weir_core::{Clock, Decision, Nanos, StdClock, Verdict};

pub mod scripts;

/// A limit evaluated in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// GCRA / token bucket: `rate` per `per`, capacity `burst`.
    TokenBucket {
        /// Admissions per `per`.
        rate: u64,
        /// The period.
        per: Nanos,
        /// Capacity.
        burst: u64,
    },
    /// Fixed window of `window` admitting `limit`.
    FixedWindow {
        /// Units per window.
        limit: u64,
        /// Window length.
        window: Nanos,
    },
    /// Sliding-window counter (weighted previous window).
    SlidingWindow {
        /// Units per window.
        limit: u64,
        /// Window length.
        window: Nanos,
    },
    /// Leaky bucket with nginx `limit_req` semantics.
    LeakyBucket {
        /// Requests per `per`.
        rate: u64,
        /// The period.
        per: Nanos,
        /// Excess requests accepted (queued).
        burst: u64,
        /// Excess passed without delay.
        delay: u64,
        /// Pass all accepted excess at once.
        nodelay: bool,
    },
    /// Exact sliding log (a sorted set of instants; `limit` ≤ [`MAX_LOG_LIMIT`]).
    SlidingLog {
        /// Units per window.
        limit: u64,
        /// Window length.
        window: Nanos,
    },
}

/// Largest `limit` of a global sliding log: each admitted unit is a sorted-set member.
pub const MAX_LOG_LIMIT: u64 = 100_000;

/// 2^53: integers below this are exact in Redis' Lua numbers.
const LUA_EXACT: u128 = 1 << 53;

impl Limit {
    /// Checks that the limit can be evaluated exactly by the scripts: whole microseconds,
    /// non-zero parameters, and every intermediate below 2^53.
    pub fn validate(&self) -> Result<(), StoreError> {
        let bad = |m: &str| Err(StoreError::config(m));
        match *self {
            Limit::TokenBucket { rate, per, burst } => {
                let per_us = per.as_u64() / 1_000;
                if rate == 0 || burst == 0 || per_us == 0 {
                    return bad("token bucket needs rate, burst and per (>= 1us) above zero");
                }
                if u128::from(burst) * u128::from(per_us) >= LUA_EXACT
                    || u128::from(rate) * u128::from(per_us) >= LUA_EXACT
                {
                    return bad(
                        "token bucket too large for exact evaluation in Redis (burst x per_us >= 2^53)",
                    );
                }
            }
            Limit::LeakyBucket {
                rate, per, burst, ..
            } => {
                let per_us = per.as_u64() / 1_000;
                if rate == 0 || per_us == 0 {
                    return bad("leaky bucket needs rate and per (>= 1us) above zero");
                }
                if (u128::from(burst) + 2) * u128::from(per_us) >= LUA_EXACT
                    || u128::from(rate) * u128::from(per_us) >= LUA_EXACT
                {
                    return bad(
                        "leaky bucket too large for exact evaluation in Redis ((burst + 2) x per_us >= 2^53)",
                    );
                }
            }
            Limit::SlidingLog { limit, window }
                if limit > MAX_LOG_LIMIT || window.as_u64() < 1_000 || limit == 0 =>
            {
                return bad("sliding log needs 1 <= limit <= 100000 and window >= 1us");
            }
            Limit::FixedWindow { limit, window }
            | Limit::SlidingWindow { limit, window }
            | Limit::SlidingLog { limit, window } => {
                let win_us = window.as_u64() / 1_000;
                if limit == 0 || win_us == 0 {
                    return bad("window needs limit and window (>= 1us) above zero");
                }
                if u128::from(limit) * u128::from(win_us) >= LUA_EXACT {
                    return bad(
                        "window too large for exact evaluation in Redis (limit x window_us >= 2^53)",
                    );
                }
            }
        }
        Ok(())
    }

    fn capacity(&self) -> u64 {
        match *self {
            Limit::TokenBucket { burst, .. } => burst,
            Limit::LeakyBucket { burst, .. } => burst.saturating_add(1),
            Limit::FixedWindow { limit, .. }
            | Limit::SlidingWindow { limit, .. }
            | Limit::SlidingLog { limit, .. } => limit,
        }
    }
}

/// Why the store could not answer. Never a rate-limit denial.
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
    /// Could not connect, or the connection broke.
    Unavailable,
    /// Redis answered with an error, or an answer of the wrong shape.
    Protocol,
    /// The limit or the URL cannot be used.
    Config,
}

impl StoreError {
    fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            message: message.into(),
        }
    }
    fn config(m: &str) -> Self {
        Self::new(StoreErrorKind::Config, m)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Settings of a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://host:port/db`.
    pub url: String,
    /// Bound on every call, connecting included.
    pub timeout: Duration,
    /// Tokens an instance may take at once per key (0 = ask every time). Token buckets only.
    pub lease: u64,
}

struct Job {
    script: Which,
    key: String,
    args: [u64; 6],
    nargs: usize,
    reply: oneshot::Sender<Result<[u64; 5], StoreError>>,
}

#[derive(Clone, Copy)]
enum Which {
    TokenBucket,
    FixedWindow,
    SlidingWindow,
    LeakyBucket,
    SlidingLog,
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
    tx: mpsc::UnboundedSender<Job>,
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
        let client = redis::Client::open(settings.url.as_str()).map_err(|e| {
            StoreError::new(StoreErrorKind::Config, format!("invalid store url: {e}"))
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let timeout = settings.timeout;
        std::thread::Builder::new()
            .name("weir-redis".into())
            .spawn(move || client_thread(client, rx, timeout))
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!("cannot start client thread: {e}"),
                )
            })?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                tx,
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
            if inner.tx.send(job).is_err() {
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    "client thread stopped",
                ));
            }
            let out = rx.await.map_err(|_| {
                StoreError::new(
                    StoreErrorKind::Unavailable,
                    "client thread dropped the request",
                )
            })??;
            Ok(inner.absorb(&key, &limit, cost, out))
        }
    }

    fn prepare(&self, key: &str, limit: &Limit, cost: u64) -> Prepared {
        if let Err(e) = limit.validate() {
            return Prepared::Done(Err(e));
        }
        if cost > limit.capacity() {
            return Prepared::Done(Err(StoreError::config("cost exceeds the limit's capacity")));
        }
        let ms = |n: Nanos| n.as_u64() / 1_000;
        let (which, args, nargs): (Which, [u64; 6], usize) = match *limit {
            Limit::TokenBucket { rate, per, burst } => {
                if self.inner.lease > 0
                    && let Some(d) = self.inner.spend_lease(key, cost)
                {
                    return Prepared::Done(Ok(d));
                }
                let want = cost.max(self.inner.lease).min(burst);
                (Which::TokenBucket, [rate, ms(per), burst, cost, want, 0], 5)
            }
            Limit::FixedWindow { limit, window } => {
                (Which::FixedWindow, [limit, ms(window), cost, 0, 0, 0], 3)
            }
            Limit::SlidingWindow { limit, window } => {
                (Which::SlidingWindow, [limit, ms(window), cost, 0, 0, 0], 3)
            }
            Limit::SlidingLog { limit, window } => {
                (Which::SlidingLog, [limit, ms(window), cost, 0, 0, 0], 3)
            }
            Limit::LeakyBucket {
                rate,
                per,
                burst,
                delay,
                nodelay,
            } => (
                Which::LeakyBucket,
                [rate, ms(per), burst, delay, u64::from(nodelay), cost],
                6,
            ),
        };
        let (reply, rx) = oneshot::channel();
        Prepared::Send(
            Job {
                script: which,
                key: key.to_owned(),
                args,
                nargs,
                reply,
            },
            rx,
        )
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
            && let Limit::TokenBucket { rate, per, .. } = *limit
            && self.lease > 0
            && taken > cost
        {
            extra = taken - cost;
            // The refill horizon of `p` tokens, at least a second (see the crate docs).
            let ttl = Nanos(
                ((u128::from(per.as_u64()) * u128::from(self.lease)) / u128::from(rate))
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
            (1, Limit::LeakyBucket { .. }) if taken > 0 => {
                Verdict::Delay(Nanos::from_micros(taken))
            }
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

fn client_thread(client: redis::Client, mut rx: mpsc::UnboundedReceiver<Job>, timeout: Duration) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return, // every request then fails with "client thread stopped"
    };
    let scripts = Arc::new([
        redis::Script::new(scripts::TOKEN_BUCKET),
        redis::Script::new(scripts::FIXED_WINDOW),
        redis::Script::new(scripts::SLIDING_WINDOW),
        redis::Script::new(scripts::LEAKY_BUCKET),
        redis::Script::new(scripts::SLIDING_LOG),
    ]);
    let conn: Arc<tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>> =
        Arc::new(tokio::sync::Mutex::new(None));
    rt.block_on(async move {
        while let Some(job) = rx.recv().await {
            let client = client.clone();
            let conn = conn.clone();
            let scripts = scripts.clone();
            tokio::spawn(async move {
                let out =
                    match tokio::time::timeout(timeout, run_job(&client, &conn, &scripts, &job))
                        .await
                    {
                        Ok(r) => r,
                        Err(_) => Err(StoreError::new(
                            StoreErrorKind::Timeout,
                            format!("no answer within {} ms", timeout.as_millis()),
                        )),
                    };
                let _ = job.reply.send(out);
            });
        }
    });
}

async fn run_job(
    client: &redis::Client,
    conn: &tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
    scripts: &[redis::Script; 5],
    job: &Job,
) -> Result<[u64; 5], StoreError> {
    let mut c = {
        let mut guard = conn.lock().await;
        match guard.as_ref() {
            Some(c) => c.clone(),
            None => {
                let cfg = redis::AsyncConnectionConfig::new();
                let c = client
                    .get_multiplexed_async_connection_with_config(&cfg)
                    .await
                    .map_err(|e| {
                        StoreError::new(StoreErrorKind::Unavailable, format!("connect: {e}"))
                    })?;
                *guard = Some(c.clone());
                c
            }
        }
    };
    let script = &scripts[job.script as usize];
    let mut inv = script.key(&job.key);
    if let Which::SlidingLog = job.script {
        inv.key(format!("{}:seq", job.key));
    }
    for a in &job.args[..job.nargs] {
        inv.arg(*a);
    }
    match inv.invoke_async::<Vec<i64>>(&mut c).await {
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
        Err(e) => {
            if e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_timeout()
            {
                *conn.lock().await = None;
                Err(StoreError::new(StoreErrorKind::Unavailable, e.to_string()))
            } else {
                Err(StoreError::new(StoreErrorKind::Protocol, e.to_string()))
            }
        }
    }
}

/// The store as the policy engine's [`weir_policy::GlobalStore`].
impl weir_policy::GlobalStore for RedisStore {
    fn acquire(
        &self,
        req: weir_policy::StoreRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Decision, weir_policy::StoreError>> + Send>>
    {
        use weir_policy::GlobalLimit as G;
        let limit = match req.limit {
            G::TokenBucket { rate, per, burst } => Limit::TokenBucket { rate, per, burst },
            G::FixedWindow { limit, window } => Limit::FixedWindow { limit, window },
            G::SlidingWindow { limit, window } => Limit::SlidingWindow { limit, window },
            G::SlidingLog { limit, window } => Limit::SlidingLog { limit, window },
            G::LeakyBucket {
                rate,
                per,
                burst,
                delay,
                nodelay,
            } => Limit::LeakyBucket {
                rate,
                per,
                burst,
                delay,
                nodelay,
            },
        };
        let fut = RedisStore::acquire(self, &req.key, &limit, req.cost);
        Box::pin(async move {
            fut.await
                .map_err(|e| weir_policy::StoreError(e.to_string()))
        })
    }
}

/// Installs a Redis store on `engine` when its config has a `[store]` of kind `redis`
/// (both frontends call this at start-up). Without a `[store]`, returns the engine as is.
pub fn attach(engine: weir_policy::Engine) -> Result<weir_policy::Engine, StoreError> {
    let Some(sc) = engine.store_config() else {
        return Ok(engine);
    };
    if sc.kind != "redis" {
        return Err(StoreError::config(&format!(
            "unknown store kind {:?}",
            sc.kind
        )));
    }
    let store = RedisStore::start(RedisSettings {
        url: sc.url.clone(),
        timeout: sc.timeout,
        lease: sc.lease,
    })?;
    Ok(engine.with_store(std::sync::Arc::new(store)))
}
