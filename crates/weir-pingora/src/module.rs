//! The per-phase calls a `ProxyHttp` makes into the weir engine.
//!
//! Every decision is the engine's ([`weir_policy::Flow`]); this module only translates
//! between Pingora's phases and the engine's request lifecycle:
//!
//! | Pingora phase | weir call | what happens |
//! |---|---|---|
//! | `request_filter` | [`Weir::request_filter`] | `Engine::begin` + `Flow::admit` (rate limit, queue wait, breaker); a rejection is written here |
//! | `upstream_peer` | [`Weir::upstream_peer`] | sleeps the pending backoff, `Flow::next_attempt` → peer + timeouts, or the engine's 504 |
//! | `upstream_request_filter` | [`Weir::upstream_request_filter`] | adds the attempt's headers (`x-request-id`) |
//! | `upstream_response_filter` | [`Weir::upstream_response_filter`] | `Flow::on_attempt(Response)`: forward (adds `x-weir-*`/RateLimit headers; the body then streams under `idle_timeout`), retry on a retryable status, or replace |
//! | `fail_to_connect` / `error_while_proxy` | [`Weir::fail_to_connect`] / [`Weir::error_while_proxy`] | `Flow::on_attempt(ConnectFailure / Reset / ProtocolError / PerTryTimeout)` → `set_retry` |
//! | `fail_to_proxy` | [`Weir::fail_to_proxy`] | writes the engine's response (502/504/fallback) |
//! | `logging` | [`Weir::logging`] | `Flow::finish` (access log, duration metrics) |

use core::future::Future;
use core::time::Duration;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::HttpPeer;
use pingora::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora::proxy::{FailToProxy, Session};
use pingora::upstreams::peer::HttpUpstreamRequestPolicy;
use pingora::{Error, ErrorSource, ErrorType, OrErr, RetryType};
use weir_policy::{
    Admission, Attempt, AttemptResult, Engine, Flow, GatewayResponse, HeaderText, Headers, Next,
    Outcome, RequestInfo, Timer,
};

use crate::server::{Inflight, InflightGuard};
use crate::upstream::{AttemptConnect, Clock, Pool};

/// [`weir_policy::Timer`] on tokio's timer (Pingora runs on tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioTimer;

impl Timer for TokioTimer {
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        tokio::time::sleep(d)
    }
}

/// The weir integration for one Pingora proxy: a cheap handle on the [`Engine`].
///
/// Call its methods from the matching `ProxyHttp` phases (see the module table and the crate
/// docs); keep a [`WeirCtx`] in your `CTX`.
#[derive(Clone)]
pub struct Weir {
    engine: Engine,
    inflight: Inflight,
    /// Idle upstream connections (weir pools them itself: crate docs, "Per-try timeout").
    pool: Arc<Pool>,
}

/// Per-request weir state, to be kept in (or as) the proxy's `CTX`.
///
/// One pointer: the state lives on the heap. Pingora keeps the `CTX` inline in each
/// request's future, which it moves into a fresh box per request (`process_new_http`), so
/// every byte of the context would be copied once more per request; one small allocation
/// is cheaper than copying the ~0.6 KB state.
#[derive(Default)]
pub struct WeirCtx(Box<CtxState>);

#[derive(Default)]
struct CtxState {
    // `Flow` is `Send`; the mutex only makes the context `Sync` as Pingora requires of a
    // CTX. It is never locked: every access goes through `&mut` (`get_mut`).
    flow: Option<Mutex<Flow>>,
    attempt: Option<Attempt>,
    /// When the current attempt started (its per-try deadline counts from here).
    attempt_start: Option<tokio::time::Instant>,
    /// The current attempt's read clock, shared with its upstream connection.
    clock: Option<Arc<Clock>>,
    backoff: Option<Duration>,
    /// The current attempt's outcome was already reported (status decided in
    /// `upstream_response_filter`).
    reported: bool,
    /// The upstream head was accepted for forwarding: no retry can happen any more.
    forwarded: bool,
    /// Retry the same attempt on a fresh connection: a pooled keep-alive connection turned
    /// out dead before the request could have been processed (not an attempt outcome).
    same_attempt: bool,
    /// `server.idle_timeout`, read once per request (a settings load is a reference-count
    /// round trip on the engine's current config).
    idle_timeout: Duration,
    /// A response the engine made that `fail_to_proxy` must write.
    respond: Option<GatewayResponse>,
    /// For `Flow::finish`.
    error: Option<Outcome>,
    /// [`HeadGuard`](crate::HeadGuard) found invalid chunk framing in the body bytes that
    /// came with the head: answer 400 after admission.
    body_rejected: bool,
    _inflight: Option<InflightGuard>,
}

