//! Reading the target for one walk: a block cache ("snapshot") over any [`Target`], typed
//! decoding of fetched structs, and bounded list walking.
//!
//! Queue entries of one list usually live close together (MPICH's request pool, Open MPI's
//! free-list chunks, one `malloc` arena), so each miss reads a whole aligned block
//! ([`BLOCK`] bytes) and later entries in it cost no system call. Blocks are kept for the
//! walk only (a walk is a snapshot of the moment it ran); their total is bounded by
//! `max_bytes`, after which reads go straight to the target. A block that cannot be read
//! in full (the end of a mapping) is kept with its readable prefix; reads beyond it go to
//! the target directly, so a read never fails for a reason the target itself would not.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use mpir_target::Target;
use mpir_types::{DataModel, FieldLayout, View};

use crate::error::native::{NativeError, NativeResult};

/// Size (and alignment) of one cached block.
pub(crate) const BLOCK: u64 = 64 * 1024;
/// Page size assumed when a block's start is unreadable.
const PAGE: u64 = 4096;

/// A hasher for target addresses and block numbers (the walk's hot maps): one multiply,
/// instead of SipHash. Keys come from the target, but a collision costs only time, and every
/// map is bounded by the walk's limits.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

/// Hash maps and sets keyed by addresses.
pub(crate) type AddressMap<V> = HashMap<u64, V, BuildHasherDefault<AddressHasher>>;
pub(crate) type AddressSet = HashSet<u64, BuildHasherDefault<AddressHasher>>;

/// A cached block: offset of its first readable byte, and the bytes from there.
type Cached = (u64, Box<[u8]>);

/// A read-only snapshot of a target for the duration of one walk.
pub(crate) struct Snapshot<'t> {
    target: &'t dyn Target,
    model: DataModel,
    /// Block index → (offset of the first cached byte, the bytes).
    blocks: RefCell<AddressMap<Cached>>,
    cached: Cell<u64>,
    max_bytes: u64,
    target_reads: Cell<u64>,
}

impl<'t> Snapshot<'t> {
    /// A snapshot of `target` caching at most `max_bytes`.
    pub(crate) fn new(target: &'t dyn Target, max_bytes: u64) -> Self {
        Snapshot {
            model: target.data_model(),
            target,
            blocks: RefCell::new(AddressMap::default()),
            cached: Cell::new(0),
            max_bytes,
            target_reads: Cell::new(0),
        }
    }

    pub(crate) fn model(&self) -> DataModel {
        self.model
    }

