//! The shared end-to-end suite (crates/weir-e2e) against this crate's binary.

weir_e2e::suite!(env!("CARGO_BIN_EXE_weir-pingora"));
