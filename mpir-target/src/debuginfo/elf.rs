//! What one ELF file offers: symbols from `.symtab` and `.dynsym`, loadable segments, and the
//! notes that lead to separate debug information (build-id, `.gnu_debuglink`,
//! `.gnu_debugaltlink`). Parsed once into owned data. Only the ranges parsing needs are read
//! (headers, symbol and string tables, notes): a process maps dozens of libraries, and reading
//! each whole would dominate an attach. The whole file is read only when its DWARF is wanted.
//! The symbol index is built on first use: a rank maps ~85 files and a stacks read asks for the
//! symbols of the few its threads are in (building them all was a third of the images' cost).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use mpir_types::{ByteOrder, DataModel};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadRef, SymbolKind as ObjKind};

use super::error::DebugInfoError;
use super::store::SymbolStore;
use super::symbol_index::{SymbolIndex, SymbolIndexBuilder};
use crate::traits::{Binding, SymbolKind};

/// Which symbol table a symbol came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "ELF has two symbol tables, .symtab and .dynsym"
)]
pub enum SymbolTable {
    /// `.symtab` (full table; stripped from most installed binaries).
    Symtab,
    /// `.dynsym` (exported symbols; survives stripping).
    Dynsym,
}

/// A defined symbol at its link-time address.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
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
    len: u64,
    /// The whole file, read on first use (for DWARF).
    data: OnceLock<Result<Arc<[u8]>, DebugInfoError>>,
    model: DataModel,
    position_independent: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<(String, u32)>,
    debugaltlink: Option<(String, Vec<u8>)>,
    segments: Vec<LoadSegment>,
    /// Built from `symbol_bytes` on first use.
    symbols: OnceLock<SymbolIndex>,
    /// The ranges read by [`ElfFile::open`] (symbol and string tables among them), kept until
    /// the index is built; `None` for a file parsed from whole bytes (then `data`).
    symbol_bytes: Mutex<Option<Sparse>>,
    /// Names asked through [`ElfFile::lookup`] with a store: its answers and the new ones.
    names: Mutex<Option<Names>>,
    has_dwarf: bool,
}

/// Files with fewer symbols are not worth a store file: indexing them takes less than writing
/// and reading one.
const MIN_STORED_SYMBOLS: usize = 1024;

/// The answers to names asked of one file, kept in a [`SymbolStore`].
#[derive(Debug)]
struct Names {
    store: SymbolStore,
    answers: HashMap<String, Vec<ElfSymbol>>,
    /// Answers found since the store was read.
    new: usize,
}

impl Drop for ElfFile {
    /// Keeps the answers found since they were last saved.
    fn drop(&mut self) {
        self.save_names();
    }
}

