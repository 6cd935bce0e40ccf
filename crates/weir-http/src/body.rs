//! Streaming body framing: decoders that never buffer a body, and chunk encoders.
//!
//! A decoder is fed whatever bytes arrived and answers with a [`Step`]: how many input bytes
//! it consumed and which sub-range of them is body data. Framing bytes (chunk sizes,
//! extensions, CRLFs, trailers) are validated and dropped, so the decoder's state is a few
//! words whatever the body size, and a chunk split at any byte boundary decodes the same.
//!
//! **Forwarding a chunked body:** the gateway re-encodes the decoded data
//! ([`chunk_header`], [`encode_chunk`], [`LAST_CHUNK`]) instead of forwarding the raw bytes.
//! What the upstream receives is then exactly what weir parsed — chunk extensions and trailers
//! are dropped — so no byte can mean one thing to weir and another to the upstream.

use core::ops::Range;

use crate::error::BodyError;
use crate::head::BodyFraming;

/// Most bytes of chunk extensions accepted on one chunk-size line.
pub const MAX_CHUNK_EXT_BYTES: usize = 1024;
/// Most bytes of trailer section accepted (trailers are validated and skipped).
pub const MAX_TRAILER_BYTES: usize = 8 * 1024;

/// The result of one decode call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Input bytes used (framing and data); the rest belongs to a later call or, once the
    /// decoder is done, to the next message on the connection.
    pub consumed: usize,
    /// The body data in `input[data]` (empty when this call found only framing).
    pub data: Range<usize>,
}

/// The CR or LF of a line ending the chunked coding requires here.
#[inline(always)]
fn crlf(b: u8, want: u8) -> Result<(), BodyError> {
    if b == want {
        Ok(())
    } else {
        Err(BodyError::MissingCrlf)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size; `bool` = at least one digit seen.
    Size(bool),
    /// Whitespace after the size; only `;` may follow.
    SizeWs,
    /// Inside chunk extensions, until CR.
    Ext,
    /// Expecting the LF ending a chunk-size line.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// In a trailer field name.
    TrailerName,
    /// In a trailer field value.
    TrailerValue,
    /// Expecting LF ending a trailer line.
    TrailerLf,
    /// Expecting the LF of the final empty line.
    EndLf,
    /// The body is complete.
    Done,
}

/// A `Transfer-Encoding: chunked` decoder (RFC 9112 §7.1), strict about framing:
/// hex sizes only (no sign, no `0x`, at most 64 bits), CRLF everywhere (no bare LF or CR),
/// extensions allowed but without control characters and bounded, trailers allowed but
/// bounded, syntax-checked and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: State,
    /// Chunk size being read, then bytes of the current chunk still to come.
    size: u64,
    ext_bytes: usize,
    trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub const fn new() -> Self {
        Self {
            state: State::Size(false),
            size: 0,
            ext_bytes: 0,
            trailer_bytes: 0,
        }
    }

    /// Whether the last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consume framing bytes from `input` until data is found (returned as one range), the
    /// input is exhausted, or the body ends. Consumes nothing once done.
    pub fn decode(&mut self, input: &[u8]) -> Result<Step, BodyError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Done => break,
                State::Data => {
                    let avail = (input.len() - i) as u64;
                    let take = self.size.min(avail) as usize;
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok(Step {
                        consumed: i + take,
                        data: i..i + take,
                    });
                }
                State::Size(seen) => {
                    if let Some(d) = hex_val(b) {
                        if self.size >> 60 != 0 {
                            return Err(BodyError::ChunkSizeOverflow);
                        }
                        self.size = (self.size << 4) | u64::from(d);
                        self.state = State::Size(true);
                    } else if !seen {
                        return Err(BodyError::InvalidChunkSize);
                    } else {
                        match b {
                            b'\r' => self.state = State::SizeLf,
                            b';' => self.enter_ext(),
                            b' ' | b'\t' => self.state = State::SizeWs,
                            b'\n' => return Err(BodyError::MissingCrlf),
                            _ => return Err(BodyError::InvalidChunkSize),
                        }
                    }
                }
                State::SizeWs => match b {
                    b' ' | b'\t' => {}
                    b';' => self.enter_ext(),
                    _ => return Err(BodyError::InvalidChunkSize),
                },
                State::Ext => match b {
                    b'\r' => self.state = State::SizeLf,
                    b'\t' | b' '..=b'~' | 0x80..=0xff => {
                        self.ext_bytes += 1;
                        if self.ext_bytes > MAX_CHUNK_EXT_BYTES {
                            return Err(BodyError::ExtensionTooLong);
                        }
                    }
                    _ => return Err(BodyError::InvalidExtension),
                },
                State::SizeLf => {
                    crlf(b, b'\n')?;
                    self.state = if self.size == 0 {
                        State::TrailerStart
                    } else {
                        State::Data
                    };
                }
                State::DataCr => {
                    crlf(b, b'\r')?;
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    crlf(b, b'\n')?;
                    self.state = State::Size(false);
                }
                State::TrailerStart => {
                    if b == b'\r' {
                        self.state = State::EndLf;
                    } else if is_tchar(b) {
                        self.count_trailer()?;
                        self.state = State::TrailerName;
                    } else {
                        return Err(BodyError::InvalidTrailer);
                    }
                }
                State::TrailerName => {
                    self.count_trailer()?;
                    if b == b':' {
                        self.state = State::TrailerValue;
                    } else if !is_tchar(b) {
                        return Err(BodyError::InvalidTrailer);
                    }
                }
                State::TrailerValue => {
                    self.count_trailer()?;
                    match b {
                        b'\r' => self.state = State::TrailerLf,
                        b'\t' | b' '..=b'~' | 0x80..=0xff => {}
                        _ => return Err(BodyError::InvalidTrailer),
                    }
                }
                State::TrailerLf => {
                    crlf(b, b'\n')?;
                    self.state = State::TrailerStart;
                }
                State::EndLf => {
                    crlf(b, b'\n')?;
                    self.state = State::Done;
                    return Ok(Step {
                        consumed: i + 1,
                        data: 0..0,
                    });
                }
            }
            i += 1;
        }
        Ok(Step {
            consumed: i,
            data: 0..0,
        })
    }

    fn enter_ext(&mut self) {
        self.ext_bytes = 0;
        self.state = State::Ext;
    }

    fn count_trailer(&mut self) -> Result<(), BodyError> {
        self.trailer_bytes += 1;
        if self.trailer_bytes > MAX_TRAILER_BYTES {
            return Err(BodyError::TrailersTooLong);
        }
        Ok(())
    }
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose(bool),
}

