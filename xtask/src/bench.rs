//! `cargo xtask bench [--save NAME] [--baseline NAME] [--full] [--bench SUITE] [FILTER]`
//!
//! Runs the criterion suites of `bench/` (a quick profile unless `--full`), then prints
//! one table: every benchmark's median, its ratio to the first row of its group (the
//! row named `floor_*`: the CAS loop, or `Instant::now()` in the clock group), and — with `--baseline NAME` — the
//! change against that saved baseline, flagging regressions beyond the noise threshold.
//!
//! Baselines are criterion's own (`target/criterion/<group>/<bench>/<NAME>/`): save one
//! with `--save NAME` before a change, compare with `--baseline NAME` after it.

use crate::{Result, cargo, root, run};
use std::fs;
use std::path::{Path, PathBuf};

/// A change larger than this (fraction of the baseline median) is flagged. Shared
/// 2-core machines drift by several percent between runs; 10% is above that noise.
const NOISE: f64 = 0.10;

pub(crate) fn bench(args: &[String]) -> Result {
    let mut save = None;
    let mut baseline = None;
    let mut full = false;
    let mut suites = Vec::new();
    let mut filter = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--save" => save = Some(it.next().ok_or("--save needs a name")?.clone()),
            "--baseline" => baseline = Some(it.next().ok_or("--baseline needs a name")?.clone()),
            "--full" => full = true,
            "--bench" => suites.push(it.next().ok_or("--bench needs a suite name")?.clone()),
            f if !f.starts_with('-') => filter = Some(f.to_owned()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "weir-bench"]);
    for s in &suites {
        cmd.args(["--bench", s]);
    }
    cmd.arg("--");
    if let Some(f) = &filter {
        cmd.arg(f);
    }
    if !full {
        cmd.args([
            "--warm-up-time",
            "1",
            "--measurement-time",
            "2",
            "--sample-size",
            "30",
        ]);
    }
    if let Some(n) = &save {
        cmd.args(["--save-baseline", n]);
    }
    if let Some(n) = &baseline {
        // Compare without overwriting the saved baseline.
        cmd.args(["--baseline", n]);
    }
    run(&mut cmd)?;
    let current = save.as_deref().unwrap_or("new");
    let rows = collect(
        &root().join("target").join("criterion"),
        current,
        baseline.as_deref(),
    );
    print!("{}", table(&rows));
    let regressions = rows
        .iter()
        .filter(|r| r.change.is_some_and(|c| c > NOISE))
        .count();
    if regressions > 0 {
        eprintln!(
            "xtask: {regressions} benchmark(s) slower than baseline by more than {:.0}%",
            NOISE * 100.0
        );
    }
    Ok(())
}

#[derive(Debug)]
struct Row {
    group: String,
    name: String,
    ns: f64,
    change: Option<f64>,
}

fn collect(dir: &Path, current: &str, baseline: Option<&str>) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut groups: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    groups.sort();
    for g in groups {
        if !g.is_dir() || g.file_name().is_some_and(|n| n == "report") {
            continue;
        }
        let mut benches = Vec::new();
        walk(&g, &mut benches);
        // The floor row (`floor_*`) first, so the ratio column reads "× the floor"; the
        // rest by name.
        benches.sort_by_key(|b| {
            let name = b.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            (!name.starts_with("floor"), name)
        });
        for b in benches {
            let Some(ns) = median(&b.join(current).join("estimates.json")) else {
                continue;
            };
            let change = baseline
                .and_then(|n| median(&b.join(n).join("estimates.json")))
                .map(|old| (ns - old) / old);
            let rel = b.strip_prefix(dir).unwrap_or(&b);
            let mut parts = rel.iter().map(|p| p.to_string_lossy().into_owned());
            let group = parts.next().unwrap_or_default();
            rows.push(Row {
                group,
                name: parts.collect::<Vec<_>>().join("/"),
                ns,
                change,
            });
        }
    }
    rows
}

/// Benchmark directories: those holding a `benchmark.json` somewhere below a named run.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("new").join("benchmark.json").exists()
        || dir.join("base").join("benchmark.json").exists()
    {
        out.push(dir.to_path_buf());
        return;
    }
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "report") {
            walk(&p, out);
        }
    }
}

/// The median point estimate (ns) from criterion's `estimates.json`.
fn median(path: &Path) -> Option<f64> {
    let text = fs::read_to_string(path).ok()?;
    let at = text.find("\"median\"")?;
    let rest = &text[at..];
    let p = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let num: String = rest[p..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        .collect();
    num.parse().ok()
}

fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<28} {:<44} {:>12} {:>9} {:>10}\n",
        "group", "benchmark", "median", "x first", "vs base"
    ));
    let mut first: Option<(&str, f64)> = None;
    for r in rows {
        if first.is_none_or(|(g, _)| g != r.group) {
            first = Some((&r.group, r.ns));
        }
        let ratio = first.map_or(1.0, |(_, f)| r.ns / f);
        let change = match r.change {
            Some(c) if c > NOISE => format!("{:+.1}% !!", c * 100.0),
            Some(c) => format!("{:+.1}%", c * 100.0),
            None => "-".into(),
        };
        s.push_str(&format!(
            "{:<28} {:<44} {:>12} {:>9.2} {:>10}\n",
            r.group,
            r.name,
            fmt_ns(r.ns),
            ratio,
            change
        ));
    }
    s
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.2} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_criterion_median() {
        let dir = std::env::temp_dir().join(format!("xtask-median-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("estimates.json");
        fs::write(&f, r#"{"mean":{"point_estimate":9.0},"median":{"confidence_interval":{"lower_bound":1.0},"point_estimate":5.25,"standard_error":0.1}}"#).unwrap();
        assert_eq!(median(&f), Some(5.25));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn flags_regressions() {
        let rows = [
            Row {
                group: "g".into(),
                name: "floor".into(),
                ns: 5.0,
                change: Some(0.01),
            },
            Row {
                group: "g".into(),
                name: "weir".into(),
                ns: 10.0,
                change: Some(0.5),
            },
        ];
        let t = table(&rows);
        assert!(t.contains("2.00"), "{t}");
        assert!(t.contains("+50.0% !!"), "{t}");
        assert!(!t.lines().nth(1).unwrap().contains("!!"), "{t}");
    }
}
