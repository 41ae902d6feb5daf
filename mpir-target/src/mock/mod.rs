//! [`MockTarget`]: a scriptable target for tests — ours, sibling crates' and users'.
//!
//! Memory is a set of regions laid out by a [`MockTargetBuilder`] *in a chosen data model*, so a
//! big-endian 32-bit starter is as easy to build as a little-endian 64-bit one. Symbols and type
//! layouts are registered by name. Faults can be injected: protected (unreadable) regions,
//! read-only regions, short reads, and reads that fail after a number of calls. Every write is
//! logged, so a test can check that a tool wrote exactly what an interface allows.
//!
//! ```
//! use mpir_target::{MemoryExt, MockTarget, SymbolLookupExt};
//! use mpir_types::DataModel;
//!
//! let mut b = MockTarget::builder(DataModel::ILP32_BE);
//! b.int_variable("MPIR_debug_state", 1);
//! let target = b.build();
//! let sym = target.require_symbol("MPIR_debug_state")?;
//! assert_eq!(target.read_c_int(sym.address, "state")?, 1);
//! # Ok::<(), mpir_target::TargetError>(())
//! ```

mod builder;
mod starter;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use mpir_types::{DataModel, TypeLayout};

pub use builder::MockTargetBuilder;
pub use starter::{MockRank, MockStarter, PlacedStarter};

use crate::error::{Fault, Result, TargetError};
use crate::traits::{Memory, Symbol, SymbolLookup, TypeLookup, TypeQuery};

/// Access rights of a mock region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Access {
    /// Reads succeed.
    pub read: bool,
    /// Writes succeed.
    pub write: bool,
}

impl Access {
    /// Readable and writable.
    pub const READ_WRITE: Access = Access {
        read: true,
        write: true,
    };
    /// Readable only (like `.rodata` or text).
    pub const READ_ONLY: Access = Access {
        read: true,
        write: false,
    };
    /// Neither (like a `PROT_NONE` page).
    pub const NONE: Access = Access {
        read: false,
        write: false,
    };
}

#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) start: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) access: Access,
}

impl Region {
    pub(crate) fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// The region containing `address`, in regions sorted by start and not overlapping.
fn region_index(regions: &[Region], address: u64) -> Option<usize> {
    let i = regions
        .partition_point(|r| r.start <= address)
        .checked_sub(1)?;
    regions
        .get(i)
        .is_some_and(|r| address < r.end())
        .then_some(i)
}

/// Injected faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Faults {
    /// Each `read_partial` returns at most this many bytes.
    pub(crate) max_read_chunk: Option<usize>,
    /// `read_partial` calls after this many fail with [`Fault::Injected`].
    pub(crate) fail_reads_after: Option<u64>,
}

/// One write a tool made to the mock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteRecord {
    /// Where.
    pub address: u64,
    /// What.
    pub bytes: Vec<u8>,
    /// The symbol whose storage contains `address`, when one does.
    pub symbol: Option<String>,
}

