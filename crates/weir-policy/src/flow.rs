//! One request through the engine: admission, attempts, the final response, the record.

use crate::accesslog::{AttemptRec, Record, now_rfc3339};
use crate::concurrency::{Permit, Refused};
use crate::config::raw::{Mode, OnStoreError, Scope};
use crate::descriptor::{self, Descriptor, DescriptorError, Headers};
use crate::engine::{Inner, Live, RouteRuntime};
use crate::policy::{UpstreamSettings, secs_ceil};
use crate::response::{GatewayResponse, acceptable_request_id, error_response, fallback_response};
use crate::store::{StoreError, StoreRequest, store_key};
use crate::text::HeaderText;
use crate::timer::{Either, Timer, select};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use weir_core::{Deadline, Decision, Nanos, SplitMix64, Verdict};

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
    /// The endpoint to use (round robin).
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

/// What an attempt produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// The response head arrived with this status.
    Response {
        /// Status as received.
        status: u16,
    },
    /// The connection could not be made (refused, connect timeout).
    ConnectFailure,
    /// The connection was reset / closed before a response head.
    Reset,
    /// The upstream answered something that is not valid HTTP.
    ProtocolError,
    /// No response head within `per_try_timeout`.
    PerTryTimeout,
}

impl AttemptResult {
    fn label(&self) -> &'static str {
        match self {
            AttemptResult::Response { status } if *status >= 500 => "http_5xx",
            AttemptResult::Response { .. } => "success",
            AttemptResult::ConnectFailure => "connect_failure",
            AttemptResult::Reset => "reset",
            AttemptResult::ProtocolError => "protocol_error",
            AttemptResult::PerTryTimeout => "timeout",
        }
    }
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

