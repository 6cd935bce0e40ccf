//! `BIN simulate --config F --trace T [--seed N] [--upstream NAME=SPEC]... [--out FILE]`:
//! the config run on virtual time against simulated upstreams ([`weir_sim`]),
//! a table of outcomes per route on stdout, one JSON line per request in `--out`
//! (docs/CONFIG.md, "Simulation").
//!
//! The trace is JSON lines: `{"t": seconds, "method", "path", "headers": {..}}`, or the
//! gateway's own access log (`ts`, RFC 3339 with milliseconds, minus `duration_ms` is the
//! arrival; `key_digest` stands in for the rate-limit key). Nothing printed depends on the
//! wall clock, so the same inputs and seed give the same bytes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde_json::Value;
use weir_core::Nanos;
use weir_sim::{SimRecord, SimRequest, Simulation, UpstreamModel, summary};

/// How far (seconds) a line's time may fall behind the latest time before it: an access log
/// is written in completion order, so arrivals interleave by up to a request's duration.
pub const BACKWARDS_TOLERANCE_S: u64 = 1;

/// The flags of `simulate`.
#[derive(Debug, Parser)]
#[command(no_binary_name = true)]
pub struct SimulateArgs {
    /// Config file (TOML).
    #[arg(long, value_name = "PATH")]
    pub config: PathBuf,
    /// Trace: JSON lines `{"t", "method", "path", "headers"}`, or an access log.
    #[arg(long, value_name = "PATH")]
    pub trace: PathBuf,
    /// Seed of every random choice (jitter, error draws).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// An upstream's behaviour, e.g. `blue=latency:20ms,errors:0.01,outage:10s-20s`
    /// (repeatable; defaults: latency 1ms, errors 0).
    #[arg(long, value_name = "NAME=SPEC")]
    pub upstream: Vec<String>,
    /// Write one JSON line per request here.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// Runs `simulate` with the arguments after the word `simulate`.
///
/// # Errors
/// A config, trace or upstream spec that does not load, naming the file and line; an
/// output file that cannot be written.
pub fn run(args: SimulateArgs) -> Result<ExitCode, String> {
    let origin = args.config.display().to_string();
    let text =
        std::fs::read_to_string(&args.config).map_err(|e| format!("{origin}: cannot read: {e}"))?;
    let mut sim = Simulation::new(&text, &origin, args.seed).map_err(|e| e.to_string())?;
    for spec in &args.upstream {
        let (name, model) = spec
            .split_once('=')
            .ok_or_else(|| format!("--upstream {spec:?}: expected NAME=SPEC"))?;
        let model = UpstreamModel::parse(model).map_err(|e| format!("--upstream {spec:?}: {e}"))?;
        sim.set_upstream(name, model)
            .map_err(|e| format!("--upstream {spec:?}: {e}"))?;
    }
    let trace_name = args.trace.display().to_string();
    let trace = std::fs::read_to_string(&args.trace)
        .map_err(|e| format!("{trace_name}: cannot read: {e}"))?;
    let reqs = parse_trace(&sim, &trace, &trace_name)?;
    let records = sim.run(&reqs).map_err(|e| e.to_string())?;
    print!("{}", table(&records));
    if let Some(out) = &args.out {
        std::fs::write(out, json_lines(&records))
            .map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The trace's requests; errors are `FILE:LINE: message`.
pub fn parse_trace(sim: &Simulation, text: &str, name: &str) -> Result<Vec<SimRequest>, String> {
    let mut reqs = Vec::new();
    // Arrival in nanoseconds on the trace's time line (access-log times are made relative
    // to the earliest arrival afterwards).
    let mut latest = 0u64;
    let mut from_log = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let err = |m: String| format!("{name}:{n}: {m}");
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| err(format!("not a JSON object: {e}")))?;
        let Some(obj) = v.as_object() else {
            return Err(err("not a JSON object".into()));
        };
        let str_field = |k: &str| obj.get(k).and_then(Value::as_str);
        let method = str_field("method").unwrap_or("GET").to_owned();
        let path = str_field("path").unwrap_or("").to_owned();
        let (t, headers, client_ip) = if let Some(t) = obj.get("t") {
            let t = t
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| err(format!("t: {t} is not a number of seconds >= 0")))?;
            let mut headers = Vec::new();
            if let Some(h) = obj.get("headers") {
                let h = h
                    .as_object()
                    .ok_or_else(|| err("headers: not an object".into()))?;
                for (k, v) in h {
                    let v = v
                        .as_str()
                        .ok_or_else(|| err(format!("headers.{k}: not a string")))?;
                    headers.push((k.to_ascii_lowercase(), v.to_owned()));
                }
            }
            if path.is_empty() {
                return Err(err("path: missing".into()));
            }
            ((t * 1e9).round() as u64, headers, None)
        } else if let Some(ts) = str_field("ts") {
            from_log = true;
            let at = rfc3339_ms(ts).ok_or_else(|| {
                err(format!(
                    "ts: {ts:?} is not RFC 3339 with milliseconds (…T…Z)"
                ))
            })?;
            if path.is_empty() {
                // A request refused before it was understood: nothing to replay.
                continue;
            }
            if let Some(r) = str_field("route")
                && r != "-"
                && !sim.has_route(r)
            {
                return Err(err(format!("route {r:?} is not in the config")));
            }
            let dur = obj.get("duration_ms").and_then(Value::as_u64).unwrap_or(0);
            let arrival = at.saturating_sub(dur.saturating_mul(1_000_000));
            let (headers, ip) = match str_field("key_digest") {
                Some(d) => sim.key_stand_in(&method, &path, d),
                None => (Vec::new(), None),
            };
            (arrival, headers, ip)
        } else {
            return Err(err(
                "neither \"t\" (a trace line) nor \"ts\" (an access-log record)".into(),
            ));
        };
        if t.saturating_add(BACKWARDS_TOLERANCE_S * 1_000_000_000) < latest {
            return Err(err(format!(
                "time goes back {:.3} s (more than {BACKWARDS_TOLERANCE_S} s) from an earlier line",
                (latest - t) as f64 / 1e9
            )));
        }
        latest = latest.max(t);
        reqs.push(SimRequest {
            t: Nanos(t),
            method,
            path,
            headers,
            client_ip,
        });
    }
    if from_log && let Some(first) = reqs.iter().map(|r| r.t).min() {
        for r in &mut reqs {
            r.t = r.t.saturating_sub(first);
        }
    }
    Ok(reqs)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff…](Z|+00:00)` → Unix nanoseconds.
fn rfc3339_ms(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<u64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let ns_frac: u64 = format!("{frac:0<9}").parse().ok()?;
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    secs.checked_mul(1_000_000_000)?.checked_add(ns_frac)
}

/// The outcome table: one row per route (sorted), one column per outcome seen, and a total.
pub fn table(records: &[SimRecord]) -> String {
    let m = summary(records);
    let cols: BTreeSet<&str> = m.values().flat_map(|o| o.keys().copied()).collect();
    let w0 = m.keys().map(String::len).chain([5]).max().unwrap_or(5);
    let mut out = format!("{:<w0$}  {:>8}", "route", "requests");
    for c in &cols {
        let _ = write!(out, "  {c:>w$}", w = c.len().max(6));
    }
    out.push('\n');
    let mut row = |name: &str, counts: &dyn Fn(&str) -> u64, total: u64| {
        let _ = write!(out, "{name:<w0$}  {total:>8}");
        for c in &cols {
            let _ = write!(out, "  {:>w$}", counts(c), w = c.len().max(6));
        }
        out.push('\n');
    };
    for (route, o) in &m {
        row(route, &|c| o.get(c).copied().unwrap_or(0), o.values().sum());
    }
    row(
        "total",
        &|c| m.values().filter_map(|o| o.get(c)).sum(),
        records.len() as u64,
    );
    out
}

/// One JSON object per request: `t`, `route`, `status`, `reason`, `attempts`, `queue_ms`,
/// `duration_ms` (in that order).
pub fn json_lines(records: &[SimRecord]) -> String {
    let mut out = String::with_capacity(records.len() * 110);
    for r in records {
        let route = serde_json::to_string(r.route.as_str()).unwrap_or_default();
        let _ = writeln!(
            out,
            "{{\"t\":{},\"route\":{route},\"status\":{},\"reason\":\"{}\",\"attempts\":{},\"queue_ms\":{},\"duration_ms\":{}}}",
            serde_json::Value::from(r.t.0 as f64 / 1e9),
            r.status,
            r.outcome.as_str(),
            r.attempts,
            r.queue.as_millis(),
            r.duration.as_millis()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_with_milliseconds() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            rfc3339_ms("2026-12-02T01:30:00.123Z"),
            Some(1_796_175_000_123_000_000)
        );
        assert_eq!(
            rfc3339_ms("2026-12-02T01:30:00Z"),
            Some(1_796_175_000_000_000_000)
        );
        for bad in [
            "2026-12-02 01:30:00Z",
            "2026-13-02T01:30:00Z",
            "x",
            "2026-12-02T01:30:00.1a3Z",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
    }
}
