//! Request and response heads: `httparse` tokenizes, this module adds the strictness checks and
//! derives the message framing.
//!
//! A parsed head owns one copy of the head bytes (`Vec<u8>`) and a `Vec` of offset ranges into
//! it — two allocations per head whatever the number of headers, and none at all when a head is
//! re-parsed into an existing value with [`parse_request_into`] / [`parse_response_into`].
//! Header names keep their original spelling and order; lookups are ASCII case-insensitive.

use core::mem::MaybeUninit;
use core::ops::Range;

use crate::error::HttpError;

/// Most header lines a head may have (the size of the stack array handed to `httparse`).
pub const MAX_HEADERS: usize = 128;

/// Default longest request line (method, target and version, without CRLF): 8 KiB.
pub const DEFAULT_MAX_REQUEST_LINE: usize = 8 * 1024;

/// Default largest request head (`[server] max_header_bytes`).
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 * 1024;

/// Limits applied while parsing a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A head (request line + headers + final CRLF) longer than this is 431.
    pub max_head_bytes: usize,
    /// A request line longer than this (without its CRLF) is 414.
    pub max_request_line: usize,
    /// More header lines than this (capped at [`MAX_HEADERS`]) is 431.
    pub max_headers: usize,
    /// An HTTP/1.1 request without `Host` is 400 (RFC 9112 §3.2). On by default.
    pub require_host: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_request_line: DEFAULT_MAX_REQUEST_LINE,
            max_headers: 100,
            require_host: true,
        }
    }
}

impl Limits {
    /// Default limits with `max_head_bytes` from the config.
    pub fn with_max_head_bytes(max_head_bytes: usize) -> Self {
        Self {
            max_head_bytes,
            ..Self::default()
        }
    }
}

/// The outcome of a head parse that did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// The head is not complete yet: read more bytes and parse again from the start.
    Partial,
    /// A complete head and its length in bytes; the body (or next message) starts there.
    Complete(T, usize),
}

/// HTTP version of a message: only 1.0 and 1.1 are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `HTTP/1.0`
    Http10,
    /// `HTTP/1.1`
    Http11,
}

