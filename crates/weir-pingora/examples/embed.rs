//! A minimal Pingora proxy with weir embedded: every phase forwards to `Weir`.
//!
//! `cargo run -p weir-pingora --example embed -- weir.toml` (listens on the config's
//! `server.listen`, admin API on `server.admin`).

use async_trait::async_trait;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use weir_pingora::{HeadGuard, Weir, WeirCtx};

struct MyProxy {
    weir: Weir,
}

#[async_trait]
impl ProxyHttp for MyProxy {
    type CTX = WeirCtx;
    fn new_ctx(&self) -> WeirCtx {
        self.weir.new_ctx()
    }
    fn on_connection_reuse(
        &self,
        _s: &mut Session,
        ctx: &mut WeirCtx,
        prev: Box<dyn std::any::Any + Send + Sync>,
    ) {
        self.weir.on_connection_reuse(ctx, &*prev);
    }
    async fn request_filter(&self, s: &mut Session, ctx: &mut WeirCtx) -> Result<bool> {
        // your own checks here; then rate limit / queue / breaker:
        self.weir.request_filter(s, ctx).await
    }
    async fn upstream_peer(&self, s: &mut Session, ctx: &mut WeirCtx) -> Result<Box<HttpPeer>> {
        self.weir.upstream_peer(s, ctx).await
    }
    async fn upstream_request_filter(
        &self,
        s: &mut Session,
        req: &mut RequestHeader,
        ctx: &mut WeirCtx,
    ) -> Result<()> {
        self.weir.upstream_request_filter(s, req, ctx)
    }
    async fn upstream_response_filter(
        &self,
        s: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut WeirCtx,
    ) -> Result<()> {
        self.weir.upstream_response_filter(s, resp, ctx)
    }
    fn fail_to_connect(
        &self,
        s: &mut Session,
        peer: &HttpPeer,
        ctx: &mut WeirCtx,
        e: Box<Error>,
    ) -> Box<Error> {
        self.weir.fail_to_connect(s, peer, ctx, e)
    }
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        s: &mut Session,
        e: Box<Error>,
        ctx: &mut WeirCtx,
        reused: bool,
    ) -> Box<Error> {
        self.weir.error_while_proxy(peer, s, e, ctx, reused)
    }
    async fn fail_to_proxy(&self, s: &mut Session, e: &Error, ctx: &mut WeirCtx) -> FailToProxy {
        self.weir.fail_to_proxy(s, e, ctx).await
    }
    async fn logging(&self, s: &mut Session, e: Option<&Error>, ctx: &mut WeirCtx) {
        self.weir.logging(s, e, ctx);
    }
}

fn main() {
    let config = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "weir.toml".into());
    let engine = weir_pingora::weir_policy::Engine::load(config.as_ref()).expect("config");
    let settings = engine.server();

    // weir's config bounds the attempts; Pingora's own cap must not cut a retry loop short.
    let conf = pingora::server::configuration::ServerConf {
        max_retries: 1024,
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();

    let weir = Weir::new(engine.clone());
    let proxy = pingora::proxy::http_proxy(&server.configuration, MyProxy { weir });
    // Optional but recommended: weir's HTTP/1 front door (strict request heads answered 400 /
    // 414 / 431 / 505 by weir, header_timeout -> 408, max_connections). Without it, use
    // `pingora::proxy::http_proxy_service` and Pingora's parser decides.
    let guarded = HeadGuard::new(proxy, engine.clone());
    let mut svc = pingora::services::listening::Service::new("proxy".into(), guarded);
    svc.add_tcp(&settings.listen.to_string());
    server.add_service(svc);

    // Optional: weir's admin API (/metrics, /healthz, /admin/reload, ...) on its own port.
    if let Some(addr) = settings.admin {
        let app = weir_pingora::AdminApp::new(engine);
        let mut admin = pingora::services::listening::Service::new("weir admin".into(), app);
        admin.add_tcp(&addr.to_string());
        server.add_service(admin);
    }
    server.run_forever();
}
