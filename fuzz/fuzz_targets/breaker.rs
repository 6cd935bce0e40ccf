#![no_main]
libfuzzer_sys::fuzz_target!(|input: weir_fuzz::breaker::Input| weir_fuzz::breaker::check(input));
