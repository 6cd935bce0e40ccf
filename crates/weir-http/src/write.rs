//! Writing heads: proxy header rewriting (hop-by-hop removal, extra headers) and complete small
//! responses made by the gateway itself.
//!
//! Framing headers are never copied from the incoming message: `Content-Length` and
//! `Transfer-Encoding` are written from the [`BodyFraming`] the caller will actually send, so
//! the outgoing head always describes the outgoing body.
//!
//! Values written are sanitized: CR, LF and NUL become spaces, so a header value taken from
//! config or a client can never split a message. Fields of a parsed head are the exception
//! that needs no check: httparse refused those bytes in them, so their lines are copied as
//! received (`fuzz_parse` asserts every head written from a parsed one keeps its lines).

use crate::head::{BodyFraming, Headers, RequestHead, ResponseHead, list_elements};

/// Header fields that apply to one connection only (RFC 9110 §7.6.1) and are never forwarded,
/// in addition to those named in `Connection`. `Transfer-Encoding` and `Content-Length` are
/// rewritten from the outgoing framing instead.
pub const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "transfer-encoding",
];

/// Whether `name` is a hop-by-hop header field (see [`HOP_BY_HOP`]).
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// What the writers do with one header field of a parsed head, told from its name alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Hop-by-hop ([`HOP_BY_HOP`]) or `Content-Length`: never copied.
    Dropped,
    /// `Host`: always copied, even when `Connection` names it.
    Host,
    /// `Expect`: dropped from requests (the gateway answers `100-continue` itself).
    Expect,
    /// Anything else: copied unless `Connection` names it or an extra header replaces it.
    Other,
}

/// Whether header `name` of `headers` must not be forwarded: hop-by-hop, named in a
/// `Connection` header, or a framing header. `Host` is never dropped, even when a client lists
/// it in `Connection` (an attempt to make the upstream see a request without its authority).
///
/// The rule in its plain form, quadratic in the header count: the reference that the writers'
/// one-pass form ([`field`], [`Nominated`]) is checked against by `fuzz_parse` and a proptest.
pub(crate) fn dropped(headers: &Headers, name: &str) -> bool {
    is_hop_by_hop(name)
        || name.eq_ignore_ascii_case("content-length")
        || (!name.eq_ignore_ascii_case("host")
            && headers
                .get_all("connection")
                .any(|v| list_elements(v).any(|t| t.eq_ignore_ascii_case(name.as_bytes()))))
}

/// Classify `name` by its length first, so that most names cost one comparison.
fn field(name: &[u8]) -> Field {
    let is = |lower: &str| name.eq_ignore_ascii_case(lower.as_bytes());
    let dropped = match name.len() {
        2 => is("te"),
        4 if is("host") => return Field::Host,
        6 if is("expect") => return Field::Expect,
        7 => is("trailer") || is("upgrade"),
        10 => is("connection") || is("keep-alive"),
        14 => is("content-length"),
        16 => is("proxy-connection"),
        17 => is("transfer-encoding"),
        _ => false,
    };
    if dropped {
        Field::Dropped
    } else {
        Field::Other
    }
}

/// The header names a head's `Connection` fields nominate as hop-by-hop, gathered once per
/// head (not once per header). `keep-alive` is left out: a field of that name is hop-by-hop
/// already. (`close` stays: a field named `Close` listed there is dropped, as the plain rule
/// says.)
struct Nominated<'a> {
    first: [&'a [u8]; 4],
    len: usize,
    /// More than `first` holds: look the rest up in the head again.
    more: Option<&'a Headers>,
}

impl<'a> Nominated<'a> {
    fn of(headers: &'a Headers) -> Self {
        let mut n = Nominated {
            first: [&[]; 4],
            len: 0,
            more: None,
        };
        if !headers.nominates() {
            return n;
        }
        let tokens = headers
            .get_all("connection")
            .flat_map(list_elements)
            .filter(|t| !t.eq_ignore_ascii_case(b"keep-alive"));
        for t in tokens {
            if n.len == n.first.len() {
                n.more = Some(headers);
                break;
            }
            n.first[n.len] = t;
            n.len += 1;
        }
        n
    }

