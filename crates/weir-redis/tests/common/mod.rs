//! Helpers shared by the Redis test files: a `redis-server` per test on a free loopback
//! port, and a minimal executor (no tokio) proving the store's futures are runtime-agnostic.
#![allow(dead_code, unreachable_pub)] // each test file uses a subset; `pub` for its users

use std::future::Future;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

/// A `redis-server` child process, killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    /// Starts one on `port` (no persistence, DEBUG allowed from loopback).
    pub fn start_on(port: u16) -> Option<Server> {
        Self::start_with(port, &["--port", &port.to_string()])
    }

    /// Starts one with `args` (which say where it listens) and waits until `port` accepts.
    pub fn start_with(port: u16, args: &[&str]) -> Option<Server> {
        let child = Command::new("redis-server")
            .args(args)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let s = Server { child, port };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(s);
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start on {port}");
    }

    /// Starts one on a free port; `None` (skip) when redis-server is not installed,
    /// unless `WEIR_REQUIRE_REDIS=1` (set by `cargo xtask test`), which fails instead.
    pub fn start() -> Option<Server> {
        if !installed() {
            return None;
        }
        Self::start_on(free_port())
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Runs `redis-cli` against this server, ignoring the answer.
    pub fn cli(&self, args: &[&str]) {
        let _ = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .status();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when redis-server can run; false (skip) when it is missing, unless
/// `WEIR_REQUIRE_REDIS=1`, in which case a missing server fails the test.
pub fn installed() -> bool {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        let required = std::env::var("WEIR_REQUIRE_REDIS").is_ok_and(|v| !v.is_empty() && v != "0");
        assert!(
            !required,
            "redis-server is not installed but WEIR_REQUIRE_REDIS=1"
        );
        eprintln!("redis-server not installed: skipping (cargo xtask test installs it)");
    }
    ok
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` to completion on this thread, parking between polls.
pub fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park_timeout(Duration::from_millis(2));
    }
}

/// A timer for [`block_on`]: the future is ready once its deadline passed.
pub struct SleepTimer;
pub struct Sleep(Instant);
impl Future for Sleep {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
impl weir_policy::Timer for SleepTimer {
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        Sleep(Instant::now() + d)
    }
}
