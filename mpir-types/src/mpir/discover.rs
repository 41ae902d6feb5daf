//! Finding the process descriptor table of a starter that has no MPIR symbols (a stripped
//! starter such as the `mpiexec.hydra` of the PyPI MPICH 5 wheel), by a validated, bounded
//! search of its writable memory. No I/O: the caller hands in the bytes of the starter's
//! writable regions, the processes that descend from it, and a [`Facts`] that reads more of
//! the starter's memory and says whether a process runs a program.
//!
//! # What counts as the table
//!
//! The spec's variables (MPIR 1.1 §9.1–9.2) are a pointer `MPIR_proctable` to an array of
//! `MPIR_PROCDESC` (`{char *host_name; char *executable_name; int pid;}`, laid out by the C ABI
//! of the starter's [`DataModel`]) and an `int MPIR_proctable_size`. A candidate is a
//! pointer-sized, pointer-aligned word of a writable region (the would-be `MPIR_proctable`)
//! together with an `int` beside it (the would-be `MPIR_proctable_size`) such that:
//!
//! 1. the int holds `n` with `1 <= n <= ` the number of descendants (and
//!    [`SearchOptions::max_entries`]): every entry names a distinct descendant, so no more
//!    entries can be valid — a huge or negative size is rejected before anything is read;
//! 2. the word points at `n` readable entries;
//! 3. every entry's pid is a process that descends from the starter (child, grandchild: MPICH's
//!    `hydra_pmi_proxy` sits between), with no pid twice;
//! 4. every entry's `executable_name` is a NUL-terminated string (within
//!    [`SearchOptions::max_string`]) naming the program that pid runs ([`Facts::runs`]: the
//!    same rules as the proof of identity of a rank: path, same file relative to the
//!    starter's working directory or `PATH`, base name);
//! 5. every entry's `host_name` is a non-empty NUL-terminated string.
//!
//! Where the size lies. The spec declares `MPIR_proctable` then `MPIR_proctable_size`, but the
//! layout is the compiler's and linker's: real starters put the size right before the pointer
//! (MPICH 5.0.2's hydra: 4 bytes before; Slurm's `srun`: 8 bytes before, 4 of padding) or
//! right after it (Intel MPI's hydra: one pointer after). So the int is looked for in the four
//! int-aligned slots next to the pointer: two ints before it, and the two ints after it
//! ([`SIZE_SLOTS`]). Slots outside the region scanned are not looked at.
//!
//! # The answer
//!
//! Exactly one candidate: [`Discovered`], with its evidence. None: [`DiscoverError::NotFound`],
//! saying what was searched and (a bounded list of) why the near misses were rejected. Two or
//! more: [`DiscoverError::Ambiguous`] listing them. Never a guess: a search cut short by a
//! bound is [`DiscoverError::Budget`], not a partial answer.
//!
//! # Bounds
//!
//! Bytes scanned: [`SearchOptions::max_scan_bytes`] (default 16 MiB; MPICH 5's hydra has
//! ~40 KiB of `.data` and `.bss`). Reads asked of [`Facts`]: [`SearchOptions::max_reads`]
//! (default 65 536): one per word that points into memory the caller says is readable (to look
//! at a first entry's pid), then, only for words whose first pid is a descendant, one for the
//! table (at most `n * sizeof(MPIR_PROCDESC)` bytes, `n` bounded as above) and a bounded
//! number per string. Rejections kept for the report: [`SearchOptions::max_rejections`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::model::DataModel;
use crate::mpir::ProcDescLayout;
use crate::view::View;

/// Where the would-be `MPIR_proctable_size` is looked for, in units of `sizeof(int)` from the
/// pointer's address, the pointer's own width skipped after it: -2 and -1 are the two ints
/// before the pointer, 0 and 1 the two right after it.
pub const SIZE_SLOTS: [i8; 4] = [-2, -1, 0, 1];

/// Default bound on the bytes of writable memory scanned.
pub const DEFAULT_MAX_SCAN_BYTES: u64 = 16 << 20;

