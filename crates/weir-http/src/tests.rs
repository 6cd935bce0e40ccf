//! Unit and property tests: every malformed rule, every status, framing round-trips.

use proptest::prelude::*;

use super::*;

fn lim() -> Limits {
    Limits::default()
}

/// Parses `s`, and checks on the way that [`check_request`] (the in-place variant
/// weir-pingora's front door uses) gives every head the same verdict: same length and
/// framing, same partial, same error.
fn req(s: &[u8]) -> Result<Parsed<RequestHead>, HttpError> {
    let parsed = parse_request(s, &lim());
    let checked = check_request(s, &lim());
    let agree = match (&parsed, &checked) {
        (Ok(Parsed::Complete(h, n)), Ok(Some((m, f)))) => n == m && h.framing() == *f,
        (Ok(Parsed::Partial), Ok(None)) => true,
        (Err(a), Err(b)) => {
            (a.status(), a.reason(), a.to_string()) == (b.status(), b.reason(), b.to_string())
        }
        _ => false,
    };
    assert!(
        agree,
        "check_request disagrees for {:?}: {checked:?}",
        String::from_utf8_lossy(s)
    );
    parsed
}

fn ok(s: &[u8]) -> (RequestHead, usize) {
    match req(s) {
        Ok(Parsed::Complete(h, n)) => (h, n),
        other => panic!(
            "expected a complete head for {:?}: {other:?}",
            String::from_utf8_lossy(s)
        ),
    }
}

fn err(s: &[u8]) -> HttpError {
    match req(s) {
        Err(e) => e,
        other => panic!(
            "expected an error for {:?}: {other:?}",
            String::from_utf8_lossy(s)
        ),
    }
}

fn bad(s: &[u8]) {
    let e = err(s);
    assert_eq!(
        (e.status(), e.reason()),
        (400, "bad_request"),
        "{e} for {:?}",
        String::from_utf8_lossy(s)
    );
}

/// A typical browser-like request head (313 bytes, CRLF line endings), shared by the tests
/// and `examples/parse_speed.rs`.
const TYPICAL: &[u8] = include_bytes!("../examples/typical_head.http");

#[test]
fn parses_typical_request() {
    let (h, n) = ok(TYPICAL);
    assert_eq!(n, TYPICAL.len());
    assert_eq!(h.method(), "GET");
    assert_eq!(h.target(), "/api/v1/orders?id=42&expand=items");
    assert_eq!(h.path(), "/api/v1/orders");
    assert_eq!(h.query(), Some("id=42&expand=items"));
    assert_eq!(h.version(), Version::Http11);
    assert_eq!(h.host(), Some(&b"api.example.com"[..]));
    assert_eq!(h.header("x-consumer-id"), Some(&b"team-blue-42"[..]));
    assert_eq!(h.header("X-CONSUMER-ID"), Some(&b"team-blue-42"[..]));
    assert_eq!(h.framing(), BodyFraming::None);
    assert!(h.keep_alive());
    assert!(!h.expect_continue());
    assert!(!h.is_head());
    let names: Vec<_> = h.headers().iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "Host");
    assert_eq!(names[6], "Connection");
    assert_eq!(h.headers().len(), 7);
}

#[test]
fn partial_at_every_prefix() {
    for i in 0..TYPICAL.len() {
        assert_eq!(req(&TYPICAL[..i]), Ok(Parsed::Partial), "prefix {i}");
    }
}

#[test]
fn body_starts_after_head() {
    let buf = b"POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello GET";
    let (h, n) = ok(buf);
    assert_eq!(h.framing(), BodyFraming::ContentLength(5));
    assert_eq!(&buf[n..], b"hello GET");
}

#[test]
fn reuse_parse_into() {
    let mut h = RequestHead::default();
    assert_eq!(
        parse_request_into(&mut h, TYPICAL, &lim()),
        Ok(Some(TYPICAL.len()))
    );
    let second = b"DELETE /x HTTP/1.0\r\nHost: b\r\n\r\n";
    assert_eq!(
        parse_request_into(&mut h, second, &lim()),
        Ok(Some(second.len()))
    );
    assert_eq!(
        (h.method(), h.target(), h.version()),
        ("DELETE", "/x", Version::Http10)
    );
    assert_eq!(h.headers().len(), 1);
    assert!(!h.keep_alive());
}

