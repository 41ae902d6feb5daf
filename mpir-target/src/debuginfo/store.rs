//! Answers kept on disk between runs, by the build-id of the file they come from:
//! [`SymbolStore`].
//!
//! A one-shot `mpir stacks` spends most of its time on work whose result is fixed by the
//! files' build-ids: loading DWARF line tables to answer a few dozen addresses (libc's alone:
//! decompressing its sections and reading every unit's header, ~35 ms), and indexing every
//! symbol of ~85 files to learn that a handful of probe names (`MPI2DD_INFO`, `_PyRuntime`)
//! are not there, and building the function tables of the images a stack runs through. These
//! answers are kept: the next run over the same files answers them without DWARF and without
//! reading a symbol table, and does the work only for what it has not seen.
//!
//! Three kinds of file, one directory:
//! - `<build-id>.frames`: the source frames at addresses of one image (the unwinder's);
//! - `<build-id>.functions`: the function at addresses of one image (the unwinder's; checked
//!   against the sizes of the image file and of its debug file, `unwind/functions.rs`);
//! - `<build-id>-<size>.names`: the symbols found, or not found, under names asked of one ELF
//!   file ([`ElfFile`](super::ElfFile)'s lookups).
//!
//! **Validated.** A file is used only for the build-id it names, and only while the files its
//! answers came from have the sizes recorded with them (for names: the ELF file's own size, so
//! a stripped copy and its unstripped original, which share a build-id, never share answers;
//! for frames: the DWARF file and its dwz supplementary file, so a debug file installed,
//! replaced or removed since makes the answers unused and rewritten). Files without a build-id
//! are never stored.
//!
//! **Hostile files.** A store file is read within [`MAX_FILE`] bytes; every count and length is
//! checked against what is left; names must be UTF-8; a file that is not exactly what this
//! version writes is rejected whole, with the reason and the byte, and the answers are found
//! again. The directory must belong to this user and be writable by nobody else, and so must
//! each file (opened without following links): answers planted by another user would name
//! wrong functions or wrong addresses.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::SymbolTable;
use super::elf::ElfSymbol;
use crate::traits::{Binding, SymbolKind};

/// The largest store file read.
pub const MAX_FILE: u64 = 16 << 20;
/// The most answers one file keeps.
pub const MAX_ENTRIES: usize = 1 << 15;
/// The longest name or path kept.
pub(crate) const MAX_STRING: usize = 1 << 16;
/// Symbols one name may have in a names file.
const MAX_SYMBOLS_PER_NAME: usize = 1 << 10;
const NAMES_MAGIC: &[u8; 8] = b"MPIRSYM1";

/// Where answers are kept between runs: a directory of this user's alone (see the module
/// docs). Cheap to clone; clones share one list of [`problems`](SymbolStore::problems).
#[derive(Debug, Clone)]
pub struct SymbolStore {
    dir: PathBuf,
    problems: Arc<Mutex<Vec<StoreError>>>,
}

impl PartialEq for SymbolStore {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir
    }
}

impl Eq for SymbolStore {}

/// Problems kept by a store, at most.
const MAX_PROBLEMS: usize = 8;

/// Why a store, or one of its files, is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The directory or file could not be created, opened, read or written.
    #[error("symbol store {path}: {reason}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// Another user could change it (owner or mode), so its answers cannot be trusted.
    #[error("symbol store {path}: {reason}; not used")]
    NotPrivate {
        /// The directory or file.
        path: PathBuf,
        /// Whose it is, or which mode bits are wrong.
        reason: String,
    },
    /// The file is not a store file this version wrote, or it is cut or inconsistent.
    #[error("symbol store file {path}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, and at which byte.
        reason: String,
    },
}

