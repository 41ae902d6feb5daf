//! What one ELF file offers: symbols from `.symtab` and `.dynsym`, loadable segments, and the
//! notes that lead to separate debug information (build-id, `.gnu_debuglink`,
//! `.gnu_debugaltlink`). Parsed once into owned data. Opening a file reads its headers alone
//! (a few kilobytes, [`super::elf_read`]); its symbol tables are read, and indexed, when its
//! symbols are first wanted (a rank maps ~85 files; a stacks read asks for the symbols of the
//! few its threads are in, and a warm symbol store answers name lookups without them). The
//! whole file is read only when its DWARF is wanted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use mpir_types::DataModel;
use object::elf::{FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Object, ObjectSymbol, ReadRef, SymbolKind as ObjKind};

use super::FileIdentity;
use super::elf_read::{self, LINK_SECTIONS, ReadError, Sparse};
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
    /// What its headers say.
    headers: Headers,
    /// The file's identity when it was opened by path (`None`: parsed from bytes).
    identity: Option<FileIdentity>,
    /// Built from `symbol_bytes` on first use.
    symbols: OnceLock<SymbolIndex>,
    /// Where the symbol tables are to be read from, until the index is built.
    symbol_bytes: Mutex<SymbolBytes>,
    /// The symbol tables were still on disk and could not be read (the file replaced since it
    /// was opened, or unreadable): its answers are "not read", never kept as "not there".
    symbols_unread: std::sync::atomic::AtomicBool,
    /// Names asked through [`ElfFile::lookup`] with a store: its answers and the new ones.
    names: Mutex<Option<Names>>,
}