/// Method and target are held as text apart from the raw head: each parse into a reused
/// head replaces both, whatever their lengths, and a UTF-8 target (which httparse checks)
/// comes back whole.
#[test]
fn method_and_target_follow_each_reused_parse() {
    let mut h = RequestHead::default();
    assert_eq!((h.method(), h.target(), h.is_head()), ("", "", false));
    let heads: [(&[u8], &str, &str, bool); 4] = [
        (
            b"HEAD /a/b?c=1 HTTP/1.1\r\nHost: a\r\n\r\n",
            "HEAD",
            "/a/b?c=1",
            true,
        ),
        (b"HEADX / HTTP/1.1\r\nHost: a\r\n\r\n", "HEADX", "/", false),
        (
            "GET /caf\u{e9}/\u{1f600}?q=\u{e9}t\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n".as_bytes(),
            "GET",
            "/caf\u{e9}/\u{1f600}?q=\u{e9}t\u{e9}",
            false,
        ),
        (
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            "OPTIONS",
            "*",
            false,
        ),
    ];
    for (raw, method, target, is_head) in heads {
        assert_eq!(parse_request_into(&mut h, raw, &lim()), Ok(Some(raw.len())));
        assert_eq!(
            (h.method(), h.target(), h.is_head()),
            (method, target, is_head)
        );
        let (path, query) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        assert_eq!((h.path(), h.query()), (path, query));
    }
}

