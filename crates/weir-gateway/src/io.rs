//! A buffered, owned-buffer TCP connection for monoio's completion-based I/O.
//!
//! io_uring needs buffers it owns while an operation is in flight, so a connection keeps one
//! `Vec<u8>` that is moved into each read and handed back. Bytes read but not yet consumed are
//! `buf[start..]`; reads append after them (compacting first when the tail is short), so a
//! head or body that arrives in pieces is parsed from one contiguous slice without copies.
//!
//! Deadlines: each connection owns one timer (a pinned `monoio::time::Sleep`) that a timed
//! read or write re-arms when it has to wait, instead of a `monoio::time::timeout` per
//! operation (a timer wheel insert and remove for every read and write); an operation that
//! completes when first polled touches neither the timer nor the clock. Moving the deadline
//! later — the common case, one operation after another — only records the new time
//! (monoio's timer, like tokio's, re-files an entry when it comes due with a later
//! deadline); moving it earlier re-files the entry at once. An operation still ends with
//! [`IoFail::Timeout`] exactly when its own deadline passes; a timer that fires while no
//! operation waits merely wakes the connection's task once, which then polls what it is
//! waiting for.
//!
//! A timer wakes the task that polled it last, so an upstream connection keeps its timer as
//! it moves between tasks through the idle pool. (Published monoio 0.2.4 kept the first
//! poller's waker until the timer fired, and the next task's read would wait on past its
//! deadline; `vendor/monoio` carries the fix, see vendor/README.md.)
//!
//! Reads on the io_uring driver go through a multishot receive (`RecvMulti`, from the
//! monoio patch in `vendor/monoio`): armed once per connection, it keeps receiving into the
//! driver's buffer ring, and a read copies what arrived into the connection's buffer. A
//! one-shot receive submitted before the peer's next message is there costs the kernel a
//! failed attempt, a poll arm and a completion from task work, for most requests a
//! keep-alive connection reads; the multishot receive costs none of these. A read that
//! times out leaves nothing behind (the receive stays armed, and what it receives waits for
//! the next read). On the legacy driver, or a kernel without multishot receive (before
//! 6.0), reads are one-shot `read`s of the owned buffer.

use core::future::Future;
use core::pin::Pin;
use core::task::Poll;
use core::time::Duration;
use std::time::Instant;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::{RecvMulti, TcpStream};
use monoio::time::Sleep;

/// Initial read buffer size (grows up to the head limit when a head needs it).
const READ_BUF: usize = 16 * 1024;
/// Free space below which a read first compacts or grows the buffer.
const MIN_READ: usize = 4 * 1024;

/// Why a timed read or write did not complete.
#[derive(Debug)]
pub(crate) enum IoFail {
    /// The peer closed the connection (EOF) before the wanted bytes arrived.
    Eof,
    /// The deadline passed.
    Timeout,
    /// Any socket error (reset, broken pipe, ...).
    Error,
}

/// A TCP stream with a read buffer.
pub(crate) struct Conn {
    /// The multishot receive, where available (see the module docs). Declared before
    /// `stream`: it is dropped (its receive cancelled) before the socket closes.
    recv: Option<RecvMulti>,
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    /// The deadline timer of every timed operation (see the module docs).
    timer: Pin<Box<Sleep>>,
}

/// When a timed operation gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Deadline {
    /// At this instant.
    At(Instant),
    /// This long after the operation first has to wait (an inactivity timeout): the clock
    /// is read only then, not for an operation that completes when first polled.
    After(Duration),
}

