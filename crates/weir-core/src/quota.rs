//! Quotas: long-period entitlements (units per UTC day, per UTC month, or per
//! epoch-aligned duration) and the decision for one key.
//!
//! Pure integer arithmetic on wall-clock Unix seconds: the gateway's ledger, its admin API
//! and the Python binding name and bound periods with the same functions, so a period
//! reads the same everywhere (`2026-12`, `2026-12-01`, or a duration period's start in
//! Unix seconds). No clock is read here.

use core::fmt;

/// How a quota's periods are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    /// A UTC calendar day.
    Day,
    /// A UTC calendar month.
    Month,
    /// Consecutive spans of this many seconds (at least 1), aligned to the Unix epoch.
    Every(u64),
}

/// One period: `[start, end)` in Unix seconds, and how it is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeriodId {
    /// How the period was cut (decides its name).
    pub period: Period,
    /// First second of the period.
    pub start: u64,
    /// First second after it.
    pub end: u64,
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
pub const fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    (y, m as u32, d as u32)
}

/// (year, month 1..=12, day) → days since 1970-01-01 (`days_from_civil`).
pub const fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const DAY: u64 = 86_400;

impl Period {
    /// The period containing Unix second `unix`.
    pub const fn at(self, unix: u64) -> PeriodId {
        let (start, end) = match self {
            Period::Day => {
                let start = unix - unix % DAY;
                (start, start + DAY)
            }
            Period::Month => {
                let (y, m, _) = civil_from_days((unix / DAY) as i64);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                let start = days_from_civil(y, m, 1) as u64 * DAY;
                let end = days_from_civil(ny, nm, 1) as u64 * DAY;
                (start, end)
            }
            Period::Every(n) => {
                let n = if n == 0 { 1 } else { n };
                let start = unix - unix % n;
                (start, start.saturating_add(n))
            }
        };
        PeriodId {
            period: self,
            start,
            end,
        }
    }

    /// The period a name denotes (`2026-12`, `2026-12-01`, or a start second of a
    /// duration period, which must be aligned); `None` for any other text.
    pub fn parse(self, name: &str) -> Option<PeriodId> {
        let num = |s: &str, len: usize| -> Option<u64> {
            (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        let start = match self {
            Period::Every(n) => {
                let s: u64 = (!name.is_empty() && name.len() <= 20)
                    .then(|| num(name, name.len()))
                    .flatten()?;
                (n != 0 && s.is_multiple_of(n)).then_some(s)?
            }
            Period::Month | Period::Day => {
                let mut it = name.split('-');
                let y = num(it.next()?, 4)?;
                let m = num(it.next()?, 2)?;
                let d = match (self, it.next()) {
                    (Period::Day, Some(d)) => num(d, 2)?,
                    (Period::Month, None) => 1,
                    _ => return None,
                };
                if it.next().is_some() || y < 1970 || !(1..=12).contains(&m) || d == 0 {
                    return None;
                }
                let days = days_from_civil(y as i64, m as u32, d as u32);
                // 2026-02-30 would roll into March: only real dates name periods.
                if civil_from_days(days) != (y as i64, m as u32, d as u32) {
                    return None;
                }
                days as u64 * DAY
            }
        };
        Some(self.at(start)).filter(|p| p.start == start)
    }
}

impl PeriodId {
    /// Seconds in this period (the month's own length for months).
    pub const fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the period is empty (never, for a period built by [`Period::at`]).
    pub const fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whole seconds from `unix` until the next period starts (at least 1 while `unix` is
    /// inside the period: what `Retry-After` says).
    pub const fn secs_to_end(&self, unix: u64) -> u64 {
        let left = self.end.saturating_sub(unix);
        if left == 0 { 1 } else { left }
    }
}

impl fmt::Display for PeriodId {
    /// `2026-12` (month), `2026-12-01` (day), the start in Unix seconds (durations).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days((self.start / DAY) as i64);
        match self.period {
            Period::Month => write!(f, "{y:04}-{m:02}"),
            Period::Day => write!(f, "{y:04}-{m:02}-{d:02}"),
            Period::Every(_) => write!(f, "{}", self.start),
        }
    }
}

/// What a key of a quota has this period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuotaCount {
    /// Units consumed (committed `consume` and `bypass` events).
    pub used: u64,
    /// Units reserved by requests not yet settled (admission in progress).
    pub pending: u64,
    /// Signed sum of the period's adjustments (positive = credit).
    pub adjusted: i64,
}

/// The quota gate's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDecision {
    /// Whether the request's cost fits.
    pub allowed: bool,
    /// Units left after this request (after its cost when allowed).
    pub remaining: u64,
}

impl QuotaCount {
    /// `limit + adjusted`, clamped at zero.
    pub const fn effective(&self, limit: u64) -> u64 {
        let e = limit as i128 + self.adjusted as i128;
        if e < 0 {
            0
        } else if e > u64::MAX as i128 {
            u64::MAX
        } else {
            e as u64
        }
    }

    /// Units still available (`effective - used - pending`, at least 0).
    pub const fn remaining(&self, limit: u64) -> u64 {
        self.effective(limit)
            .saturating_sub(self.used.saturating_add(self.pending))
    }