/// A scriptable in-memory target. See the [module documentation](self).
#[derive(Debug)]
pub struct MockTarget {
    model: DataModel,
    regions: Mutex<Vec<Region>>,
    symbols: HashMap<String, Symbol>,
    types: HashMap<String, TypeLayout>,
    variable_types: HashMap<String, String>,
    faults: Faults,
    reads: AtomicU64,
    writes: Mutex<Vec<WriteRecord>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another test thread must not turn every later access into a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MockTarget {
    /// A builder for a target of data model `model`.
    pub fn builder(model: DataModel) -> MockTargetBuilder {
        MockTargetBuilder::new(model)
    }

    pub(crate) fn from_parts(
        model: DataModel,
        regions: Vec<Region>,
        symbols: HashMap<String, Symbol>,
        types: HashMap<String, TypeLayout>,
        variable_types: HashMap<String, String>,
        faults: Faults,
    ) -> Self {
        debug_assert!(regions.windows(2).all(|w| w[0].end() <= w[1].start));
        MockTarget {
            model,
            regions: Mutex::new(regions),
            symbols,
            types,
            variable_types,
            faults,
            reads: AtomicU64::new(0),
            writes: Mutex::new(Vec::new()),
        }
    }

    /// Number of `read_partial` calls so far (a measure of how chatty a reader is).
    pub fn read_calls(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Every successful write so far, in order.
    pub fn writes(&self) -> Vec<WriteRecord> {
        lock(&self.writes).clone()
    }

    /// The symbol whose storage `[address, address + size)` contains `address` (a linear search:
    /// for assertions and the write log, not hot paths).
    pub fn symbol_at(&self, address: u64) -> Option<&Symbol> {
        self.symbols
            .values()
            .find(|s| address >= s.address && address < s.address.saturating_add(s.size.max(1)))
    }

    /// A copy of `len` bytes at `address`, ignoring access rights and faults (for assertions).
    pub fn peek(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        let regions = lock(&self.regions);
        let r = regions.get(region_index(&regions, address)?)?;
        let off = (address - r.start) as usize;
        r.bytes.get(off..off.checked_add(len)?).map(<[u8]>::to_vec)
    }
}

impl Memory for MockTarget {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let call = self.reads.fetch_add(1, Ordering::Relaxed);
        let len = buf.len() as u64;
        let unreadable = |fault| TargetError::Unreadable {
            address,
            len,
            fault,
        };
        if self.faults.fail_reads_after.is_some_and(|n| call >= n) {
            return Err(unreadable(Fault::Injected));
        }
        let want = self
            .faults
            .max_read_chunk
            .map_or(buf.len(), |c| c.max(1).min(buf.len()));
        let regions = lock(&self.regions);
        let mut done = 0usize;
        // Like process_vm_readv: continue across adjacent readable regions, stop at a hole.
        while done < want {
            let at = address.wrapping_add(done as u64);
            let Some(r) = region_index(&regions, at).and_then(|i| regions.get(i)) else {
                break;
            };
            if !r.access.read {
                if done == 0 {
                    return Err(unreadable(Fault::Protected));
                }
                break;
            }
            let off = (at - r.start) as usize;
            let n = (r.bytes.len() - off).min(want - done);
            let (Some(dst), Some(src)) = (buf.get_mut(done..done + n), r.bytes.get(off..off + n))
            else {
                break;
            };
            dst.copy_from_slice(src);
            done += n;
        }
        if done == 0 {
            return Err(unreadable(Fault::Unmapped));
        }
        Ok(done)
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        let unwritable = |fault| TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault,
        };
        let mut regions = lock(&self.regions);
        // Check the whole range first: a failed write changes nothing.
        let mut at = address;
        let end = address
            .checked_add(data.len() as u64)
            .ok_or_else(|| unwritable(Fault::Unmapped))?;
        while at < end {
            let r = region_index(&regions, at)
                .and_then(|i| regions.get(i))
                .ok_or_else(|| unwritable(Fault::Unmapped))?;
            if !r.access.write {
                return Err(unwritable(Fault::Protected));
            }
            at = r.end();
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = address + done as u64;
            let Some(r) = region_index(&regions, at).and_then(|i| regions.get_mut(i)) else {
                break;
            };
            let off = (at - r.start) as usize;
            let n = (r.bytes.len() - off).min(data.len() - done);
            if let (Some(dst), Some(src)) =
                (r.bytes.get_mut(off..off + n), data.get(done..done + n))
            {
                dst.copy_from_slice(src);
            }
            done += n;
        }
        drop(regions);
        let symbol = self.symbol_at(address).map(|s| s.name.clone());
        lock(&self.writes).push(WriteRecord {
            address,
            bytes: data.to_vec(),
            symbol,
        });
        Ok(())
    }
}

impl SymbolLookup for MockTarget {
    fn symbol(&self, name: &str) -> Result<Option<Symbol>> {
        Ok(self.symbols.get(name).cloned())
    }
}

impl TypeLookup for MockTarget {
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>> {
        let name = match query {
            TypeQuery::Named(n) | TypeQuery::NamedNear { name: n, .. } => n,
            TypeQuery::PointeeOfVariable(v) => match self.variable_types.get(v) {
                Some(t) => t.as_str(),
                None => return Ok(None),
            },
        };
        Ok(self.types.get(name).cloned())
    }
}