/// Default bound on the reads asked of [`Facts`].
pub const DEFAULT_MAX_READS: u64 = 1 << 16;

/// Default bound on the rejections kept for the report.
pub const DEFAULT_MAX_REJECTIONS: usize = 16;

/// Longest string read in one piece: longer ones are read in chunks up to the bound.
const STRING_CHUNK: u64 = 256;

/// One writable region of the starter, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    clippy::exhaustive_structs,
    reason = "a region is its address and its bytes"
)]
pub struct Region<'a> {
    /// Address of the first byte.
    pub address: u64,
    /// Its bytes.
    pub bytes: &'a [u8],
}

/// What the caller knows of the starter and its processes beyond the scanned bytes.
pub trait Facts {
    /// Whether `len` bytes at `address` lie in memory of the starter that can be read (from
    /// its memory map): a word pointing elsewhere is no table pointer, and costs no read.
    fn readable(&self, address: u64, len: u64) -> bool;

    /// Reads up to `buf.len()` bytes of the starter's memory at `address` into the front of
    /// `buf`; returns how many were read (0: none could be).
    fn read(&self, address: u64, buf: &mut [u8]) -> usize;

    /// Whether process `pid` (a descendant of the starter) runs the program `executable`
    /// names, by the rules of the proof of identity of a rank.
    fn runs(&self, pid: u32, executable: &[u8]) -> bool;
}

/// Bounds of [`discover`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchOptions {
    /// Most bytes of writable memory scanned for the pointer.
    pub max_scan_bytes: u64,
    /// Most reads asked of [`Facts`].
    pub max_reads: u64,
    /// Largest table accepted.
    pub max_entries: u64,
    /// Longest host or executable name accepted, in bytes.
    pub max_string: u64,
    /// Most rejections kept for the report (all are counted).
    pub max_rejections: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            max_scan_bytes: DEFAULT_MAX_SCAN_BYTES,
            max_reads: DEFAULT_MAX_READS,
            max_entries: super::DEFAULT_MAX_ENTRIES,
            max_string: super::DEFAULT_MAX_STRING,
            max_rejections: DEFAULT_MAX_REJECTIONS,
        }
    }
}

impl SearchOptions {
    /// Sets the scan bound.
    pub fn with_max_scan_bytes(mut self, n: u64) -> Self {
        self.max_scan_bytes = n;
        self
    }

    /// Sets the read bound.
    pub fn with_max_reads(mut self, n: u64) -> Self {
        self.max_reads = n;
        self
    }

    /// Sets the string bound.
    pub fn with_max_string(mut self, n: u64) -> Self {
        self.max_string = n;
        self
    }
}

/// A table found without symbols, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Discovered {
    /// Address of the word that points at the table (the would-be `MPIR_proctable`).
    pub pointer_address: u64,
    /// Address of the table (the word's value).
    pub table_address: u64,
    /// Address of the int that holds the entry count (the would-be `MPIR_proctable_size`).
    pub size_address: u64,
    /// The entry count.
    pub entries: u64,
    /// The `MPIR_PROCDESC` layout the entries were read with (the data model's ABI).
    pub layout: ProcDescLayout,
    /// The entries' pids, in table order: each a distinct descendant of the starter running
    /// the program its entry names.
    pub pids: Vec<u32>,
}

impl Discovered {
    /// Where the size lies from the pointer, in bytes (negative: before it).
    pub fn size_offset(&self) -> i64 {
        self.size_address.wrapping_sub(self.pointer_address) as i64
    }

    /// The facts every entry matched, in words.
    pub const FACTS: &'static str = "each pid a distinct descendant of the starter, each \
        executable name the program its process runs, each host name a readable string, \
        the size word equal to the entry count";
}

impl fmt::Display for Discovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = self.size_offset();
        write!(
            f,
            "table pointer at {:#x} -> {:#x}, {} entries, size word at {:#x} ({} bytes {} the \
             pointer)",
            self.pointer_address,
            self.table_address,
            self.entries,
            self.size_address,
            off.unsigned_abs(),
            if off < 0 { "before" } else { "after" }
        )
    }
}

