//! Fuzz target: `mpir_target::fuzzing::core` (a core file's headers, notes and memory). A
//! bounded run of the same harness on corrupted real cores is in `cargo test -p mpir-target
//! --test core_no_panic`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_target::fuzzing::core(data));
