//! Building and running the Pingora [`Server`] for the `weir-pingora` binary.
//!
//! Why this is more than `Server::run_forever()`: the contract wants SIGTERM *and* SIGINT to
//! stop accepting, drain in-flight requests up to a drain timeout and exit 0 — as soon as the
//! last request is done, not after a fixed wait. Pingora treats SIGINT as a fast shutdown
//! (in-flight requests are dropped) and SIGTERM as "sleep `grace_period_seconds`, then drop
//! the runtimes". So:
//! - [`ShutdownSignals`] (installed before anything listens) maps both signals to Pingora's graceful terminate, which closes the
//!   listeners at once and stops keep-alive reuse;
//! - `grace_period_seconds` is the drain timeout (rounded up), an upper bound only;
//! - a background [`Drainer`] watches the in-flight count and exits the process with 0 as
//!   soon as it reaches zero (after `on_drained`, e.g. flushing the access log).

use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch, ShutdownWatch};
use pingora::services::background::{BackgroundService, background_service};

/// Maps SIGTERM and SIGINT (and SIGQUIT: weir has no socket-handover upgrade) to a
/// graceful terminate.
///
/// The handlers are installed by [`ShutdownSignals::install`], before the server starts:
/// Pingora only installs its own when its main loop starts, after the listeners are up, so a
/// signal sent right after the port opens would otherwise kill the process (or, in a shell's
/// background job where SIGINT starts ignored, be lost). A dedicated thread with its own
/// small runtime owns the handlers for the life of the process.
#[derive(Debug, Clone)]
pub struct ShutdownSignals {
    notify: Arc<tokio::sync::Notify>,
}

impl ShutdownSignals {
    /// Installs the handlers now.
    pub fn install() -> std::io::Result<ShutdownSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        let notify = Arc::new(tokio::sync::Notify::new());
        let n = notify.clone();
        let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
        std::thread::Builder::new()
            .name("weir-signals".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return drop(tx.send(Err(e))),
                };
                rt.block_on(async move {
                    let (mut term, mut int, mut quit) = match (
                        signal(SignalKind::terminate()),
                        signal(SignalKind::interrupt()),
                        signal(SignalKind::quit()),
                    ) {
                        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
                        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                            return drop(tx.send(Err(e)));
                        }
                    };
                    let _ = tx.send(Ok(()));
                    loop {
                        tokio::select! {
                            _ = term.recv() => {},
                            _ = int.recv() => {},
                            _ = quit.recv() => {},
                        }
                        // Stores a permit when nobody waits yet: no signal is lost.
                        n.notify_one();
                    }
                });
            })?;
        rx.recv().map_err(std::io::Error::other)??;
        Ok(ShutdownSignals { notify })
    }
}

#[async_trait]
impl ShutdownSignalWatch for ShutdownSignals {
    async fn recv(&self) -> ShutdownSignal {
        self.notify.notified().await;
        ShutdownSignal::GracefulTerminate
    }
}

/// Requests currently being served by a proxy service; the [`Drainer`] waits for zero.
#[derive(Debug, Default, Clone)]
pub struct Inflight(Arc<AtomicUsize>);

impl Inflight {
    /// Counts one request until the guard is dropped.
    pub fn enter(&self) -> InflightGuard {
        self.0.fetch_add(1, Ordering::AcqRel);
        InflightGuard(self.0.clone())
    }

    /// The current count.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// Decrements the [`Inflight`] count on drop.
#[derive(Debug)]
pub struct InflightGuard(Arc<AtomicUsize>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Background service: after the shutdown broadcast, waits until no request is in flight (or
/// the drain timeout passed), runs `on_drained` and exits the process with status 0.
pub struct Drainer {
    inflight: Inflight,
    timeout: Duration,
    on_drained: Box<dyn Fn() + Send + Sync>,
}

impl Drainer {
    /// A drainer over `inflight`, giving up after `timeout`.
    pub fn new(
        inflight: Inflight,
        timeout: Duration,
        on_drained: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        Drainer {
            inflight,
            timeout,
            on_drained,
        }
    }
}

#[async_trait]
impl BackgroundService for Drainer {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        while self.inflight.get() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (self.on_drained)();
        std::process::exit(0);
    }
}

/// Server-wide settings the binary derives from the config and the command line.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Worker threads of the proxy service (0 = one per core).
    pub workers: usize,
    /// How long SIGTERM/SIGINT wait for in-flight requests.
    pub drain_timeout: Duration,
}

/// A Pingora [`Server`] configured for weir: short, drain-driven shutdown, no daemon, and
/// `max_retries` high enough that the policy engine (not Pingora) ends every retry loop.
pub fn new_server(opts: &ServerOptions) -> Server {
    let threads = if opts.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.workers
    };
    let conf = ServerConf {
        threads,
        // Upper bound only: the Drainer exits as soon as the last request is done.
        grace_period_seconds: Some(opts.drain_timeout.as_secs_f64().ceil() as u64),
        graceful_shutdown_timeout_seconds: Some(1),
        // The engine bounds attempts (max_attempts, deadlines, budget); Pingora's cap must
        // never be the one that stops a retry loop.
        max_retries: 1024,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    server
}

/// Adds the [`Drainer`] and runs the server until one of `signals`; exits 0.
pub fn run(mut server: Server, drainer: Drainer, signals: ShutdownSignals) -> ! {
    let mut bg = background_service("weir drainer", drainer);
    bg.threads = Some(1);
    server.add_service(bg);
    server.run(RunArgs {
        shutdown_signal: Box::new(signals),
    });
    std::process::exit(0)
}
