//! A plain Pingora proxy with no weir: the baseline for the module's overhead
//! (`bench/http/pingora.sh`). Same shape as `weir-pingora`: one listener, one upstream
//! endpoint, upstream keep-alive pooling, the same `ServerConf`, the same allocator
//! (mimalloc, under the crate's default `mimalloc` feature).
//!
//! `cargo run --release -p weir-pingora --example plain -- LISTEN UPSTREAM [THREADS]`

use std::net::SocketAddr;

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Plain {
    upstream: SocketAddr,
}

#[async_trait]
impl ProxyHttp for Plain {
    type CTX = ();
    fn new_ctx(&self) {}
    async fn upstream_peer(&self, _s: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
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
    let conf = pingora::server::configuration::ServerConf {
        threads,
        max_retries: 1024,
        grace_period_seconds: Some(1),
        graceful_shutdown_timeout_seconds: Some(1),
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut svc = pingora::proxy::http_proxy_service(&server.configuration, Plain { upstream });
    svc.add_tcp(&listen);
    server.add_service(svc);
    server.run_forever();
}
