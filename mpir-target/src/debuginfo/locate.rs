//! Finding separate debug information for an ELF file, the way gdb does: explicit files, build-id
//! directories, `.gnu_debuglink` (three locations, CRC-checked), dwz supplementary files
//! (`.gnu_debugaltlink`, build-id checked), and last debuginfod servers by build-id
//! ([`super::debuginfod`]; off unless `DEBUGINFOD_URLS` or the options name servers). Every
//! candidate that is refused leaves a note saying why, so a tool can tell its user what was
//! tried.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::FileCache;
use super::debuginfod::{Artifact, DebuginfodOptions};
use super::elf::{ElfFile, debuglink_crc};

/// Where the debug information of an image was found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum DebugSource {
    /// In the image file itself.
    SameFile,
    /// A file the caller named.
    Explicit(PathBuf),
    /// `<debug dir>/.build-id/xx/rest.debug`.
    BuildId(PathBuf),
    /// Through `.gnu_debuglink`.
    Debuglink(PathBuf),
    /// From a debuginfod server, or from its client's cache (`server` is `None` then).
    Debuginfod {
        /// The file in the debuginfod cache.
        path: PathBuf,
        /// The server it was downloaded from by this search.
        server: Option<String>,
    },
}

/// Options that say where to look for debug information.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DebugOptions {
    /// Debug directories searched for build-id files and debuglinks (default `/usr/lib/debug`).
    pub debug_dirs: Vec<PathBuf>,
    /// Separate debug files named by the caller; each is used for the image whose build-id it
    /// carries (or for the main executable when it has none).
    pub symbol_files: Vec<PathBuf>,
    /// Object files that carry DWARF types only (e.g. compiled from a library's own headers);
    /// searched for types after every image.
    pub types_sidecars: Vec<PathBuf>,
    /// Debuginfod servers, asked by build-id when the local places have no debug file
    /// (default: as `DEBUGINFOD_URLS` says).
    pub debuginfod: DebuginfodOptions,
    /// Where symbol lookups are kept between runs (by build-id and size: see
    /// [`SymbolStore`](super::SymbolStore)); none by default here (a session opens
    /// [`SymbolStore::default_dir`](super::SymbolStore::default_dir)).
    pub symbol_store: Option<super::SymbolStore>,
}

impl Default for DebugOptions {
    fn default() -> Self {
        DebugOptions {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            symbol_files: Vec::new(),
            types_sidecars: Vec::new(),
            debuginfod: DebuginfodOptions::default(),
            symbol_store: None,
        }
    }
}

impl DebugOptions {
    /// Keeps the answers of symbol lookups in `store` between runs, and takes them from it:
    /// a name asked of a file before (found or not) is answered without indexing the file's
    /// symbols.
    pub fn with_symbol_store(mut self, store: Option<super::SymbolStore>) -> Self {
        self.symbol_store = store;
        self
    }