impl Version {
    /// `"HTTP/1.0"` or `"HTTP/1.1"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
        }
    }
}

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyFraming {
    /// No body (no framing headers on a request; HEAD, 1xx, 204 and 304 responses).
    None,
    /// Exactly this many bytes follow the head.
    ContentLength(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Responses only: no `Content-Length` and no `Transfer-Encoding`, so the body runs until
    /// the upstream closes the connection (which therefore cannot be reused).
    UntilClose,
}

impl BodyFraming {
    /// Whether a body (possibly empty) follows the head.
    pub const fn has_body(self) -> bool {
        !matches!(self, Self::None | Self::ContentLength(0))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
    /// The range of `part` inside `base`. Offsets fit in u32 because the parse window is
    /// truncated to `max_head_bytes <= u32::MAX`. An empty `part` (httparse may hand out a
    /// static `""`, e.g. for a missing reason phrase) is `0..0`.
    fn of(base: &[u8], part: &[u8]) -> Self {
        let start = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
        if part.is_empty() || start > base.len() || base.len() - start < part.len() {
            return Self::default();
        }
        Self {
            start: start as u32,
            end: (start + part.len()) as u32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    name: Span,
    value: Span,
}

/// The header lines of a head, in their original order and spelling, stored as ranges into one
/// byte buffer. Lookups by name are ASCII case-insensitive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    raw: Vec<u8>,
    entries: Vec<Entry>,
    /// Some `Connection` field lists an element other than `keep-alive`, i.e. nominates a
    /// field as hop-by-hop (`close` included: a field named `Close` would be dropped). Found
    /// while parsing, so the writers look for nominations only in the heads that have them.
    nominates: bool,
}

impl Headers {
    /// Number of header lines.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no header lines.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `(name, value)` pairs in order; names as sent, values without surrounding whitespace.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.entries
            .iter()
            .map(|e| (self.str_at(e.name), &self.raw[e.value.range()]))
    }

    /// Bytes of the head these headers were parsed from (an upper bound of their size).
    pub(crate) fn raw_len(&self) -> usize {
        self.raw.len()
    }

    /// The first value of header `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|e| self.raw[e.name.range()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|e| &self.raw[e.value.range()])
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub fn get_all<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.entries
            .iter()
            .filter(move |e| self.raw[e.name.range()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|e| &self.raw[e.value.range()])
    }

    /// Whether header `name` is present (case-insensitive).
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Whether `token` appears (case-insensitive) in the comma-separated values of `name`,
    /// e.g. `has_token("connection", "close")`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.get_all(name).any(|v| list_has(v, token.as_bytes()))
    }

    fn str_at(&self, s: Span) -> &str {
        // Reasons and names were validated by httparse (tokens / UTF-8).
        core::str::from_utf8(&self.raw[s.range()]).unwrap_or("")
    }

    fn bytes_at(&self, s: Span) -> &[u8] {
        &self.raw[s.range()]
    }

    /// Whether a `Connection` field nominates anything but `keep-alive` (see the field).
    pub(crate) fn nominates(&self) -> bool {
        self.nominates
    }

    /// The fields as offsets into [`Self::raw`]: name start, name end, value start, value
    /// end. An empty value is `0..0`.
    pub(crate) fn spans(&self) -> impl Iterator<Item = [usize; 4]> + '_ {
        self.entries.iter().map(|e| {
            [
                e.name.start as usize,
                e.name.end as usize,
                e.value.start as usize,
                e.value.end as usize,
            ]
        })
    }

    /// The head these headers were parsed from, as received (line endings checked).
    pub(crate) fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Replace the contents with a copy of `head` and the header ranges of `parsed`;
    /// `nominates` as found by [`derive`].
    fn fill(&mut self, head: &[u8], parsed: &[httparse::Header<'_>], nominates: bool) {
        self.nominates = nominates;
        self.raw.clear();
        self.raw.extend_from_slice(head);
        self.entries.clear();
        self.entries.extend(parsed.iter().map(|h| Entry {
            name: Span::of(head, h.name.as_bytes()),
            value: Span::of(head, h.value),
        }));
    }
}

/// Iterate the comma-separated elements of a header value, trimmed of spaces and tabs,
/// skipping empty elements (RFC 9110 §5.6.1).
pub(crate) fn list_elements(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

fn list_has(v: &[u8], token: &[u8]) -> bool {
    list_elements(v).any(|e| e.eq_ignore_ascii_case(token))
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// The accessors request and response heads share.
macro_rules! head_accessors {
    () => {
        /// HTTP/1.0 or HTTP/1.1.
        pub fn version(&self) -> Version {
            self.version
        }

        /// All header lines.
        pub fn headers(&self) -> &Headers {
            &self.headers
        }

        /// First value of header `name` (case-insensitive).
        pub fn header(&self, name: &str) -> Option<&[u8]> {
            self.headers.get(name)
        }
    };
}

/// A parsed request head. See the crate docs for the rules it enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    headers: Headers,
    /// The method followed by the target, copied as text when parsed (httparse hands them
    /// over as `&str`): the accessors, called several times per request, then slice it
    /// instead of checking the raw head's bytes for UTF-8 on every call.
    line: String,
    /// Where the method ends in [`Self::line`].
    method_len: usize,
    version: Version,
    framing: BodyFraming,
    keep_alive: bool,
    expect_continue: bool,
    host: Option<Span>,
}

impl Default for RequestHead {
    fn default() -> Self {
        Self {
            headers: Headers::default(),
            line: String::new(),
            method_len: 0,
            version: Version::Http11,
            framing: BodyFraming::None,
            keep_alive: false,
            expect_continue: false,
            host: None,
        }
    }
}

impl RequestHead {
    /// The method as sent (methods are case-sensitive: `GET`, not `get`).
    pub fn method(&self) -> &str {
        self.line.get(..self.method_len).unwrap_or("")
    }

    /// Whether the method is `HEAD` (its response never has a body).
    pub fn is_head(&self) -> bool {
        self.method() == "HEAD"
    }

    /// The request target as sent: path and query (`/orders?id=1`).
    pub fn target(&self) -> &str {
        self.line.get(self.method_len..).unwrap_or("")
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        let t = self.target();
        t.split_once('?').map_or(t, |(p, _)| p)
    }

    /// The query string (after `?`), if any.
    pub fn query(&self) -> Option<&str> {
        self.target().split_once('?').map(|(_, q)| q)
    }

    head_accessors!();

    /// How the request body is delimited: [`BodyFraming::None`], `ContentLength` or `Chunked`
    /// (never `UntilClose`).
    pub fn framing(&self) -> BodyFraming {
        self.framing
    }

    /// Whether the client wants the connection kept open after this exchange: HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// Whether the request carries `Expect: 100-continue`.
    pub fn expect_continue(&self) -> bool {
        self.expect_continue
    }

    /// The `Host` header value (there is at most one).
    pub fn host(&self) -> Option<&[u8]> {
        self.host.map(|s| self.headers.bytes_at(s))
    }
}

/// A parsed response head (upstream side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    headers: Headers,
    status: u16,
    reason: Span,
    version: Version,
    framing: BodyFraming,
    keep_alive: bool,
}

impl Default for ResponseHead {
    fn default() -> Self {
        Self {
            headers: Headers::default(),
            status: 0,
            reason: Span::default(),
            version: Version::Http11,
            framing: BodyFraming::None,
            keep_alive: false,
        }
    }
}

impl ResponseHead {
    /// Status code, 100..=599.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Reason phrase as sent (may be empty).
    pub fn reason(&self) -> &str {
        self.headers.str_at(self.reason)
    }

    head_accessors!();

    /// How the body is delimited, given the request method the parse was told about.
    pub fn framing(&self) -> BodyFraming {
        self.framing
    }

    /// Whether this is an interim (1xx) response; another head follows it.
    pub fn is_informational(&self) -> bool {
        (100..200).contains(&self.status)
    }

    /// Whether the upstream connection may be reused after this response's body: no
    /// `Connection: close`, HTTP/1.1 (or 1.0 with `keep-alive`), and not close-delimited.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
}

/// Parse a request head from the start of `buf`.
///
/// `Ok(Parsed::Partial)` means "read more and call again with the longer buffer"; it already
/// fails with 431 once `buf` holds `max_head_bytes` without a complete head, and with 414 once
/// the request line is known to be too long.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Parsed<RequestHead>, HttpError> {
    let mut head = RequestHead::default();
    Ok(match parse_request_into(&mut head, buf, limits)? {
        Some(len) => Parsed::Complete(head, len),
        None => Parsed::Partial,
    })
}

