//! The steps of `cargo xtask test`, `bench` and `fuzz`.

use crate::setup::ensure_apt;
use crate::{Result, cargo, run, step};

/// A test step: name and body.
type Step = (&'static str, fn() -> Result);

const TEST_STEPS: &[Step] = &[
    ("fmt", fmt),
    ("unit", unit),
    ("benches-compile", benches_compile),
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

fn names() -> String {
    TEST_STEPS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt() -> Result {
    run(cargo().args(["fmt", "--all", "--", "--check"]))
}

fn unit() -> Result {
    // pingora-core builds zlib-ng through cmake (weir-pingora).
    ensure_apt(&[("cmake", "cmake")])?;
    run(cargo().args(["test", "--workspace", "--all-targets"]))?;
    run(cargo().args(["test", "--workspace", "--doc"]))
}

fn benches_compile() -> Result {
    run(cargo().args(["bench", "-p", "weir-bench", "--no-run"]))
}

pub(crate) fn fuzz(_args: &[String]) -> Result {
    Err("no fuzz targets yet".into())
}