    /// Adds a debug directory, searched before the ones already listed.
    pub fn with_debug_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.debug_dirs.insert(0, dir.into());
        self
    }

    /// Adds an explicit symbol file.
    pub fn with_symbol_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.symbol_files.push(file.into());
        self
    }

    /// Sets whether and how debuginfod servers are asked.
    pub fn with_debuginfod(mut self, debuginfod: DebuginfodOptions) -> Self {
        self.debuginfod = debuginfod;
        self
    }

    /// Adds a types sidecar.
    pub fn with_types_sidecar(mut self, file: impl Into<PathBuf>) -> Self {
        self.types_sidecars.push(file.into());
        self
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `<dir>/.build-id/xx/rest<suffix>`.
pub(crate) fn build_id_path(dir: &Path, id: &[u8], suffix: &str) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    Some(
        dir.join(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{}{suffix}", hex(rest))),
    )
}

/// `a/b` joined under `root` even when `b` is absolute.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Opens `path` as a candidate and checks that its build-id is `id`.
fn candidate_with_id(
    cache: &FileCache,
    path: &Path,
    id: &[u8],
    notes: &mut Vec<String>,
) -> Option<Arc<ElfFile>> {
    if !cache.exists(path) {
        return None;
    }
    match cache.open(path) {
        Ok(f) if f.build_id() == Some(id) => Some(f),
        Ok(f) => {
            notes.push(format!(
                "{}: build-id {} does not match {}",
                path.display(),
                f.build_id().map_or_else(|| "none".into(), hex),
                hex(id)
            ));
            None
        }
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    }
}

/// The separate debug file of `elf`, if one is found, with notes on refused candidates.
pub(crate) fn find_debug_file(
    elf: &ElfFile,
    is_main: bool,
    options: &DebugOptions,
    cache: &FileCache,
    notes: &mut Vec<String>,
) -> Option<(Arc<ElfFile>, DebugSource)> {
    // 1. Explicit files: by build-id, or for the main executable when they carry none.
    for path in &options.symbol_files {
        match cache.open(path) {
            Ok(f) => {
                let fits = match (f.build_id(), elf.build_id()) {
                    (Some(a), Some(b)) => a == b,
                    (None, _) => is_main,
                    (Some(_), None) => false,
                };
                if fits {
                    return Some((f, DebugSource::Explicit(path.clone())));
                }
            }
            Err(e) => notes.push(e.to_string()),
        }
    }
    // 2. Build-id directories.
    if let Some(id) = elf.build_id() {
        for dir in &options.debug_dirs {
            if let Some(p) = build_id_path(dir, id, ".debug")
                && let Some(f) = candidate_with_id(cache, &p, id, notes)
            {
                return Some((f, DebugSource::BuildId(p)));
            }
        }
    }
    // 3. .gnu_debuglink next to the file, in .debug/, and under each debug directory.
    if let Some((name, crc)) = elf.debuglink() {
        let dir = elf.path().parent().unwrap_or(Path::new("/"));
        let mut paths = vec![dir.join(name), dir.join(".debug").join(name)];
        paths.extend(options.debug_dirs.iter().map(|d| under(d, dir).join(name)));
        for p in paths {
            if p == elf.path() || !cache.exists(&p) {
                continue;
            }
            match crate::files::read_regular(&p) {
                Ok(bytes) if debuglink_crc(&bytes) == crc => match cache.open(&p) {
                    Ok(f) => return Some((f, DebugSource::Debuglink(p))),
                    Err(e) => notes.push(e.to_string()),
                },
                Ok(bytes) => notes.push(format!(
                    "{}: CRC {:08x} does not match the debuglink's {crc:08x}",
                    p.display(),
                    debuglink_crc(&bytes)
                )),
                Err(e) => notes.push(format!("{}: {e}", p.display())),
            }
        }
    }
    // 4. Debuginfod servers, by build-id.
    let id = elf.build_id()?;
    let (path, server) = from_debuginfod(&options.debuginfod, id, notes)?;
    let f = candidate_with_id(cache, &path, id, notes)?;
    Some((f, DebugSource::Debuginfod { path, server }))
}

/// The debug file with build-id `id` from the debuginfod cache or servers, if they are on and
/// one has it; each refusal becomes a note.
fn from_debuginfod(
    options: &DebuginfodOptions,
    id: &[u8],
    notes: &mut Vec<String>,
) -> Option<(PathBuf, Option<String>)> {
    let client = options.client()?;
    match client.fetch(id, Artifact::DebugInfo) {
        Ok(f) => Some((f.path, f.server)),
        Err(errors) => {
            notes.extend(errors.iter().map(ToString::to_string));
            None
        }
    }
}

/// The dwz supplementary file named by `dwarf_file`'s `.gnu_debugaltlink`, build-id checked.
pub(crate) fn find_alt_file(
    dwarf_file: &ElfFile,
    options: &DebugOptions,
    cache: &FileCache,
    notes: &mut Vec<String>,
) -> Option<Arc<ElfFile>> {
    let (name, id) = dwarf_file.debugaltlink()?;
    let name = Path::new(name);
    let mut paths = Vec::new();
    if name.is_absolute() {
        paths.push(name.to_path_buf());
    } else if let Some(dir) = dwarf_file.path().parent() {
        paths.push(dir.join(name));
    }
    paths.extend(
        options
            .debug_dirs
            .iter()
            .filter_map(|d| build_id_path(d, id, ".debug")),
    );
    for p in paths {
        if let Some(f) = candidate_with_id(cache, &p, id, notes) {
            return Some(f);
        }
    }
    if let Some((p, _)) = from_debuginfod(&options.debuginfod, id, notes)
        && let Some(f) = candidate_with_id(cache, &p, id, notes)
    {
        return Some(f);
    }
    notes.push(format!(
        "{}: dwz supplementary file {} (build-id {}) not found",
        dwarf_file.path().display(),
        name.display(),
        hex(id)
    ));
    None
}
