//! `weir-pingora`: weir's TOML config served by a Pingora proxy. The command line, `--check`
//! and `--demo` are `weir-cli`'s, the same as weir-gateway's.

use std::process::ExitCode;

use pingora::services::listening::Service;
use weir_cli::{Cli, NoFlags, Ready, Serving};
use weir_pingora::server::{Drainer, ServerOptions, ShutdownSignals, new_server, run};
use weir_pingora::{AdminApp, HeadGuard, Weir, WeirProxy};

/// mimalloc (the crate's default `mimalloc` feature; see its manifest for why).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    weir_cli::main(
        "weir-pingora",
        "weir's rate limits, concurrency, breakers, timeouts and retries served by a Pingora \
         proxy (the same config as weir-gateway).",
        start,
    )
}

fn start(cli: Cli<NoFlags>) -> Result<ExitCode, String> {
    let Serving {
        engine,
        config,
        demo,
    } = match weir_cli::start_up(&cli, "weir-pingora", weir_redis::attach)? {
        Ready::Checked(code) => return Ok(code),
        Ready::Serve(s) => s,
    };
    let settings = engine.server();
    // Pingora binds in its service threads and retries a taken port for 30 s while the rest
    // of the process runs (the admin port answering, "serving" printed): check both ports
    // first, so that a taken one is an immediate error and exit 1, as on weir-gateway.
    for addr in std::iter::once(settings.listen).chain(settings.admin) {
        std::net::TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    }
    let signals = ShutdownSignals::install().map_err(|e| format!("signal handlers: {e}"))?;
    let weir = Weir::new(engine.clone());

    let mut server = new_server(&ServerOptions {
        workers: settings.workers,
        drain_timeout: settings.drain_timeout,
    });
    // Pingora's proxy behind weir's HTTP/1 front door (strict heads, 408, max_connections).
    let proxy = pingora::proxy::http_proxy(&server.configuration, WeirProxy::new(weir.clone()));
    let mut proxy = Service::new(
        "weir proxy".to_owned(),
        HeadGuard::new(proxy, engine.clone()),
    );
    proxy.add_tcp(&settings.listen.to_string());
    server.add_service(proxy);
    if let Some(admin) = settings.admin {
        let mut svc = Service::new("weir admin".to_owned(), AdminApp::new(engine.clone()));
        svc.add_tcp(&admin.to_string());
        svc.threads = Some(1);
        server.add_service(svc);
    }

    weir_cli::say(format_args!(
        "weir-pingora: serving {} on {} (admin {}), {} worker(s), revision {}",
        config.display(),
        settings.listen,
        settings.admin.map_or("off".to_owned(), |a| a.to_string()),
        server.configuration.threads,
        engine.revision(),
    ));
    if let Some(d) = &demo {
        weir_cli::say(format_args!(
            "{}",
            d.curl_lines(settings.listen, settings.admin)
        ));
    }
    let flush = engine.clone();
    let drainer = Drainer::new(
        weir.inflight(),
        settings.drain_timeout,
        Box::new(move || flush.flush_access_log()),
    );
    // The demo upstreams live as long as the process.
    core::mem::forget(demo);
    run(server, drainer, signals)
}