impl CtxState {
    fn flow(&mut self) -> Option<&mut Flow> {
        self.flow.as_mut().map(|m| {
            m.get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }
}

impl WeirCtx {
    /// The route the request matched (after `request_filter`), if any.
    pub fn route(&mut self) -> Option<&str> {
        self.0.flow().and_then(|f| f.route())
    }

    /// The request id (after `request_filter`).
    pub fn request_id(&mut self) -> Option<&str> {
        self.0.flow().map(|f| f.request_id())
    }

    /// The attempt in progress (between `upstream_peer` and its outcome).
    pub fn attempt(&self) -> Option<&Attempt> {
        self.0.attempt.as_ref()
    }
}

/// Header lookup over Pingora's request header map.
struct ReqHeaders<'a>(&'a RequestHeader);

/// The one name the engine looks up on every request (to keep a client's id).
static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

impl Headers for ReqHeaders<'_> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        // A lookup by `&str` parses and validates the name first; the engine asks for
        // `x-request-id` on every request, so that name is looked up pre-parsed.
        let v = if name == X_REQUEST_ID.as_str() {
            self.0.headers.get(&X_REQUEST_ID)
        } else {
            self.0.headers.get(name)
        };
        v.map(|v| v.as_bytes())
    }
    fn for_each(&self, name: &str, f: &mut dyn FnMut(&[u8])) {
        for v in self.0.headers.get_all(name) {
            f(v.as_bytes());
        }
    }
}

fn body_len(req: &RequestHeader) -> Option<u64> {
    if req.headers.contains_key(http::header::TRANSFER_ENCODING) {
        return None;
    }
    match req.headers.get(http::header::CONTENT_LENGTH) {
        Some(v) => v.to_str().ok().and_then(|s| s.trim().parse().ok()),
        None => Some(0),
    }
}

fn client_ip(session: &Session) -> Option<IpAddr> {
    match session.client_addr()? {
        PingoraAddr::Inet(a) => Some(a.ip()),
        _ => None,
    }
}

/// A header value from the engine, sharing its buffer (no copy: a clone of shared text is
/// a reference count). Invalid values fail as `insert_header` fails on them.
fn header_value(v: HeaderText) -> pingora::Result<HeaderValue> {
    HeaderValue::from_maybe_shared(v.into_bytes())
        .or_err(ErrorType::InvalidHTTPHeader, "invalid value while insert")
}

/// An error that ends Pingora's retry loop (the engine has decided).
fn stop(context: &'static str) -> Box<Error> {
    let mut e = Error::explain(ErrorType::Custom("weir"), context);
    e.set_retry(false);
    e
}

/// Writes a response the engine made (rejection, 502/504, fallback) to the client.
pub async fn write_gateway_response(
    session: &mut Session,
    resp: &GatewayResponse,
) -> pingora::Result<()> {
    let mut head = ResponseHeader::build(resp.status, Some(resp.headers.len() + 1))?;
    for (name, value) in &resp.headers {
        head.append_header(*name, value.as_str())?;
    }
    head.insert_header("content-length", resp.body.len().to_string())?;
    let head_only = resp.body.is_empty() || session.req_header().method == "HEAD";
    session
        .write_response_header(Box::new(head), head_only)
        .await?;
    if !head_only {
        session
            .write_response_body(Some(Bytes::copy_from_slice(&resp.body)), true)
            .await?;
    }
    Ok(())
}

