//! One client connection: read request heads, drive the policy engine, forward.
//!
//! This is the frontend's whole job and it stays thin: every policy decision (route, limits,
//! queueing, breaker, retries, deadlines, the gateway's own responses and their headers, logs
//! and metrics) is the engine's ([`weir_policy::Flow`]); every byte-level HTTP rule (strict
//! head parsing, framing, hop-by-hop rewriting) is `weir-http`'s. What lives here is the
//! plumbing between them and the sockets: timeouts, buffering, streaming and pooling.
//!
//! Bodies are streamed in both directions. A request body is held in memory only up to
//! [`REPLAY_LIMIT`] so that a retry can resend it; a longer one is streamed to the first
//! attempt and the engine is told that no retry may follow (`Flow::body_not_replayable`).
//! Response bodies are never held: each upstream read is forwarded before the next one.

use core::net::SocketAddr;
use core::time::Duration;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use weir_http::{
    self as http, BodyDecoder, BodyFraming, HeadNext, HeadReader, HeadStop, HeadTimeouts, Limits,
    Persistence, RequestHead, ResponseHead, Version,
};
use weir_policy::{
    Admission, Attempt, AttemptResult, Engine, Flow, GatewayResponse, HeaderText, Next, Outcome,
    RequestInfo, ServerSettings,
};

use crate::io::{Conn, IoFail};
use crate::shutdown::{LocalStop, Shared};
use crate::upstream::{ConnectFail, Pool, connect};

/// The engine's timer on monoio's timer wheel (leaky-bucket delays, queue waits).
struct MonoioTimer;

impl weir_policy::Timer for MonoioTimer {
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        monoio::time::sleep(d)
    }
}

/// Request bodies up to this many bytes are held so that a retry can resend them.
pub(crate) const REPLAY_LIMIT: usize = 64 * 1024;
/// Largest upstream response head accepted.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Status logged when the client went away before a response was written (nginx's 499).
const CLIENT_CLOSED: u16 = 499;

/// What one worker thread shares between its connections.
pub(crate) struct Worker {
    pub(crate) engine: Engine,
    pub(crate) shared: Arc<Shared>,
    pub(crate) pool: Pool,
    /// This worker's shutdown notice (woken on this thread, see [`crate::shutdown`]).
    pub(crate) stop: LocalStop,
}

/// Case-insensitive header lookup for the engine, over a parsed request head.
struct HeaderView<'a>(&'a http::Headers);

impl weir_policy::Headers for HeaderView<'_> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.0.get(name)
    }
    fn for_each(&self, name: &str, f: &mut dyn FnMut(&[u8])) {
        self.0.get_all(name).for_each(f);
    }
}

/// A client-side failure while reading a request body.
#[derive(Debug, Clone, Copy)]
enum ClientFail {
    /// Invalid body framing (bad chunk, body cut short by EOF is [`ClientFail::Gone`]).
    Bad,
    /// No body bytes for `idle_timeout`.
    Timeout,
    /// The client closed or reset the connection.
    Gone,
}

/// Why an attempt produced no usable response head.
enum AttemptErr {
    Upstream(AttemptResult),
    Client(ClientFail),
}

/// Serves one accepted client connection until it closes.
pub(crate) async fn serve(w: Rc<Worker>, stream: monoio::net::TcpStream, peer: SocketAddr) {
    let accepted = Instant::now();
    let _ = stream.set_nodelay(true);
    let mut client = Conn::new(stream);
    let mut head = RequestHead::default();
    let mut first = true;
    let mut out = Vec::with_capacity(4096);
    // One shutdown listener for the connection's keep-alive waits, not one per request.
    let mut stop = w.stop.listen();
    loop {
        let settings = w.engine.server();
        let mut reader = HeadReader::new(
            head_limits(&settings),
            HeadTimeouts {
                header: settings.header_timeout,
                idle: settings.idle_timeout,
            },
            first.then_some(accepted),
        );
        let head_len = loop {
            let (until, idle) = match reader.step(&mut head, client.data(), Instant::now) {
                Ok(HeadNext::Complete(n)) => break n,
                Ok(HeadNext::Read { until, idle }) => (until, idle),
                Err(why) => return close(&w, &mut client, &settings, why, out).await,
            };
            let read = if idle {
                // Between requests: a drain must not wait for the next head.
                if w.shared.stopping() {
                    return;
                }
                monoio::select! {
                    r = client.fill_until(until) => r,
                    _ = &mut stop => return,
                }
            } else {
                client.fill_until(until).await
            };
            match read {
                Ok(_) => {}
                Err(IoFail::Timeout) => {
                    return close(&w, &mut client, &settings, reader.timed_out(), out).await;
                }
                // A head cut short by the client: nobody is left to answer.
                Err(_) => return,
            }
        };
        client.consume(head_len);
        let keep = handle(&w, &settings, &mut client, &head, peer, &mut out).await;
        if !keep || w.shared.stopping() {
            client.shutdown().await;
            return;
        }
        first = false;
    }
}