    fn contains(&self, name: &[u8]) -> bool {
        match self.more {
            None => self.first[..self.len]
                .iter()
                .any(|t| t.eq_ignore_ascii_case(name)),
            Some(h) => h
                .get_all("connection")
                .any(|v| list_elements(v).any(|t| t.eq_ignore_ascii_case(name))),
        }
    }
}

/// The `extra` headers of a head being written, with a mask of their name lengths (bit
/// `len % 64`), so that a field whose name is of no extra's length is told apart without a
/// comparison.
struct Extra<'e, 'a> {
    fields: &'e [(&'a str, &'a [u8])],
    lengths: u64,
}

impl<'e, 'a> Extra<'e, 'a> {
    fn new(fields: &'e [(&'a str, &'a [u8])]) -> Self {
        let lengths = fields.iter().fold(0, |m, (n, _)| m | 1 << (n.len() % 64));
        Extra { fields, lengths }
    }

    fn replaces(&self, name: &[u8]) -> bool {
        self.lengths & 1 << (name.len() % 64) != 0
            && self
                .fields
                .iter()
                .any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    }
}

/// Whether a field named `name` of a head whose `Connection` fields nominate `nominated`, and
/// classified `kind`, is left out because it is hop-by-hop or one of `extra` replaces it.
fn skipped(kind: Field, name: &[u8], nominated: &Nominated<'_>, extra: &Extra<'_, '_>) -> bool {
    kind == Field::Dropped
        || (kind != Field::Host && nominated.contains(name))
        || extra.replaces(name)
}

/// Appends the fields of `hs` that `keep` keeps, in order. A field received exactly as
/// `name: value` CRLF is copied as its line, and a run of such lines that lie next to each
/// other in the received head as one piece; any other field is written as `name: value`
/// by [`write_parsed`]. Copying received lines whole is safe for the same reason
/// [`write_parsed`] need not check a name: httparse accepted every byte of them (a name is
/// a token, a value holds no CR, LF or NUL; `fuzz_parse` checks the written heads).
fn write_fields(out: &mut Vec<u8>, hs: &Headers, mut keep: impl FnMut(&[u8]) -> bool) {
    let raw = hs.raw();
    // The run of received lines not yet copied, as a range of `raw`.
    let (mut from, mut to) = (0, 0);
    for [ns, ne, vs, ve] in hs.spans() {
        let name = &raw[ns..ne];
        if !keep(name) {
            continue;
        }
        let exact =
            vs == ne + 2 && raw.get(ne..vs) == Some(b": ") && raw.get(ve..ve + 2) == Some(b"\r\n");
        if exact && ns == to {
            to = ve + 2;
            continue;
        }
        out.extend_from_slice(&raw[from..to]);
        if exact {
            (from, to) = (ns, ve + 2);
        } else {
            (from, to) = (0, 0);
            write_parsed(out, name, &raw[vs..ve]);
        }
    }
    out.extend_from_slice(&raw[from..to]);
}

