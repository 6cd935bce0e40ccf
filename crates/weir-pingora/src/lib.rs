//! weir for [Pingora](https://github.com/cloudflare/pingora): rate limits, concurrency limits
//! with a queue, deadlines, retries with budgets and backoff, and circuit breakers for a
//! Pingora `ProxyHttp`, configured by weir's TOML file — the same file, and the same
//! observable behaviour, as the `weir-gateway` frontend.
//!
//! All policy lives in the runtime-agnostic engine ([`weir_policy::Engine`]): routing,
//! limits, the queue, breakers, deadlines, retry decisions, the bodies and headers of the
//! responses weir makes, metrics, the access log and the admin API. This crate only maps
//! Pingora's request phases onto the engine's request lifecycle ([`Weir`], one call per
//! phase), a front door for HTTP/1 connections ([`HeadGuard`]: strict head parsing, head
//! timeout, connection limit), and the `weir-pingora` binary ([`WeirProxy`] behind a
//! [`HeadGuard`] + [`AdminApp`] + a Pingora server with drain-on-signal shutdown).
//!
//! # Embedding weir in your proxy
//!
//! Keep a [`WeirCtx`] in your `CTX` and forward the phases. weir picks the upstream
//! endpoint and its timeouts per attempt from the config (`[[upstreams]]`, `[routes.*]`);
//! add your own logic around the calls (auth before `request_filter`, header rewrites in
//! `upstream_request_filter`, ...). The complete program is `examples/embed.rs`:
//!
#![doc = "```no_run"]
#![doc = include_str!("../examples/embed.rs")]
#![doc = "```"]
//!
//! Set `ServerConf::max_retries` high (the binary uses 1024): weir's config bounds the
//! attempts (`max_attempts`, deadlines, the retry budget), and Pingora's cap (default 16)
//! must never be the one that ends a retry loop. TLS to upstreams is not part of weir's
//! config; this crate enables no Pingora TLS backend (add `pingora` with `rustls` or
//! `openssl` in your own manifest if your proxy needs one).
//!
//! The library registers no global allocator. The `weir-pingora` binary uses mimalloc
//! (default feature `mimalloc`): Pingora makes ~100 small allocations per proxied request,
//! and with glibc's allocator they cost about a fifth of the request's user-space
//! instructions (with mimalloc: 17 % fewer per request for weir-pingora, 12 % for a plain
//! Pingora proxy; `docs/perf-log/2026-11-30-pingora-mimalloc.md`). Your own proxy can do the same with
//! `#[global_allocator] static A: mimalloc::MiMalloc = mimalloc::MiMalloc;`.
//!
//! # How the phases map to the engine
//!
//! | Pingora phase | engine | notes |
//! |---|---|---|
//! | (before Pingora) | `Engine::reject_malformed` | [`HeadGuard`] reads and checks the head; malformed / slow requests end here |
//! | `on_connection_reuse` | — | takes the guard's [`guard::BodyRejected`] marker (invalid chunk framing) |
//! | `request_filter` | `Engine::begin`, `Flow::admit` | waits (queue, leaky-bucket delay) are tokio sleeps inside the filter; a rejection (404, 429, 403, 503, fallback) is written there and the filter returns `Ok(true)` |
//! | `upstream_peer` | `Flow::next_attempt` | first sleeps the backoff chosen for the previous failure; the peer carries the attempt's timeouts; "no attempt may start" (deadline) ends the request via `fail_to_proxy` |
//! | `upstream_request_filter` | `Attempt::request_headers` | `x-request-id` to the upstream |
//! | `upstream_response_filter` | `Flow::on_attempt(Response)` | `Forward` adds weir's headers to the head and moves the attempt's read deadline from per-try to `idle_timeout` inactivity; `Retry` returns a retryable error (see below); `Respond` replaces the response |
//! | `fail_to_connect` / `error_while_proxy` | `Flow::on_attempt(failure)` | `Retry` → `e.set_retry(true)` and the backoff is slept in the next `upstream_peer` |
//! | `fail_to_proxy` | — | writes the engine's 502 / 504 / fallback |
//! | `logging` | `Flow::finish` | access log, duration and outcome metrics, permits released |
//!
//! # Where Pingora shapes the behaviour
//!
//! - **Retry on an upstream status (502/503/504 in `retry.on`).** Pingora retries only on
//!   errors. weir turns a retryable response head into one: `upstream_response_filter`
//!   returns an `HTTPStatus` error marked retryable *before* anything reaches the client,
//!   Pingora drops that upstream connection (its body is unread) and calls
//!   `upstream_peer` again. Request bodies are replayed from Pingora's retry buffer; when
//!   that buffer was truncated (large bodies) weir tells the engine
//!   (`Flow::body_not_replayable`) and no retry happens.
//! - **Per-try timeout.** The per-try timeout bounds an attempt until its response head (a
//!   head that does not arrive in time is `per_try_timeout` / `deadline_exceeded`, as on
//!   `weir-gateway`); after the head was forwarded, the body streams under
//!   `server.idle_timeout` of inactivity, so a live body that pauses for longer than
//!   `per_try` is not cut. Pingora 0.9 cannot do this itself: it has one read timeout per
//!   upstream session, copied from `PeerOptions::read_timeout` when the attempt starts and
//!   applied to every read, head and body alike, and no phase reaches the session after the
//!   head. So the peer weir returns from `upstream_peer` leaves `read_timeout` unset and
//!   carries a connector of its own (`PeerOptions::custom_l4`, one per attempt) whose TCP
//!   stream times its reads: against the attempt's per-try deadline until
//!   [`Weir::upstream_response_filter`] forwards the head, then against `idle_timeout` for
//!   each wait for body bytes. Write timeouts stay Pingora's (the per-try timeout).
//!
//!   Pingora never reuses such a stream from its own connection pool (it checks a pooled
//!   connection's peer address through its fd, which a custom stream does not have:
//!   cloudflare/pingora#883), so weir pools idle upstream connections itself, one pool per
//!   [`Weir`]. Pingora still decides what is reusable (its keep-alive rules): when it
//!   releases a connection to its pool it first polls one read without a waker to check the
//!   connection is quiet; weir's stream answers that check with end-of-stream, Pingora drops
//!   the stream, and the drop puts the TCP connection into weir's pool. The next attempt to
//!   the endpoint takes it from there, bound to that attempt's deadlines. Idle connections
//!   are closed after `idle_timeout` or when the upstream closes them (checked when taken
//!   and once a second), at most 128 per endpoint. Pingora reports these connections as new
//!   (`connected_to_upstream`'s `reused` is false); weir's own stale-connection rule below
//!   knows better.
//! - **Stale pooled connections.** When a kept-alive upstream connection from the pool turns
//!   out closed before the request could reach the upstream, an idempotent request is resent
//!   on another connection as the *same* attempt (Pingora's own rule), not counted as a
//!   retry.
//! - **Malformed requests, head timeouts, connection limits.** Pingora parses the request
//!   head before any filter runs, with its own (more lenient) parser, a 60 s read timeout and
//!   no accept limit. The binary therefore serves the proxy behind [`HeadGuard`], a Pingora
//!   `ServerApp` that reads each head first with `weir-http` (the parser `weir-gateway`
//!   uses) under `server.header_timeout`, answers malformed and slow requests through the
//!   engine (400 / 414 / 431 / 505 / 408 with `x-weir-reason`, counted under route `-`),
//!   holds connections beyond `server.max_connections` unread until one closes, and then hands
//!   Pingora the bytes it read. Embedders get the same by wrapping their `HttpProxy` in a
//!   [`HeadGuard`] (see the example); without it Pingora's parser decides and answers a plain
//!   400, and [`Weir::request_filter`] still applies the size limits to the parsed head
//!   (431 / 414). Invalid chunk framing in body bytes that arrived with the head is answered
//!   400 after admission, before any upstream byte; found later, while streaming to the
//!   upstream, it is answered 400 if no response has started and the upstream connection is
//!   dropped with an incomplete request (both counted once, under the route).
//! - **Connections held at `max_connections`** are accepted by Pingora's listener (weir-gateway
//!   leaves them in the kernel backlog); a client sees the same thing — a connection nobody
//!   answers until a slot frees — and `header_timeout` starts when it gets the slot.
//! - **Client-side timers.** `server.idle_timeout` bounds kept-alive client connections between
//!   requests (in [`HeadGuard`]), request body reads and response writes (set per request by
//!   [`Weir::request_filter`]), upstream response body reads, and pooled upstream
//!   connections.
//! - **Shutdown.** Pingora's SIGINT is a fast exit and its SIGTERM sleeps a fixed grace
//!   period. The binary maps both signals to a graceful stop (listeners close at once) and
//!   exits 0 as soon as in-flight requests are done, at most `drain_timeout` later
//!   ([`server`]).

pub mod admin;
pub mod guard;
pub mod module;
pub mod proxy;
pub mod server;
mod upstream;

pub use admin::AdminApp;
pub use guard::HeadGuard;
pub use module::{TokioTimer, Weir, WeirCtx, write_gateway_response};
pub use proxy::WeirProxy;
pub use weir_policy;
