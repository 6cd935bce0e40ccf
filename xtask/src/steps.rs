//! The steps of `cargo xtask test`, `bench` and `fuzz`.

use crate::{Result, cargo, root, run, setup, step};
use std::process::Command;

/// A test step: name and body.
type Step = (&'static str, fn() -> Result);

const TEST_STEPS: &[Step] = &[
    ("tidy", crate::tidy::tidy),
    ("fmt", fmt),
    ("clippy", clippy),
    ("unit", unit),
    ("python", python),
    ("loom", crate::verify::loom),
    ("miri", crate::verify::miri),
    ("nostd", crate::verify::nostd),
    ("fuzz-smoke", crate::verify::fuzz_smoke),
];

pub(crate) fn test(args: &[String]) -> Result {
    let (only, skip) = selection(args)?;
    for (name, f) in TEST_STEPS {
        let wanted = only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
        if wanted && !skip.iter().any(|x| x == name) {
            step(name, *f)?;
        }
    }
    eprintln!("xtask: all selected test steps passed");
    Ok(())
}

fn selection(args: &[String]) -> Result<(Option<Vec<String>>, Vec<String>)> {
    let mut only = None;
    let mut skip = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let list = |v: Option<&String>| -> Result<Vec<String>> {
            let v = v.ok_or_else(|| format!("{a} needs a value"))?;
            Ok(v.split(',').map(str::to_owned).collect())
        };
        match a.as_str() {
            "--only" => only = Some(list(it.next())?),
            "--skip" => skip.extend(list(it.next())?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if let Some(o) = &only {
        for n in o.iter().chain(&skip) {
            if !TEST_STEPS.iter().any(|(s, _)| s == n) {
                return Err(format!("unknown step {n}; steps: {}", names()));
            }
        }
    }
    Ok((only, skip))
}

pub(crate) fn names() -> String {
    TEST_STEPS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt() -> Result {
    run(cargo().args(["fmt", "--all", "--", "--check"]))
}

/// Clippy on every crate and target of the workspace, warnings as errors: the workspace
/// lints (`missing_docs`, `unreachable_pub`, ...) and clippy's defaults only gate when a
/// warning fails the run. After `fmt` (cheap) and before the tests (a warning is found
/// without waiting for them). The fuzz crate is a workspace of its own, built by
/// `fuzz-smoke` with the nightly toolchain; it declares the same lints.
fn clippy() -> Result {
    // pingora-core's build script builds zlib-ng through cmake (weir-pingora).
    setup::ensure_apt(&[("cmake", "cmake")])?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
}

/// Unit, property and integration tests of every crate — including the end-to-end suites
/// (`crates/weir-e2e`, run by each frontend's tests against its real binary) and the tests
/// against a real `redis-server` (and a six-node Redis Cluster on loopback, joined with
/// `redis-cli`), which is installed first; with `WEIR_REQUIRE_REDIS=1` a
/// Redis test that cannot start Redis fails instead of skipping. `--all-targets` also builds
/// every criterion suite and runs each benchmark once in test mode, so the benches never
/// rot (without a second, optimised build of their dependencies).
fn unit() -> Result {
    // pingora-core builds zlib-ng through cmake (weir-pingora).
    // redis-cli (redis-tools) joins the Redis Cluster of the cluster tests; openssl makes
    // the certificates of the TLS tests (weir_e2e::certs).
    setup::ensure_apt(&[
        ("cmake", "cmake"),
        ("redis-server", "redis-server"),
        ("redis-cli", "redis-tools"),
        ("openssl", "openssl"),
    ])?;
    run(cargo()
        .args(["test", "--workspace", "--all-targets"])
        .env("WEIR_REQUIRE_REDIS", "1"))?;
    run(cargo().args(["test", "--workspace", "--doc"]))
}

pub(crate) fn fuzz(args: &[String]) -> Result {
    crate::verify::fuzz(args)
}

/// Python packages the `python` step installs into `target/venv`.
const PY_PACKAGES: &[&str] = &[
    "maturin>=1.16,<2",
    "pytest",
    "hypothesis",
    "numpy",
    "matplotlib",
];

/// A command run with the venv activated (`VIRTUAL_ENV`, its `bin` first on `PATH`).
fn in_venv(python: &std::path::Path, program: &std::path::Path) -> Command {
    let bin = python.parent().expect("venv bin");
    let venv = bin.parent().expect("venv");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let mut c = Command::new(program);
    c.env("VIRTUAL_ENV", venv)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .env_remove("PYTHONHOME")
        .env("MPLBACKEND", "Agg");
    c
}

/// Builds the `weir` extension into the venv, runs pytest and the examples headless.
fn python() -> Result {
    let py = setup::ensure_venv(PY_PACKAGES)?;
    let pkg = root().join("bindings").join("python");
    let maturin = py.with_file_name("maturin");
    run(in_venv(&py, &maturin)
        .args(["develop", "--release", "--quiet"])
        .current_dir(&pkg))?;
    run(in_venv(&py, &py)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .env("HYPOTHESIS_PROFILE", "ci")
        .current_dir(&pkg))?;
    // Every script in examples/python/ (not the `_` helpers), headless, writing into target/ (the committed
    // PNGs under docs/img are refreshed by running a script without --out).
    let out = root().join("target").join("python-examples");
    let dir = root().join("examples").join("python");
    let mut examples: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        // `_figure.py` and the like are helpers the examples import, not examples.
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('_'))
        })
        .collect();
    examples.sort();
    for ex in examples {
        run(in_venv(&py, &py).arg(ex).arg("--out").arg(&out))?;
    }
    Ok(())
}
