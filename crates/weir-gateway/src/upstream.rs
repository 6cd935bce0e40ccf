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

/// The idle connections of one worker, by endpoint.
#[derive(Default)]
pub(crate) struct Pool {
    idle: RefCell<HashMap<SocketAddr, Vec<(Conn, Instant)>>>,
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
