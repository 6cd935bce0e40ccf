//! Retry budget, single-owner vs shared vs the exact model: fuzz/src/retry_budget.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::retry_budget::Input| weir_fuzz::retry_budget::check(input)
);
