//! Fixed window, sliding-window counter and sliding log vs their models: fuzz/src/windows.rs.
#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::windows::Input| weir_fuzz::windows::check(input));
