//! Fuzz target: `mpir_target::fuzzing::elf_types` (ELF + DWARF type lookup). A bounded run of
//! the same harness on mutated real binaries is in `cargo test` (debuginfo_no_panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_target::fuzzing::elf_types(data));
