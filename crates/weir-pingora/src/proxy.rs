//! [`WeirProxy`]: a complete Pingora `ProxyHttp` that is nothing but weir — what the
//! `weir-pingora` binary serves, and the shape to copy when embedding weir in your own proxy.

use async_trait::async_trait;
use pingora::Error;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::HttpPeer;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};

use crate::module::{Weir, WeirCtx};

/// A `ProxyHttp` whose every phase is the matching [`Weir`] call.
pub struct WeirProxy {
    weir: Weir,
}

impl WeirProxy {
    /// A proxy over `weir`.
    pub fn new(weir: Weir) -> WeirProxy {
        WeirProxy { weir }
    }
}

#[async_trait]
impl ProxyHttp for WeirProxy {
    type CTX = WeirCtx;

    fn new_ctx(&self) -> WeirCtx {
        self.weir.new_ctx()
    }

    fn on_connection_reuse(
        &self,
        _session: &mut Session,
        ctx: &mut WeirCtx,
        prev_ctx: Box<dyn core::any::Any + Send + Sync>,
    ) {
        self.weir.on_connection_reuse(ctx, &*prev_ctx);
    }

    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<bool> {
        self.weir.request_filter(session, ctx).await
    }

    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<Box<HttpPeer>> {
        self.weir.upstream_peer(session, ctx).await
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<()> {
        self.weir
            .upstream_request_filter(session, upstream_request, ctx)
    }

    async fn upstream_response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut WeirCtx,
    ) -> pingora::Result<()> {
        self.weir
            .upstream_response_filter(session, upstream_response, ctx)
    }

    fn fail_to_connect(
        &self,
        session: &mut Session,
        peer: &HttpPeer,
        ctx: &mut WeirCtx,
        e: Box<Error>,
    ) -> Box<Error> {
        self.weir.fail_to_connect(session, peer, ctx, e)
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut WeirCtx,
        client_reused: bool,
    ) -> Box<Error> {
        self.weir
            .error_while_proxy(peer, session, e, ctx, client_reused)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut WeirCtx,
    ) -> FailToProxy {
        self.weir.fail_to_proxy(session, e, ctx).await
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut WeirCtx) {
        self.weir.logging(session, e, ctx);
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &WeirCtx, _error: &Error) -> bool {
        // Every request is in weir's access log, with its attempts.
        true
    }
}
