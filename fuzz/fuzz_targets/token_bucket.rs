//! Token bucket (GCRA), single-owner vs an exact rational model vs the shared form:
//! fuzz/src/token_bucket.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::token_bucket::Input| weir_fuzz::token_bucket::check(input)
);
