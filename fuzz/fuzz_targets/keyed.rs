//! Bounded keyed state against one plain limiter per key: fuzz/src/keyed.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::keyed::Input| weir_fuzz::keyed::check(input));
