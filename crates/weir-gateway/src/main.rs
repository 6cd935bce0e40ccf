//! `weir-gateway`: weir's standalone reverse proxy — thread-per-core monoio on io_uring, every
//! policy decision made by the shared engine (`weir-policy`), HTTP/1.1 by `weir-http`.
//!
//! ```text
//! weir-gateway --config examples/gateway.toml
//! weir-gateway --demo                  # demo upstreams + config on loopback, prints curl lines
//! weir-gateway --check --config F      # validate, print what was understood, exit 0/1
//! ```
//!
//! ## Global limits
//! When the config has `[store] kind = "redis"`, the Redis store (`weir-redis`) is attached at
//! start-up; routes with `scope = "global"` then share one limit across instances. Redis need
//! not be up at start-up: the store connects on first use and reconnects after failures, and
//! until then each route applies its `on_store_error`. A reload (`POST /admin/reload`) whose
//! `[store]` section changed attaches a new store (new URL, timeout or lease; lease state
//! starts empty); an unchanged section keeps the running one. `--check` never connects.
//!
//! ## Host
//! HTTP/1.1 requires a `Host` header (RFC 9112 §3.2) and `weir-http` rejects requests
//! without one by default. The gateway accepts them, as nginx does for HTTP/1.0 and many
//! proxies do for bare HTTP/1.1 clients (health checkers, `printf | nc` scripts): docs/HTTP.md
//! lists no such rejection, and a missing Host is not ambiguous the way a duplicate one is.
//! Such a request is forwarded with `Host: ENDPOINT` (the upstream address, `ip:port`), since
//! the upstream side always speaks HTTP/1.1. Several `Host` headers remain a 400
//! `bad_request` (two readings of the authority are a smuggling/routing hazard).
//!
//! Module map: [`worker`] runtimes, listeners and shutdown; [`shutdown`] the process-wide
//! stop and how it reaches a worker's tasks; [`proxy`] one client connection
//! (the engine's request loop); [`upstream`] per-worker connection pools; [`io`] the owned
//! buffer connection; [`admin`] the admin listener. The command line, `--check` and `--demo`
//! are `weir-cli`'s, shared with weir-pingora. Each module imports only those below it
//! (`tests/layers.rs` declares the floors and checks them).

/// mimalloc: fewer instructions per allocation than glibc malloc on the request path (the
/// `weir-pingora` binary uses it too).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod admin;
mod io;
mod proxy;
mod shutdown;
mod upstream;
mod worker;

use core::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;

use weir_cli::{Cli, Driver, GatewayFlags, Ready, Serving};

use crate::shutdown::Shared;
use crate::worker::DriverKind;

/// Binds `addr` without `SO_REUSEPORT` and without listening, and returns the bound address
/// (port 0 resolved). Fails if another socket serves the port.
fn probe(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| std::io::Error::other("not an IP address"))
}

fn main() -> ExitCode {
    weir_cli::main(
        "weir-gateway",
        "weir's monoio/io_uring gateway: rate limits, concurrency, breakers, timeouts and \
         retries in front of HTTP/1.1 upstreams.",
        run,
    )
}

fn run(cli: Cli<GatewayFlags>) -> Result<ExitCode, String> {
    let Serving {
        engine,
        demo: demo_guard,
        ..
    } = match weir_cli::start_up(&cli, "weir-gateway", weir_redis::attach)? {
        Ready::Checked(code) => return Ok(code),
        Ready::Serve(s) => s,
    };
    let settings = engine.server();
    let workers = match settings.workers {
        0 => thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let driver = match cli.frontend.driver {
        Driver::IoUring => DriverKind::IoUring,
        Driver::Legacy => DriverKind::Legacy,
    };

    // Refuse an address another process serves (SO_REUSEPORT would silently share it), and
    // resolve port 0 once so that every worker binds the same port. The probe binds but
    // never listens: a client that connected to a listening probe in the moment before it
    // closed would be reset.
    let listen: SocketAddr =
        probe(settings.listen).map_err(|e| format!("cannot listen on {}: {e}", settings.listen))?;

    let admin = match settings.admin {
        Some(a) => Some(
            admin::spawn(engine.clone(), a).map_err(|e| format!("cannot bind admin {a}: {e}"))?,
        ),
        None => None,
    };

    let shared = Arc::new(Shared::default());
    signals(shared.clone())?;
    let mut handles = Vec::with_capacity(workers);
    let mut driver_name = "";
    for id in 0..workers {
        let (h, ready) = worker::spawn(id, engine.clone(), listen, driver, shared.clone())
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
        match ready.recv() {
            Ok(Ok(name)) => driver_name = name,
            Ok(Err(e)) => {
                shared.stop();
                return Err(e);
            }
            Err(_) => {
                shared.stop();
                return Err("a worker died during start-up".into());
            }
        }
        handles.push(h);
    }
    let admin_text = admin.map_or_else(|| "off".to_owned(), |a| a.to_string());
    // The workers already accept: a client may have connected and closed our stderr.
    weir_cli::say(format_args!(
        "weir-gateway: instance {} (revision {}) listening on {listen} with {workers} {driver_name} \
         worker(s); admin {admin_text}",
        settings.instance,
        engine.revision(),
    ));
    if let Some(d) = &demo_guard {
        weir_cli::say(format_args!("{}", d.curl_lines(listen, admin)));
    }
    for h in handles {
        let _ = h.join();
    }
    engine.flush_access_log();
    drop(demo_guard);
    weir_cli::say(format_args!("weir-gateway: stopped"));
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM / SIGINT: the first begins a graceful drain; a second one exits at once.
fn signals(shared: Arc<Shared>) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    thread::Builder::new()
        .name("weir-signals".into())
        .spawn(move || {
            // Stop first, then say so, and never with `eprintln!` (see `weir_cli::say`): a
            // failed write once killed this thread before the stop and left a gateway no
            // signal could end.
            let mut seen = false;
            for sig in signals.forever() {
                if seen {
                    weir_cli::say(format_args!("weir-gateway: second signal, exiting now"));
                    std::process::exit(128 + sig);
                }
                seen = true;
                shared.stop();
                weir_cli::say(format_args!(
                    "weir-gateway: signal {sig}: draining in-flight requests"
                ));
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}
