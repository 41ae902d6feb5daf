//! Fuzz target: `mpir_target::fuzzing::elf_symbolize` (the stack symboliser: function index,
//! addr2line lines and inline frames over an ELF file's DWARF). A bounded run on a corrupted
//! real file is in `cargo test -p mpir-target --test debuginfo_no_panic`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mpir_target::fuzzing::elf_symbolize(data);
});
