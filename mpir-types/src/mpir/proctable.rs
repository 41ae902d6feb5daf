//! The process descriptor table: `MPIR_PROCDESC` layout, the table decoder, and resolution of
//! the raw entries (string addresses) into the job's ranks.

use crate::error::{DecodeError, Result};
use crate::layout::{CStructBuilder, FieldLayout, LayoutSource, TypeLayout};
use crate::model::DataModel;
use crate::view::ViewMut;

/// Default bound on `MPIR_proctable_size`: 8 Mi entries (192 MiB of table on LP64), above any
/// job run so far. A tool can raise it.
pub const DEFAULT_MAX_ENTRIES: u64 = 1 << 23;

/// Default bound on one host or executable name: `PATH_MAX`.
pub const DEFAULT_MAX_STRING: u64 = 4096;

/// Size and member layout of `MPIR_PROCDESC` (MPIR 1.1 §9.2):
///
/// ```c
/// typedef struct { char *host_name; char *executable_name; int pid; } MPIR_PROCDESC;
/// ```
///
/// The spec tells the tool to take size and offsets from the debug information, and lets `pid`
/// be wider than `int` (`pid_t`); [`ProcDescLayout::from_type`] accepts any such description,
/// [`ProcDescLayout::abi`] computes the default when there is none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "sizeof(MPIR_PROCDESC) and the offset of each of its three members"
)]
pub struct ProcDescLayout {
    /// `sizeof(MPIR_PROCDESC)`: the stride of the table.
    pub size: u64,
    /// `host_name` (a pointer).
    pub host_name: FieldLayout,
    /// `executable_name` (a pointer).
    pub executable_name: FieldLayout,
    /// `pid` (a signed integer of 2, 4 or 8 bytes).
    pub pid: FieldLayout,
    /// Where this layout came from.
    pub source: LayoutSource,
}

const TYPE_NAME: &str = "MPIR_PROCDESC";

impl ProcDescLayout {
    /// The layout the C ABI of `model` gives the spec's declaration (x86_64: 24 bytes with `pid`
    /// at 16; ILP32: 12 bytes with `pid` at 8).
    pub fn abi(model: &DataModel) -> Self {
        let mut s = CStructBuilder::new();
        let host_name = s.scalar(model.pointer_size());
        let executable_name = s.scalar(model.pointer_size());
        let pid = s.scalar(model.int_size());
        ProcDescLayout {
            size: s.size(),
            host_name,
            executable_name,
            pid,
            source: LayoutSource::Abi,
        }
    }

    /// The layout a type description gives (DWARF, a sidecar, a test), checked against `model`:
    /// the three members must exist and lie inside the struct, the names must be pointers of the
    /// model's width and `pid` 2, 4 or 8 bytes. The source is the description's.
    pub fn from_type(ty: &TypeLayout, model: &DataModel) -> Result<Self> {
        let ptr = model.pointer_size();
        let layout = ProcDescLayout {
            size: ty.byte_size,
            host_name: ty.field("host_name", ptr, &[ptr])?,
            executable_name: ty.field("executable_name", ptr, &[ptr])?,
            pid: ty.field("pid", model.int_size(), &[2, 4, 8])?,
            source: ty.source.clone(),
        };
        layout.validate(model)?;
        Ok(layout)
    }

    /// Checks a layout built by hand: fields inside the struct, the widths the decoder supports.
    pub fn validate(&self, model: &DataModel) -> Result<()> {
        let invalid = |reason: String| {
            Err(DecodeError::InvalidLayout {
                type_name: TYPE_NAME.into(),
                reason,
            })
        };
        for (name, f, sizes) in [
            ("host_name", self.host_name, &[model.pointer_size()][..]),
            (
                "executable_name",
                self.executable_name,
                &[model.pointer_size()][..],
            ),
            ("pid", self.pid, &[2, 4, 8][..]),
        ] {
            if !sizes.contains(&f.size) {
                return invalid(format!("{name} is {} bytes, expected {sizes:?}", f.size));
            }
            if f.end().is_none_or(|end| end > self.size) {
                return invalid(format!(
                    "{name} at offset {} ({} bytes) lies outside the {}-byte struct",
                    f.offset, f.size, self.size
                ));
            }
        }
        Ok(())
    }
}

