//! Injected randomness for jitter.
//!
//! The core only needs uniform `u64`s. [`Rng`] is deliberately the shape of
//! `rand_core::RngCore::next_u64`, so any `rand` generator adapts with a one-line impl;
//! [`SplitMix64`] is a small, fast, deterministic default seeded by the caller.

/// A source of uniformly distributed `u64`s.
pub trait Rng {
    /// The next uniformly distributed value.
    fn next_u64(&mut self) -> u64;

    /// A uniform value in `0..=bound` (inclusive), without modulo bias worth
    /// caring about for jitter (Lemire's multiply-shift; bias < 2^-64 × bound).
    fn below_inclusive(&mut self, bound: u64) -> u64 {
        if bound == u64::MAX {
            return self.next_u64();
        }
        let range = u128::from(bound) + 1;
        ((u128::from(self.next_u64()) * range) >> 64) as u64
    }

    /// A uniform fraction in `[0, 1)` with 53 bits of precision.
    fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl<R: Rng + ?Sized> Rng for &mut R {
    fn next_u64(&mut self) -> u64 {
        (**self).next_u64()
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state, passes BigCrush, and
/// every seed (including 0) is valid. Deterministic for a given seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

/// The SplitMix64 increment (golden ratio).
pub(crate) const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function, shared with atomic generators that advance the
/// state with `fetch_add(GAMMA)`.
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
}

impl Rng for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..if cfg!(miri) { 100 } else { 1000 } {
            assert_eq!(a.next_u64(), b.next_u64());
            let x = a.below_inclusive(10);
            assert!(x <= 10);
            let f = b.unit_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert_eq!(SplitMix64::new(0).below_inclusive(0), 0);
    }

    #[test]
    fn known_first_output() {
        // Reference value of SplitMix64 seeded with 0.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
