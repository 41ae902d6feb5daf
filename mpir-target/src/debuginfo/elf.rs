//! What one ELF file offers: symbols from `.symtab` and `.dynsym`, loadable segments, and the
//! notes that lead to separate debug information (build-id, `.gnu_debuglink`,
//! `.gnu_debugaltlink`). Parsed once into owned data; the bytes are kept for DWARF.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mpir_types::{ByteOrder, DataModel};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind as ObjKind};

use super::error::DebugInfoError;
use crate::traits::{Binding, SymbolKind};

/// Which symbol table a symbol came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SymbolTable {
    /// `.symtab` (full table; stripped from most installed binaries).
    Symtab,
    /// `.dynsym` (exported symbols; survives stripping).
    Dynsym,
}

/// A defined symbol at its link-time address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfSymbol {
    /// Link-time address (add the image's load bias for the run-time address).
    pub address: u64,
    /// `st_size`.
    pub size: u64,
    /// Function, object, other.
    pub kind: SymbolKind,
    /// Global, local, weak.
    pub binding: Binding,
    /// The table it was found in.
    pub table: SymbolTable,
}

/// A `PT_LOAD` segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`.
    pub file_size: u64,
    /// `p_memsz`.
    pub mem_size: u64,
}

/// One parsed ELF file.
#[derive(Debug)]
pub struct ElfFile {
    path: PathBuf,
    data: Arc<[u8]>,
    model: DataModel,
    position_independent: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<(String, u32)>,
    debugaltlink: Option<(String, Vec<u8>)>,
    segments: Vec<LoadSegment>,
    symbols: HashMap<String, Vec<ElfSymbol>>,
    has_dwarf: bool,
}

fn elf_err(path: &Path, e: impl std::fmt::Display) -> DebugInfoError {
    DebugInfoError::Elf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl ElfFile {
    /// Reads and parses `path`.
    pub fn open(path: &Path) -> Result<Self, DebugInfoError> {
        let data = std::fs::read(path).map_err(|e| DebugInfoError::io(path, &e))?;
        ElfFile::parse(path, data.into())
    }

    /// Parses `data`, which was read from `path`.
    pub fn parse(path: &Path, data: Arc<[u8]>) -> Result<Self, DebugInfoError> {
        let obj = object::File::parse(&*data).map_err(|e| elf_err(path, e))?;
        if obj.format() != object::BinaryFormat::Elf {
            return Err(elf_err(path, format!("{:?} file, not ELF", obj.format())));
        }
        let order = if obj.is_little_endian() {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        };
        let model = match (obj.is_64(), order) {
            (true, ByteOrder::Little) => DataModel::LP64,
            (true, ByteOrder::Big) => DataModel::LP64_BE,
            (false, ByteOrder::Little) => DataModel::ILP32,
            (false, ByteOrder::Big) => DataModel::ILP32_BE,
        };
        let position_independent = obj.kind() == object::ObjectKind::Dynamic;
        let build_id = obj
            .build_id()
            .map_err(|e| elf_err(path, e))?
            .map(<[u8]>::to_vec);
        let debuglink = obj
            .gnu_debuglink()
            .map_err(|e| elf_err(path, e))?
            .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc));
        let debugaltlink = obj
            .gnu_debugaltlink()
            .map_err(|e| elf_err(path, e))?
            .map(|(name, id)| (String::from_utf8_lossy(name).into_owned(), id.to_vec()));
        let segments = obj
            .segments()
            .map(|s| {
                let (offset, file_size) = s.file_range();
                LoadSegment {
                    vaddr: s.address(),
                    offset,
                    file_size,
                    mem_size: s.size(),
                }
            })
            .collect();
        let has_dwarf = obj
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0 && s.kind() != object::SectionKind::UninitializedData);
        let mut symbols: HashMap<String, Vec<ElfSymbol>> = HashMap::new();
        let tables = [
            (SymbolTable::Symtab, obj.symbols()),
            (SymbolTable::Dynsym, obj.dynamic_symbols()),
        ];
        for (table, iter) in tables {
            for sym in iter {
                if sym.is_undefined()
                    || sym.kind() == ObjKind::Section
                    || sym.kind() == ObjKind::File
                {
                    continue;
                }
                let Ok(name) = sym.name() else { continue };
                if name.is_empty() {
                    continue;
                }
                let kind = match sym.kind() {
                    ObjKind::Text => SymbolKind::Function,
                    ObjKind::Data => SymbolKind::Object,
                    _ => SymbolKind::Other,
                };
                let binding = if sym.is_weak() {
                    Binding::Weak
                } else if sym.is_global() {
                    Binding::Global
                } else {
                    Binding::Local
                };
                let entry = ElfSymbol {
                    address: sym.address(),
                    size: sym.size(),
                    kind,
                    binding,
                    table,
                };
                let list = symbols.entry(name.to_string()).or_default();
                // The same symbol in both tables: keep one (the .symtab one, seen first).
                if !list.iter().any(|s| s.address == entry.address) {
                    list.push(entry);
                }
            }
        }
        Ok(ElfFile {
            path: path.to_path_buf(),
            data,
            model,
            position_independent,
            build_id,
            debuglink,
            debugaltlink,
            segments,
            symbols,
            has_dwarf,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes.
    pub fn data(&self) -> &Arc<[u8]> {
        &self.data
    }

    /// Data model implied by the ELF class and byte order (LP64 for 64-bit, ILP32 for 32-bit).
    pub fn data_model(&self) -> DataModel {
        self.model
    }

    /// `ET_DYN`: a shared library or PIE, loaded at a bias.
    pub fn is_position_independent(&self) -> bool {
        self.position_independent
    }

    /// The GNU build-id note.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// `.gnu_debuglink`: file name and CRC-32 of the separate debug file.
    pub fn debuglink(&self) -> Option<(&str, u32)> {
        self.debuglink.as_ref().map(|(n, c)| (n.as_str(), *c))
    }

    /// `.gnu_debugaltlink`: file name and build-id of the dwz supplementary file.
    pub fn debugaltlink(&self) -> Option<(&str, &[u8])> {
        self.debugaltlink
            .as_ref()
            .map(|(n, id)| (n.as_str(), id.as_slice()))
    }

    /// `PT_LOAD` segments.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.segments
    }

    /// Whether the file has a non-empty `.debug_info`.
    pub fn has_dwarf(&self) -> bool {
        self.has_dwarf
    }

    /// The definitions of `name` in this file (several for local symbols of different units).
    pub fn symbols(&self, name: &str) -> &[ElfSymbol] {
        self.symbols.get(name).map_or(&[], Vec::as_slice)
    }

    /// Number of distinct symbol names.
    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    /// The load bias of this file when the mapping of file offset `offset` starts at `start`,
    /// or `None` when no `PT_LOAD` segment covers that offset.
    pub fn bias_for_mapping(&self, start: u64, offset: u64) -> Option<u64> {
        let seg = self.segments.iter().find(|s| {
            offset >= s.offset.saturating_sub(s.offset % 4096)
                && offset < s.offset.saturating_add(s.file_size.max(1))
        })?;
        // vaddr and offset are congruent modulo the page size, so this is exact even when the
        // segment does not start on a page boundary.
        let vaddr_at_offset = seg.vaddr.wrapping_add(offset).wrapping_sub(seg.offset);
        Some(start.wrapping_sub(vaddr_at_offset))
    }
}

/// CRC-32 as `.gnu_debuglink` uses it (the zlib polynomial).
pub(crate) fn debuglink_crc(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