/// One table entry as stored in the starter: two string addresses and the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "MPIR_PROCDESC, member for member"
)]
pub struct RawProcDesc {
    /// Address of the NUL-terminated host name in the starter.
    pub host_name: u64,
    /// Address of the NUL-terminated executable name in the starter.
    pub executable_name: u64,
    /// The pid, sign-extended from the field's width.
    pub pid: i64,
}

/// Validates a raw `MPIR_proctable_size` against a limit and returns the entry count.
pub fn proctable_len(raw_size: i64, limit: u64) -> Result<u64> {
    let what = || "MPIR_proctable_size".to_string();
    let n = u64::try_from(raw_size).map_err(|_| DecodeError::Negative {
        what: what(),
        value: raw_size,
    })?;
    if n > limit {
        return Err(DecodeError::TooLarge {
            what: what(),
            value: n,
            limit,
        });
    }
    Ok(n)
}

/// Bytes a table of `count` entries spans, or an error naming the overflow.
pub fn proctable_bytes(layout: &ProcDescLayout, table_address: u64, count: u64) -> Result<u64> {
    count
        .checked_mul(layout.size)
        .filter(|&n| table_address.checked_add(n).is_some())
        .ok_or_else(|| DecodeError::AddressOverflow {
            what: format!("end of MPIR_proctable ({count} entries)"),
            base: table_address,
            offset: count.saturating_mul(layout.size),
        })
}

/// Decodes `count` entries from `bytes`, read from the starter at `table_address`.
///
/// `bytes` must hold the whole table (`count * layout.size` bytes); what is missing is reported
/// as [`DecodeError::Truncated`] with the first missing entry's address. Memory use is bounded
/// by `bytes.len()`, whatever `count` says.
pub fn decode_proctable(
    model: &DataModel,
    layout: &ProcDescLayout,
    table_address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawProcDesc>> {
    layout.validate(model)?;
    let total = proctable_bytes(layout, table_address, count)?;
    if (bytes.len() as u64) < total {
        let first_missing = bytes.len() as u64 / layout.size;
        return Err(DecodeError::Truncated {
            what: format!("MPIR_proctable[{first_missing}] of {count}"),
            address: table_address.wrapping_add(first_missing * layout.size),
            needed: total - first_missing * layout.size,
            available: bytes.len() as u64 - first_missing * layout.size,
        });
    }
    if count == 0 {
        return Ok(Vec::new());
    }
    // Everything that can fail was checked above: the layout's fields lie inside `layout.size`
    // with supported widths, and `bytes` holds `count` entries. The loop is monomorphised per
    // (byte order, pointer width, pid width) and reads with no `Result` in the way: this is the
    // hot path of a million-rank table.
    // `total <= bytes.len()`, so this allocation is bounded by the input.
    let mut out = Vec::with_capacity(count as usize);
    let order = model.byte_order();
    let big = order == crate::ByteOrder::Big;
    let (ptr, pid) = (layout.host_name.size, layout.pid.size);
    let out_ref = &mut out;
    match (big, ptr, pid) {
        (false, 8, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 8>,
            fixed::<false, 4>,
        ),
        (false, 8, 8) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 8>,
            fixed::<false, 8>,
        ),
        (false, 4, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 4>,
            fixed::<false, 4>,
        ),
        (true, 8, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 8>,
            fixed::<true, 4>,
        ),
        (true, 8, 8) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 8>,
            fixed::<true, 8>,
        ),
        (true, 4, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 4>,
            fixed::<true, 4>,
        ),
        // Any other widths (e.g. a 2-byte pid): read with run-time widths.
        _ => {
            let any = |size: u64| {
                move |entry: &[u8], offset: u64| {
                    entry
                        .get(offset as usize..(offset + size) as usize)
                        .map_or(0, |b| order.read_uint(b))
                }
            };
            decode_with(bytes, layout, count, out_ref, any(ptr), any(pid))
        }
    }
    Ok(out)
}