impl SymbolStore {
    /// A store in `dir`, created (mode 0700) when missing. Refused when `dir` is not a
    /// directory of this user's that only this user can write.
    pub fn open(dir: impl Into<PathBuf>) -> Result<SymbolStore, StoreError> {
        let dir = dir.into();
        let io = |e: std::io::Error| StoreError::Io {
            path: dir.clone(),
            reason: e.to_string(),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        let meta = std::fs::symlink_metadata(&dir).map_err(io)?;
        if !meta.is_dir() {
            return Err(StoreError::NotPrivate {
                path: dir,
                reason: "not a directory".into(),
            });
        }
        private(&dir, &meta)?;
        Ok(SymbolStore {
            dir,
            problems: Arc::default(),
        })
    }

    /// The default place: `$MPIR_SYMBOL_CACHE` when set (`off`: none), else the
    /// [conventional place](SymbolStore::conventional_dir) when the directory it lies in
    /// (`$XDG_CACHE_HOME`, else `$HOME`) belongs to this user: a tool run as root with another
    /// user's `HOME` leaves nothing of root's there, and has no store unless one is named.
    pub fn default_dir() -> Option<PathBuf> {
        default_dir_from(
            |k| std::env::var_os(k).filter(|v| !v.is_empty()),
            base_is_mine,
        )
    }

    /// Whether `$MPIR_SYMBOL_CACHE` names the place (a directory, or `off`): a place the user
    /// chose, whose refusal is worth a warning, where the default place's is not.
    pub fn named_by_environment() -> bool {
        std::env::var_os("MPIR_SYMBOL_CACHE").is_some_and(|v| !v.is_empty())
    }

    /// The conventional place of a user's store: `$XDG_CACHE_HOME/mpir/symbols`, else
    /// `$HOME/.cache/mpir/symbols`.
    pub fn conventional_dir() -> Option<PathBuf> {
        conventional_dir_from(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Why store files were not used or not written (the first few, oldest first): the
    /// answers are the same without them, only slower to find.
    pub fn problems(&self) -> Vec<StoreError> {
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps `e` for [`problems`](SymbolStore::problems).
    pub(crate) fn note(&self, e: StoreError) {
        let mut problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        if problems.len() < MAX_PROBLEMS {
            problems.push(e);
        }
    }

    /// The path of the file named `name` in the store.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The bytes of the store file `name`; `Ok(None)` when there is none. Refused when it is
    /// a link, not a regular file, not private, or over [`MAX_FILE`].
    pub(crate) fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(name);
        let io = |path: &Path, e: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        let meta = file.metadata().map_err(|e| io(&path, e))?;
        if !meta.is_file() {
            return Err(StoreError::NotPrivate {
                path,
                reason: "not a regular file".into(),
            });
        }
        private(&path, &meta)?;
        if meta.len() > MAX_FILE {
            return Err(StoreError::Malformed {
                path,
                reason: format!("{} bytes, more than the {MAX_FILE} read", meta.len()),
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, MAX_FILE), &mut bytes)
            .map_err(|e| io(&path, e))?;
        Ok(Some(bytes))
    }

    /// Writes `bytes` as the store file `name`: a new file (mode 0600) renamed over the old
    /// one, so a reader sees the old file or the new one, never half of one.
    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(name);
        // The pid alone may repeat: agents in other PID namespaces share a home directory.
        let nonce = {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        let tmp = self
            .dir
            .join(format!(".{name}.{}.{nonce:016x}.tmp", std::process::id()));
        let io = |p: &Path, e: std::io::Error| StoreError::Io {
            path: p.to_path_buf(),
            reason: e.to_string(),
        };
        let write = || -> Result<(), StoreError> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&tmp)
                .map_err(|e| io(&tmp, e))?;
            f.write_all(bytes).map_err(|e| io(&tmp, e))?;
            std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))
        };
        let done = write();
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done
    }