impl Weir {
    /// Wraps an engine (built with `Engine::load` / `Engine::from_toml`).
    pub fn new(engine: Engine) -> Weir {
        Weir {
            engine,
            inflight: Inflight::default(),
            pool: Arc::default(),
        }
    }

    /// The engine (for the admin API, reloads, metrics).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Requests in progress in this proxy (what a graceful shutdown waits for).
    pub fn inflight(&self) -> Inflight {
        self.inflight.clone()
    }

    /// A fresh per-request context (`ProxyHttp::new_ctx`).
    pub fn new_ctx(&self) -> WeirCtx {
        WeirCtx::default()
    }

    /// `ProxyHttp::request_filter`: route, descriptor, rate limit, concurrency (waiting in the
    /// queue or a leaky-bucket delay), breaker. Returns `Ok(true)` when weir answered the
    /// request itself (404 no_route, 429, 403, 503, fallback): return that from your filter.
    pub async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<bool> {
        let ctx = &mut *ctx.0;
        ctx._inflight = Some(self.inflight.enter());
        let server = self.engine.server();
        // Body inactivity in both directions is bounded by `idle_timeout` (docs/CONFIG.md, `[server]`).
        let idle = server.idle_timeout;
        ctx.idle_timeout = idle;
        session.as_downstream_mut().set_read_timeout(Some(idle));
        session.as_downstream_mut().set_write_timeout(Some(idle));
        if let Some(outcome) = Self::head_limits(session.req_header(), server.max_header_bytes) {
            // An HTTP-layer limit: the request is not understood, so no Flow (docs/HTTP.md).
            session.set_keepalive(None);
            let id = session.req_header().headers.get("x-request-id");
            let id = id.and_then(|v| v.to_str().ok());
            let resp = self.engine.reject_malformed(outcome, id);
            write_gateway_response(session, &resp).await?;
            return Ok(true);
        }
        let mut flow = {
            let req = session.req_header();
            let headers = ReqHeaders(req);
            let target = req.uri.path_and_query().map_or("/", |p| p.as_str());
            let info = RequestInfo {
                method: req.method.as_str(),
                path: target,
                headers: &headers,
                client_ip: client_ip(session),
                body_len: body_len(req),
            };
            self.engine.begin(&info)
        };
        let admission = flow.admit(&TokioTimer).await;
        let admission = match admission {
            Admission::Proceed if ctx.body_rejected => {
                // Invalid chunk framing seen by the HeadGuard: counted once, under the route.
                session.set_keepalive(None);
                Admission::Respond(flow.reject(Outcome::BadRequest))
            }
            a => a,
        };
        ctx.flow = Some(Mutex::new(flow));
        match admission {
            Admission::Proceed => Ok(false),
            Admission::Respond(resp) => {
                write_gateway_response(session, &resp).await?;
                Ok(true)
            }
        }
    }

    /// `ProxyHttp::on_connection_reuse`: takes the [`BodyRejected`](crate::guard::BodyRejected)
    /// marker a [`HeadGuard`](crate::HeadGuard) passes as the connection context. Call it
    /// from your proxy's `on_connection_reuse` when you run behind the guard.
    pub fn on_connection_reuse(
        &self,
        ctx: &mut WeirCtx,
        prev_ctx: &(dyn core::any::Any + Send + Sync),
    ) {
        let ctx = &mut *ctx.0;
        if prev_ctx.is::<crate::guard::BodyRejected>() {
            ctx.body_rejected = true;
        }
    }

    /// `server.max_header_bytes` (431) and the 8 KiB request-line limit (414). Pingora's
    /// parser has its own, larger bound, so weir checks the parsed head against the config.
    /// The size counts the request line and each header line as sent (`name: value\r\n`).
    fn head_limits(req: &RequestHeader, max_header_bytes: usize) -> Option<Outcome> {
        const MAX_REQUEST_LINE: usize = 8 * 1024;
        let line = req.method.as_str().len() + 1 + req.raw_path().len() + " HTTP/1.1\r\n".len();
        if line > MAX_REQUEST_LINE {
            return Some(Outcome::UriTooLong);
        }
        let headers: usize = req
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum();
        (line + headers + 2 > max_header_bytes).then_some(Outcome::HeadersTooLarge)
    }

