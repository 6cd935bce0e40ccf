//! A `redis-server` child process on a free loopback port, for the global-limit scenarios.
//!
//! When `redis-server` is not installed, [`RedisServer::start`] returns `None` after printing
//! why, and the scenario returns early (skips) — unless the environment has
//! `WEIR_REQUIRE_REDIS=1` (`cargo xtask test` sets it after installing Redis), in which case
//! a missing server fails the test: CI never skips silently.

use core::time::Duration;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use crate::harness::free_port;

/// The variable that turns a missing `redis-server` from a skip into a failure.
pub const REQUIRE_ENV: &str = "WEIR_REQUIRE_REDIS";

/// Whether Redis tests must run (`WEIR_REQUIRE_REDIS` set to anything but "" / "0").
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether `redis-server` can be started; prints the skip message (or panics when
/// [`required`]) when it cannot.
pub fn available(test: &str) -> bool {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !required(),
            "{test}: redis-server is not installed but {REQUIRE_ENV}=1 (install it: apt-get install redis-server)"
        );
        eprintln!(
            "{test}: SKIPPED: redis-server is not installed (cargo xtask test installs it; set {REQUIRE_ENV}=1 to fail instead)"
        );
    }
    ok
}

/// A running `redis-server` (no persistence); killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    /// Its loopback port (kept across [`stop`](Self::stop) / [`restart`](Self::restart)).
    pub port: u16,
    /// Its `requirepass`, if any.
    password: Option<String>,
}

impl RedisServer {
    /// Starts one on a free port; `None` (skip) when `redis-server` is missing — see the
    /// module docs. A port taken between picking and binding is retried with a fresh one.
    pub fn start(test: &str) -> Option<RedisServer> {
        Self::start_with(test, None)
    }

    /// [`RedisServer::start`] with `requirepass password`.
    pub fn start_with_password(test: &str, password: &str) -> Option<RedisServer> {
        Self::start_with(test, Some(password))
    }

    fn start_with(test: &str, password: Option<&str>) -> Option<RedisServer> {
        if !available(test) {
            return None;
        }
        for _ in 0..5 {
            let port = free_port();
            if let Some(child) = spawn(port, password, Duration::from_secs(10)) {
                return Some(RedisServer {
                    child: Some(child),
                    port,
                    password: password.map(str::to_owned),
                });
            }
        }
        panic!("{test}: redis-server failed to start on 5 fresh ports");
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server (its data is gone: nothing is persisted).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a fresh server on the same port (retrying for a few seconds while the port is
    /// still held, e.g. by a socket closing).
    pub fn restart(&mut self) {
        self.stop();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Some(c) = spawn(self.port, self.password.as_deref(), Duration::from_secs(5)) {
                self.child = Some(c);
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server could not start again on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `redis-server` on `port`; `None` if it exited (port taken), panics if it neither
/// listens nor exits within `limit`.
fn spawn(port: u16, password: Option<&str>, limit: Duration) -> Option<Child> {
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(password.iter().flat_map(|pw| ["--requirepass", pw]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let until = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // Someone listens; make sure it is this server (not a process that took the port).
            thread::sleep(Duration::from_millis(30));
            if let Ok(Some(_)) = child.try_wait() {
                return None;
            }
            return Some(child);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redis-server did not listen on 127.0.0.1:{port} within {limit:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The lease bound, checked: over `span` seconds a fleet of `instances`, each taking up to
/// `lease` tokens per round trip from one bucket of `rate`/s and `burst`, admitted
/// `admitted` — at most the exact single-bucket ideal plus `instances × lease`, and at least
/// `used_share` of the ideal (the limit is used, not starved by expiring leases). Prints the
/// figures; panics naming them when a side fails.
pub fn assert_lease_bound(
    admitted: u64,
    (rate, burst, span): (u64, u64, f64),
    (instances, lease): (u64, u64),
    used_share: f64,
) {
    let ideal = burst as f64 + rate as f64 * span;
    let bound = ideal + (instances * lease) as f64;
    eprintln!(
        "lease {lease}: admitted {admitted} over {span:.3}s, ideal {ideal:.1}, bound {bound:.1}"
    );
    assert!(
        admitted as f64 <= bound,
        "admitted {admitted} > ideal {ideal:.1} + {instances} instances x lease {lease}"
    );
    assert!(
        admitted as f64 >= used_share * ideal,
        "the limit is used: admitted only {admitted} of ideal {ideal:.1}"
    );
}