/// Reads an `N`-byte unsigned integer at `offset` of `entry` (0 if out of range, which the
/// caller's validation rules out).
#[inline(always)]
fn fixed<const BIG: bool, const N: usize>(entry: &[u8], offset: u64) -> u64 {
    let Some(src) = entry.get(offset as usize..offset as usize + N) else {
        return 0;
    };
    let mut b = [0u8; 8];
    let dst = if BIG {
        b.get_mut(8 - N..)
    } else {
        b.get_mut(..N)
    };
    if let Some(dst) = dst {
        dst.copy_from_slice(src);
    }
    if BIG {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

/// The table loop, given readers for pointer-sized and pid-sized fields (`entry`, offset).
/// Monomorphised for each pair of readers, so the common widths compile to plain loads.
#[inline(never)]
fn decode_with(
    bytes: &[u8],
    layout: &ProcDescLayout,
    count: u64,
    out: &mut Vec<RawProcDesc>,
    pointer: impl Fn(&[u8], u64) -> u64,
    pid: impl Fn(&[u8], u64) -> u64,
) {
    let (h, e, p, pid_size) = (
        layout.host_name.offset,
        layout.executable_name.offset,
        layout.pid.offset,
        layout.pid.size,
    );
    for entry in bytes
        .chunks_exact(layout.size as usize)
        .take(count as usize)
    {
        out.push(RawProcDesc {
            host_name: pointer(entry, h),
            executable_name: pointer(entry, e),
            pid: crate::view::sign_extend(pid(entry, p), pid_size),
        });
    }
}

/// Encodes `entries` as a table in `layout` (for test targets and the demo starter). Bytes that
/// no field covers (padding) are left as they are in `out`.
pub fn encode_proctable(
    model: &DataModel,
    layout: &ProcDescLayout,
    table_address: u64,
    entries: &[RawProcDesc],
    out: &mut [u8],
) -> Result<()> {
    layout.validate(model)?;
    let mut w = ViewMut::new(*model, table_address, out);
    for (i, e) in entries.iter().enumerate() {
        let base = i as u64 * layout.size;
        let f = |f: FieldLayout| FieldLayout::new(base + f.offset, f.size);
        w.put_field_uint(f(layout.host_name), e.host_name, "host_name")?;
        w.put_field_uint(
            f(layout.executable_name),
            e.executable_name,
            "executable_name",
        )?;
        w.put_field_int(f(layout.pid), e.pid, "pid")?;
    }
    Ok(())
}

/// The distinct, non-NULL string addresses of a table, sorted: what a reader must fetch.
/// Starters that share strings (as the spec asks) yield two addresses for the whole table.
pub fn string_addresses(entries: &[RawProcDesc]) -> Vec<u64> {
    // A small direct-mapped filter drops repeats before the sort: a table whose entries share
    // a few strings (the common case) sorts a handful of addresses instead of two per entry.
    let mut seen = [0u64; 64];
    let mut v: Vec<u64> = Vec::new();
    for a in entries
        .iter()
        .flat_map(|e| [e.host_name, e.executable_name])
    {
        let slot = (a.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize;
        match seen.get_mut(slot) {
            Some(s) if *s == a => continue,
            Some(s) => *s = a,
            None => {}
        }
        if a != 0 {
            v.push(a);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// A distinct name of a [`ResolvedTable`]: an index into [`ResolvedTable::names`].
///
/// Entries hold ids rather than strings so that a million ranks cost 24 bytes each, with no
/// reference counting, however their names are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NameId(std::num::NonZeroU32);

impl NameId {
    /// The id of `names[index]`; `None` past `u32::MAX - 1`.
    pub fn new(index: usize) -> Option<Self> {
        let plus_one = u32::try_from(index).ok()?.checked_add(1)?;
        std::num::NonZeroU32::new(plus_one).map(NameId)
    }

    /// The index in [`ResolvedTable::names`].
    pub fn index(self) -> usize {
        (self.0.get() - 1) as usize
    }
}

/// One rank of the job, resolved, in compact form: names are [`NameId`]s of the table (see
/// [`ResolvedTable::ranks`] for the same with the names filled in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ProcEntry {
    /// Rank in `MPI_COMM_WORLD` (the index in the table).
    pub rank: u64,
    /// Host name or address; `None` when it could not be read (see the table's problems).
    pub host: Option<NameId>,
    /// Executable name as the starter reports it; `None` when it could not be read.
    pub executable: Option<NameId>,
    /// The pid as reported (checked: a value ≤ 0 is also listed as a problem).
    pub pid: i64,
}

/// One rank with its names: what [`ResolvedTable::ranks`] and [`ResolvedTable::rank`] give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Rank<'a> {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// Host name or address; `None` when it could not be read.
    pub host: Option<&'a str>,
    /// Executable name as the starter reports it; `None` when it could not be read.
    pub executable: Option<&'a str>,
    /// The pid as reported.
    pub pid: i64,
}

/// Which member of an entry a problem concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "the three members of MPIR_PROCDESC"
)]
pub enum EntryField {
    /// `host_name`.
    HostName,
    /// `executable_name`.
    ExecutableName,
    /// `pid`.
    Pid,
}

/// Why a member of one entry is unusable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ProblemKind {
    /// The string pointer is NULL.
    NullPointer,
    /// The string at `address` could not be read or decoded.
    Unreadable {
        /// The string's address in the starter.
        address: u64,
        /// Why, as the reader said.
        reason: String,
    },
    /// The pid is zero or negative.
    InvalidPid(i64),
    /// The string was read but is not a plausible name; it is kept (decoded, invalid UTF-8
    /// replaced) and should not be trusted.
    Implausible {
        /// The string's address in the starter.
        address: u64,
        /// Why it is not plausible.
        reason: Implausible,
    },
}

/// Why a string read from a table is not a plausible host or executable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Implausible {
    /// It holds control characters (bytes below 0x20, or 0x7f).
    ControlBytes,
    /// It is not valid UTF-8.
    InvalidUtf8,
    /// It is empty.
    Empty,
    /// Its pointer points into the process descriptor table itself.
    PointsIntoTable,
}