fn elf_err(path: &Path, e: impl std::fmt::Display) -> DebugInfoError {
    DebugInfoError::Elf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl ElfFile {
    /// Parses `path`, reading only what parsing needs: the headers, the symbol and string
    /// tables, notes and small sections (a sparse view of the file).
    pub fn open(path: &Path) -> Result<Self, DebugInfoError> {
        let io = |e: std::io::Error| DebugInfoError::io(path, &e);
        let file = crate::files::open_regular(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let ranges = {
            let cache = object::ReadCache::new(&file);
            wanted_ranges(&cache).map_err(|e| elf_err(path, e))?
        };
        let sparse = Sparse::read(&file, len, ranges).map_err(io)?;
        ElfFile::parse_from(path, &sparse, OnceLock::new()).map(|f| f.keeping(sparse))
    }

    /// Parses `data` as [`ElfFile::open`] parses a file: only the ranges it wants, through the
    /// same sparse reader (for fuzzing that path without files).
    pub fn parse_sparse(path: &Path, data: &[u8]) -> Result<Self, DebugInfoError> {
        let ranges = wanted_ranges(data).map_err(|e| elf_err(path, e))?;
        let sparse = Sparse::from_slice(data, ranges);
        ElfFile::parse_from(path, &sparse, OnceLock::new()).map(|f| f.keeping(sparse))
    }

    /// `self`, its symbols to be indexed from `sparse` when first asked for.
    fn keeping(self, sparse: Sparse) -> Self {
        *lock(&self.symbol_bytes) = Some(sparse);
        self
    }

    /// Parses `data`, which was read from `path`.
    pub fn parse(path: &Path, data: Arc<[u8]>) -> Result<Self, DebugInfoError> {
        let whole = OnceLock::from(Ok(Arc::clone(&data)));
        ElfFile::parse_from(path, &*data, whole)
    }

    fn parse_from<'d, R: ReadRef<'d>>(
        path: &Path,
        data: R,
        whole: OnceLock<Result<Arc<[u8]>, DebugInfoError>>,
    ) -> Result<Self, DebugInfoError> {
        let obj = object::File::parse(data).map_err(|e| elf_err(path, e))?;
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
        Ok(ElfFile {
            path: path.to_path_buf(),
            len: data.len().unwrap_or(0),
            data: whole,
            model,
            position_independent,
            build_id,
            debuglink,
            debugaltlink,
            segments,
            symbols: OnceLock::new(),
            symbol_bytes: Mutex::new(None),
            names: Mutex::new(None),
            has_dwarf,
        })
    }

    /// The symbol index, built on first use from the ranges [`ElfFile::open`] read (or from
    /// the whole file's bytes). A file that no longer parses gives an empty index: it parsed
    /// when opened, and the bytes kept are the ones parsed then.
    fn index(&self) -> &SymbolIndex {
        self.symbols.get_or_init(|| {
            let sparse = lock(&self.symbol_bytes).take();
            let parsed = match &sparse {
                Some(sparse) => object::File::parse(sparse).map(|o| index_symbols(&o)),
                None => match self.data.get() {
                    Some(Ok(data)) => object::File::parse(&data[..]).map(|o| index_symbols(&o)),
                    _ => return SymbolIndex::default(),
                },
            };
            parsed.unwrap_or_default()
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes, when they are in memory already (parsed from bytes, or read whole for
    /// DWARF).
    pub(crate) fn loaded_data(&self) -> Option<&Arc<[u8]>> {
        self.data.get().and_then(|d| d.as_ref().ok())
    }

    /// The file opened again by its path, to read parts of it, when it still has the size it
    /// had when parsed (a file replaced since is not read as if it were this one).
    pub(crate) fn reopen(&self) -> Option<std::fs::File> {
        let file = crate::files::open_regular(&self.path).ok()?;
        (file.metadata().ok()?.len() == self.len).then_some(file)
    }

    /// The file's size in bytes, when it was parsed.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The file's bytes (read on first use).
    pub fn data(&self) -> Result<&Arc<[u8]>, DebugInfoError> {
        self.data
            .get_or_init(|| {
                crate::files::read_regular(&self.path)
                    .map(Arc::from)
                    .map_err(|e| DebugInfoError::io(&self.path, &e))
            })
            .as_ref()
            .map_err(Clone::clone)
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
        self.index().get(name)
    }

    /// The definitions of `name`, as [`symbols`](ElfFile::symbols) finds them, through
    /// `store` when given: a name asked of this file (its build-id and size) in an earlier
    /// run is answered from the store without indexing the file's symbols; a new answer is
    /// kept there when the file is dropped. Files without a build-id are never stored.
    pub fn lookup(&self, name: &str, store: Option<&SymbolStore>) -> Vec<ElfSymbol> {
        let (Some(store), Some(id)) = (store, self.build_id.as_deref().filter(|i| !i.is_empty()))
        else {
            return self.symbols(name).to_vec();
        };
        {
            let mut names = lock(&self.names);
            let names = names.get_or_insert_with(|| Names {
                store: store.clone(),
                answers: store
                    .load_names(id, self.len)
                    .unwrap_or_else(|e| {
                        store.note(e);
                        None
                    })
                    .unwrap_or_default(),
                new: 0,
            });
            if let Some(found) = names.answers.get(name) {
                return found.clone();
            }
        }
        // Indexed outside the lock: a large symbol table takes a while.
        let found = self.symbols(name).to_vec();
        // A small table is indexed faster than a store file is written and read.
        if self.symbol_count() < MIN_STORED_SYMBOLS {
            return found;
        }
        if let Some(names) = lock(&self.names).as_mut()
            && names.answers.len() < super::store::MAX_ENTRIES
        {
            names.answers.insert(name.to_string(), found.clone());
            names.new += 1;
        }
        found
    }

    /// Calls `f` with every defined symbol and its name (in no particular order; a symbol in
    /// both tables may come twice), without building the name index when it is not built yet:
    /// for a caller that wants them all once (the unwinder's function table).
    pub(crate) fn each_symbol(&self, mut f: impl FnMut(&str, &ElfSymbol)) {
        if self.symbols.get().is_none() {
            let kept = lock(&self.symbol_bytes);
            if let Some(obj) = kept.as_ref().and_then(|s| object::File::parse(s).ok()) {
                each_symbol(&obj, |name, s| f(name, &s));
                return;
            }
            // Let go before the index is built: building it takes this lock.
            drop(kept);
        }
        for (name, s) in self.all_symbols() {
            f(name, s);
        }
    }

    /// Writes to the store the answers [`lookup`](ElfFile::lookup) found since the store was
    /// read or last saved (a small file); whether one was written. A failure is noted on the
    /// store, and the next run finds the answers again.
    pub fn save_names(&self) -> bool {
        let mut names = lock(&self.names);
        let (Some(names), Some(id)) = (names.as_mut(), self.build_id.as_deref()) else {
            return false;
        };
        if names.new == 0 {
            return false;
        }
        names.new = 0;
        match names.store.save_names(id, self.len, &names.answers) {
            Ok(()) => true,
            Err(e) => {
                names.store.note(e);
                false
            }
        }
    }

    /// Every defined symbol, with its name (in no particular order).
    pub fn all_symbols(&self) -> impl Iterator<Item = (&str, &ElfSymbol)> {
        self.index().iter()
    }

    /// Number of distinct symbol names.
    pub fn symbol_count(&self) -> usize {
        self.index().len()
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

/// Every defined, named symbol of `obj`'s `.symtab` and `.dynsym`, by name.
fn index_symbols<'d, R: ReadRef<'d>>(obj: &object::File<'d, R>) -> SymbolIndex {
    let mut symbols = SymbolIndexBuilder::default();
    // The same symbol in both tables: one is kept (the .symtab one, seen first).
    each_symbol(obj, |name, entry| symbols.add(name, entry));
    symbols.finish()
}

/// Calls `f` with every defined, named symbol of `obj`'s `.symtab`, then `.dynsym`.
fn each_symbol<'d, R: ReadRef<'d>>(obj: &object::File<'d, R>, mut f: impl FnMut(&str, ElfSymbol)) {
    let tables = [
        (SymbolTable::Symtab, obj.symbols()),
        (SymbolTable::Dynsym, obj.dynamic_symbols()),
    ];
    for (table, iter) in tables {
        for sym in iter {
            if sym.is_undefined() || sym.kind() == ObjKind::Section || sym.kind() == ObjKind::File {
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
            f(
                name,
                ElfSymbol {
                    address: sym.address(),
                    size: sym.size(),
                    kind,
                    binding,
                    table,
                },
            );
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Some ranges of a file, read into memory; the rest is absent (reading it is an error, which
/// the parser reports as a malformed file rather than reading garbage).
#[derive(Debug)]
struct Sparse {
    len: u64,
    /// Disjoint, sorted by start: (start, bytes).
    chunks: Vec<(u64, Vec<u8>)>,
}

impl Sparse {
    fn read(file: &std::fs::File, len: u64, ranges: Vec<(u64, u64)>) -> std::io::Result<Self> {
        use std::os::unix::fs::FileExt;
        let chunks = merge(ranges, len)
            .into_iter()
            .map(|(start, end)| {
                let mut buf = vec![0u8; (end - start) as usize];
                file.read_exact_at(&mut buf, start)?;
                Ok((start, buf))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Sparse { len, chunks })
    }

    /// The same from bytes in memory.
    fn from_slice(data: &[u8], ranges: Vec<(u64, u64)>) -> Self {
        let len = data.len() as u64;
        let chunks = merge(ranges, len)
            .into_iter()
            .filter_map(|(start, end)| {
                let bytes = data.get(start as usize..end as usize)?.to_vec();
                Some((start, bytes))
            })
            .collect();
        Sparse { len, chunks }
    }

    /// The chunk holding `offset`, and `offset`'s index in it.
    fn chunk(&self, offset: u64) -> Option<(&[u8], usize)> {
        let i = self
            .chunks
            .partition_point(|(s, _)| *s <= offset)
            .checked_sub(1)?;
        let (start, bytes) = self.chunks.get(i)?;
        let at = usize::try_from(offset - start).ok()?;
        (at < bytes.len()).then_some((bytes.as_slice(), at))
    }
}

/// Sorted, merged `[start, end)` ranges of (offset, size) pairs, clamped to `len`.
fn merge(mut ranges: Vec<(u64, u64)>, len: u64) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (start, size) in ranges {
        let end = start.saturating_add(size).min(len);
        if start >= end {
            continue;
        }
        match merged.last_mut() {
            Some((_, e)) if start <= *e => *e = (*e).max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

impl<'a> ReadRef<'a> for &'a Sparse {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let (bytes, at) = self.chunk(offset).ok_or(())?;
        let end = at
            .checked_add(usize::try_from(size).map_err(|_| ())?)
            .ok_or(())?;
        bytes.get(at..end).ok_or(())
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        let (bytes, at) = self.chunk(range.start).ok_or(())?;
        let limit = usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(usize::MAX);
        let rest = bytes.get(at..).ok_or(())?;
        let rest = rest.get(..limit.min(rest.len())).ok_or(())?;
        let n = rest.iter().position(|&b| b == delimiter).ok_or(())?;
        rest.get(..n).ok_or(())
    }
}

/// Largest section read for parsing whatever its type (`.gnu_debuglink`, `.interp`, …).
const SMALL_SECTION: u64 = 4096;

/// The file ranges [`ElfFile`]'s parse reads: headers, symbol tables, string tables, notes,
/// small sections.
fn wanted_ranges<'d, R: ReadRef<'d>>(data: R) -> object::Result<Vec<(u64, u64)>> {
    use object::elf::{FileHeader32, FileHeader64};
    // EI_CLASS: 1 for 32-bit, 2 for 64-bit. Anything else (or no ELF at all) is left to the
    // parser, which says what is wrong.
    match data
        .read_bytes_at(4, 1)
        .ok()
        .and_then(|b| b.first().copied())
    {
        Some(2) => ranges_of::<FileHeader64<object::Endianness>, R>(data),
        Some(1) => ranges_of::<FileHeader32<object::Endianness>, R>(data),
        _ => Ok(vec![(0, 64)]),
    }
}

fn ranges_of<'d, Elf, R>(data: R) -> object::Result<Vec<(u64, u64)>>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
    R: ReadRef<'d>,
{
    use object::read::elf::{ProgramHeader, SectionHeader};
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let mut v = vec![(0, std::mem::size_of::<Elf>() as u64)];
    let phdrs = header.program_headers(endian, data)?;
    v.push((
        header.e_phoff(endian).into(),
        std::mem::size_of_val(phdrs) as u64,
    ));
    for ph in phdrs {
        if ph.p_type(endian) == object::elf::PT_NOTE {
            v.push((ph.p_offset(endian).into(), ph.p_filesz(endian).into()));
        }
    }
    let shdrs = header.section_headers(endian, data)?;
    v.push((
        header.e_shoff(endian).into(),
        std::mem::size_of_val(shdrs) as u64,
    ));
    for sh in shdrs {
        let size: u64 = sh.sh_size(endian).into();
        let wanted = match sh.sh_type(endian) {
            object::elf::SHT_SYMTAB
            | object::elf::SHT_DYNSYM
            | object::elf::SHT_STRTAB
            | object::elf::SHT_NOTE
            | object::elf::SHT_SYMTAB_SHNDX => true,
            object::elf::SHT_NOBITS => false,
            _ => size <= SMALL_SECTION,
        };
        if wanted {
            v.push((sh.sh_offset(endian).into(), size));
        }
    }
    Ok(v)
}

/// CRC-32 as `.gnu_debuglink` uses it (the zlib polynomial).
pub(crate) fn debuglink_crc(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
