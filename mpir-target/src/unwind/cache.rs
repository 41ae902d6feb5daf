//! What the unwinder and the symboliser know of one image, kept once per build-id and shared by
//! every process (and thread, and sample) that maps it: [`SymbolCache`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use super::cfi::ImageCfi;
use super::frames_store::{self, Sizes, Stored};
use super::functions::Functions;
#[cfg(feature = "fuzzing")]
use super::symbols::FunctionIndex;
use crate::debuginfo::SymbolStore;
use crate::debuginfo::{ElfFile, Image, ProcessImages};

/// Images a [`SymbolCache`] keeps by default.
pub const DEFAULT_MAX_IMAGES: usize = 4096;
/// Source lookups remembered per image (by address); past this, lookups are answered but not
/// remembered.
const MAX_REMEMBERED_LOOKUPS: usize = 1 << 16;
/// Frames one address may expand to (the physical one and the functions inlined into it).
const MAX_INLINE_DEPTH: usize = 64;

type R = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// What the unwinder keeps of one image: its CFI and its functions.
#[derive(Debug)]
pub(super) struct ImageInfo {
    pub(super) cfi: ImageCfi,
    pub(super) functions: Functions,
}

impl ImageInfo {
    /// Reads the CFI of `image` (and of its separate debug file); its functions are indexed
    /// when a question `store` does not answer needs them. Only the parts of the file the CFI
    /// needs are read (headers, `.eh_frame`, its header), not the whole file: a rank's stacks
    /// run through libraries of megabytes.
    pub(super) fn of_image(image: &Image, store: Option<&SymbolStore>) -> ImageInfo {
        let debug = image.debug_elf().cloned();
        let cfi = if let Some(data) = image.elf().loaded_data() {
            ImageCfi::load(Some(&data[..]), debug.clone())
        } else {
            match image.elf().reopen() {
                Some(file) => ImageCfi::load(Some(&object::ReadCache::new(file)), debug.clone()),
                None => ImageCfi::load(None::<&[u8]>, debug.clone()),
            }
        };
        // Jump stubs are read from the image's own code, on x86 only.
        let functions =
            Functions::of_files(Arc::clone(image.elf()), debug, cfi.is_x86(), store.cloned());
        ImageInfo { cfi, functions }
    }
}

/// One function frame at an address, as DWARF describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SourceFrame {
    /// The function's DWARF name (linkage name where DWARF gives one, as addr2line reads it).
    pub(super) function: Option<Arc<str>>,
    /// The source file and line: for the innermost frame, of the address; for each outer
    /// frame, of the call site of the function inlined into it.
    pub(super) location: Option<(Arc<str>, u32)>,
}

/// The DWARF line and inline context of one image, built on first use.
struct Lines {
    context: Mutex<addr2line::Context<R>>,
    /// Answers already given, by link-time address, innermost frame first.
    remembered: Mutex<HashMap<u64, Arc<[SourceFrame]>>>,
}

/// The files an image's DWARF is read from, and their sizes (what store files are checked
/// against).
struct DwarfFiles {
    file: Arc<ElfFile>,
    sup: Option<Arc<ElfFile>>,
    sizes: Sizes,
}

/// One cached image.
pub(super) struct CachedImage {
    pub(super) info: ImageInfo,
    /// The image's GNU build-id: what its store file is named by (none: never stored).
    build_id: Option<Vec<u8>>,
    dwarf: OnceLock<Option<DwarfFiles>>,
    /// Answers read from the [`SymbolStore`], for these DWARF files.
    stored: OnceLock<HashMap<u64, Arc<[SourceFrame]>>>,
    lines: OnceLock<Option<Lines>>,
    /// How many of `lines`' remembered answers are in the store already.
    saved: AtomicU64,
}

impl std::fmt::Debug for CachedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedImage")
            .field("info", &self.info)
            .field("stored", &self.stored.get().map(HashMap::len))
            .field(
                "lines_loaded",
                &self.lines.get().is_some_and(Option::is_some),
            )
            .finish()
    }
}

impl CachedImage {
    fn new(info: ImageInfo, image: &Image) -> CachedImage {
        CachedImage {
            info,
            build_id: image
                .elf()
                .build_id()
                .filter(|id| !id.is_empty())
                .map(<[u8]>::to_vec),
            dwarf: OnceLock::new(),
            stored: OnceLock::new(),
            lines: OnceLock::new(),
            saved: AtomicU64::new(0),
        }
    }

    /// The files holding `image`'s DWARF, found on first use.
    fn dwarf(&self, image: &Image, images: &ProcessImages) -> Option<&DwarfFiles> {
        self.dwarf
            .get_or_init(|| {
                let (file, sup) = images.dwarf_files(image)?;
                let sizes = Sizes {
                    dwarf: file.file_len(),
                    sup: sup.as_ref().map_or(0, |s| s.file_len()),
                };
                Some(DwarfFiles { file, sup, sizes })
            })
            .as_ref()
    }

