//! A buffered, owned-buffer TCP connection for monoio's completion-based I/O.
//!
//! io_uring needs buffers it owns while an operation is in flight, so a connection keeps one
//! `Vec<u8>` that is moved into each read and handed back. Bytes read but not yet consumed are
//! `buf[start..]`; reads append after them (compacting first when the tail is short), so a
//! head or body that arrives in pieces is parsed from one contiguous slice without copies.

use core::time::Duration;
use std::io;
use std::time::Instant;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

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
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(READ_BUF),
            start: 0,
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

    /// Reads once more into the buffer (appending). `Ok(0)` is EOF.
    pub(crate) async fn fill(&mut self) -> io::Result<usize> {
        if self.start > self.buf.len() {
            self.start = 0;
        }
        self.make_room();
        let buf = core::mem::take(&mut self.buf);
        let (len, cap) = (buf.len(), buf.capacity());
        let (res, slice) = self.stream.read(buf.slice_mut(len..cap)).await;
        self.buf = slice.into_inner();
        res
    }

    /// [`fill`](Self::fill) with a deadline; EOF is [`IoFail::Eof`].
    pub(crate) async fn fill_until(&mut self, deadline: Instant) -> Result<usize, IoFail> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(IoFail::Timeout);
        }
        match monoio::time::timeout(left, self.fill()).await {
            Err(_) => Err(IoFail::Timeout),
            Ok(Ok(0)) => Err(IoFail::Eof),
            Ok(Ok(n)) => Ok(n),
            Ok(Err(_)) => Err(IoFail::Error),
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
        match monoio::time::timeout(idle, self.stream.write_all(out)).await {
            Err(_) => (Err(IoFail::Timeout), Vec::new()),
            Ok((Ok(_), mut out)) => {
                out.clear();
                (Ok(()), out)
            }
            Ok((Err(_), mut out)) => {
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
        match monoio::time::timeout_at(deadline.into(), self.stream.write_all(buf)).await {
            Err(_) => (Err(IoFail::Timeout), Vec::new()),
            Ok((Ok(_), buf)) => (Ok(()), buf),
            Ok((Err(_), buf)) => (Err(IoFail::Error), buf),
        }
    }

    /// Writes a static byte string (e.g. `100 Continue`) within `idle`.
    pub(crate) async fn write_static(
        &mut self,
        bytes: &'static [u8],
        idle: Duration,
    ) -> Result<(), IoFail> {
        match monoio::time::timeout(idle, self.stream.write_all(bytes)).await {
            Err(_) => Err(IoFail::Timeout),
            Ok((Ok(_), _)) => Ok(()),
            Ok((Err(_), _)) => Err(IoFail::Error),
        }
    }

    /// Half-closes the write side (best effort) so the peer sees EOF promptly.
    pub(crate) async fn shutdown(&mut self) {
        let _ = monoio::time::timeout(Duration::from_millis(100), self.stream.shutdown()).await;
    }
}
