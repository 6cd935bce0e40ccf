//! Durations as the config file writes them: a whole number with a unit.

use core::fmt;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A duration written with a unit: `"250ms"`, `"2s"`, `"1m"`, `"1h"` (also `"us"`, `"ns"`).
/// A bare number (or a string without a unit) is an error: `timeout = 5` is ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// Parses `"<integer><unit>"`.
    pub fn parse(s: &str) -> Result<Dur, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        if num.is_empty() {
            return Err(format!(
                "invalid duration {s:?}: expected a whole number and a unit, e.g. \"250ms\", \"2s\", \"1m\", \"1h\""
            ));
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: number too large"))?;
        let d = match unit {
            "ns" => Duration::from_nanos(n),
            "us" | "µs" => Duration::from_micros(n),
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "" => {
                return Err(format!(
                    "duration {s:?} has no unit: write e.g. \"{n}ms\" or \"{n}s\""
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {other:?} (use ms, s, m or h)"
                ));
            }
        };
        Ok(Dur(d))
    }
}

impl Dur {
    /// The duration on the core's time line.
    pub(crate) fn nanos(self) -> weir_core::Nanos {
        self.0.into()
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_duration(self.0, f)
    }
}

/// Formats a duration in the largest unit that represents it exactly (`"1500ms"`, `"2s"`).
pub(crate) fn fmt_duration(d: Duration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ns = d.as_nanos();
    const UNITS: [(u128, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return f.write_str("0s");
    }
    for (size, unit) in UNITS {
        if ns.is_multiple_of(size) {
            return write!(f, "{}{}", ns / size, unit);
        }
    }
    write!(f, "{ns}ns")
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string with a unit, e.g. \"250ms\", \"2s\", \"1m\", \"1h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write e.g. \"{v}ms\" or \"{v}s\""
                )))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write a whole number with a unit, e.g. \"250ms\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Serializes a [`Duration`] field as a [`Dur`] (`serialize_with`), the way the config
/// writes it.
pub(crate) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    Dur(*d).serialize(s)
}

/// Whole seconds of `d`, rounded up.
pub(crate) fn secs_ceil(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000_000_000).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(Dur::parse("250ms").unwrap().0, Duration::from_millis(250));
        assert_eq!(Dur::parse("2s").unwrap().0, Duration::from_secs(2));
        assert_eq!(Dur::parse("1m").unwrap().0, Duration::from_secs(60));
        assert_eq!(Dur::parse("1h").unwrap().0, Duration::from_secs(3600));
        assert!(Dur::parse("5").unwrap_err().contains("no unit"));
        assert!(Dur::parse("ms").is_err());
        assert!(Dur::parse("5 parsecs").is_err());
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1500ms");
        assert_eq!(Dur(Duration::from_secs(120)).to_string(), "2m");
        assert_eq!(Dur(Duration::ZERO).to_string(), "0s");
    }
}
