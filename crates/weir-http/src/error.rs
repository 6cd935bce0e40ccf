//! Errors, each mapped once to the status and `x-weir-reason` of docs/HTTP.md.
//!
//! Request-side errors become the gateway's own 400 / 408 / 414 / 431 / 505 responses; response-side
//! errors ([`ErrorKind::BadResponse`]) mean the upstream spoke invalid HTTP, which the gateway
//! counts as a `protocol_error` attempt and, when no attempt succeeds, answers with
//! 502 `upstream_unavailable`.

use core::fmt;

/// What went wrong, at the granularity of the status table in docs/HTTP.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Malformed request: 400 `bad_request`.
    BadRequest,
    /// Request head larger than `max_header_bytes` (or too many header lines):
    /// 431 `headers_too_large`.
    HeadersTooLarge,
    /// Request line longer than 8 KiB: 414 `uri_too_long`.
    UriTooLong,
    /// A well-formed `HTTP/x.y` version other than 1.0 / 1.1: 505 `http_version_not_supported`.
    VersionNotSupported,
    /// The request head did not arrive within `header_timeout`: 408 `client_timeout`
    /// ([`HeadReader`](crate::HeadReader)).
    ClientTimeout,
    /// The upstream's response head (or body framing) is invalid: 502 `upstream_unavailable`
    /// (an attempt result of `protocol_error`).
    BadResponse,
}

/// A parse error: a [`kind`](Self::kind) for the status table plus a short static `detail`
/// for logs (never sent to clients as anything but a log field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HttpError {
    kind: ErrorKind,
    detail: &'static str,
}

impl HttpError {
    /// An error of `kind` with a log `detail`.
    pub const fn new(kind: ErrorKind, detail: &'static str) -> Self {
        Self { kind, detail }
    }

    /// A 400 `bad_request`.
    pub const fn bad_request(detail: &'static str) -> Self {
        Self::new(ErrorKind::BadRequest, detail)
    }

    /// An invalid upstream response (502 `upstream_unavailable`).
    pub const fn bad_response(detail: &'static str) -> Self {
        Self::new(ErrorKind::BadResponse, detail)
    }

    /// The kind of error.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The HTTP status the gateway answers with.
    pub const fn status(&self) -> u16 {
        match self.kind {
            ErrorKind::BadRequest => 400,
            ErrorKind::HeadersTooLarge => 431,
            ErrorKind::UriTooLong => 414,
            ErrorKind::VersionNotSupported => 505,
            ErrorKind::ClientTimeout => 408,
            ErrorKind::BadResponse => 502,
        }
    }

    /// The `x-weir-reason` / JSON `error` string (docs/HTTP.md).
    pub const fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::HeadersTooLarge => "headers_too_large",
            ErrorKind::UriTooLong => "uri_too_long",
            ErrorKind::VersionNotSupported => "http_version_not_supported",
            ErrorKind::ClientTimeout => "client_timeout",
            ErrorKind::BadResponse => "upstream_unavailable",
        }
    }

    /// A short description of what exactly was wrong, for logs.
    pub const fn detail(&self) -> &'static str {
        self.detail
    }

    /// The same error re-labelled as an upstream protocol error (for a body decoded on the
    /// upstream side).
    pub const fn into_bad_response(self) -> Self {
        Self::bad_response(self.detail)
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.reason(), self.status(), self.detail)
    }
}

impl core::error::Error for HttpError {}

/// An error in a message body's framing (chunked coding, or a body cut short).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyError {
    /// A chunk-size line without hex digits, or with a byte that is not allowed there.
    InvalidChunkSize,
    /// A chunk size that does not fit in 64 bits.
    ChunkSizeOverflow,
    /// Chunk data not followed by CRLF, or a line ended by a bare LF / bare CR.
    MissingCrlf,
    /// A chunk extension containing a control character.
    InvalidExtension,
    /// Chunk extensions longer than [`MAX_CHUNK_EXT_BYTES`](crate::MAX_CHUNK_EXT_BYTES).
    ExtensionTooLong,
    /// A trailer line that is not `name: value`.
    InvalidTrailer,
    /// Trailers longer than [`MAX_TRAILER_BYTES`](crate::MAX_TRAILER_BYTES).
    TrailersTooLong,
    /// The connection ended before the body was complete.
    Truncated,
}

impl BodyError {
    /// A short static description, for logs.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::InvalidChunkSize => "invalid chunk size",
            Self::ChunkSizeOverflow => "chunk size overflow",
            Self::MissingCrlf => "missing CRLF in chunked body",
            Self::InvalidExtension => "invalid chunk extension",
            Self::ExtensionTooLong => "chunk extension too long",
            Self::InvalidTrailer => "invalid trailer",
            Self::TrailersTooLong => "trailers too long",
            Self::Truncated => "body truncated",
        }
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for BodyError {}

/// A body framing error in a *request* is a 400 `bad_request`; on the upstream side use
/// [`HttpError::into_bad_response`].
impl From<BodyError> for HttpError {
    fn from(e: BodyError) -> Self {
        Self::bad_request(e.as_str())
    }
}
