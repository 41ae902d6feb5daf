//! A job read through the PMIx tool interface (Open MPI 5's `prterun`, which has no MPIR symbol)
//! in the same job model as an MPIR job: [`table`] turns the launcher's `PMIX_QUERY_PROC_TABLE`
//! answer into the [`ProcTable`] an MPIR starter would have held, and [`PmixJob`] is the
//! evidence kept in [`Job::pmix`](crate::Job::pmix).
//!
//! The answer is hostile data (a launcher may report pid 0, relative or unnormalised
//! executables, ranks out of order, duplicates, huge tables): it goes through the very decoder
//! MPIR tables go through ([`mpir_target::proctable::read_proctable`], over an in-memory image of
//! the table: [`TableImage`]), so a pid ≤ 0, an empty or implausible name, a table longer than
//! [`ReadOptions::max_entries`] are flagged or refused exactly as for MPIR. Ranks are placed by
//! their number; a rank the answer does not list is an entry with no host, no executable and
//! pid 0 (a problem of the table, never a process touched), and a rank listed twice is refused.

use std::path::PathBuf;

use mpir_target::proctable::{ProcTable, ReadOptions, read_proctable};
use mpir_target::{
    Memory, Result as TargetResult, Symbol, SymbolKind, SymbolLookup, TargetError, TypeLookup,
    TypeQuery,
};
use mpir_types::mpir::{ProcDescLayout, RawProcDesc, encode_proctable, symbols};
use mpir_types::{DataModel, TypeLayout};

use crate::error::AcquireError;

/// One process as the PMIx server lists it in `PMIX_QUERY_PROC_TABLE` (`pmix_proc_info_t`),
/// verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PmixProc {
    /// Its rank in the namespace.
    pub rank: u32,
    /// The host it runs on.
    pub host: String,
    /// The executable as the server reports it (may be relative or unnormalised:
    /// `/work/./app`).
    pub executable: String,
    /// Its pid on that host (0 or less: not known, or a server bug).
    pub pid: i32,
    /// PMIx's `pmix_proc_state_t`.
    pub state: u8,
}

impl PmixProc {
    /// A process of the table.
    pub fn new(
        rank: u32,
        host: impl Into<String>,
        executable: impl Into<String>,
        pid: i32,
        state: u8,
    ) -> Self {
        PmixProc {
            rank,
            host: host.into(),
            executable: executable.into(),
            pid,
            state,
        }
    }
}

/// How a job was reached through PMIx ([`Job::pmix`](crate::Job::pmix)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PmixJob {
    /// The job's namespace (`prterun-<host>-<pid>@1`).
    pub nspace: String,
    /// The server's URI, when known (from its rendezvous file).
    pub server_uri: Option<String>,
    /// The rendezvous file the server was found by, when it was found by one.
    pub rendezvous: Option<PathBuf>,
    /// The libpmix loaded to talk to it: its version string.
    pub library_version: String,
    /// The libpmix loaded: its path.
    pub library: PathBuf,
    /// Each rank's PMIx process state (`pmix_proc_state_t`), by rank.
    pub states: Vec<u8>,
    /// Launch mode: the launcher held the ranks in `PMIx_Init` (`PRTE_MCA_rtos=stop-in-init`)
    /// until a `PMIX_DEBUGGER_RELEASE`; whether that release has been sent.
    pub stopped_in_init: bool,
}

impl PmixJob {
    /// The evidence for namespace `nspace`, reached with the libpmix `library` (`version`).
    pub fn new(
        nspace: impl Into<String>,
        library: impl Into<PathBuf>,
        library_version: impl Into<String>,
    ) -> Self {
        PmixJob {
            nspace: nspace.into(),
            server_uri: None,
            rendezvous: None,
            library_version: library_version.into(),
            library: library.into(),
            states: Vec::new(),
            stopped_in_init: false,
        }
    }
}

/// The end of a job acquired through PMIx (`PMIX_EVENT_JOB_END`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobEnd {
    /// The job's namespace.
    pub nspace: String,
    /// Its termination status (`PMIX_JOB_TERM_STATUS`, 0 = success); `None` when the server
    /// went away before saying (the launcher exited: the connection was lost).
    pub status: Option<i32>,
}

/// Where the in-memory image puts `MPIR_proctable_size`, `MPIR_proctable` and the entries.
const SIZE_AT: u64 = 0x1000;
const POINTER_AT: u64 = 0x1008;
const TABLE_AT: u64 = 0x1010;