/// Why a word that pointed at an entry naming a descendant was not taken for the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Reason {
    /// No int next to the pointer is a plausible entry count.
    #[error(
        "no int next to it is a plausible entry count (1..={bound}); found {}",
        list_values(.values)
    )]
    NoSize {
        /// The largest count that could be valid (descendants, or the entry bound).
        bound: u64,
        /// The ints read next to the pointer: (offset in bytes, value).
        values: Vec<(i64, i64)>,
    },
    /// The table (or part of it) could not be read.
    #[error("its {entries} entries could not be read: {got} of {needed} bytes")]
    Unreadable {
        /// Entries the size word says.
        entries: u64,
        /// Bytes needed.
        needed: u64,
        /// Bytes read.
        got: u64,
    },
    /// An entry's pid is not a valid pid.
    #[error("entry {index}: pid {pid} is not a valid process id")]
    InvalidPid {
        /// The entry.
        index: u64,
        /// As stored.
        pid: i64,
    },
    /// An entry's pid is not a descendant of the starter.
    #[error("entry {index}: pid {pid} does not descend from the starter")]
    NotDescendant {
        /// The entry.
        index: u64,
        /// The pid.
        pid: u32,
    },
    /// Two entries have the same pid.
    #[error("entry {index}: pid {pid} is also entry {first}'s")]
    Duplicate {
        /// The entry.
        index: u64,
        /// The pid.
        pid: u32,
        /// The first entry with it.
        first: u64,
    },
    /// A name could not be read as a NUL-terminated string.
    #[error("entry {index}: {field} at {address:#x} is {problem}")]
    BadString {
        /// The entry.
        index: u64,
        /// `host_name` or `executable_name`.
        field: &'static str,
        /// The string's address.
        address: u64,
        /// "unreadable", "not NUL-terminated within 4096 bytes", "empty".
        problem: String,
    },
    /// The entry right after the last one is also a valid entry naming another descendant
    /// running its program: the size word says fewer entries than the table holds, so it is
    /// not the table's size.
    #[error(
        "entry {entries} (past the {entries} the size word says) also names a descendant, pid \
         {pid}, running its program: the size word is not this table's size"
    )]
    TableContinues {
        /// Entries the size word says.
        entries: u64,
        /// The pid of the entry after them.
        pid: u32,
    },
    /// An entry's executable name is not the program its pid runs.
    #[error("entry {index}: pid {pid} does not run {executable:?}")]
    OtherProgram {
        /// The entry.
        index: u64,
        /// The pid.
        pid: u32,
        /// The name as stored (lossy UTF-8).
        executable: String,
    },
}

fn list_values(values: &[(i64, i64)]) -> String {
    if values.is_empty() {
        return "none in the scanned region".into();
    }
    let v: Vec<String> = values
        .iter()
        .map(|(off, v)| format!("{v} at {off:+}"))
        .collect();
    v.join(", ")
}

/// One rejected word.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Rejection {
    /// The word's address.
    pub pointer_address: u64,
    /// Its value.
    pub table_address: u64,
    /// The size word tried, when one was.
    pub size_address: Option<u64>,
    /// Why.
    pub reason: Reason,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:#x} -> {:#x}",
            self.pointer_address, self.table_address
        )?;
        if let Some(s) = self.size_address {
            write!(f, " (size at {s:#x})")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// What a search covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Searched {
    /// Writable regions scanned.
    pub regions: usize,
    /// Bytes scanned.
    pub bytes: u64,
    /// Pointer-sized words looked at.
    pub words: u64,
    /// Words pointing at readable memory whose first entry's pid was read.
    pub probed: u64,
    /// Words whose first entry named a descendant (checked in full).
    pub checked: u64,
    /// Processes descending from the starter.
    pub descendants: usize,
    /// Reads asked of [`Facts`].
    pub reads: u64,
}

impl fmt::Display for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} words in {} bytes of {} writable regions; {} pointed at readable memory, {} at \
             an entry naming one of the starter's {} descendants",
            self.words, self.bytes, self.regions, self.probed, self.checked, self.descendants
        )
    }
}

