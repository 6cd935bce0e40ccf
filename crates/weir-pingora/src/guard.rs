//! [`HeadGuard`]: the HTTP/1 front door in front of a Pingora `HttpProxy`.
//!
//! Pingora parses a request head before any `ProxyHttp` phase runs, answers what its parser
//! rejects with a plain 400 (or nothing at all), reads heads under its own 60 s timeout and
//! accepts every connection. docs/HTTP.md wants weir's answers there too: 400 / 414 / 431 /
//! 505 / 408 with `x-weir-reason`, a JSON body and a count in `weir_requests_total`, heads
//! bounded by `server.header_timeout`, connections by `server.max_connections`, and the same
//! strictness as `weir-gateway` about what is malformed.
//!
//! So the guard is a Pingora [`ServerApp`] wrapping the proxy's [`HttpServerApp`]. For each
//! request on a connection it:
//! 1. waits for the head's first byte (`header_timeout` after accept on a new connection,
//!    `idle_timeout` between requests on a kept-alive one), then reads until the head is
//!    complete — by `header_timeout` after accept (first request) or after the first byte
//!    (later ones): a slow client gets 408 `client_timeout` and the connection is closed;
//! 2. parses it with `weir-http`, the parser `weir-gateway` uses, with the config's
//!    `max_header_bytes`: a malformed head (smuggling shapes, obs-fold, NUL/CR/LF in values,
//!    bad header lines, duplicate Host, ...) is answered by the engine
//!    ([`Engine::reject_malformed`]: 400 / 414 / 431 / 505, counted under route `-`, logged)
//!    and the connection closed — Pingora never sees it, no upstream byte is written;
//! 3. checks the chunked body bytes that arrived with the head: invalid framing there is
//!    passed to the proxy as a [`BodyRejected`] connection context, and `Weir` answers 400
//!    `bad_request` after `Engine::begin`, so it counts once, under the route, as on the
//!    gateway — still before any byte goes upstream;
//! 4. hands Pingora a fresh HTTP/1 session whose parser is pre-filled with the bytes read
//!    (`ServerSession::set_pipelined_prefix`), so the proxy runs exactly as without the
//!    guard, and takes the connection back for the next request when Pingora keeps it.
//!
//! Connections beyond `server.max_connections` (read at each accept, so a reload applies)
//! wait, unread, until one closes; their `header_timeout` starts when they get a slot.
//! HTTP/2 (ALPN `h2`) connections are passed to the inner app unchanged.

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{ALPN, Stream};
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use weir_http::{
    BodyDecoder, BodyFraming, HeadNext, HeadReader, HeadStop, HeadTimeouts, HttpError, Limits,
    Persistence,
};
use weir_policy::{Engine, Outcome};

/// Marker the guard passes to the proxy (as the connection's user context, delivered by
/// `ProxyHttp::on_connection_reuse`) when the request's chunked body, as far as it arrived
/// with the head, has invalid framing. [`crate::Weir`] answers such a request 400
/// `bad_request` right after `Engine::begin` and admission, before any upstream attempt.
#[derive(Debug, Clone, Copy)]
pub struct BodyRejected;

/// The front door: strict head parsing, head timeouts and the connection limit in front of
/// a Pingora HTTP app (see the module docs).
pub struct HeadGuard<A> {
    inner: Arc<A>,
    engine: Engine,
    conns: Arc<AtomicUsize>,
    closing: Arc<tokio::sync::Notify>,
}

impl<A> HeadGuard<A> {
    /// Guards `inner` (e.g. `pingora::proxy::http_proxy(&conf, WeirProxy::new(weir))`) with
    /// the limits of `engine`'s config.
    pub fn new(inner: A, engine: Engine) -> HeadGuard<A> {
        HeadGuard {
            inner: Arc::new(inner),
            engine,
            conns: Arc::default(),
            closing: Arc::default(),
        }
    }

    /// Open connections (those waiting for a slot excluded).
    pub fn connections(&self) -> usize {
        self.conns.load(Ordering::Acquire)
    }
}

/// One connection slot under `max_connections`; released on drop.
struct Slot(Arc<AtomicUsize>, Arc<tokio::sync::Notify>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        self.1.notify_one();
    }
}

