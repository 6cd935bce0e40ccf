//! Leaky bucket, single-owner vs shared vs nginx's algorithm: fuzz/src/leaky_bucket.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::leaky_bucket::Input| weir_fuzz::leaky_bucket::check(input)
);
