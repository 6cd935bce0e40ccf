//! Per-worker upstream connection pools.
//!
//! Each worker thread owns its pool (no locks, no cross-thread handoff: a connection is only
//! ever driven by the ring that created it). Idle connections are reused LIFO — the most
//! recently used one is the least likely to have been closed by the upstream — and expire
//! after `idle_timeout`. A reused connection that turns out to be dead before any response
//! byte arrives is replaced by a fresh one within the same attempt (see `proxy.rs`), as nginx
//! and Envoy do, so upstream keep-alive races never surface as client errors.

use core::cell::RefCell;
use core::net::SocketAddr;
use core::time::Duration;
use std::collections::HashMap;
use std::time::Instant;

use monoio::net::TcpStream;

use crate::io::Conn;

/// Most idle connections kept per endpoint and worker.
const MAX_IDLE_PER_ENDPOINT: usize = 256;

/// Idle connections by endpoint. Hashed with ahash, not std's SipHash: the map is looked up
/// twice per proxied request (take and put), and SipHash of a `SocketAddr` cost ~230
/// instructions a lookup in the gateway's profile; the keys are configured endpoints, not
/// client input, so there is no flooding to resist (and the seeds are fixed).
type IdleMap = HashMap<SocketAddr, Vec<(Conn, Instant)>, ahash::RandomState>;

/// The idle connections of one worker, by endpoint.
pub(crate) struct Pool {
    idle: RefCell<IdleMap>,
}

impl Default for Pool {
    fn default() -> Self {
        let seeds =
            ahash::RandomState::with_seeds(0x7765_6972, 0x706f_6f6c, 0x6964_6c65, 0x6d61_7073);
        Pool {
            idle: RefCell::new(IdleMap::with_hasher(seeds)),
        }
    }
}

impl Pool {
    /// A live-looking idle connection to `addr`, if one was used within `max_idle`.
    pub(crate) fn take(&self, addr: SocketAddr, max_idle: Duration) -> Option<Conn> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(&addr)?;
        while let Some((conn, since)) = list.pop() {
            if since.elapsed() < max_idle {
                return Some(conn);
            }
        }
        None
    }

    /// Returns a connection whose last exchange completed cleanly.
    pub(crate) fn put(&self, addr: SocketAddr, conn: Conn) {
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry(addr).or_default();
        if list.len() < MAX_IDLE_PER_ENDPOINT {
            list.push((conn, Instant::now()));
        }
    }

    /// Drops connections idle for `max_idle` or longer.
    pub(crate) fn prune(&self, max_idle: Duration) {
        let mut idle = self.idle.borrow_mut();
        for list in idle.values_mut() {
            list.retain(|(_, since)| since.elapsed() < max_idle);
        }
        idle.retain(|_, l| !l.is_empty());
    }

    /// Drops every idle connection (shutdown).
    pub(crate) fn clear(&self) {
        self.idle.borrow_mut().clear();
    }
}

/// Why a connect did not produce a connection.
pub(crate) enum ConnectFail {
    /// Refused, unreachable, reset during the handshake...
    Failed,
    /// `connect_timeout` passed.
    Timeout,
}

/// Opens a connection to `addr` within `timeout`.
pub(crate) async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Conn, ConnectFail> {
    match monoio::time::timeout(timeout, TcpStream::connect_addr(addr)).await {
        Err(_) => Err(ConnectFail::Timeout),
        Ok(Err(_)) => Err(ConnectFail::Failed),
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(Conn::new(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::rc::Rc;
    use std::sync::mpsc;
    use std::thread;

    use super::*;
    use crate::io::IoFail;

    /// A connection's timer once kept the waker of the task that pooled it: the next task's
    /// read on it was never woken at its deadline (see `io.rs` and the timer fix in
    /// vendor/README.md).
    #[test]
    fn a_pooled_connection_times_out_for_the_task_that_took_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // The upstream sends one byte 50 ms after accepting, then stays silent, connected.
        thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            thread::sleep(Duration::from_millis(50));
            s.write_all(b"x").unwrap();
            thread::sleep(Duration::from_secs(5));
        });
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                .enable_timer()
                .build()
                .unwrap();
            rt.block_on(async move {
                let pool = Rc::new(Pool::default());
                let first = pool.clone();
                // This task's read waits (its waker goes on the timer), then it pools the
                // connection with that timer's deadline still ahead.
                monoio::spawn(async move {
                    let stream = TcpStream::connect_addr(addr).await.unwrap();
                    let mut conn = Conn::new(stream);
                    let far = Instant::now() + Duration::from_secs(30);
                    assert_eq!(conn.fill_until(far).await.unwrap(), 1);
                    conn.consume(1);
                    first.put(addr, conn);
                })
                .await;
                // Another task takes it; the upstream is silent, so its read ends at its deadline.
                let outcome = monoio::spawn(async move {
                    let mut conn = pool.take(addr, Duration::from_secs(30)).unwrap();
                    let started = Instant::now();
                    let read = conn.fill_until(started + Duration::from_millis(100)).await;
                    (matches!(read, Err(IoFail::Timeout)), started.elapsed())
                })
                .await;
                let _ = tx.send(outcome);
            });
        });
        let (timed_out, after) = rx
            .recv_timeout(Duration::from_secs(3))
            .expect("the read of the task that took the pooled connection never ended");
        assert!(timed_out);
        assert!(after >= Duration::from_millis(100), "ended after {after:?}");
    }
}
