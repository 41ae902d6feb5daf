//! Fuzz target: `mpir_types::fuzzing::stack_build` (the same harness runs bounded in `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_types::fuzzing::stack_build(data));