/// The parse limits of `settings`. A missing Host is accepted (see the crate docs, "Host");
/// a duplicate one is not.
fn head_limits(settings: &ServerSettings) -> Limits {
    Limits {
        require_host: false,
        ..Limits::with_max_head_bytes(settings.max_header_bytes)
    }
}

/// Ends a connection whose head could not be read: answers what the HTTP layer rejected
/// (400/408/414/431/505) and closes.
async fn close(
    w: &Worker,
    client: &mut Conn,
    settings: &ServerSettings,
    stop: HeadStop,
    mut out: Vec<u8>,
) {
    if let HeadStop::Reject(e) = stop {
        let resp = w
            .engine
            .reject_malformed(Outcome::malformed(e.reason()), None);
        out.clear();
        gateway_bytes(&resp, false, Persistence::Close, &mut out);
        let _ = client.write_all(out, settings.idle_timeout).await;
        client.shutdown().await;
    }
}

/// Serialises a response the gateway makes itself.
fn gateway_bytes(resp: &GatewayResponse, head_only: bool, conn: Persistence, out: &mut Vec<u8>) {
    http::write_response_with(out, resp.status, &resp.headers, conn, &resp.body, head_only);
}

/// Writes `out` to the client (handing the buffer back); false when the client is gone.
async fn send(client: &mut Conn, out: &mut Vec<u8>, idle: Duration) -> bool {
    let (r, back) = client.write_all(core::mem::take(out), idle).await;
    *out = back;
    out.clear();
    r.is_ok()
}

/// One request on a connection whose head was just parsed. Returns whether the connection
/// may carry another request.
async fn handle(
    w: &Worker,
    settings: &ServerSettings,
    client: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    out: &mut Vec<u8>,
) -> bool {
    let framing = head.framing();
    let idle = settings.idle_timeout;
    let mut x = Exchange {
        w,
        client,
        head,
        out,
        idle,
    };
    let info = RequestInfo {
        method: head.method(),
        path: head.target(),
        headers: &HeaderView(head.headers()),
        client_ip: Some(peer.ip()),
        body_len: match framing {
            BodyFraming::ContentLength(n) => Some(n),
            BodyFraming::Chunked | BodyFraming::UntilClose => None,
            BodyFraming::None => Some(0),
        },
    };
    let mut flow = w.engine.begin(&info);
    let mut dec = BodyDecoder::new(framing);

    if let Admission::Respond(resp) = flow.admit(&MonoioTimer).await {
        return respond(&mut x, flow, resp, &dec).await;
    }

    if head.expect_continue()
        && framing.has_body()
        && head.version() == Version::Http11
        && x.client.buffered() == 0
        && x.client
            .write_static(b"HTTP/1.1 100 Continue\r\n\r\n", idle)
            .await
            .is_err()
    {
        flow.finish(CLIENT_CLOSED, Some(Outcome::ClientAborted));
        return false;
    }

    // The request body, held up to the replay limit.
    let mut body = Vec::new();
    if framing.has_body()
        && let Err(f) = read_body_prefix(x.client, &mut dec, &mut body, REPLAY_LIMIT, idle).await
    {
        client_failed(x.client, flow, f, x.out, idle).await;
        return false;
    }
    let streaming = !dec.is_done();
    let up_framing = match (framing, streaming) {
        (BodyFraming::None, _) => BodyFraming::None,
        (_, false) => BodyFraming::ContentLength(body.len() as u64),
        (BodyFraming::ContentLength(n), true) => BodyFraming::ContentLength(n),
        (_, true) => BodyFraming::Chunked,
    };

    loop {
        let attempt = match flow.next_attempt() {
            Ok(a) => a,
            Err(resp) => return respond(&mut x, flow, resp, &dec).await,
        };
        let result = run_attempt(&mut x, &attempt, up_framing, &body, &mut dec, &mut flow).await;
        let (report, got) = match result {
            Ok((up, resp)) => (
                AttemptResult::Response {
                    status: resp.status(),
                },
                Some((up, resp)),
            ),
            Err(AttemptErr::Upstream(r)) => (r, None),
            Err(AttemptErr::Client(f)) => {
                client_failed(x.client, flow, f, x.out, idle).await;
                return false;
            }
        };
        match flow.on_attempt(report) {
            Next::Forward { headers } => {
                let Some((up, resp)) = got else {
                    // The engine only forwards responses; unreachable with a correct engine.
                    let resp = flow.reject(Outcome::UpstreamUnavailable);
                    return respond(&mut x, flow, resp, &dec).await;
                };
                let fwd = Forwarding {
                    up,
                    resp,
                    headers,
                    endpoint: attempt.endpoint,
                };
                return forward(&mut x, flow, fwd, &dec).await;
            }
            Next::Retry { backoff } => {
                drop(got);
                if !backoff.is_zero() {
                    monoio::time::sleep(backoff).await;
                }
            }
            Next::Respond(resp) => {
                drop(got);
                return respond(&mut x, flow, resp, &dec).await;
            }
        }
    }
}

