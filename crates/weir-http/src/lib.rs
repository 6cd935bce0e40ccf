//! # weir-http
//!
//! A sans-io, strict HTTP/1.1 codec for the weir gateway: request and response heads, body
//! framing (Content-Length, chunked, close-delimited) and proxy header rewriting. It reads
//! and writes byte buffers only — no sockets, no async runtime — so the monoio gateway uses
//! it on both its client and upstream sides, the demo upstreams use it on std threads, and
//! fuzzers drive it directly.
//!
//! ## Why strict: no request smuggling
//!
//! A gateway forwards requests over connections shared with other clients. If the gateway and
//! the upstream disagree about where one request ends — one trusts `Content-Length`, the other
//! `Transfer-Encoding`; one reads a bare LF as a line break, the other as part of a value; one
//! unfolds an obs-fold line, the other does not — an attacker can hide a second request inside
//! the first one's body, bypassing the gateway's rate limits and routing (request smuggling,
//! CL.TE / TE.CL / TE.TE desync). The only robust defence is to accept exactly one reading of
//! every message and reject everything ambiguous *before* forwarding anything. So a request is
//! a 400 `bad_request` when it has:
//!
//! - `Content-Length` together with `Transfer-Encoding`;
//! - several differing `Content-Length` values, or one that is not `1*DIGIT` or overflows u64;
//! - a `Transfer-Encoding` other than exactly `chunked` (unknown codings, `chunked` twice or not
//!   last, an empty value), or any `Transfer-Encoding` in an HTTP/1.0 request;
//! - a request line without a version, or with an invalid one (`FOO/1.1`);
//! - NUL, CR or LF inside a header value, or any bare LF line ending anywhere in the head;
//! - an obs-fold continuation line, a header line without a colon, or whitespace before it;
//! - more than one `Host`, or none in an HTTP/1.1 request ([`Limits::require_host`]);
//! - any other bytes `httparse` cannot tokenize;
//! - (in the body) invalid chunk framing: see [`ChunkedDecoder`].
//!
//! A head larger than [`Limits::max_head_bytes`] (or with more than [`Limits::max_headers`]
//! lines) is 431 `headers_too_large`, a request line over 8 KiB is 414 `uri_too_long`, and a
//! well-formed `HTTP/x.y` other than 1.0 / 1.1 is 505 `http_version_not_supported`
//! ([`HttpError::status`], [`HttpError::reason`]).
//!
//! Upstream responses get the same checks where they apply (an upstream cannot smuggle
//! requests, but it can desynchronize a pooled connection); failures are
//! [`ErrorKind::BadResponse`], which the gateway reports as 502 `upstream_unavailable`.
//!
//! What is forwarded is re-serialized from what was parsed, never copied raw: framing headers
//! are rewritten from the [`BodyFraming`] actually sent, chunked bodies are re-encoded without
//! extensions or trailers, hop-by-hop headers are dropped ([`write_request_head`],
//! [`write_response_head`]).
//!
//! ## Tokenizing
//!
//! `httparse` does the tokenizing (SIMD where available); this crate adds the checks above
//! around it. Heads are parsed from the start of the buffer each time more bytes arrive
//! ([`Parsed::Partial`]); callers bound that work with the head size limit and the header
//! timeout.
//!
//! A parsed head owns one copy of its bytes plus a vector of ranges: two allocations per head
//! whatever its header count, zero when re-parsing into a kept value
//! ([`parse_request_into`]). Parsing a typical 313-byte request head takes about 3,400
//! instructions into a reused head and about 3,900 into a new one; `httparse` alone takes about
//! 2,100 (callgrind; `examples/parse_speed.rs`). The bare-LF scan is branch-free so that it
//! vectorizes.
//!
//! ## Example
//! ```
//! use weir_http::{parse_request, BodyFraming, Limits, Parsed};
//!
//! let buf = b"POST /orders?x=1 HTTP/1.1\r\nHost: api\r\nContent-Length: 2\r\n\r\n{}";
//! let Parsed::Complete(head, len) = parse_request(buf, &Limits::default()).unwrap() else {
//!     panic!("partial")
//! };
//! assert_eq!((head.method(), head.path(), head.query()), ("POST", "/orders", Some("x=1")));
//! assert_eq!(head.framing(), BodyFraming::ContentLength(2));
//! assert_eq!(&buf[len..], b"{}");
//!
//! let err = parse_request(b"GET / HTTP/2.0\r\n\r\n", &Limits::default()).unwrap_err();
//! assert_eq!((err.status(), err.reason()), (505, "http_version_not_supported"));
//! ```

mod body;
mod error;
mod head;
mod read;
mod write;

