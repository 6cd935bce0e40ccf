//! `[routes.retry]`: its config and compile step ([`layer`]) and its after-attempt step
//! ([`service`]).

pub(crate) mod layer;
pub(crate) mod service;

pub use layer::{BackoffPolicy, BudgetPolicy, RetryPolicy};
