//! Reading one process's MPI2DD state from a target: `MPI2DD_info`, its tables, the spawn
//! descriptors and the strings they point to, as one [`Snapshot`].
//!
//! The process may be running while it is read (a [`LiveTarget`](mpir_target::live::LiveTarget)
//! does not stop it). [`read_snapshot`] therefore reads `MPI2DD_info` again after the tables
//! and starts over (a bounded number of times) if a table pointer or size changed meanwhile;
//! the reference provider publishes a table by filling it first and storing its pointer and
//! size last, and never frees a published table, so a reader that sees the same pointers and
//! sizes twice read a consistent table.
//!
//! One bad entry does not spoil a table: entries whose strings cannot be read, or whose pid is
//! not positive, are left out and listed as [`EntryProblem`]s; a table that cannot be read at
//! all is listed in [`Snapshot::table_errors`] and the others are still read.

use std::collections::BTreeMap;
use std::sync::Arc;

use mpir_target::{Memory, MemoryExt, SymbolLookup};
use mpir_types::DataModel;

use crate::abi::{INFO_SYMBOL, direntry_size, info_size, procdesc_size, spawndesc_size};
use crate::decode::{
    Info, RawDirEntry, RawProcDesc, RawSpawnDesc, decode_direntries, decode_info, decode_procdescs,
    decode_spawndesc, table_bytes, table_len,
};
use crate::error::{Error, Result};

/// Bounds on what is read from one process; every size the target gives is checked against
/// them before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Longest host name, executable name, comm world id or abort string (bytes before the
    /// NUL). Default: 4096 (`PATH_MAX`).
    pub max_string: u64,
    /// Most entries in one proctable. Default: 2^22 (160 MiB of table on 64-bit targets).
    pub max_proctable: u64,
    /// Most entries in one directory or metadirectory table. Default: 2^16.
    pub max_directory_table: u64,
    /// How many times a snapshot is read again when the tables changed while being read.
    /// Default: 4.
    pub retries: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_string: 4096,
            max_proctable: 1 << 22,
            max_directory_table: 1 << 16,
            retries: 4,
        }
    }
}

impl ReadOptions {
    /// Sets the longest string accepted.
    pub fn with_max_string(mut self, max_string: u64) -> Self {
        self.max_string = max_string;
        self
    }

    /// Sets the most proctable entries accepted.
    pub fn with_max_proctable(mut self, max_proctable: u64) -> Self {
        self.max_proctable = max_proctable;
        self
    }

    /// Sets the most directory or metadirectory table entries accepted.
    pub fn with_max_directory_table(mut self, max_directory_table: u64) -> Self {
        self.max_directory_table = max_directory_table;
        self
    }

    /// Sets how many times a changing snapshot is read again.
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }
}

/// Which table of `MPI2DD_INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "the three tables of the draft's MPI2DD_INFO"
)]
pub enum TableKind {
    /// `proctable` (`MPI2DD_PROCDESC[proctable_size]`).
    Proctable,
    /// `directory_table` (`MPI2DD_DIRECTORYENTRY[directory_size]`).
    DirectoryTable,
    /// `metadirectory_table` (`MPI2DD_DIRECTORYENTRY[metadirectory_size]`).
    MetadirectoryTable,
}

impl TableKind {
    /// The draft's member name.
    pub const fn name(self) -> &'static str {
        match self {
            TableKind::Proctable => "proctable",
            TableKind::DirectoryTable => "directory_table",
            TableKind::MetadirectoryTable => "metadirectory_table",
        }
    }
}

/// A spawn descriptor with its string resolved: where a spawned world comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SpawnDesc {
    /// The `MPI_COMM_WORLD` of the parent rank.
    pub parent_comm_world_id: Arc<str>,
    /// The parent's rank in that world.
    pub parent_rank: i32,
    /// Which of the parent's spawns this is, from 0.
    pub sequence: i32,
}

/// One proctable entry, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ProcDesc {
    /// Where the rank runs (a host name or an IP address).
    pub host: Arc<str>,
    /// The rank's executable, when the string could be read.
    pub executable: Option<Arc<str>>,
    /// The rank's `MPI_COMM_WORLD`.
    pub comm_world_id: Arc<str>,
    /// Its pid on `host`.
    pub pid: i32,
    /// Its rank in `comm_world_id`.
    pub rank: i32,
    /// How it was spawned; `None` for a world a starter created.
    pub spawn: Option<SpawnDesc>,
}

