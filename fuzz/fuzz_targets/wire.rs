//! Fuzz target: `mpir_mqd::fuzzing::wire`, the out-of-process host's pipe protocol (the same
//! harness runs bounded in `cargo test -p mpir-mqd --test fuzz_wire`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_mqd::fuzzing::wire(data));
