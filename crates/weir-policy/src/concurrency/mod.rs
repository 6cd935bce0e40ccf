//! `[routes.concurrency]`: its config and compile step ([`layer`]) and its per-request
//! step, the permit with a bounded queue ([`service`]).

pub(crate) mod layer;
pub(crate) mod service;
pub(crate) mod step;

pub use layer::ConcurrencyPolicy;