    /// `ProxyHttp::upstream_peer`: waits out the backoff the engine chose for a retry, then
    /// asks it for the next attempt and returns the peer with the attempt's timeouts. When no
    /// attempt may start (deadline), returns an error and `fail_to_proxy` writes the engine's
    /// response.
    pub async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<Box<HttpPeer>> {
        let ctx = &mut *ctx.0;
        if let Some(backoff) = ctx.backoff.take() {
            tokio::time::sleep(backoff).await;
        }
        if !core::mem::take(&mut ctx.same_attempt) || ctx.attempt.is_none() {
            let flow = ctx
                .flow()
                .ok_or_else(|| stop("weir: request_filter was not called"))?;
            match flow.next_attempt() {
                Ok(a) => {
                    ctx.attempt = Some(a);
                    ctx.attempt_start = Some(tokio::time::Instant::now());
                }
                Err(resp) => {
                    ctx.attempt = None;
                    ctx.respond = Some(resp);
                    return Err(stop("weir: no attempt may start"));
                }
            }
        }
        ctx.reported = false;
        let a = ctx
            .attempt
            .as_ref()
            .ok_or_else(|| stop("weir: no attempt"))?;
        let start = *ctx
            .attempt_start
            .get_or_insert_with(tokio::time::Instant::now);
        let clock = Arc::new(Clock::new(start + a.per_try_timeout));
        let peer = self.peer_with_clock(a, clock.clone(), ctx.idle_timeout);
        ctx.clock = Some(clock);
        Ok(Box::new(peer))
    }

    /// The Pingora peer for an attempt starting now (what [`Weir::upstream_peer`] returns).
    /// Timeouts: connect = the attempt's connect timeout; the response head = the per-try
    /// timeout from now; each wait for response body bytes after the head was forwarded
    /// (by [`Weir::upstream_response_filter`]) = `server.idle_timeout`; writes = the per-try
    /// timeout; pooled idle connections = `server.idle_timeout`.
    pub fn peer_for(&self, a: &Attempt) -> HttpPeer {
        let deadline = tokio::time::Instant::now() + a.per_try_timeout;
        let idle_timeout = self.engine.server().idle_timeout;
        self.peer_with_clock(a, Arc::new(Clock::new(deadline)), idle_timeout)
    }

    /// Reads are timed by the connection itself (crate docs, "Per-try timeout"): Pingora's
    /// own `read_timeout` would also bound every body read by the per-try timeout.
    fn peer_with_clock(&self, a: &Attempt, clock: Arc<Clock>, idle_timeout: Duration) -> HttpPeer {
        let mut peer = HttpPeer::new(a.endpoint, false, String::new());
        let o = &mut peer.options;
        o.connection_timeout = Some(a.connect_timeout);
        o.total_connection_timeout = Some(a.connect_timeout);
        o.read_timeout = None;
        o.write_timeout = Some(a.per_try_timeout);
        o.idle_timeout = Some(idle_timeout);
        // Strips the request's hop-by-hop fields (see `upstream_request_filter`).
        o.http_upstream_request_policy = HttpUpstreamRequestPolicy::standard();
        o.custom_l4 = Some(Arc::new(AttemptConnect {
            pool: self.pool.clone(),
            clock,
            idle_timeout,
        }));
        peer
    }

