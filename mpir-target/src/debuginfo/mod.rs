//! Symbols and type layouts from real binaries: ELF symbol tables (`.symtab`, `.dynsym`, global
//! and local), the images of a live process with their load biases, DWARF type layouts, and
//! separate debug information (build-id directories, `.gnu_debuglink`, dwz, explicit files,
//! types sidecars). Every answer says where it came from.
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

mod dwarf;
mod elf;
mod error;
mod images;
mod locate;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(crate) use dwarf::load_dwarf;
pub use dwarf::{MAX_UNCOMPRESSED_SECTION, TypeIndex};
pub use elf::{ElfFile, ElfSymbol, LoadSegment, SymbolTable};
pub use error::DebugInfoError;
pub use images::{Image, ProcessImages};
pub use locate::{DebugOptions, DebugSource};

/// A parsed file with the size and modification time it had when parsed.
type CachedFile = (u64, Option<std::time::SystemTime>, Arc<ElfFile>);

/// Files parsed and DWARF indexed, shared between the images of many processes (every rank of a
/// job maps the same libraries). Entries are keyed by path, size and modification time.
#[derive(Debug, Default)]
pub struct FileCache {
    files: Mutex<HashMap<PathBuf, CachedFile>>,
    types: Mutex<HashMap<PathBuf, Arc<TypeIndex>>>,
}

impl FileCache {
    /// An empty cache.
    pub fn new() -> Self {
        FileCache::default()
    }

    /// The parsed file at `path`, from the cache when it has not changed.
    pub fn open(&self, path: &Path) -> Result<Arc<ElfFile>, DebugInfoError> {
        let meta = std::fs::metadata(path).map_err(|e| DebugInfoError::io(path, &e))?;
        let (len, mtime) = (meta.len(), meta.modified().ok());
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((l, m, f)) = files.get(path)
            && *l == len
            && *m == mtime
        {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(ElfFile::open(path)?);
        files.insert(path.to_path_buf(), (len, mtime, Arc::clone(&f)));
        Ok(f)
    }

    /// The type index of `dwarf_file` (with its dwz file), built once.
    pub(crate) fn types(
        &self,
        dwarf_file: &ElfFile,
        sup: Option<&ElfFile>,
    ) -> Result<Arc<TypeIndex>, DebugInfoError> {
        let key = dwarf_file.path().to_path_buf();
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
