//! Thread-per-core workers: one monoio runtime (io_uring, or the epoll "legacy" driver) per
//! thread, each with its own `SO_REUSEPORT` listener and upstream pool, all sharing one
//! [`Engine`] (so limits, breakers and metrics are per instance, not per worker).
//!
//! Why `SO_REUSEPORT` rather than one shared listener: the kernel spreads connections over
//! the workers' accept queues, so no worker wakes for a connection another one takes, and a
//! connection lives and dies on the ring that accepted it.
//!
//! Shutdown: [`Shared::stop`] flips a flag and wakes each worker's watcher task, which also
//! re-reads the flag on its own timer and then wakes the worker's tasks locally (see
//! [`crate::shutdown`] for why a cross-thread wake alone is not relied on). Workers
//! stop accepting, idle keep-alive connections close at once, requests in flight finish (their
//! responses carry `connection: close`) until the drain timeout, then the runtime is dropped.

use core::cell::Cell;
use core::net::SocketAddr;
use core::sync::atomic::Ordering;
use core::time::Duration;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use monoio::net::TcpListener;
use weir_policy::Engine;

use crate::proxy::{Worker, serve};
use crate::shutdown::{self, LocalStop, Shared};
use crate::upstream::Pool;

/// The I/O driver asked for on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DriverKind {
    /// io_uring (falls back to legacy when the kernel refuses it).
    IoUring,
    /// epoll via mio.
    Legacy,
}

/// A worker's start-up report: the driver it runs on, or why it could not start.
pub(crate) type Ready = Result<&'static str, String>;

/// Starts worker `id` on its own thread; the returned receiver reports whether its listener
/// bound (and on which driver the worker runs).
pub(crate) fn spawn(
    id: usize,
    engine: Engine,
    addr: SocketAddr,
    driver: DriverKind,
    shared: Arc<Shared>,
) -> std::io::Result<(thread::JoinHandle<()>, mpsc::Receiver<Ready>)> {
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new().name(format!("weir-worker-{id}")).spawn(move || {
        let run = |name: &'static str| run(engine.clone(), addr, shared.clone(), tx.clone(), name);
        if driver == DriverKind::IoUring {
            match uring_runtime() {
                Ok(mut rt) => return rt.block_on(run("io_uring")),
                Err(e) => {
                    if !shared.fallback_logged.swap(true, Ordering::AcqRel) {
                        weir_cli::say(format_args!(
                            "weir-gateway: io_uring unavailable ({e}); falling back to the legacy (epoll) driver"
                        ));
                    }
                }
            }
        }
        match monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build() {
            Ok(mut rt) => rt.block_on(run("legacy")),
            Err(e) => {
                let _ = tx.send(Err(format!("cannot start a runtime: {e}")));
            }
        }
    })?;
    Ok((handle, rx))
}

