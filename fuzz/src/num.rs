//! Numbers a fuzzer should try: mostly small, often at the edges of `u64`.

use arbitrary::{Arbitrary, Result, Unstructured};

/// A `u64` biased towards small values, powers of two and the extremes, where
/// arithmetic bugs live; still able to produce any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct N(pub u64);

impl<'a> Arbitrary<'a> for N {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let v = match u.int_in_range(0u8..=9)? {
            0..=3 => u64::from(u.int_in_range(0u8..=16)?),
            4 => u64::from(u.arbitrary::<u16>()?),
            5 => 1u64 << u.int_in_range(0u32..=63)?,
            6 => (1u64 << u.int_in_range(0u32..=63)?).wrapping_sub(1),
            7 => u64::MAX - u64::from(u.int_in_range(0u8..=3)?),
            8 => (1u64 << 63) + u64::from(u.int_in_range(0u8..=3)?) - 2,
            _ => u.arbitrary::<u64>()?,
        };
        Ok(N(v))
    }
}

/// A clock movement: forward, backward, or a jump to an absolute instant.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Tick {
    /// Forward by this much (saturating).
    Advance(N),
    /// Backward by this much (saturating at zero).
    Rewind(N),
    /// Set to this instant.
    Set(N),
}

impl Tick {
    /// The clock after this movement.
    pub fn apply(self, now: u64) -> u64 {
        match self {
            Tick::Advance(N(d)) => now.saturating_add(d),
            Tick::Rewind(N(d)) => now.saturating_sub(d),
            Tick::Set(N(t)) => t,
        }
    }
}

/// One operation of a limiter that only acquires, peeks and follows the clock (the leaky
/// bucket's and the windows' fuzz sequences).
#[derive(Debug, Arbitrary)]
pub enum CostOp {
    /// Acquire a cost (requests arriving together).
    Acquire(N),
    /// Peek a cost.
    Peek(N),
    /// Move the clock.
    Clock(Tick),
}