/// Why no table was discovered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// No process descends from the starter: there is no job whose table could be checked.
    #[error("no process descends from the starter: it has no job whose table could be checked")]
    NoDescendants,
    /// Nothing matched.
    #[error(
        "no MPIR table found: searched {searched}{}",
        rejections_text(.rejections, *.rejected)
    )]
    NotFound {
        /// What was searched.
        searched: Searched,
        /// Near misses (the first [`SearchOptions::max_rejections`]).
        rejections: Vec<Rejection>,
        /// How many near misses there were in all.
        rejected: u64,
    },
    /// More than one candidate matched: which one is the starter's table cannot be told.
    #[error(
        "{} candidate MPIR tables match equally, refusing to guess: {}",
        .candidates.len(),
        candidates_text(.candidates)
    )]
    Ambiguous {
        /// Every candidate.
        candidates: Vec<Discovered>,
    },
    /// A bound was reached before the search was complete: no answer can be given.
    #[error(
        "search bound reached ({what}: {limit}) before the search was complete; refusing to guess"
    )]
    Budget {
        /// Which bound.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
}

fn rejections_text(rejections: &[Rejection], total: u64) -> String {
    if rejections.is_empty() {
        return String::new();
    }
    let list: Vec<String> = rejections.iter().map(ToString::to_string).collect();
    let more = total.saturating_sub(rejections.len() as u64);
    let more = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    format!("; rejected: {}{more}", list.join("; "))
}

fn candidates_text(candidates: &[Discovered]) -> String {
    let list: Vec<String> = candidates.iter().map(ToString::to_string).collect();
    list.join("; ")
}

/// The search state: bounds and counters.
struct Search<'f, F: ?Sized> {
    model: DataModel,
    layout: ProcDescLayout,
    facts: &'f F,
    descendants: &'f BTreeSet<u32>,
    options: &'f SearchOptions,
    searched: Searched,
    rejections: Vec<Rejection>,
    rejected: u64,
}

