//! A minimal blocking HTTP/1.1 client for tests: keep-alive, any framing, reports truncation.

use core::net::SocketAddr;
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::TcpStream;

use weir_http::{BodyDecoder, Parsed, ResponseHead, parse_response};

/// A response read by [`Client`].
#[derive(Debug, Clone)]
pub struct Response {
    /// The final (non-1xx) response head.
    pub head: ResponseHead,
    /// The decoded body.
    pub body: Vec<u8>,
    /// `false` when the connection ended before the body was complete.
    pub complete: bool,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status()
    }

    /// First value of header `name`, as (lossy) text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head
            .header(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One client connection; requests are sent one after another on it (keep-alive).
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Client {
    /// Connect to `addr` with a 10 s read timeout.
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Self {
            stream,
            host: addr.to_string(),
            buf: Vec::new(),
        })
    }

    /// Change the read timeout.
    pub fn set_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(timeout))
    }

    /// The underlying socket (to send raw or partial bytes).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// `GET path` with only a `host` header.
    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.request("GET", path, &[], b"")
    }

    /// Send a request with `headers` (plus `host`, and `content-length` when `body` is not
    /// empty) and read its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Response> {
        let mut raw = format!("{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.host);
        for (n, v) in headers {
            raw.push_str(&format!("{n}: {v}\r\n"));
        }
        if !body.is_empty() {
            raw.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        raw.push_str("\r\n");
        let mut bytes = raw.into_bytes();
        bytes.extend_from_slice(body);
        self.send(&bytes, method == "HEAD")
    }

    /// Write `raw` as is and read one response (`head_request`: the request was `HEAD`).
    pub fn send(&mut self, raw: &[u8], head_request: bool) -> io::Result<Response> {
        self.stream.write_all(raw)?;
        self.read_response(head_request)
    }

    /// Read the next response from the connection, skipping 1xx interim responses.
    pub fn read_response(&mut self, head_request: bool) -> io::Result<Response> {
        let head = loop {
            match parse_response(&self.buf, 64 * 1024, head_request) {
                Ok(Parsed::Complete(head, len)) => {
                    self.buf.drain(..len);
                    if head.is_informational() {
                        continue;
                    }
                    break head;
                }
                Ok(Parsed::Partial) => {
                    if self.fill()? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed before a response head",
                        ));
                    }
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        };
        let mut dec = BodyDecoder::new(head.framing());
        let mut body = Vec::new();
        loop {
            while !self.buf.is_empty() && !dec.is_done() {
                let step = dec
                    .decode(&self.buf)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                body.extend_from_slice(&self.buf[step.data]);
                self.buf.drain(..step.consumed);
            }
            if dec.is_done() {
                return Ok(Response {
                    head,
                    body,
                    complete: true,
                });
            }
            if self.fill()? == 0 {
                let complete = dec.finish_on_eof().is_ok();
                return Ok(Response {
                    head,
                    body,
                    complete,
                });
            }
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 8192];
        let n = match self.stream.read(&mut tmp) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            r => r?,
        };
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }
}
