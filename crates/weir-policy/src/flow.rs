//! One request through the engine: admission, attempts, the final response, the record.
//!
//! Auth is decided when the request begins ([`crate::auth::service`], in
//! [`Engine::begin`](crate::Engine::begin), because a key may name the verified consumer).
//! Then [`Flow::admit`] walks the admission steps — quota gate, rate limit, concurrency,
//! breaker — each a [`crate::step::Step`] whose per-request state lives in its policy's
//! folder (`quota/step.rs`, `ratelimit/step.rs`, `concurrency/step.rs`, `breaker/step.rs`);
//! the flow only lists them (`Steps`), in order. [`Flow::on_attempt`] asks the retry step
//! ([`crate::retry::service`]). The flow itself owns what no step decides — the route, the
//! request id, the deadline, the attempt loop, the fallback — and turns the steps'
//! refusals into responses, metrics and the access-log record.

use crate::accesslog::{AttemptRec, Record, rfc3339_ms};
pub use crate::attempt::AttemptResult;
use crate::auth::service::{Verified, authenticate, result_label};
use crate::breaker::step::BreakerStep;
use crate::concurrency::step::ConcurrencyStep;
use crate::descriptor::{Descriptor, Headers};
use crate::dur::secs_ceil;
use crate::outcome::Outcome;
use crate::policy::UpstreamSettings;
use crate::quota::step::QuotaStep;
use crate::ratelimit::step::RateStep;
use crate::response::{
    ErrorIds, GatewayResponse, NO_ROUTE_JSON, acceptable_request_id, error_response,
    fallback_response,
};
use crate::retry::service::{Ended, RetryState};
use crate::runtime::{Live, RouteRuntime, Shared};
use crate::step::{self, Refusal, StepCtx, StepEnv, StepRequest};
use crate::text::HeaderText;
use crate::timer::Timer;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use weir_core::{Deadline, Nanos, Rng, SplitMix64};

/// What the frontend knows about a request when it starts.
#[derive(Clone, Copy)]
pub struct RequestInfo<'a> {
    /// Method as received.
    pub method: &'a str,
    /// Target as received; the engine strips the query for matching and logging.
    pub path: &'a str,
    /// Request headers (case-insensitive lookup).
    pub headers: &'a dyn Headers,
    /// The client's address.
    pub client_ip: Option<IpAddr>,
    /// `Some(n)` for a Content-Length (or no body: 0); `None` for a chunked body.
    pub body_len: Option<u64>,
}

/// The outcome of [`Flow::admit`].
#[derive(Debug)]
pub enum Admission {
    /// Go on: call [`Flow::next_attempt`].
    Proceed,
    /// Write this response (429, 403, 503, fallback, ...) and call [`Flow::finish`].
    Respond(GatewayResponse),
}

/// One upstream attempt to perform.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The route's upstream.
    pub upstream: Arc<UpstreamSettings>,
    /// The endpoint to use (`balance`, skipping ejected endpoints; a retry avoids the
    /// endpoint the previous attempt failed on).
    pub endpoint: SocketAddr,
    /// `min(connect_timeout, per_try)`.
    pub connect_timeout: Duration,
    /// Until response headers: `min(per_try, remaining total)`.
    pub per_try_timeout: Duration,
    /// 1-based attempt number.
    pub number: u32,
    /// Headers to add to the upstream request (`x-request-id`, `x-weir-budget-ms`).
    pub request_headers: Vec<(&'static str, HeaderText)>,
}