    /// The symbols an earlier run found under names asked of the ELF file with `build_id` and
    /// `len` bytes (an empty list: not there); `Ok(None)` when none are kept.
    pub(crate) fn load_names(
        &self,
        build_id: &[u8],
        len: u64,
    ) -> Result<Option<HashMap<String, Vec<ElfSymbol>>>, StoreError> {
        self.read_decoded(&names_file(build_id, len), |bytes| {
            decode_names(bytes, build_id, len)
        })
    }

    /// The store file `name` as `decode` reads it; `Ok(None)` when there is none. A file
    /// `decode` refuses is [`StoreError::Malformed`], with its reason.
    pub(crate) fn read_decoded<T>(
        &self,
        name: &str,
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, StoreError> {
        let Some(bytes) = self.read(name)? else {
            return Ok(None);
        };
        decode(&bytes)
            .map(Some)
            .map_err(|reason| StoreError::Malformed {
                path: self.path(name),
                reason,
            })
    }

    /// Keeps `answers` for the ELF file with `build_id` and `len` bytes.
    pub(crate) fn save_names(
        &self,
        build_id: &[u8],
        len: u64,
        answers: &HashMap<String, Vec<ElfSymbol>>,
    ) -> Result<(), StoreError> {
        self.write(
            &names_file(build_id, len),
            &encode_names(build_id, len, answers),
        )
    }
}

/// `build_id` in lower-case hex.
pub(crate) fn hex(build_id: &[u8]) -> String {
    build_id.iter().map(|b| format!("{b:02x}")).collect()
}

fn names_file(build_id: &[u8], len: u64) -> String {
    format!("{}-{len}.names", hex(build_id))
}

/// A names file: magic, build-id, file size, then each name with its symbols (address, size,
/// kind, binding, table), sorted by name; at most [`MAX_ENTRIES`] names.
fn encode_names(build_id: &[u8], len: u64, answers: &HashMap<String, Vec<ElfSymbol>>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(NAMES_MAGIC);
    put_id(&mut out, build_id);
    out.extend_from_slice(&len.to_le_bytes());
    let mut names: Vec<_> = answers
        .iter()
        .filter(|(n, s)| n.len() <= MAX_STRING && s.len() <= MAX_SYMBOLS_PER_NAME)
        .collect();
    names.sort_unstable_by(|a, b| a.0.cmp(b.0));
    names.truncate(MAX_ENTRIES);
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for (name, symbols) in names {
        put_string(&mut out, name);
        out.extend_from_slice(&(symbols.len() as u32).to_le_bytes());
        for s in symbols {
            out.extend_from_slice(&s.address.to_le_bytes());
            out.extend_from_slice(&s.size.to_le_bytes());
            out.push(match s.kind {
                SymbolKind::Function => 0,
                SymbolKind::Object => 1,
                _ => 2,
            });
            out.push(match s.binding {
                Binding::Global => 0,
                Binding::Weak => 1,
                _ => 2,
            });
            out.push(match s.table {
                SymbolTable::Symtab => 0,
                SymbolTable::Dynsym => 1,
            });
        }
    }
    out
}

fn decode_names(
    bytes: &[u8],
    build_id: &[u8],
    len: u64,
) -> Result<HashMap<String, Vec<ElfSymbol>>, String> {
    let mut r = Reader::new(bytes);
    if r.take(NAMES_MAGIC.len())? != NAMES_MAGIC {
        return Err("not a names file of this version (wrong magic)".into());
    }
    if r.id()? != build_id || r.u64()? != len {
        return Err("it names another file than its file name".into());
    }
    let count = r.u32()? as usize;
    if count > MAX_ENTRIES {
        return Err(format!("{count} names, more than {MAX_ENTRIES}"));
    }
    let mut answers = HashMap::with_capacity(count.min(bytes.len() / 8));
    for _ in 0..count {
        let name = r.string()?.to_string();
        let at = r.at;
        let n = r.u32()? as usize;
        if n > MAX_SYMBOLS_PER_NAME {
            return Err(format!(
                "{n} symbols at byte {at}, more than {MAX_SYMBOLS_PER_NAME}"
            ));
        }
        let mut symbols = Vec::with_capacity(n);
        for _ in 0..n {
            let address = r.u64()?;
            let size = r.u64()?;
            let at = r.at;
            let (kind, binding, table) = (r.u8()?, r.u8()?, r.u8()?);
            let kind = match kind {
                0 => SymbolKind::Function,
                1 => SymbolKind::Object,
                2 => SymbolKind::Other,
                k => return Err(format!("symbol kind {k} at byte {at}")),
            };
            let binding = match binding {
                0 => Binding::Global,
                1 => Binding::Weak,
                2 => Binding::Local,
                b => return Err(format!("symbol binding {b} at byte {}", at + 1)),
            };
            let table = match table {
                0 => SymbolTable::Symtab,
                1 => SymbolTable::Dynsym,
                t => return Err(format!("symbol table {t} at byte {}", at + 2)),
            };
            symbols.push(ElfSymbol {
                address,
                size,
                kind,
                binding,
                table,
            });
        }
        if answers.insert(name, symbols).is_some() {
            return Err(format!("a name answered twice (before byte {at})"));
        }
    }
    r.end()?;
    Ok(answers)
}

/// Appends a build-id (length byte, then the bytes; at most 255).
pub(crate) fn put_id(out: &mut Vec<u8>, id: &[u8]) {
    let id = &id[..id.len().min(255)];
    out.push(id.len() as u8);
    out.extend_from_slice(id);
}

/// Appends a string (u32 length, then the bytes), cut to [`MAX_STRING`] on a character
/// boundary.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..floor_char_boundary(s, MAX_STRING)];
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

fn default_dir_from(
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
    mine: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    match var("MPIR_SYMBOL_CACHE") {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let (base, dir) = conventional_from(&var)?;
            mine(&base).then_some(dir)
        }
    }
}

