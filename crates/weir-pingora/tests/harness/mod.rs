//! Black-box harness for a weir frontend binary: spawn it on a config with free loopback
//! ports, wait until it listens, talk plain HTTP/1.1 to it, stop it with a signal.
//!
//! Frontend-agnostic on purpose (it only needs a binary path that takes `--config`,
//! `--listen`, `--admin`), so the shared scenario suite can reuse it for every frontend.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A free loopback port (bound then released; the usual small race is acceptable here).
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A running frontend process.
pub struct Proc {
    child: Option<Child>,
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    pub config: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "weir-e2e-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

impl Proc {
    /// Writes `config` to a scratch file and starts `bin --config F --listen A --admin B`,
    /// waiting (≤ 30 s) until both ports accept connections.
    pub fn spawn(bin: &Path, config: &str) -> Proc {
        Proc::spawn_with(bin, config, &[])
    }

    pub fn spawn_with(bin: &Path, config: &str, extra: &[&str]) -> Proc {
        let path = scratch("weir.toml");
        std::fs::write(&path, config).unwrap();
        let (listen, admin) = (free_addr(), free_addr());
        let stdout = path.with_file_name("stdout.log");
        let stderr = path.with_file_name("stderr.log");
        let child = Command::new(bin)
            .arg("--config")
            .arg(&path)
            .args([
                "--listen",
                &listen.to_string(),
                "--admin",
                &admin.to_string(),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut p = Proc {
            child: Some(child),
            listen,
            admin,
            config: path,
            stdout,
            stderr,
        };
        p.wait_listening(Duration::from_secs(30));
        p
    }

    fn wait_listening(&mut self, limit: Duration) {
        let t = Instant::now();
        for addr in [self.listen, self.admin] {
            while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
                if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                    panic!("frontend exited early ({status}): {}", self.stderr_text());
                }
                assert!(
                    t.elapsed() < limit,
                    "{addr} not listening after {limit:?}: {}",
                    self.stderr_text()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn stdout_text(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends `signal` (e.g. "INT", "TERM") and waits ≤ `limit` for the exit.
    pub fn signal(&mut self, signal: &str, limit: Duration) -> (ExitStatus, Duration) {
        let t = Instant::now();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} failed");
        let mut child = self.child.take().unwrap();
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return (s, t.elapsed());
            }
            if t.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no exit {limit:?} after SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn get(&self, path: &str) -> Response {
        request(self.listen, "GET", path, &[], b"")
    }

    /// Sum of the admin `/metrics` samples whose line starts with `prefix`
    /// (e.g. `weir_upstream_attempts_total{route="orders"`).
    pub fn metric_sum(&self, prefix: &str) -> f64 {
        self.admin_req("GET", "/metrics")
            .text()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    pub fn admin_req(&self, method: &str, path: &str) -> Response {
        request(self.admin, method, path, &[], b"")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub elapsed: Duration,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends raw bytes on a fresh connection and returns everything read until the server closes
/// (or 10 s pass).
pub fn raw_exchange(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// One request on a fresh connection (`connection: close`), 10 s socket timeouts.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut BufReader::new(s), method == "HEAD", t)
}

fn read_response(r: &mut BufReader<TcpStream>, head_only: bool, t: Instant) -> Response {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if !head_only && status != 204 && status != 304 {
        if let Some(len) = find("content-length") {
            body.resize(len.parse().unwrap(), 0);
            r.read_exact(&mut body).unwrap();
        } else if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let mut l = String::new();
                r.read_line(&mut l).unwrap();
                let n = usize::from_str_radix(l.trim().split(';').next().unwrap(), 16).unwrap();
                let mut chunk = vec![0; n + 2];
                r.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            let _ = r.read_to_end(&mut body);
        }
    }
    Response {
        status,
        headers,
        body,
        elapsed: t.elapsed(),
    }
}
