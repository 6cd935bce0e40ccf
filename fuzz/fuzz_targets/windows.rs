#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::windows::Input| weir_fuzz::windows::check(input));