/// What to do after an attempt.
#[derive(Debug)]
pub enum Next {
    /// Forward this upstream response to the client, adding these headers.
    Forward {
        /// `x-weir-attempts`, ids, `RateLimit` fields, ...
        headers: Vec<(&'static str, HeaderText)>,
    },
    /// Wait this long (backoff), then call [`Flow::next_attempt`] again.
    Retry {
        /// The backoff delay.
        backoff: Duration,
    },
    /// Write this response (504, 502, fallback, ...).
    Respond(GatewayResponse),
}

/// The admission steps of a request, in the order [`Flow::admit`] walks them. Each
/// step's state and behaviour live in its policy's folder (`quota/step.rs`, ...), behind
/// the one shape of [`crate::step::Step`]; here they are only listed.
#[derive(Default)]
struct Steps {
    quota: QuotaStep,
    rate: RateStep,
    concurrency: ConcurrencyStep,
    breaker: BreakerStep,
}

impl Steps {
    /// When the request begins: each step reads its key and cost (auth has already run:
    /// a key may name the verified consumer).
    fn prepare(&mut self, r: &RouteRuntime, q: &StepRequest<'_>) -> Result<(), Outcome> {
        let (p, s) = (&r.policy, self);
        step::prepare(&mut s.quota, p.quota.as_ref(), r.quota.as_ref(), q)?;
        let rate = (p.rate_limit.as_ref(), r.rate_limit.as_ref());
        step::prepare(&mut s.rate, rate.0, rate.1, q)?;
        let conc = (p.concurrency.as_ref(), r.concurrency.as_ref());
        step::prepare(&mut s.concurrency, conc.0, conc.1, q)?;
        step::prepare(&mut s.breaker, p.breaker.as_ref(), r.breaker.as_ref(), q)
    }

    /// Admission: quota gate, rate limit (with any shaping delay), concurrency (with its
    /// queue), breaker. The first refusal stops the walk.
    async fn admit<T: Timer>(
        &mut self,
        r: &RouteRuntime,
        c: &mut StepCtx<'_, T>,
    ) -> Result<(), Refusal> {
        let (p, s) = (&r.policy, self);
        step::admit(&mut s.quota, p.quota.as_ref(), r.quota.as_ref(), c).await?;
        let rate = (p.rate_limit.as_ref(), r.rate_limit.as_ref());
        step::admit(&mut s.rate, rate.0, rate.1, c).await?;
        let conc = (p.concurrency.as_ref(), r.concurrency.as_ref());
        step::admit(&mut s.concurrency, conc.0, conc.1, c).await?;
        step::admit(&mut s.breaker, p.breaker.as_ref(), r.breaker.as_ref(), c).await
    }

    /// What the steps hold goes back (`consume`: the quota unit is spent), latest first.
    fn release(&mut self, r: &RouteRuntime, consume: bool, e: &StepEnv<'_>) {
        let (p, s, k) = (&r.policy, self, consume);
        step::release(&mut s.breaker, p.breaker.as_ref(), r.breaker.as_ref(), k, e);
        let conc = (p.concurrency.as_ref(), r.concurrency.as_ref());
        step::release(&mut s.concurrency, conc.0, conc.1, k, e);
        let rate = (p.rate_limit.as_ref(), r.rate_limit.as_ref());
        step::release(&mut s.rate, rate.0, rate.1, k, e);
        step::release(&mut s.quota, p.quota.as_ref(), r.quota.as_ref(), k, e);
    }
}

/// What every step of the request shares: built from the flow's fields (not `&self`, so
/// the steps and the collected fields can be borrowed mutably beside it).
fn step_env<'a>(
    shared: &'a Shared,
    live: &'a Live,
    route: &'a RouteRuntime,
    deadline: Deadline,
) -> StepEnv<'a> {
    StepEnv {
        clock: &shared.clock,
        deadline,
        route_id: &route.policy.id,
        metrics: &route.metrics,
        store: &shared.store,
        store_timeout: live.store_timeout(),
        revision: live.revision,
        instance: &live.set.server.instance,
        bare: shared.bare,
    }
}

/// The auth step's part of a request.
#[derive(Default)]
struct AuthState {
    verified: Option<Arc<Verified>>,
    /// `WWW-Authenticate` of a failure.
    challenge: Option<String>,
}

/// The frontend's headers with the verified identity's key parts.
struct WithIdentity<'a> {
    headers: &'a dyn Headers,
    verified: Option<&'a Verified>,
}

