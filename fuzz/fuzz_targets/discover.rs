//! Fuzz target: `mpir_types::fuzzing::discover`, the search for a symbol-less starter's MPIR
//! table (the same harness runs bounded in `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_types::fuzzing::discover(data));
