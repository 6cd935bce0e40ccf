//! # weir-core
//!
//! The decisions of weir — *admit, delay or reject* and *retry or stop* — as small,
//! pure state machines over an injected clock. `#![no_std]`, never `alloc`: every
//! primitive lives in caller-owned memory of a size known at compile time.
//!
//! Every primitive takes the current instant as an argument ([`Nanos`]) instead of
//! reading a clock itself, so tests and simulations run on a [`ManualClock`] and never
//! sleep. Randomness (jitter) is injected through the [`Rng`] trait.
//!
//! Each primitive comes in a single-owner form (`&mut self`) and, where threads share it,
//! a lock-free shared form (`&self`) that applies the *same* pure step in a CAS loop over
//! `portable-atomic` atomics (or `loom`'s under `--cfg weir_loom`).
//!
//! Arithmetic never panics: it saturates or is checked, and where it rounds the rounding
//! is documented on the item (always in the conservative direction: never admit more than
//! the exact model).
//!
//! ## Targets without 64-bit atomics
//! Shared forms use 64-bit atomics. On targets that lack them (e.g. `thumbv7em-none-eabihf`)
//! enable the `fallback` feature: portable-atomic then implements them with a global
//! spin-lock based fallback (correct, but not lock-free on such targets).
#![no_std]
#![warn(
    clippy::std_instead_of_core,
    clippy::std_instead_of_alloc,
    clippy::alloc_instead_of_core
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "std", test))]
extern crate std;

pub(crate) mod sync;

pub mod decision;
pub mod rng;
pub mod time;

pub use decision::{Decision, InsufficientCapacity, Verdict};
pub use rng::{Rng, SplitMix64};
#[cfg(feature = "std")]
pub use time::StdClock;
pub use time::{Clock, ManualClock, Nanos};