impl Headers for WithIdentity<'_> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.headers.get(name)
    }
    fn for_each(&self, name: &str, f: &mut dyn FnMut(&[u8])) {
        self.headers.for_each(name, f);
    }
    fn consumer(&self) -> Option<&[u8]> {
        self.verified.map(|v| v.consumer.as_bytes())
    }
    fn claim(&self, name: &str) -> Option<&[u8]> {
        self.verified?.claim(name).map(str::as_bytes)
    }
}

/// The attempt in progress.
struct AttemptState {
    number: u32,
    started: Nanos,
    /// Its per-try timeout was cut by the total deadline.
    capped: bool,
    /// Its endpoint (index in the upstream), while it counts as in flight there.
    endpoint: Option<usize>,
    /// The endpoint the previous attempt failed on: a retry goes elsewhere if it can.
    avoid: Option<usize>,
}

/// What only the access log needs.
#[derive(Default)]
struct LogState {
    method: String,
    path: String,
    /// The client's address (behind trusted proxies: the one they named).
    client: Option<core::net::IpAddr>,
    attempts: Vec<AttemptRec>,
}

/// One request in progress. `Send`; holds its config snapshot, permit and log fields.
pub struct Flow {
    shared: Arc<Shared>,
    live: Arc<Live>,
    route: Option<Arc<RouteRuntime>>,
    request_id: HeaderText,
    /// The TCP peer and the `X-Forwarded-For` list the request came with (empty: none; no
    /// allocation then), from which an attempt's `X-Forwarded-For` is made.
    forwarded: (Option<core::net::IpAddr>, String),
    begin: Nanos,
    deadline: Deadline,
    /// Decided before admission (no route, a key error).
    early: Option<Outcome>,
    auth: AuthState,
    steps: Steps,
    /// Header fields for every response of this request, collected by the steps
    /// (`RateLimit` fields, the bypass marker).
    fields: Vec<(&'static str, HeaderText)>,
    /// `None` without a route.
    retry: Option<RetryState>,
    attempt: AttemptState,
    /// Draws for the endpoint choice (`least_request`) and ejection jitter.
    draws: SplitMix64,
    log: LogState,
    inflight: bool,
    outcome: Option<Outcome>,
    finished: bool,
}

fn ns(d: Duration) -> Nanos {
    Nanos::from(d)
}

/// The `X-Forwarded-For` list a request came with (every line, in order, joined by `", "`,
/// with a trailing `", "`); empty — and not allocated — when it has none, the usual case.
fn forwarded_in(headers: &dyn Headers) -> String {
    let mut v = String::new();
    headers.for_each("x-forwarded-for", &mut |line| {
        if let Ok(line) = core::str::from_utf8(line) {
            let line = line.trim();
            if !line.is_empty() {
                v.push_str(line);
                v.push_str(", ");
            }
        }
    });
    v
}

/// The `X-Forwarded-For` an upstream gets: the list the request came with with the TCP peer
/// appended, as every proxy in a chain does; `None` without a peer address. Made per
/// attempt, so a request refused before any attempt (a 429) never formats it.
fn forwarded_for((peer, inbound): &(Option<core::net::IpAddr>, String)) -> Option<HeaderText> {
    use core::fmt::Write as _;
    let peer = (*peer)?;
    let mut v = String::with_capacity(inbound.len() + 40);
    v.push_str(inbound);
    let _ = write!(v, "{peer}");
    Some(HeaderText::from(v))
}

impl Flow {
    pub(crate) fn begin(shared: Arc<Shared>, req: &RequestInfo<'_>) -> Flow {
        let live = shared.live.load_full();
        let now = shared.clock.now();
        let path = req.path.split(['?', '#']).next().unwrap_or(req.path);
        // The method and path are kept only for the access-log record.
        let log = if shared.log.enabled() {
            LogState {
                method: req.method.to_string(),
                path: path.to_string(),
                ..LogState::default()
            }
        } else {
            LogState::default()
        };
        // A bare flow (a simulation) sends no header, so it needs no id.
        let request_id = if shared.bare {
            HeaderText::default()
        } else {
            req.headers
                .get("x-request-id")
                .and_then(acceptable_request_id)
                .map(|id| HeaderText::from(id.to_string()))
                .unwrap_or_else(|| shared.new_request_id())
        };
        let client = crate::clientaddr::client_address(
            req.client_ip,
            req.headers,
            &live.set.server.trusted_proxies,
        );
        // A bare flow (a simulation) sends no header.
        let forwarded = if shared.bare {
            (None, String::new())
        } else {
            (req.client_ip, forwarded_in(req.headers))
        };
        let route = live
            .set
            .route_for(req.method, path)
            .map(|(i, _)| live.routes[i].clone());
        let seq = shared.flows.fetch_add(1, Ordering::Relaxed);
        let rng = SplitMix64::new(shared.seed ^ seq.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let draws = SplitMix64::new(shared.seed ^ seq.rotate_left(29) ^ 0x5851_F42D_4C95_7F2D);
        let mut f = Flow {
            shared,
            live,
            route: None,
            request_id,
            forwarded,
            begin: now,
            deadline: Deadline::new(now, Nanos::ZERO),
            early: None,
            auth: AuthState::default(),
            steps: Steps::default(),
            fields: Vec::new(),
            retry: None,
            attempt: AttemptState {
                number: 0,
                started: now,
                capped: false,
                endpoint: None,
                avoid: None,
            },
            draws,
            log,
            inflight: false,
            outcome: None,
            finished: false,
        };
        f.log.client = client;
        let Some(route) = route else {
            f.early = Some(Outcome::NoRoute);
            return f;
        };
        let p = &route.policy;
        f.deadline = Deadline::new(now, ns(p.timeouts.total.0));
        let idempotent = p
            .retry
            .methods
            .iter()
            .any(|m| m.eq_ignore_ascii_case(req.method))
            || req
                .headers
                .get(&p.retry.idempotency_header)
                .is_some_and(|v| !v.is_empty());
        let replayable = req.body_len.is_some_and(|n| n <= p.retry.max_replay_bytes);
        f.retry = Some(route.retry.start(idempotent, replayable, rng));
        // Auth first: a request that fails it consumes nothing anywhere.
        if let Some(a) = &p.auth {
            let res = authenticate(a, req.headers, f.shared.clock.unix_secs());
            route
                .metrics
                .auth(result_label(res.as_ref().err().map(|e| e.outcome)));
            match res {
                Ok(v) => f.auth.verified = Some(v),
                Err(fail) => {
                    f.early = Some(fail.outcome);
                    f.auth.challenge = Some(fail.challenge);
                    f.route = Some(route);
                    return f;
                }
            }
        }
        let with_identity = WithIdentity {
            headers: req.headers,
            verified: f.auth.verified.as_deref(),
        };
        let req = StepRequest {
            route_id: &p.id,
            method: req.method,
            headers: &with_identity,
            client,
            table_key: f.shared.table_key,
            metrics: &route.metrics,
        };
        if let Err(o) = f.steps.prepare(&route, &req) {
            f.early = Some(o);
        }
        f.route = Some(route);
        f
    }

    /// The matched route id (`None`: no route, the answer will be 404).
    pub fn route(&self) -> Option<&str> {
        self.route.as_ref().map(|r| r.policy.id.as_str())
    }

    /// The request id (kept from the request or generated; empty on a simulation's
    /// engine, which sends no headers).
    pub fn request_id(&self) -> &str {
        self.request_id.as_str()
    }

    /// The config revision this request runs under.
    pub fn revision(&self) -> u64 {
        self.live.revision
    }

    /// How the request ended so far (`None` until a step decided: the `outcome` label
    /// [`finish`](Self::finish) will count, `aborted` when it stays `None`).
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// Time spent in the concurrency queue (the access log's `queue_ms`).
    pub fn queue_time(&self) -> Duration {
        self.steps.concurrency.queued.into()
    }

    fn route_id(&self) -> &str {
        self.route.as_ref().map_or("-", |r| r.policy.id.as_str())
    }

    fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    fn instance(&self) -> &str {
        &self.live.set.server.instance
    }

    /// `[server] evidence_headers`: whether responses carry `x-weir-instance` and
    /// `x-weir-attempts`.
    fn evidence(&self) -> bool {
        self.live.set.server.evidence_headers
    }

    /// A simulation's engine: responses carry their status only ([`Shared::bare`]).
    fn bare(&self) -> bool {
        self.shared.bare
    }

    /// A gateway error response with the flow's extra headers (and `retry-after` when the
    /// client is told when to come back); records the outcome. The response is the
    /// request's last, so the RateLimit fields move into it.
    fn reject_with(&mut self, outcome: Outcome, retry_after: Option<u64>) -> GatewayResponse {
        self.outcome = Some(outcome);
        if self.bare() {
            return GatewayResponse::bare(outcome.status());
        }
        let mut r = error_response(
            outcome.status(),
            outcome.as_str(),
            self.error_ids(),
            retry_after,
        );
        r.headers.append(&mut self.fields);
        if let Some(t) = retry_after {
            r.headers.push(("retry-after", HeaderText::from_u64(t)));
        }
        r
    }

    /// The ids a response the gateway makes carries, prepared per revision.
    fn error_ids(&self) -> ErrorIds<'_> {
        let route = self.route.as_ref().map_or(NO_ROUTE_JSON, |r| &r.id_json);
        self.live.error_ids(route, &self.request_id)
    }

