//! A plain Pingora proxy with no weir: the baseline for the module's overhead
//! (`bench/http/pingora.sh`). Same shape as `weir-pingora`: one listener, one upstream
//! endpoint, upstream keep-alive pooling, the same `ServerConf`, the same allocator
//! (mimalloc, under the crate's default `mimalloc` feature).
//!
//! `cargo run --release -p weir-pingora --example plain -- LISTEN UPSTREAM [THREADS] [headers]`
//!
//! With `headers`, the proxy also does what weir asks of Pingora on the benchmark's route,
//! without any of weir's decisions, so that the benchmark can tell weir's own cost apart from
//! what the same work costs in Pingora: the client connection's read and write timeouts
//! (`idle_timeout`, 60 s), the peer's connect (1 s), per-try read and write (30 s) and pool
//! idle (60 s) timeouts, `x-request-id` (a fresh 32-hex-digit id) and `x-weir-budget-ms` on
//! the upstream request, and `x-weir-attempts`, `x-request-id`, `x-weir-instance`,
//! `RateLimit-Policy` and `RateLimit` (formatted per request) on the response — inserted
//! through the same `insert_header` calls weir makes.

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::net::SocketAddr;

use async_trait::async_trait;
use bytes::Bytes;
use http::HeaderValue;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Plain {
    upstream: SocketAddr,
    /// The `headers` variant.
    headers: bool,
    ids: AtomicU64,
}

const IDLE: Duration = Duration::from_secs(60);
const CONNECT: Duration = Duration::from_secs(1);
const PER_TRY: Duration = Duration::from_secs(30);

/// The headers variant's per-request state: the request id, sent both ways.
#[derive(Default)]
struct Ctx {
    id: Option<HeaderValue>,
}

fn value(s: String) -> Result<HeaderValue> {
    HeaderValue::from_maybe_shared(Bytes::from(s))
        .or_err(ErrorType::InvalidHTTPHeader, "invalid value")
}

#[async_trait]
impl ProxyHttp for Plain {
    type CTX = Ctx;
    fn new_ctx(&self) -> Ctx {
        Ctx::default()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        if self.headers {
            session.as_downstream_mut().set_read_timeout(Some(IDLE));
            session.as_downstream_mut().set_write_timeout(Some(IDLE));
            let n = self.ids.fetch_add(1, Ordering::Relaxed);
            ctx.id = Some(value(format!("{n:032x}"))?);
        }
        Ok(false)
    }

    async fn upstream_peer(&self, _s: &mut Session, _ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream, false, String::new());
        if self.headers {
            let o = &mut peer.options;
            o.connection_timeout = Some(CONNECT);
            o.total_connection_timeout = Some(CONNECT);
            o.read_timeout = Some(PER_TRY);
            o.write_timeout = Some(PER_TRY);
            o.idle_timeout = Some(IDLE);
        }
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        req: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(id) = &ctx.id else { return Ok(()) };
        req.insert_header("x-request-id", id.clone())?;
        req.insert_header("x-weir-budget-ms", value(PER_TRY.as_millis().to_string())?)
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        if let Some(id) = &ctx.id {
            resp.insert_header("x-weir-attempts", HeaderValue::from_static("1"))?;
            resp.insert_header("x-request-id", id.clone())?;
            resp.insert_header("x-weir-instance", HeaderValue::from_static("bench"))?;
            resp.insert_header(
                "ratelimit-policy",
                HeaderValue::from_static("\"all\";q=1000000;w=1"),
            )?;
            resp.insert_header("ratelimit", value(format!("\"all\";r={};t=0", 999_999))?)?;
        }
        Ok(())
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let upstream: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18181".into())
        .parse()
        .expect("UPSTREAM is ip:port");
    let threads = args.next().map_or(1, |t| t.parse().expect("THREADS"));
    let headers = match args.next().as_deref() {
        None => false,
        Some("headers") => true,
        Some(other) => panic!("unknown variant {other:?} (expected `headers`)"),
    };
    let conf = pingora::server::configuration::ServerConf {
        threads,
        max_retries: 1024,
        grace_period_seconds: Some(1),
        graceful_shutdown_timeout_seconds: Some(1),
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let plain = Plain {
        upstream,
        headers,
        ids: AtomicU64::new(0),
    };
    let mut svc = pingora::proxy::http_proxy_service(&server.configuration, plain);
    svc.add_tcp(&listen);
    server.add_service(svc);
    server.run_forever();
}
