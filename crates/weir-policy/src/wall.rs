//! The engine's one clock: monotonic instants for every decision, and wall time derived from
//! them for what is dated in the calendar (quota periods, JWT `exp`/`nbf`, bypass
//! episodes, access-log timestamps).
//!
//! Wall time is never read from the ambient system clock on the request path: it is the
//! monotonic instant plus an offset fixed when the engine is built ([`WallClock::anchored`]:
//! the system's wall time at that moment; [`WallClock::starting_at`]: a date the caller
//! chooses, for simulations). So a test or a simulation that moves a `ManualClock` moves
//! the calendar with it — a simulated month crosses a quota period, a simulated hour
//! expires a token — and every part of the engine agrees on what time it is.
//!
//! The cost of the anchor: a step of the system clock after start (a manual `date -s`, a VM
//! resumed from a snapshot) is not seen until the process restarts. NTP *slews* the
//! monotonic clock as it slews the wall clock, so the two do not drift apart in normal
//! operation.

use core::time::Duration;
use std::sync::Arc;
use weir_core::{Clock, Nanos};

/// A monotonic clock with a wall-time offset; see the module docs.
pub(crate) struct WallClock {
    mono: Arc<dyn Clock + Send + Sync>,
    /// Unix time at the monotonic clock's zero (may be negative for a clock started late).
    offset: i128,
}

impl WallClock {
    /// `mono` with wall time anchored to the system's wall clock now.
    pub(crate) fn anchored(mono: Arc<dyn Clock + Send + Sync>) -> WallClock {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self::starting_at(mono, unix)
    }

    /// `mono` with wall time `unix` (since the epoch) at its current reading.
    pub(crate) fn starting_at(mono: Arc<dyn Clock + Send + Sync>, unix: Duration) -> WallClock {
        let offset = unix.as_nanos() as i128 - i128::from(mono.now().as_u64());
        WallClock { mono, offset }
    }

    /// The monotonic instant (every decision's time).
    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        self.mono.now()
    }

    /// Wall time: since the Unix epoch, derived from [`WallClock::now`].
    pub(crate) fn unix(&self) -> Nanos {
        let t = self.offset + i128::from(self.mono.now().as_u64());
        Nanos::new(u64::try_from(t.max(0)).unwrap_or(u64::MAX))
    }

    /// Wall time minus the monotonic instant, in nanoseconds: fixed for the clock's life, so
    /// what dates instants later (bypass episodes) reads it without reading the clock.
    pub(crate) fn wall_offset(&self) -> i128 {
        self.offset
    }

    /// Unix seconds now (JWT times, quota periods).
    pub(crate) fn unix_secs(&self) -> u64 {
        self.unix().as_u64() / 1_000_000_000
    }

    /// Unix milliseconds now (log timestamps).
    pub(crate) fn unix_millis(&self) -> u64 {
        self.unix().as_u64() / 1_000_000
    }
}

impl Clock for WallClock {
    #[inline]
    fn now(&self) -> Nanos {
        WallClock::now(self)
    }

    fn unix(&self) -> Nanos {
        WallClock::unix(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_core::ManualClock;

    #[test]
    fn wall_time_moves_with_the_monotonic_clock() {
        let mono = Arc::new(ManualClock::new(Nanos::from_secs(5)));
        let w = WallClock::starting_at(mono.clone(), Duration::from_secs(1_700_000_000));
        assert_eq!(w.unix_secs(), 1_700_000_000);
        assert_eq!(w.now(), Nanos::from_secs(5));
        mono.advance(Nanos::from_secs(3600));
        assert_eq!(w.unix_secs(), 1_700_003_600);
        let real = WallClock::anchored(mono);
        let sys = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(real.unix_secs().abs_diff(sys) <= 1);
    }
}