    /// The answers `cache`'s store keeps for this image's DWARF files (read on first use).
    fn stored(
        &self,
        image: &Image,
        images: &ProcessImages,
        cache: &SymbolCache,
    ) -> Option<&HashMap<u64, Arc<[SourceFrame]>>> {
        let store = cache.inner.store.as_ref()?;
        let id = self.build_id.as_deref()?;
        Some(self.stored.get_or_init(|| {
            let Some(files) = self.dwarf(image, images) else {
                return HashMap::new();
            };
            match frames_store::load(store, id, files.sizes) {
                Ok(Some(stored)) => stored.answers,
                Ok(None) => HashMap::new(),
                Err(e) => {
                    cache
                        .inner
                        .stats
                        .store_rejected
                        .fetch_add(1, Ordering::Relaxed);
                    store.note(e);
                    HashMap::new()
                }
            }
        }))
    }

    /// What to write to the store for this image: the stored answers and the ones found since,
    /// when there are new ones.
    fn to_store(&self) -> Option<Stored> {
        let build_id = self.build_id.clone()?;
        let files = self.dwarf.get()?.as_ref()?;
        let lines = self.lines.get()?.as_ref()?;
        let remembered = lock(&lines.remembered);
        let new = remembered.len() as u64;
        if new <= self.saved.load(Ordering::Relaxed) {
            return None;
        }
        let mut answers = self.stored.get().cloned().unwrap_or_default();
        answers.extend(remembered.iter().map(|(a, f)| (*a, Arc::clone(f))));
        self.saved.store(new, Ordering::Relaxed);
        Some(Stored {
            build_id,
            sizes: files.sizes,
            answers,
        })
    }

