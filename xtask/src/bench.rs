//! `cargo xtask bench [--save NAME] [--baseline NAME] [--full] [--rounds N] [--bench SUITE] [FILTER]`
//! and `cargo xtask bench --report`.
//!
//! `--report` measures nothing: it renders the headline table of docs/BENCHMARKS.md from
//! the latest figures in docs/perf-log/latest.tsv (one tab-separated line per figure, see
//! that file's header) and writes it between the `<!-- headline:begin -->` and
//! `<!-- headline:end -->` markers. The tidy step fails when the committed table differs
//! from what `--report` would write ([`headline`], [`splice`]).
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
    if args.iter().any(|a| a == "--report") {
        if args.len() > 1 {
            return Err("--report takes no other argument".into());
        }
        return report();
    }
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

/// The machine-readable source of the headline table.
pub(crate) const FIGURES: &str = "docs/perf-log/latest.tsv";
/// The document that carries the table.
pub(crate) const DOC: &str = "docs/BENCHMARKS.md";
pub(crate) const BEGIN: &str = "<!-- headline:begin -->";
pub(crate) const END: &str = "<!-- headline:end -->";

/// The columns of a line of [`FIGURES`], in order.
const COLUMNS: [&str; 8] = [
    "suite", "measure", "target", "latest", "verdict", "commit", "date", "study",
];

/// `cargo xtask bench --report`: writes the table rendered from [`FIGURES`] into [`DOC`].
fn report() -> Result {
    let base = root();
    let read = |f: &str| fs::read_to_string(base.join(f)).map_err(|e| format!("{f}: {e}"));
    let table = headline(&read(FIGURES)?)?;
    let doc = read(DOC)?;
    let new = splice(&doc, &table)?;
    if new == doc {
        eprintln!("xtask: {DOC}: the headline table is current");
    } else {
        fs::write(base.join(DOC), &new).map_err(|e| format!("{DOC}: {e}"))?;
        eprintln!("xtask: {DOC}: headline table rewritten from {FIGURES}");
    }
    print!("{table}");
    Ok(())
}