/// What every part of one request's exchange with the client uses: the worker, the client
/// connection, the request head, the output buffer and the idle timeout. Borrowed, on the
/// stack of [`handle`]; passed to [`respond`], [`run_attempt`] and [`forward`].
struct Exchange<'a> {
    w: &'a Worker,
    client: &'a mut Conn,
    head: &'a RequestHead,
    out: &'a mut Vec<u8>,
    idle: Duration,
}

/// Writes a response the engine built and finishes the flow. Returns whether the connection
/// may carry another request.
async fn respond(
    x: &mut Exchange<'_>,
    flow: Flow,
    resp: GatewayResponse,
    dec: &BodyDecoder,
) -> bool {
    let (w, head, idle) = (x.w, x.head, x.idle);
    let (client, out) = (&mut *x.client, &mut *x.out);
    // An unread request body would be taken for the next request: close instead.
    let keep = head.keep_alive() && dec.is_done() && !w.shared.stopping();
    out.clear();
    let conn = Persistence::new(keep, head.version() == Version::Http10);
    gateway_bytes(&resp, head.is_head(), conn, out);
    // Finished before the bytes go out: a client that has the response can count on seeing
    // it in /metrics (and the log), however fast it asks. A client gone during this last
    // write is therefore not recorded as `client_aborted`.
    flow.finish(resp.status, None);
    send(client, out, idle).await && keep
}

/// The request body failed on the client side: answer (400 / 408) if still possible, finish.
async fn client_failed(
    client: &mut Conn,
    mut flow: Flow,
    f: ClientFail,
    out: &mut Vec<u8>,
    idle: Duration,
) {
    let reason = match f {
        ClientFail::Bad => Outcome::BadRequest,
        ClientFail::Timeout => Outcome::ClientTimeout,
        ClientFail::Gone => {
            flow.finish(CLIENT_CLOSED, Some(Outcome::ClientAborted));
            return;
        }
    };
    // One request, counted once under its route (not also under "-").
    let resp = flow.reject(reason);
    out.clear();
    gateway_bytes(&resp, false, Persistence::Close, out);
    flow.finish(resp.status, None);
    let _ = send(client, out, idle).await;
}

/// Reads request body data into `body` until the body ends or `body` exceeds `limit`.
async fn read_body_prefix(
    client: &mut Conn,
    dec: &mut BodyDecoder,
    body: &mut Vec<u8>,
    limit: usize,
    idle: Duration,
) -> Result<(), ClientFail> {
    loop {
        while client.buffered() > 0 && !dec.is_done() && body.len() <= limit {
            let step = dec.decode(client.data()).map_err(|_| ClientFail::Bad)?;
            body.extend_from_slice(&client.data()[step.data]);
            client.consume(step.consumed);
            if step.consumed == 0 {
                break;
            }
        }
        if dec.is_done() || body.len() > limit {
            return Ok(());
        }
        client.fill_within(idle).await.map_err(|e| match e {
            IoFail::Timeout => ClientFail::Timeout,
            IoFail::Eof | IoFail::Error => ClientFail::Gone,
        })?;
    }
}