/// One directory or metadirectory table entry, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct DirEntry {
    /// Where the process runs.
    pub host: Arc<str>,
    /// Its executable, when the string could be read.
    pub executable: Option<Arc<str>>,
    /// Its pid on `host`.
    pub pid: i32,
}

/// Why one table entry was left out (or one optional string of `MPI2DD_INFO` is missing).
// Serialize only: the member names are `&'static str`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EntryProblemKind {
    /// A string the entry needs is NULL.
    NullString {
        /// The member, e.g. `MPI2DD_PROCDESC.host_name`.
        field: &'static str,
    },
    /// A string could not be read (unmapped, unterminated within the bound...).
    UnreadableString {
        /// The member.
        field: &'static str,
        /// The string's address.
        address: u64,
        /// Why, as the reader said.
        reason: String,
    },
    /// The spawn descriptor could not be read.
    UnreadableSpawnDesc {
        /// Its address.
        address: u64,
        /// Why.
        reason: String,
    },
    /// The pid is zero or negative.
    InvalidPid(i32),
    /// The rank is negative.
    InvalidRank(i32),
}

/// A problem with one entry of one table; the rest of the table is still used.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct EntryProblem {
    /// The table.
    pub table: TableKind,
    /// The entry's index.
    pub index: u64,
    /// The entry's address.
    pub address: u64,
    /// What is wrong.
    pub kind: EntryProblemKind,
}

/// Everything one process exposes through MPI2DD, read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// Address of `MPI2DD_info`.
    pub info_address: u64,
    /// `MPI2DD_info` as decoded.
    pub info: Info,
    /// `meta_host_name`, when set and readable.
    pub meta_host: Option<Arc<str>>,
    /// `meta_executable_name`, when set and readable.
    pub meta_executable: Option<Arc<str>>,
    /// The proctable's usable entries, in table order.
    pub proctable: Vec<ProcDesc>,
    /// The directory table's usable entries.
    pub directories: Vec<DirEntry>,
    /// The metadirectory table's usable entries.
    pub metadirectories: Vec<DirEntry>,
    /// Entries left out, and why.
    pub problems: Vec<EntryProblem>,
    /// Tables that could not be read at all (their entries are missing above).
    pub table_errors: Vec<(TableKind, Error)>,
    /// The table pointers or sizes changed during every attempt: the snapshot mixes states.
    pub unstable: bool,
}

/// The address of `MPI2DD_info`, or [`Error::NotProvided`].
pub fn info_address<S: SymbolLookup + ?Sized>(target: &S) -> Result<u64> {
    Ok(target
        .symbol(INFO_SYMBOL)?
        .ok_or(Error::NotProvided)?
        .address)
}

/// Reads and decodes the `MPI2DD_INFO` at `address`.
pub fn read_info_at<M: Memory + ?Sized>(memory: &M, address: u64) -> Result<Info> {
    let model = memory.data_model();
    let mut buf = vec![0u8; info_size(&model) as usize];
    memory.read_exact(address, &mut buf)?;
    decode_info(&model, address, &buf)
}

/// Reads `MPI2DD_info` through its symbol: its address and contents.
pub fn read_info<T: Memory + SymbolLookup + ?Sized>(target: &T) -> Result<(u64, Info)> {
    let address = info_address(target)?;
    Ok((address, read_info_at(target, address)?))
}

/// Reads a whole [`Snapshot`] of the process (see the [module documentation](self)).
///
/// Fails only when `MPI2DD_info` itself is missing, unreadable or invalid; everything after
/// that is reported inside the snapshot.
pub fn read_snapshot<T: Memory + SymbolLookup + ?Sized>(
    target: &T,
    options: &ReadOptions,
) -> Result<Snapshot> {
    let address = info_address(target)?;
    read_snapshot_at(target, address, options)
}

/// [`read_snapshot`] with the address of `MPI2DD_info` known.
pub fn read_snapshot_at<M: Memory + ?Sized>(
    memory: &M,
    info_address: u64,
    options: &ReadOptions,
) -> Result<Snapshot> {
    let mut attempt = 0;
    loop {
        let info = read_info_at(memory, info_address)?;
        let mut snap = read_tables(memory, info_address, info, options);
        let again = read_info_at(memory, info_address)?;
        if again.tables() == info.tables() {
            return Ok(snap);
        }
        attempt += 1;
        if attempt > options.retries {
            snap.unstable = true;
            return Ok(snap);
        }
    }
}

