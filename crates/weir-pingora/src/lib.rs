//! weir for Pingora: rate limits, concurrency limits, deadlines, retries and breakers for a
//! Pingora `ProxyHttp`, driven by weir's TOML config; and the `weir-pingora` binary.
//!
//! (Skeleton: the policy engine is wired in once `weir-policy` lands.)

pub mod cli;
pub mod server;
