//! The images (executable and shared libraries) of a process, with their load biases, and symbol
//! and type lookup across all of them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use mpir_types::{DataModel, TypeLayout};

use super::FileCache;
use super::dwarf::TypeIndex;
use super::elf::ElfFile;
use super::error::DebugInfoError;
use super::locate::{self, DebugOptions, DebugSource};
use super::maps::{Mapping, exe_path, parse_maps, writable_ranges};
use crate::error::{Result, TargetError};
use crate::traits::{Binding, Symbol, SymbolLookup, TypeLookup, TypeQuery};

/// A mapping's file, as [`ProcessImages::build`] opens it.
enum Opened {
    /// No image for it.
    Skip,
    /// Another thread parses the file now.
    Pending,
    File(Result<Arc<ElfFile>, DebugInfoError>),
}

/// One loaded image.
#[derive(Debug)]
pub struct Image {
    path: PathBuf,
    bias: u64,
    elf: Arc<ElfFile>,
    is_main: bool,
    options: Arc<DebugOptions>,
    cache: Arc<FileCache>,
    /// The separate debug file and the notes of its search, searched on first use: a rank maps
    /// ~85 files, and most are never asked for more than their own symbols.
    debug: OnceLock<(DebugFound, Vec<String>)>,
    types: OnceLock<std::result::Result<Option<Arc<TypeIndex>>, DebugInfoError>>,
}

type DebugFound = Option<(Arc<ElfFile>, DebugSource)>;

impl Image {
    fn new(
        path: PathBuf,
        bias: u64,
        elf: Arc<ElfFile>,
        is_main: bool,
        options: &Arc<DebugOptions>,
        cache: &Arc<FileCache>,
    ) -> Self {
        Image {
            path,
            bias,
            elf,
            is_main,
            options: Arc::clone(options),
            cache: Arc::clone(cache),
            debug: OnceLock::new(),
            types: OnceLock::new(),
        }
    }

    /// The separate debug file (searched now when not yet), with the search's notes.
    fn debug(&self) -> &(DebugFound, Vec<String>) {
        self.debug.get_or_init(|| {
            let mut notes = Vec::new();
            let found = if self.elf.has_dwarf() && self.options.symbol_files.is_empty() {
                None
            } else {
                self.cache
                    .debug_file(&self.elf, self.is_main, &self.options, &mut notes)
            };
            (found, notes)
        })
    }

    /// The separate debug file in use, parsed.
    pub fn debug_elf(&self) -> Option<&Arc<ElfFile>> {
        self.debug().0.as_ref().map(|(e, _)| e)
    }

    /// Path of the image as mapped.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Load bias: run-time address minus link-time address.
    pub fn bias(&self) -> u64 {
        self.bias
    }

    /// The image file.
    pub fn elf(&self) -> &Arc<ElfFile> {
        &self.elf
    }

    /// The separate debug file in use, and how it was found.
    pub fn debug_file(&self) -> Option<(&Path, &DebugSource)> {
        self.debug().0.as_ref().map(|(f, s)| (f.path(), s))
    }

    /// Where this image's DWARF comes from, if it has any.
    pub fn dwarf_source(&self) -> Option<DebugSource> {
        match &self.debug().0 {
            Some((f, s)) if f.has_dwarf() => Some(s.clone()),
            _ if self.elf.has_dwarf() => Some(DebugSource::SameFile),
            _ => None,
        }
    }

    /// What was tried and refused while looking for debug information.
    pub fn notes(&self) -> &[String] {
        &self.debug().1
    }

    /// The image's DWARF type index (built on first use), or `None` without DWARF.
    pub fn types(
        &self,
        options: &DebugOptions,
        cache: &FileCache,
    ) -> Result<Option<Arc<TypeIndex>>> {
        self.types
            .get_or_init(|| {
                let file = match &self.debug().0 {
                    Some((f, _)) if f.has_dwarf() => f,
                    _ if self.elf.has_dwarf() => &self.elf,
                    _ => return Ok(None),
                };
                let mut notes = Vec::new();
                let sup = locate::find_alt_file(file, options, cache, &mut notes);
                cache.types(file, sup.as_deref()).map(Some)
            })
            .clone()
            .map_err(TargetError::from)
    }