/// Write the head of `req` for the upstream: `METHOD target HTTP/1.1`, the end-to-end headers
/// in their order (with `Host` kept), then `extra` headers, then the framing header for
/// `framing` (usually `req.framing()`; the body is re-encoded by the caller).
///
/// Dropped: hop-by-hop headers and those named in `Connection`, `Content-Length` /
/// `Transfer-Encoding` (rewritten from `framing`), `Expect` (the gateway answers
/// `100-continue` to the client itself before forwarding), and any header whose name is also
/// in `extra` (so `extra` *replaces*, e.g. `x-request-id`).
pub fn write_request_head(
    req: &RequestHead,
    framing: BodyFraming,
    extra: &[(&str, &[u8])],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(req.method().as_bytes());
    out.push(b' ');
    out.extend_from_slice(req.target().as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let hs = req.headers();
    out.reserve(hs.raw_len() + extra_len(extra) + 32);
    let nominated = Nominated::of(hs);
    let replaced = Extra::new(extra);
    write_fields(out, hs, |name| {
        let kind = field(name);
        kind != Field::Expect && !skipped(kind, name, &nominated, &replaced)
    });
    finish(out, framing, None, extra);
}

/// Write the head of upstream response `resp` for the client: `HTTP/1.1 status reason`, the
/// end-to-end headers, `extra` (replacing same-named ones), and the framing header for
/// `framing`. With `BodyFraming::None` (HEAD, 204, 304) the upstream's `Content-Length` is
/// kept, since it describes the representation rather than this message's body.
///
/// For an HTTP/1.0 client, or when the gateway closes the connection after this response,
/// pass `("connection", b"close")` in `extra`.
pub fn write_response_head(
    resp: &ResponseHead,
    framing: BodyFraming,
    extra: &[(&str, &[u8])],
    out: &mut Vec<u8>,
) {
    push_status(out, resp.status());
    let reason = if resp.reason().is_empty() {
        reason_phrase(resp.status())
    } else {
        resp.reason()
    };
    push_sanitized(out, reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    let hs = resp.headers();
    out.reserve(hs.raw_len() + extra_len(extra) + 32);
    let nominated = Nominated::of(hs);
    let replaced = Extra::new(extra);
    write_fields(out, hs, |name| {
        !skipped(field(name), name, &nominated, &replaced)
    });
    let keep_cl = match framing {
        BodyFraming::None => hs.get("content-length"),
        _ => None,
    };
    finish(out, framing, keep_cl, extra);
}

fn finish(
    out: &mut Vec<u8>,
    framing: BodyFraming,
    keep_cl: Option<&[u8]>,
    extra: &[(&str, &[u8])],
) {
    for (name, value) in extra {
        write_header(out, name, value);
    }
    match framing {
        BodyFraming::ContentLength(n) => {
            out.extend_from_slice(b"content-length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        BodyFraming::None => {
            if let Some(v) = keep_cl {
                write_header(out, "content-length", v);
            }
        }
        BodyFraming::UntilClose => {}
    }
    out.extend_from_slice(b"\r\n");
}

/// What the `Connection` header of a response the gateway makes itself says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// No `Connection` header: an HTTP/1.1 connection that stays open.
    KeepAlive,
    /// `connection: keep-alive`: an HTTP/1.0 client's connection that stays open.
    KeepAlive10,
    /// `connection: close`: the connection closes after this response.
    Close,
}

impl Persistence {
    /// For a connection that stays open (`keep`) or not, to an HTTP/1.0 client or not.
    pub const fn new(keep: bool, http10: bool) -> Self {
        match (keep, http10) {
            (false, _) => Self::Close,
            (true, true) => Self::KeepAlive10,
            (true, false) => Self::KeepAlive,
        }
    }
}

/// Append a complete response made by the gateway (a rejection, a fallback, an admin answer):
/// status line with the standard reason phrase, `headers` in order, the `Connection` header of
/// `conn`, `content-length`, then `body` — left out when `head_only` (a response to `HEAD`;
/// the length still describes the body). Every frontend writes the engine's own responses
/// with this; the headers come as the engine holds them (`&[(&str, String)]`) or as byte
/// pairs, without being collected first.
pub fn write_response_with<'h, N, V, I>(
    out: &mut Vec<u8>,
    status: u16,
    headers: I,
    conn: Persistence,
    body: &[u8],
    head_only: bool,
) where
    N: AsRef<str> + 'h,
    V: AsRef<[u8]> + 'h,
    I: IntoIterator<Item = &'h (N, V)>,
    I::IntoIter: Clone,
{
    let headers = headers.into_iter();
    // Room for all of it at once ("HTTP/1.1 NNN " + reason + CRLF, each `name: value` +
    // CRLF, connection, content-length, blank line, body), so no write below grows `out`.
    let fields: usize = headers
        .clone()
        .map(|(n, v)| n.as_ref().len() + v.as_ref().len() + 4)
        .sum();
    out.reserve(128 + fields + if head_only { 0 } else { body.len() });
    push_status(out, status);
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        put_header(out, name.as_ref(), value.as_ref());
    }
    match conn {
        Persistence::KeepAlive => {}
        Persistence::KeepAlive10 => out.extend_from_slice(b"connection: keep-alive\r\n"),
        Persistence::Close => out.extend_from_slice(b"connection: close\r\n"),
    }
    out.extend_from_slice(b"content-length: ");
    push_u64(out, body.len() as u64);
    out.extend_from_slice(b"\r\n\r\n");
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// Append a complete response: [`write_response_with`] without a `Connection` header.
pub fn write_response(out: &mut Vec<u8>, status: u16, headers: &[(&str, &[u8])], body: &[u8]) {
    write_response_with(out, status, headers, Persistence::KeepAlive, body, false);
}

/// [`write_response`] into a new buffer.
pub fn build_response(status: u16, headers: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    write_response(&mut out, status, headers, body);
    out
}

/// Append `name: value\r\n`, with CR/LF/NUL in the value (and anything but token characters
/// in the name) replaced so the line cannot be split.
pub fn write_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    put_header(out, name, value);
}