    /// `ProxyHttp::upstream_request_filter`: adds the attempt's request headers
    /// (`x-request-id`, ...).
    ///
    /// The hop-by-hop fields of the request (the [`HOP_BY_HOP`] list and those `Connection`
    /// names) are already gone: the peer carries Pingora's standard upstream request policy
    /// ([`HttpUpstreamRequestPolicy::standard`], set in [`Weir::peer_for`]), which strips them
    /// before this phase (and keeps a WebSocket upgrade's `Connection`/`Upgrade`), so a
    /// second pass here would find nothing to remove.
    pub fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<()> {
        let ctx = &mut *ctx.0;
        if let Some(a) = &ctx.attempt {
            if !upstream_request.headers.contains_key(http::header::HOST) {
                // A request without Host (HTTP/1.0, or 1.1 from a lax client) gets the
                // endpoint's authority, as on weir-gateway.
                upstream_request.insert_header("host", a.endpoint.to_string())?;
            }
            for (name, value) in &a.request_headers {
                upstream_request.insert_header(*name, header_value(value.clone())?)?;
            }
        }
        Ok(())
    }

    /// `ProxyHttp::upstream_response_filter`: the attempt produced a response head. The
    /// engine decides: forward it (weir's headers are added here), retry (a retryable
    /// status such as 503: the head is discarded, nothing was sent to the client), or answer
    /// with its own response.
    pub fn upstream_response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<()> {
        let ctx = &mut *ctx.0;
        let status = upstream_response.status.as_u16();
        if (100..200).contains(&status) && status != 101 {
            return Ok(()); // informational; the final head follows
        }
        if ctx.forwarded || ctx.attempt.is_none() {
            return Ok(());
        }
        let hop = hop_by_hop(&upstream_response.headers, status == 101);
        for name in hop.names() {
            upstream_response.remove_header(name);
        }
        let Some(flow) = ctx.flow() else {
            return Ok(());
        };
        let next = flow.on_attempt(AttemptResult::Response { status });
        ctx.reported = true;
        match next {
            Next::Forward { headers } => {
                for (name, value) in headers {
                    upstream_response.insert_header(name, header_value(value)?)?;
                }
                ctx.forwarded = true;
                // The per-try timeout ends with the head; the body streams under
                // `idle_timeout` inactivity.
                if let Some(clock) = &ctx.clock {
                    clock.body(ctx.idle_timeout);
                }
                Ok(())
            }
            Next::Retry { backoff } => {
                ctx.backoff = Some(backoff);
                let mut e = Error::explain(ErrorType::HTTPStatus(status), "weir: retrying status");
                e.set_retry(true);
                Err(e)
            }
            Next::Respond(resp) => {
                ctx.respond = Some(resp);
                Err(stop("weir: upstream response replaced"))
            }
        }
    }

