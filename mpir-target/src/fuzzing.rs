//! Fuzz harnesses of this crate, shared by `fuzz/` and the bounded no-panic test.

use std::path::Path;

use crate::debuginfo::{ElfFile, TypeIndex};

/// Parses arbitrary bytes as an ELF file, indexes its DWARF and looks types up: by the names it
/// has, through its variables, and the MPIR ones. Must never panic or hang.
pub fn elf_types(data: &[u8]) {
    let Ok(elf) = ElfFile::parse(Path::new("fuzz-input"), data.into()) else {
        return;
    };
    let _ = elf.symbols("MPIR_proctable");
    let _ = elf.bias_for_mapping(0x5555_0000_0000, 0);
    let Ok(index) = TypeIndex::load(&elf, None) else {
        return;
    };
    for name in index.type_names().take(64) {
        let _ = index.named(&name);
    }
    for var in index.variable_names().take(64) {
        let _ = index.pointee_of_variable(&var);
    }
    let _ = index.named("MPIR_PROCDESC");
    let _ = index.pointee_of_variable("MPIR_proctable");
}

/// Parses arbitrary bytes as [`ElfFile::open`] parses a file: the header-driven choice of
/// ranges, the sparse reader, then symbols. Must never panic, hang, or allocate more than the
/// input's size.
pub fn elf_sparse(data: &[u8]) {
    let Ok(elf) = ElfFile::parse_sparse(Path::new("fuzz-input"), data) else {
        return;
    };
    let _ = elf.symbols("MPIR_Breakpoint");
    let _ = elf.build_id();
    let _ = elf.debuglink();
    let _ = elf.has_dwarf();
}