/// Like [`parse_request`], but reuses `head`'s allocations (a connection keeps one
/// `RequestHead`). Returns `Some(head_len)` when complete; `head` is only meaningful then.
pub fn parse_request_into(
    head: &mut RequestHead,
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<usize>, HttpError> {
    checked_request(buf, limits, |c| {
        head.headers.fill(c.raw, c.headers, c.derived.nominates);
        head.line.clear();
        head.line.push_str(c.method);
        head.line.push_str(c.target);
        head.method_len = c.method.len();
        head.version = c.version;
        head.framing = c.framing;
        head.keep_alive = c.derived.keep_alive(c.version);
        head.expect_continue = c.derived.expect_continue;
        head.host = c.derived.host.map(|h| Span::of(c.raw, h));
        c.len
    })
}

/// Every check of [`parse_request`], without keeping the head: `Some((head_len, framing))`
/// when `buf` starts with a complete, valid request head. For a frontend that hands the
/// bytes on to a parser of its own once weir has judged them (weir-pingora's front door),
/// so the head is not copied into a [`RequestHead`] it would never read.
pub fn check_request(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(usize, BodyFraming)>, HttpError> {
    checked_request(buf, limits, |c| (c.len, c.framing))
}

/// A complete request head that passed every check, before anything is copied.
struct CheckedRequest<'b, 'h> {
    len: usize,
    raw: &'b [u8],
    method: &'b str,
    target: &'b str,
    version: Version,
    framing: BodyFraming,
    derived: Derived<'b>,
    headers: &'h [httparse::Header<'b>],
}

/// The request checks shared by [`parse_request_into`] and [`check_request`]; `done` takes
/// the checked head (its borrows end with the call).
fn checked_request<R>(
    buf: &[u8],
    limits: &Limits,
    done: impl FnOnce(CheckedRequest<'_, '_>) -> R,
) -> Result<Option<R>, HttpError> {
    let max_head = limits.max_head_bytes.min(u32::MAX as usize);
    let window = &buf[..buf.len().min(max_head)];
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let n_slots = limits.max_headers.min(MAX_HEADERS);
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(window, &mut slots[..n_slots]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            if buf.len() > limits.max_request_line
                && request_line_len(buf) > limits.max_request_line
            {
                return Err(HttpError::new(
                    crate::ErrorKind::UriTooLong,
                    "request line too long",
                ));
            }
            if buf.len() >= max_head {
                return Err(HttpError::new(
                    crate::ErrorKind::HeadersTooLarge,
                    "request head too large",
                ));
            }
            return Ok(None);
        }
        Err(e) => return Err(map_request_error(e, buf, limits)),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HttpError::bad_request("incomplete request line"));
    };
    let line_len = method.len() + 1 + target.len() + 1 + 8;
    if line_len > limits.max_request_line {
        return Err(HttpError::new(
            crate::ErrorKind::UriTooLong,
            "request line too long",
        ));
    }
    let bad = HttpError::bad_request;
    let (raw, version, derived) = checked_head(&window[..len], minor, req.headers, bad)?;
    let framing = derived.framing(
        version,
        BodyFraming::None,
        bad,
        "transfer-encoding in an HTTP/1.0 request",
    )?;
    if derived.host.is_none() && version == Version::Http11 && limits.require_host {
        return Err(HttpError::bad_request("missing host"));
    }
    Ok(Some(done(CheckedRequest {
        len,
        raw,
        method,
        target,
        version,
        framing,
        derived,
        headers: req.headers,
    })))
}

