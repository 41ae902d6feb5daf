//! Symbols and type layouts from real binaries: ELF symbol tables (`.symtab`, `.dynsym`, global
//! and local), the images of a live process with their load biases, DWARF type layouts, and
//! separate debug information (build-id directories, `.gnu_debuglink`, dwz, explicit files,
//! types sidecars, and last the [`debuginfod`] servers of `DEBUGINFOD_URLS` or
//! [`DebugOptions::debuginfod`]). Every answer says where it came from; every candidate refused
//! (a wrong build-id, a server down or slow, a file too large) leaves a note on its image
//! ([`Image::notes`]).
//!
//! ```no_run
//! use mpir_target::debuginfo::{DebugOptions, ProcessImages};
//! use mpir_target::{SymbolLookup, TypeLookup, TypeQuery};
//! use mpir_types::mpir::ProcDescLayout;
//!
//! # fn main() -> Result<(), mpir_target::TargetError> {
//! let pid = 4242; // a running mpiexec
//! let images = ProcessImages::for_pid(pid, DebugOptions::default())?;
//! let table = images.symbol("MPIR_proctable")?.expect("not an MPIR starter");
//! println!("MPIR_proctable at {:#x} in {:?}", table.address, table.image);
//! let ty = images.type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))?;
//! let layout = match ty {
//!     Some(ty) => ProcDescLayout::from_type(&ty, &images.data_model())?,
//!     None => ProcDescLayout::abi(&images.data_model()), // no DWARF: the ABI layout
//! };
//! println!("MPIR_PROCDESC: {} bytes, from {}", layout.size, layout.source);
//! # Ok(()) }
//! ```

pub mod debuginfod;
mod dwarf;
mod elf;
mod elf_read;
mod error;
mod images;
mod locate;
mod maps;
pub(crate) mod store;
mod symbol_index;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use debuginfod::{DebuginfodClient, DebuginfodError, DebuginfodOptions};
pub(crate) use dwarf::load_dwarf_for_lines;
pub use dwarf::{MAX_UNCOMPRESSED_SECTION, TypeIndex};
pub use elf::{ElfFile, ElfSymbol, LoadSegment, SymbolTable};
pub use error::DebugInfoError;
pub use images::{Image, ProcessImages};
pub use locate::{DebugOptions, DebugSource};
pub(crate) use maps::writable_ranges;
pub use store::{
    MAX_ENTRIES as MAX_STORED_ANSWERS, MAX_FILE as MAX_STORE_FILE, StoreError, SymbolStore,
};

/// What identifies one version of a file: device, inode, size and modification time (a file
/// replaced or rewritten differs in one of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: Option<std::time::SystemTime>,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: meta.modified().ok(),
        }
    }
}

/// A file parsed (or found not to be usable ELF) with the identity it had then.
type CachedFile = (FileIdentity, Result<Arc<ElfFile>, DebugInfoError>);

/// Files parsed and DWARF indexed, shared between the images of many processes (every rank of a
/// job maps the same libraries). Entries are keyed by path and checked against the file's
/// device, inode, size and modification time (one `stat` per open); a file that is not usable
/// ELF is remembered too, so it is not read again while it is unchanged.
#[derive(Debug, Default)]
pub struct FileCache {
    // Keyed by the path's bytes: `Path`'s own hashing walks its components, which cost more
    // than the lookup itself for the thousands of lookups of a large job (paths come from the
    // kernel's maps, already normal).
    files: Mutex<HashMap<OsString, CachedFile>>,
    types: Mutex<HashMap<OsString, Arc<TypeIndex>>>,
    debug: Mutex<HashMap<(OsString, bool), DebugSearch>>,
    /// Whether each directory a debug-file search looked in exists: the places searched for
    /// every image file (`.debug/` beside it, the debug directories' copies of its directory,
    /// the build-id directories) are a handful of directories, most of them absent.
    dirs: Mutex<HashMap<OsString, bool>>,
}

/// The separate debug file found for an image file, and how.
type DebugFound = Option<(Arc<ElfFile>, DebugSource)>;

/// One search for an image file's separate debug information, remembered.
#[derive(Debug)]
struct DebugSearch {
    /// The image file searched for (this version of it).
    elf: Arc<ElfFile>,
    /// The options searched with.
    options: DebugOptions,
    found: DebugFound,
    notes: Vec<String>,
}

impl FileCache {
    /// An empty cache.
    pub fn new() -> Self {
        FileCache::default()
    }