    /// This image's definitions of `name` with `binding`, at run-time addresses.
    fn symbol(&self, name: &str, binding: Binding) -> Option<Symbol> {
        // The image's own tables first: its debug file is searched only when they lack `name`.
        let store = self.options.symbol_store.as_ref();
        if let Some(s) = self
            .elf
            .lookup(name, store)
            .iter()
            .find(|s| s.binding == binding)
        {
            return Some(self.found(name, s, &self.elf));
        }
        let file = self.debug_elf()?;
        let s = file
            .lookup(name, store)
            .into_iter()
            .find(|s| s.binding == binding)?;
        Some(self.found(name, &s, file))
    }

    /// `s`, found as `name` in `file`, at its run-time address.
    fn found(&self, name: &str, s: &super::ElfSymbol, file: &ElfFile) -> Symbol {
        let mut sym = Symbol::new(name, s.address.wrapping_add(self.bias), s.size, s.kind)
            .with_binding(s.binding)
            .with_image(self.path.display().to_string());
        sym.found_in = Some(file.path().display().to_string());
        sym
    }
}

/// The images of one process (or a set of files), searched for symbols and types.
#[derive(Debug)]
pub struct ProcessImages {
    pid: Option<u32>,
    options: Arc<DebugOptions>,
    cache: Arc<FileCache>,
    images: Vec<Arc<Image>>,
    sidecars: Vec<Arc<TypeIndex>>,
    writable: Vec<(u64, u64)>,
    /// A digest of the file mappings the images were built from (for
    /// [`maps_changed`](ProcessImages::maps_changed)); 0 for file sets and cores.
    files_mapped: u64,
}

/// A digest of a process's file mappings: what its images are made of (the heap, stacks and
/// anonymous memory, which change all the time, are not in it).
fn files_digest(mappings: &[Mapping]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    mappings.hash(&mut h);
    h.finish()
}

/// Whether the path of mapping `m`, whose metadata is `meta`, names another file than the one
/// mapped (same path, another inode: replaced since). Unknown inodes and unreadable paths say
/// no.
fn is_replaced(m: &Mapping, meta: Option<&std::fs::Metadata>) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.inode != 0 && meta.is_some_and(|meta| meta.ino() != m.inode)
}

/// The file mappings and writable ranges of process `pid` from its `/proc/PID/maps` text (where
/// the kernel has no `PROCMAP_QUERY`): a refusal is the typed denial, an empty map says why.
fn text_map(pid: u32) -> Result<(Vec<Mapping>, super::maps::Ranges)> {
    let maps_err = |reason: String| DebugInfoError::Maps { pid, reason };
    // Bytes: a mapped file's name need not be UTF-8 (maps.rs).
    let text = match std::fs::read(format!("/proc/{pid}/maps")) {
        Ok(text) => text,
        Err(e) => {
            // Refused by the kernel (another user's process, a non-dumpable one…): the
            // one typed reason, not the errno alone.
            let errno = e.raw_os_error().map(nix::errno::Errno::from_raw);
            if let Some(errno @ (nix::errno::Errno::EACCES | nix::errno::Errno::EPERM)) = errno {
                return Err(TargetError::Denied {
                    pid,
                    operation: "read its memory map".into(),
                    denial: crate::live::access::diagnose(pid, errno, false),
                });
            }
            return Err(maps_err(e.to_string()).into());
        }
    };
    if text.is_empty() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("State:"))
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        return Err(maps_err(if state.starts_with('Z') {
            "the process is a zombie (it exited and was not reaped): no memory left".into()
        } else {
            format!("no mappings (state {state:?})")
        })
        .into());
    }
    Ok((parse_maps(&text), writable_ranges(&text)))
}

impl ProcessImages {
    /// The images mapped by process `pid`, with a new file cache.
    pub fn for_pid(pid: u32, options: DebugOptions) -> Result<Self> {
        ProcessImages::for_pid_with_cache(pid, options, Arc::new(FileCache::new()))
    }

    /// The images mapped by process `pid`, sharing `cache` with other processes.
    pub fn for_pid_with_cache(
        pid: u32,
        options: DebugOptions,
        cache: Arc<FileCache>,
    ) -> Result<Self> {
        let sidecars = load_sidecars(&options, &cache)?;
        let mut me = ProcessImages {
            pid: Some(pid),
            options: Arc::new(options),
            cache,
            images: Vec::new(),
            sidecars,
            writable: Vec::new(),
            files_mapped: 0,
        };
        me.refresh()?;
        Ok(me)
    }