impl std::fmt::Display for Implausible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Implausible::ControlBytes => "holds control bytes",
            Implausible::InvalidUtf8 => "is not valid UTF-8",
            Implausible::Empty => "is empty",
            Implausible::PointsIntoTable => "points into the process descriptor table itself",
        })
    }
}

/// Why `bytes` are not a plausible name, if they are not.
fn implausible(bytes: &[u8]) -> Option<Implausible> {
    if bytes.is_empty() {
        Some(Implausible::Empty)
    } else if bytes.iter().any(|&b| b < 0x20 || b == 0x7f) {
        Some(Implausible::ControlBytes)
    } else if std::str::from_utf8(bytes).is_err() {
        Some(Implausible::InvalidUtf8)
    } else {
        None
    }
}

/// A problem with one entry; the rest of the table is still usable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct EntryProblem {
    /// The entry's rank.
    pub rank: u64,
    /// The member concerned.
    pub field: EntryField,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl std::fmt::Display for EntryProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let field = match self.field {
            EntryField::HostName => "host_name",
            EntryField::ExecutableName => "executable_name",
            EntryField::Pid => "pid",
        };
        write!(f, "rank {}: {field}: ", self.rank)?;
        match &self.kind {
            ProblemKind::NullPointer => f.write_str("NULL pointer"),
            ProblemKind::Unreadable { address, reason } => {
                write!(f, "unreadable string at {address:#x}: {reason}")
            }
            ProblemKind::InvalidPid(p) => write!(f, "invalid pid {p}"),
            ProblemKind::Implausible { address, reason } => {
                write!(f, "the string at {address:#x} {reason}; kept, not trusted")
            }
        }
    }
}

