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

/// A file's parse (or the finding that it is not usable ELF), made once by whichever thread
/// asks first; the others wait for it, or (when they have other files to open) come back.
type Parse = Arc<ParseSlot>;

type Parsed = Result<Arc<ElfFile>, DebugInfoError>;

#[derive(Debug, Default)]
struct ParseSlot {
    /// `None` while the first thread parses.
    state: Mutex<Option<Parsed>>,
    done: std::sync::Condvar,
}

/// Sets a parse's outcome when dropped: the parser's result, or (if it panicked) an error, so
/// that no waiter waits for ever.
struct Finish<'a> {
    slot: &'a ParseSlot,
    path: &'a Path,
    result: Option<Parsed>,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let result = self.result.take().unwrap_or_else(|| {
            Err(DebugInfoError::Elf {
                path: self.path.to_path_buf(),
                reason: "its parse failed".into(),
            })
        });
        *self.slot.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        self.slot.done.notify_all();
    }
}

impl ParseSlot {
    /// The outcome, when the parse is done.
    fn get(&self) -> Option<Parsed> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The outcome, waiting for the parse to end.
    fn wait(&self) -> Parsed {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(done) = &*state {
                return done.clone();
            }
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A file with the identity it had when parsed.
type CachedFile = (FileIdentity, Parse);

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
            .is_some_and(|(_, f)| f.get().is_some_and(|f| f.is_ok()))
    }

    /// [`open`](FileCache::open) of `path`, whose metadata the caller has just read. Files are
    /// parsed outside the cache's lock (the ranks' images are opened on several threads); a
    /// file two threads want at once is parsed by the first, the other waiting for it.
    pub(crate) fn open_as(&self, path: &Path, meta: &std::fs::Metadata) -> Parsed {
        self.open_or_skip(path, meta, true)
            .unwrap_or_else(|| unreachable!("a waiting open always has the parse"))
    }

    /// [`open_as`](FileCache::open_as), but `None` at once when another thread is parsing
    /// the file now and `wait` is false (the caller opens its other files meanwhile, and asks
    /// again).
    pub(crate) fn open_or_skip(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        wait: bool,
    ) -> Option<Parsed> {
        let id = FileIdentity::of(meta);
        let lock = || self.files.lock().unwrap_or_else(|e| e.into_inner());
        let (parse, mine) = {
            let mut files = lock();
            match files.get(path.as_os_str()) {
                Some((known, parse)) if *known == id => (Arc::clone(parse), false),
                _ => {
                    let parse = Parse::default();
                    files.insert(path.as_os_str().to_os_string(), (id, Arc::clone(&parse)));
                    (parse, true)
                }
            }
        };
        if !mine {
            return if wait {
                Some(parse.wait())
            } else {
                parse.get()
            };
        }
        let mut finish = Finish {
            slot: &parse,
            path,
            result: None,
        };
        let f = ElfFile::open(path).map(Arc::new);
        finish.result = Some(f.clone());
        drop(finish);
        if matches!(f, Err(DebugInfoError::Io { .. })) {
            // Not remembered: the next open tries again.
            let mut files = lock();
            if files
                .get(path.as_os_str())
                .is_some_and(|(_, p)| Arc::ptr_eq(p, &parse))
            {
                files.remove(path.as_os_str());
            }
        }
        Some(f)
    }

    /// Writes to the symbol store the answers of symbol lookups found since the last save,
    /// for every file held ([`ElfFile::save_names`]); the number of store files written.
    pub fn save_symbol_answers(&self) -> usize {
        let files: Vec<Arc<ElfFile>> = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(|(_, f)| f.get()?.ok())
            .collect();
        files.iter().filter(|f| f.save_names()).count()
    }

    /// Whether `path` exists: `false` without a `stat` of it when its directory is known to be
    /// absent (each directory is looked at once while this cache lives, as a search that
    /// found nothing is not repeated).
    pub(crate) fn exists(&self, path: &Path) -> bool {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            let dir_exists = *dirs
                .entry(dir.as_os_str().to_os_string())
                .or_insert_with(|| dir.is_dir());
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
