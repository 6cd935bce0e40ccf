//! `cargo xtask` — every project task in one place, with no dependencies beyond std.
//!
//! `cargo xtask test` runs every test the project has and installs what it needs
//! itself (nightly components, cargo-fuzz, redis-server, a Python venv with maturin),
//! so a fresh clone on a machine with only a Rust toolchain and Python passes it.
//!
//! `cargo xtask test --skip STEP[,STEP]` / `--only STEP[,STEP]` select steps; the step
//! names are printed as they run (`cargo xtask --help` lists them). The first step,
//! `tidy`, checks the repository's own hygiene (see `xtask/src/tidy.rs`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod bench;
#[allow(dead_code)] // helpers are used by steps as they grow
mod setup;
mod steps;
mod tidy;
mod verify;

pub(crate) type Result<T = ()> = std::result::Result<T, String>;

/// The usage text, printed by `--help` / `-h` / `help` (exit 0) and after an unknown
/// command (exit 1).
const USAGE: &str = "\
usage: cargo xtask test [--only STEP,...] [--skip STEP,...]
       cargo xtask bench [--save NAME] [--baseline NAME] [--full] [--rounds N] [--bench SUITE] [FILTER]
       cargo xtask bench --report
       cargo xtask fuzz [--long | --secs N | --runs N] [TARGET...]
       cargo xtask help";

/// The usage and the test steps in their order.
fn usage() -> String {
    format!("{USAGE}\n\ntest steps, in order: {}", steps::names())
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    // `cargo xtask --help`, `cargo xtask help`, `cargo xtask test --help`, ...
    let wants_help = match args.first().map(String::as_str) {
        Some("--help" | "-h" | "help") => true,
        Some("test" | "bench" | "fuzz") => args[1..].iter().any(|a| a == "--help" || a == "-h"),
        _ => false,
    };
    if wants_help {
        println!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let result = match args.first().map(String::as_str) {
        Some("test") => steps::test(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("fuzz") => steps::fuzz(&args[1..]),
        other => {
            eprintln!("{}", usage());
            Err(match other {
                Some(c) => format!("unknown command {c}"),
                None => "no command".into(),
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command in the workspace root, echoing it; fails on a non-zero exit.
pub(crate) fn run(cmd: &mut Command) -> Result {
    eprintln!("xtask: $ {}", describe(cmd));
    let status = cmd
        .current_dir_if_unset()
        .status()
        .map_err(|e| format!("cannot start {}: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed: {status}", describe(cmd)))
    }
}

/// True if the command runs and exits 0 (quietly).
pub(crate) fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

pub(crate) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

trait CurrentDir {
    fn current_dir_if_unset(&mut self) -> &mut Self;
}

impl CurrentDir for Command {
    fn current_dir_if_unset(&mut self) -> &mut Self {
        if self.get_current_dir().is_none() {
            self.current_dir(root());
        }
        self
    }
}

/// `cargo` with the toolchain the xtask itself was started with.
pub(crate) fn cargo() -> Command {
    Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Times a named step.
pub(crate) fn step(name: &str, f: impl FnOnce() -> Result) -> Result {
    eprintln!("xtask: ==> {name}");
    let t = Instant::now();
    let r = f();
    eprintln!(
        "xtask: <== {name} {} in {:.1}s",
        if r.is_ok() { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    r.map_err(|e| format!("step {name}: {e}"))
}