/// Runs `op` until it completes (`Some`) or `deadline` passes (`None`), on `timer`. Polls
/// `op` first, as `monoio::time::timeout` does, and arms the timer only when `op` has to
/// wait: a read whose bytes are already there (a multishot receive's usual case under
/// load) costs no timer and no clock read. A deadline already past ends a waiting `op`
/// at once (monoio fires a timer set in the past when it is set).
async fn timed<F: Future>(
    timer: &mut Pin<Box<Sleep>>,
    deadline: Deadline,
    op: F,
) -> Option<F::Output> {
    let mut op = core::pin::pin!(op);
    let mut armed = false;
    core::future::poll_fn(|cx| {
        if let Poll::Ready(v) = op.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if !armed {
            armed = true;
            let at = match deadline {
                Deadline::At(at) => at,
                Deadline::After(idle) => Instant::now() + idle,
            };
            timer.as_mut().reset(at.into());
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            recv: stream.recv_multishot(),
            stream,
            buf: Vec::with_capacity(READ_BUF),
            start: 0,
            // Not on the timer wheel until the first timed operation sets its deadline.
            timer: Box::pin(monoio::time::sleep(Duration::from_secs(3600))),
        }
    }

    /// Bytes read and not yet consumed.
    pub(crate) fn data(&self) -> &[u8] {
        // A read cancelled by a timeout takes the buffer with it; then nothing is buffered.
        self.buf.get(self.start..).unwrap_or(&[])
    }

    /// Number of buffered bytes.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// Marks `n` buffered bytes as used.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.buffered());
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
    }

    /// Reads once more into the buffer (at least one byte) before `deadline`; EOF is
    /// [`IoFail::Eof`]. Bytes already received are taken even when `deadline` has passed;
    /// a read that has to wait then ends with [`IoFail::Timeout`] at once.
    pub(crate) async fn fill_until(&mut self, deadline: Instant) -> Result<usize, IoFail> {
        self.fill(Deadline::At(deadline)).await
    }

    /// [`fill_until`](Self::fill_until) under an inactivity timeout.
    pub(crate) async fn fill_within(&mut self, idle: Duration) -> Result<usize, IoFail> {
        self.fill(Deadline::After(idle)).await
    }

    async fn fill(&mut self, deadline: Deadline) -> Result<usize, IoFail> {
        if self.start > self.buf.len() {
            self.start = 0;
        }
        self.make_room();
        let Self {
            recv,
            stream,
            buf,
            timer,
            ..
        } = self;
        if let Some(recv) = recv {
            return match timed(timer, deadline, recv.recv(buf)).await {
                None => Err(IoFail::Timeout),
                Some(Ok(0)) => Err(IoFail::Eof),
                Some(Ok(n)) => Ok(n),
                Some(Err(_)) => Err(IoFail::Error),
            };
        }
        let owned = core::mem::take(buf);
        let (len, cap) = (owned.len(), owned.capacity());
        let read = async {
            let (res, slice) = stream.read(owned.slice_mut(len..cap)).await;
            *buf = slice.into_inner();
            res
        };
        match timed(timer, deadline, read).await {
            None => Err(IoFail::Timeout),
            Some(Ok(0)) => Err(IoFail::Eof),
            Some(Ok(n)) => Ok(n),
            Some(Err(_)) => Err(IoFail::Error),
        }
    }

    fn make_room(&mut self) {
        if self.buf.capacity() - self.buf.len() >= MIN_READ {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.capacity() - self.buf.len() < MIN_READ {
            self.buf.reserve(READ_BUF.max(self.buf.len()));
        }
    }

    /// Writes all of `out` (which is handed back, cleared) within `idle`.
    pub(crate) async fn write_all(
        &mut self,
        out: Vec<u8>,
        idle: Duration,
    ) -> (Result<(), IoFail>, Vec<u8>) {
        let deadline = Deadline::After(idle);
        match timed(&mut self.timer, deadline, self.stream.write_all(out)).await {
            None => (Err(IoFail::Timeout), Vec::new()),
            Some((Ok(_), mut out)) => {
                out.clear();
                (Ok(()), out)
            }
            Some((Err(_), mut out)) => {
                out.clear();
                (Err(IoFail::Error), out)
            }
        }
    }

    /// Writes all of `buf` before `deadline`; the buffer is handed back unchanged (so it can
    /// be sent again on another connection), or empty after a timeout.
    pub(crate) async fn write_until(
        &mut self,
        buf: Vec<u8>,
        deadline: Instant,
    ) -> (Result<(), IoFail>, Vec<u8>) {
        let deadline = Deadline::At(deadline);
        match timed(&mut self.timer, deadline, self.stream.write_all(buf)).await {
            None => (Err(IoFail::Timeout), Vec::new()),
            Some((Ok(_), buf)) => (Ok(()), buf),
            Some((Err(_), buf)) => (Err(IoFail::Error), buf),
        }
    }

    /// Writes a static byte string (e.g. `100 Continue`) within `idle`.
    pub(crate) async fn write_static(
        &mut self,
        bytes: &'static [u8],
        idle: Duration,
    ) -> Result<(), IoFail> {
        let deadline = Deadline::After(idle);
        match timed(&mut self.timer, deadline, self.stream.write_all(bytes)).await {
            None => Err(IoFail::Timeout),
            Some((Ok(_), _)) => Ok(()),
            Some((Err(_), _)) => Err(IoFail::Error),
        }
    }

    /// Half-closes the write side (best effort) so the peer sees EOF promptly.
    pub(crate) async fn shutdown(&mut self) {
        let deadline = Deadline::After(Duration::from_millis(100));
        let _ = timed(&mut self.timer, deadline, self.stream.shutdown()).await;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;

    use super::*;

    /// Byte `i` of connection `c`'s stream in the test below.
    fn pattern(c: usize, i: usize) -> u8 {
        (i.wrapping_mul(31) ^ c.wrapping_mul(7) ^ (i >> 9)) as u8
    }

    /// More unread data than the buffer ring holds (80 connections × 64 KiB, each slot
    /// capped at 8 buffers of 4 KiB, 512 in the ring): receives are cancelled at the cap and
    /// re-armed, the ring runs dry and reads fall back to `recv(2)`; every byte still
    /// arrives once and in order, and each stream ends with EOF.
    #[test]
    fn multishot_reads_keep_every_byte_through_full_queues_and_a_dry_ring() {
        const CONNS: usize = 80;
        const LEN: usize = 64 * 1024;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for _ in 0..CONNS {
                let (mut s, _) = listener.accept().unwrap();
                // The first byte says which connection this is.
                let mut id = [0u8; 1];
                s.read_exact(&mut id).unwrap();
                let c = usize::from(id[0]);
                thread::spawn(move || {
                    let bytes: Vec<u8> = (0..LEN).map(|i| pattern(c, i)).collect();
                    s.write_all(&bytes).unwrap();
                });
            }
        });
        let mut rt = crate::worker::uring_runtime().expect("io_uring runtime");
        rt.block_on(async move {
            let mut conns = connect_tagged(addr, 0..CONNS).await;
            // Arm every receive, then let the data land while nobody reads.
            for conn in &mut conns {
                let _ = conn
                    .fill_until(Instant::now() + Duration::from_millis(1))
                    .await;
            }
            monoio::time::sleep(Duration::from_millis(300)).await;
            let mut got = vec![Vec::<u8>::new(); CONNS];
            let mut open = CONNS;
            while open > 0 {
                for (c, conn) in conns.iter_mut().enumerate() {
                    if got[c].len() > LEN {
                        continue;
                    }
                    match conn
                        .fill_until(Instant::now() + Duration::from_secs(5))
                        .await
                    {
                        Ok(_) => {
                            // Small, uneven takes: a slow reader.
                            let take = conn.buffered().min(1000 + c * 13);
                            got[c].extend_from_slice(&conn.data()[..take]);
                            conn.consume(take);
                        }
                        Err(IoFail::Eof) => {
                            got[c].extend_from_slice(conn.data());
                            let n = conn.buffered();
                            conn.consume(n);
                            // Mark as done: one byte past the end.
                            got[c].push(0);
                            open -= 1;
                        }
                        Err(e) => panic!("connection {c}: {e:?}"),
                    }
                }
            }
            for (c, bytes) in got.iter().enumerate() {
                assert_eq!(bytes.len(), LEN + 1, "connection {c}");
                let first_bad = (0..LEN).find(|&i| bytes[i] != pattern(c, i));
                assert_eq!(first_bad, None, "connection {c}");
            }
        });
    }

    /// A connection to `addr` per id, each having sent its id as one byte, each with a
    /// multishot receive.
    async fn connect_tagged(
        addr: std::net::SocketAddr,
        ids: impl Iterator<Item = usize>,
    ) -> Vec<Conn> {
        let mut conns = Vec::new();
        for c in ids {
            let stream = TcpStream::connect_addr(addr).await.unwrap();
            let mut conn = Conn::new(stream);
            assert!(conn.recv.is_some(), "no multishot receive on io_uring");
            let (r, _) = conn.write_all(vec![c as u8], Duration::from_secs(5)).await;
            r.unwrap();
            conns.push(conn);
        }
        conns
    }

    /// While unread queues hold the ring, a reader that found it dry takes its bytes with
    /// `recv(2)` and waits for more with a one-shot poll: bytes that arrive later still
    /// wake it, and the held connections lose nothing.
    ///
    /// The order makes the ring dry when the late connection's first byte arrives: it is
    /// armed first, then every hog is armed with a single poll and none is read, so the
    /// hogs that reach `MAX_QUEUED` (8 buffers each) take all 512 buffers and the rest end
    /// with `ENOBUFS`; 300 ms later the late byte finds no buffer (`ENOBUFS`), is taken with
    /// `recv(2)`, and the second byte, 200 ms after it, arrives while the reader waits in
    /// the poll.
    #[test]
    fn a_reader_waits_with_a_poll_while_other_queues_hold_the_ring() {
        const HOGS: usize = 100;
        const LEN: usize = 64 * 1024;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let mut keep = Vec::new();
            for _ in 0..=HOGS {
                let (mut s, _) = listener.accept().unwrap();
                let mut id = [0u8; 1];
                s.read_exact(&mut id).unwrap();
                let c = usize::from(id[0]);
                if c < HOGS {
                    let bytes: Vec<u8> = (0..LEN).map(|i| pattern(c, i)).collect();
                    s.write_all(&bytes).unwrap();
                    keep.push(s);
                } else {
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(300));
                        s.write_all(b"a").unwrap();
                        thread::sleep(Duration::from_millis(200));
                        s.write_all(b"b").unwrap();
                        thread::sleep(Duration::from_secs(5));
                    });
                }
            }
            thread::sleep(Duration::from_secs(5));
        });
        let mut rt = crate::worker::uring_runtime().expect("io_uring runtime");
        rt.block_on(async move {
            // Connection `HOGS` (the late one) first, then the hogs.
            let mut conns = connect_tagged(addr, core::iter::once(HOGS).chain(0..HOGS)).await;
            // Arm every receive without reading anything.
            for conn in &mut conns {
                let recv = conn.recv.as_mut().unwrap();
                let mut scratch = Vec::with_capacity(1);
                core::future::poll_fn(|cx| {
                    assert!(recv.poll_recv(cx, &mut scratch).is_pending());
                    Poll::Ready(())
                })
                .await;
            }
            let late = &mut conns[0];
            let mut got = Vec::new();
            while got.len() < 2 {
                late.fill_until(Instant::now() + Duration::from_secs(3))
                    .await
                    .expect("the late connection's bytes");
                got.extend_from_slice(late.data());
                let n = late.buffered();
                late.consume(n);
            }
            assert_eq!(got, b"ab");
            for (c, conn) in conns.iter_mut().skip(1).enumerate() {
                let mut bytes = Vec::new();
                while bytes.len() < LEN {
                    conn.fill_until(Instant::now() + Duration::from_secs(3))
                        .await
                        .unwrap_or_else(|e| panic!("hog {c}: {e:?}"));
                    bytes.extend_from_slice(conn.data());
                    let n = conn.buffered();
                    conn.consume(n);
                }
                assert_eq!(bytes.len(), LEN, "hog {c}");
                let first_bad = (0..LEN).find(|&i| bytes[i] != pattern(c, i));
                assert_eq!(first_bad, None, "hog {c}");
            }
        });
    }

    /// The multishot receive holds a reference to the socket; dropping the connection
    /// cancels it, so the socket really closes and the peer sees EOF.
    #[test]
    fn dropping_a_connection_with_an_armed_receive_closes_the_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let eof = Arc::new(AtomicBool::new(false));
        let seen = eof.clone();
        thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut b = [0u8; 16];
            if let Ok(0) = s.read(&mut b) {
                seen.store(true, Ordering::SeqCst);
            }
        });
        let mut rt = crate::worker::uring_runtime().expect("io_uring runtime");
        let closed = rt.block_on(async move {
            let stream = TcpStream::connect_addr(addr).await.unwrap();
            let mut conn = Conn::new(stream);
            assert!(conn.recv.is_some(), "no multishot receive on io_uring");
            let read = conn
                .fill_until(Instant::now() + Duration::from_millis(20))
                .await;
            assert!(matches!(read, Err(IoFail::Timeout)), "{read:?}");
            drop(conn);
            for _ in 0..200 {
                if eof.load(Ordering::SeqCst) {
                    return true;
                }
                monoio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        });
        assert!(closed, "the peer never saw the connection close");
    }

    /// A read past its deadline still takes bytes that have arrived; one that would have to
    /// wait ends with a timeout at once (the timer is armed only then, in the past), on both
    /// drivers.
    #[test]
    fn a_read_past_its_deadline_takes_what_is_there_and_never_waits() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for _ in 0..2 {
                let (mut s, _) = listener.accept().unwrap();
                thread::spawn(move || {
                    s.write_all(b"a").unwrap();
                    thread::sleep(Duration::from_millis(30));
                    s.write_all(b"bc").unwrap();
                    // Stays open, silent.
                    thread::sleep(Duration::from_secs(5));
                });
            }
        });
        let check = || async move {
            let stream = TcpStream::connect_addr(addr).await.unwrap();
            let mut conn = Conn::new(stream);
            // The first read (which arms the multishot receive) waits for "a"; then "bc"
            // lands while nobody reads.
            conn.fill_within(Duration::from_secs(5)).await.unwrap();
            assert_eq!(conn.data(), b"a");
            conn.consume(1);
            monoio::time::sleep(Duration::from_millis(100)).await;
            let past = Instant::now() - Duration::from_millis(10);
            conn.fill_until(past).await.unwrap();
            assert_eq!(conn.data(), b"bc");
            conn.consume(2);
            let started = Instant::now();
            let read = conn.fill_until(started - Duration::from_millis(10)).await;
            assert!(matches!(read, Err(IoFail::Timeout)), "{read:?}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{:?}",
                started.elapsed()
            );
        };
        crate::worker::uring_runtime()
            .expect("io_uring runtime")
            .block_on(check());
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .unwrap()
            .block_on(check());
    }
}