/// An ELF file's symbol tables, before its index is built.
#[derive(Debug)]
enum SymbolBytes {
    /// Read (with the headers).
    Held(Sparse),
    /// Still in the file (see [`ElfFile::reopen`]): read when first wanted into `headers` (the
    /// headers read at open).
    OnDisk { headers: Sparse },
    /// In the whole file's bytes (`data`), or taken by the index.
    None,
}

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
    /// Parses the headers of `path` (see the module docs); its symbol tables are read when
    /// first wanted, from the same file (the same device, inode, size and modification time:
    /// a file replaced since gives no symbols rather than another file's).
    pub fn open(path: &Path) -> Result<Self, DebugInfoError> {
        let io = |e: std::io::Error| DebugInfoError::io(path, &e);
        let file = crate::files::open_regular(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let headers = elf_read::read_headers(&file, meta.len()).map_err(|e| read_err(path, e))?;
        let mut elf = ElfFile::parse_from(path, &headers, OnceLock::new())?;
        elf.identity = Some(FileIdentity::of(&meta));
        *lock(&elf.symbol_bytes) = SymbolBytes::OnDisk { headers };
        Ok(elf)
    }

    /// Parses `data` as [`ElfFile::open`] parses a file: its headers, then (at once) its
    /// symbol tables, through the same sparse reader (for fuzzing that path without files).
    pub fn parse_sparse(path: &Path, data: &[u8]) -> Result<Self, DebugInfoError> {
        let mut sparse =
            elf_read::read_headers(data, data.len() as u64).map_err(|e| read_err(path, e))?;
        let elf = ElfFile::parse_from(path, &sparse, OnceLock::new())?;
        // A file whose symbol tables do not read has no symbols, as when opened.
        if elf_read::read_symbols(data, &mut sparse).is_ok() {
            *lock(&elf.symbol_bytes) = SymbolBytes::Held(sparse);
        }
        Ok(elf)
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
        let h = match data.read_bytes_at(0, 5) {
            Ok([0x7f, b'E', b'L', b'F', 2]) => headers::<FileHeader64<object::Endianness>, R>(data),
            Ok([0x7f, b'E', b'L', b'F', 1]) => headers::<FileHeader32<object::Endianness>, R>(data),
            _ => Err("not an ELF file (no ELF magic and class)".to_string()),
        }
        .map_err(|e| elf_err(path, e))?;
        Ok(ElfFile {
            path: path.to_path_buf(),
            len: data.len().unwrap_or(0),
            data: whole,
            headers: h,
            identity: None,
            symbols: OnceLock::new(),
            symbol_bytes: Mutex::new(SymbolBytes::None),
            symbols_unread: std::sync::atomic::AtomicBool::new(false),
            names: Mutex::new(None),
        })
    }

    /// The symbol index, built on first use from the ranges [`ElfFile::open`] read (or from
    /// the whole file's bytes). A file that no longer parses gives an empty index: it parsed
    /// when opened, and the bytes kept are the ones parsed then.
    fn index(&self) -> &SymbolIndex {
        self.symbols.get_or_init(|| {
            let taken = std::mem::replace(&mut *self.symbol_bytes(), SymbolBytes::None);
            let parsed = match &taken {
                SymbolBytes::Held(sparse) => object::File::parse(sparse).map(|o| index_symbols(&o)),
                _ => match self.data.get() {
                    Some(Ok(data)) => object::File::parse(&data[..]).map(|o| index_symbols(&o)),
                    _ => return SymbolIndex::default(),
                },
            };
            parsed.unwrap_or_default()
        })
    }

    /// The symbol tables' bytes, read now (into the headers read at open) when they are still
    /// on disk; the lock held. A file replaced since, or that does not read, leaves none.
    fn symbol_bytes(&self) -> std::sync::MutexGuard<'_, SymbolBytes> {
        let mut kept = lock(&self.symbol_bytes);
        if let SymbolBytes::OnDisk { .. } = &*kept
            && let SymbolBytes::OnDisk { mut headers } =
                std::mem::replace(&mut *kept, SymbolBytes::None)
        {
            match self.reopen() {
                Some(file) if elf_read::read_symbols(&file, &mut headers).is_ok() => {
                    *kept = SymbolBytes::Held(headers);
                }
                _ => self
                    .symbols_unread
                    .store(true, std::sync::atomic::Ordering::Relaxed),
            }
        }
        kept
    }

    /// Whether the symbol tables were wanted and could not be read from the file opened (see
    /// [`ElfFile::symbols`]: then it has no symbols, and that is not a finding to keep).
    pub(crate) fn symbols_unread(&self) -> bool {
        self.symbols_unread
            .load(std::sync::atomic::Ordering::Relaxed)
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

    /// The file opened again by its path, to read parts of it, when it is still the file
    /// parsed: the same device, inode, size and modification time when it was opened by path,
    /// the same size otherwise (a file replaced since is not read as if it were this one).
    pub(crate) fn reopen(&self) -> Option<std::fs::File> {
        let file = crate::files::open_regular(&self.path).ok()?;
        let meta = file.metadata().ok()?;
        let same = match &self.identity {
            Some(id) => FileIdentity::of(&meta) == *id,
            None => meta.len() == self.len,
        };
        same.then_some(file)
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
        self.headers.model
    }

    /// `ET_DYN`: a shared library or PIE, loaded at a bias.
    pub fn is_position_independent(&self) -> bool {
        self.headers.position_independent
    }

    /// The GNU build-id note.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.headers.build_id.as_deref()
    }

    /// `.gnu_debuglink`: file name and CRC-32 of the separate debug file.
    pub fn debuglink(&self) -> Option<(&str, u32)> {
        self.headers
            .debuglink
            .as_ref()
            .map(|(n, c)| (n.as_str(), *c))
    }

    /// `.gnu_debugaltlink`: file name and build-id of the dwz supplementary file.
    pub fn debugaltlink(&self) -> Option<(&str, &[u8])> {
        self.headers
            .debugaltlink
            .as_ref()
            .map(|(n, id)| (n.as_str(), id.as_slice()))
    }

    /// `PT_LOAD` segments.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.headers.segments
    }

    /// Whether the file has a non-empty `.debug_info`.
    pub fn has_dwarf(&self) -> bool {
        self.headers.has_dwarf
    }

    /// The definitions of `name` in this file (several for local symbols of different units);
    /// none when its symbol tables could not be read from the file it was opened as (replaced
    /// since): such an answer is never kept in a symbol store.
    pub fn symbols(&self, name: &str) -> &[ElfSymbol] {
        self.index().get(name)
    }

    /// The definitions of `name`, as [`symbols`](ElfFile::symbols) finds them, through
    /// `store` when given: a name asked of this file (its build-id and size) in an earlier
    /// run is answered from the store without indexing the file's symbols; a new answer is
    /// kept there when the file is dropped. Files without a build-id are never stored.
    pub fn lookup(&self, name: &str, store: Option<&SymbolStore>) -> Vec<ElfSymbol> {
        let (Some(store), Some(id)) = (
            store,
            self.headers.build_id.as_deref().filter(|i| !i.is_empty()),
        ) else {
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
        // Indexed outside the lock: a large symbol table takes a while. Every file's answers
        // are kept, small tables' too: since symbol tables are read only when wanted, reading
        // a small store file costs less than reading and indexing a small table (measured:
        // interface detection on an Open MPI starter's 45 images 1.7 ms -> 0.95 ms).
        let found = self.symbols(name).to_vec();
        if self.symbols_unread() {
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
            let kept = self.symbol_bytes();
            if let SymbolBytes::Held(sparse) = &*kept
                && let Ok(obj) = object::File::parse(sparse)
            {
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
        let (Some(names), Some(id)) = (names.as_mut(), self.headers.build_id.as_deref()) else {
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
        let seg = self.headers.segments.iter().find(|s| {
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

/// What the headers of an ELF file say, parsed.
#[derive(Debug)]
struct Headers {
    model: DataModel,
    position_independent: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<(String, u32)>,
    debugaltlink: Option<(String, Vec<u8>)>,
    segments: Vec<LoadSegment>,
    has_dwarf: bool,
}

fn read_err(path: &Path, e: ReadError) -> DebugInfoError {
    match e {
        ReadError::Io(e) => DebugInfoError::io(path, &e),
        ReadError::Format(e) => elf_err(path, e),
    }
}

/// The headers of the ELF file in `data` (of class `Elf`): its data model, type, build-id,
/// debug links, loadable segments and whether it has DWARF, from the ELF header, the program
/// and section headers, section names and notes alone.
fn headers<'d, Elf, R>(data: R) -> Result<Headers, String>
where
    Elf: FileHeader<Endian = object::Endianness>,
    R: ReadRef<'d>,
{
    let e = |e: object::Error| e.to_string();
    let header = Elf::parse(data).map_err(e)?;
    let endian = header.endian().map_err(e)?;
    let model = match (
        header.is_type_64(),
        <object::Endianness as object::Endian>::is_little_endian(endian),
    ) {
        (true, true) => DataModel::LP64,
        (true, false) => DataModel::LP64_BE,
        (false, true) => DataModel::ILP32,
        (false, false) => DataModel::ILP32_BE,
    };
    let phdrs = header.program_headers(endian, data).map_err(e)?;
    let sections = header.sections(endian, data).map_err(e)?;
    // The GNU build-id note: in a note section, or (no section headers) a note segment.
    let mut build_id = None;
    let mut notes = Vec::new();
    if sections.is_empty() {
        for ph in phdrs {
            notes.extend(ph.notes(endian, data).map_err(e)?);
        }
    } else {
        for sh in sections.iter() {
            notes.extend(sh.notes(endian, data).map_err(e)?);
        }
    }
    'notes: for mut it in notes {
        while let Some(note) = it.next().map_err(e)? {
            if note.name() == object::elf::ELF_NOTE_GNU
                && note.n_type(endian) == object::elf::NT_GNU_BUILD_ID
            {
                build_id = Some(note.desc().to_vec());
                break 'notes;
            }
        }
    }
    // `.gnu_debuglink`: a file name, padding to 4, a CRC-32; `.gnu_debugaltlink`: a file
    // name and a build-id.
    let link = |name: &[u8]| -> Result<Option<(String, &'d [u8])>, String> {
        let Some((_, sh)) = sections.section_by_name(endian, name) else {
            return Ok(None);
        };
        let bytes = sh.data(endian, data).map_err(e)?;
        let end = bytes.iter().position(|&b| b == 0).ok_or_else(|| {
            format!(
                "{} without a terminated file name",
                String::from_utf8_lossy(name)
            )
        })?;
        let file = String::from_utf8_lossy(&bytes[..end]).into_owned();
        Ok(Some((file, &bytes[end + 1..])))
    };
    let debuglink = match link(LINK_SECTIONS[0])? {
        Some((file, rest)) => {
            // The CRC is 4-aligned from the section's start.
            let pad = (4 - (file.len() + 1) % 4) % 4;
            let crc = rest
                .get(pad..pad + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .ok_or(".gnu_debuglink without its CRC")?;
            Some((
                file,
                <object::Endianness as object::Endian>::read_u32(endian, crc),
            ))
        }
        None => None,
    };
    let debugaltlink = link(LINK_SECTIONS[1])?.map(|(file, id)| (file, id.to_vec()));
    let segments = phdrs
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| LoadSegment {
            vaddr: ph.p_vaddr(endian).into(),
            offset: ph.p_offset(endian).into(),
            file_size: ph.p_filesz(endian).into(),
            mem_size: ph.p_memsz(endian).into(),
        })
        .collect();
    let has_dwarf = sections
        .section_by_name(endian, b".debug_info")
        .is_some_and(|(_, sh)| {
            sh.sh_type(endian) != object::elf::SHT_NOBITS && sh.sh_size(endian).into() > 0
        });
    Ok(Headers {
        model,
        position_independent: header.e_type(endian) == object::elf::ET_DYN,
        build_id,
        debuglink,
        debugaltlink,
        segments,
        has_dwarf,
    })
}

/// CRC-32 as `.gnu_debuglink` uses it (the zlib polynomial).
pub(crate) fn debuglink_crc(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