pub use body::{
    BodyDecoder, CRLF, ChunkHeader, ChunkedDecoder, LAST_CHUNK, MAX_CHUNK_EXT_BYTES,
    MAX_TRAILER_BYTES, Step, chunk_header, encode_chunk,
};
pub use error::{BodyError, ErrorKind, HttpError};
pub use head::{
    BodyFraming, DEFAULT_MAX_HEAD_BYTES, DEFAULT_MAX_REQUEST_LINE, Headers, Limits, MAX_HEADERS,
    Parsed, RequestHead, ResponseHead, Version, check_request, parse_request, parse_request_into,
    parse_response, parse_response_into,
};
pub use read::{HeadNext, HeadReader, HeadSink, HeadStop, HeadTimeouts};
pub use write::{
    HOP_BY_HOP, Persistence, build_response, is_hop_by_hop, push_u64, reason_phrase, write_header,
    write_request_head, write_response, write_response_head, write_response_with,
};

#[cfg(test)]
mod tests;

/// Fuzzing entry point: feeds `data` to every parser and checks invariants that must hold for
/// any input (never panics on its own account; panics only when an invariant breaks):
/// a complete request head re-serialized by [`write_request_head`] parses back to the same
/// method, target and end-to-end headers; every head the writers make of a parsed head holds
/// no NUL and no CR or LF outside its line endings (the writers copy received lines whole, on
/// the strength of httparse's checks); chunked decoding in one call and byte by byte agree.
#[doc(hidden)]
pub fn fuzz_parse(data: &[u8]) {
    let limits = Limits {
        require_host: false,
        ..Limits::default()
    };
    let parsed = parse_request(data, &limits);
    // The in-place check (weir-pingora's front door) judges every input as the parse does.
    match (&parsed, check_request(data, &limits)) {
        (Ok(Parsed::Complete(h, n)), Ok(Some((m, f)))) => assert!(*n == m && h.framing() == f),
        (Ok(Parsed::Partial), Ok(None)) => {}
        (Err(a), Err(b)) => assert_eq!((a.status(), a.to_string()), (b.status(), b.to_string())),
        (p, c) => panic!("check_request {c:?} disagrees with parse_request {p:?}"),
    }
    if let Ok(Parsed::Complete(head, len)) = parsed {
        assert!(len <= data.len());
        let mut out = Vec::new();
        write_request_head(&head, head.framing(), &[], &mut out);
        assert_lines_intact(&out);
        match parse_request(
            &out,
            &Limits {
                max_head_bytes: usize::MAX,
                ..limits
            },
        ) {
            Ok(Parsed::Complete(again, n)) => {
                assert_eq!(n, out.len());
                assert_eq!(again.method(), head.method());
                assert_eq!(again.target(), head.target());
                assert_eq!(again.framing(), head.framing());
                let hs = head.headers();
                let kept: Vec<_> = hs
                    .iter()
                    .filter(|(n, _)| !write::dropped(hs, n) && !n.eq_ignore_ascii_case("expect"))
                    .collect();
                let framing_lines = usize::from(head.framing() != BodyFraming::None);
                let got: Vec<_> = again.headers().iter().collect();
                assert_eq!(kept, got[..got.len() - framing_lines]);
            }
            other => panic!("re-serialized head did not parse: {other:?}"),
        }
    }
    for was_head in [false, true] {
        if let Ok(Parsed::Complete(head, len)) = parse_response(data, 64 * 1024, was_head) {
            assert!(len <= data.len());
            let mut out = Vec::new();
            write_response_head(&head, head.framing(), &[], &mut out);
            assert_lines_intact(&out);
        }
    }
    fuzz_chunked(data);
}

/// `head` has no NUL, and every CR in it is followed by LF and every LF preceded by CR: no
/// byte of a field can end its line or start another.
fn assert_lines_intact(head: &[u8]) {
    for (i, &b) in head.iter().enumerate() {
        let ok = match b {
            0 => false,
            b'\r' => head.get(i + 1) == Some(&b'\n'),
            b'\n' => i > 0 && head[i - 1] == b'\r',
            _ => true,
        };
        assert!(
            ok,
            "byte {b:#04x} at {i} of a written head: {:?}",
            String::from_utf8_lossy(head)
        );
    }
}

/// Fuzzing entry point for the chunked decoder: whole-buffer and byte-at-a-time decoding must
/// produce the same data, the same completion and the same error.
#[doc(hidden)]
pub fn fuzz_chunked(data: &[u8]) {
    fn run(data: &[u8], piece: usize) -> (Vec<u8>, Result<usize, BodyError>) {
        let mut dec = ChunkedDecoder::new();
        let mut body = Vec::new();
        let mut at = 0;
        while at < data.len() && !dec.is_done() {
            let end = (at + piece).min(data.len());
            let mut input = &data[at..end];
            while !input.is_empty() && !dec.is_done() {
                match dec.decode(input) {
                    Ok(step) => {
                        assert!(step.consumed > 0 && step.consumed <= input.len());
                        assert!(step.data.end <= step.consumed);
                        body.extend_from_slice(&input[step.data]);
                        input = &input[step.consumed..];
                        at += step.consumed;
                    }
                    Err(e) => return (body, Err(e)),
                }
            }
        }
        (body, Ok(at))
    }
    let whole = run(data, usize::MAX);
    let bytewise = run(data, 1);
    assert_eq!(whole, bytewise);
}
