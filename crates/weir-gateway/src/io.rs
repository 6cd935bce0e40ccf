//! A buffered, owned-buffer TCP connection for monoio's completion-based I/O.
//!
//! io_uring needs buffers it owns while an operation is in flight, so a connection keeps one
//! `Vec<u8>` that is moved into each read and handed back. Bytes read but not yet consumed are
//! `buf[start..]`; reads append after them (compacting first when the tail is short), so a
//! head or body that arrives in pieces is parsed from one contiguous slice without copies.
//!
//! Deadlines: each connection owns one timer (a pinned `monoio::time::Sleep`) that every
//! timed read and write re-arms, instead of a `monoio::time::timeout` per operation (a timer
//! wheel insert and remove for every read and write). Moving the deadline later — the common
//! case, one operation after another — only records the new time (monoio's timer, like
//! tokio's, re-files an entry when it comes due with a later deadline); moving it earlier
//! re-files the entry at once. An operation still ends with [`IoFail::Timeout`] exactly
//! when its own deadline passes; a timer that fires while no operation waits merely wakes
//! the connection's task once, which then polls what it is waiting for.
//!
//! A timer remembers one task: monoio (0.2.4, `StateCell::poll` in its timer driver) stores
//! the waker of the first poll and keeps it until the timer fires, where tokio replaces it on
//! every poll. An upstream connection moves between tasks through the idle pool, so before it
//! goes there it gets a fresh timer ([`Conn::release_timer`]); with the old one, the next
//! task's read would wake the previous task at its deadline and wait on past it.

use core::future::Future;
use core::pin::Pin;
use core::task::Poll;
use core::time::Duration;
use std::time::Instant;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
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
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    /// The deadline timer of every timed operation (see the module docs).
    timer: Pin<Box<Sleep>>,
}

/// Runs `op` until it completes (`Some`) or `deadline` passes (`None`), on `timer`. Polls
/// `op` first, as `monoio::time::timeout` does.
async fn timed<F: Future>(
    timer: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    op: F,
) -> Option<F::Output> {
    timer.as_mut().reset(deadline.into());
    let mut op = core::pin::pin!(op);
    core::future::poll_fn(|cx| {
        if let Poll::Ready(v) = op.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(READ_BUF),
            start: 0,
            // Not on the timer wheel until the first timed operation sets its deadline.
            timer: Box::pin(monoio::time::sleep(Duration::from_secs(3600))),
        }
    }

    /// Gives the connection a timer no task has polled yet, so that the next task to use it
    /// is the one its deadlines wake (see the module docs); the old timer leaves the wheel
    /// as it drops. For a connection that is about to pass to another task.
    pub(crate) fn release_timer(&mut self) {
        self.timer = Box::pin(monoio::time::sleep(Duration::from_secs(3600)));
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

    /// [`fill`](Self::fill) with a deadline; EOF is [`IoFail::Eof`].
    pub(crate) async fn fill_until(&mut self, deadline: Instant) -> Result<usize, IoFail> {
        if deadline <= Instant::now() {
            return Err(IoFail::Timeout);
        }
        if self.start > self.buf.len() {
            self.start = 0;
        }
        self.make_room();
        let Self {
            stream, buf, timer, ..
        } = self;
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

    /// [`fill`](Self::fill) under an inactivity timeout.
    pub(crate) async fn fill_within(&mut self, idle: Duration) -> Result<usize, IoFail> {
        self.fill_until(Instant::now() + idle).await
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
        let deadline = Instant::now() + idle;
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
        let deadline = Instant::now() + idle;
        match timed(&mut self.timer, deadline, self.stream.write_all(bytes)).await {
            None => Err(IoFail::Timeout),
            Some((Ok(_), _)) => Ok(()),
            Some((Err(_), _)) => Err(IoFail::Error),
        }
    }

    /// Half-closes the write side (best effort) so the peer sees EOF promptly.
    pub(crate) async fn shutdown(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(100);
        let _ = timed(&mut self.timer, deadline, self.stream.shutdown()).await;
    }
}