/// Streams the rest of a request body (beyond the held prefix) from the client to `up`.
async fn stream_request_body(
    client: &mut Conn,
    up: &mut Conn,
    dec: &mut BodyDecoder,
    chunked: bool,
    idle: Duration,
) -> Result<(), AttemptErr> {
    let mut out = Vec::with_capacity(32 * 1024);
    loop {
        while client.buffered() > 0 && !dec.is_done() {
            let step = dec
                .decode(client.data())
                .map_err(|_| AttemptErr::Client(ClientFail::Bad))?;
            let data = &client.data()[step.data];
            if chunked {
                http::encode_chunk(data, &mut out);
            } else {
                out.extend_from_slice(data);
            }
            client.consume(step.consumed);
            if step.consumed == 0 {
                break;
            }
        }
        if dec.is_done() && chunked {
            out.extend_from_slice(http::LAST_CHUNK);
        }
        if !out.is_empty() {
            let (r, back) = up.write_all(out, idle).await;
            out = back;
            out.clear();
            r.map_err(|_| AttemptErr::Upstream(AttemptResult::Reset))?;
        }
        if dec.is_done() {
            return Ok(());
        }
        client.fill_within(idle).await.map_err(|e| {
            AttemptErr::Client(match e {
                IoFail::Timeout => ClientFail::Timeout,
                IoFail::Eof | IoFail::Error => ClientFail::Gone,
            })
        })?;
    }
}

/// One upstream attempt: connect (or reuse), send the request, read the response head. The
/// per-try timeout covers everything up to the response head, except the streaming of a body
/// beyond the replay limit (which runs under `idle_timeout`; the per-try clock restarts after it).
async fn run_attempt(
    x: &mut Exchange<'_>,
    a: &Attempt,
    up_framing: BodyFraming,
    body: &[u8],
    dec: &mut BodyDecoder,
    flow: &mut Flow,
) -> Result<(Conn, ResponseHead), AttemptErr> {
    let (w, head, idle) = (x.w, x.head, x.idle);
    let client = &mut *x.client;
    use AttemptResult::{ConnectFailure, PerTryTimeout, ProtocolError, Reset};
    let fail = |r| Err(AttemptErr::Upstream(r));
    let streaming = !dec.is_done();
    let mut deadline = Instant::now() + a.per_try_timeout;
    let mut extra: Vec<(&str, &[u8])> = a
        .request_headers
        .iter()
        .map(|(n, v)| (*n, v.as_bytes()))
        .collect();
    // A request without Host (HTTP/1.0, or a bare HTTP/1.1 client) goes upstream as HTTP/1.1,
    // which requires one: name the endpoint, as nginx's `proxy_set_header Host $proxy_host`.
    let host_fallback;
    if head.host().is_none() {
        host_fallback = a.endpoint.to_string();
        extra.push(("host", host_fallback.as_bytes()));
    }
    let mut req = Vec::with_capacity(1024 + body.len());
    http::write_request_head(head, up_framing, &extra, &mut req);
    if streaming && up_framing == BodyFraming::Chunked {
        http::encode_chunk(body, &mut req);
    } else {
        req.extend_from_slice(body);
    }
    // A pooled connection may have been closed by the upstream while idle; if it fails before
    // any response byte, the request is sent once more on a fresh connection.
    let mut may_refresh = !streaming;
    loop {
        let pooled = if may_refresh {
            w.pool.take(a.endpoint, idle)
        } else {
            None
        };
        let reused = pooled.is_some();
        let mut up = match pooled {
            Some(c) => c,
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                let ct = a.connect_timeout.min(left);
                match connect(a.endpoint, ct).await {
                    Ok(c) => c,
                    Err(ConnectFail::Timeout) if ct < a.connect_timeout => {
                        return fail(PerTryTimeout);
                    }
                    Err(_) => return fail(ConnectFailure),
                }
            }
        };
        let (r, back) = up.write_until(req, deadline).await;
        req = back;
        match r {
            Ok(()) => {}
            Err(IoFail::Timeout) => return fail(PerTryTimeout),
            Err(_) if reused => {
                may_refresh = false;
                continue;
            }
            Err(_) => return fail(Reset),
        }
        if streaming {
            flow.body_not_replayable();
            let chunked = up_framing == BodyFraming::Chunked;
            stream_request_body(client, &mut up, dec, chunked, idle).await?;
            deadline = Instant::now() + a.per_try_timeout;
        }
        let mut resp = ResponseHead::default();
        let mut received = false;
        loop {
            match http::parse_response_into(&mut resp, up.data(), MAX_RESPONSE_HEAD, head.is_head())
            {
                Ok(Some(n)) => {
                    up.consume(n);
                    if resp.status() == 101 {
                        // Upgrades are not supported (Upgrade is hop-by-hop and never sent).
                        return fail(ProtocolError);
                    }
                    if resp.is_informational() {
                        continue;
                    }
                    return Ok((up, resp));
                }
                Ok(None) => match up.fill_until(deadline).await {
                    Ok(_) => received = true,
                    Err(IoFail::Timeout) => return fail(PerTryTimeout),
                    Err(_) if !received && reused => break,
                    Err(IoFail::Eof) if received => return fail(ProtocolError),
                    Err(_) => return fail(Reset),
                },
                Err(_) => return fail(ProtocolError),
            }
        }
        // Only reached when a reused connection died before answering.
        may_refresh = false;
    }
}

