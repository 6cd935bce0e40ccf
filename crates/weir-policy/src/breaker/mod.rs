//! `[routes.breaker]`: its config and compile step ([`layer`]) and its per-attempt step
//! ([`service`]).

pub(crate) mod layer;
pub(crate) mod service;
pub(crate) mod step;

pub use layer::BreakerPolicy;
