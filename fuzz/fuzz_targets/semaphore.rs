//! Semaphore, the real one vs a plain counter: fuzz/src/semaphore.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::semaphore::Input| weir_fuzz::semaphore::check(input)
);
