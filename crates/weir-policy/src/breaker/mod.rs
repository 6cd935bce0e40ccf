//! `[routes.breaker]`: its config and compile step ([`layer`]) and its per-attempt step
//! ([`service`]).

pub(crate) mod layer;
pub(crate) mod service;

pub use layer::BreakerPolicy;
