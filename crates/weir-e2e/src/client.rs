//! A small blocking HTTP/1.1 client that sends raw bytes (so tests can send malformed input)
//! and reads responses with weir-http's parser.

use core::net::SocketAddr;
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use weir_http::{BodyDecoder, Parsed};

/// Default read/write timeout of test sockets.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A response as the client saw it.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Header lines in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Decoded body.
    pub body: Vec<u8>,
    /// Whether the body ended early (the connection closed before its framing said).
    pub truncated: bool,
    /// When the response head was complete.
    pub head_at: Instant,
}

impl Resp {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `x-weir-reason`, or "".
    pub fn reason(&self) -> &str {
        self.header("x-weir-reason").unwrap_or("")
    }
}

/// One client connection (keep-alive capable).
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::new(),
        })
    }

    /// The socket (for partial writes, timeouts, shutdown).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, raw: &[u8]) -> io::Result<()> {
        self.stream.write_all(raw)
    }

    /// Sends `raw` and reads one response (`head_req`: the request was HEAD).
    pub fn exchange(&mut self, raw: &[u8], head_req: bool) -> io::Result<Resp> {
        self.send_raw(raw)?;
        self.read_response(head_req)
    }

    /// `GET path` with extra header lines (each "name: value").
    pub fn get(&mut self, path: &str, headers: &[&str]) -> io::Result<Resp> {
        let raw = request("GET", path, headers, None);
        self.exchange(raw.as_bytes(), false)
    }

    /// Reads one response.
    pub fn read_response(&mut self, head_req: bool) -> io::Result<Resp> {
        let (head, len) = loop {
            match weir_http::parse_response(&self.buf, 1 << 20, head_req) {
                Ok(Parsed::Complete(h, len)) if h.is_informational() => {
                    self.buf.drain(..len);
                }
                Ok(Parsed::Complete(h, len)) => break (h, len),
                Ok(Parsed::Partial) => {
                    if self.fill()? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!(
                                "connection closed before a response head ({} bytes: {:?})",
                                self.buf.len(),
                                String::from_utf8_lossy(&self.buf)
                            ),
                        ));
                    }
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
        };
        let head_at = Instant::now();
        self.buf.drain(..len);
        let headers = head
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.to_ascii_lowercase(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let mut dec = BodyDecoder::new(head.framing());
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            while !self.buf.is_empty() && !dec.is_done() {
                let step = dec
                    .decode(&self.buf)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                body.extend_from_slice(&self.buf[step.data]);
                self.buf.drain(..step.consumed);
                if step.consumed == 0 {
                    break;
                }
            }
            if dec.is_done() {
                break;
            }
            match self.fill() {
                Ok(0) | Err(_) => {
                    truncated = dec.finish_on_eof().is_err();
                    break;
                }
                Ok(_) => {}
            }
        }
        Ok(Resp {
            status: head.status(),
            headers,
            body,
            truncated,
            head_at,
        })
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Whether the server closed the connection (EOF within `wait`).
    pub fn is_closed(&mut self, wait: Duration) -> bool {
        let _ = self.stream.set_read_timeout(Some(wait));
        let mut b = [0u8; 1];
        let closed = matches!(self.stream.read(&mut b), Ok(0))
            || matches!(self.stream.read(&mut b), Err(ref e) if e.kind() == io::ErrorKind::ConnectionReset);
        let _ = self.stream.set_read_timeout(Some(IO_TIMEOUT));
        closed
    }
}

/// Renders a request: `METHOD path HTTP/1.1`, `host`, the given header lines, and a body with
/// `content-length` when given.
pub fn request(method: &str, path: &str, headers: &[&str], body: Option<&[u8]>) -> String {
    let mut s = format!("{method} {path} HTTP/1.1\r\nhost: test\r\n");
    for h in headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    if let Some(b) = body {
        s.push_str(&format!("content-length: {}\r\n\r\n", b.len()));
        s.push_str(&String::from_utf8_lossy(b));
    } else {
        s.push_str("\r\n");
    }
    s
}

/// One request on a new connection.
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Resp {
    Client::connect(addr)
        .and_then(|mut c| c.get(path, headers))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// Sends raw bytes on a new connection and reads one response.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Resp {
    Client::connect(addr)
        .and_then(|mut c| c.exchange(bytes, false))
        .unwrap_or_else(|e| panic!("raw request {:?}: {e}", String::from_utf8_lossy(bytes)))
}
