//! The resolved table: ranks with interned names ([`NameId`]), and the per-entry problems found
//! while resolving them.

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
pub(super) fn implausible(bytes: &[u8]) -> Option<Implausible> {
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
