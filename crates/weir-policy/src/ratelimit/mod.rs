//! `[routes.rate_limit]`: its config and compile step ([`layer`]), its keyed local tables
//! ([`local`]) and its per-request step ([`service`]).

pub(crate) mod bypass;
pub(crate) mod layer;
pub(crate) mod local;
pub(crate) mod service;
pub(crate) mod step;

pub use layer::{KeyPart, Mode, OnStoreError, RateLimitPolicy, Scope};