/// Parse a response head from the start of `buf`. `request_was_head` tells whether the request
/// was `HEAD` (then the response has no body whatever its headers say). Interim 1xx responses
/// parse like any other ([`ResponseHead::is_informational`]); the caller skips them.
pub fn parse_response(
    buf: &[u8],
    max_head_bytes: usize,
    request_was_head: bool,
) -> Result<Parsed<ResponseHead>, HttpError> {
    let mut head = ResponseHead::default();
    Ok(
        match parse_response_into(&mut head, buf, max_head_bytes, request_was_head)? {
            Some(len) => Parsed::Complete(head, len),
            None => Parsed::Partial,
        },
    )
}

/// Like [`parse_response`], reusing `head`'s allocations.
pub fn parse_response_into(
    head: &mut ResponseHead,
    buf: &[u8],
    max_head_bytes: usize,
    request_was_head: bool,
) -> Result<Option<usize>, HttpError> {
    let max_head = max_head_bytes.min(u32::MAX as usize);
    let window = &buf[..buf.len().min(max_head)];
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut resp, window, &mut slots)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= max_head => {
            return Err(HttpError::bad_response("response head too large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::bad_response("too many response headers"));
        }
        Err(httparse::Error::Version) => {
            return Err(HttpError::bad_response("invalid response version"));
        }
        Err(httparse::Error::Status) => return Err(HttpError::bad_response("invalid status line")),
        Err(_) => return Err(HttpError::bad_response("invalid response header")),
    };
    let (Some(minor), Some(status), Some(reason)) = (resp.version, resp.code, resp.reason) else {
        return Err(HttpError::bad_response("incomplete status line"));
    };
    if !(100..=599).contains(&status) {
        return Err(HttpError::bad_response("status code out of range"));
    }
    let bad = HttpError::bad_response;
    let (raw, version, d) = checked_head(&window[..len], minor, resp.headers, bad)?;
    let bodyless =
        request_was_head || (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if bodyless {
        BodyFraming::None
    } else {
        d.framing(
            version,
            BodyFraming::UntilClose,
            bad,
            "transfer-encoding in an HTTP/1.0 response",
        )?
    };
    head.headers.fill(raw, resp.headers, d.nominates);
    head.status = status;
    head.reason = Span::of(raw, reason.as_bytes());
    head.version = version;
    head.framing = framing;
    head.keep_alive = framing != BodyFraming::UntilClose && d.keep_alive(version);
    Ok(Some(len))
}

/// `buf` from its first byte that is not CR or LF (a request may start with empty lines).
fn after_empty_lines(buf: &[u8]) -> &[u8] {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    &buf[start..]
}

/// Length of the request line (after optional leading empty lines, without CR/LF) or of the
/// bytes of it received so far.
fn request_line_len(buf: &[u8]) -> usize {
    let line = after_empty_lines(buf);
    match line.iter().position(|&b| b == b'\n') {
        Some(i) => i.saturating_sub(usize::from(i > 0 && line[i - 1] == b'\r')),
        None => line.len() - usize::from(line.last() == Some(&b'\r')),
    }
}

/// httparse accepts a bare LF as a line ending; weir does not (a bare LF inside what one parser
/// sees as a header value is a line break to another — a classic smuggling vector).
pub(crate) fn check_line_endings(head: &[u8]) -> Result<(), &'static str> {
    // Branch-free over 32-byte blocks so it vectorizes: a few dozen instructions per head.
    let bare_lf = |cur: &[u8], prev: &[u8]| {
        cur.iter().zip(prev).fold(0u8, |acc, (&b, &p)| {
            acc | (u8::from(b == b'\n') & u8::from(p != b'\r'))
        })
    };
    let (Some(&first), Some(rest)) = (head.first(), head.get(1..)) else {
        return Ok(());
    };
    let mut bad = u8::from(first == b'\n');
    let mut cur = rest.chunks_exact(32);
    let mut prev = head.chunks_exact(32);
    for (c, p) in (&mut cur).zip(&mut prev) {
        bad |= bare_lf(c, p);
    }
    let tail = cur.remainder();
    bad |= bare_lf(tail, &head[head.len() - 1 - tail.len()..]);
    if bad != 0 {
        Err("bare LF in head")
    } else {
        Ok(())
    }
}