/// The job's ranks with the problems found while resolving them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ResolvedTable {
    /// One entry per rank, in rank order.
    pub entries: Vec<ProcEntry>,
    /// Every distinct name (by content, whatever the number of copies in the starter), in
    /// order of first use; entries refer to them by [`NameId`].
    pub names: Vec<Box<str>>,
    /// Per-entry problems, in rank order.
    pub problems: Vec<EntryProblem>,
}

impl ResolvedTable {
    /// The name `id` stands for (empty for an id of another table).
    pub fn name(&self, id: NameId) -> &str {
        self.names.get(id.index()).map_or("", |s| s)
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no rank.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn expand(&self, e: &ProcEntry) -> Rank<'_> {
        Rank {
            rank: e.rank,
            host: e.host.map(|id| self.name(id)),
            executable: e.executable.map(|id| self.name(id)),
            pid: e.pid,
        }
    }

    /// Rank `rank`, with its names.
    pub fn rank(&self, rank: usize) -> Option<Rank<'_>> {
        self.entries.get(rank).map(|e| self.expand(e))
    }

    /// Every rank in order, with its names.
    pub fn ranks(&self) -> impl ExactSizeIterator<Item = Rank<'_>> + '_ {
        self.entries.iter().map(|e| self.expand(e))
    }
}

/// The strings fetched for [`resolve`], position by position: the bytes (without NUL) at the
/// `i`-th address, or why they could not be read. Implemented for slices of results, and by
/// target crates for their own batch types, so that a million strings need no conversion.
pub trait FetchedStrings {
    /// Number of positions.
    fn count(&self) -> usize;
    /// Position `i`; `None` past the end.
    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>>;
}

impl<B: AsRef<[u8]>, E: std::fmt::Display> FetchedStrings for [std::result::Result<B, E>] {
    fn count(&self) -> usize {
        self.len()
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.get(i)
            .map(|r| r.as_ref().map(AsRef::as_ref).map_err(ToString::to_string))
    }
}

impl<B: AsRef<[u8]>, E: std::fmt::Display> FetchedStrings for Vec<std::result::Result<B, E>> {
    fn count(&self) -> usize {
        self.len()
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.as_slice().fetched(i)
    }
}

impl<B: AsRef<[u8]>, E: std::fmt::Display, const N: usize> FetchedStrings
    for [std::result::Result<B, E>; N]
{
    fn count(&self) -> usize {
        N
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.as_slice().fetched(i)
    }
}

/// Resolves raw entries with strings already fetched: `addresses` is [`string_addresses`] of
/// the entries (sorted, distinct) and `strings[i]` the bytes (without NUL) at `addresses[i]`, or
/// the reason they could not be read. Names are decoded as UTF-8 once per address (invalid
/// sequences replaced by U+FFFD) and shared between the entries that use them.
///
/// Lookups gallop from the previous hit, so tables whose strings are laid out in rank order or
/// cycle through a few hosts resolve in linear time; any table resolves in `O(n log n)`.
pub fn resolve<S: FetchedStrings + ?Sized>(
    entries: &[RawProcDesc],
    addresses: &[u64],
    strings: &S,
) -> ResolvedTable {
    resolve_in(entries, addresses, strings, None)
}

