//! Verification steps of weir-core: loom model checking, miri, the no_std build gate,
//! and fuzzing (a short smoke run in `cargo xtask test`, long runs in `cargo xtask fuzz`).
//!
//! Nightly-only tools run through the rustup proxy (`cargo +nightly ...`), not through
//! `$CARGO`, which is the stable toolchain's cargo binary that started the xtask.
//! What each model and target checks is in `docs/VERIFICATION.md`.

use crate::setup::{ensure_cargo_fuzz, ensure_nightly};
use crate::{Result, cargo, describe, root};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall-clock bound of running the loom models (the build before it is not bounded).
const LOOM_TIMEOUT: Duration = Duration::from_secs(420);
/// Wall-clock bound of the miri step (the budget is ~3 minutes; this is the hard stop).
/// It includes building the miri sysroot and the crate, which miri does not separate.
const MIRI_TIMEOUT: Duration = Duration::from_secs(420);
/// Seconds of fuzzing per target in the smoke run of `cargo xtask test`.
const SMOKE_SECS: u64 = 12;
/// Seconds per target of a plain `cargo xtask fuzz` (without `--long`).
const DEFAULT_FUZZ_SECS: u64 = 60;
/// Executions per target of `cargo xtask fuzz --long`.
const LONG_RUNS: u64 = 10_000_000;
/// The no_std gate's target: a Cortex-M4F without 64-bit atomics.
const NOSTD_TARGET: &str = "thumbv7em-none-eabihf";

/// `cargo` through the rustup proxy with the nightly toolchain.
fn nightly() -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly");
    // The stable cargo that runs the xtask exports these; they must not leak into nightly.
    c.env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC");
    c
}

/// Loom models (`crates/weir-core/tests/loom_*.rs`), in release mode, in their own target
/// dir so that the `--cfg weir_loom` build never invalidates the normal one.
/// Also runs the `loom` modules inside the crate (`cargo test --lib -- loom`).
pub(crate) fn loom() -> Result {
    let loom_test = |target: &[&str]| {
        let mut c = cargo();
        c.args(["test", "--release", "-p", "weir-core"])
            .args(target)
            .env("RUSTFLAGS", "--cfg weir_loom")
            .env("CARGO_TARGET_DIR", root().join("target").join("loom"))
            // The models need speed of checking, not of the code: skip the release
            // profile's whole-program LTO and its single codegen unit (build time).
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .env("LOOM_MAX_PREEMPTIONS", "2");
        c
    };
    let models: &[&str] = &["--test", "loom_*"];
    let in_crate: &[&str] = &["--lib", "--", "loom"];
    // Build without a time limit (a cold build on a busy machine takes minutes), then
    // bound the model checking itself.
    crate::run(&mut loom_test(&["--lib", "--test", "loom_*", "--no-run"]))?;
    let started = Instant::now();
    run_bounded(&mut loom_test(models), LOOM_TIMEOUT)?;
    run_bounded(
        &mut loom_test(in_crate),
        LOOM_TIMEOUT.saturating_sub(started.elapsed()),
    )
}

/// `cargo +nightly miri test -p weir-core`. Isolation is disabled because proptest reads
/// its environment and its regression files; proptest suites run few cases under miri.
pub(crate) fn miri() -> Result {
    ensure_nightly(&["miri", "rust-src"], &[])?;
    let mut c = nightly();
    c.args(["miri", "test", "-p", "weir-core"])
        .env("MIRIFLAGS", "-Zmiri-disable-isolation")
        .env("PROPTEST_CASES", "8");
    run_bounded(&mut c, MIRI_TIMEOUT)
}

/// The no_std gate: build weir-core for a bare-metal target with `-Zbuild-std=core`, so any
/// use of `alloc` or `std` fails to compile (a prebuilt std for the target would hide it).
pub(crate) fn nostd() -> Result {
    ensure_nightly(&["rust-src"], &[NOSTD_TARGET])?;
    let mut c = nightly();
    c.args(["build", "-p", "weir-core", "--target", NOSTD_TARGET])
        .args([
            "-Zbuild-std=core",
            "--no-default-features",
            "--features",
            "fallback",
        ]);
    crate::run(&mut c)
}

/// A short run of every fuzz target, so that none of them rots.
pub(crate) fn fuzz_smoke() -> Result {
    // A fixed seed makes the smoke run the same mutation sequence on every machine: a
    // slower machine runs a prefix of what a local run of the same length checked. Long
    // runs (`cargo xtask fuzz`) take a fresh seed each time to explore.
    fuzz_targets(&[], Budget::Seconds(SMOKE_SECS), Some(SMOKE_SEED), false)
}

/// The libFuzzer seed of the smoke run.
const SMOKE_SEED: u64 = 20_261_129;

/// How long each target runs.
#[derive(Clone, Copy)]
enum Budget {
    Seconds(u64),
    Runs(u64),
}

