//! Laying out an MPI2DD process in a [`MockTarget`](mpir_target::MockTarget), in any data
//! model: for our tests, sibling crates' (the acquisition state machine) and users'.
//!
//! ```
//! use mpi2dd::mock::{MockDir, MockProcess, MockRank};
//! use mpi2dd::read::{ReadOptions, read_snapshot};
//! use mpir_target::MockTarget;
//! use mpir_types::DataModel;
//!
//! let mut dir = MockProcess::directory("node0", 100);
//! dir.proctable.push(MockRank::new("node1", "/bin/app", "world-0", 2001, 0));
//! let mut b = MockTarget::builder(DataModel::ILP32_BE);
//! dir.place(&mut b);
//! let target = b.build();
//! let snap = read_snapshot(&target, &ReadOptions::default())?;
//! assert_eq!(snap.proctable[0].pid, 2001);
//! assert_eq!(&*snap.proctable[0].comm_world_id, "world-0");
//! # Ok::<(), mpi2dd::Error>(())
//! ```

use std::collections::BTreeMap;

use mpir_target::mock::MockTargetBuilder;
use mpir_target::{Symbol, SymbolKind};

use crate::abi::{
    BREAKPOINT_SYMBOL, INFO_SYMBOL, direntry_size, info_size, procdesc_size, spawndesc_size,
};
use crate::decode::{
    Info, RawDirEntry, RawProcDesc, RawSpawnDesc, encode_direntries, encode_info, encode_procdescs,
    encode_spawndesc,
};
use crate::flags::{DebugState, DebuggerFlags, MpiFlags};

/// A spawn origin for [`MockRank::spawned`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct MockSpawn {
    /// The parent's world.
    pub parent_comm_world_id: String,
    /// The parent's rank.
    pub parent_rank: i32,
    /// The spawn's sequence number at that parent.
    pub sequence: i32,
}

/// One proctable entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // the draft's members
#[non_exhaustive]
pub struct MockRank {
    pub host: String,
    pub executable: String,
    pub comm_world_id: String,
    pub pid: i32,
    pub rank: i32,
    pub spawn: Option<MockSpawn>,
}

impl MockRank {
    /// A rank of a world a starter created.
    pub fn new(host: &str, executable: &str, world: &str, pid: i32, rank: i32) -> Self {
        MockRank {
            host: host.into(),
            executable: executable.into(),
            comm_world_id: world.into(),
            pid,
            rank,
            spawn: None,
        }
    }

    /// The same rank, spawned by `parent_rank` of `parent_world` (its `sequence`-th spawn).
    pub fn spawned(mut self, parent_world: &str, parent_rank: i32, sequence: i32) -> Self {
        self.spawn = Some(MockSpawn {
            parent_comm_world_id: parent_world.into(),
            parent_rank,
            sequence,
        });
        self
    }
}

/// One directory or metadirectory table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // the draft's members
#[non_exhaustive]
pub struct MockDir {
    pub host: String,
    pub executable: String,
    pub pid: i32,
}

impl MockDir {
    /// An entry for `pid` on `host`.
    pub fn new(host: &str, executable: &str, pid: i32) -> Self {
        MockDir {
            host: host.into(),
            executable: executable.into(),
            pid,
        }
    }
}

/// A process's MPI2DD state, to lay out with [`MockProcess::place`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockProcess {
    /// `debug_state`.
    pub debug_state: DebugState,
    /// `debugger_flags`.
    pub debugger_flags: DebuggerFlags,
    /// `mpi_flags`.
    pub mpi_flags: MpiFlags,
    /// `meta_host_name` (`None`: NULL).
    pub meta_host: Option<String>,
    /// `meta_executable_name` (`None`: NULL).
    pub meta_executable: Option<String>,
    /// `meta_pid`.
    pub meta_pid: i32,
    /// `abort_string` (`None`: NULL).
    pub abort: Option<String>,
    /// The proctable (NULL when empty).
    pub proctable: Vec<MockRank>,
    /// The directory table (NULL when empty).
    pub directories: Vec<MockDir>,
    /// The metadirectory table (NULL when empty).
    pub metadirectories: Vec<MockDir>,
}

/// Where [`MockProcess::place`] put things, for tests that corrupt them afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlacedProcess {
    /// `MPI2DD_info`.
    pub info: u64,
    /// `MPI2DD_breakpoint`.
    pub breakpoint: u64,
    /// The proctable (0 when empty).
    pub proctable: u64,
    /// The directory table (0 when empty).
    pub directory_table: u64,
    /// The metadirectory table (0 when empty).
    pub metadirectory_table: u64,
}

impl MockProcess {
    /// A process with no role: every table empty, `meta_*` pointing at `meta_host`:`meta_pid`.
    pub fn rank(meta_host: &str, meta_pid: i32) -> Self {
        MockProcess {
            debug_state: DebugState::Unknown(0),
            debugger_flags: DebuggerFlags::EMPTY,
            mpi_flags: MpiFlags::EMPTY,
            meta_host: Some(meta_host.into()),
            meta_executable: Some("/opt/mpi/bin/mpi2dd-meta".into()),
            meta_pid,
            abort: None,
            proctable: Vec::new(),
            directories: Vec::new(),
            metadirectories: Vec::new(),
        }
    }

