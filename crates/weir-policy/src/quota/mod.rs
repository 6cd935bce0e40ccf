//! Quotas (admissions per day or month, per consumer) — not a feature yet.
//!
//! The seam where one would go: like [`crate::ratelimit`], a `layer.rs` with the
//! `[routes.quota]` file model, the compiled policy and its compile step, and a
//! `service.rs` with its runtime (kept across reloads) and its per-request step, called
//! by [`crate::flow::Flow::admit`] right after the rate limit. Nothing reads this module.