    /// `ProxyHttp::fail_to_connect`: report a connect failure, mark the error retryable if
    /// the engine wants another attempt.
    pub fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut WeirCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        let ctx = &mut *ctx.0;
        let retry = self.decide(ctx, AttemptResult::ConnectFailure);
        e.set_retry(retry);
        e
    }

    /// `ProxyHttp::error_while_proxy`: an error on an established (or reused) upstream
    /// connection. Before the head was forwarded it is an attempt outcome (reset, protocol
    /// error, per-try timeout) for the engine to decide on; after, the body was cut and
    /// nothing can be retried.
    pub fn error_while_proxy(
        &self,
        _peer: &HttpPeer,
        session: &mut Session,
        mut e: Box<Error>,
        ctx: &mut WeirCtx,
        client_reused: bool,
    ) -> Box<Error> {
        let ctx = &mut *ctx.0;
        if ctx.forwarded {
            if ctx.error.is_none() {
                ctx.error = Some(match e.esource() {
                    ErrorSource::Downstream => Outcome::ClientAborted,
                    _ => Outcome::UpstreamBodyTruncated,
                });
            }
            e.set_retry(false);
            return e;
        }
        if ctx.reported {
            // The head was judged in `upstream_response_filter`: the retry (or not) is decided.
            let retry = ctx.backoff.is_some() && ctx.respond.is_none();
            e.set_retry(retry);
            return e;
        }
        if *e.esource() == ErrorSource::Downstream {
            // The client went away (or sent a bad body) while the attempt was in progress.
            ctx.error.get_or_insert(Outcome::ClientAborted);
            e.set_retry(false);
            return e;
        }
        if session.as_ref().retry_buffer_truncated()
            && let Some(flow) = ctx.flow()
        {
            flow.body_not_replayable();
        }
        // weir's own pool hands out idle connections Pingora reports as new.
        let client_reused = client_reused || ctx.clock.as_ref().is_some_and(|c| c.reused());
        if matches!(e.retry, RetryType::ReusedOnly)
            && client_reused
            && session.req_header().method.is_idempotent()
            && !session.as_ref().retry_buffer_truncated()
        {
            // A pooled keep-alive connection was already closed by the upstream: the request
            // never reached it. Pingora's own rule: retry such requests on a fresh connection
            // — the same attempt, not a new one the policy would count.
            ctx.same_attempt = true;
            e.set_retry(true);
            return e;
        }
        let result = if ctx.clock.as_ref().is_some_and(|c| c.timed_out()) {
            AttemptResult::PerTryTimeout
        } else {
            classify(&e)
        };
        let retry = self.decide(ctx, result);
        e.set_retry(retry);
        e
    }

    fn decide(&self, ctx: &mut CtxState, result: AttemptResult) -> bool {
        if ctx.attempt.is_none() {
            return false;
        }
        let Some(flow) = ctx.flow() else { return false };
        let next = flow.on_attempt(result);
        ctx.reported = true;
        match next {
            Next::Retry { backoff } => {
                ctx.backoff = Some(backoff);
                true
            }
            Next::Respond(resp) => {
                ctx.respond = Some(resp);
                false
            }
            // Not expected for a failed attempt; let Pingora's error path answer.
            Next::Forward { .. } => false,
        }
    }

    /// `ProxyHttp::fail_to_proxy`: writes the response the engine made for a request that
    /// ends without a forwarded upstream response (502 upstream_unavailable, 504, fallback).
    pub async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut WeirCtx,
    ) -> FailToProxy {
        let ctx = &mut *ctx.0;
        let written = session.response_written().map(|h| h.status.as_u16());
        if let Some(status) = written {
            // Head already forwarded: the body was cut; the client sees a short body.
            return FailToProxy {
                error_code: status,
                can_reuse_downstream: false,
            };
        }
        if let Some(resp) = ctx.respond.take() {
            let ok = write_gateway_response(session, &resp).await.is_ok();
            return FailToProxy {
                error_code: if ok { resp.status } else { 0 },
                can_reuse_downstream: false,
            };
        }
        if *e.esource() == ErrorSource::Downstream && is_framing_error(e) {
            // Invalid request body framing found while streaming it upstream: 400, the
            // upstream connection is dropped with an incomplete request, counted under the
            // route.
            if let Some(flow) = ctx.flow() {
                let resp = flow.reject(Outcome::BadRequest);
                let ok = write_gateway_response(session, &resp).await.is_ok();
                return FailToProxy {
                    error_code: if ok { resp.status } else { 0 },
                    can_reuse_downstream: false,
                };
            }
        }
        if *e.esource() == ErrorSource::Downstream {
            ctx.error.get_or_insert(Outcome::ClientAborted);
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        // An error weir did not decide on (e.g. in another filter of the user's proxy).
        let code = match e.etype() {
            ErrorType::HTTPStatus(c) => *c,
            _ => 502,
        };
        let _ = session.respond_error(code).await;
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    /// `ProxyHttp::logging`: ends the request in the engine (access log record, duration
    /// and outcome metrics, permits released).
    pub fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut WeirCtx) {
        let ctx = &mut *ctx.0;
        let status = session.response_written().map_or(0, |h| h.status.as_u16());
        if ctx.error.is_none()
            && ctx.forwarded
            && let Some(e) = e
        {
            ctx.error = Some(match e.esource() {
                ErrorSource::Downstream => Outcome::ClientAborted,
                _ => Outcome::UpstreamBodyTruncated,
            });
        }
        if let Some(flow) = ctx.flow.take() {
            let flow = flow
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            flow.finish(status, ctx.error);
        }
        ctx._inflight = None;
    }
}

/// Pingora's errors for invalid request body framing (chunk size, chunk CRLF, trailers).
fn is_framing_error(e: &Error) -> bool {
    matches!(
        e.etype(),
        ErrorType::Custom("InvalidChunk" | "InvalidTrailerEnd") | ErrorType::InvalidHTTPHeader
    )
}

