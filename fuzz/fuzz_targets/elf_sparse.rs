//! Fuzz target: `mpir_target::fuzzing::elf_sparse` (the path `ElfFile::open` takes: ranges
//! chosen from the headers, a sparse reader). A bounded run is in `cargo test`
//! (debuginfo_no_panic).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mpir_target::fuzzing::elf_sparse(data));
