//! Upstream connections whose reads weir times itself: the per-try timeout until the response
//! head, then `server.idle_timeout` of inactivity for the body.
//!
//! # Why weir opens its own upstream connections
//!
//! Pingora 0.9 has one read timeout per upstream session (`PeerOptions::read_timeout`),
//! copied into the HTTP/1 client session when the attempt starts and applied to every read —
//! the response head and each body read. No `ProxyHttp` phase reaches that session after the
//! head, so with `read_timeout = per_try` a live body that pauses for longer than `per_try`
//! is cut. The one hook that sees the upstream bytes is [`PeerOptions::custom_l4`]: a
//! connector returning any `AsyncRead + AsyncWrite` as a Pingora [`Stream`]
//! ([`VirtualSocketStream`]). weir's connector ([`AttemptConnect`], one per attempt) wraps the
//! TCP stream in a [`TimedStream`] that times its own reads against the attempt's
//! [`Clock`]: until the module has seen the response head, a read waiting past the attempt's
//! per-try deadline fails (and the clock records it, so the attempt's outcome is
//! `per_try_timeout` as before); once the module forwards the head ([`Clock::body`]), each
//! wait for body bytes may last `idle_timeout`. Pingora's own `read_timeout` stays `None`;
//! write timeouts are Pingora's, unchanged.
//!
//! # Why weir pools them itself
//!
//! Pingora never reuses a virtual stream: before it hands out a pooled connection it checks
//! the socket's peer address with `getpeername` on the stream's fd, and a virtual stream has
//! none (fd -1), so the check fails and the connection is dropped (Pingora issue
//! cloudflare/pingora#883). weir therefore keeps idle upstream connections in its own pool
//! ([`Pool`], per [`Weir`](crate::Weir)) and decides nothing about reusability itself:
//! Pingora's keep-alive rules still do. When Pingora finds a response complete and the
//! connection reusable it releases the stream to its pool, which first polls one read
//! without a waker (`now_or_never`) to see that the idle connection is quiet. A
//! [`TimedStream`] answers that probe — a read polled with a no-op waker (null waker data;
//! tokio's task wakers never have one) after the head was forwarded — with end-of-stream,
//! so Pingora drops the stream at once (no idle task of its own), and the drop moves the TCP
//! stream into weir's pool. The next attempt to the same endpoint takes it from there
//! ([`AttemptConnect`] binds it to the new attempt's clock: no state of the previous attempt
//! carries over). Pingora reports such a connection as new; the module takes the reuse from
//! [`Clock::reused`] for its "stale pooled connection: same attempt on a fresh connection"
//! rule. Idle connections leave the pool after `idle_timeout`, or when the upstream closed
//! them (seen when taken, and by a sweep once a second).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use pingora::connectors::L4Connect;
use pingora::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora::protocols::l4::stream::Stream;
use pingora::protocols::l4::virt::{VirtualSockOpt, VirtualSocket, VirtualSocketStream};
use pingora::{Error, ErrorType};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Idle connections kept per endpoint; more are closed.
const MAX_IDLE_PER_ENDPOINT: usize = 128;

/// How often idle connections are checked for expiry and for a close by the upstream.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// One attempt's read deadlines, shared by the module and the attempt's connection.
#[derive(Debug)]
pub(crate) struct Clock {
    /// The per-try deadline for the response head.
    head_deadline: Instant,
    /// `idle_timeout` in nanoseconds once the head was forwarded; 0 before.
    body_idle: AtomicU64,
    /// A read waited past `head_deadline`.
    timed_out: AtomicBool,
    /// The attempt's connection came from weir's pool.
    reused: AtomicBool,
}

impl Clock {
    /// A clock whose head deadline is `deadline`.
    pub(crate) fn new(deadline: Instant) -> Clock {
        Clock {
            head_deadline: deadline,
            body_idle: AtomicU64::new(0),
            timed_out: AtomicBool::new(false),
            reused: AtomicBool::new(false),
        }
    }

    /// The response head was forwarded: from now on each wait for body bytes may last `idle`
    /// (at least 1 ns).
    pub(crate) fn body(&self, idle: Duration) {
        let ns = u64::try_from(idle.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.body_idle.store(ns, Relaxed);
    }

    fn body_idle(&self) -> Option<Duration> {
        match self.body_idle.load(Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// A read on the attempt's connection waited past the per-try deadline before the head.
    pub(crate) fn timed_out(&self) -> bool {
        self.timed_out.load(Relaxed)
    }

    /// The attempt's connection was an idle one from the pool.
    pub(crate) fn reused(&self) -> bool {
        self.reused.load(Relaxed)
    }
}

/// An idle upstream connection.
struct Idle {
    tcp: TcpStream,
    /// Kept with the connection: its timer entry is reset, not reallocated, on the next use.
    sleep: Option<Pin<Box<Sleep>>>,
    nodelay: bool,
    expires: Instant,
}

/// Idle connections by endpoint. Hashed with ahash, not std's SipHash: the map is looked up
/// twice per proxied request (take, put back) and its keys are the config's endpoints, not
/// values a client chooses, so a collision-resistant hash buys nothing here.
type IdleMap = HashMap<SocketAddr, Vec<Idle>, ahash::RandomState>;

/// weir's pool of idle upstream connections, per endpoint (most recently used first out).
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<IdleMap>,
    sweeping: AtomicBool,
}

impl core::fmt::Debug for Pool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Pool")
    }
}