/// The hop-by-hop header fields never forwarded (RFC 9110 §7.6.1), besides those a
/// `Connection` header names: weir-http's list ([`weir_http::HOP_BY_HOP`], the one both
/// frontends use) as Pingora header names. Two of them are handled apart: `Connection` is
/// removed last, after the fields it names, and `Transfer-Encoding` is Pingora's: it writes
/// it for each hop from the framing it actually uses.
static HOP_BY_HOP: [HeaderName; weir_http::HOP_BY_HOP.len()] = {
    const fn name(i: usize) -> HeaderName {
        HeaderName::from_static(weir_http::HOP_BY_HOP[i])
    }
    [
        name(0),
        name(1),
        name(2),
        name(3),
        name(4),
        name(5),
        name(6),
    ]
};

static CONNECTION: HeaderName = http::header::CONNECTION;

/// Whether `h` of [`HOP_BY_HOP`] is removed in list order (`Connection` is removed last,
/// `Transfer-Encoding` never; `Upgrade` stays for a protocol switch).
fn removed_in_order(h: &HeaderName, upgrade: bool) -> bool {
    *h != http::header::CONNECTION
        && *h != http::header::TRANSFER_ENCODING
        && !(upgrade && *h == http::header::UPGRADE)
}

/// Whether a field a `Connection` header names is forwarded anyway: `Host` always (see
/// weir-http), `Connection` and `Upgrade` for a protocol switch.
fn kept_when_named(name: &HeaderName, upgrade: bool) -> bool {
    *name == http::header::HOST
        || (upgrade && (*name == http::header::UPGRADE || *name == http::header::CONNECTION))
}

/// The elements of the `Connection` headers of `headers`, trimmed.
fn connection_tokens(headers: &http::HeaderMap) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all(http::header::CONNECTION)
        .into_iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
}

/// The header fields to remove before forwarding a head ([`hop_by_hop`]).
struct HopByHop {
    /// Fields named by `Connection` tokens and present (rarely any: no allocation then).
    named: Vec<HeaderName>,
    /// Which of [`HOP_BY_HOP`] are present and to be removed in list order.
    fixed: [bool; HOP_BY_HOP.len()],
    /// Remove `Connection` itself.
    connection: bool,
}

impl HopByHop {
    /// The names in removal order: `Connection`'s tokens as listed, then [`HOP_BY_HOP`] in
    /// its order, then `Connection`.
    fn names(&self) -> impl Iterator<Item = &HeaderName> {
        let fixed = HOP_BY_HOP.iter().zip(self.fixed).filter(|(_, r)| *r);
        self.named
            .iter()
            .chain(fixed.map(|(h, _)| h))
            .chain(self.connection.then_some(&CONNECTION))
    }
}

/// The header fields present in `headers` not to forward: hop-by-hop ones and those named in
/// `Connection` (never `Host`). `upgrade`: keep `Connection` and `Upgrade` for a protocol
/// switch. Allocates nothing unless `Connection` names a field that is present.
///
/// Order matters (removal reorders Pingora's header map): the names come as `Connection`
/// lists them, then [`HOP_BY_HOP`] in its order, then `Connection` itself. Presence is found
/// in one pass over the (few) distinct names instead of one hash lookup per candidate, and a
/// `Connection` token is compared with those names (no parsing, hashing or allocation)
/// before it is made a `HeaderName`: tokens naming an absent field (`Connection:
/// keep-alive`) cost a few comparisons.
fn hop_by_hop(headers: &http::HeaderMap, upgrade: bool) -> HopByHop {
    let mut present = [false; HOP_BY_HOP.len()];
    for name in headers.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            present[i] = true;
        }
    }
    let connection = HOP_BY_HOP
        .iter()
        .zip(present)
        .any(|(h, p)| p && *h == CONNECTION);
    let mut named: Vec<HeaderName> = Vec::new();
    if connection {
        for t in connection_tokens(headers) {
            // Not valid UTF-8: not a valid header name either.
            let Ok(t) = core::str::from_utf8(t) else {
                continue;
            };
            // Present under any case. The map's (few) distinct names are compared directly:
            // a lookup by `&str` would parse and hash the token first, and the common tokens
            // (`keep-alive`, `close`) mostly name no field of the message. An empty or
            // invalid token matches no name.
            if !headers.keys().any(|k| k.as_str().eq_ignore_ascii_case(t)) {
                continue;
            }
            let Ok(name) = HeaderName::from_bytes(t.as_bytes()) else {
                continue;
            };
            if !kept_when_named(&name, upgrade) {
                named.push(name);
            }
        }
    }
    let mut fixed = present;
    for (h, remove) in HOP_BY_HOP.iter().zip(&mut fixed) {
        *remove &= removed_in_order(h, upgrade);
    }
    HopByHop {
        named,
        fixed,
        connection: connection && !upgrade,
    }
}