/// Reads `count` entries of `stride` bytes at `address` after bounding them.
fn read_table_bytes<M: Memory + ?Sized>(
    memory: &M,
    model: &DataModel,
    kind: TableKind,
    info: &Info,
    info_address: u64,
    stride: u64,
    limit: u64,
) -> Result<(u64, u64, Vec<u8>)> {
    let (address, raw_size) = match kind {
        TableKind::Proctable => (info.proctable, info.proctable_size),
        TableKind::DirectoryTable => (info.directory_table, info.directory_size),
        TableKind::MetadirectoryTable => (info.metadirectory_table, info.metadirectory_size),
    };
    let what = match kind {
        TableKind::Proctable => "MPI2DD_INFO.proctable_size",
        TableKind::DirectoryTable => "MPI2DD_INFO.directory_size",
        TableKind::MetadirectoryTable => "MPI2DD_INFO.metadirectory_size",
    };
    let count = table_len(raw_size, limit, what)?;
    if address == 0 {
        if count == 0 {
            return Ok((0, 0, Vec::new()));
        }
        return Err(Error::NullTable {
            table: kind.name(),
            size: raw_size,
            info: info_address,
        });
    }
    let len = table_bytes(model, address, stride, count, kind.name())?;
    // Bounded by `limit * stride`.
    Ok((address, count, memory.read_vec(address, len)?))
}

