//! Circuit breaker, single-owner vs shared vs its model: fuzz/src/breaker.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::breaker::Input| weir_fuzz::breaker::check(input));