impl<A> HeadGuard<A> {
    async fn slot(&self, shutdown: &ShutdownWatch) -> Option<Slot> {
        let mut shutdown = shutdown.clone();
        loop {
            let max = self.engine.server().max_connections;
            let now = self.conns.load(Ordering::Acquire);
            if now < max {
                if self
                    .conns
                    .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Some(Slot(self.conns.clone(), self.closing.clone()));
                }
                continue;
            }
            // Full: wait for a close (or re-check soon, in case the limit was raised).
            tokio::select! {
                () = self.closing.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = shutdown.wait_for(|s| *s) => return None,
            }
        }
    }

    /// Reads one request head into `buf`, as [`HeadReader`] decides. `first`: the
    /// connection's first request. The head is checked in place (a [`BodyFraming`] as the [`weir_http::HeadSink`]):
    /// Pingora parses the same bytes next, and weir needs only the verdict and the body
    /// framing, not a copy of the fields.
    ///
    /// `waits` are the connection's timer and shutdown wait, kept across its requests
    /// ([`Waits`]).
    async fn read_head(
        &self,
        stream: &mut Stream,
        buf: &mut BytesMut,
        accepted: Instant,
        first: bool,
        waits: &mut Waits<'_, impl Future<Output = ()>>,
    ) -> Result<bool, HeadStop> {
        let settings = self.engine.server();
        let limits = Limits {
            // A missing Host is accepted (the upstream gets the endpoint); a duplicate is not.
            require_host: false,
            ..Limits::with_max_head_bytes(settings.max_header_bytes)
        };
        let timeouts = HeadTimeouts {
            header: settings.header_timeout,
            idle: settings.idle_timeout,
        };
        let mut reader = HeadReader::new(limits, timeouts, first.then_some(accepted));
        let mut framing = BodyFraming::None;
        loop {
            let (until, idle) = match reader.step(&mut framing, buf, Instant::now)? {
                HeadNext::Complete(len) => return Ok(body_prefix_ok(framing, &buf[len..])),
                HeadNext::Read { until, idle } => (until, idle),
            };
            let timer = &mut waits.timer;
            if timer.deadline() != until {
                timer.as_mut().reset(until);
            }
            let read = tokio::select! {
                // The read first (as `tokio::time::timeout` does): when the task wakes
                // because the request arrived, neither wait is polled again (nor a random
                // branch order drawn).
                biased;
                r = stream.read_buf(buf) => Some(r),
                () = timer.as_mut() => None,
                // An idle kept-alive connection must not hold a drain up. Once ready, `drain`
                // is never polled again: the connection ends here.
                () = waits.drain.as_mut(), if idle && !first => return Err(HeadStop::Close),
            };
            match read {
                Some(Ok(n)) if n > 0 => {}
                None => return Err(reader.timed_out()),
                // A head cut short by the client: nobody is left to answer.
                _ => return Err(HeadStop::Close),
            }
        }
    }

    async fn reject(&self, mut stream: Stream, e: HttpError) {
        let resp = self
            .engine
            .reject_malformed(Outcome::malformed(e.reason()), None);
        let mut out = Vec::with_capacity(256 + resp.body.len());
        weir_http::write_response_with(
            &mut out,
            resp.status,
            &resp.headers,
            Persistence::Close,
            &resp.body,
            false,
        );
        let idle = self.engine.server().idle_timeout;
        let _ = tokio::time::timeout(idle, async {
            stream.write_all(&out).await?;
            stream.flush().await
        })
        .await;
        pingora::protocols::Shutdown::shutdown(&mut *stream).await;
    }
}

/// What a connection's head reads wait on besides the socket, made once per connection and
/// kept across its requests, so that each wait for a kept-alive connection's next request
/// costs no new timer (a tokio `Sleep` takes a runtime handle and a timer-wheel entry when
/// made, and gives both back when dropped; here the entry is moved to the new deadline) and
/// no new shutdown waiter.
struct Waits<'a, F> {
    /// The head's deadline ([`HeadNext::Read`]'s `until`).
    timer: Pin<&'a mut tokio::time::Sleep>,
    /// [`drained`].
    drain: Pin<&'a mut F>,
}

/// Completes when the server starts shutting down. Once first polled it stays registered
/// for the shutdown signal (see [`Waits`]).
async fn drained(mut shutdown: ShutdownWatch) {
    // An error means the sender is gone: the server is going away too.
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Whether the body bytes that arrived with the head are validly framed so far (only chunked
/// framing can be invalid).
fn body_prefix_ok(framing: BodyFraming, bytes: &[u8]) -> bool {
    if framing != BodyFraming::Chunked {
        return true;
    }
    let mut dec = BodyDecoder::new(framing);
    let mut at = 0;
    while at < bytes.len() && !dec.is_done() {
        match dec.decode(&bytes[at..]) {
            Ok(step) if step.consumed > 0 => at += step.consumed,
            Ok(_) => break,
            Err(_) => return false,
        }
    }
    true
}

#[async_trait]
impl<A> ServerApp for HeadGuard<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            return ServerApp::process_new(&self.inner, stream, shutdown).await;
        }
        let _slot = self.slot(shutdown).await?;
        let accepted = Instant::now();
        let mut stream = stream;
        let mut persistent: Option<HttpPersistentSettings> = None;
        let mut first = true;
        let drain = core::pin::pin!(drained(shutdown.clone()));
        // Reset to each head's deadline before it is polled.
        let timer = core::pin::pin!(tokio::time::sleep_until(accepted));
        let mut waits = Waits { timer, drain };
        loop {
            let mut buf = BytesMut::with_capacity(4096);
            let body_ok = match self
                .read_head(&mut stream, &mut buf, accepted, first, &mut waits)
                .await
            {
                Ok(ok) => ok,
                Err(HeadStop::Close) => return None,
                Err(HeadStop::Reject(e)) => {
                    self.reject(stream, e).await;
                    return None;
                }
            };
            let mut session = ServerSession::new_http1(stream);
            match persistent.take() {
                Some(p) => p.apply_to_session(&mut session),
                // What Pingora's own accept loop sets on a new connection (the proxy then
                // sets `idle_timeout` per request).
                None => session.set_keepalive(if *shutdown.borrow() { None } else { Some(60) }),
            }
            if !body_ok {
                session.set_connection_user_context(Some(Box::new(BodyRejected)));
            }
            session.set_pipelined_prefix(buf);
            let reused = self.inner.process_new_http(session, shutdown).await?;
            let (s, p) = reused.consume();
            stream = s;
            persistent = p;
            first = false;
        }
    }

    async fn cleanup(&self) {
        self.inner.http_cleanup().await;
    }
}