fn map_request_error(e: httparse::Error, buf: &[u8], limits: &Limits) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => {
            HttpError::new(crate::ErrorKind::HeadersTooLarge, "too many header lines")
        }
        httparse::Error::Version if looks_like_http_version(buf) => HttpError::new(
            crate::ErrorKind::VersionNotSupported,
            "unsupported HTTP version",
        ),
        httparse::Error::Version => HttpError::bad_request("invalid HTTP version"),
        _ if request_line_len(buf) > limits.max_request_line => {
            HttpError::new(crate::ErrorKind::UriTooLong, "request line too long")
        }
        httparse::Error::HeaderName => HttpError::bad_request("invalid header name"),
        httparse::Error::HeaderValue => HttpError::bad_request("invalid header value"),
        httparse::Error::NewLine => HttpError::bad_request("invalid line ending"),
        _ => HttpError::bad_request("malformed request line"),
    }
}

/// Whether the request line's third element is a syntactically valid `HTTP/DIGIT[.DIGIT]`
/// (then an unsupported version is 505, anything else 400).
fn looks_like_http_version(buf: &[u8]) -> bool {
    let line = after_empty_lines(buf);
    let line = &line[..line
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(line.len())];
    let mut parts = line.split(|&b| b == b' ');
    let (Some(_), Some(_), Some(v), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some(rest) = v.strip_prefix(b"HTTP/") else {
        return false;
    };
    let (major, minor) = match rest.iter().position(|&b| b == b'.') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let digits = |d: &[u8]| !d.is_empty() && d.len() <= 3 && d.iter().all(u8::is_ascii_digit);
    digits(major) && minor.is_none_or(digits)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Te {
    Absent,
    Chunked,
}

struct Derived<'b> {
    content_length: Option<u64>,
    te: Te,
    conn_close: bool,
    conn_keep_alive: bool,
    /// A `Connection` element other than `keep-alive` (see [`Headers::nominates`]).
    nominates: bool,
    expect_continue: bool,
    host: Option<&'b [u8]>,
}

/// What both head parsers check once httparse has read a head `raw` of HTTP/1.`minor`:
/// its line endings and its headers, errors built by `bad` (request or response).
#[inline(always)]
fn checked_head<'b>(
    raw: &'b [u8],
    minor: u8,
    headers: &[httparse::Header<'b>],
    bad: fn(&'static str) -> HttpError,
) -> Result<(&'b [u8], Version, Derived<'b>), HttpError> {
    check_line_endings(raw).map_err(bad)?;
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    Ok((raw, version, derive(headers).map_err(bad)?))
}

impl Derived<'_> {
    /// The body framing the headers give: `absent` without framing headers; chunked
    /// framing in HTTP/1.0 is the error `bad(http10_chunked)`.
    #[inline(always)]
    fn framing(
        &self,
        version: Version,
        absent: BodyFraming,
        bad: fn(&'static str) -> HttpError,
        http10_chunked: &'static str,
    ) -> Result<BodyFraming, HttpError> {
        Ok(match (self.te, self.content_length) {
            (Te::Chunked, _) if version == Version::Http10 => return Err(bad(http10_chunked)),
            (Te::Chunked, _) => BodyFraming::Chunked,
            (Te::Absent, Some(n)) => BodyFraming::ContentLength(n),
            (Te::Absent, None) => absent,
        })
    }

    /// Whether the connection stays open after this message, by its version's default.
    #[inline(always)]
    fn keep_alive(&self, version: Version) -> bool {
        match version {
            Version::Http11 => !self.conn_close,
            Version::Http10 => self.conn_keep_alive && !self.conn_close,
        }
    }
}

/// One pass over the headers: framing, connection options, expectations, host.
fn derive<'b>(headers: &[httparse::Header<'b>]) -> Result<Derived<'b>, &'static str> {
    let mut d = Derived {
        content_length: None,
        te: Te::Absent,
        conn_close: false,
        conn_keep_alive: false,
        nominates: false,
        expect_continue: false,
        host: None,
    };
    let mut te_seen = false;
    for h in headers {
        let name = h.name.as_bytes();
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                if d.host.is_some() {
                    return Err("duplicate host");
                }
                d.host = Some(h.value);
            }
            6 if name.eq_ignore_ascii_case(b"expect")
                && h.value.eq_ignore_ascii_case(b"100-continue") =>
            {
                d.expect_continue = true;
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for t in list_elements(h.value) {
                    if t.eq_ignore_ascii_case(b"keep-alive") {
                        d.conn_keep_alive = true;
                    } else {
                        d.nominates = true;
                        if t.eq_ignore_ascii_case(b"close") {
                            d.conn_close = true;
                        }
                    }
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let mut any = false;
                for part in h.value.split(|&b| b == b',') {
                    let n = parse_content_length(trim_ows(part))?;
                    any = true;
                    match d.content_length {
                        Some(prev) if prev != n => return Err("differing content-length values"),
                        _ => d.content_length = Some(n),
                    }
                }
                if !any {
                    return Err("empty content-length");
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                te_seen = true;
                for coding in h.value.split(|&b| b == b',') {
                    let coding = trim_ows(coding);
                    if !coding.eq_ignore_ascii_case(b"chunked") {
                        return Err("unsupported transfer-encoding");
                    }
                    if d.te == Te::Chunked {
                        return Err("chunked applied more than once");
                    }
                    d.te = Te::Chunked;
                }
            }
            _ => {}
        }
    }
    if te_seen && d.te != Te::Chunked {
        return Err("empty transfer-encoding");
    }
    if te_seen && d.content_length.is_some() {
        return Err("content-length with transfer-encoding");
    }
    Ok(d)
}

/// `1*DIGIT`, no sign, no whitespace inside, must fit in u64.
fn parse_content_length(v: &[u8]) -> Result<u64, &'static str> {
    if v.is_empty() {
        return Err("invalid content-length");
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return Err("invalid content-length");
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or("content-length overflow")?;
    }
    Ok(n)
}