    /// The response to a step's refusal.
    fn refuse(&mut self, r: Refusal) -> GatewayResponse {
        if r.fallback {
            self.fallback_or(r.outcome, r.retry_after)
        } else {
            self.reject_with(r.outcome, r.retry_after)
        }
    }

    /// The fallback when configured, else the gateway error.
    fn fallback_or(&mut self, outcome: Outcome, retry_after: Option<u64>) -> GatewayResponse {
        let fb = self.route.as_ref().and_then(|r| r.policy.fallback.clone());
        match fb {
            Some(f) => {
                self.outcome = Some(Outcome::Fallback);
                if self.bare() {
                    return GatewayResponse::bare(f.status);
                }
                let ids = self.error_ids();
                let mut r = fallback_response(&f, outcome.as_str(), ids.instance, ids.request_id);
                r.headers.append(&mut self.fields);
                r
            }
            None => self.reject_with(outcome, retry_after),
        }
    }

    /// The policy steps in order (quota gate, rate limit with any
    /// shaping delay, concurrency with its queue, breaker), each answering "go on" or a
    /// refusal, which this turns into the response.
    ///
    /// Waits use `timer` and count against the total deadline.
    pub async fn admit<T: Timer>(&mut self, timer: &T) -> Admission {
        if let Some(o) = self.early {
            let mut r = self.reject_with(o, None);
            if let Some(c) = self.auth.challenge.take()
                && !self.bare()
            {
                r.headers.push(("www-authenticate", c.into()));
            }
            return Admission::Respond(r);
        }
        let Some(route) = self.route.clone() else {
            return Admission::Respond(self.reject_with(Outcome::NoRoute, None));
        };
        let walked = {
            let mut cx = StepCtx {
                env: step_env(&self.shared, &self.live, &route, self.deadline),
                timer,
                fields: &mut self.fields,
            };
            self.steps.admit(&route, &mut cx).await
        };
        if let Err(refusal) = walked {
            let resp = self.refuse(refusal);
            // A later step refused: what the earlier ones hold goes back (the quota
            // reservation, the permit).
            let env = step_env(&self.shared, &self.live, &route, self.deadline);
            self.steps.release(&route, false, &env);
            return Admission::Respond(resp);
        }
        route.retry.deposit(self.now());
        self.inflight = true;
        route.metrics.inflight.inc();
        Admission::Proceed
    }