/// Maps a Pingora error on an established connection (before the head) to an attempt
/// outcome.
fn classify(e: &Error) -> AttemptResult {
    match e.etype() {
        ErrorType::ReadTimedout | ErrorType::WriteTimedout => AttemptResult::PerTryTimeout,
        ErrorType::ConnectTimedout
        | ErrorType::ConnectRefused
        | ErrorType::ConnectNoRoute
        | ErrorType::ConnectError
        | ErrorType::TLSHandshakeFailure
        | ErrorType::TLSHandshakeTimedout
        | ErrorType::HandshakeError
        | ErrorType::SocketError
        | ErrorType::BindError => AttemptResult::ConnectFailure,
        ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed => {
            AttemptResult::Reset
        }
        _ => AttemptResult::ProtocolError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward form `hop_by_hop` must agree with: every candidate, then the
    /// ones present.
    fn reference(headers: &http::HeaderMap, upgrade: bool) -> Vec<HeaderName> {
        let mut names: Vec<HeaderName> = connection_tokens(headers)
            .filter_map(|t| HeaderName::from_bytes(t).ok())
            .filter(|name| !kept_when_named(name, upgrade))
            .collect();
        for h in &HOP_BY_HOP {
            if headers.contains_key(h) && removed_in_order(h, upgrade) {
                names.push(h.clone());
            }
        }
        if !upgrade && headers.contains_key(http::header::CONNECTION) {
            names.push(http::header::CONNECTION);
        }
        names.retain(|n| headers.contains_key(n));
        names
    }

    #[test]
    fn hop_by_hop_matches_reference() {
        let cases: &[&[(&str, &[u8])]] = &[
            &[],
            &[("host", b"a"), ("user-agent", b"x")],
            &[("connection", b"keep-alive"), ("server", b"nginx")],
            &[("connection", b"close"), ("keep-alive", b"timeout=5")],
            &[
                ("connection", b"X-Foo, , Keep-Alive,host"),
                ("x-foo", b"1"),
                ("keep-alive", b"t"),
                ("host", b"h"),
                ("te", b"trailers"),
                ("trailer", b"x"),
                ("upgrade", b"websocket"),
                ("proxy-connection", b"k"),
            ],
            &[
                ("connection", b"upgrade"),
                ("connection", b"x-bar, x-foo"),
                ("upgrade", b"h2c"),
                ("x-bar", b"1"),
                ("x-foo", b"2"),
            ],
            &[("connection", b"bad name, \xff, x-a"), ("x-a", b"1")],
            &[("te", b"trailers"), ("upgrade", b"websocket")],
        ];
        for case in cases {
            let mut map = http::HeaderMap::new();
            for (k, v) in *case {
                map.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    http::HeaderValue::from_bytes(v).unwrap(),
                );
            }
            for upgrade in [false, true] {
                assert_eq!(
                    hop_by_hop(&map, upgrade)
                        .names()
                        .cloned()
                        .collect::<Vec<_>>(),
                    reference(&map, upgrade),
                    "{case:?} upgrade={upgrade}"
                );
            }
        }
    }
}