/// [`resolve`], knowing where the table itself lies (`table`: its first byte and its length in
/// bytes), so that a name pointer into the table is flagged. Names that are not plausible
/// (control bytes, invalid UTF-8, empty, inside the table) are kept and listed as
/// [`ProblemKind::Implausible`] for each rank that uses them.
pub fn resolve_in<S: FetchedStrings + ?Sized>(
    entries: &[RawProcDesc],
    addresses: &[u64],
    strings: &S,
    span: Option<(u64, u64)>,
) -> ResolvedTable {
    let mut table = ResolvedTable {
        entries: Vec::with_capacity(entries.len()),
        names: Vec::new(),
        problems: Vec::new(),
    };
    let mut names = NameCache::new(addresses, strings);
    names.span = span;
    for (rank, raw) in (0u64..).zip(entries) {
        let host = names.get(
            raw.host_name,
            rank,
            EntryField::HostName,
            &mut table.problems,
        );
        let executable = names.get(
            raw.executable_name,
            rank,
            EntryField::ExecutableName,
            &mut table.problems,
        );
        if raw.pid <= 0 {
            table.problems.push(EntryProblem {
                rank,
                field: EntryField::Pid,
                kind: ProblemKind::InvalidPid(raw.pid),
            });
        }
        table.entries.push(ProcEntry {
            rank,
            host,
            executable,
            pid: raw.pid,
        });
    }
    table.names = names.names;
    table
}

/// Finds `target` in sorted `v` by galloping from `from`: `O(log d)` for a distance `d`.
fn gallop(v: &[u64], from: usize, target: u64) -> Option<usize> {
    let from = from.min(v.len().saturating_sub(1));
    let here = *v.get(from)?;
    let (lo, hi) = if target >= here {
        let mut step = 1;
        let mut hi = from;
        while v.get(hi).is_some_and(|&x| x < target) {
            hi = from.saturating_add(step).min(v.len());
            step *= 2;
        }
        (from, hi.min(v.len().saturating_sub(1)) + 1)
    } else {
        let mut step = 1;
        let mut lo = from;
        while lo > 0 && v.get(lo).is_some_and(|&x| x > target) {
            lo = from.saturating_sub(step);
            step *= 2;
        }
        (lo, from + 1)
    };
    let window = v.get(lo..hi)?;
    window.binary_search(&target).ok().map(|i| lo + i)
}

/// Decodes each distinct string once and hands out ids; equal strings at different addresses
/// (starters that duplicate "node03" per rank) get one id too.
struct NameCache<'a, S: ?Sized> {
    addresses: &'a [u64],
    strings: &'a S,
    decoded: Vec<Option<NameId>>,
    by_content: std::collections::HashMap<&'a [u8], NameId>,
    names: Vec<Box<str>>,
    /// Last (index, address, id) looked up, for host names (0) and executable names (1).
    last: [(usize, u64, Option<NameId>); 2],
    /// Why each name (by id index) is not plausible, if it is not.
    doubts: Vec<Option<Implausible>>,
    /// The table's own bytes: (first address, length).
    span: Option<(u64, u64)>,
}

impl<'a, S: FetchedStrings + ?Sized> NameCache<'a, S> {
    fn new(addresses: &'a [u64], strings: &'a S) -> Self {
        NameCache {
            addresses,
            strings,
            decoded: vec![None; addresses.len().min(strings.count())],
            by_content: std::collections::HashMap::new(),
            names: Vec::new(),
            last: [(0, 0, None); 2],
            doubts: Vec::new(),
            span: None,
        }
    }

    fn get(
        &mut self,
        address: u64,
        rank: u64,
        field: EntryField,
        problems: &mut Vec<EntryProblem>,
    ) -> Option<NameId> {
        let slot = usize::from(field == EntryField::ExecutableName);
        let (from, last_address, last_id) = self.last.get(slot).copied().unwrap_or_default();
        if address == last_address && last_id.is_some() {
            // The common case: the same string as the previous entry.
            self.doubt(last_id, address, rank, field, problems);
            return last_id;
        }
        let kind = if address == 0 {
            ProblemKind::NullPointer
        } else {
            match gallop(self.addresses, from, address) {
                Some(i) => match self.id_at(i) {
                    Ok(id) => {
                        if let Some(last) = self.last.get_mut(slot) {
                            *last = (i, address, Some(id));
                        }
                        self.doubt(Some(id), address, rank, field, problems);
                        return Some(id);
                    }
                    Err(reason) => ProblemKind::Unreadable { address, reason },
                },
                None => ProblemKind::Unreadable {
                    address,
                    reason: "not fetched".into(),
                },
            }
        };
        problems.push(EntryProblem { rank, field, kind });
        None
    }