    /// Settles the quota reservation once: consumed when the request was admitted by every
    /// step (`consume`), unless the breaker refused it or the fallback served it.
    fn settle_quota(&mut self, consume: bool) {
        let Some(route) = self.route.as_deref() else {
            return;
        };
        let consume = consume && self.quota_consumed();
        let env = step_env(&self.shared, &self.live, route, self.deadline);
        self.steps.quota.settle(consume, &env);
    }

    /// Whether a request that got past the quota gate spends its units: not when the
    /// breaker refused it or the fallback served it.
    fn quota_consumed(&self) -> bool {
        !matches!(self.outcome, Some(Outcome::Fallback | Outcome::CircuitOpen))
    }

    /// The next attempt, or the response to write when none may start (deadline spent).
    pub fn next_attempt(&mut self) -> Result<Attempt, GatewayResponse> {
        let Some(route) = self.route.clone() else {
            return Err(self.reject_with(Outcome::NoRoute, None));
        };
        let now = self.now();
        if self.deadline.expired(now) {
            return Err(self.reject_with(Outcome::DeadlineExceeded, None));
        }
        // Every attempt is a call the breaker guards: a retry needs its own ticket.
        if let Some(b) = &route.breaker
            && let Err(r) = self.steps.breaker.ticket(b, &route.metrics, now)
        {
            return Err(self.refuse(r));
        }
        let cfg = ns(route.policy.timeouts.per_try.0);
        let per_try = self.deadline.per_try(now, cfg);
        self.release_endpoint();
        let index = route
            .endpoints
            .pick(now, self.attempt.avoid, self.draws.next_u64());
        self.attempt = AttemptState {
            number: self.attempt.number + 1,
            started: now,
            capped: self.deadline.remaining(now) <= cfg,
            endpoint: Some(index),
            avoid: self.attempt.avoid,
        };
        let endpoint = route.upstream.endpoints[index];
        let full = per_try == cfg;
        let per_try: Duration = per_try.into();
        let request_headers = if self.bare() {
            Vec::new()
        } else {
            self.request_headers(&route, per_try, full)
        };
        Ok(Attempt {
            upstream: route.upstream.clone(),
            endpoint,
            connect_timeout: route.upstream.connect_timeout.min(per_try),
            per_try_timeout: per_try,
            number: self.attempt.number,
            request_headers,
        })
    }