    /// Decides a request of `cost` units and, when it fits, reserves them (`pending`):
    /// exhausted means `used + pending + cost > limit + adjusted`.
    /// (A zero cost is refused too once the period is over its limit: a debit can leave
    /// `used` above `limit + adjusted`.)
    pub fn reserve(&mut self, limit: u64, cost: u64) -> QuotaDecision {
        let effective = self.effective(limit);
        let after = self.used.saturating_add(self.pending).saturating_add(cost);
        // Compared unclamped: a debit below zero refuses even a zero cost.
        if (after as i128) <= limit as i128 + self.adjusted as i128 {
            self.pending = self.pending.saturating_add(cost);
            QuotaDecision {
                allowed: true,
                remaining: effective - after,
            }
        } else {
            QuotaDecision {
                allowed: false,
                remaining: self.remaining(limit),
            }
        }
    }

    /// A reservation becomes consumption.
    pub fn commit(&mut self, cost: u64) {
        self.pending = self.pending.saturating_sub(cost);
        self.used = self.used.saturating_add(cost);
    }

    /// A reservation is given back (a later gate rejected the request).
    pub fn release(&mut self, cost: u64) {
        self.pending = self.pending.saturating_sub(cost);
    }

    /// An adjustment event (signed units).
    pub fn adjust(&mut self, amount: i64) {
        self.adjusted = self.adjusted.saturating_add(amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate alloc;
    use alloc::string::ToString as _;

    // 2026-12-02T00:49:47Z
    const T: u64 = 1_796_172_587;

    #[test]
    fn calendar_periods_and_names() {
        let m = Period::Month.at(T);
        assert_eq!(m.to_string(), "2026-12");
        assert_eq!(m.start, days_from_civil(2026, 12, 1) as u64 * DAY);
        assert_eq!(m.len(), 31 * DAY);
        assert_eq!(m.end, days_from_civil(2027, 1, 1) as u64 * DAY);
        let d = Period::Day.at(T);
        assert_eq!(d.to_string(), "2026-12-02");
        assert_eq!(d.secs_to_end(T), d.end - T);
        assert_eq!(
            Period::Month
                .at(days_from_civil(2028, 2, 10) as u64 * DAY)
                .len(),
            29 * DAY
        );
        assert_eq!(
            Period::Month
                .at(days_from_civil(2027, 2, 10) as u64 * DAY)
                .len(),
            28 * DAY
        );
        let e = Period::Every(3600).at(T);
        assert_eq!(e.start % 3600, 0);
        assert_eq!(e.to_string(), e.start.to_string());
        assert_eq!(e.secs_to_end(e.end), 1);
    }

    #[test]
    fn names_parse_back_and_nothing_else_does() {
        for p in [
            Period::Day,
            Period::Month,
            Period::Every(10),
            Period::Every(86_400 * 7),
        ] {
            for t in [0, T, T + 40 * DAY, 4_102_444_800] {
                let id = p.at(t);
                assert_eq!(p.parse(&id.to_string()), Some(id), "{p:?} {t}");
            }
        }
        for bad in [
            "2026-13",
            "2026-00",
            "26-12",
            "2026-12-1",
            "2026-12-01-01",
            "",
            "x",
        ] {
            assert_eq!(Period::Month.parse(bad), None, "{bad}");
        }
        for bad in ["2026-02-30", "2026-12", "2026-12-00", "1969-12-31"] {
            assert_eq!(Period::Day.parse(bad), None, "{bad}");
        }
        assert_eq!(Period::Every(10).parse("15"), None);
        assert_eq!(Period::Every(10).parse("-10"), None);
        assert_eq!(Period::Every(10).parse("99999999999999999999999"), None);
    }

    #[test]
    fn civil_round_trip_over_centuries() {
        let mut days = -800_000i64;
        while days < 800_000 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            days += 97;
        }
    }

    #[test]
    fn reserve_commit_release_adjust() {
        let mut c = QuotaCount::default();
        assert_eq!(
            c.reserve(3, 2),
            QuotaDecision {
                allowed: true,
                remaining: 1
            }
        );
        assert_eq!(
            c.reserve(3, 2),
            QuotaDecision {
                allowed: false,
                remaining: 1
            }
        );
        c.release(2);
        assert_eq!(c.remaining(3), 3);
        assert!(c.reserve(3, 3).allowed);
        c.commit(3);
        assert_eq!((c.used, c.pending, c.remaining(3)), (3, 0, 0));
        assert!(!c.reserve(3, 1).allowed);
        c.adjust(2);
        assert!(c.reserve(3, 0).allowed);
        assert_eq!(c.reserve(3, 1).remaining, 1);
        c.adjust(-100);
        assert!(
            !c.reserve(3, 0).allowed,
            "over the limit after a debit: even cost 0"
        );
        assert_eq!(c.effective(3), 0);
        assert_eq!(c.remaining(3), 0);
        c.adjust(i64::MIN);
        c.adjust(i64::MAX);
        assert_eq!(
            QuotaCount {
                adjusted: i64::MAX,
                ..c
            }
            .effective(u64::MAX),
            u64::MAX
        );
    }
}
