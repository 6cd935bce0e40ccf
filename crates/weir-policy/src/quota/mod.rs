//! `[quota]` and `[routes.quota]`: long-period entitlements with a durable ledger — the
//! config and compile step ([`layer`]), the append-only ledger files ([`ledger`]) and the
//! per-request gate with its reservations ([`service`]). Periods and the per-key
//! decision are weir-core's ([`weir_core::quota`]).

pub(crate) mod admin;
pub(crate) mod layer;
pub(crate) mod ledger;
pub(crate) mod service;
pub(crate) mod step;

pub use layer::{Cost, QuotaPolicy, QuotaSettings, SyncPolicy};

#[cfg(test)]
mod tests;
