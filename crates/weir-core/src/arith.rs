//! Exact integer helpers shared by the limiters: gcd, and division by a divisor fixed at
//! construction done as one multiply and shift (no `div` instruction on the hot path).

/// Greatest common divisor (`gcd(0, x) = x`).
pub(crate) const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// Bit flagging the half of the `u64` circle read as "in the past" (serial-number arithmetic).
pub(crate) const HALF: u64 = 1 << 63;

/// Floor division by a constant `d ≥ 1` for numerators below 2^63, exact.
///
/// Granlund & Montgomery (1994), theorem 4.2: with `l = ⌈log2 d⌉` and
/// `m = ⌈2^(63+l) / d⌉`, we have `2^(63+l) ≤ m·d ≤ 2^(63+l) + 2^l`, hence
/// `⌊n·m / 2^(63+l)⌋ = ⌊n / d⌋` for every `n < 2^63`, and `m < 2^64` for every `d`. We
/// compute it as `mulhi(2n, m) >> l`: one multiply and one plain 64-bit shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Divider {
    d: u64,
    m: u64,
    l: u32,
}

impl Divider {
    /// A divider for `d` (`d = 0` is treated as 1; callers validate).
    pub(crate) const fn new(d: u64) -> Self {
        let d = if d == 0 { 1 } else { d };
        let l = 64 - (d - 1).leading_zeros();
        if l == 64 {
            // d > 2^63: every numerator below 2^63 divides to 0.
            return Divider { d, m: 0, l: 0 };
        }
        let m = (1u128 << (63 + l)).div_ceil(d as u128);
        Divider { d, m: m as u64, l }
    }

    /// The divisor.
    pub(crate) const fn divisor(self) -> u64 {
        self.d
    }

    /// `⌊n / d⌋`. Exact for `n < 2^63`; larger `n` falls back to a hardware division.
    #[inline]
    pub(crate) const fn div(self, n: u64) -> u64 {
        if n >= HALF {
            return n / self.d;
        }
        ((((n << 1) as u128 * self.m as u128) >> 64) as u64) >> self.l
    }

    /// `⌊n / d⌋` for `n < 2^63` only (checked in debug builds): the hot-path form, one
    /// multiply and two shifts with no branch and no hardware-division fallback.
    #[inline(always)]
    pub(crate) const fn div_lt_half(self, n: u64) -> u64 {
        debug_assert!(n < HALF);
        ((((n << 1) as u128 * self.m as u128) >> 64) as u64) >> self.l
    }

    /// `⌈n / d⌉` for `n < 2^63` only (see [`Divider::div_lt_half`]).
    #[inline(always)]
    pub(crate) const fn div_ceil_lt_half(self, n: u64) -> u64 {
        let q = self.div_lt_half(n);
        q + (q * self.d != n) as u64
    }

    /// `⌈n / d⌉`.
    #[inline]
    pub(crate) const fn div_ceil(self, n: u64) -> u64 {
        let q = self.div(n);
        // q·d ≤ n, no overflow.
        q + (q * self.d != n) as u64
    }

    /// `⌈n / d⌉` for a wide numerator, saturating at `u64::MAX` (cold paths only).
    pub(crate) const fn div_ceil_wide(self, n: u128) -> u64 {
        if n < HALF as u128 {
            return self.div_ceil(n as u64);
        }
        let q = n.div_ceil(self.d as u128);
        if q > u64::MAX as u128 {
            u64::MAX
        } else {
            q as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divider_matches_hardware_division() {
        let ds = [
            1u64,
            2,
            3,
            5,
            7,
            10,
            641,
            1_000_000_007,
            (1 << 32) + 1,
            (1 << 62) + 1,
            u64::MAX / 3,
            (1 << 63) + 5,
            u64::MAX,
        ];
        let ns = [
            0u64,
            1,
            2,
            3,
            999,
            1_000_000_000,
            (1 << 32) - 1,
            (1 << 62) + 12345,
            HALF - 1,
            HALF - 2,
            HALF,
            u64::MAX,
        ];
        for &d in &ds {
            let dv = Divider::new(d);
            for &n in &ns {
                assert_eq!(dv.div(n), n / d, "{n}/{d}");
                if n < HALF {
                    assert_eq!(dv.div_lt_half(n), n / d, "{n}/{d}");
                    assert_eq!(dv.div_ceil_lt_half(n), n.div_ceil(d), "ceil {n}/{d}");
                }
                assert_eq!(dv.div_ceil(n), n.div_ceil(d), "ceil {n}/{d}");
            }
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..if cfg!(miri) { 100 } else { 2000 } {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = x >> (x % 64);
                assert_eq!(dv.div(n), n / d);
                let h = n >> 1;
                assert_eq!(dv.div_lt_half(h), h / d);
                assert_eq!(dv.div_ceil_lt_half(h), h.div_ceil(d));
            }
        }
        assert_eq!(Divider::new(3).div_ceil_wide(u128::MAX), u64::MAX);
        assert_eq!(gcd(12, 18), 6);
        assert_eq!(gcd(0, 7), 7);
    }
}
