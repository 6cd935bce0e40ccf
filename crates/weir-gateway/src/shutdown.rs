//! How a shutdown begun on the signal thread reaches a worker's tasks without depending on
//! a cross-thread wake-up arriving.
//!
//! [`Shared::stop`] runs on the signal thread. A task parked on a monoio ring is woken from
//! another thread through monoio's `sync` path: the waker goes into the worker's channel and
//! an eventfd write ends the worker's `io_uring_enter` wait (an eventfd read sits on the
//! ring). That write is the only thing that can end a wait with no timer due. If it is ever
//! lost or late, a worker whose every task waits for the stop sleeps until something else
//! happens on its ring, which after the last client left is never: a gateway once hung that
//! way on SIGTERM (docs/perf-log/2026-12-02-gateway-ring-flags-error-body.md,
//! "Shutdown wake-up").
//!
//! So each worker runs one [`watch`] task that learns of the stop in two ways: the
//! cross-thread wake (the fast path, usually within microseconds) and its own timer, which
//! re-reads the flag every [`STOP_POLL`]. A timer is part of the worker's own wait (monoio
//! passes it to `io_uring_enter` as its timeout), so it needs no other thread. The watcher
//! then wakes the accept loop and every connection through a worker-local [`LocalStop`]:
//! same-thread wakes, one per task, instead of one cross-thread wake per connection.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;

use event_listener::{Event, EventListener};

/// State shared by all workers of the process: the stop flag and its event, and the
/// counters the workers share. Here, below both `worker.rs` and `proxy.rs`, because both
/// read it (and neither may import the other's module).
#[derive(Default)]
pub(crate) struct Shared {
    stopping: AtomicBool,
    stop_event: Event,
    /// Open client connections, all workers together (`max_connections` is per instance).
    pub(crate) conns: AtomicUsize,
    /// Set once the io_uring fallback was logged.
    pub(crate) fallback_logged: AtomicBool,
}

impl Shared {
    /// Whether shutdown has begun.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// A future that completes when shutdown begins (check [`stopping`](Self::stopping) after
    /// creating it, to not miss a stop that happened just before).
    pub(crate) fn listen(&self) -> EventListener {
        self.stop_event.listen()
    }

    /// Begins shutdown and wakes every worker.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop_event.notify(usize::MAX);
    }
}

/// How often a worker re-reads the stop flag on its own: the longest a lost cross-thread
/// wake can delay a shutdown (ten timer wakes a second per worker cost nothing measurable).
pub(crate) const STOP_POLL: Duration = Duration::from_millis(100);

/// One worker's shutdown notice, raised by its [`watch`] task and listened to by its other
/// tasks on the same thread.
#[derive(Default)]
pub(crate) struct LocalStop {
    event: Event,
}

impl LocalStop {
    /// A future that completes when the watcher sees the stop (check
    /// [`Shared::stopping`] after creating it, to not miss one that began just before).
    pub(crate) fn listen(&self) -> EventListener {
        self.event.listen()
    }

    fn stop(&self) {
        self.event.notify(usize::MAX);
    }
}

/// Waits for the process-wide stop — woken from the signal thread, or finding the flag set
/// on its own every [`STOP_POLL`] — then raises `local`.
pub(crate) async fn watch(shared: &Shared, local: &LocalStop) {
    let mut remote = shared.listen();
    while !shared.stopping() {
        monoio::select! {
            _ = &mut remote => break,
            _ = monoio::time::sleep(STOP_POLL) => {}
        }
    }
    local.stop();
}