    /// Headers an attempt adds to the upstream request. `full`: the attempt has the route's
    /// whole per-try timeout (not cut by the total deadline), whose budget text is made once
    /// per config revision.
    fn request_headers(
        &self,
        route: &RouteRuntime,
        per_try: Duration,
        full: bool,
    ) -> Vec<(&'static str, HeaderText)> {
        let budget = if full {
            route.budget_ms.clone()
        } else {
            HeaderText::from_u64(u64::try_from(per_try.as_millis()).unwrap_or(u64::MAX))
        };
        let mut request_headers = Vec::with_capacity(5);
        request_headers.push(("x-request-id", self.request_id.clone()));
        request_headers.push(("x-weir-budget-ms", budget));
        if let Some(xff) = forwarded_for(&self.forwarded) {
            request_headers.push(("x-forwarded-for", xff));
            // Cleartext listeners only, so far.
            request_headers.push(("x-forwarded-proto", HeaderText::from_static("http")));
        }
        // The verified subject replaces any client-sent header of the `forward` name
        // (frontends replace same-named request headers with these).
        if let (Some(a), Some(v)) = (&route.policy.auth, &self.auth.verified)
            && let Some(name) = a.forward
        {
            request_headers.push((name, HeaderText::from(v.forward_value())));
        }
        request_headers
    }

