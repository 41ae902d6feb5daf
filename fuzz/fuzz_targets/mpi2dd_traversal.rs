//! Fuzz target: `mpi2dd::fuzzing::traversal`. A bounded run of the same harness is in `cargo test`
//! (mpi2dd/tests/fuzz_harness.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpi2dd::fuzzing::traversal(data));