/// Renders the headline table (markdown, one row per figure, ending in a newline) from the
/// text of [`FIGURES`]: tab-separated lines of the [`COLUMNS`]; blank lines and lines
/// starting with `#` are skipped. `date` is `YYYY-MM-DD`; `study` names the file in
/// `docs/perf-log/` (without `.md`) the figure comes from, and the date links to it.
pub(crate) fn headline(figures: &str) -> Result<String> {
    let mut out = String::new();
    out.push_str(&format!(
        "<!-- generated by `cargo xtask bench --report` from {FIGURES}: edit that file, not this table -->\n"
    ));
    out.push_str("| suite | measure | target | latest | verdict | commit | date (study) |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    let mut rows = 0;
    for (i, line) in figures.lines().enumerate() {
        let at = |what: String| format!("{FIGURES}:{}: {what}", i + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').map(str::trim).collect();
        if f.len() != COLUMNS.len() {
            return Err(at(format!(
                "{} tab-separated fields, want {} ({})",
                f.len(),
                COLUMNS.len(),
                COLUMNS.join(", ")
            )));
        }
        if let Some(k) = f.iter().position(|x| x.is_empty() || x.contains('|')) {
            return Err(at(format!("field {} is empty or holds a `|`", COLUMNS[k])));
        }
        let [suite, measure, target, latest, verdict, commit, date, study] =
            [f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]];
        if !is_date(date) {
            return Err(at(format!("date {date} is not YYYY-MM-DD")));
        }
        if !(study.len() > 11 && is_date(&study[..10]) && study.as_bytes()[10] == b'-')
            || study.contains(['/', '.', ' '])
        {
            return Err(at(format!(
                "study {study} is not a perf-log file name without .md (YYYY-MM-DD-topic)"
            )));
        }
        out.push_str(&format!(
            "| {suite} | {measure} | {target} | {latest} | {verdict} | {commit} | [{date}](perf-log/{study}.md) |\n"
        ));
        rows += 1;
    }
    if rows == 0 {
        return Err(format!("{FIGURES}: no figures"));
    }
    Ok(out)
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// `doc` with everything between the [`BEGIN`] and [`END`] lines replaced by `table`.
pub(crate) fn splice(doc: &str, table: &str) -> Result<String> {
    let (begin, end) = markers(doc)?;
    Ok(format!("{}\n{table}{}", &doc[..begin], &doc[end..]))
}

/// The text between the marker lines (without them), as it is in `doc`.
pub(crate) fn between(doc: &str) -> Result<&str> {
    let (begin, end) = markers(doc)?;
    Ok(doc[begin..end]
        .strip_prefix('\n')
        .unwrap_or(&doc[begin..end]))
}

/// Byte offsets of the end of the [`BEGIN`] marker and the start of the [`END`] marker.
fn markers(doc: &str) -> Result<(usize, usize)> {
    let b = doc
        .find(BEGIN)
        .ok_or_else(|| format!("{DOC} has no {BEGIN} line"))?;
    let e = doc[b..]
        .find(END)
        .map(|e| b + e)
        .ok_or_else(|| format!("{DOC} has no {END} line after {BEGIN}"))?;
    Ok((b + BEGIN.len(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIG: &str = "# suite\tmeasure\t...\n\
        \n\
        core\ttoken bucket\t≤ 1.1×\t1.13×\tmissed\t`abc1234`\t2026-11-30\t2026-11-30-core-anatomy\n\
        gateway\tCPU / proxied\t≤ 0.9×\t0.78×\tmet\t`1bedfca`\t2026-12-07\t2026-12-07-gateway-floor\n";

    #[test]
    fn renders_the_headline_table() {
        let t = headline(FIG).unwrap();
        let want = "<!-- generated by `cargo xtask bench --report` from docs/perf-log/latest.tsv: edit that file, not this table -->\n\
            | suite | measure | target | latest | verdict | commit | date (study) |\n\
            |---|---|---|---|---|---|---|\n\
            | core | token bucket | ≤ 1.1× | 1.13× | missed | `abc1234` | [2026-11-30](perf-log/2026-11-30-core-anatomy.md) |\n\
            | gateway | CPU / proxied | ≤ 0.9× | 0.78× | met | `1bedfca` | [2026-12-07](perf-log/2026-12-07-gateway-floor.md) |\n";
        assert_eq!(t, want);
    }

    #[test]
    fn rejects_malformed_figures() {
        let bad = [
            ("a\tb\tc\n", ":1: 3 tab-separated fields"),
            (
                "# c\na\tb\tc\td\te\tf\t2026-1-01\t2026-01-01-x\n",
                ":2: date 2026-1-01",
            ),
            ("a\tb\tc\td\te\tf\t2026-01-01\tx\n", "study x"),
            ("a\tb\tc\td\te\tf\t2026-01-01\t2026-01-01-x.md\n", "study"),
            (
                "a\tb|c\tc\td\te\tf\t2026-01-01\t2026-01-01-x\n",
                "field measure",
            ),
            (
                "a\t\tc\td\te\tf\t2026-01-01\t2026-01-01-x\n",
                "field measure",
            ),
            ("# only comments\n", "no figures"),
        ];
        for (text, want) in bad {
            let e = headline(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn splices_between_the_markers() {
        let doc = format!("# B\n\n{BEGIN}\nold\ntable\n{END}\n\nrest\n");
        let t = headline(FIG).unwrap();
        let new = splice(&doc, &t).unwrap();
        assert_eq!(new, format!("# B\n\n{BEGIN}\n{t}{END}\n\nrest\n"));
        assert_eq!(between(&new).unwrap(), t);
        assert_eq!(splice(&new, &t).unwrap(), new, "idempotent");
        assert!(splice("# B\n", &t).is_err());
        assert!(splice(&format!("{END}\n{BEGIN}\n"), &t).is_err());
    }

    /// The committed table is what `cargo xtask bench --report` renders (the tidy step
    /// checks the same on the working tree).
    #[test]
    fn committed_headline_is_current() {
        let read = |f: &str| fs::read_to_string(root().join(f)).unwrap();
        let doc = read(DOC);
        let table = headline(&read(FIGURES)).unwrap();
        assert!(
            between(&doc).unwrap() == table,
            "{DOC}'s headline table is stale: run `cargo xtask bench --report`"
        );
    }

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
