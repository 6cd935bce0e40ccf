//! Installing what the tests need, idempotently: each helper checks first and does
//! nothing when the tool is already there, so local runs stay fast.

use crate::{Result, cargo, root, run, succeeds};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

static APT_UPDATED: AtomicBool = AtomicBool::new(false);

/// Makes sure each `(binary, debian package)` pair is installed, via apt-get.
pub(crate) fn ensure_apt(pairs: &[(&str, &str)]) -> Result {
    let missing: Vec<&str> = pairs
        .iter()
        .filter(|(bin, _)| !have(bin))
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let sudo = !is_root() && have("sudo");
    let apt = |args: &[&str]| -> Command {
        let mut c = if sudo {
            Command::new("sudo")
        } else {
            Command::new("apt-get")
        };
        if sudo {
            c.arg("apt-get");
        }
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    if !APT_UPDATED.swap(true, Ordering::SeqCst) {
        run(&mut apt(&["update", "-qq"]))?;
    }
    let mut c = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    c.args(&missing);
    run(&mut c)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
}

/// True if `bin` is on PATH.
pub(crate) fn have(bin: &str) -> bool {
    succeeds(Command::new("sh").args(["-c", &format!("command -v {bin}")]))
}

/// Makes sure the nightly toolchain has these components and targets.
pub(crate) fn ensure_nightly(components: &[&str], targets: &[&str]) -> Result {
    let list = |what: &str| -> String {
        Command::new("rustup")
            .args(["+nightly", what, "list", "--installed"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let have_c = list("component");
    for c in components {
        if !have_c.lines().any(|l| l.starts_with(c)) {
            run(Command::new("rustup").args(["component", "add", c, "--toolchain", "nightly"]))?;
        }
    }
    let have_t = list("target");
    for t in targets {
        if !have_t.lines().any(|l| l.trim() == *t) {
            run(Command::new("rustup").args(["target", "add", t, "--toolchain", "nightly"]))?;
        }
    }
    Ok(())
}

/// Makes sure `cargo fuzz` is installed.
pub(crate) fn ensure_cargo_fuzz() -> Result {
    if succeeds(cargo().args(["fuzz", "--version"])) {
        return Ok(());
    }
    run(cargo().args(["install", "cargo-fuzz", "--locked"]))
}

/// A Python virtual environment under `target/venv` with these pip packages; returns
/// the path of its `python`.
pub(crate) fn ensure_venv(packages: &[&str]) -> Result<PathBuf> {
    let venv = root().join("target").join("venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            let name = p.split(['=', '<', '>', '[']).next().unwrap_or(p);
            !succeeds(Command::new(&python).args(["-m", "pip", "show", "-q", name]))
        })
        .collect();
    if !missing.is_empty() {
        let mut c = Command::new(&python);
        c.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(&missing);
        run(&mut c)?;
    }
    Ok(python)
}

/// A `redis-server` on a loopback port, stopped on drop.
pub(crate) struct RedisServer {
    pub(crate) port: u16,
    pidfile: PathBuf,
}

impl RedisServer {
    /// Installs redis-server if needed and starts one on `port` (no persistence).
    pub(crate) fn start(port: u16) -> Result<RedisServer> {
        ensure_apt(&[("redis-server", "redis-server")])?;
        let pidfile = root().join("target").join(format!("redis-{port}.pid"));
        let _ = std::fs::create_dir_all(root().join("target"));
        run(Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--daemonize", "yes", "--pidfile"])
            .arg(&pidfile))?;
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(RedisServer { port, pidfile });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(format!("redis-server did not listen on 127.0.0.1:{port}"))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}
