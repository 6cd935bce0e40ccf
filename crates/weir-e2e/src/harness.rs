//! Starting, signalling and stopping a frontend process.

use core::net::SocketAddr;
use core::time::Duration;
use std::collections::BTreeSet;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use crate::client::{Client, Resp};

/// Ports [`free_port`] has handed out in this test process.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A free loopback port (bound then released), never the same one twice in a test process:
/// once released, the kernel may pick the same port again for a concurrent test before
/// either gateway binds it, and a client of one would then talk to the other. Another
/// process may still take it before the caller binds it (an outgoing connection's ephemeral
/// port): [`Gateway::start`] retries with fresh ports when that happens.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind");
        if HANDED_OUT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return port;
        }
    }
}

/// Sockets bound (never listening) for the whole test process: see [`dead_addr`].
static DEAD: Mutex<Vec<socket2::Socket>> = Mutex::new(Vec::new());

/// A loopback address nothing listens on, for the lifetime of the test process: the port
/// stays bound to a socket that never listens, so connecting is refused and no other test
/// (or gateway) can start serving on it — a released port could be taken by a concurrent
/// test and turn a "dead" upstream alive.
pub fn dead_addr() -> SocketAddr {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind");
    let addr = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("bound address");
    DEAD.lock().unwrap_or_else(|p| p.into_inner()).push(sock);
    addr
}

/// A per-test scratch directory (`weir-e2e-*` in the temp dir), removed with everything in
/// it when the guard is dropped: keep the guard alive as long as a process uses the directory.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("weir-e2e-")
        .tempdir()
        .expect("scratch dir")
}

/// A running frontend process with its config file; killed on drop.
pub struct Gateway {
    child: Option<Child>,
    /// Main listen address.
    pub addr: SocketAddr,
    /// Admin address.
    pub admin: SocketAddr,
    /// The config file it was started with (rewrite it to test reloads).
    pub config_path: PathBuf,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// While starting: a failed attempt must not remove the config a retry reuses.
    keep_dir: bool,
}

/// How many times [`Gateway::start`] tries fresh ports.
pub const START_ATTEMPTS: usize = 5;

/// `config` written to `gateway.toml` in a fresh scratch directory.
fn write_config(config: &str) -> PathBuf {
    // The gateway removes the directory when it is dropped (unless a retry keeps it).
    let path = scratch_dir().keep().join("gateway.toml");
    std::fs::write(&path, config).expect("write config");
    path
}

enum Fail {
    AddrInUse(String),
    Other(String),
}

/// Whether a start-up error says a port was taken (any frontend's wording of EADDRINUSE).
fn is_addr_in_use(stderr: &str) -> bool {
    let e = stderr.to_ascii_lowercase();
    e.contains("address already in use")
        || e.contains("addrinuse")
        || e.contains("os error 98")
        || e.contains("address in use")
}

fn capture(mut r: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    out
}

impl Gateway {
    /// Writes `config` to a scratch file and starts `bin` on it with fresh loopback ports and
    /// one worker; returns once the admin `/healthz` answers 200 and the main port accepts
    /// (panics after 15 s, with the process's stderr).
    pub fn start(bin: &Path, config: &str) -> Gateway {
        Self::start_with(bin, config, &[])
    }

    /// [`start`](Self::start) with extra command-line arguments.
    ///
    /// The listen and admin ports are picked free just before the process starts; if it
    /// exits early because one was taken in between ("address in use"), it is started
    /// again on fresh ports (up to [`START_ATTEMPTS`] times). Any other failure panics with
    /// the process's stderr.
    pub fn start_with(bin: &Path, config: &str, extra: &[&str]) -> Gateway {
        Self::start_with_env(bin, config, extra, &[])
    }

    /// [`start_with`](Self::start_with) with extra environment variables for the process
    /// (e.g. `secret_env` / `admin_token_env` values).
    pub fn start_with_env(
        bin: &Path,
        config: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Gateway {
        let config_path = write_config(config);
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(bin, &config_path, extra, env, None) {
                Ok(gw) => return gw,
                Err(Fail::AddrInUse(stderr)) => last = stderr,
                Err(Fail::Other(msg)) => panic!("{msg}"),
            }
        }
        panic!(
            "{} could not bind fresh ports {START_ATTEMPTS} times; last stderr:\n{last}",
            bin.display()
        );
    }

