//! Fuzz target: `mpir_target::fuzzing::unwind` (the CFI-driven unwinder: an image's
//! `.eh_frame`/`.eh_frame_hdr` and DWARF expressions, registers and a stack, all mutated). A
//! bounded run of the same harness on a corrupted real image is in `cargo test -p mpir-target
//! --test unwind_no_panic`; `fuzz/seed.sh` writes its seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mpir_target::fuzzing::unwind(data);
});
