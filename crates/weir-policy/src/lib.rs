//! # weir-policy
//!
//! One runtime-agnostic policy engine and config for every weir frontend (the monoio
//! gateway and the Pingora module): everything of the config, client-visible
//! behaviour, admin API, metrics and access log that does not touch a socket
//! (docs/CONFIG.md and docs/HTTP.md are the user's reference).
//!
//! A frontend only translates: parse the request → [`Engine::begin`] →
//! [`Flow::admit`] → loop { [`Flow::next_attempt`] → perform it → [`Flow::on_attempt`] }
//! → write what the engine built → [`Flow::finish`].
//!
//! ```
//! use std::time::Duration;
//! use weir_policy::{Admission, AttemptResult, Engine, Next, RequestInfo, Timer};
//!
//! let engine = Engine::from_toml(r#"
//!     [log]
//!     access = "off"
//!     [[upstreams]]
//!     name = "blue"
//!     endpoints = ["127.0.0.1:18181"]
//!     [[routes]]
//!     id = "ok"
//!     match = { path_prefix = "/ok" }
//!     upstream = "blue"
//! "#, "demo.toml").unwrap();
//!
//! // The frontend's runtime supplies sleeping (here: a timer that never waits).
//! struct NoWait;
//! impl Timer for NoWait {
//!     async fn sleep(&self, _d: Duration) {}
//! }
//!
//! let headers = [("x-request-id", "req-1")];
//! let req = RequestInfo { method: "GET", path: "/ok?x=1", headers: &headers,
//!                         client_ip: None, body_len: Some(0) };
//! let mut flow = engine.begin(&req);
//! # let block_on = |f| weir_policy::__block_on(f);
//! match block_on(flow.admit(&NoWait)) {
//!     Admission::Proceed => {
//!         let attempt = flow.next_attempt().unwrap();
//!         assert_eq!(attempt.endpoint.to_string(), "127.0.0.1:18181");
//!         // ... connect, send, read the response head ...
//!         match flow.on_attempt(AttemptResult::Response { status: 200 }) {
//!             Next::Forward { headers } => {
//!                 assert!(headers.iter().any(|(k, v)| *k == "x-weir-attempts" && v == "1"));
//!             }
//!             _ => unreachable!(),
//!         }
//!         flow.finish(200, None);
//!     }
//!     Admission::Respond(resp) => { let status = resp.status; flow.finish(status, None); }
//! }
//! assert_eq!(engine.admin("GET", "/healthz").status, 200);
//! ```
//!
//! Time is the engine's clock ([`Engine::now`]); waits go through the frontend's
//! [`Timer`]. Tests run whole scenarios on a `ManualClock` with a timer that advances it.

// Leaves: no `use crate::` of their own beyond other leaves.
mod accesslog;
mod attempt;
mod check;
mod clientaddr;
mod descriptor;
mod dur;
mod metrics;
mod outcome;
mod response;
mod secret;
mod step;
mod store;
mod text;
mod timer;
mod wall;

// Identity runs first: it feeds the rate limit's `consumer` and `claim:NAME` key parts.
pub(crate) mod auth;

// One folder per policy: `layer.rs` (config + compile step), `service.rs` (runtime +
// per-request step), `mod.rs` re-exports only.
pub(crate) mod breaker;
pub(crate) mod concurrency;
pub(crate) mod quota;
pub(crate) mod ratelimit;
pub(crate) mod retry;
pub(crate) mod upstream;

// Above the policies: the compiled set, the file compiler, the runtime, one request, the
// engine.
pub mod config;
mod engine;
mod flow;
pub mod policy;
mod runtime;

#[doc(hidden)]
pub use check::__set_test_env;
pub use check::ConfigError;
pub use descriptor::Headers;
pub use dur::Dur;
pub use engine::{Engine, Overrides, RollbackError, StoreFactory};
pub use flow::{Admission, Attempt, AttemptResult, Flow, Next, RequestInfo};
pub use metrics::FAMILIES;
pub use outcome::Outcome;
pub use policy::{
    AccessLogTarget, Mode, OnStoreError, PolicySet, RoutePolicy, Scope, ServerSettings,
    StoreConfig, StoreTls, UpstreamSettings,
};
pub use response::{GatewayResponse, SimpleResponse};
pub use secret::{REDACTED, Secret, redact_url};
pub use store::{
    GlobalStore, QuotaKeys, QuotaOp, QuotaReply, QuotaRequest, QuotaStatus, StoreError,
    StoreErrorKind, StoreRequest, check_exact, store_key,
};
pub use text::HeaderText;
pub use timer::Timer;
pub use weir_core::{Decision, Jitter, Limit, LimitKind, MAX_SLIDING_LOG_LIMIT, Nanos, Verdict};

