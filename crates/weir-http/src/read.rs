//! Reading one request head off a connection, sans-io: how long to wait for bytes and what a
//! timeout or a parse failure means. The frontends own the sockets and the timers; this
//! module owns the decisions, so that a slow or malformed client gets the same answer from
//! every frontend.
//!
//! The rules (`[server]` keys in docs/CONFIG.md, statuses in docs/HTTP.md):
//! - The first head of a connection must be complete `header_timeout` after the accept,
//!   including the wait for its first byte: 408 `client_timeout` and close.
//! - On a kept-alive connection the next head's first byte may take up to `idle_timeout`
//!   (silence then closes the connection without an answer: nobody asked anything); once a
//!   byte has arrived, the head must be complete `header_timeout` later: 408.
//! - A head the parser rejects is answered with its status (400 / 414 / 431 / 505) and the
//!   connection closed ([`HttpError`]); a client that closes mid-head gets no answer.
//!
//! Time is a type parameter (`std::time::Instant` on monoio, `tokio::time::Instant` on
//! Pingora) and the current time is asked for only when a deadline starts from it, so a head
//! that arrives whole costs one parse and no clock read.

use core::ops::Add;
use core::time::Duration;

use crate::error::{ErrorKind, HttpError};
use crate::head::{BodyFraming, Limits, RequestHead, check_request, parse_request_into};

/// The timeouts that bound reading a head: `server.header_timeout` and `server.idle_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadTimeouts {
    /// A head must be complete this long after the accept (first request) or after its first
    /// byte (later requests).
    pub header: Duration,
    /// How long a kept-alive connection may wait for the next head's first byte.
    pub idle: Duration,
}

/// What the caller does next (see [`HeadReader::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadNext<I> {
    /// The buffer starts with a complete head of this many bytes, parsed into the
    /// `RequestHead` passed to [`HeadReader::step`].
    Complete(usize),
    /// Read more bytes, waiting no later than `until`; then call [`HeadReader::step`] again
    /// with the longer buffer, or [`HeadReader::timed_out`] when `until` passed first. On
    /// EOF or an I/O error, close without an answer.
    Read {
        /// The deadline of this wait.
        until: I,
        /// No byte of this head has arrived yet (a shutdown may close the connection now).
        idle: bool,
    },
}

/// Why reading a head ends without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadStop {
    /// Close the connection silently (a kept-alive connection that stayed idle).
    Close,
    /// Answer with this error's status and reason (400 / 408 / 414 / 431 / 505), then close.
    Reject(HttpError),
}

/// Where [`HeadReader::step`] puts a complete head: a [`RequestHead`] (parsed, its fields
/// copied for the frontend to read), or only its [`BodyFraming`], for a frontend whose own
/// parser reads the same bytes once weir has judged them (weir-pingora's front door): the
/// head is then checked in place ([`check_request`]) and nothing is copied.
pub trait HeadSink {
    /// Checks the head at the start of `buf`: `Some(len)` when complete (and kept).
    ///
    /// # Errors
    /// The head is malformed or over a limit.
    fn complete(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, HttpError>;
}

impl HeadSink for RequestHead {
    fn complete(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, HttpError> {
        parse_request_into(self, buf, limits)
    }
}

impl HeadSink for BodyFraming {
    fn complete(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, HttpError> {
        Ok(check_request(buf, limits)?.map(|(len, framing)| {
            *self = framing;
            len
        }))
    }
}

/// Reads one request head: the deadlines and decisions of the module docs. Make one per
/// request (the limits and timeouts may change on reload); it holds no buffers.
#[derive(Debug, Clone, Copy)]
pub struct HeadReader<I> {
    limits: Limits,
    timeouts: HeadTimeouts,
    /// Set from the start for a first request; from the first partial parse otherwise.
    deadline: Option<I>,
    first: bool,
    idle: bool,
}

impl<I: Copy + Add<Duration, Output = I>> HeadReader<I> {
    /// A reader for the head of the request after `accepted` (`Some(accept time)` for a
    /// connection's first request, `None` on a kept-alive connection).
    pub fn new(limits: Limits, timeouts: HeadTimeouts, accepted: Option<I>) -> Self {
        Self {
            limits,
            timeouts,
            deadline: accepted.map(|a| a + timeouts.header),
            first: accepted.is_some(),
            idle: false,
        }
    }

    /// Whether this is the connection's first request.
    pub fn is_first(&self) -> bool {
        self.first
    }

    /// Looks at what `buf` holds (the connection's unread bytes, from the head's start) and
    /// says what to do next; a complete head goes to `head` ([`HeadSink`]). `now` is called
    /// only when a deadline starts now.
    ///
    /// # Errors
    /// [`HeadStop::Reject`] when the head is malformed or over a limit.
    pub fn step(
        &mut self,
        head: &mut impl HeadSink,
        buf: &[u8],
        now: impl FnOnce() -> I,
    ) -> Result<HeadNext<I>, HeadStop> {
        self.idle = buf.is_empty();
        if self.idle {
            let until = match self.deadline {
                Some(d) => d,
                None => now() + self.timeouts.idle,
            };
            return Ok(HeadNext::Read { until, idle: true });
        }
        match head.complete(buf, &self.limits) {
            Ok(Some(len)) => Ok(HeadNext::Complete(len)),
            Ok(None) => {
                let header = self.timeouts.header;
                let until = *self.deadline.get_or_insert_with(|| now() + header);
                Ok(HeadNext::Read { until, idle: false })
            }
            Err(e) => Err(HeadStop::Reject(e)),
        }
    }

    /// The last [`HeadNext::Read`]'s deadline passed without the bytes asked for.
    pub fn timed_out(&self) -> HeadStop {
        if self.idle && !self.first {
            HeadStop::Close
        } else {
            HeadStop::Reject(HttpError::new(
                ErrorKind::ClientTimeout,
                "request head timeout",
            ))
        }
    }
}