    pub(crate) fn target(&self) -> &'t dyn Target {
        self.target
    }

    /// Reads the target made so far (block fills and direct reads).
    pub(crate) fn target_reads(&self) -> u64 {
        self.target_reads.get()
    }

    /// Forgets every cached block (the next walk attempt sees fresh memory).
    pub(crate) fn clear(&self) {
        self.blocks.borrow_mut().clear();
        self.cached.set(0);
    }

    fn direct(&self, address: u64, buf: &mut [u8], what: &str) -> NativeResult<()> {
        self.target_reads.set(self.target_reads.get() + 1);
        self.target
            .read_exact(address, buf)
            .map_err(|source| NativeError::Read {
                what: what.to_string(),
                address,
                source,
            })
    }

    /// The NUL-terminated string at `address`, at most `max_len` bytes (invalid UTF-8
    /// replaced); not cached (names are few).
    pub(crate) fn c_string(&self, address: u64, max_len: u64, what: &str) -> NativeResult<String> {
        use mpir_target::MemoryExt;
        self.target_reads.set(self.target_reads.get() + 1);
        let bytes = self
            .target
            .read_c_string(address, max_len)
            .map_err(|source| NativeError::Read {
                what: what.to_string(),
                address,
                source,
            })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Fills `buf` from `address`.
    pub(crate) fn read_into(&self, address: u64, buf: &mut [u8], what: &str) -> NativeResult<()> {
        let len = buf.len() as u64;
        let Some(end) = address.checked_add(len) else {
            return Err(NativeError::Corrupt {
                what: what.to_string(),
                address,
                reason: format!("{len} bytes from here wrap around the address space"),
            });
        };
        if len == 0 {
            return Ok(());
        }
        // Larger than a block or spanning more than two: not worth caching.
        let first = address / BLOCK;
        let last = (end - 1) / BLOCK;
        if last - first > 1 || address == 0 {
            return self.direct(address, buf, what);
        }
        let mut done = 0usize;
        for b in first..=last {
            let start = b * BLOCK;
            let from = address.max(start);
            let to = end.min(start + BLOCK);
            let ok = self.with_block(b, from, |off, block| {
                if from - start < off {
                    return false;
                }
                let lo = (from - start - off) as usize;
                let hi = (to - start - off) as usize;
                match (block.get(lo..hi), buf.get_mut(done..done + (hi - lo))) {
                    (Some(src), Some(dst)) => {
                        dst.copy_from_slice(src);
                        true
                    }
                    _ => false,
                }
            });
            if !ok {
                return self.direct(address, buf, what);
            }
            done += (to - from) as usize;
        }
        Ok(())
    }

    /// Runs `f` on block `b` as (offset of its first readable byte, readable bytes), loading
    /// it first; `false` when the block cannot be cached. A block whose start is unreadable
    /// is loaded from the page of `from` (or from `from` itself) to its end.
    fn with_block(&self, b: u64, from: u64, f: impl FnOnce(u64, &[u8]) -> bool) -> bool {
        if let Some((off, block)) = self.blocks.borrow().get(&b) {
            return f(*off, block);
        }
        if self.cached.get() >= self.max_bytes {
            return false;
        }
        let start = b * BLOCK;
        let mut loaded = None;
        for at in [start, from & !(PAGE - 1), from] {
            if at < start || loaded.is_some() {
                continue;
            }
            let mut bytes = vec![0u8; (start + BLOCK - at) as usize];
            self.target_reads.set(self.target_reads.get() + 1);
            let n = self.target.read_partial(at, &mut bytes).unwrap_or(0);
            if n > 0 {
                bytes.truncate(n);
                loaded = Some((at - start, bytes.into_boxed_slice()));
            }
        }
        let Some((off, block)) = loaded else {
            return false;
        };
        self.cached.set(self.cached.get() + BLOCK);
        let ok = f(off, &block);
        self.blocks.borrow_mut().insert(b, (off, block));
        ok
    }

    /// `len` bytes at `address` as an [`Obj`].
    pub(crate) fn obj(&self, address: u64, len: u64, what: &str) -> NativeResult<Obj> {
        if len > 1 << 20 {
            return Err(NativeError::Corrupt {
                what: what.to_string(),
                address,
                reason: format!("{len}-byte object is larger than any MPI structure"),
            });
        }
        let mut bytes = if len as usize <= INLINE {
            Bytes::Inline([0u8; INLINE], len as usize)
        } else {
            Bytes::Heap(vec![0u8; len as usize])
        };
        self.read_into(address, bytes.as_mut(), what)?;
        Ok(Obj {
            model: self.model,
            address,
            bytes,
        })
    }

    /// An unsigned integer of `width` bytes.
    pub(crate) fn uint(&self, address: u64, width: u64, what: &str) -> NativeResult<u64> {
        self.obj(address, width, what)?
            .uint(FieldLayout::new(0, width), what)
    }

    /// A pointer.
    pub(crate) fn pointer(&self, address: u64, what: &str) -> NativeResult<u64> {
        self.uint(address, self.model.pointer_size(), what)
    }

    /// `count` pointers in one read.
    pub(crate) fn pointers(
        &self,
        address: u64,
        count: usize,
        what: &str,
    ) -> NativeResult<Vec<u64>> {
        let p = self.model.pointer_size();
        let obj = self.obj(address, p.saturating_mul(count as u64), what)?;
        (0..count as u64)
            .map(|i| obj.uint(FieldLayout::new(i * p, p), what))
            .collect()
    }
}

/// Objects up to this size are fetched without a heap allocation.
const INLINE: usize = 128;

enum Bytes {
    Inline([u8; INLINE], usize),
    Heap(Vec<u8>),
}

