//! Outlier ejection, the shared machine vs the plain model: fuzz/src/outlier.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::outlier::Input| weir_fuzz::outlier::check(input));