/// Polls a future to completion on the current thread (doc examples and tests; frontends
/// use their runtime).
#[doc(hidden)]
pub fn __block_on<F: core::future::Future>(f: F) -> F::Output {
    use core::task::{Context, Poll, Waker};
    let mut f = core::pin::pin!(f);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Fuzz entry for the config parser (cargo-fuzz / proptest drive it): any bytes are
/// either a compiled [`PolicySet`] or a [`ConfigError`] — never a panic — and a set that
/// compiles also satisfies every weir-core constructor the engine will call on it (the
/// engine `expect`s these at load time, so a gap here would be a crash on reload).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn fuzz_config(data: &[u8]) {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    match config::parse(text, "fuzz.toml") {
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.starts_with("fuzz.toml"), "{shown}");
        }
        Ok(set) => {
            for r in &set.routes {
                let total = weir_core::Nanos::from(r.timeouts.total.0);
                if let Some(b) = &r.breaker {
                    breaker::layer::breaker_config(b, total)
                        .expect("breaker accepted by the compiler");
                }
                retry::layer::budget_config(&r.retry.budget)
                    .expect("budget accepted by the compiler");
                retry::layer::backoff(&r.retry.backoff).expect("backoff accepted by the compiler");
                if let Some(rl) = &r.rate_limit {
                    // The limit is a validated core config; its local table must build.
                    ratelimit::local::keyed_limiter(&rl.limit, 1)
                        .expect("limit accepted by the compiler");
                }
                assert!(r.timeouts.per_try <= r.timeouts.total);
                assert!(set.upstream(&r.upstream).is_some());
            }
            let _ = set.describe();
            let _ = serde_json::to_string(&set).expect("serializable");
        }
    }
}

/// Fuzz entry for quota-ledger recovery: `data` as a whole ledger file is read without a
/// panic (a torn tail is reported, never a panic); and a file of valid records built from
/// `data`, cut at any byte or with any byte flipped, recovers exactly the records before
/// the damage — refused (naming the damaged record's offset) only when a good record
/// follows the damage.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn fuzz_ledger(data: &[u8]) {
    use quota::ledger::{Event, Kind, frame, scan};
    if let Ok(s) = scan(data) {
        assert!(s.good_len <= data.len() as u64);
        assert_eq!(
            s.torn.map_or(s.good_len, |t| s.good_len + t),
            data.len() as u64
        );
    }
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let records: Vec<Vec<u8>> = (0..usize::from(n % 8) + 1)
        .map(|i| {
            let b = |j: usize| rest.get(i * 3 + j).copied().unwrap_or(0);
            frame(&Event {
                ts: "2026-12-02T00:00:00.000Z".into(),
                period: "2026-12".into(),
                route: "r".into(),
                key_digest: format!("{:032x}", b(0)),
                event_id: (b(1) % 2 == 0).then(|| format!("e{}", b(1))),
                kind: if b(2) % 3 == 0 {
                    Kind::Adjust
                } else {
                    Kind::Consume
                },
                amount: i64::from(b(2)) - 100,
                revision: 1,
                instance: "fuzz".into(),
            })
        })
        .collect();
    let file: Vec<u8> = records.concat();
    let starts: Vec<usize> = records
        .iter()
        .scan(0, |at, r| {
            let s = *at;
            *at += r.len();
            Some(s)
        })
        .collect();
    let pick = |k: usize| {
        let v = rest
            .iter()
            .rev()
            .take(4)
            .fold(0usize, |a, &b| a << 8 | usize::from(b));
        (v ^ k) % file.len()
    };
    // Cut at any byte: the records wholly before the cut survive.
    let cut = pick(0);
    let s = scan(&file[..cut]).expect("a cut file is a torn tail, never corrupt");
    let whole = starts
        .iter()
        .zip(&records)
        .filter(|(s, r)| *s + r.len() <= cut)
        .count();
    assert_eq!(s.events.len(), whole);
    // Flip one byte: the damaged record and what it swallows are lost, nothing else.
    let at = pick(0x5bd1_e995);
    let mut bad = file.clone();
    bad[at] ^= rest.first().copied().unwrap_or(1).max(1);
    let hit = starts.iter().rposition(|&s| s <= at).unwrap_or(0);
    match scan(&bad) {
        // (`a` → `A` in a checksum still reads as the same number: nothing lost.)
        Ok(s) => {
            assert!(s.events.len() == hit || s.events.len() == records.len());
            let all = scan(&file).expect("valid").events;
            assert_eq!(s.events[..], all[..s.events.len()]);
        }
        Err(c) => assert_eq!(c.offset, starts[hit] as u64),
    }
}