/// One request in progress. `Send`; holds its config snapshot, permit and log fields.
pub struct Flow {
    inner: Arc<Inner>,
    live: Arc<Live>,
    route: Option<Arc<RouteRuntime>>,
    request_id: HeaderText,
    method: String,
    path: String,
    begin: Nanos,
    deadline: Deadline,
    idempotent: bool,
    replayable: bool,
    descriptor: Option<Descriptor>,
    early: Option<(u16, &'static str)>,
    shadow: Option<&'static str>,
    extra_headers: Vec<(&'static str, HeaderText)>,
    remaining: Option<u64>,
    bypassed: bool,
    permit: Option<Permit>,
    ticket: Option<crate::glue::Ticket>,
    inflight: bool,
    attempts: Vec<AttemptRec>,
    attempt_no: u32,
    attempt_started: Nanos,
    attempt_capped: bool,
    backoff_prev: Nanos,
    queue_ns: Nanos,
    outcome: Option<&'static str>,
    finished: bool,
    rng: SplitMix64,
}

fn ns(d: Duration) -> Nanos {
    Nanos::from(d)
}

impl Flow {
    pub(crate) fn begin(inner: Arc<Inner>, req: &RequestInfo<'_>) -> Flow {
        let live = inner.live.load_full();
        let now = inner.clock.now();
        let path = req.path.split(['?', '#']).next().unwrap_or(req.path);
        // The method and path are kept only for the access-log record.
        let log = inner.log.enabled();
        let request_id = req
            .headers
            .get("x-request-id")
            .and_then(acceptable_request_id)
            .map(str::to_string)
            .unwrap_or_else(|| inner.new_request_id())
            .into();
        let idx = live.set.route_for(req.method, path).map(|(i, _)| i);
        let route = idx.map(|i| live.routes[i].clone());
        let seq = inner.flows.fetch_add(1, Ordering::Relaxed);
        let mut f = Flow {
            rng: SplitMix64::new(inner.seed ^ seq.wrapping_mul(0x2545_F491_4F6C_DD1D)),
            inner,
            live,
            route: None,
            request_id,
            method: if log {
                req.method.to_string()
            } else {
                String::new()
            },
            path: if log { path.to_string() } else { String::new() },
            begin: now,
            deadline: Deadline::new(now, Nanos::ZERO),
            idempotent: false,
            replayable: false,
            descriptor: None,
            early: None,
            shadow: None,
            extra_headers: Vec::new(),
            remaining: None,
            bypassed: false,
            permit: None,
            ticket: None,
            inflight: false,
            attempts: Vec::new(),
            attempt_no: 0,
            attempt_started: now,
            attempt_capped: false,
            backoff_prev: Nanos::ZERO,
            queue_ns: Nanos::ZERO,
            outcome: None,
            finished: false,
        };
        let Some(route) = route else {
            f.early = Some((404, "no_route"));
            return f;
        };
        let p = &route.policy;
        f.deadline = Deadline::new(now, ns(p.timeouts.total.0));
        f.idempotent = p
            .retry
            .methods
            .iter()
            .any(|m| m.eq_ignore_ascii_case(req.method))
            || req
                .headers
                .get(&p.retry.idempotency_header)
                .is_some_and(|v| !v.is_empty());
        f.replayable = req.body_len.is_some_and(|n| n <= p.retry.max_replay_bytes);
        if let Some(rl) = &p.rate_limit {
            match descriptor::build(
                rl,
                &p.id,
                req.method,
                req.headers,
                req.client_ip,
                f.inner.table_key,
            ) {
                Ok(d) => f.descriptor = Some(d),
                Err(e) => {
                    let (status, reason) = match e {
                        DescriptorError::Empty => (403, "empty_key"),
                        DescriptorError::TooLong => (400, "key_too_long"),
                    };
                    if rl.mode == Mode::Shadow {
                        f.shadow = Some(reason);
                        route.metrics.shadow.inc();
                    } else {
                        f.early = Some((status, reason));
                    }
                }
            }
        }
        f.route = Some(route);
        f
    }

    /// The matched route id (`None`: no route, the answer will be 404).
    pub fn route(&self) -> Option<&str> {
        self.route.as_ref().map(|r| r.policy.id.as_str())
    }

    /// The request id (kept from the request or generated).
    pub fn request_id(&self) -> &str {
        self.request_id.as_str()
    }

    /// The config revision this request runs under.
    pub fn revision(&self) -> u64 {
        self.live.revision
    }

    fn route_id(&self) -> &str {
        self.route.as_ref().map_or("-", |r| r.policy.id.as_str())
    }

    fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    fn instance(&self) -> &str {
        &self.live.set.server.instance
    }

    /// A gateway error response with the flow's extra headers; records the outcome.
    fn reject_with(
        &mut self,
        status: u16,
        reason: &'static str,
        extra: &[(&str, serde_json::Value)],
    ) -> GatewayResponse {
        self.outcome = Some(reason);
        let mut r = error_response(
            status,
            reason,
            self.route_id(),
            self.instance(),
            self.request_id.as_str(),
            extra,
        );
        r.headers.extend(self.extra_headers_text());
        r
    }

    /// The flow's extra headers (RateLimit fields, bypass marker) for a response it makes.
    fn extra_headers_text(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        self.extra_headers.iter().map(|(k, v)| (*k, v.to_string()))
    }

    /// The fallback when configured, else the gateway error.
    fn fallback_or(&mut self, status: u16, reason: &'static str) -> GatewayResponse {
        let fb = self.route.as_ref().and_then(|r| r.policy.fallback.clone());
        match fb {
            Some(f) => {
                self.outcome = Some("fallback");
                let mut r =
                    fallback_response(&f, reason, self.instance(), self.request_id.as_str());
                r.headers.extend(self.extra_headers_text());
                r
            }
            None => self.reject_with(status, reason, &[]),
        }
    }

    fn count_shadow(&mut self, reason: &'static str) {
        if self.shadow.is_none() {
            self.shadow = Some(reason);
        }
        if let Some(r) = &self.route {
            r.metrics.shadow.inc();
        }
    }

    async fn store_acquire<T: Timer>(
        &self,
        timer: &T,
        req: StoreRequest,
    ) -> Result<Decision, StoreError> {
        let Some(store) = self.inner.store.load_full() else {
            return Err(StoreError("no global store installed".into()));
        };
        let timeout = self
            .live
            .set
            .store
            .as_ref()
            .map_or(Duration::from_millis(100), |s| s.timeout);
        let fut = store.acquire(req);
        let sleep = core::pin::pin!(timer.sleep(timeout));
        match select(fut, sleep).await {
            Either::Left(r) => r,
            Either::Right(()) => Err(StoreError(format!("timed out after {timeout:?}"))),
        }
    }

    /// Rate limit (local or global) → leaky-bucket delay → concurrency (queue) → breaker.
    ///
    /// Waits use `timer` and count against the total deadline. A leaky-bucket delay that
    /// would end after the total deadline is answered at once with 429 `rate_limited`
    /// (`Retry-After` = the delay): the request could not be served in its budget, and the
    /// client learns when its turn would come, rather than waiting for a certain 504.
    pub async fn admit<T: Timer>(&mut self, timer: &T) -> Admission {
        if let Some((status, reason)) = self.early {
            return Admission::Respond(self.reject_with(status, reason, &[]));
        }
        let Some(route) = self.route.clone() else {
            return Admission::Respond(self.reject_with(404, "no_route", &[]));
        };
        let p = &route.policy;

        // 1. Rate limit.
        if let (Some(rl), Some(desc)) = (&p.rate_limit, self.descriptor) {
            let shadow = rl.mode == Mode::Shadow;
            let decision = match rl.scope {
                Scope::Local => route.limiter.as_ref().map(|l| {
                    let a = l.limiter.acquire(desc.table_hash, self.now(), 1);
                    if a.overflow {
                        route.metrics.overflow.inc();
                    }
                    a.decision
                }),
                Scope::Global => {
                    let req = StoreRequest {
                        key: store_key(&p.id, &desc.digest_hex()),
                        route: p.id.clone(),
                        limit: route
                            .global
                            .unwrap_or(crate::store::GlobalLimit::from(&rl.algorithm)),
                        cost: 1,
                    };
                    match self.store_acquire(timer, req).await {
                        Ok(d) => Some(d),
                        Err(_) => match rl.on_store_error {
                            OnStoreError::Deny if !shadow => {
                                return Admission::Respond(self.reject_with(
                                    503,
                                    "ratelimit_store_unavailable",
                                    &[],
                                ));
                            }
                            OnStoreError::Deny => {
                                self.count_shadow("ratelimit_store_unavailable");
                                None
                            }
                            OnStoreError::Allow => {
                                self.bypassed = true;
                                self.extra_headers.push((
                                    "x-weir-ratelimit",
                                    HeaderText::from_static("bypassed"),
                                ));
                                route.metrics.bypassed.inc();
                                None
                            }
                        },
                    }
                }
            };
            if let Some(d) = decision {
                self.remaining = Some(d.remaining);
                let now = self.now();
                let over_budget =
                    matches!(d.verdict, Verdict::Delay(dl) if dl > self.deadline.remaining(now));
                let rejected = d.verdict == Verdict::Reject || over_budget;
                let t = if d.verdict == Verdict::Reject {
                    d.retry_after.as_secs_ceil().max(1)
                } else if over_budget {
                    d.delay().as_secs_ceil().max(1)
                } else {
                    d.reset_after.as_secs_ceil()
                };
                if let Some(pol) = &route.ratelimit_policy {
                    self.extra_headers.push(("ratelimit-policy", pol.clone()));
                    // `"<id>";r=<remaining>;t=<seconds>`, built without `format!` (hot path),
                    // in a buffer of the exact size: the header map then takes it as is
                    // (`Bytes` from a `Vec` with spare capacity allocates a header).
                    let len = p.id.len() + "\"\";r=;t=".len() + dec_len(d.remaining) + dec_len(t);
                    let mut v = String::with_capacity(len);
                    v.push('"');
                    v.push_str(&p.id);
                    v.push_str("\";r=");
                    push_u64(&mut v, d.remaining);
                    v.push_str(";t=");
                    push_u64(&mut v, t);
                    self.extra_headers.push(("ratelimit", HeaderText::from(v)));
                }
                if rejected {
                    if shadow {
                        self.count_shadow("rate_limited");
                    } else {
                        let mut r =
                            self.reject_with(429, "rate_limited", &[("retry_after", t.into())]);
                        r.headers.push(("retry-after", t.to_string()));
                        return Admission::Respond(r);
                    }
                } else if let Verdict::Delay(dl) = d.verdict
                    && !shadow
                {
                    // Shaping: hold the request; the time counts against the deadline.
                    timer.sleep(dl.into()).await;
                }
            }
        }

        // 2. Concurrency.
        if let (Some(c), Some(cs)) = (&p.concurrency, &route.concurrency) {
            let start = self.now();
            let remaining = self.deadline.remaining(start);
            let qt = ns(c.queue_timeout.0);
            let by_deadline = remaining < qt;
            let wait = qt.min(remaining);
            let res = cs
                .state
                .acquire(c.queue, wait.into(), by_deadline, timer)
                .await;
            self.queue_ns = self.now().saturating_sub(start);
            match res {
                Ok(permit) => self.permit = Some(permit),
                Err(Refused::Full) => {
                    return Admission::Respond(self.reject_with(503, "concurrency_limited", &[]));
                }
                Err(Refused::QueueTimeout) => {
                    return Admission::Respond(self.reject_with(503, "queue_timeout", &[]));
                }
                Err(Refused::Deadline) => {
                    return Admission::Respond(self.reject_with(504, "deadline_exceeded", &[]));
                }
            }
        }

        // 3. Breaker.
        if let Some(b) = &route.breaker {
            let now = self.now();
            match b.core.allow(now) {
                Ok(a) => {
                    self.inner.breaker_transition(&route, b, a.transition, now);
                    self.ticket = Some(a.ticket);
                }
                Err(r) => {
                    self.inner.breaker_transition(&route, b, r.transition, now);
                    self.permit = None;
                    return Admission::Respond(self.fallback_or(503, "circuit_open"));
                }
            }
        }

        if let Some(bu) = &route.budget {
            bu.core.deposit(self.now());
        }
        self.inflight = true;
        route.metrics.inflight.inc();
        Admission::Proceed
    }

    /// The next attempt, or the response to write when none may start (deadline spent).
    pub fn next_attempt(&mut self) -> Result<Attempt, GatewayResponse> {
        let Some(route) = self.route.clone() else {
            return Err(self.reject_with(404, "no_route", &[]));
        };
        let now = self.now();
        if self.deadline.expired(now) {
            return Err(self.reject_with(504, "deadline_exceeded", &[]));
        }
        // Every attempt is a call the breaker guards: a retry needs its own ticket.
        if let Some(b) = &route.breaker
            && self.ticket.is_none()
        {
            match b.core.allow(now) {
                Ok(a) => {
                    self.inner.breaker_transition(&route, b, a.transition, now);
                    self.ticket = Some(a.ticket);
                }
                Err(r) => {
                    self.inner.breaker_transition(&route, b, r.transition, now);
                    return Err(self.fallback_or(503, "circuit_open"));
                }
            }
        }
        let cfg = ns(route.policy.timeouts.per_try.0);
        let per_try = self.deadline.per_try(now, cfg);
        self.attempt_capped = self.deadline.remaining(now) <= cfg;
        self.attempt_no += 1;
        self.attempt_started = now;
        let eps = &route.upstream.endpoints;
        let endpoint = eps[route.rr.fetch_add(1, Ordering::Relaxed) % eps.len()];
        let per_try: Duration = per_try.into();
        Ok(Attempt {
            upstream: route.upstream.clone(),
            endpoint,
            connect_timeout: route.upstream.connect_timeout.min(per_try),
            per_try_timeout: per_try,
            number: self.attempt_no,
            request_headers: vec![
                ("x-request-id", self.request_id.clone()),
                (
                    "x-weir-budget-ms",
                    HeaderText::from(per_try.as_millis().to_string()),
                ),
            ],
        })
    }

    /// Reports what the attempt produced; the engine records breaker and metrics and
    /// decides: forward, retry after a backoff, or respond.
    pub fn on_attempt(&mut self, result: AttemptResult) -> Next {
        let Some(route) = self.route.clone() else {
            return Next::Respond(self.reject_with(404, "no_route", &[]));
        };
        let now = self.now();
        let elapsed = now.saturating_sub(self.attempt_started);
        let (status, error) = match result {
            AttemptResult::Response { status } => (Some(status), None),
            other => (None, Some(other.label())),
        };
        if self.inner.log.enabled() {
            self.attempts.push(AttemptRec {
                status,
                error,
                ms: elapsed.as_millis(),
            });
        }
        route.metrics.attempt(result.label());
        if let (Some(b), Some(ticket)) = (&route.breaker, self.ticket.take()) {
            let t = b
                .core
                .record(ticket, now, elapsed, b.params.failure_on.matches(&result));
            self.inner.breaker_transition(&route, b, t, now);
        }

        if let Some(backoff) = self.may_retry(&route, &result, now) {
            route.metrics.retries.inc();
            return Next::Retry {
                backoff: backoff.into(),
            };
        }
        match result {
            AttemptResult::Response { .. } => {
                self.outcome = Some("proxied");
                let mut headers = Vec::with_capacity(3 + self.extra_headers.len());
                headers.extend([
                    ("x-weir-attempts", HeaderText::from_count(self.attempt_no)),
                    ("x-request-id", self.request_id.clone()),
                    ("x-weir-instance", self.live.instance.clone()),
                ]);
                headers.extend(self.extra_headers.iter().cloned());
                Next::Forward { headers }
            }
            AttemptResult::ConnectFailure | AttemptResult::Reset | AttemptResult::ProtocolError => {
                let mut r = self.fallback_or(502, "upstream_unavailable");
                r.headers
                    .push(("x-weir-attempts", self.attempt_no.to_string()));
                Next::Respond(r)
            }
            AttemptResult::PerTryTimeout => {
                let reason = if self.attempt_capped || self.deadline.expired(now) {
                    "deadline_exceeded"
                } else {
                    "per_try_timeout"
                };
                let mut r = self.reject_with(504, reason, &[]);
                r.headers
                    .push(("x-weir-attempts", self.attempt_no.to_string()));
                Next::Respond(r)
            }
        }
    }

    fn may_retry(
        &mut self,
        route: &RouteRuntime,
        result: &AttemptResult,
        now: Nanos,
    ) -> Option<Nanos> {
        let p = &route.policy;
        let rt = &p.retry;
        if !rt.on.matches(result)
            || self.attempt_no >= rt.max_attempts
            || !self.idempotent
            || !self.replayable
        {
            return None;
        }
        let backoff = crate::glue::backoff_delay(
            &route.backoff,
            self.attempt_no,
            self.backoff_prev,
            &mut self.rng,
        );
        if !self
            .deadline
            .can_start_attempt(now, backoff, ns(p.timeouts.min_try.0))
        {
            return None;
        }
        if let Some(b) = &route.breaker
            && b.core.state(now) == crate::glue::BreakerState::Open
        {
            return None;
        }
        if let Some(bu) = &route.budget
            && !bu.core.try_withdraw(now)
        {
            route.metrics.budget_exhausted.inc();
            return None;
        }
        self.backoff_prev = backoff;
        Some(backoff)
    }

    /// The frontend rejects this request itself after [`Engine::begin`](crate::Engine::begin)
    /// — e.g. invalid chunk framing (400 `bad_request`) or a stalled request body
    /// (408 `client_timeout`) found while reading the body. Builds the gateway response
    /// (`x-weir-reason`, ids, the route's RateLimit fields, JSON body) and records `reason`
    /// as the outcome, so the request counts once, under its route, when
    /// [`finish`](Self::finish) is called. Use this instead of
    /// [`Engine::reject_malformed`](crate::Engine::reject_malformed), which counts and logs a
    /// separate request under route `-`.
    pub fn reject(&mut self, status: u16, reason: &'static str) -> GatewayResponse {
        self.reject_with(status, reason, &[])
    }

    /// The request body grew beyond the replay limit (or is being streamed): no retries.
    pub fn body_not_replayable(&mut self) {
        self.replayable = false;
    }

    /// Called once when the response is complete (or the client went away): writes the
    /// access-log record and the metrics. `error`: e.g. `Some("upstream_body_truncated")`.
    /// Dropping a flow without `finish` records it as aborted.
    pub fn finish(mut self, status: u16, error: Option<&'static str>) {
        self.complete(status, error);
    }

    fn complete(&mut self, status: u16, error: Option<&'static str>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.permit = None;
        if let (Some(t), Some(b)) = (
            self.ticket.take(),
            self.route.as_ref().and_then(|r| r.breaker.as_ref()),
        ) {
            b.core.cancel(t);
        }
        let outcome = self.outcome.unwrap_or("aborted");
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
            None => self.inner.metrics.count_request(self.route_id(), outcome),
        }
        self.inflight = false;
        if !self.inner.log.enabled() {
            // No access log: the record (timestamp formatting, string copies) is not built.
            return;
        }
        let route = self.route_id().to_string();
        let rl = self
            .route
            .as_ref()
            .and_then(|r| r.policy.rate_limit.as_ref());
        let reason = match self.outcome {
            Some("proxied") | None => None,
            Some(o) => Some(o),
        };
        let rec = Record {
            ts: now_rfc3339(),
            instance: self.instance().to_string(),
            // The flow ends here: its strings move into the record.
            request_id: self.request_id.to_string(),
            route,
            method: core::mem::take(&mut self.method),
            path: core::mem::take(&mut self.path),
            status,
            reason,
            key_digest: self.descriptor.as_ref().map(Descriptor::digest_hex),
            scope: rl.map(|r| match r.scope {
                Scope::Local => "local",
                Scope::Global => "global",
            }),
            remaining: self.remaining,
            attempts: core::mem::take(&mut self.attempts),
            queue_ms: self.queue_ns.as_millis(),
            duration_ms: dur.as_millis(),
            revision: self.live.revision,
            shadow: self.shadow,
            ratelimit: self.bypassed.then_some("bypassed"),
            error: error.or(if self.outcome.is_none() {
                Some("aborted")
            } else {
                None
            }),
        };
        self.inner.log.write(&rec);
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
            self.complete(499, Some("aborted"));
        }
    }
}

/// The number of decimal digits of `n`.
fn dec_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// Appends `n` in decimal (what `write!(s, "{n}")` does, without the formatting machinery).
fn push_u64(s: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &b in &buf[i..] {
        s.push(char::from(b));
    }
}

#[cfg(test)]
mod push_u64_tests {
    #[test]
    fn push_u64_matches_display() {
        for n in [0u64, 7, 10, 99, 1000, 123_456_789, u64::MAX] {
            let mut s = String::from("x");
            super::push_u64(&mut s, n);
            assert_eq!(s, format!("x{n}"));
            assert_eq!(super::dec_len(n), n.to_string().len());
        }
    }
}