/// An io_uring runtime whose ring is set up for one thread that submits and reaps everything
/// itself (which a worker is: its ring never leaves the thread that built it, and monoio's
/// cross-thread wake-ups go through an eventfd read on the ring, not through another thread
/// entering it):
/// - `SINGLE_ISSUER` + `DEFER_TASKRUN` (kernel 6.1+): completions are posted when the worker
///   waits for them (`io_uring_enter` with `GETEVENTS`, which monoio's park does) instead of
///   by task work that interrupts it after every socket event;
/// - `COOP_TASKRUN` + `TASKRUN_FLAG` (5.19+): where deferral is refused, task work is at
///   least not signalled with an inter-processor interrupt.
///
/// Each set is tried in turn and a kernel that refuses one (EINVAL) gets the next, down to
/// a plain ring. A gateway with these flags once slept through SIGTERM (the cross-thread
/// wake was its only way out of a wait with no timer due); shutdown no longer depends on
/// that wake ([`crate::shutdown`]), and `tests/shutdown.rs` checks both.
pub(crate) fn uring_runtime()
-> std::io::Result<monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>> {
    let sets: [fn(&mut io_uring::Builder); 3] = [
        |b| {
            b.setup_single_issuer()
                .setup_defer_taskrun()
                .setup_taskrun_flag();
        },
        |b| {
            b.setup_coop_taskrun().setup_taskrun_flag();
        },
        |_| {},
    ];
    let mut last = None;
    for set in sets {
        let mut urb = io_uring::IoUring::builder();
        set(&mut urb);
        match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .with_entries(1024)
            .uring_builder(urb)
            .enable_timer()
            .build()
        {
            Ok(rt) => return Ok(rt),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no io_uring set-up")))
}

/// The worker's `SO_REUSEPORT` listener, and a second handle (a `dup`) on the same socket to
/// stop it listening at shutdown.
///
/// Why not monoio's `TcpListener::bind_with_config`: it offers no way to shut the socket
/// down, and dropping it is not enough. On io_uring the listening socket is referenced by the
/// cancelled `accept` until the ring is torn down, which the kernel finishes after the
/// process has exited; until then the port is in `LISTEN` state, a restarted gateway's bind
/// fails with "address already in use", and a restarted one that bound with `SO_REUSEPORT`
/// would share its connections with a socket nobody accepts on. `shutdown(SHUT_RD)` on a
/// listening socket takes it out of `LISTEN` at once, whoever still holds it.
fn listen(addr: SocketAddr) -> std::io::Result<(TcpListener, socket2::Socket)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Non-blocking as monoio's own bind makes it (the legacy driver needs it).
    socket.set_nonblocking(true)?;
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    let handle = socket.try_clone()?;
    Ok((TcpListener::from_std(socket.into())?, handle))
}

/// Decrements the connection counts when a connection task ends.
struct ConnGuard {
    shared: Arc<Shared>,
    active: Rc<Cell<usize>>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.shared.conns.fetch_sub(1, Ordering::AcqRel);
        self.active.set(self.active.get() - 1);
    }
}

async fn run(
    engine: Engine,
    addr: SocketAddr,
    shared: Arc<Shared>,
    ready: mpsc::Sender<Ready>,
    driver: &'static str,
) {
    let (listener, stop_listening) = match listen(addr) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot listen on {addr}: {e}")));
            return;
        }
    };
    let _ = ready.send(Ok(driver));
    let w = Rc::new(Worker {
        engine,
        shared: shared.clone(),
        pool: Pool::default(),
        stop: LocalStop::default(),
    });

    let watcher = w.clone();
    monoio::spawn(async move { shutdown::watch(&watcher.shared, &watcher.stop).await });

    // Expire idle upstream connections even when no request comes to find them stale.
    let pruner = w.clone();
    monoio::spawn(async move {
        while !pruner.shared.stopping() {
            monoio::time::sleep(Duration::from_secs(1)).await;
            pruner.pool.prune(pruner.engine.server().idle_timeout);
        }
    });

    let active = Rc::new(Cell::new(0usize));
    while !shared.stopping() {
        if shared.conns.load(Ordering::Acquire) >= w.engine.server().max_connections {
            // At the instance's limit: leave new connections in the backlog until one closes.
            monoio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let stop = w.stop.listen();
        if shared.stopping() {
            break;
        }
        let accepted = monoio::select! {
            r = listener.accept() => Some(r),
            _ = stop => None,
        };
        match accepted {
            None => break,
            Some(Ok((stream, peer))) => {
                shared.conns.fetch_add(1, Ordering::AcqRel);
                active.set(active.get() + 1);
                let guard = ConnGuard {
                    shared: shared.clone(),
                    active: active.clone(),
                };
                let w = w.clone();
                monoio::spawn(async move {
                    let _guard = guard;
                    serve(w, stream, peer).await;
                });
            }
            Some(Err(e)) => {
                // EMFILE and friends: back off instead of spinning.
                weir_cli::say(format_args!("weir-gateway: accept failed: {e}"));
                monoio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // Leave the port now: the ring may hold the listening socket for a while after this
    // thread (or the process) ends, and a gateway restarted at once must be able to bind it.
    let _ = stop_listening.shutdown(std::net::Shutdown::Read);
    drop(stop_listening);
    drop(listener);
    let drain_until = Instant::now() + w.engine.server().drain_timeout;
    while active.get() > 0 && Instant::now() < drain_until {
        monoio::time::sleep(Duration::from_millis(10)).await;
    }
    w.pool.clear();
}
