//! Shared helpers for weir's criterion suites (see `benches/`).