impl Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Bytes::Inline(b, n) => b.get(..*n).unwrap_or_default(),
            Bytes::Heap(v) => v,
        }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Bytes::Inline(b, n) => b.get_mut(..*n).unwrap_or_default(),
            Bytes::Heap(v) => v,
        }
    }
}

/// A struct fetched from the target, decoded by field.
pub(crate) struct Obj {
    model: DataModel,
    /// Where it was read.
    pub(crate) address: u64,
    bytes: Bytes,
}

impl Obj {
    fn view(&self) -> View<'_> {
        View::new(self.model, self.address, self.bytes.as_ref())
    }

    fn decode_err(&self, what: &str, e: impl std::fmt::Display) -> NativeError {
        NativeError::Corrupt {
            what: what.to_string(),
            address: self.address,
            reason: e.to_string(),
        }
    }

    /// Field `f` as an unsigned integer of its own width.
    pub(crate) fn uint(&self, f: FieldLayout, what: &str) -> NativeResult<u64> {
        self.view()
            .field_uint(f, what)
            .map_err(|e| self.decode_err(what, e))
    }

    /// Field `f` as a signed integer of its own width.
    pub(crate) fn int(&self, f: FieldLayout, what: &str) -> NativeResult<i64> {
        self.view()
            .field_int(f, what)
            .map_err(|e| self.decode_err(what, e))
    }

    /// Field `f`, a `char` array, up to its first NUL (invalid UTF-8 replaced).
    pub(crate) fn text(&self, f: FieldLayout, what: &str) -> NativeResult<String> {
        let b = self
            .view()
            .char_array(f.offset, f.size, what)
            .map_err(|e| self.decode_err(what, e))?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(b.get(..end).unwrap_or_default()).into_owned())
    }
}

/// Guards a list walk: at most `limit` entries, and no entry twice.
pub(crate) struct ListGuard {
    what: String,
    limit: usize,
    seen: AddressSet,
}

impl ListGuard {
    pub(crate) fn new(what: impl Into<String>, limit: usize) -> Self {
        ListGuard {
            what: what.into(),
            limit,
            seen: AddressSet::default(),
        }
    }

    /// Admits `address` as the next entry, or says why the walk must stop.
    pub(crate) fn admit(&mut self, address: u64) -> NativeResult<()> {
        if self.seen.len() >= self.limit {
            return Err(NativeError::TooLong {
                what: self.what.clone(),
                limit: self.limit,
            });
        }
        if !self.seen.insert(address) {
            return Err(NativeError::Cycle {
                what: self.what.clone(),
                address,
                hops: self.seen.len(),
            });
        }
        Ok(())
    }

    /// Entries admitted.
    pub(crate) fn hops(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::MockTarget;

    #[test]
    fn block_cache_serves_repeated_reads_and_falls_back_at_mapping_ends() {
        let mut b = MockTarget::builder(DataModel::LP64);
        let at = b.alloc(100);
        b.write_with(at, 100, |v| {
            for i in 0..100 {
                v.put_uint(i, 1, i, "byte")?;
            }
            Ok(())
        });
        let t = b.build();
        let s = Snapshot::new(&t, 1 << 20);
        let mut buf = [0u8; 4];
        s.read_into(at + 10, &mut buf, "x").unwrap();
        assert_eq!(buf, [10, 11, 12, 13]);
        let reads = s.target_reads();
        s.read_into(at + 50, &mut buf, "x").unwrap();
        assert_eq!(buf, [50, 51, 52, 53]);
        assert_eq!(s.target_reads(), reads, "served from the cached block");
        // Past the region: the block's prefix ends; the direct read fails with the address.
        let e = s.read_into(at + 98, &mut buf, "tail").unwrap_err();
        assert!(
            matches!(e, NativeError::Read { address, .. } if address == at + 98),
            "{e}"
        );
    }

    #[test]
    fn guard_stops_cycles_and_long_lists() {
        let mut g = ListGuard::new("l", 3);
        g.admit(1).unwrap();
        g.admit(2).unwrap();
        assert!(matches!(
            g.admit(1),
            Err(NativeError::Cycle { hops: 2, .. })
        ));
        g.admit(3).unwrap();
        assert!(matches!(
            g.admit(4),
            Err(NativeError::TooLong { limit: 3, .. })
        ));
    }
}