/// [`write_header`] into room already reserved (what [`write_response_with`] does once for
/// all its fields).
fn put_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    let name = name.as_bytes();
    if is_plain_name(name) {
        out.extend_from_slice(name);
    } else {
        out.extend(name.iter().map(|&b| {
            if b.is_ascii_graphic() && b != b':' {
                b
            } else {
                b'_'
            }
        }));
    }
    out.extend_from_slice(b": ");
    push_sanitized(out, value);
    out.extend_from_slice(b"\r\n");
}

/// [`write_header`] for a field of a parsed head: its name is a token already (httparse
/// checked every byte), so it is copied whole; the value is still sanitised.
fn write_parsed(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    push_sanitized(out, value);
    out.extend_from_slice(b"\r\n");
}

/// Bytes the `extra` headers take on the wire.
fn extra_len(extra: &[(&str, &[u8])]) -> usize {
    extra.iter().map(|(n, v)| n.len() + v.len() + 4).sum()
}

/// Values up to this long are checked for CR/LF/NUL eight bytes at a time, longer ones by
/// `memchr3`.
const SHORT_VALUE: usize = 64;

/// `0x01` in every byte of a word (for the byte tests below, Bit Twiddling Hacks'
/// "determine if a word has a byte less than n / equal to n").
const ONES: u64 = u64::MAX / 255;
/// `0x80` in every byte.
const HIGHS: u64 = ONES * 0x80;

/// High bit set in some byte (not necessarily the right one) iff a byte of `x` is below
/// `n` (`n` ≤ 128).
fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS
}

/// Nonzero iff some byte of `x` equals `b`.
fn equal(x: u64, b: u8) -> u64 {
    below(x ^ (ONES * u64::from(b)), 1)
}

/// Nonzero iff some byte of `x` is above `n` (`n` ≤ 127).
fn above(x: u64, n: u8) -> u64 {
    (x.wrapping_add(ONES * u64::from(127 - n)) | x) & HIGHS
}

/// ORs `test` over the words of `v`: header names and values are short, and for them
/// per-byte loops and `memchr`'s set-up cost more than the work (~100 instructions a value,
/// ~4 a byte of name, in the gateway's profile). The tests are "does any byte ...", so a
/// byte may be tested twice: a tail is tested as the last eight bytes (overlapping the word
/// before), and fewer than eight bytes as two overlapping halves padded with `b'a'`, which
/// no test here flags — loads of a fixed size, where copying a tail of any length into a
/// padded word was a `memcpy` call per name and per value.
fn any_word(v: &[u8], test: impl Fn(u64) -> u64) -> bool {
    /// `b'a'` in every byte.
    const PAD: u64 = ONES * 0x61;
    let n = v.len();
    let x = match v {
        [] => return false,
        [b] => (PAD << 8) | u64::from(*b),
        [a, .., b] if n < 4 => {
            (PAD << 32)
                | u64::from(u16::from_le_bytes([*a, v[1]]))
                | (u64::from(u16::from_le_bytes([v[n - 2], *b])) << 16)
        }
        _ if n < 8 => u64::from(u32_at(v, 0)) | (u64::from(u32_at(v, n - 4)) << 32),
        _ => {
            let mut words = v.chunks_exact(8);
            let mut hit = 0;
            for w in &mut words {
                hit |= test(u64_at(w, 0));
            }
            if !words.remainder().is_empty() {
                hit |= test(u64_at(v, n - 8));
            }
            return hit != 0;
        }
    };
    test(x) != 0
}

