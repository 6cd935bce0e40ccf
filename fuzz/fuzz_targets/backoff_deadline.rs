//! Backoff and deadline budget: the bounds of fuzz/src/backoff_deadline.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::backoff_deadline::Input| {
    weir_fuzz::backoff_deadline::check(input)
});