    /// Images from files at given load biases (the first is the main executable): for core
    /// files, or for looking at binaries that are not running.
    pub fn from_files(files: &[(PathBuf, u64)], options: DebugOptions) -> Result<Self> {
        let cache = Arc::new(FileCache::new());
        let sidecars = load_sidecars(&options, &cache)?;
        let options = Arc::new(options);
        let mut images = Vec::new();
        for (i, (path, bias)) in files.iter().enumerate() {
            let elf = cache.open(path)?;
            images.push(Arc::new(Image::new(
                path.clone(),
                *bias,
                elf,
                i == 0,
                &options,
                &cache,
            )));
        }
        Ok(ProcessImages {
            pid: None,
            options,
            cache,
            images,
            sidecars,
            writable: Vec::new(),
            files_mapped: 0,
        })
    }

    /// Images from file mappings `(path, start address, file offset)`, as a core file's
    /// `NT_FILE` note lists them; `exe` names the main executable when known.
    pub fn from_mappings(
        mappings: &[(PathBuf, u64, u64)],
        exe: Option<&Path>,
        options: DebugOptions,
    ) -> Result<Self> {
        let mut me = ProcessImages::without_process(options, Arc::new(FileCache::new()))?;
        let mappings: Vec<Mapping> = mappings
            .iter()
            .map(|(path, start, offset)| Mapping {
                start: *start,
                end: 0,
                offset: *offset,
                inode: 0,
                path: path.clone(),
                deleted: false,
            })
            .collect();
        me.images = me.build(mappings, exe, None);
        Ok(me)
    }

    /// The images of a process whose memory map came as text (`/proc/PID/maps` as the process
    /// itself read it, over the cooperative channel, when this tool may not read it): like
    /// [`for_pid_with_cache`](ProcessImages::for_pid_with_cache), but never re-read
    /// ([`refresh`](ProcessImages::refresh) keeps them); `exe` names the main executable.
    pub fn from_maps_text(
        text: &str,
        exe: Option<&Path>,
        options: DebugOptions,
        cache: Arc<FileCache>,
    ) -> Result<Self> {
        let mut me = ProcessImages::without_process(options, cache)?;
        me.writable = writable_ranges(text.as_bytes());
        me.images = me.build(parse_maps(text.as_bytes()), exe, None);
        Ok(me)
    }

    /// No image yet, and no process to read a map from: the sidecars loaded.
    fn without_process(options: DebugOptions, cache: Arc<FileCache>) -> Result<Self> {
        let sidecars = load_sidecars(&options, &cache)?;
        Ok(ProcessImages {
            pid: None,
            options: Arc::new(options),
            cache,
            images: Vec::new(),
            sidecars,
            writable: Vec::new(),
            files_mapped: 0,
        })
    }

