//! `[[identities]]` and `[routes.auth]`: the identities and their compile step
//! ([`layer`]) and the per-request step with the verified-token cache ([`service`]).
//! Auth runs before every other step of [`crate::Flow::admit`]; a request that fails it
//! consumes nothing anywhere.

pub(crate) mod layer;
pub(crate) mod service;
#[cfg(test)]
mod tests;

pub use layer::{AuthPolicy, IdentityKind, IdentityPolicy};