/// A PMIx proc table laid out as an MPIR starter would hold it (LP64, the ABI layout of
/// `MPIR_PROCDESC`, strings after the entries), so that it is read by MPIR's own decoder.
/// It answers only `MPIR_proctable` and `MPIR_proctable_size`, and refuses every write.
#[derive(Debug, Clone)]
pub struct TableImage {
    bytes: Vec<u8>,
}

impl TableImage {
    /// The image of `procs` (ranks placed by number, gaps as empty entries), or why not: a rank
    /// listed twice, a rank past `read.max_entries`.
    pub fn new(procs: &[PmixProc], read: &ReadOptions) -> Result<Self, AcquireError> {
        let bad = |why: String| AcquireError::PmixTable(why);
        let count = match procs.iter().map(|p| u64::from(p.rank)).max() {
            Some(max) => max + 1,
            None => 0,
        };
        if count > read.max_entries || count > i32::MAX as u64 {
            return Err(bad(format!(
                "rank {} listed: more than {} entries",
                count - 1,
                read.max_entries
            )));
        }
        let model = DataModel::LP64;
        let layout = ProcDescLayout::abi(&model);
        let count_usize = usize::try_from(count).map_err(|_| bad("too many ranks".into()))?;
        let mut slots: Vec<Option<&PmixProc>> = vec![None; count_usize];
        for p in procs {
            let slot = &mut slots[p.rank as usize];
            if slot.is_some() {
                return Err(bad(format!("rank {} is listed twice", p.rank)));
            }
            *slot = Some(p);
        }
        let strings_at = TABLE_AT + count * layout.size;
        let mut strings: Vec<u8> = Vec::new();
        let mut seen: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        let mut place = |s: &str, strings: &mut Vec<u8>| -> u64 {
            // A NUL inside a name would cut it: keep what precedes it, as C would.
            let s = s.split('\0').next().unwrap_or("");
            *seen.entry(s.to_string()).or_insert_with(|| {
                let at = strings_at + strings.len() as u64;
                strings.extend_from_slice(s.as_bytes());
                strings.push(0);
                at
            })
        };
        let entries: Vec<RawProcDesc> = slots
            .iter()
            .map(|slot| match slot {
                Some(p) => RawProcDesc {
                    host_name: place(&p.host, &mut strings),
                    executable_name: place(&p.executable, &mut strings),
                    pid: i64::from(p.pid),
                },
                None => RawProcDesc {
                    host_name: 0,
                    executable_name: 0,
                    pid: 0,
                },
            })
            .collect();
        let mut bytes = vec![0u8; (strings_at - SIZE_AT) as usize];
        bytes[0..4].copy_from_slice(&(count as i32).to_le_bytes());
        let pointer = if count == 0 { 0 } else { TABLE_AT };
        bytes[8..16].copy_from_slice(&pointer.to_le_bytes());
        encode_proctable(
            &model,
            &layout,
            TABLE_AT,
            &entries,
            &mut bytes[(TABLE_AT - SIZE_AT) as usize..],
        )
        .map_err(|e| bad(format!("encoding the table: {e}")))?;
        bytes.extend_from_slice(&strings);
        Ok(TableImage { bytes })
    }
}

impl Memory for TableImage {
    fn data_model(&self) -> DataModel {
        DataModel::LP64
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> TargetResult<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let end = SIZE_AT + self.bytes.len() as u64;
        if address < SIZE_AT || address >= end {
            return Err(TargetError::Unreadable {
                address,
                len: buf.len() as u64,
                fault: mpir_target::Fault::Unmapped,
            });
        }
        let from = (address - SIZE_AT) as usize;
        let n = buf.len().min(self.bytes.len() - from);
        buf[..n].copy_from_slice(&self.bytes[from..from + n]);
        Ok(n)
    }

    fn write(&self, address: u64, data: &[u8]) -> TargetResult<()> {
        Err(TargetError::Unsupported {
            operation: format!("writing {} bytes at {address:#x}", data.len()),
            reason: "a PMIx proc table is a copy: there is nothing to write into".into(),
        })
    }
}

impl SymbolLookup for TableImage {
    fn symbol(&self, name: &str) -> TargetResult<Option<Symbol>> {
        let model = DataModel::LP64;
        Ok(match name {
            symbols::PROCTABLE_SIZE => Some(Symbol::new(
                name,
                SIZE_AT,
                model.int_size(),
                SymbolKind::Object,
            )),
            symbols::PROCTABLE => Some(Symbol::new(
                name,
                POINTER_AT,
                model.pointer_size(),
                SymbolKind::Object,
            )),
            _ => None,
        })
    }
}