    /// Re-reads the process's memory map, keeping what is unchanged (and its caches), adding
    /// libraries loaded since and dropping those unloaded. A no-op for file sets.
    pub fn refresh(&mut self) -> Result<()> {
        let Some(pid) = self.pid else {
            return Ok(());
        };
        let (mappings, writable) = match super::maps::query(pid) {
            Some(map) => map,
            None => text_map(pid)?,
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(exe_path);
        self.files_mapped = files_digest(&mappings);
        self.images = self.build(mappings, exe.as_deref(), Some(pid));
        self.writable = writable;
        Ok(())
    }

    /// Whether the process maps other files, or the same files elsewhere, than when these
    /// images were read (it loaded or unloaded a library since: an MPI opens its components
    /// in `MPI_Init`): then its symbols are to be looked up in images read again. `false`
    /// when its map cannot be read (the process gone, or refused): reading it again would
    /// fail too, and the read that follows says why in its own terms (exited, not
    /// stoppable); `false` for file sets, cores and maps given as text, which do not change.
    pub fn maps_changed(&self) -> bool {
        let Some(pid) = self.pid else {
            return false;
        };
        super::maps::query(pid)
            .map(Ok)
            .unwrap_or_else(|| text_map(pid))
            .is_ok_and(|(mappings, _)| files_digest(&mappings) != self.files_mapped)
    }

    /// The readable, writable mappings `(start, end)` of the process (where its stacks live)
    /// as of the last [`refresh`](ProcessImages::refresh), read from the same
    /// `/proc/PID/maps` as the images; empty for file sets and cores. For
    /// [`snapshot_live_with_mappings`](crate::unwind::snapshot_live_with_mappings), which
    /// reads the map again only for a stack outside them.
    pub fn writable_mappings(&self) -> &[(u64, u64)] {
        &self.writable
    }

    /// One image per mapped ELF file (its lowest-offset mapping fixes the bias), executable
    /// first, then in load-address order; images already known with the same file and bias are
    /// kept with their caches.
    fn build(
        &self,
        mut mappings: Vec<Mapping>,
        exe: Option<&Path>,
        pid: Option<u32>,
    ) -> Vec<Arc<Image>> {
        // Grouped by the paths' bytes (compared by reference: a cloned key would allocate at
        // every comparison; `Path`'s own ordering walks components, several times slower for
        // the hundreds of mappings of an MPI rank).
        mappings.sort_unstable_by(|a, b| {
            (a.path.as_os_str(), a.offset, a.start).cmp(&(b.path.as_os_str(), b.offset, b.start))
        });
        mappings.dedup_by(|b, a| a.path.as_os_str() == b.path.as_os_str());
        mappings.sort_by_key(|m| (Some(m.path.as_path()) != exe, m.start));
        // A process in another mount namespace (a container) names files of its own root.
        let foreign = pid.is_some_and(crate::files::other_mount_namespace);
        // The file of mapping `m`: `Skip` for none; `Pending` (when not `wait`) while another
        // thread parses it (this one opens its other files meanwhile).
        let open = |m: &Mapping, wait: bool| -> Opened {
            if crate::files::is_kernel_interface(&m.path) && Some(m.path.as_path()) != exe {
                // A device or /proc, /sys file: never an image, and not to be touched (the
                // executable itself may be given as /proc/PID/exe, e.g. `mpir core --exe`).
                return Opened::Skip;
            }
            // The file the process maps, opened where it is that file: in a container,
            // never by the path from here (the same path on this host may be another file),
            // and never through a link of the container's root that leads out of it
            // (`files::mapped_file`). A file mapped here but gone (deleted) is looked for the
            // same way.
            let contained = |pid: u32| {
                crate::files::mapped_file(crate::files::MappedFile {
                    pid,
                    range: (m.start, m.end),
                    inode: m.inode,
                    path: &m.path,
                })
            };
            if let (Some(pid), true) = (pid, foreign) {
                return match contained(pid) {
                    Some(p) => Opened::File(self.cache.open(&p)),
                    None => Opened::Skip, // not reachable safely: no image, not a wrong one
                };
            }
            // One `stat` of the path: whether it still names the file mapped, and the identity
            // the cache checks.
            let meta = std::fs::metadata(&m.path);
            // Deleted, or the path now names another file (a rebuilt binary): the mapped file
            // itself, through the same `files::mapped_file`. Where that is refused (no
            // CAP_SYS_ADMIN for map_files), the path as before.
            if let Some(pid) = pid
                && (m.deleted || is_replaced(m, meta.as_ref().ok()))
            {
                let p = contained(pid);
                return Opened::File(self.cache.open(p.as_deref().unwrap_or(&m.path)));
            }
            let by_path = match &meta {
                Ok(meta) => match self.cache.open_or_skip(&m.path, meta, wait) {
                    Some(parsed) => parsed,
                    None => return Opened::Pending,
                },
                Err(e) => Err(DebugInfoError::io(&m.path, e)),
            };
            // Unreadable by its path: the mapped file itself.
            let opened = by_path.or_else(|e| match (pid, &e) {
                (Some(pid), DebugInfoError::Io { .. }) => contained(pid)
                    .and_then(|p| self.cache.open(&p).ok())
                    .ok_or(e),
                _ => Err(e),
            });
            Opened::File(opened)
        };
        let mut opened: Vec<Opened> = mappings.iter().map(|m| open(m, false)).collect();
        for (o, m) in opened.iter_mut().zip(&mappings) {
            if matches!(o, Opened::Pending) {
                *o = open(m, true);
            }
        }
        let mut images = Vec::with_capacity(mappings.len());
        for (i, (m, opened)) in mappings.iter().zip(opened).enumerate() {
            let Opened::File(opened) = opened else {
                continue;
            };
            let Ok(elf) = opened else {
                continue; // not ELF (locale archives, fonts, ...) or unreadable
            };
            let Some(bias) = elf.bias_for_mapping(m.start, m.offset) else {
                continue;
            };
            let kept = self
                .images
                .iter()
                .find(|im| im.path == m.path && im.bias == bias && Arc::ptr_eq(&im.elf, &elf));
            images.push(match kept {
                Some(im) => Arc::clone(im),
                None => Arc::new(Image::new(
                    m.path.clone(),
                    bias,
                    elf,
                    i == 0,
                    &self.options,
                    &self.cache,
                )),
            });
        }
        images
    }

    /// The file holding `image`'s DWARF (its separate debug file when that has DWARF, else the
    /// image itself), and that file's dwz supplementary file when it names one and the debug
    /// search finds it.
    pub(crate) fn dwarf_files(
        &self,
        image: &Image,
    ) -> Option<(Arc<ElfFile>, Option<Arc<ElfFile>>)> {
        let file = match image.debug_elf() {
            Some(f) if f.has_dwarf() => Arc::clone(f),
            _ if image.elf().has_dwarf() => Arc::clone(image.elf()),
            _ => return None,
        };
        let mut notes = Vec::new();
        let sup = locate::find_alt_file(&file, &self.options, &self.cache, &mut notes);
        Some((file, sup))
    }

    /// The images, main executable first.
    pub fn images(&self) -> &[Arc<Image>] {
        &self.images
    }

    /// The process, when these are a process's images.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The data model of the main executable (LP64 or ILP32 in its byte order).
    pub fn data_model(&self) -> DataModel {
        self.images
            .first()
            .map_or_else(DataModel::host, |i| i.elf.data_model())
    }

    /// The types sidecars in use.
    pub fn sidecars(&self) -> &[Arc<TypeIndex>] {
        &self.sidecars
    }
}

fn load_sidecars(options: &DebugOptions, cache: &FileCache) -> Result<Vec<Arc<TypeIndex>>> {
    options
        .types_sidecars
        .iter()
        .map(|p| {
            let elf = cache.open(p)?;
            Ok(cache.types(&elf, None)?)
        })
        .collect()
}

impl ProcessImages {
    /// The image whose definition of `name` a symbol lookup would return.
    fn defining_image(&self, name: &str) -> Option<&Arc<Image>> {
        [Binding::Global, Binding::Weak, Binding::Local]
            .into_iter()
            .find_map(|b| self.images.iter().find(|i| i.symbol(name, b).is_some()))
    }
}

impl SymbolLookup for ProcessImages {
    /// Global definitions first (in image order, executable first), then weak, then local.
    fn symbol(&self, name: &str) -> Result<Option<Symbol>> {
        for binding in [Binding::Global, Binding::Weak, Binding::Local] {
            if let Some(s) = self.images.iter().find_map(|i| i.symbol(name, binding)) {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }
}

impl TypeLookup for ProcessImages {
    /// Each image's DWARF in order, then the types sidecars. An image whose DWARF is corrupt is
    /// passed over; its error is returned only if no other file has the type.
    ///
    /// [`TypeQuery::PointeeOfVariable`] and [`TypeQuery::NamedNear`] search only the image that
    /// defines their symbol (then the sidecars): DWARF is indexed on first use, and a process
    /// maps dozens of libraries whose debug information has nothing to do with the query.
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>> {
        let home = match query {
            TypeQuery::PointeeOfVariable(v) => self.defining_image(v),
            TypeQuery::NamedNear { symbol, .. } => self.defining_image(symbol),
            _ => None,
        };
        let images: Vec<&Arc<Image>> = match home {
            Some(i) => vec![i],
            None => self.images.iter().collect(),
        };
        let mut first_error = None;
        let indexes = images
            .into_iter()
            .map(|i| i.types(&self.options, &self.cache))
            .chain(self.sidecars.iter().map(|s| Ok(Some(Arc::clone(s)))));
        for index in indexes {
            let found = index.and_then(|idx| {
                let Some(idx) = idx else { return Ok(None) };
                Ok(match query {
                    TypeQuery::Named(n) | TypeQuery::NamedNear { name: n, .. } => idx.named(n)?,
                    TypeQuery::PointeeOfVariable(v) => idx.pointee_of_variable(v)?,
                })
            });
            match found {
                Ok(Some(t)) => return Ok(Some(t)),
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }
}