/// Reads the three tables, the spawn descriptors and every string.
fn read_tables<M: Memory + ?Sized>(
    memory: &M,
    info_address: u64,
    info: Info,
    options: &ReadOptions,
) -> Snapshot {
    let model = memory.data_model();
    let mut table_errors = Vec::new();

    let mut procs: (u64, Vec<RawProcDesc>) = (0, Vec::new());
    match read_table_bytes(
        memory,
        &model,
        TableKind::Proctable,
        &info,
        info_address,
        procdesc_size(&model),
        options.max_proctable,
    )
    .and_then(|(a, n, bytes)| Ok((a, decode_procdescs(&model, a, &bytes, n)?)))
    {
        Ok(t) => procs = t,
        Err(e) => table_errors.push((TableKind::Proctable, e)),
    }
    let mut dirs: [(u64, Vec<RawDirEntry>); 2] = [(0, Vec::new()), (0, Vec::new())];
    for (slot, kind) in dirs
        .iter_mut()
        .zip([TableKind::DirectoryTable, TableKind::MetadirectoryTable])
    {
        match read_table_bytes(
            memory,
            &model,
            kind,
            &info,
            info_address,
            direntry_size(&model),
            options.max_directory_table,
        )
        .and_then(|(a, n, bytes)| Ok((a, decode_direntries(&model, a, &bytes, n)?)))
        {
            Ok(t) => *slot = t,
            Err(e) => table_errors.push((kind, e)),
        }
    }

    // Spawn descriptors: each distinct one read once (at most one per proctable entry).
    let mut spawns: BTreeMap<u64, std::result::Result<RawSpawnDesc, String>> = BTreeMap::new();
    for p in &procs.1 {
        if p.spawn_desc != 0 && !spawns.contains_key(&p.spawn_desc) {
            let r = memory
                .read_vec(p.spawn_desc, spawndesc_size(&model))
                .map_err(Error::from)
                .and_then(|b| Ok(decode_spawndesc(&model, p.spawn_desc, &b)?))
                .map_err(|e| e.to_string());
            spawns.insert(p.spawn_desc, r);
        }
    }

    // Every string in one batch.
    let mut addresses: Vec<u64> = [info.meta_host_name, info.meta_executable_name]
        .into_iter()
        .chain(
            procs
                .1
                .iter()
                .flat_map(|p| [p.host_name, p.executable_name, p.comm_world_id]),
        )
        .chain(
            dirs.iter()
                .flat_map(|(_, t)| t.iter().flat_map(|d| [d.host_name, d.executable_name])),
        )
        .chain(
            spawns
                .values()
                .filter_map(|s| s.as_ref().ok().map(|s| s.parent_comm_world_id)),
        )
        .filter(|&a| a != 0)
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    let batch = memory.read_c_strings(&addresses, options.max_string);
    let strings: BTreeMap<u64, std::result::Result<Arc<str>, String>> = addresses
        .iter()
        .zip(batch.iter())
        .map(|(&a, r)| {
            let r = r
                .map(|b| Arc::<str>::from(String::from_utf8_lossy(b)))
                .map_err(|e| e.to_string());
            (a, r)
        })
        .collect();
    let string =
        |address: u64, field: &'static str| -> std::result::Result<Arc<str>, EntryProblemKind> {
            if address == 0 {
                return Err(EntryProblemKind::NullString { field });
            }
            match strings.get(&address) {
                Some(Ok(s)) => Ok(s.clone()),
                Some(Err(reason)) => Err(EntryProblemKind::UnreadableString {
                    field,
                    address,
                    reason: reason.clone(),
                }),
                None => Err(EntryProblemKind::UnreadableString {
                    field,
                    address,
                    reason: "not read".into(),
                }),
            }
        };

    let mut problems = Vec::new();
    let mut proctable = Vec::with_capacity(procs.1.len());
    for (i, p) in procs.1.iter().enumerate() {
        let entry = || -> std::result::Result<ProcDesc, EntryProblemKind> {
            if p.pid <= 0 {
                return Err(EntryProblemKind::InvalidPid(p.pid));
            }
            if p.rank < 0 {
                return Err(EntryProblemKind::InvalidRank(p.rank));
            }
            let spawn = match spawns.get(&p.spawn_desc) {
                None => None,
                Some(Err(reason)) => {
                    return Err(EntryProblemKind::UnreadableSpawnDesc {
                        address: p.spawn_desc,
                        reason: reason.clone(),
                    });
                }
                Some(Ok(s)) => Some(SpawnDesc {
                    parent_comm_world_id: string(
                        s.parent_comm_world_id,
                        "MPI2DD_SPAWNDESC.parent_comm_world_id",
                    )?,
                    parent_rank: s.parent_rank,
                    sequence: s.sequence,
                }),
            };
            Ok(ProcDesc {
                host: string(p.host_name, "MPI2DD_PROCDESC.host_name")?,
                executable: string(p.executable_name, "MPI2DD_PROCDESC.executable_name").ok(),
                comm_world_id: string(p.comm_world_id, "MPI2DD_PROCDESC.comm_world_id")?,
                pid: p.pid,
                rank: p.rank,
                spawn,
            })
        };
        match entry() {
            Ok(e) => proctable.push(e),
            Err(kind) => problems.push(EntryProblem {
                table: TableKind::Proctable,
                index: i as u64,
                address: procs.0.wrapping_add(i as u64 * procdesc_size(&model)),
                kind,
            }),
        }
    }
    let [(dir_at, dir_raw), (meta_at, meta_raw)] = &dirs;
    let mut resolve_dirs = |kind: TableKind, at: u64, raw: &[RawDirEntry]| -> Vec<DirEntry> {
        let mut out = Vec::with_capacity(raw.len());
        for (i, d) in raw.iter().enumerate() {
            let entry = || -> std::result::Result<DirEntry, EntryProblemKind> {
                if d.pid <= 0 {
                    return Err(EntryProblemKind::InvalidPid(d.pid));
                }
                Ok(DirEntry {
                    host: string(d.host_name, "MPI2DD_DIRECTORYENTRY.host_name")?,
                    executable: string(d.executable_name, "MPI2DD_DIRECTORYENTRY.executable_name")
                        .ok(),
                    pid: d.pid,
                })
            };
            match entry() {
                Ok(e) => out.push(e),
                Err(k) => problems.push(EntryProblem {
                    table: kind,
                    index: i as u64,
                    address: at.wrapping_add(i as u64 * direntry_size(&model)),
                    kind: k,
                }),
            }
        }
        out
    };
    let directories = resolve_dirs(TableKind::DirectoryTable, *dir_at, dir_raw);
    let metadirectories = resolve_dirs(TableKind::MetadirectoryTable, *meta_at, meta_raw);

    Snapshot {
        info_address,
        info,
        meta_host: string(info.meta_host_name, "MPI2DD_INFO.meta_host_name").ok(),
        meta_executable: string(
            info.meta_executable_name,
            "MPI2DD_INFO.meta_executable_name",
        )
        .ok(),
        proctable,
        directories,
        metadirectories,
        problems,
        table_errors,
        unstable: false,
    }
}

/// Reads the abort message (`abort_string`) of a process whose `debug_state` is ABORT, if set.
pub fn read_abort_string<M: Memory + ?Sized>(
    memory: &M,
    info: &Info,
    max_len: u64,
) -> Result<Option<String>> {
    if info.abort_string == 0 {
        return Ok(None);
    }
    let bytes = memory.read_c_string(info.abort_string, max_len)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}