    /// The function frames (innermost first: inlined functions, then the function that
    /// contains them) at link-time address `probe` of `image`, whose DWARF is found through
    /// `images`' debug-file search; empty without DWARF.
    pub(super) fn source_frames(
        &self,
        probe: u64,
        image: &Image,
        images: &ProcessImages,
        cache: &SymbolCache,
    ) -> Arc<[SourceFrame]> {
        let stats = &cache.inner.stats;
        if let Some(found) = self
            .stored(image, images, cache)
            .and_then(|stored| stored.get(&probe))
        {
            stats.lookups_stored.fetch_add(1, Ordering::Relaxed);
            return Arc::clone(found);
        }
        let lines = self.lines.get_or_init(|| {
            let files = self.dwarf(image, images)?;
            let context = load_lines(&files.file, files.sup.as_deref())?;
            stats.dwarf_loaded.fetch_add(1, Ordering::Relaxed);
            Some(Lines {
                context: Mutex::new(context),
                remembered: Mutex::new(HashMap::new()),
            })
        });
        let Some(lines) = lines else {
            return Arc::from([]);
        };
        stats.lookups.fetch_add(1, Ordering::Relaxed);
        if let Some(found) = lock(&lines.remembered).get(&probe) {
            stats.lookups_cached.fetch_add(1, Ordering::Relaxed);
            return Arc::clone(found);
        }
        let found: Arc<[SourceFrame]> = {
            let context = lock(&lines.context);
            frames_at(&context, probe).into()
        };
        let mut remembered = lock(&lines.remembered);
        if remembered.len() < MAX_REMEMBERED_LOOKUPS {
            remembered.insert(probe, Arc::clone(&found));
        }
        found
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An addr2line context over the DWARF of `file`, with `sup` as its dwz supplementary file.
/// Unreadable or malformed DWARF gives none (the frames keep their ELF names).
fn load_lines(file: &ElfFile, sup: Option<&ElfFile>) -> Option<addr2line::Context<R>> {
    let mut dwarf = crate::debuginfo::load_dwarf_for_lines(file).ok()?;
    if let Some(sup) = sup.and_then(|s| crate::debuginfo::load_dwarf_for_lines(s).ok()) {
        dwarf.set_sup(sup);
    }
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// The frames addr2line finds at `probe`, bounded; a malformed unit ends the list early.
fn frames_at(context: &addr2line::Context<R>, probe: u64) -> Vec<SourceFrame> {
    let mut out = Vec::new();
    let Ok(mut iter) = context.find_frames(probe).skip_all_loads() else {
        return out;
    };
    while let Ok(Some(frame)) = iter.next() {
        if out.len() >= MAX_INLINE_DEPTH {
            break;
        }
        let function = frame
            .function
            .as_ref()
            .and_then(|n| n.raw_name().ok())
            .map(|n| Arc::from(&*n));
        let location = frame
            .location
            .as_ref()
            .and_then(|l| Some((Arc::from(l.file?), l.line?)));
        out.push(SourceFrame { function, location });
    }
    out
}

/// Loads the DWARF line/inline context of `elf` as the symboliser does and looks up to
/// `max_lookups` addresses spread over its loadable segments, plus the function index; the
/// number of source frames found (for the fuzz harness and its seed check).
#[cfg(feature = "fuzzing")]
pub(crate) fn probe_elf(elf: &ElfFile, max_lookups: usize) -> usize {
    let functions = FunctionIndex::build([elf], None::<super::symbols::Code<'_, &[u8]>>);
    let Some(context) = load_lines(elf, None) else {
        return 0;
    };
    let mut found = 0;
    let segments = elf.segments();
    let per_segment = max_lookups / segments.len().max(1);
    for seg in segments {
        let step = (seg.mem_size / per_segment.max(1) as u64).max(1);
        for i in 0..per_segment as u64 {
            let address = seg.vaddr.wrapping_add(i.wrapping_mul(step));
            let _ = functions.lookup(address);
            found += frames_at(&context, address)
                .iter()
                .filter(|f| f.location.is_some())
                .count();
        }
    }
    found
}

/// What identifies an image's contents: its GNU build-id, else the file itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ImageKey {
    BuildId(Vec<u8>),
    File {
        path: PathBuf,
        size: u64,
        mtime: Option<SystemTime>,
        inode: u64,
    },
}

impl ImageKey {
    fn of(image: &Image) -> Option<ImageKey> {
        if let Some(id) = image.elf().build_id().filter(|id| !id.is_empty()) {
            return Some(ImageKey::BuildId(id.to_vec()));
        }
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(image.elf().path()).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        Some(ImageKey::File {
            path,
            size: meta.len(),
            mtime: meta.modified().ok(),
            inode: meta.ino(),
        })
    }
}

/// Counters of a [`SymbolCache`].
#[derive(Debug, Default)]
pub(super) struct Stats {
    parsed: AtomicU64,
    reused: AtomicU64,
    uncached: AtomicU64,
    dwarf_loaded: AtomicU64,
    lookups: AtomicU64,
    lookups_cached: AtomicU64,
    lookups_stored: AtomicU64,
    store_rejected: AtomicU64,
    stores_written: AtomicU64,
}

/// What a [`SymbolCache`] has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SymbolCacheStats {
    /// Images whose CFI and function symbols were parsed (once per distinct build-id while
    /// the cache has room).
    pub images_parsed: u64,
    /// Times an unwinder got an image already parsed (by it or by another process's).
    pub images_reused: u64,
    /// Images parsed but not kept: the cache was full, or the image has neither a build-id
    /// nor a readable file to key it by.
    pub images_uncached: u64,
    /// Images whose DWARF (lines and inline functions) was loaded.
    pub dwarf_loaded: u64,
    /// Source lookups (one per physical frame with DWARF).
    pub lookups: u64,
    /// Source lookups answered from an earlier answer for the same image and address.
    pub lookups_cached: u64,
    /// Source lookups answered from the [`SymbolStore`] (an earlier run's answer), without
    /// DWARF.
    pub lookups_stored: u64,
    /// Store files not used: unreadable, malformed, or not private
    /// ([`SymbolStore::problems`] says why).
    pub store_rejected: u64,
    /// Store files written by [`SymbolCache::save`].
    pub stores_written: u64,
    /// Images held whose function symbols were indexed: a question about their functions
    /// (the function at an address) that the store did not answer.
    pub functions_indexed: u64,
    /// Images held.
    pub entries: usize,
}

type Slot = Arc<OnceLock<Arc<CachedImage>>>;

#[derive(Debug)]
struct Inner {
    max_images: usize,
    images: Mutex<HashMap<ImageKey, Slot>>,
    stats: Stats,
    store: Option<SymbolStore>,
}

/// The images' unwind tables, function symbols and DWARF line and inline contexts, kept once
/// per GNU build-id (an image without one: per canonical path, size, modification time and
/// inode) and shared by every [`Unwinder`](super::Unwinder) made
/// [`with_cache`](super::Unwinder::with_cache): every rank of a job maps the same libraries,
/// so each is parsed once, not once per rank. Cheap to clone (an `Arc`), `Send + Sync`.
///
/// **Bounds.** At most [`SymbolCache::max_images`] images ([`DEFAULT_MAX_IMAGES`] by default)
/// are kept; an image past the limit is parsed for the unwinder that asks and not kept. Per
/// image, at most 65 536 source lookups are remembered, and one address expands to at most 64
/// inline frames. DWARF sections are decompressed within
/// [`MAX_UNCOMPRESSED_SECTION`](crate::debuginfo::MAX_UNCOMPRESSED_SECTION); malformed DWARF
/// gives frames without source positions, never a panic.
#[derive(Debug, Clone)]
pub struct SymbolCache {
    inner: Arc<Inner>,
}

impl Default for SymbolCache {
    fn default() -> Self {
        SymbolCache::new()
    }
}

impl SymbolCache {
    /// An empty cache keeping up to [`DEFAULT_MAX_IMAGES`] images.
    pub fn new() -> Self {
        SymbolCache::with_max_images(DEFAULT_MAX_IMAGES)
    }

    /// An empty cache keeping up to `max_images` images.
    pub fn with_max_images(max_images: usize) -> Self {
        SymbolCache::build(max_images, None)
    }

    /// An empty cache that answers source lookups from `store` when it can (the answers an
    /// earlier run kept for the same build-id and debug files) and adds the answers it finds
    /// to the store on [`save`](SymbolCache::save).
    pub fn with_store(store: SymbolStore) -> Self {
        SymbolCache::build(DEFAULT_MAX_IMAGES, Some(store))
    }

    fn build(max_images: usize, store: Option<SymbolStore>) -> Self {
        SymbolCache {
            inner: Arc::new(Inner {
                max_images,
                images: Mutex::new(HashMap::new()),
                stats: Stats::default(),
                store,
            }),
        }
    }

    /// The store, when there is one.
    pub fn store(&self) -> Option<&SymbolStore> {
        self.inner.store.as_ref()
    }

    /// Writes to the store the answers found since it was read or last saved, one file per
    /// image that has new ones; the number of files written. Every image is tried; a file
    /// that cannot be written is skipped and its reason kept for
    /// [`SymbolStore::problems`]. Without a store, nothing.
    pub fn save(&self) -> usize {
        let Some(store) = &self.inner.store else {
            return 0;
        };
        let images: Vec<Slot> = lock(&self.inner.images).values().cloned().collect();
        let mut written = 0;
        for image in images.iter().filter_map(|s| s.get()) {
            if image.info.functions.save() {
                written += 1;
            }
            let Some(stored) = image.to_store() else {
                continue;
            };
            match frames_store::save(store, &stored) {
                Ok(()) => written += 1,
                Err(e) => store.note(e),
            }
        }
        self.inner
            .stats
            .stores_written
            .fetch_add(written as u64, Ordering::Relaxed);
        written
    }

    /// The most images kept.
    pub fn max_images(&self) -> usize {
        self.inner.max_images
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> SymbolCacheStats {
        let s = &self.inner.stats;
        let (functions_indexed, entries) = {
            let images = lock(&self.inner.images);
            let indexed = images
                .values()
                .filter(|slot| slot.get().is_some_and(|i| i.info.functions.indexed()))
                .count();
            (indexed as u64, images.len())
        };
        SymbolCacheStats {
            images_parsed: s.parsed.load(Ordering::Relaxed),
            images_reused: s.reused.load(Ordering::Relaxed),
            images_uncached: s.uncached.load(Ordering::Relaxed),
            dwarf_loaded: s.dwarf_loaded.load(Ordering::Relaxed),
            lookups: s.lookups.load(Ordering::Relaxed),
            lookups_cached: s.lookups_cached.load(Ordering::Relaxed),
            lookups_stored: s.lookups_stored.load(Ordering::Relaxed),
            store_rejected: s.store_rejected.load(Ordering::Relaxed),
            stores_written: s.stores_written.load(Ordering::Relaxed),
            functions_indexed,
            entries,
        }
    }

    /// What is known of `image`: from the cache, or parsed now (once per key, even when many
    /// threads ask at the same time).
    pub(super) fn image(&self, image: &Image) -> Arc<CachedImage> {
        let stats = &self.inner.stats;
        let slot = ImageKey::of(image).and_then(|key| {
            let mut images = lock(&self.inner.images);
            if let Some(slot) = images.get(&key) {
                return Some(Arc::clone(slot));
            }
            if images.len() >= self.inner.max_images {
                return None;
            }
            let slot = Slot::default();
            images.insert(key, Arc::clone(&slot));
            Some(slot)
        });
        let Some(slot) = slot else {
            stats.parsed.fetch_add(1, Ordering::Relaxed);
            stats.uncached.fetch_add(1, Ordering::Relaxed);
            return Arc::new(CachedImage::new(
                ImageInfo::of_image(image, self.inner.store.as_ref()),
                image,
            ));
        };
        let mut built = false;
        let cached = slot.get_or_init(|| {
            built = true;
            Arc::new(CachedImage::new(
                ImageInfo::of_image(image, self.inner.store.as_ref()),
                image,
            ))
        });
        if built {
            stats.parsed.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.reused.fetch_add(1, Ordering::Relaxed);
        }
        Arc::clone(cached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_send_sync_and_cheap_to_clone() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<SymbolCache>();
        let a = SymbolCache::with_max_images(3);
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        assert_eq!(b.max_images(), 3);
        assert_eq!(a.stats(), SymbolCacheStats::default());
    }
}
