//! A Pingora server with weir embedded: [`WeirProxy`] (every `ProxyHttp` phase forwarding to
//! [`Weir`]) behind weir's HTTP/1 front door, plus weir's admin API.
//!
//! `cargo run -p weir-pingora --example embed -- weir.toml` (listens on the config's
//! `server.listen`, admin API on `server.admin`).
//!
//! For a proxy of your own, copy `WeirProxy` (`src/proxy.rs`: one line per phase) into your
//! `ProxyHttp` and add your checks before `Weir::request_filter`.

use pingora::prelude::*;
use weir_pingora::{HeadGuard, Weir, WeirProxy};

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
    let proxy = pingora::proxy::http_proxy(&server.configuration, WeirProxy::new(weir));
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
