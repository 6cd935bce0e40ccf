//! `cargo xtask bench [--save NAME] [--baseline NAME] [--full] [--rounds N] [--bench SUITE] [FILTER]`
//!
//! `--rounds N` runs the whole selection N times in a row (rounds interleave the rows of
//! every group: a load spike on a shared machine hits one round, not one row) and reports,
//! per row, the median over rounds of its median ns and of its ratio to the group's floor
//! measured in the *same* round.
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
    let mut rounds = 1usize;
    let mut suites = Vec::new();
    let mut filter = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--save" => save = Some(it.next().ok_or("--save needs a name")?.clone()),
            "--baseline" => baseline = Some(it.next().ok_or("--baseline needs a name")?.clone()),
            "--full" => full = true,
            "--rounds" => {
                rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--rounds needs a positive number")?
            }
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
    let current = save.as_deref().unwrap_or("new");
    let mut per_round = Vec::new();
    for r in 0..rounds {
        if rounds > 1 {
            eprintln!("xtask: bench round {} of {rounds}", r + 1);
        }
        run(&mut cmd)?;
        let mut rows = collect(
            &root().join("target").join("criterion"),
            current,
            baseline.as_deref(),
        );
        set_ratios(&mut rows);
        per_round.push(rows);
    }
    let rows = merge_rounds(per_round);
    if rounds > 1 {
        println!("medians over {rounds} rounds (ratio: median of per-round ratios)");
    }
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
    /// Ratio to the first row (the floor) of the group, measured in the same round.
    ratio: f64,
    change: Option<f64>,
}

/// Sets each row's ratio to the first row of its group.
fn set_ratios(rows: &mut [Row]) {
    let mut first: Option<(String, f64)> = None;
    for r in rows {
        if first.as_ref().is_none_or(|(g, _)| *g != r.group) {
            first = Some((r.group.clone(), r.ns));
        }
        r.ratio = first.as_ref().map_or(1.0, |(_, f)| r.ns / f);
    }
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One row per benchmark: medians over the rounds (row order of the first round).
fn merge_rounds(rounds: Vec<Vec<Row>>) -> Vec<Row> {
    let mut it = rounds.into_iter();
    let Some(first) = it.next() else {
        return Vec::new();
    };
    let rest: Vec<Vec<Row>> = it.collect();
    first
        .into_iter()
        .map(|r| {
            let same = |o: &&Row| o.group == r.group && o.name == r.name;
            let others: Vec<&Row> = rest
                .iter()
                .filter_map(|round| round.iter().find(same))
                .collect();
            let ns = median_of(others.iter().map(|o| o.ns).chain([r.ns]).collect());
            let ratio = median_of(others.iter().map(|o| o.ratio).chain([r.ratio]).collect());
            let changes: Vec<f64> = others
                .iter()
                .filter_map(|o| o.change)
                .chain(r.change)
                .collect();
            let change = (!changes.is_empty()).then(|| median_of(changes));
            Row {
                ns,
                ratio,
                change,
                ..r
            }
        })
        .collect()
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
                ratio: 1.0,
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
    for r in rows {
        let ratio = r.ratio;
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
                ratio: 1.0,
                change: Some(0.01),
            },
            Row {
                group: "g".into(),
                name: "weir".into(),
                ns: 10.0,
                ratio: 1.0,
                change: Some(0.5),
            },
        ];
        let mut rows = rows;
        set_ratios(&mut rows);
        let t = table(&rows);
        assert!(t.contains("2.00"), "{t}");
        assert!(t.contains("+50.0% !!"), "{t}");
        assert!(!t.lines().nth(1).unwrap().contains("!!"), "{t}");
    }

    #[test]
    fn rounds_take_medians_of_ratios() {
        let row = |ns: f64| Row {
            group: "g".into(),
            name: "x".into(),
            ns,
            ratio: ns / 5.0,
            change: None,
        };
        let m = merge_rounds(vec![vec![row(5.0)], vec![row(50.0)], vec![row(10.0)]]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].ns, 10.0);
        assert_eq!(m[0].ratio, 2.0);
    }
}