/// The four bytes of `v` from `at` (little-endian); `v` holds them.
fn u32_at(v: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&v[at..at + 4]);
    u32::from_le_bytes(b)
}

/// The eight bytes of `v` from `at` (little-endian); `v` holds them.
fn u64_at(v: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Whether `v` holds a CR, LF or NUL.
fn needs_sanitizing(v: &[u8]) -> bool {
    if v.len() <= SHORT_VALUE {
        any_word(v, |x| equal(x, b'\r') | equal(x, b'\n') | equal(x, 0))
    } else {
        memchr::memchr3(b'\r', b'\n', 0, v).is_some()
    }
}

/// Whether `name` is all visible ASCII other than `:` (what [`write_header`] copies as is).
fn is_plain_name(name: &[u8]) -> bool {
    !any_word(name, |x| below(x, 0x21) | above(x, 0x7e) | equal(x, b':'))
}

fn push_sanitized(out: &mut Vec<u8>, v: &[u8]) {
    if needs_sanitizing(v) {
        out.extend(v.iter().map(|&b| {
            if matches!(b, b'\r' | b'\n' | 0) {
                b' '
            } else {
                b
            }
        }));
    } else {
        out.extend_from_slice(v);
    }
}

/// Appends `HTTP/1.1 NNN ` (the status line up to its reason): a three-digit status, as
/// every status is, in one copy of a fixed size.
fn push_status(out: &mut Vec<u8>, status: u16) {
    match u8::try_from(status / 100) {
        Ok(h @ 1..=9) => {
            let [t, u] = [(status / 10 % 10) as u8, (status % 10) as u8];
            out.extend_from_slice(&[
                b'H',
                b'T',
                b'T',
                b'P',
                b'/',
                b'1',
                b'.',
                b'1',
                b' ',
                b'0' + h,
                b'0' + t,
                b'0' + u,
                b' ',
            ]);
        }
        _ => {
            out.extend_from_slice(b"HTTP/1.1 ");
            push_u64(out, u64::from(status));
            out.push(b' ');
        }
    }
}

/// Append the decimal digits of `n` (`itoa`: two digits per step from a table, on the
/// stack, then one copy; growing `out` by `resize` and filling it in place cost three
/// times as much for a `content-length`).
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The standard reason phrase of `status` (`""` for unknown codes).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod word_tests {
    use proptest::prelude::*;

    #[test]
    fn status_lines_for_every_status() {
        for status in [0u16, 7, 99, 100, 200, 429, 599, 999, 1000, u16::MAX] {
            let mut out = b"x".to_vec();
            super::push_status(&mut out, status);
            assert_eq!(out, format!("xHTTP/1.1 {status} ").into_bytes());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// The word-at-a-time tests agree with the byte-at-a-time rules, at every length
        /// and for bytes around each boundary.
        #[test]
        fn word_tests_match_byte_rules(
            v in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b'\r'), Just(b'\n'), Just(0u8), Just(b':'),
                            Just(0x20u8), Just(0x21u8), Just(0x7eu8), Just(0x7fu8), Just(0x80u8)],
                0..80,
            ),
            fill in 0usize..80,
        ) {
            // Mostly clean bytes with the drawn ones mixed in, so both answers occur.
            let mut v2 = vec![b'x'; fill];
            v2.extend(&v[..v.len().min(2)]);
            // One drawn byte at any place of a short clean run: the overlapping loads of
            // a tail and of a value under eight bytes must each see it.
            let mut v3 = vec![b'x'; fill % 12];
            v3.insert(fill % (v3.len() + 1), v.first().copied().unwrap_or(b'\r'));
            for v in [v, v2, v3] {
                prop_assert_eq!(
                    super::needs_sanitizing(&v),
                    v.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
                );
                prop_assert_eq!(
                    super::is_plain_name(&v),
                    v.iter().all(|&b| b.is_ascii_graphic() && b != b':')
                );
            }
        }
    }
}