    /// The parsed file at `path`, from the cache when it has not changed (the same device,
    /// inode, size and modification time). A file that is not usable ELF gives the same error
    /// again without being read; an I/O error is not remembered.
    pub fn open(&self, path: &Path) -> Result<Arc<ElfFile>, DebugInfoError> {
        let meta = std::fs::metadata(path).map_err(|e| DebugInfoError::io(path, &e))?;
        self.open_as(path, &meta)
    }

    /// Whether a parse of the file at `path` (as opened, not canonicalised) is held.
    pub fn holds(&self, path: &Path) -> bool {
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path.as_os_str())
            .is_some_and(|(_, f)| f.is_ok())
    }

    /// [`open`](FileCache::open) of `path`, whose metadata the caller has just read. The file
    /// is parsed outside the cache's lock (the ranks' images are opened on several threads);
    /// when two threads parse one file at once, the first to finish is the one kept and
    /// returned to both.
    pub(crate) fn open_as(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<Arc<ElfFile>, DebugInfoError> {
        let id = FileIdentity::of(meta);
        let lock = || self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known, f)) = lock().get(path.as_os_str())
            && *known == id
        {
            return f.clone();
        }
        let f = ElfFile::open(path).map(Arc::new);
        if matches!(f, Err(DebugInfoError::Io { .. })) {
            return f;
        }
        let mut files = lock();
        if let Some((known, first)) = files.get(path.as_os_str())
            && *known == id
        {
            return first.clone();
        }
        files.insert(path.as_os_str().to_os_string(), (id, f.clone()));
        f
    }

    /// Writes to the symbol store the answers of symbol lookups found since the last save,
    /// for every file held ([`ElfFile::save_names`]); the number of store files written.
    pub fn save_symbol_answers(&self) -> usize {
        let files: Vec<Arc<ElfFile>> = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(|(_, f)| f.as_ref().ok().cloned())
            .collect();
        files.iter().filter(|f| f.save_names()).count()
    }

    /// Whether `path` exists: `false` without a `stat` of it when its directory is known to be
    /// absent (each directory is looked at once while this cache lives, as a search that
    /// found nothing is not repeated).
    pub(crate) fn exists(&self, path: &Path) -> bool {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let key = dir.as_os_str();
            let known = self
                .dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(key)
                .copied();
            let dir_exists = known.unwrap_or_else(|| {
                let exists = dir.is_dir();
                self.dirs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.to_os_string(), exists);
                exists
            });
            if !dir_exists {
                return false;
            }
        }
        path.exists()
    }

    /// The separate debug file of `elf` ([`locate::find_debug_file`]), searched once per
    /// version of the file (and per options): every rank mapping the same library asks again.
    /// A remembered find is used only while the debug file is unchanged (one `stat`); a
    /// search that found nothing is not repeated while this cache lives.
    pub(crate) fn debug_file(
        &self,
        elf: &Arc<ElfFile>,
        is_main: bool,
        options: &DebugOptions,
        notes: &mut Vec<String>,
    ) -> DebugFound {
        let key = (elf.path().as_os_str().to_os_string(), is_main);
        let known = {
            let searches = self.debug.lock().unwrap_or_else(|e| e.into_inner());
            searches
                .get(&key)
                .filter(|s| Arc::ptr_eq(&s.elf, elf) && s.options == *options)
                .map(|s| (s.found.clone(), s.notes.clone()))
        };
        if let Some((found, known_notes)) = known {
            let unchanged = match &found {
                None => true,
                Some((f, _)) => self.open(f.path()).is_ok_and(|now| Arc::ptr_eq(&now, f)),
            };
            if unchanged {
                notes.extend(known_notes);
                return found;
            }
        }
        let mut new_notes = Vec::new();
        let found = locate::find_debug_file(elf, is_main, options, self, &mut new_notes);
        notes.extend(new_notes.iter().cloned());
        self.debug.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key,
            DebugSearch {
                elf: Arc::clone(elf),
                options: options.clone(),
                found: found.clone(),
                notes: new_notes,
            },
        );
        found
    }

    /// The type index of `dwarf_file` (with its dwz file), built once.
    pub(crate) fn types(
        &self,
        dwarf_file: &ElfFile,
        sup: Option<&ElfFile>,
    ) -> Result<Arc<TypeIndex>, DebugInfoError> {
        let key = dwarf_file.path().as_os_str().to_os_string();
        if let Some(t) = self
            .types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(Arc::clone(t));
        }
        // Built outside the lock: indexing a large library takes a while.
        let t = Arc::new(TypeIndex::load(dwarf_file, sup)?);
        self.types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::clone(&t));
        Ok(t)
    }
}