    /// Lists a problem for `rank` when the name `id` (at `address`) is not plausible.
    fn doubt(
        &self,
        id: Option<NameId>,
        address: u64,
        rank: u64,
        field: EntryField,
        problems: &mut Vec<EntryProblem>,
    ) {
        let in_table = self
            .span
            .is_some_and(|(start, len)| address >= start && address - start < len);
        let reason = if in_table {
            Some(Implausible::PointsIntoTable)
        } else {
            id.and_then(|id| self.doubts.get(id.index()).copied().flatten())
        };
        if let Some(reason) = reason {
            problems.push(EntryProblem {
                rank,
                field,
                kind: ProblemKind::Implausible { address, reason },
            });
        }
    }

    /// The id of the string at `addresses[i]`, decoding and interning it on first use.
    fn id_at(&mut self, i: usize) -> std::result::Result<NameId, String> {
        if let Some(Some(id)) = self.decoded.get(i) {
            return Ok(*id);
        }
        match (self.strings.fetched(i), self.decoded.get_mut(i)) {
            (Some(Ok(bytes)), Some(cell)) => {
                let names = &mut self.names;
                let id = match self.by_content.entry(bytes) {
                    std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        // At most one name per fetched string: fewer than u32::MAX.
                        let id = NameId::new(names.len()).ok_or("too many names")?;
                        names.push(String::from_utf8_lossy(bytes).into());
                        self.doubts.push(implausible(bytes));
                        *e.insert(id)
                    }
                };
                *cell = Some(id);
                Ok(id)
            }
            (Some(Err(reason)), _) => Err(reason),
            _ => Err("not fetched".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gallop_finds_anything_from_anywhere() {
        let v: Vec<u64> = (0..100).map(|i| i * 3).collect();
        for from in [0, 1, 50, 98, 99, 500] {
            for (i, &x) in v.iter().enumerate() {
                assert_eq!(gallop(&v, from, x), Some(i), "from {from} to {x}");
            }
            assert_eq!(gallop(&v, from, 1), None);
            assert_eq!(gallop(&v, from, 1000), None);
        }
        assert_eq!(gallop(&[], 0, 5), None);
    }

    #[test]
    fn abi_layouts_match_the_spec_examples() {
        let l = ProcDescLayout::abi(&DataModel::LP64);
        assert_eq!((l.size, l.pid.offset, l.pid.size), (24, 16, 4));
        let l = ProcDescLayout::abi(&DataModel::ILP32_BE);
        assert_eq!((l.size, l.executable_name.offset, l.pid.offset), (12, 4, 8));
        assert_eq!(l.source, LayoutSource::Abi);
    }

    #[test]
    fn from_type_accepts_wider_pid_and_rejects_bad_pointers() {
        let ty = TypeLayout::new("MPIR_PROCDESC", 32, LayoutSource::Given)
            .with_member("pid", 0, 8)
            .with_member("host_name", 16, 8)
            .with_member("executable_name", 24, 8);
        let l = ProcDescLayout::from_type(&ty, &DataModel::LP64).unwrap();
        assert_eq!(l.pid, FieldLayout::new(0, 8));
        assert_eq!(l.source, LayoutSource::Given);
        // A 32-bit target cannot have 8-byte pointers.
        assert!(ProcDescLayout::from_type(&ty, &DataModel::ILP32).is_err());
    }

    #[test]
    fn decode_reports_the_first_missing_entry() {
        let m = DataModel::LP64;
        let l = ProcDescLayout::abi(&m);
        let e = decode_proctable(&m, &l, 0x1000, &[0u8; 50], 3).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                what: "MPIR_proctable[2] of 3".into(),
                address: 0x1000 + 48,
                needed: 24,
                available: 2
            }
        );
        assert!(decode_proctable(&m, &l, u64::MAX - 8, &[], 1).is_err());
        assert!(decode_proctable(&m, &l, 0, &[], u64::MAX).is_err());
    }