impl<F: Facts + ?Sized> Search<'_, F> {
    fn read(&mut self, address: u64, buf: &mut [u8]) -> Result<usize, DiscoverError> {
        if self.searched.reads >= self.options.max_reads {
            return Err(DiscoverError::Budget {
                what: "reads",
                limit: self.options.max_reads,
            });
        }
        self.searched.reads += 1;
        Ok(self.facts.read(address, buf).min(buf.len()))
    }

    fn reject(&mut self, r: Rejection) {
        self.rejected += 1;
        if self.rejections.len() < self.options.max_rejections {
            self.rejections.push(r);
        }
    }

    /// A NUL-terminated, non-empty string at `address`, read in chunks up to the bound.
    fn string(&mut self, address: u64) -> Result<Result<Vec<u8>, String>, DiscoverError> {
        let max = self.options.max_string;
        let mut out = Vec::new();
        loop {
            let at = address.wrapping_add(out.len() as u64);
            let want = STRING_CHUNK.min(max.saturating_add(1) - out.len() as u64);
            if !self.facts.readable(at, 1) {
                return Ok(Err("unreadable".into()));
            }
            let mut buf = vec![0u8; want as usize];
            let got = self.read(at, &mut buf)?;
            let chunk = buf.get(..got).unwrap_or_default();
            if let Some(nul) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(chunk.get(..nul).unwrap_or_default());
                return Ok(if out.is_empty() {
                    Err("empty".into())
                } else {
                    Ok(out)
                });
            }
            out.extend_from_slice(chunk);
            if got == 0 || out.len() as u64 > max {
                return Ok(Err(if got == 0 {
                    "unreadable".into()
                } else {
                    format!("not NUL-terminated within {max} bytes")
                }));
            }
        }
    }

    /// Checks the table of `n` entries at `table`; the pids on success.
    fn check(&mut self, table: u64, n: u64) -> Result<Result<Vec<u32>, Reason>, DiscoverError> {
        let stride = self.layout.size;
        let needed = n * stride; // n <= descendants (<= u32::MAX), stride <= 24: no overflow
        let mut bytes = vec![0u8; needed as usize];
        let got = if self.facts.readable(table, needed) {
            self.read(table, &mut bytes)?
        } else {
            0
        };
        if (got as u64) < needed {
            return Ok(Err(Reason::Unreadable {
                entries: n,
                needed,
                got: got as u64,
            }));
        }
        let Ok(raw) = super::decode_proctable(&self.model, &self.layout, table, &bytes, n) else {
            return Ok(Err(Reason::Unreadable {
                entries: n,
                needed,
                got: got as u64,
            }));
        };
        let mut first: BTreeMap<u32, u64> = BTreeMap::new();
        let mut pids = Vec::with_capacity(raw.len());
        for (index, e) in (0u64..).zip(&raw) {
            let Some(pid) = u32::try_from(e.pid).ok().filter(|&p| p > 1) else {
                return Ok(Err(Reason::InvalidPid { index, pid: e.pid }));
            };
            if !self.descendants.contains(&pid) {
                return Ok(Err(Reason::NotDescendant { index, pid }));
            }
            if let Some(&f) = first.get(&pid) {
                return Ok(Err(Reason::Duplicate {
                    index,
                    pid,
                    first: f,
                }));
            }
            first.insert(pid, index);
            pids.push(pid);
        }
        for (index, (e, &pid)) in (0u64..).zip(raw.iter().zip(&pids)) {
            for (field, address) in [
                ("host_name", e.host_name),
                ("executable_name", e.executable_name),
            ] {
                let s = match self.string(address)? {
                    Ok(s) => s,
                    Err(problem) => {
                        return Ok(Err(Reason::BadString {
                            index,
                            field,
                            address,
                            problem,
                        }));
                    }
                };
                if field == "executable_name" && !self.facts.runs(pid, &s) {
                    let mut executable = String::from_utf8_lossy(&s).into_owned();
                    executable.truncate(256);
                    return Ok(Err(Reason::OtherProgram {
                        index,
                        pid,
                        executable,
                    }));
                }
            }
        }
        if let Some(pid) = self.continues(table, n, &first)? {
            return Ok(Err(Reason::TableContinues { entries: n, pid }));
        }
        Ok(Ok(pids))
    }

    /// Whether entry `n` (one past the table) is itself a valid entry naming a descendant not
    /// in the table, running its program: then the table goes on past the size word's count.
    fn continues(
        &mut self,
        table: u64,
        n: u64,
        listed: &BTreeMap<u32, u64>,
    ) -> Result<Option<u32>, DiscoverError> {
        let stride = self.layout.size;
        let Some(at) = table.checked_add(n * stride) else {
            return Ok(None);
        };
        if !self.facts.readable(at, stride) {
            return Ok(None);
        }
        let mut bytes = vec![0u8; stride as usize];
        if self.read(at, &mut bytes)? < bytes.len() {
            return Ok(None);
        }
        let Ok(raw) = super::decode_proctable(&self.model, &self.layout, at, &bytes, 1) else {
            return Ok(None);
        };
        let Some(e) = raw.first() else {
            return Ok(None);
        };
        let Some(pid) = u32::try_from(e.pid)
            .ok()
            .filter(|p| *p > 1 && self.descendants.contains(p) && !listed.contains_key(p))
        else {
            return Ok(None);
        };
        if self.string(e.host_name)?.is_err() {
            return Ok(None);
        }
        match self.string(e.executable_name)? {
            Ok(s) if self.facts.runs(pid, &s) => Ok(Some(pid)),
            _ => Ok(None),
        }
    }

    /// Looks at the word at `offset` of `region`; pushes what matched.
    fn word(
        &mut self,
        region: &Region<'_>,
        offset: u64,
        found: &mut Vec<Discovered>,
    ) -> Result<(), DiscoverError> {
        let view = View::new(self.model, region.address, region.bytes);
        let ptr = self.model.pointer_size();
        let int = self.model.int_size();
        let Ok(table) = view.pointer(offset, "word") else {
            return Ok(());
        };
        if table == 0 || table % ptr != 0 || !self.facts.readable(table, self.layout.size) {
            return Ok(());
        }
        self.searched.probed += 1;
        let mut pid_buf = vec![0u8; self.layout.pid.size as usize];
        let pid_at = table.wrapping_add(self.layout.pid.offset);
        if self.read(pid_at, &mut pid_buf)? < pid_buf.len() {
            return Ok(());
        }
        let first = View::new(self.model, pid_at, &pid_buf)
            .int(0, self.layout.pid.size, "pid")
            .ok()
            .and_then(|p| u32::try_from(p).ok());
        if !first.is_some_and(|p| self.descendants.contains(&p)) {
            return Ok(());
        }
        self.searched.checked += 1;
        let pointer_address = region.address.wrapping_add(offset);
        let bound = (self.descendants.len() as u64).min(self.options.max_entries);
        let mut values = Vec::new();
        for slot in SIZE_SLOTS {
            let rel = if slot < 0 {
                i64::from(slot) * int as i64
            } else {
                (ptr + u64::from(slot.unsigned_abs()) * int) as i64
            };
            let Some(at) = offset.checked_add_signed(rel) else {
                continue;
            };
            let Ok(v) = view.c_int(at, "size") else {
                continue;
            };
            values.push((rel, v));
            let Some(n) = u64::try_from(v).ok().filter(|&n| n >= 1 && n <= bound) else {
                continue;
            };
            let size_address = region.address.wrapping_add(at);
            match self.check(table, n)? {
                Ok(pids) => found.push(Discovered {
                    pointer_address,
                    table_address: table,
                    size_address,
                    entries: n,
                    layout: self.layout.clone(),
                    pids,
                }),
                Err(reason) => self.reject(Rejection {
                    pointer_address,
                    table_address: table,
                    size_address: Some(size_address),
                    reason,
                }),
            }
        }
        let tried = values
            .iter()
            .any(|&(_, v)| u64::try_from(v).is_ok_and(|n| n >= 1 && n <= bound));
        if !tried {
            self.reject(Rejection {
                pointer_address,
                table_address: table,
                size_address: None,
                reason: Reason::NoSize { bound, values },
            });
        }
        Ok(())
    }
}