impl TypeLookup for TableImage {
    fn type_layout(&self, _query: TypeQuery<'_>) -> TargetResult<Option<TypeLayout>> {
        Ok(None)
    }
}

/// The table of `procs` as MPIR's decoder reads it (see the [module](self)): problems flagged
/// per entry, a rank listed twice or a table past `read.max_entries` refused.
pub fn table(procs: &[PmixProc], read: &ReadOptions) -> Result<ProcTable, AcquireError> {
    let image = TableImage::new(procs, read)?;
    read_proctable(&image, read).map_err(|e| AcquireError::PmixTable(format!("reading it: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_types::mpir::ProblemKind;

    fn p(rank: u32, host: &str, exe: &str, pid: i32) -> PmixProc {
        PmixProc::new(rank, host, exe, pid, 0)
    }

    #[test]
    fn ranks_are_placed_by_number_and_names_shared() {
        let procs = [
            p(2, "vm", "/w/./app", 30),
            p(0, "vm", "/w/./app", 10),
            p(1, "node2", "/w/./app", 20),
        ];
        let t = table(&procs, &ReadOptions::default()).unwrap();
        let got: Vec<(u64, Option<&str>, Option<&str>, i64)> = t
            .resolved
            .ranks()
            .map(|r| (r.rank, r.host, r.executable, r.pid))
            .collect();
        assert_eq!(
            got,
            [
                (0, Some("vm"), Some("/w/./app"), 10),
                (1, Some("node2"), Some("/w/./app"), 20),
                (2, Some("vm"), Some("/w/./app"), 30),
            ]
        );
        assert_eq!(t.resolved.names.len(), 3, "{:?}", t.resolved.names);
        assert!(t.resolved.problems.is_empty(), "{:?}", t.resolved.problems);
    }

    #[test]
    fn hostile_answers_are_flagged_or_refused() {
        // pid 0 and a missing rank: problems of the table, as for MPIR.
        let t = table(
            &[p(0, "vm", "a", 0), p(2, "vm", "a", 7)],
            &Default::default(),
        )
        .unwrap();
        assert_eq!(t.resolved.len(), 3);
        let kinds: Vec<(u64, String)> = t
            .resolved
            .problems
            .iter()
            .map(|pr| (pr.rank, format!("{:?}", pr.kind)))
            .collect();
        assert!(
            t.resolved
                .problems
                .iter()
                .any(|pr| pr.rank == 0 && matches!(pr.kind, ProblemKind::InvalidPid(0))),
            "{kinds:?}"
        );
        assert!(
            t.resolved.problems.iter().any(|pr| pr.rank == 1),
            "{kinds:?}"
        );
        assert_eq!(t.resolved.rank(1).unwrap().host, None);
        // An empty host name is implausible, kept and flagged.
        let t = table(&[p(0, "", "a", 5)], &Default::default()).unwrap();
        assert!(!t.resolved.problems.is_empty());
        // A NUL cuts a name as C would.
        let t = table(&[p(0, "vm\0evil", "a", 5)], &Default::default()).unwrap();
        assert_eq!(t.resolved.rank(0).unwrap().host, Some("vm"));
        // Duplicates and huge ranks are refused, naming the rank.
        let e = table(
            &[p(1, "vm", "a", 5), p(1, "vm", "a", 6)],
            &Default::default(),
        );
        assert!(
            matches!(&e, Err(AcquireError::PmixTable(w)) if w.contains("rank 1")),
            "{e:?}"
        );
        let read = ReadOptions::default().with_max_entries(16);
        let e = table(&[p(4_000_000_000, "vm", "a", 5)], &read);
        assert!(
            matches!(&e, Err(AcquireError::PmixTable(w)) if w.contains("4000000000")),
            "{e:?}"
        );
        // Nothing listed: an empty table.
        assert!(table(&[], &Default::default()).unwrap().resolved.is_empty());
    }

    #[test]
    fn the_image_is_read_only() {
        let img = TableImage::new(&[p(0, "vm", "a", 5)], &Default::default()).unwrap();
        assert!(img.write(SIZE_AT, &[1]).is_err());
        let mut b = [0u8; 4];
        assert!(img.read_partial(0, &mut b).is_err());
        assert_eq!(img.read_partial(SIZE_AT, &mut b).unwrap(), 4);
        assert_eq!(i32::from_le_bytes(b), 1);
    }
}