    #[test]
    fn proctable_len_bounds() {
        assert_eq!(proctable_len(4, 10), Ok(4));
        assert!(matches!(
            proctable_len(-1, 10),
            Err(DecodeError::Negative { value: -1, .. })
        ));
        assert!(matches!(
            proctable_len(11, 10),
            Err(DecodeError::TooLarge { value: 11, .. })
        ));
    }

    #[test]
    fn resolve_shares_strings_and_lists_problems() {
        let raw = [
            RawProcDesc {
                host_name: 0x10,
                executable_name: 0x20,
                pid: 100,
            },
            RawProcDesc {
                host_name: 0x10,
                executable_name: 0,
                pid: 0,
            },
            RawProcDesc {
                host_name: 0x30,
                executable_name: 0x20,
                pid: 7,
            },
        ];
        let addresses = string_addresses(&raw);
        assert_eq!(addresses, vec![0x10, 0x20, 0x30]);
        let strings = [
            Ok(&b"node1"[..]),
            Ok(&b"/bin/a\xff"[..]),
            Err("unmapped".to_string()),
        ];
        let t = resolve(&raw, &addresses, &strings);
        assert_eq!(t.len(), 3);
        let r: Vec<Rank<'_>> = t.ranks().collect();
        assert_eq!(r[0].host, Some("node1"));
        assert_eq!(r[0].executable, Some("/bin/a\u{fffd}"));
        assert_eq!(r[1].executable, None);
        assert_eq!(r[2].host, None);
        assert_eq!(t.names.len(), 2, "one name per distinct readable string");
        let problems: Vec<String> = t.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            problems,
            [
                "rank 0: executable_name: the string at 0x20 is not valid UTF-8; kept, not trusted",
                "rank 1: executable_name: NULL pointer",
                "rank 1: pid: invalid pid 0",
                "rank 2: host_name: unreadable string at 0x30: unmapped",
                "rank 2: executable_name: the string at 0x20 is not valid UTF-8; kept, not trusted",
            ]
        );
    }

    #[test]
    fn implausible_names_are_kept_and_flagged_per_rank() {
        let raw = [
            RawProcDesc {
                host_name: 0x1008, // inside the table below
                executable_name: 0x20,
                pid: 10,
            },
            RawProcDesc {
                host_name: 0x30,
                executable_name: 0x40,
                pid: 11,
            },
        ];
        let addresses = string_addresses(&raw);
        assert_eq!(addresses, vec![0x20, 0x30, 0x40, 0x1008]);
        let strings: [std::result::Result<&[u8], String>; 4] = [
            Ok(&b"/bin/a"[..]),
            Ok(&b"no\x07de"[..]),
            Ok(&b""[..]),
            Ok(&b"\x10\x20"[..]),
        ];
        let t = resolve_in(&raw, &addresses, &strings, Some((0x1000, 48)));
        let r: Vec<Rank<'_>> = t.ranks().collect();
        assert_eq!(r[1].host, Some("no\u{7}de"), "kept as read");
        let kinds: Vec<(u64, EntryField, Implausible)> = t
            .problems
            .iter()
            .filter_map(|p| match p.kind {
                ProblemKind::Implausible { reason, .. } => Some((p.rank, p.field, reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (0, EntryField::HostName, Implausible::PointsIntoTable),
                (1, EntryField::HostName, Implausible::ControlBytes),
                (1, EntryField::ExecutableName, Implausible::Empty),
            ]
        );
        // Without the table's span, the pointer into it goes unnoticed but its bytes do not.
        let t = resolve(&raw, &addresses, &strings);
        assert!(t.problems.iter().any(|p| p.rank == 0
            && matches!(
                p.kind,
                ProblemKind::Implausible {
                    reason: Implausible::ControlBytes,
                    ..
                }
            )));
    }
}