/// An upstream response head chosen for forwarding, with its connection.
struct Forwarding {
    up: Conn,
    resp: ResponseHead,
    headers: Vec<(&'static str, HeaderText)>,
    endpoint: SocketAddr,
}

/// Forwards the upstream response (head and streamed body) and finishes the flow.
async fn forward(x: &mut Exchange<'_>, flow: Flow, fwd: Forwarding, req_dec: &BodyDecoder) -> bool {
    let (w, head, idle) = (x.w, x.head, x.idle);
    let (client, out) = (&mut *x.client, &mut *x.out);
    let Forwarding {
        mut up,
        resp,
        headers,
        endpoint,
    } = fwd;
    let status = resp.status();
    let framing = resp.framing();
    let http10 = head.version() == Version::Http10;
    let client_framing = match framing {
        BodyFraming::Chunked if http10 => BodyFraming::UntilClose,
        f => f,
    };
    let keep = head.keep_alive()
        && req_dec.is_done()
        && client_framing != BodyFraming::UntilClose
        && !w.shared.stopping();
    let mut extra: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    if !keep {
        extra.push(("connection", b"close"));
    } else if http10 {
        extra.push(("connection", b"keep-alive"));
    }
    out.clear();
    http::write_response_head(&resp, client_framing, &extra, out);
    let chunked_out = client_framing == BodyFraming::Chunked;
    let mut dec = BodyDecoder::new(framing);
    let mut error: Option<Outcome> = None;
    loop {
        while up.buffered() > 0 && !dec.is_done() {
            match dec.decode(up.data()) {
                Ok(step) => {
                    let data = &up.data()[step.data];
                    if chunked_out {
                        http::encode_chunk(data, out);
                    } else {
                        out.extend_from_slice(data);
                    }
                    up.consume(step.consumed);
                    if step.consumed == 0 {
                        break;
                    }
                }
                Err(_) => {
                    error = Some(Outcome::UpstreamBodyTruncated);
                    break;
                }
            }
        }
        if error.is_some() {
            break;
        }
        if dec.is_done() {
            if chunked_out {
                out.extend_from_slice(http::LAST_CHUNK);
            }
            break;
        }
        if !out.is_empty() && !send(client, out, idle).await {
            error = Some(Outcome::ClientAborted);
            break;
        }
        match up.fill_within(idle).await {
            Ok(_) => {}
            Err(IoFail::Eof) if dec.finish_on_eof().is_ok() => break,
            Err(_) => {
                error = Some(Outcome::UpstreamBodyTruncated);
                break;
            }
        }
    }
    if error.is_none() && resp.keep_alive() && dec.is_done() && up.buffered() == 0 {
        w.pool.put(endpoint, up);
    }
    // As in `respond`: recorded before the last bytes (the end of the body, or the whole
    // response when it fit in one write) reach the client, so that metrics and the log never
    // lag behind what a client has seen.
    let last = !out.is_empty() && error != Some(Outcome::ClientAborted);
    flow.finish(status, error);
    if last && !send(client, out, idle).await {
        return false;
    }
    keep && error.is_none()
}