/// A decoder for any [`BodyFraming`]: counts a Content-Length down, decodes chunked, or passes
/// everything through until the connection closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyDecoder {
    kind: Kind,
}

impl BodyDecoder {
    /// A decoder for a body framed as `framing` (`None` is an empty body, done at once).
    pub fn new(framing: BodyFraming) -> Self {
        let kind = match framing {
            BodyFraming::None => Kind::Length(0),
            BodyFraming::ContentLength(n) => Kind::Length(n),
            BodyFraming::Chunked => Kind::Chunked(ChunkedDecoder::new()),
            BodyFraming::UntilClose => Kind::UntilClose(false),
        };
        Self { kind }
    }

    /// Whether the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        match &self.kind {
            Kind::Length(n) => *n == 0,
            Kind::Chunked(c) => c.is_done(),
            Kind::UntilClose(eof) => *eof,
        }
    }

    /// For a Content-Length body, the bytes still expected.
    pub fn remaining(&self) -> Option<u64> {
        match self.kind {
            Kind::Length(n) => Some(n),
            _ => None,
        }
    }

    /// Decode the next piece of `input`; see [`Step`].
    pub fn decode(&mut self, input: &[u8]) -> Result<Step, BodyError> {
        match &mut self.kind {
            Kind::Length(n) => {
                let take = (*n).min(input.len() as u64) as usize;
                *n -= take as u64;
                Ok(Step {
                    consumed: take,
                    data: 0..take,
                })
            }
            Kind::Chunked(c) => c.decode(input),
            Kind::UntilClose(true) => Ok(Step {
                consumed: 0,
                data: 0..0,
            }),
            Kind::UntilClose(false) => Ok(Step {
                consumed: input.len(),
                data: 0..input.len(),
            }),
        }
    }

    /// The peer closed the connection: fine for a close-delimited body (which is then done)
    /// or a finished one; otherwise the body was cut short ([`BodyError::Truncated`]).
    pub fn finish_on_eof(&mut self) -> Result<(), BodyError> {
        if let Kind::UntilClose(eof) = &mut self.kind {
            *eof = true;
        }
        if self.is_done() {
            Ok(())
        } else {
            Err(BodyError::Truncated)
        }
    }
}

/// The last chunk and an empty trailer section: ends a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
/// The CRLF that follows each chunk's data.
pub const CRLF: &[u8] = b"\r\n";

/// A chunk-size line (`{len:x}\r\n`) on the stack, for vectored writes without allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    buf: [u8; 18],
    len: u8,
}

impl ChunkHeader {
    /// The encoded line.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// The size line for a chunk of `len` bytes. A chunk of 0 bytes would end the body: callers
/// skip empty data (as [`encode_chunk`] does).
pub fn chunk_header(len: u64) -> ChunkHeader {
    let mut buf = [0u8; 18];
    let digits = if len == 0 {
        1
    } else {
        (64 - len.leading_zeros() as usize).div_ceil(4)
    };
    for (i, slot) in buf[..digits].iter_mut().enumerate() {
        let nibble = (len >> (4 * (digits - 1 - i))) & 0xf;
        *slot = b"0123456789abcdef"[nibble as usize];
    }
    buf[digits] = b'\r';
    buf[digits + 1] = b'\n';
    ChunkHeader {
        buf,
        len: (digits + 2) as u8,
    }
}

/// Append `data` as one chunk (size line, data, CRLF); appends nothing for empty data.
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(chunk_header(data.len() as u64).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(CRLF);
}
