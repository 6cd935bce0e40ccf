//! The chunked decoder: no panic, and the decoded body does not depend on how the input
//! is split across reads.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_http::fuzz_chunked(data));