    /// Reports what the attempt produced; the engine records breaker and metrics and
    /// decides: forward, retry after a backoff, or respond.
    pub fn on_attempt(&mut self, result: AttemptResult) -> Next {
        let Some(route) = self.route.clone() else {
            return Next::Respond(self.reject_with(Outcome::NoRoute, None));
        };
        let now = self.now();
        let elapsed = now.saturating_sub(self.attempt.started);
        if self.shared.log.enabled() {
            let (status, error) = match result {
                AttemptResult::Response { status } => (Some(status), None),
                other => (None, Some(other.label())),
            };
            self.log.attempts.push(AttemptRec {
                status,
                error,
                ms: elapsed.as_millis(),
                endpoint: self
                    .attempt
                    .endpoint
                    .and_then(|i| route.upstream.endpoints.get(i))
                    .map(ToString::to_string),
            });
        }
        route.metrics.attempt(result.label());
        if let Some(i) = self.attempt.endpoint {
            route
                .endpoints
                .record(i, &result, now, self.draws.next_u64());
            let failed = !matches!(result, AttemptResult::Response { status } if status < 500);
            self.attempt.avoid = failed.then_some(i);
        }
        if let Some(b) = &route.breaker {
            self.steps
                .breaker
                .record(b, &route.metrics, now, elapsed, &result);
        }

        let p = &route.policy;
        let retry = self.retry.as_mut().and_then(|st| {
            let ended = Ended {
                result: &result,
                attempts: self.attempt.number,
                now,
                deadline: &self.deadline,
                min_try: ns(p.timeouts.min_try.0),
            };
            route.retry.next(
                &p.retry,
                st,
                &ended,
                || route.breaker.as_ref().is_some_and(|b| b.is_open(now)),
                &route.metrics,
            )
        });
        if !matches!(result, AttemptResult::Response { .. }) {
            // No response to stream: the attempt no longer counts as in flight there.
            self.release_endpoint();
        }
        if let Some(backoff) = retry {
            route.metrics.retries.inc();
            return Next::Retry {
                backoff: backoff.into(),
            };
        }
        let failed = match result {
            AttemptResult::Response { .. } => {
                self.outcome = Some(Outcome::Proxied);
                if self.bare() {
                    self.settle_quota(true);
                    return Next::Forward {
                        headers: Vec::new(),
                    };
                }
                let mut headers = Vec::with_capacity(3 + self.fields.len());
                headers.push(("x-request-id", self.request_id.clone()));
                if self.evidence() {
                    headers.extend([
                        (
                            "x-weir-attempts",
                            HeaderText::from_count(self.attempt.number),
                        ),
                        ("x-weir-instance", self.live.instance.clone()),
                    ]);
                }
                headers.extend(self.fields.iter().cloned());
                // Consumed (and with sync = "always" on disk) before the response goes out.
                self.settle_quota(true);
                return Next::Forward { headers };
            }
            AttemptResult::ConnectFailure | AttemptResult::Reset | AttemptResult::ProtocolError => {
                self.fallback_or(Outcome::UpstreamUnavailable, None)
            }
            AttemptResult::PerTryTimeout => {
                let o = if self.attempt.capped || self.deadline.expired(now) {
                    Outcome::DeadlineExceeded
                } else {
                    Outcome::PerTryTimeout
                };
                self.reject_with(o, None)
            }
        };
        let mut r = failed;
        if self.evidence() && !self.bare() {
            r.headers.push((
                "x-weir-attempts",
                HeaderText::from_count(self.attempt.number),
            ));
        }
        Next::Respond(r)
    }

    /// The frontend rejects this request itself after [`Engine::begin`](crate::Engine::begin)
    /// — e.g. invalid chunk framing ([`Outcome::BadRequest`]) or a stalled request body
    /// ([`Outcome::ClientTimeout`]) found while reading the body. Builds the gateway
    /// response (status [`Outcome::status`], `x-weir-reason`, ids, the route's RateLimit
    /// fields, JSON body) and records the outcome, so the request counts once, under its
    /// route, when [`finish`](Self::finish) is called. Use this instead of
    /// [`Engine::reject_malformed`](crate::Engine::reject_malformed), which counts and logs a
    /// separate request under route `-`.
    pub fn reject(&mut self, outcome: Outcome) -> GatewayResponse {
        self.reject_with(outcome, None)
    }