fn conventional_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    conventional_from(&var).map(|(_, dir)| dir)
}

/// The directory the conventional place lies in (`$XDG_CACHE_HOME`, else `$HOME`), and the
/// place.
fn conventional_from(
    var: &impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<(PathBuf, PathBuf)> {
    let (base, cache) = match var("XDG_CACHE_HOME") {
        Some(c) => (PathBuf::from(&c), PathBuf::from(c)),
        None => {
            let home = PathBuf::from(var("HOME")?);
            let cache = home.join(".cache");
            (home, cache)
        }
    };
    Some((base, cache.join("mpir").join("symbols")))
}

/// Whether `base` is a directory of this user's (followed through a link, as a home directory
/// may be).
fn base_is_mine(base: &Path) -> bool {
    std::fs::metadata(base).is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw())
}

/// Refuses `path` unless it is this user's and nobody else may write it.
fn private(path: &Path, meta: &std::fs::Metadata) -> Result<(), StoreError> {
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(StoreError::NotPrivate {
            path: path.to_path_buf(),
            reason: format!("owned by uid {}, not by this user (uid {me})", meta.uid()),
        });
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(StoreError::NotPrivate {
            path: path.to_path_buf(),
            reason: format!("mode {:o}: writable by group or others", mode & 0o777),
        });
    }
    Ok(())
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// A bounds-checked cursor over a store file: every read says where it failed.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// A build-id as [`put_id`] wrote it.
    pub(crate) fn id(&mut self) -> Result<&'a [u8], String> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }

    /// Refuses bytes after the last answer.
    pub(crate) fn end(&self) -> Result<(), String> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the last answer")),
        }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("cut short at byte {} ({n} more wanted)", self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub(crate) fn string(&mut self) -> Result<&'a str, String> {
        let at = self.at;
        let len = self.u32()? as usize;
        if len > MAX_STRING {
            return Err(format!("a {len}-byte string at byte {at}"));
        }
        std::str::from_utf8(self.take(len)?)
            .map_err(|_| format!("a string at byte {at} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests;