/// Searches the writable `regions` of a starter without symbols for its MPIR table (see the
/// [module documentation](self)): `descendants` are the pids of every process that descends
/// from the starter, `facts` reads the rest of its memory and proves programs.
pub fn discover<F: Facts + ?Sized>(
    model: &DataModel,
    regions: &[Region<'_>],
    descendants: &BTreeSet<u32>,
    facts: &F,
    options: &SearchOptions,
) -> Result<Discovered, DiscoverError> {
    if descendants.is_empty() {
        return Err(DiscoverError::NoDescendants);
    }
    let bytes: u64 = regions.iter().map(|r| r.bytes.len() as u64).sum();
    if bytes > options.max_scan_bytes {
        return Err(DiscoverError::Budget {
            what: "bytes of writable memory to scan",
            limit: options.max_scan_bytes,
        });
    }
    let mut search = Search {
        model: *model,
        layout: ProcDescLayout::abi(model),
        facts,
        descendants,
        options,
        searched: Searched {
            regions: regions.len(),
            bytes,
            descendants: descendants.len(),
            ..Searched::default()
        },
        rejections: Vec::new(),
        rejected: 0,
    };
    let ptr = model.pointer_size();
    let mut found = Vec::new();
    for region in regions {
        // Pointer-aligned words: the first aligned address at or after the region's start.
        let skip = region.address.wrapping_neg() % ptr;
        let mut offset = skip;
        while offset + ptr <= region.bytes.len() as u64 {
            search.searched.words += 1;
            search.word(region, offset, &mut found)?;
            offset += ptr;
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(DiscoverError::NotFound {
            searched: search.searched,
            rejections: search.rejections,
            rejected: search.rejected,
        }),
        _ => Err(DiscoverError::Ambiguous { candidates: found }),
    }
}

#[cfg(test)]
#[path = "discover_tests.rs"]
mod tests;
