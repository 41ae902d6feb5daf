//! Reading a filled MPIR process descriptor table from a stopped (or post-mortem) starter.
//!
//! This is MPIR 1.1 §8 steps 10–14 done synchronously on any [`Target`]: size, layout (debug
//! information first, ABI otherwise, and which one is reported), one bulk read of the table, one
//! batched read of the distinct strings. The acquisition state machine drives the same decoders
//! event by event.

use mpir_types::mpir::{self, ProcDescLayout, RawProcDesc, ResolvedTable, symbols};

use crate::error::{Result, TargetError};
use crate::ext::{MemoryExt, SymbolLookupExt};
use crate::traits::{Target, TypeQuery};

/// Which `MPIR_PROCDESC` layout to use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LayoutChoice {
    /// The target's debug information (pointee type of `MPIR_proctable`, then the type names),
    /// or the ABI layout when it has none. A type that is found but unusable is an error, not a
    /// silent fallback: pick [`LayoutChoice::Abi`] explicitly to override it.
    #[default]
    Auto,
    /// The C ABI layout of the target's data model.
    Abi,
    /// This layout.
    Given(ProcDescLayout),
}

/// Bounds and choices for [`read_proctable`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Largest `MPIR_proctable_size` accepted.
    pub max_entries: u64,
    /// Longest host or executable name accepted, in bytes.
    pub max_string: u64,
    /// Layout to decode with.
    pub layout: LayoutChoice,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_entries: mpir::DEFAULT_MAX_ENTRIES,
            max_string: mpir::DEFAULT_MAX_STRING,
            layout: LayoutChoice::Auto,
        }
    }
}

impl ReadOptions {
    /// Sets the layout choice.
    pub fn with_layout(mut self, layout: LayoutChoice) -> Self {
        self.layout = layout;
        self
    }

    /// Sets the entry bound.
    pub fn with_max_entries(mut self, max_entries: u64) -> Self {
        self.max_entries = max_entries;
        self
    }

    /// Sets the string bound.
    pub fn with_max_string(mut self, max_string: u64) -> Self {
        self.max_string = max_string;
        self
    }
}

/// A table as read: where it was, how it was decoded, and the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ProcTable {
    /// Value of the `MPIR_proctable` pointer.
    pub table_address: u64,
    /// The layout used (its `source` says whether from debug information or the ABI).
    pub layout: ProcDescLayout,
    /// Entries as stored.
    pub raw: Vec<RawProcDesc>,
    /// Resolved ranks, and per-entry problems.
    pub resolved: ResolvedTable,
}

/// The `MPIR_PROCDESC` layout the target describes, following `choice`.
pub fn procdesc_layout<T: Target + ?Sized>(
    target: &T,
    choice: &LayoutChoice,
) -> Result<ProcDescLayout> {
    let model = target.data_model();
    match choice {
        LayoutChoice::Abi => return Ok(ProcDescLayout::abi(&model)),
        LayoutChoice::Given(l) => {
            l.validate(&model)?;
            return Ok(l.clone());
        }
        LayoutChoice::Auto => {}
    }
    let queries = std::iter::once(TypeQuery::PointeeOfVariable(symbols::PROCTABLE)).chain(
        symbols::PROCDESC_TYPE_NAMES.map(|name| TypeQuery::NamedNear {
            name,
            symbol: symbols::PROCTABLE,
        }),
    );
    for q in queries {
        if let Some(ty) = target.type_layout(q)? {
            return Ok(ProcDescLayout::from_type(&ty, &model)?);
        }
    }
    Ok(ProcDescLayout::abi(&model))
}

/// Reads the whole process descriptor table of a starter whose `MPIR_debug_state` says it is
/// filled (or of an attached starter). An empty table (`MPIR_proctable_size` 0) is not an
/// error; a NULL table with entries is.
pub fn read_proctable<T: Target + ?Sized>(target: &T, options: &ReadOptions) -> Result<ProcTable> {
    let size_sym = target.require_symbol(symbols::PROCTABLE_SIZE)?;
    let table_sym = target.require_symbol(symbols::PROCTABLE)?;
    let raw_size = target.read_c_int(size_sym.address, symbols::PROCTABLE_SIZE)?;
    let count = mpir::proctable_len(raw_size, options.max_entries)?;
    let layout = procdesc_layout(target, &options.layout)?;
    let table_address = target.read_pointer(table_sym.address, symbols::PROCTABLE)?;
    if count == 0 {
        return Ok(ProcTable {
            table_address,
            layout,
            raw: Vec::new(),
            resolved: ResolvedTable::default(),
        });
    }
    if table_address == 0 {
        return Err(TargetError::InvalidValue {
            what: symbols::PROCTABLE.into(),
            address: table_sym.address,
            problem: format!(
                "NULL, while {} says {count} entries",
                symbols::PROCTABLE_SIZE
            ),
        });
    }
    // Checks size and address range.
    let span = mpir::proctable_bytes(&layout, table_address, count)?;
    let raw = read_entries(target, &layout, table_address, count)?;
    let addresses = mpir::string_addresses(&raw);
    let batch = target.read_c_strings(&addresses, options.max_string);
    let resolved = mpir::resolve_in(&raw, &addresses, &batch, Some((table_address, span)));
    Ok(ProcTable {
        table_address,
        layout,
        raw,
        resolved,
    })
}

/// Entries per read of the table: the bytes go through one reused buffer of about 1 MiB
/// rather than a buffer the size of the table.
const CHUNK_BYTES: u64 = 1 << 20;

/// Reads and decodes `count` entries at `address`, a chunk at a time.
fn read_entries<T: Target + ?Sized>(
    target: &T,
    layout: &ProcDescLayout,
    address: u64,
    count: u64,
) -> Result<Vec<RawProcDesc>> {
    let model = target.data_model();
    let per_chunk = (CHUNK_BYTES / layout.size.max(1)).max(1);
    // A size the target claims allocates nothing in advance unless the table's last entry is
    // readable: then the target really holds `count` entries, and reserving for them (about
    // the table's own size) avoids regrowing and page-faulting as the entries come in.
    let last = address.wrapping_add(count.saturating_sub(1).wrapping_mul(layout.size));
    let mut probe = vec![0u8; usize::try_from(layout.size).unwrap_or(0).min(64)];
    let claimed_is_real = count > 0 && target.read_exact(last, &mut probe).is_ok();
    let reserve = if claimed_is_real {
        count
    } else {
        count.min(per_chunk)
    };
    let mut raw = Vec::with_capacity(usize::try_from(reserve).unwrap_or(0));
    let mut buf = Vec::new();
    let mut first = 0u64;
    while first < count {
        let n = per_chunk.min(count - first);
        let at = address.wrapping_add(first.wrapping_mul(layout.size));
        let len = mpir::proctable_bytes(layout, at, n)?;
        buf.resize(len as usize, 0);
        target.read_exact(at, &mut buf)?;
        raw.extend(mpir::decode_proctable(&model, layout, at, &buf, n)?);
        first += n;
    }
    Ok(raw)
}