/// `cargo xtask fuzz [--long] [--secs N] [TARGET...]`.
pub(crate) fn fuzz(args: &[String]) -> Result {
    let mut budget = Budget::Seconds(DEFAULT_FUZZ_SECS);
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--long" => budget = Budget::Runs(LONG_RUNS),
            "--secs" => {
                let n = it.next().ok_or("--secs needs a number")?;
                budget = Budget::Seconds(n.parse().map_err(|_| format!("bad --secs {n}"))?);
            }
            "--runs" => {
                let n = it.next().ok_or("--runs needs a number")?;
                budget = Budget::Runs(n.parse().map_err(|_| format!("bad --runs {n}"))?);
            }
            t if t.starts_with('-') => return Err(format!("unknown argument {t}")),
            t => targets.push(t.to_owned()),
        }
    }
    fuzz_targets(&targets, budget, None, true)
}

fn fuzz_targets(wanted: &[String], budget: Budget, seed: Option<u64>, verbose: bool) -> Result {
    ensure_nightly(&["rust-src"], &[])?;
    ensure_cargo_fuzz()?;
    let all = list_targets()?;
    let targets: Vec<String> = if wanted.is_empty() {
        all
    } else {
        for t in wanted {
            if !all.contains(t) {
                return Err(format!(
                    "unknown fuzz target {t}; targets: {}",
                    all.join(", ")
                ));
            }
        }
        wanted.to_vec()
    };
    // Build all targets first so that the time budget below is spent fuzzing.
    crate::run(
        nightly()
            .current_dir(root().join("fuzz"))
            .args(["fuzz", "build"]),
    )?;
    let mut summary = Vec::new();
    for t in &targets {
        let started = Instant::now();
        let mut c = nightly();
        // Inputs up to 1 KiB: a few hundred operations, ample for these state machines,
        // and several times more executions per second than libFuzzer's 4 KiB default.
        c.current_dir(root().join("fuzz"))
            .args(["fuzz", "run", t, "--", "-max_len=1024"]);
        match budget {
            Budget::Seconds(s) => c.arg(format!("-max_total_time={s}")),
            Budget::Runs(n) => c.arg(format!("-runs={n}")),
        };
        if let Some(seed) = seed {
            c.arg(format!("-seed={seed}"));
        }
        let runs = run_fuzzer(&mut c, verbose).map_err(|e| format!("fuzz target {t}: {e}"))?;
        let secs = started.elapsed().as_secs_f64();
        eprintln!("xtask: fuzz {t}: {runs} executions in {secs:.1}s, no crash");
        summary.push((t.clone(), runs, secs));
    }
    eprintln!("xtask: fuzz summary (target, executions, seconds):");
    for (t, runs, secs) in summary {
        eprintln!("xtask:   {t:<24} {runs:>12} {secs:>8.1}");
    }
    Ok(())
}

fn list_targets() -> Result<Vec<String>> {
    let out = nightly()
        .current_dir(root().join("fuzz"))
        .args(["fuzz", "list"])
        .output()
        .map_err(|e| format!("cannot run cargo fuzz list: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo fuzz list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Runs a libFuzzer target; returns the number of executions it reports. Shows only the
/// summary lines unless `verbose`, and the tail of the output on failure.
fn run_fuzzer(cmd: &mut Command, verbose: bool) -> Result<u64> {
    eprintln!("xtask: $ {}", describe(cmd));
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", describe(cmd)))?;
    let stderr = child.stderr.take().expect("piped");
    let mut tail: Vec<String> = Vec::new();
    let mut runs = 0u64;
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        // libFuzzer's last line: "Done 10000000 runs in 93 second(s)".
        if let Some(rest) = line.strip_prefix("Done ") {
            runs = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
        let notable = line.starts_with("Done ")
            || line.contains("ERROR")
            || line.contains("panicked")
            || line.contains("SUMMARY")
            || line.contains("artifact");
        if verbose || notable {
            eprintln!("{line}");
        }
        tail.push(line);
        if tail.len() > 80 {
            tail.remove(0);
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(runs)
    } else {
        if !verbose {
            for l in &tail {
                eprintln!("{l}");
            }
        }
        Err(format!("{} failed: {status}", describe(cmd)))
    }
}

/// Runs a command in its own process group and kills the whole group when it outlives
/// `limit` (a model-checking or miri run that explodes must not hang CI).
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result {
    eprintln!("xtask: $ {} (limit {}s)", describe(cmd), limit.as_secs());
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    let mut child = cmd
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", describe(cmd)))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return if status.success() {
                Ok(())
            } else {
                Err(format!("{} failed: {status}", describe(cmd)))
            };
        }
        if started.elapsed() > limit {
            // The child leads its own process group: end it and everything it started.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            return Err(format!(
                "{} exceeded its time limit of {}s",
                describe(cmd),
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