#[test]
fn keep_alive_rules() {
    assert!(ok(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").0.keep_alive());
    assert!(
        !ok(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .0
            .keep_alive()
    );
    assert!(
        !ok(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n")
            .0
            .keep_alive()
    );
    assert!(!ok(b"GET / HTTP/1.0\r\n\r\n").0.keep_alive());
    assert!(
        ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .0
            .keep_alive()
    );
    assert!(
        !ok(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n")
            .0
            .keep_alive()
    );
}

#[test]
fn expect_continue_and_head() {
    let (h, _) =
        ok(b"PUT /u HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n");
    assert!(h.expect_continue());
    assert!(ok(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n").0.is_head());
}

#[test]
fn framing_variants() {
    let f = |s: &[u8]| ok(s).0.framing();
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
        BodyFraming::Chunked
    );
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked \r\n\r\n"),
        BodyFraming::Chunked
    );
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
        BodyFraming::ContentLength(0)
    );
    // Identical repeated values are one value (RFC 9110 §8.6).
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n"),
        BodyFraming::ContentLength(7)
    );
    assert_eq!(
        f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n"),
        BodyFraming::ContentLength(u64::MAX)
    );
    assert!(!BodyFraming::ContentLength(0).has_body());
    assert!(BodyFraming::Chunked.has_body());
}

#[test]
fn malformed_framing_is_400() {
    // CL + TE
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
    // differing / invalid CL
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3,\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n");
    // TE other than exactly chunked
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n");
    bad(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n");
    bad(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
}

#[test]
fn malformed_request_lines_are_400() {
    bad(b"GET /\r\nHost: a\r\n\r\n"); // no version
    bad(b"GET / \r\nHost: a\r\n\r\n"); // empty version
    bad(b"GET / FOO/1.1\r\nHost: a\r\n\r\n");
    bad(b"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n");
    bad(b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n"); // double space
    bad(b"GET / HTTP/1.10\r\nHost: a\r\n\r\n");
    bad(b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n");
    bad(b"GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n");
    bad(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"); // TLS hello on plain port
    bad(b"\0\0\0\0\0\0\0\0");
    bad(b"GET / HTTP/1.1\n\nHost: a\r\n\r\n");
    bad(b"GET / HTTP/1.1\nHost: a\n\n"); // bare LF line endings
}

#[test]
fn malformed_headers_are_400() {
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"); // NUL in value
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"); // bare CR in value
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\nContent-Length: 5\r\n\r\n"); // bare LF in value
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"); // obs-fold
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n"); // obs-fold with tab
    bad(b"GET / HTTP/1.1\r\n Host: a\r\n\r\n"); // leading whitespace on first header
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n");
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX : b\r\n\r\n"); // whitespace before colon
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX\t: b\r\n\r\n");
    bad(b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n"); // empty name
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX\x01Y: b\r\n\r\n");
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n"); // control char
    bad(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"); // duplicate host
    bad(b"GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n"); // missing host in 1.1
}

#[test]
fn tolerated_forms() {
    // Obs-text and tabs inside values, empty values, leading empty line (RFC 9112 §2.2).
    let (h, _) = ok(b"\r\nGET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\tok\r\nEmpty:\r\n\r\n");
    assert_eq!(h.header("x"), Some(&b"caf\xc3\xa9\tok"[..]));
    assert_eq!(h.header("empty"), Some(&b""[..]));
    // Missing host allowed when configured off.
    let l = Limits {
        require_host: false,
        ..lim()
    };
    assert!(matches!(
        parse_request(b"GET / HTTP/1.1\r\n\r\n", &l),
        Ok(Parsed::Complete(..))
    ));
}

#[test]
fn version_not_supported_is_505() {
    for v in ["HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3", "HTTP/9.9"] {
        let e = err(format!("GET / {v}\r\nHost: a\r\n\r\n").as_bytes());
        assert_eq!(
            (e.status(), e.reason()),
            (505, "http_version_not_supported"),
            "{v}"
        );
        assert_eq!(e.kind(), ErrorKind::VersionNotSupported);
    }
    // Detected before the line ends.
    assert_eq!(err(b"GET / HTTP/2").status(), 505);
}

#[test]
fn request_line_too_long_is_414() {
    let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
    let e = err(long.as_bytes());
    assert_eq!((e.status(), e.reason()), (414, "uri_too_long"));
    // Detected while still partial.
    let partial = format!("GET /{}", "a".repeat(8300));
    assert_eq!(err(partial.as_bytes()).status(), 414);
    // Exactly at the limit is fine.
    let target = "a".repeat(8192 - "GET / HTTP/1.1".len());
    let at = format!("GET /{target} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(matches!(req(at.as_bytes()), Ok(Parsed::Complete(..))));
    let over = format!("GET /{target}a HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(err(over.as_bytes()).status(), 414);
}

#[test]
fn head_too_large_is_431() {
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "b".repeat(20_000)
    );
    let e = err(big.as_bytes());
    assert_eq!((e.status(), e.reason()), (431, "headers_too_large"));
    // Still partial but already over the limit.
    let e = err(&big.as_bytes()[..17_000]);
    assert_eq!(e.status(), 431);
    // Just under the limit.
    let l = Limits::with_max_head_bytes(100);
    let fits = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert!(matches!(parse_request(fits, &l), Ok(Parsed::Complete(..))));
    let l = Limits::with_max_head_bytes(fits.len() - 1);
    assert_eq!(parse_request(fits, &l).unwrap_err().status(), 431);
    let l = Limits::with_max_head_bytes(fits.len());
    assert!(matches!(parse_request(fits, &l), Ok(Parsed::Complete(..))));
    // Too many header lines.
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let e = err(format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n").as_bytes());
    assert_eq!(e.status(), 431);
}

#[test]
fn error_strings() {
    let cases = [
        (ErrorKind::BadRequest, 400, "bad_request"),
        (ErrorKind::HeadersTooLarge, 431, "headers_too_large"),
        (ErrorKind::UriTooLong, 414, "uri_too_long"),
        (
            ErrorKind::VersionNotSupported,
            505,
            "http_version_not_supported",
        ),
        (ErrorKind::BadResponse, 502, "upstream_unavailable"),
    ];
    for (k, s, r) in cases {
        let e = HttpError::new(k, "x");
        assert_eq!((e.status(), e.reason(), e.detail()), (s, r, "x"));
    }
    let e: HttpError = BodyError::MissingCrlf.into();
    assert_eq!(e.status(), 400);
    assert_eq!(e.into_bad_response().status(), 502);
    assert!(
        err(b"GET / HTTP/1.1\r\nX : y\r\n\r\n")
            .to_string()
            .contains("bad_request")
    );
}

// ---- responses ----

fn resp(s: &[u8], was_head: bool) -> Result<Parsed<ResponseHead>, HttpError> {
    parse_response(s, 64 * 1024, was_head)
}

fn resp_ok(s: &[u8], was_head: bool) -> ResponseHead {
    match resp(s, was_head) {
        Ok(Parsed::Complete(h, n)) => {
            assert!(n <= s.len());
            h
        }
        other => panic!("{other:?}"),
    }
}

fn resp_bad(s: &[u8]) {
    let e = resp(s, false).unwrap_err();
    assert_eq!(
        (e.status(), e.reason()),
        (502, "upstream_unavailable"),
        "{e}"
    );
}

#[test]
fn response_framing() {
    let h = resp_ok(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false);
    assert_eq!(
        (h.status(), h.reason(), h.framing()),
        (200, "OK", BodyFraming::ContentLength(12))
    );
    assert!(h.keep_alive());
    let h = resp_ok(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    );
    assert_eq!(h.framing(), BodyFraming::Chunked);
    let h = resp_ok(b"HTTP/1.1 200 OK\r\n\r\n", false);
    assert_eq!(h.framing(), BodyFraming::UntilClose);
    assert!(!h.keep_alive());
    let h = resp_ok(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true);
    assert_eq!(h.framing(), BodyFraming::None);
    for s in [100u16, 103, 204, 304] {
        let h = resp_ok(
            format!("HTTP/1.1 {s} X\r\nContent-Length: 5\r\n\r\n").as_bytes(),
            false,
        );
        assert_eq!(h.framing(), BodyFraming::None, "{s}");
        assert_eq!(h.is_informational(), s < 200);
    }
    let h = resp_ok(
        b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(!h.keep_alive());
    assert_eq!(h.status(), 503);
    let h = resp_ok(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false);
    assert!(!h.keep_alive());
    let h = resp_ok(
        b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n",
        false,
    );
    assert!(h.keep_alive());
    // Missing reason phrase.
    let h = resp_ok(b"HTTP/1.1 204\r\n\r\n", false);
    assert_eq!((h.status(), h.reason()), (204, ""));
    // Partial.
    assert_eq!(
        resp(b"HTTP/1.1 200 OK\r\nContent-Le", false),
        Ok(Parsed::Partial)
    );
}

#[test]
fn malformed_responses_are_502() {
    resp_bad(b"HTTP/1.1 2000 OK\r\n\r\n");
    resp_bad(b"HTTP/1.1 20 OK\r\n\r\n");
    resp_bad(b"HTTP/1.1 099 OK\r\n\r\n");
    resp_bad(b"HTTP/1.1 600 OK\r\n\r\n");
    resp_bad(b"HTTP/2 200 OK\r\n\r\n");
    resp_bad(b"SSH-2.0-OpenSSH_9.2\r\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n");
    resp_bad(b"HTTP/1.1 200 OK\nContent-Length: 1\n\n");
    resp_bad(b"HTTP/1.1 200 OK\r\nX: a\0\r\n\r\n");
    let huge = format!("HTTP/1.1 200 OK\r\nX: {}\r\n", "a".repeat(70_000));
    assert_eq!(resp(huge.as_bytes(), false).unwrap_err().status(), 502);
}

// ---- writing ----

#[test]
fn request_rewrite_drops_hop_by_hop() {
    let (h, _) = ok(b"POST /o?q=1 HTTP/1.0\r\nHost: api\r\nConnection: keep-alive, X-Secret\r\n\
Keep-Alive: timeout=5\r\nX-Secret: s\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n\
Trailer: t\r\nExpect: 100-continue\r\nX-Request-Id: old\r\nAccept: */*\r\nContent-Length: 2\r\n\r\n");
    let mut out = Vec::new();
    write_request_head(
        &h,
        h.framing(),
        &[("x-request-id", b"new"), ("x-weir-instance", b"gw-a")],
        &mut out,
    );
    let s = String::from_utf8(out.clone()).unwrap();
    assert_eq!(
        s,
        "POST /o?q=1 HTTP/1.1\r\nHost: api\r\nAccept: */*\r\nx-request-id: new\r\n\
x-weir-instance: gw-a\r\ncontent-length: 2\r\n\r\n"
    );
    let (again, _) = ok(&out);
    assert_eq!(again.header("x-request-id"), Some(&b"new"[..]));

    // Listing Host (or Content-Length) in Connection cannot strip it.
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: host, content-length\r\n\r\n");
    let mut out = Vec::new();
    write_request_head(&h, h.framing(), &[], &mut out);
    assert_eq!(out, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");

    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    let mut out = Vec::new();
    write_request_head(&h, h.framing(), &[], &mut out);
    assert_eq!(
        out,
        b"POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n"
    );
}

/// Fields received as `name: value` CRLF are copied as received, several at a time; fields
/// written otherwise (no space or several after the colon, trailing spaces, an empty value)
/// come out as `name: value`. Either way the order is kept and dropped fields are left out.
#[test]
fn received_lines_are_copied_and_others_rewritten() {
    let (h, _) = ok(
        b"GET / HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nX-Two:2\r\nX-Three:   3  \r\n\
Connection: x-gone\r\nX-Gone: g\r\nX-Four: 4\r\nX-Empty:\r\nX-Five: 5\r\nX-Six: 6\r\n\r\n",
    );
    let mut out = Vec::new();
    write_request_head(&h, h.framing(), &[("x-five", b"new")], &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET / HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nX-Two: 2\r\nX-Three: 3\r\nX-Four: 4\r\n\
X-Empty: \r\nX-Six: 6\r\nx-five: new\r\n\r\n"
    );
}

/// `write_response_head` into a new buffer.
fn rewrite_response(h: &ResponseHead, framing: BodyFraming, extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    write_response_head(h, framing, extra, &mut out);
    out
}

#[test]
fn response_rewrite() {
    let h = resp_ok(
        b"HTTP/1.1 200 Fine\r\nConnection: close\r\nContent-Type: text/plain\r\n\
Transfer-Encoding: chunked\r\nX-Upstream: blue\r\n\r\n",
        false,
    );
    let out = rewrite_response(&h, BodyFraming::Chunked, &[("x-weir-attempts", b"2")]);
    assert_eq!(
        out,
        b"HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\nX-Upstream: blue\r\nx-weir-attempts: 2\r\n\
transfer-encoding: chunked\r\n\r\n"
    );
    // HEAD / 304: keep the representation's Content-Length.
    let h = resp_ok(b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", true);
    let out = rewrite_response(&h, h.framing(), &[]);
    assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n");
    // Close-delimited upstream body forwarded to an HTTP/1.0 client; empty reason filled in.
    let h = resp_ok(b"HTTP/1.1 503\r\n\r\n", false);
    let out = rewrite_response(&h, BodyFraming::UntilClose, &[("connection", b"close")]);
    assert_eq!(
        out,
        b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\r\n"
    );
}

#[test]
fn built_responses_parse_back() {
    let body = br#"{"error":"rate_limited","route":"ok","instance":"gw-a"}"#;
    let out = build_response(
        429,
        &[
            ("retry-after", b"30"),
            ("x-weir-reason", b"rate\r\nlimited"),
        ],
        body,
    );
    let h = resp_ok(&out, false);
    assert_eq!((h.status(), h.reason()), (429, "Too Many Requests"));
    assert_eq!(h.framing(), BodyFraming::ContentLength(body.len() as u64));
    assert_eq!(h.header("x-weir-reason"), Some(&b"rate  limited"[..]));
    assert!(out.ends_with(body));
    for s in [200u16, 400, 403, 404, 408, 414, 431, 502, 503, 504, 505] {
        assert!(!reason_phrase(s).is_empty(), "{s}");
    }
    assert_eq!(reason_phrase(299), "");
}

#[test]
fn gateway_responses_say_how_the_connection_goes_on() {
    let headers = [("x-weir-reason", "bad_request".to_string())];
    let cases = [
        (
            Persistence::new(false, false),
            false,
            &b"connection: close\r\n"[..],
        ),
        (
            Persistence::new(true, true),
            false,
            b"connection: keep-alive\r\n",
        ),
        (Persistence::new(true, false), true, b""),
    ];
    for (conn, head_only, line) in cases {
        let mut out = Vec::new();
        write_response_with(&mut out, 400, &headers, conn, b"{}", head_only);
        let mut want = b"HTTP/1.1 400 Bad Request\r\nx-weir-reason: bad_request\r\n".to_vec();
        want.extend_from_slice(line);
        want.extend_from_slice(b"content-length: 2\r\n\r\n");
        if !head_only {
            want.extend_from_slice(b"{}");
        }
        assert_eq!(out, want, "{conn:?}");
    }
}

// ---- reading heads off a connection ----

/// Time as milliseconds since the accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ms(u64);

impl core::ops::Add<core::time::Duration> for Ms {
    type Output = Ms;
    fn add(self, d: core::time::Duration) -> Ms {
        Ms(self.0 + d.as_millis() as u64)
    }
}

fn reader(first: bool) -> HeadReader<Ms> {
    let timeouts = HeadTimeouts {
        header: core::time::Duration::from_millis(100),
        idle: core::time::Duration::from_millis(1000),
    };
    HeadReader::new(lim(), timeouts, first.then_some(Ms(5)))
}

#[test]
fn first_head_is_bounded_from_the_accept() {
    let mut head = RequestHead::default();
    let mut r = reader(true);
    let never = || -> Ms { panic!("no clock read for a first request") };
    assert_eq!(
        r.step(&mut head, b"", never),
        Ok(HeadNext::Read {
            until: Ms(105),
            idle: true
        })
    );
    assert_eq!(r.timed_out(), HeadStop::Reject(r_timeout()));
    assert_eq!(
        r.step(&mut head, &TYPICAL[..10], never),
        Ok(HeadNext::Read {
            until: Ms(105),
            idle: false
        })
    );
    assert_eq!(
        r.step(&mut head, TYPICAL, never),
        Ok(HeadNext::Complete(TYPICAL.len()))
    );
    assert_eq!(head.method(), "GET");
}

fn r_timeout() -> HttpError {
    let HeadStop::Reject(e) = reader(false).timed_out() else {
        panic!("a started head that times out is answered")
    };
    assert_eq!((e.status(), e.reason()), (408, "client_timeout"));
    e
}

#[test]
fn later_heads_wait_idle_then_header_timeout_from_the_first_byte() {
    let mut head = RequestHead::default();
    let mut r = reader(false);
    assert!(!r.is_first());
    assert_eq!(
        r.step(&mut head, b"", || Ms(50)),
        Ok(HeadNext::Read {
            until: Ms(1050),
            idle: true
        })
    );
    assert_eq!(
        r.timed_out(),
        HeadStop::Close,
        "an idle keep-alive just closes"
    );
    let part = &TYPICAL[..20];
    assert_eq!(
        r.step(&mut head, part, || Ms(700)),
        Ok(HeadNext::Read {
            until: Ms(800),
            idle: false
        })
    );
    // The deadline is fixed once the head has started.
    assert_eq!(
        r.step(&mut head, &TYPICAL[..30], || Ms(790)),
        Ok(HeadNext::Read {
            until: Ms(800),
            idle: false
        })
    );
    assert_eq!(r.timed_out(), HeadStop::Reject(r_timeout()));
    // Pipelined bytes: a complete head costs no clock read.
    let mut r = reader(false);
    let got = r.step(&mut head, TYPICAL, || panic!("no clock read"));
    assert_eq!(got, Ok(HeadNext::Complete(TYPICAL.len())));
}

#[test]
fn rejected_heads_carry_their_status() {
    let mut head = RequestHead::default();
    for (bytes, status) in [
        (&b"GET / HTTP/2.0\r\n\r\n"[..], 505),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ] {
        match reader(true).step(&mut head, bytes, || Ms(0)) {
            Err(HeadStop::Reject(e)) => assert_eq!(e.status(), status),
            other => panic!("{other:?}"),
        }
    }
    let big = vec![b'a'; DEFAULT_MAX_HEAD_BYTES + 1];
    let mut long = b"GET /".to_vec();
    long.extend_from_slice(&big);
    match reader(true).step(&mut head, &long, || Ms(0)) {
        Err(HeadStop::Reject(e)) => assert_eq!(e.status(), 414),
        other => panic!("{other:?}"),
    }
}

// ---- bodies ----

fn decode_all(dec: &mut BodyDecoder, mut input: &[u8]) -> Result<(Vec<u8>, usize), BodyError> {
    let mut body = Vec::new();
    let mut used = 0;
    while !input.is_empty() && !dec.is_done() {
        let step = dec.decode(input)?;
        body.extend_from_slice(&input[step.data.clone()]);
        input = &input[step.consumed..];
        used += step.consumed;
        if step.consumed == 0 {
            break;
        }
    }
    Ok((body, used))
}

fn chunked(input: &[u8]) -> Result<(Vec<u8>, usize, bool), BodyError> {
    let mut dec = BodyDecoder::new(BodyFraming::Chunked);
    let (b, n) = decode_all(&mut dec, input)?;
    Ok((b, n, dec.is_done()))
}

#[test]
fn chunked_decodes() {
    let input = b"5\r\nhello\r\n6;ext=1;b=\"q\"\r\n world\r\nA\r\n0123456789\r\n0\r\n\r\nNEXT";
    let (body, used, done) = chunked(input).unwrap();
    assert_eq!(body, b"hello world0123456789");
    assert!(done);
    assert_eq!(&input[used..], b"NEXT");
    // Trailers are validated and skipped; uppercase hex, leading zeros, BWS before ';'.
    let input = b"00000B \t;x\r\nhello world\r\n0\r\nExpires: never\r\nX-Sum: 1\r\n\r\n";
    let (body, used, done) = chunked(input).unwrap();
    assert_eq!(
        (body.as_slice(), used, done),
        (&b"hello world"[..], input.len(), true)
    );
    // Incomplete.
    let (body, _, done) = chunked(b"5\r\nhel").unwrap();
    assert_eq!((body.as_slice(), done), (&b"hel"[..], false));
}

#[test]
fn chunked_rejects_bad_framing() {
    let cases: &[(&[u8], BodyError)] = &[
        (b"\r\nhello\r\n", BodyError::InvalidChunkSize),
        (b"g\r\n", BodyError::InvalidChunkSize),
        (b"-5\r\n", BodyError::InvalidChunkSize),
        (b"0x5\r\n", BodyError::InvalidChunkSize),
        (b"+5\r\n", BodyError::InvalidChunkSize),
        (b";x\r\n", BodyError::InvalidChunkSize),
        (b"5 \r\nhello\r\n", BodyError::InvalidChunkSize),
        (b"5\nhello\r\n", BodyError::MissingCrlf),
        (b"5\r\rhello\r\n", BodyError::MissingCrlf),
        (b"5\r\nhelloX\r\n", BodyError::MissingCrlf),
        (b"5\r\nhello\n0\r\n\r\n", BodyError::MissingCrlf),
        (b"5\r\nhello\r\r", BodyError::MissingCrlf),
        (b"10000000000000000\r\n", BodyError::ChunkSizeOverflow),
        (b"5;a\0\r\nhello\r\n", BodyError::InvalidExtension),
        (b"5;a\nb\r\n", BodyError::InvalidExtension),
        (b"0\r\n bad\r\n\r\n", BodyError::InvalidTrailer),
        (b"0\r\nNoColon\r\n\r\n", BodyError::InvalidTrailer),
        (b"0\r\nX: a\0\r\n\r\n", BodyError::InvalidTrailer),
        (b"0\r\nX: a\r\r\n", BodyError::MissingCrlf),
        (b"0\r\n\rX", BodyError::MissingCrlf),
    ];
    for (input, want) in cases {
        assert_eq!(
            chunked(input).map(|_| ()),
            Err(*want),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    let long_ext = format!("1;{}\r\n", "e".repeat(MAX_CHUNK_EXT_BYTES + 1));
    assert_eq!(
        chunked(long_ext.as_bytes()).map(|_| ()),
        Err(BodyError::ExtensionTooLong)
    );
    let ok_ext = format!(
        "1;{}\r\nx\r\n0\r\n\r\n",
        "e".repeat(MAX_CHUNK_EXT_BYTES - 1)
    );
    assert!(chunked(ok_ext.as_bytes()).unwrap().2);
    let long_trailer = format!("0\r\nX: {}\r\n\r\n", "t".repeat(MAX_TRAILER_BYTES));
    assert_eq!(
        chunked(long_trailer.as_bytes()).map(|_| ()),
        Err(BodyError::TrailersTooLong)
    );
    // The largest size that fits is accepted as a size.
    assert!(chunked(b"ffffffffffffffff\r\nab").is_ok());
}

#[test]
fn length_and_close_delimited() {
    let mut d = BodyDecoder::new(BodyFraming::ContentLength(5));
    assert_eq!(d.remaining(), Some(5));
    let (b, used) = decode_all(&mut d, b"hel").unwrap();
    assert_eq!((b.as_slice(), used, d.is_done()), (&b"hel"[..], 3, false));
    assert_eq!(d.finish_on_eof(), Err(BodyError::Truncated));
    let (b, used) = decode_all(&mut d, b"loGET /").unwrap();
    assert_eq!((b.as_slice(), used, d.is_done()), (&b"lo"[..], 2, true));
    assert_eq!(d.finish_on_eof(), Ok(()));

    let mut d = BodyDecoder::new(BodyFraming::None);
    assert!(d.is_done());
    assert_eq!(d.decode(b"x").unwrap().consumed, 0);

    let mut d = BodyDecoder::new(BodyFraming::UntilClose);
    assert_eq!(decode_all(&mut d, b"abc").unwrap().0, b"abc");
    assert!(!d.is_done());
    assert_eq!(d.finish_on_eof(), Ok(()));
    assert!(d.is_done());

    let mut d = BodyDecoder::new(BodyFraming::Chunked);
    decode_all(&mut d, b"5\r\nhel").unwrap();
    assert_eq!(d.finish_on_eof(), Err(BodyError::Truncated));
}

#[test]
fn chunk_encoding() {
    assert_eq!(chunk_header(0).as_bytes(), b"0\r\n");
    assert_eq!(chunk_header(10).as_bytes(), b"a\r\n");
    assert_eq!(chunk_header(0x1234).as_bytes(), b"1234\r\n");
    assert_eq!(chunk_header(u64::MAX).as_bytes(), b"ffffffffffffffff\r\n");
    let mut out = Vec::new();
    encode_chunk(b"hello", &mut out);
    encode_chunk(b"", &mut out);
    out.extend_from_slice(LAST_CHUNK);
    assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");
    let mut n = Vec::new();
    push_u64(&mut n, 0);
    push_u64(&mut n, 1234567890);
    assert_eq!(n, b"01234567890");
    for v in [9, 10, 99, 100, u64::MAX] {
        let mut n = b"x".to_vec();
        push_u64(&mut n, v);
        assert_eq!(n, format!("x{v}").into_bytes());
    }
}

#[test]
fn fuzz_entry_smoke() {
    for s in [
        TYPICAL,
        b"5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"",
        b"\0\r\n",
    ] {
        fuzz_parse(s);
    }
    fuzz_parse(
        b"POST / HTTP/1.1\r\nConnection: x-a, host\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Encode arbitrary chunks, then decode with the input split at every byte boundary (and at
    /// arbitrary multiple boundaries): always the same body, done, nothing left over.
    #[test]
    fn chunked_roundtrip(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let mut wire = Vec::new();
        for c in &chunks {
            encode_chunk(c, &mut wire);
        }
        wire.extend_from_slice(LAST_CHUNK);
        let expected: Vec<u8> = chunks.concat();

        let mut splits: Vec<Vec<usize>> = (0..=wire.len()).map(|i| vec![i]).collect();
        let mut multi: Vec<usize> = cuts.iter().map(|ix| ix.index(wire.len() + 1)).collect();
        multi.sort_unstable();
        splits.push(multi);
        for points in splits {
            let mut dec = BodyDecoder::new(BodyFraming::Chunked);
            let mut body = Vec::new();
            let mut start = 0;
            for end in points.iter().copied().chain([wire.len()]) {
                let (b, used) = decode_all(&mut dec, &wire[start..end]).unwrap();
                prop_assert_eq!(used, end - start);
                body.extend_from_slice(&b);
                start = end;
            }
            prop_assert!(dec.is_done());
            prop_assert_eq!(&body, &expected);
        }
    }

    /// Any bytes: whole-buffer and byte-wise chunked decoding agree; parsers never panic.
    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
        fuzz_parse(&data);
    }

    /// Mutations of a valid request: parsers never panic, and a complete parse re-serializes.
    #[test]
    fn mutated_requests(pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut data = TYPICAL.to_vec();
        let i = pos.index(data.len());
        data[i] = byte;
        fuzz_parse(&data);
    }

    /// Header values survive a parse → write → parse round trip.
    #[test]
    fn header_roundtrip(
        names in prop::collection::vec("[a-zA-Z][a-zA-Z0-9-]{0,15}", 1..10),
        values in prop::collection::vec("[ -~]{0,30}", 10),
    ) {
        let mut raw = b"GET /p HTTP/1.1\r\nHost: h\r\n".to_vec();
        let mut expected = Vec::new();
        for (n, v) in names.iter().zip(&values) {
            let n = format!("x-{n}");
            raw.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
            expected.push((n, v.trim_matches([' ', '\t']).to_string()));
        }
        raw.extend_from_slice(b"\r\n");
        let (h, _) = ok(&raw);
        let mut out = Vec::new();
        write_request_head(&h, h.framing(), &[], &mut out);
        let (h2, _) = ok(&out);
        let got: Vec<(String, String)> = h2.headers().iter().skip(1)
            .map(|(n, v)| (n.to_string(), String::from_utf8(v.to_vec()).unwrap())).collect();
        prop_assert_eq!(got, expected);
    }
}

/// Header names the hop-by-hop rules treat specially, in mixed case, and a few ordinary ones.
const NAMES: &[&str] = &[
    "Connection",
    "connection",
    "Keep-Alive",
    "TE",
    "te",
    "Trailer",
    "Upgrade",
    "Proxy-Connection",
    "Host",
    "host",
    "Expect",
    "Content-Length",
    "X-A",
    "x-a",
    "X-B",
    "Accept",
    "X-Request-Id",
    "Close",
];
/// Tokens a `Connection` value may carry.
const TOKENS: &[&str] = &[
    "close",
    "keep-alive",
    "Keep-Alive",
    "x-a",
    "X-B",
    "host",
    "accept",
    "te",
    "x-c",
    "x-d",
    "x-e",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The writers' one-pass hop-by-hop rule (names classified by length, `Connection` tokens
    /// gathered once per head) keeps exactly the fields the plain rule (`write::dropped`) keeps,
    /// in requests and responses, with and without `extra` replacing some.
    #[test]
    fn writers_drop_what_the_plain_rule_drops(
        fields in prop::collection::vec(
            (prop::sample::select(NAMES), prop::collection::vec(prop::sample::select(TOKENS), 0..7)),
            0..12,
        ),
        extra_names in prop::sample::subsequence(&["x-request-id", "X-A", "host", "x-weir"][..], 0..3),
    ) {
        let mut lines = String::new();
        for (name, tokens) in &fields {
            let value = if name.eq_ignore_ascii_case("connection") { tokens.join(", ") } else { "v".into() };
            if name.eq_ignore_ascii_case("content-length") {
                continue; // framing has its own tests
            }
            lines.push_str(&format!("{name}: {value}\r\n"));
        }
        let extra: Vec<(&str, &[u8])> = extra_names.iter().map(|n| (*n, &b"e"[..])).collect();
        let kept = |hs: &Headers, request: bool| -> Vec<(String, Vec<u8>)> {
            hs.iter()
                .filter(|(n, _)| !crate::write::dropped(hs, n))
                .filter(|(n, _)| !(request && n.eq_ignore_ascii_case("expect")))
                .filter(|(n, _)| !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(n)))
                .map(|(n, v)| (n.to_string(), v.to_vec()))
                .chain(extra.iter().map(|(n, v)| (n.to_string(), v.to_vec())))
                .collect()
        };
        let pairs = |hs: &Headers| -> Vec<(String, Vec<u8>)> {
            hs.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect()
        };

        let raw = format!("GET / HTTP/1.1\r\n{lines}\r\n");
        let lax = Limits { require_host: false, ..Limits::default() };
        if let Ok(Parsed::Complete(h, _)) = parse_request(raw.as_bytes(), &lax) {
            let mut out = Vec::new();
            write_request_head(&h, BodyFraming::None, &extra, &mut out);
            let Ok(Parsed::Complete(again, _)) = parse_request(&out, &lax) else {
                panic!("rewritten request did not parse: {:?}", String::from_utf8_lossy(&out));
            };
            prop_assert_eq!(pairs(again.headers()), kept(h.headers(), true));
        }

        let raw = format!("HTTP/1.1 200 OK\r\n{lines}content-length: 0\r\n\r\n");
        if let Ok(Parsed::Complete(h, _)) = parse_response(raw.as_bytes(), 64 * 1024, false) {
            let mut out = Vec::new();
            write_response_head(&h, BodyFraming::UntilClose, &extra, &mut out);
            out.truncate(out.len() - 2);
            out.extend_from_slice(b"content-length: 0\r\n\r\n");
            let Ok(Parsed::Complete(again, _)) = parse_response(&out, 64 * 1024, false) else {
                panic!("rewritten response did not parse: {:?}", String::from_utf8_lossy(&out));
            };
            let mut want = kept(h.headers(), false);
            want.push(("content-length".into(), b"0".to_vec()));
            prop_assert_eq!(pairs(again.headers()), want);
        }
    }
}

proptest! {
    /// The vectorized bare-LF scan agrees with the obvious loop.
    #[test]
    fn bare_lf_scan_matches_naive(data in prop::collection::vec(prop::sample::select(vec![b'\r', b'\n', b'a']), 0..100)) {
        let naive = data.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || data[i - 1] != b'\r'));
        prop_assert_eq!(crate::head::check_line_endings(&data).is_err(), naive);
    }
}
