//! Request and response heads: no panic on any bytes, every error maps to a contract status,
//! and a complete parse never claims more bytes than it was given.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_http::fuzz_parse(data));