/// Fuzz entry for token parsing: any bytes, as a bearer token, a JWKS document or an
/// API-key file, are verified or refused — never a panic — and nothing but a correctly
/// signed token verifies (the fuzzer cannot forge HS256, so none may).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn fuzz_token(data: &[u8]) {
    static SET: std::sync::OnceLock<PolicySet> = std::sync::OnceLock::new();
    let set = SET.get_or_init(|| {
        check::__set_test_env("WEIR_FUZZ_HS256_SECRET", "fuzz-secret-not-guessable-7f3a");
        let text = config::writer::ConfigText::new()
            .jwt(
                "fuzz",
                config::writer::JwtKeys::SecretEnv("WEIR_FUZZ_HS256_SECRET"),
            )
            .set("issuer", "fuzz")
            .set("audience", "weir")
            .upstream("u", "127.0.0.1:1")
            .route("r", "/", "u")
            .auth("fuzz", &["read"])
            .render();
        config::parse(&text, "fuzz.toml").expect("fuzz identity compiles")
    });
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    let id = &set.identities[0];
    assert!(auth::service::verify_jwt(id, text, 1_800_000_000).is_err());
    let header = format!("Bearer {text}");
    if let Some(a) = &set.routes[0].auth {
        let h = [("authorization", header.as_str())];
        let f = auth::service::authenticate(a, &h, 1_800_000_000).expect_err("no forgery");
        // One of the fixed challenges: nothing of the token is echoed.
        assert!(
            matches!(
                f.challenge.as_str(),
                "Bearer" | "Bearer error=\"invalid_token\""
            ),
            "{}",
            f.challenge
        );
    }
    let _ = auth::layer::parse_jwks(text);
    let _ = auth::layer::parse_key_file(text);
}

/// Benchmarks of the identity step (`bench/benches/auth.rs`): one verification of `token`
/// by the set's first identity, without (`cached = false`) or through this thread's
/// verified-token cache; `true` when it verified.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn __bench_verify(set: &PolicySet, token: &str, cached: bool) -> bool {
    let id = &set.identities[0];
    let now = auth::service::unix_now();
    if cached {
        auth::service::verify_cached(id, token, now).is_ok()
    } else {
        auth::service::verify_jwt(id, token, now).is_ok()
    }
}

/// Benchmarks: the first route's whole auth step (credential lookup, verification through
/// the cache, scopes) on these request headers; `true` when it passed.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn __bench_authenticate(set: &PolicySet, headers: &dyn Headers) -> bool {
    set.routes[0]
        .auth
        .as_ref()
        .is_some_and(|a| auth::service::authenticate(a, headers, auth::service::unix_now()).is_ok())
}

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    fn is_sync<T: Send + Sync>() {}
    is_send::<Flow>();
    is_sync::<Engine>();
}

/// A frontend on a work-stealing runtime (Pingora's) holds `admit` across an `.await` in a
/// `Send` future: the walk over the statically dispatched steps must stay `Send`.
#[allow(dead_code)]
fn _assert_admit_send(flow: &mut Flow) {
    struct NoWait;
    impl Timer for NoWait {
        async fn sleep(&self, _d: std::time::Duration) {}
    }
    fn is_send<T: Send>(_: &T) {}
    is_send(&flow.admit(&NoWait));
}