/// The upstream closed an idle connection (or sent something unasked).
fn closed(tcp: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    !matches!(tcp.try_read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, IdleMap> {
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take(&self, addr: SocketAddr) -> Option<Idle> {
        let now = Instant::now();
        let mut map = self.lock();
        let list = map.get_mut(&addr)?;
        while let Some(idle) = list.pop() {
            if idle.expires > now && !closed(&idle.tcp) {
                return Some(idle);
            }
        }
        None
    }

    fn put(self: &Arc<Self>, addr: SocketAddr, idle: Idle) {
        {
            let mut map = self.lock();
            let list = map.entry(addr).or_default();
            if list.len() >= MAX_IDLE_PER_ENDPOINT {
                list.remove(0);
            }
            list.push(idle);
        }
        if !self.sweeping.swap(true, Relaxed) {
            // Released from a request's task, so inside a runtime; never panic in a drop.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(sweep(Arc::downgrade(self)))),
                Err(_) => self.sweeping.store(false, Relaxed),
            }
        }
    }
}

/// Closes expired idle connections and those the upstream closed, until the pool is gone.
async fn sweep(pool: Weak<Pool>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(pool) = pool.upgrade() else { return };
        let now = Instant::now();
        let mut map = pool.lock();
        for list in map.values_mut() {
            list.retain(|i| i.expires > now && !closed(&i.tcp));
        }
        map.retain(|_, list| !list.is_empty());
    }
}

/// The `custom_l4` connector of one attempt: an idle connection from the [`Pool`] or a new
/// TCP connection, wrapped in a [`TimedStream`] on the attempt's [`Clock`].
#[derive(Debug)]
pub(crate) struct AttemptConnect {
    pub(crate) pool: Arc<Pool>,
    pub(crate) clock: Arc<Clock>,
    /// How long a connection released by this attempt may stay idle in the pool.
    pub(crate) idle_timeout: Duration,
}

#[async_trait]
impl L4Connect for AttemptConnect {
    async fn connect(&self, addr: &PingoraAddr) -> pingora::Result<Stream> {
        let PingoraAddr::Inet(addr) = addr else {
            return Error::e_explain(ErrorType::ConnectError, "weir: upstreams are TCP");
        };
        let idle = match self.pool.take(*addr) {
            Some(idle) => {
                self.clock.reused.store(true, Relaxed);
                idle
            }
            None => {
                let tcp = TcpStream::connect(*addr).await.map_err(|e| {
                    let t = match e.kind() {
                        io::ErrorKind::ConnectionRefused => ErrorType::ConnectRefused,
                        io::ErrorKind::TimedOut => ErrorType::ConnectTimedout,
                        _ => ErrorType::ConnectError,
                    };
                    Error::because(t, format!("weir: connecting to {addr}"), e)
                })?;
                Idle {
                    tcp,
                    sleep: None,
                    nodelay: false,
                    expires: Instant::now(),
                }
            }
        };
        let timed = TimedStream {
            tcp: Some(idle.tcp),
            sleep: idle.sleep,
            nodelay: idle.nodelay,
            wait: Wait::None,
            released: false,
            addr: *addr,
            clock: self.clock.clone(),
            pool: self.pool.clone(),
            idle_timeout: self.idle_timeout,
        };
        Ok(Stream::from(VirtualSocketStream::new(Box::new(timed))))
    }
}

/// What the current wait for bytes is bounded by.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Not waiting.
    None,
    /// The attempt's per-try deadline (no head yet).
    Head,
    /// Body inactivity: this wait started `idle_timeout` before this instant.
    Body(Instant),
}

/// A TCP connection to an upstream whose reads are timed by its attempt's [`Clock`].
#[derive(Debug)]
pub(crate) struct TimedStream {
    /// `None` only after the drop moved it to the pool.
    tcp: Option<TcpStream>,
    sleep: Option<Pin<Box<Sleep>>>,
    nodelay: bool,
    wait: Wait,
    /// Pingora released the connection for reuse (see the module docs).
    released: bool,
    addr: SocketAddr,
    clock: Arc<Clock>,
    pool: Arc<Pool>,
    idle_timeout: Duration,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "weir: connection released")
}