    /// A directory process (`I_AM_DIR`) of the metadirectory `meta_host`:`meta_pid`.
    pub fn directory(meta_host: &str, meta_pid: i32) -> Self {
        let mut p = MockProcess::rank(meta_host, meta_pid);
        p.mpi_flags = MpiFlags::I_AM_DIR;
        p
    }

    /// A metadirectory (`I_AM_METADIR`) on `host` with pid `pid` (its own `meta_*`).
    pub fn metadirectory(host: &str, pid: i32) -> Self {
        let mut p = MockProcess::rank(host, pid);
        p.mpi_flags = MpiFlags::I_AM_METADIR;
        p
    }

    /// Lays the process out: strings, spawn descriptors (one per distinct origin, shared),
    /// tables, `MPI2DD_info` and `MPI2DD_breakpoint` symbols.
    ///
    /// # Panics
    /// If a value does not fit the builder's data model (a test-authoring error).
    pub fn place(&self, b: &mut MockTargetBuilder) -> PlacedProcess {
        let model = b.model();
        let mut strings: BTreeMap<String, u64> = BTreeMap::new();
        let mut s = |b: &mut MockTargetBuilder, text: &str| -> u64 {
            *strings
                .entry(text.to_string())
                .or_insert_with(|| b.cstring(text))
        };
        let sd_size = spawndesc_size(&model);
        let mut spawns: BTreeMap<MockSpawn, u64> = BTreeMap::new();
        let mut procs = Vec::new();
        for r in &self.proctable {
            let spawn_desc = match &r.spawn {
                None => 0,
                Some(sp) => match spawns.get(sp) {
                    Some(&a) => a,
                    None => {
                        let raw = RawSpawnDesc {
                            parent_comm_world_id: s(b, &sp.parent_comm_world_id),
                            parent_rank: sp.parent_rank,
                            sequence: sp.sequence,
                        };
                        let a = b.alloc(sd_size);
                        b.write_with(a, sd_size, |w| {
                            let mut buf = vec![0; sd_size as usize];
                            encode_spawndesc(&model, a, &raw, &mut buf)?;
                            w.put_bytes(0, &buf, "MPI2DD_SPAWNDESC")
                        });
                        spawns.insert(sp.clone(), a);
                        a
                    }
                },
            };
            procs.push(RawProcDesc {
                host_name: s(b, &r.host),
                executable_name: s(b, &r.executable),
                spawn_desc,
                comm_world_id: s(b, &r.comm_world_id),
                pid: r.pid,
                rank: r.rank,
            });
        }
        let proctable = place_table(b, procdesc_size(&model), procs.len(), |a, buf| {
            encode_procdescs(&model, a, &procs, buf)
        });
        let de_size = direntry_size(&model);
        let mut dir_table = |b: &mut MockTargetBuilder, dirs: &[MockDir]| {
            let raw: Vec<RawDirEntry> = dirs
                .iter()
                .map(|d| RawDirEntry {
                    host_name: s(b, &d.host),
                    executable_name: s(b, &d.executable),
                    pid: d.pid,
                })
                .collect();
            place_table(b, de_size, raw.len(), |a, buf| {
                encode_direntries(&model, a, &raw, buf)
            })
        };
        let directory_table = dir_table(b, &self.directories);
        let metadirectory_table = dir_table(b, &self.metadirectories);
        let mut opt =
            |b: &mut MockTargetBuilder, t: &Option<String>| t.as_deref().map_or(0, |t| s(b, t));
        let info = Info {
            debug_state: self.debug_state,
            debugger_flags: self.debugger_flags,
            mpi_flags: self.mpi_flags,
            dll_name_32: 0,
            dll_name_64: 0,
            meta_host_name: opt(b, &self.meta_host),
            meta_executable_name: opt(b, &self.meta_executable),
            abort_string: opt(b, &self.abort),
            proctable,
            directory_table,
            metadirectory_table,
            proctable_size: count(self.proctable.len()),
            directory_size: count(self.directories.len()),
            metadirectory_size: count(self.metadirectories.len()),
            meta_pid: self.meta_pid,
        };
        let il_size = info_size(&model);
        let info_at = b.variable(INFO_SYMBOL, il_size);
        b.write_with(info_at, il_size, |w| {
            let mut buf = vec![0; il_size as usize];
            encode_info(&model, info_at, &info, &mut buf)?;
            w.put_bytes(0, &buf, "MPI2DD_INFO")
        });
        let breakpoint = b.alloc(16);
        b.symbol(Symbol::new(
            BREAKPOINT_SYMBOL,
            breakpoint,
            16,
            SymbolKind::Function,
        ));
        PlacedProcess {
            info: info_at,
            breakpoint,
            proctable,
            directory_table,
            metadirectory_table,
        }
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).expect("mock table too large for an MPI2DD_INT32_T size")
}

/// Allocates and fills `n` entries of `stride` bytes; 0 (NULL) when `n` is 0.
fn place_table(
    b: &mut MockTargetBuilder,
    stride: u64,
    n: usize,
    encode: impl FnOnce(u64, &mut [u8]) -> Result<(), mpir_types::DecodeError>,
) -> u64 {
    if n == 0 {
        return 0;
    }
    let len = stride * n as u64;
    let a = b.alloc(len);
    b.write_with(a, len, |w| {
        let mut buf = vec![0; len as usize];
        encode(a, &mut buf)?;
        w.put_bytes(0, &buf, "table")
    });
    a
}