    /// The request body grew beyond the replay limit (or is being streamed): no retries.
    pub fn body_not_replayable(&mut self) {
        if let Some(r) = &mut self.retry {
            r.replayable = false;
        }
    }

    /// Called once when the response is complete (or the client went away): writes the
    /// access-log record and the metrics. `status` is what was written (0: nothing);
    /// `error` is why the exchange ended early — [`Outcome::UpstreamBodyTruncated`] or
    /// [`Outcome::ClientAborted`] (recorded with status 499 when nothing was written).
    /// Dropping a flow without `finish` records it as aborted.
    pub fn finish(mut self, status: u16, error: Option<Outcome>) {
        self.complete(status, error);
    }

    /// The current attempt's endpoint stops counting it as in flight.
    fn release_endpoint(&mut self) {
        if let (Some(i), Some(r)) = (self.attempt.endpoint.take(), &self.route) {
            r.endpoints.end(i);
        }
    }

    fn complete(&mut self, status: u16, error: Option<Outcome>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.release_endpoint();
        // The steps let go: the permit, an unused breaker ticket, and a quota reservation
        // admitted by every step and not settled yet (an error response, a client that went
        // away): consumed, unless the breaker or the fallback answered.
        if let Some(route) = self.route.as_deref() {
            let consume = self.quota_consumed();
            let env = step_env(&self.shared, &self.live, route, self.deadline);
            self.steps.release(route, consume, &env);
        }
        let status = match (status, error) {
            (0, Some(e @ Outcome::ClientAborted)) => e.status(),
            _ => status,
        };
        let outcome = self.outcome.unwrap_or(Outcome::Aborted);
        let now = self.now();
        let dur = now.saturating_sub(self.begin);
        match &self.route {
            Some(r) => {
                r.metrics.request(outcome);
                r.metrics.duration.observe(dur.as_secs_f64());
                if self.inflight {
                    r.metrics.inflight.dec();
                }
            }
            None => self.shared.metrics.count_request(self.route_id(), outcome),
        }
        self.inflight = false;
        if !self.shared.log.enabled() {
            // No access log: the record (timestamp formatting, string copies) is not built.
            return;
        }
        let rl = self
            .route
            .as_ref()
            .and_then(|r| r.policy.rate_limit.as_ref());
        let log = core::mem::take(&mut self.log);
        let rec = Record {
            ts: rfc3339_ms(self.shared.clock.unix_millis()),
            instance: self.instance().to_string(),
            // The flow ends here: its strings move into the record.
            request_id: self.request_id.as_str().to_owned(),
            route: self.route_id().to_string(),
            method: log.method,
            path: log.path,
            client: log.client,
            status,
            reason: self.outcome.filter(|o| *o != Outcome::Proxied),
            key_digest: self
                .steps
                .rate
                .descriptor
                .as_ref()
                .map(Descriptor::digest_hex),
            consumer_digest: self.auth.verified.as_ref().map(|v| v.consumer_digest()),
            scope: rl.map(|r| r.scope.as_str()),
            remaining: self.steps.rate.remaining,
            attempts: log.attempts,
            queue_ms: self.steps.concurrency.queued.as_millis(),
            duration_ms: dur.as_millis(),
            revision: self.live.revision,
            shadow: self.steps.rate.shadow,
            ratelimit: self.steps.rate.bypassed.then_some("bypassed"),
            error: error.or(self.outcome.is_none().then_some(Outcome::Aborted)),
        };
        self.shared.log.write(&rec);
    }

    /// The secs-ceil helper for frontends writing their own `Retry-After`.
    #[doc(hidden)]
    pub fn secs_ceil(d: Duration) -> u64 {
        secs_ceil(d)
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        if !self.finished {
            self.complete(499, Some(Outcome::Aborted));
        }
    }
}
