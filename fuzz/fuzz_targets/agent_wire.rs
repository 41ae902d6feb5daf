//! Fuzz target: `mpir_wire::fuzzing::frames`, the agent transport's frame decoder and both
//! handshakes (the same harness runs bounded in `cargo test -p mpir-wire --test wire fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_wire::fuzzing::frames(data));