impl AsyncRead for TimedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let body_idle = this.clock.body_idle();
        if body_idle.is_some() && cx.waker().data().is_null() {
            // Pingora's quiet-connection check before it pools a reusable connection: it is
            // weir's to pool. End-of-stream makes Pingora drop it (see `Drop`).
            this.released = true;
            return Poll::Ready(Ok(()));
        }
        let Some(tcp) = this.tcp.as_mut() else {
            return Poll::Ready(Err(gone()));
        };
        if let Poll::Ready(r) = Pin::new(tcp).poll_read(cx, buf) {
            this.wait = Wait::None;
            return Poll::Ready(r);
        }
        let at = match (body_idle, this.wait) {
            (None, _) => {
                this.wait = Wait::Head;
                this.clock.head_deadline
            }
            (Some(_), Wait::Body(at)) => at,
            (Some(idle), _) => {
                let at = Instant::now() + idle;
                this.wait = Wait::Body(at);
                at
            }
        };
        let sleep = match &mut this.sleep {
            Some(s) => {
                if s.deadline() != at {
                    s.as_mut().reset(at);
                }
                s
            }
            None => this.sleep.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if body_idle.is_none() {
            this.clock.timed_out.store(true, Relaxed);
        }
        this.wait = Wait::None;
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            if body_idle.is_none() {
                "weir: no response head within the per-try timeout"
            } else {
                "weir: upstream body idle for idle_timeout"
            },
        )))
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().tcp.as_mut() {
            Some(tcp) => Pin::new(tcp).poll_write(cx, buf),
            None => Poll::Ready(Err(gone())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().tcp.as_mut() {
            Some(tcp) => Pin::new(tcp).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.released = false;
        match this.tcp.as_mut() {
            Some(tcp) => Pin::new(tcp).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl VirtualSocket for TimedStream {
    fn set_socket_option(&self, opt: VirtualSockOpt) -> io::Result<()> {
        match (opt, &self.tcp) {
            // Set once per connection (Pingora asks on every checkout).
            (VirtualSockOpt::NoDelay, Some(tcp)) if !self.nodelay => tcp.set_nodelay(true),
            // weir's peers set no TCP keepalive; anything else needs nothing.
            _ => Ok(()),
        }
    }
}

impl Drop for TimedStream {
    fn drop(&mut self) {
        if !self.released {
            return;
        }
        if let Some(tcp) = self.tcp.take() {
            let idle = Idle {
                tcp,
                sleep: self.sleep.take(),
                nodelay: true,
                expires: Instant::now() + self.idle_timeout,
            };
            self.pool.put(self.addr, idle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn connect(pool: &Arc<Pool>, addr: SocketAddr, clock: &Arc<Clock>) -> Stream {
        let c = AttemptConnect {
            pool: pool.clone(),
            clock: clock.clone(),
            idle_timeout: Duration::from_secs(5),
        };
        c.connect(&PingoraAddr::Inet(addr)).await.unwrap()
    }

    fn clock(per_try_ms: u64) -> Arc<Clock> {
        Arc::new(Clock::new(
            Instant::now() + Duration::from_millis(per_try_ms),
        ))
    }

    /// Per-try until the head, idle after it; a released connection goes to weir's pool and
    /// the next attempt gets it on its own clock.
    #[tokio::test]
    async fn deadlines_follow_the_attempt_through_the_pool() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Arc::new(Pool::default());
        let mut buf = [0u8; 8];

        // No head within per-try: the read fails and the clock says so.
        let c1 = clock(50);
        let mut s1 = connect(&pool, addr, &c1).await;
        let (_up1, _) = listener.accept().await.unwrap();
        let t = Instant::now();
        assert!(s1.read(&mut buf).await.is_err());
        assert!(c1.timed_out() && !c1.reused());
        assert!(t.elapsed() < Duration::from_millis(500));
        drop(s1);

        // Head forwarded: a pause longer than per-try is fine.
        let c2 = clock(50);
        let mut s2 = connect(&pool, addr, &c2).await;
        let (mut up2, _) = listener.accept().await.unwrap();
        up2.write_all(b"h").await.unwrap();
        assert_eq!(s2.read(&mut buf).await.unwrap(), 1);
        c2.body(Duration::from_millis(400));
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            up2.write_all(b"b").await.unwrap();
            up2
        });
        assert_eq!(s2.read(&mut buf).await.unwrap(), 1);
        assert!(!c2.timed_out());
        let _up2 = writer.await.unwrap();

        // Pingora's quiet-connection probe (no waker): end-of-stream, and the drop pools it.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut probe = [0u8; 1];
        let mut rb = ReadBuf::new(&mut probe);
        let r = Pin::new(&mut s2).poll_read(&mut cx, &mut rb);
        assert!(matches!(r, Poll::Ready(Ok(()))) && rb.filled().is_empty());
        drop(s2);
        assert_eq!(pool.lock().get(&addr).map_or(0, Vec::len), 1);

        // The next attempt reuses it, on its own per-try deadline (not the body mode of the
        // previous attempt).
        let c3 = clock(50);
        let mut s3 = connect(&pool, addr, &c3).await;
        assert!(c3.reused());
        assert!(s3.read(&mut buf).await.is_err());
        assert!(c3.timed_out());
        drop(s3);
        assert_eq!(pool.lock().get(&addr).map_or(0, Vec::len), 0);
    }
}