    /// Starts `bin` on `config` listening on `addr` (a port a test chose, e.g. the one a
    /// gateway that just stopped was serving) with a fresh admin port; `Err` with the
    /// process's stderr if it does not become ready.
    pub fn start_at(
        bin: &Path,
        config: &str,
        addr: SocketAddr,
        extra: &[&str],
    ) -> Result<Gateway, String> {
        Self::try_start(bin, &write_config(config), extra, &[], Some(addr)).map_err(|e| match e {
            Fail::AddrInUse(m) | Fail::Other(m) => m,
        })
    }

    fn try_start(
        bin: &Path,
        config_path: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        at: Option<SocketAddr>,
    ) -> Result<Gateway, Fail> {
        let addr = at.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(config_path)
            .args(["--listen", &addr.to_string(), "--admin", &admin.to_string()])
            .args(["--workers", "1"])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stdout = capture(child.stdout.take().unwrap());
        let stderr = capture(child.stderr.take().unwrap());
        let mut gw = Gateway {
            child: Some(child),
            addr,
            admin,
            config_path: config_path.to_path_buf(),
            stdout,
            stderr,
            keep_dir: true,
        };
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(r) = gw.try_admin("GET", "/healthz")
                && r.status == 200
                && TcpStream::connect(addr).is_ok()
            {
                gw.keep_dir = false;
                return Ok(gw);
            }
            if let Some(Ok(Some(st))) = gw.child.as_mut().map(Child::try_wait) {
                // Let the capture threads drain the pipes before reading them.
                thread::sleep(Duration::from_millis(50));
                let err = gw.stderr_text();
                if is_addr_in_use(&err) {
                    eprintln!(
                        "weir-e2e: {} could not bind {addr} / {admin} (taken since picked); \
                         retrying on fresh ports",
                        bin.display()
                    );
                    return Err(Fail::AddrInUse(err));
                }
                return Err(Fail::Other(format!(
                    "{} exited early ({st}); stderr:\n{err}\nstdout:\n{}",
                    bin.display(),
                    gw.stdout_text()
                )));
            }
            if Instant::now() >= until {
                return Err(Fail::Other(format!(
                    "{} did not become ready within 15 s; stderr:\n{}",
                    bin.display(),
                    gw.stderr_text()
                )));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// One admin request.
    pub fn try_admin(&self, method: &str, path: &str) -> std::io::Result<Resp> {
        let mut c = Client::connect(self.admin)?;
        let raw = format!("{method} {path} HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\n\r\n");
        c.exchange(raw.as_bytes(), method == "HEAD")
    }

    /// One admin request with extra header lines (each "name: value"; panics on I/O errors).
    pub fn admin_with(&self, method: &str, path: &str, headers: &[&str]) -> Resp {
        let mut c =
            Client::connect(self.admin).unwrap_or_else(|e| panic!("admin {method} {path}: {e}"));
        let mut raw = format!("{method} {path} HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\n");
        for h in headers {
            raw.push_str(h);
            raw.push_str("\r\n");
        }
        raw.push_str("\r\n");
        c.exchange(raw.as_bytes(), method == "HEAD")
            .unwrap_or_else(|e| panic!("admin {method} {path}: {e}"))
    }

    /// One admin request with a body and extra header lines (panics on I/O errors).
    pub fn admin_body(&self, method: &str, path: &str, headers: &[&str], body: &str) -> Resp {
        let mut c =
            Client::connect(self.admin).unwrap_or_else(|e| panic!("admin {method} {path}: {e}"));
        let raw = crate::client::request(method, path, headers, Some(body.as_bytes()));
        c.exchange(raw.as_bytes(), false)
            .unwrap_or_else(|e| panic!("admin {method} {path}: {e}"))
    }

    /// One admin request (panics on I/O errors).
    pub fn admin(&self, method: &str, path: &str) -> Resp {
        self.try_admin(method, path)
            .unwrap_or_else(|e| panic!("admin {method} {path}: {e}"))
    }

    /// What the process wrote to stdout so far (the access log by default).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// What the process wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Sends a signal (`"INT"`, `"TERM"`) to the process.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -{sig} {pid} failed");
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return Some(st);
            }
            if Instant::now() >= until {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.keep_dir
            && let Some(dir) = self.config_path.parent()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_never_repeats_in_a_process() {
        let picks: Vec<u16> = (0..300).map(|_| free_port()).collect();
        let distinct: BTreeSet<u16> = picks.iter().copied().collect();
        assert_eq!(distinct.len(), picks.len(), "{picks:?}");
        assert!(picks.iter().all(|&p| p != 0));
    }
}
