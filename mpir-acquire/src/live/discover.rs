//! Attach mode on a starter without MPIR symbols (a stripped starter such as the PyPI MPICH 5
//! wheel's `mpiexec.hydra`): its table is found by the validated search of
//! [`mpir_types::mpir::discover`] over its writable memory, and acquisition then runs exactly
//! as with symbols — through a [`DiscoveredTarget`] that answers `MPIR_proctable` and
//! `MPIR_proctable_size` with the discovered addresses and refuses every write. Nothing is ever
//! written into such a starter: no breakpoint, no `MPIR_being_debugged`, no tool daemon.
//!
//! What the search gets from here, all read while the starter is stopped:
//! - the bytes of the writable mappings of the starter's executable (`.data`, `.bss`) and of
//!   the anonymous mapping right after them (the rest of `.bss`), up to
//!   [`SearchOptions::max_scan_bytes`] — where a C starter's global variables live;
//! - the processes that descend from the starter (children, grandchildren: MPICH's
//!   `hydra_pmi_proxy` sits between), from the parent links of every process in `/proc`
//!   (at most [`MAX_PROCESSES`] processes, [`MAX_DEPTH`] generations);
//! - reads of the rest of its memory, only inside its readable mappings;
//! - whether a descendant runs the program an entry names, by the rules of the proof of
//!   identity ([`crate::identity`]): path, same file relative to the starter's working
//!   directory or `PATH`, base name.
//!
//! `MPIR_debug_state` and the presence flags are not searched for: nothing in memory tells
//! them apart from other ints with the certainty the table has, so the job reports them as
//! unknown or absent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use mpir_target::live::LiveTarget;
use mpir_target::live::procfs::{self, ProcessFacts};
use mpir_target::{
    Memory, Result as TargetResult, Symbol, SymbolKind, SymbolLookup, TargetError, TypeLookup,
    TypeQuery,
};
use mpir_types::mpir::discover::{self, Discovered, Facts, Region, SearchOptions};
use mpir_types::mpir::symbols;
use mpir_types::{DataModel, TypeLayout};

use super::prove::Prover;
use crate::error::AcquireError;

/// Most processes listed from `/proc` when looking for the starter's descendants.
pub const MAX_PROCESSES: usize = 1 << 16;

/// Most generations below the starter followed.
pub const MAX_DEPTH: usize = 64;

/// What the image of a discovered symbol is called ([`Symbol::found_in`]).
pub const FOUND_BY_SEARCH: &str = "(found by a validated memory search)";

/// Whether `target` defines none of the MPIR starter symbols (`MPIR_Breakpoint`,
/// `MPIR_proctable`, `MPIR_proctable_size`, `MPIR_debug_state`): only such a starter has its
/// table searched for. One that defines some but not all is left to the symbolic path, which
/// names what is missing.
pub fn has_no_mpir_symbols<S: SymbolLookup + ?Sized>(target: &S) -> Result<bool, AcquireError> {
    for name in [
        symbols::BREAKPOINT,
        symbols::PROCTABLE,
        symbols::PROCTABLE_SIZE,
        symbols::DEBUG_STATE,
    ] {
        if target
            .symbol(name)
            .map_err(AcquireError::target(format!("look up {name}")))?
            .is_some()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether process `pid` (opened as `target`) is searched for a table: it defines no MPIR
/// symbols ([`has_no_mpir_symbols`]) and has descendants (a job may run under it). Anything
/// else takes the symbolic path, which names what is missing.
pub fn searchable(pid: u32, target: &LiveTarget) -> Result<bool, AcquireError> {
    Ok(has_no_mpir_symbols(target)? && !descendants(pid).is_empty())
}

/// Launch mode, at a breakpoint at `address` in the launched program `pid`: when that is the
/// program's entry point (its libraries loaded) and the program is a known starter by its
/// file name (`mpiexec.hydra`, `orterun`: [`crate::quirks::identify`]) that defines no MPIR
/// symbols, [`AcquireError::LaunchWithoutSymbols`] — at once, rather than waiting for an exec
/// that never comes while the job runs. Launch mode cannot be as certain as attach mode: there
/// is no spawn event to stop at, and such a starter is never written into.
pub(super) fn refuse_launch(
    pid: u32,
    target: &LiveTarget,
    address: u64,
) -> Result<(), AcquireError> {
    if procfs::entry_point(pid).ok() != Some(address) {
        return Ok(());
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let exe = exe.as_deref().and_then(|p| p.to_str());
    if crate::quirks::identify(exe, exe).is_some() && has_no_mpir_symbols(target)? {
        return Err(AcquireError::LaunchWithoutSymbols { pid });
    }
    Ok(())
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    readable: bool,
    writable: bool,
    path: String,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(6, ' ');
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3).unwrap_or("").trim_start().to_string();
            let (a, b) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                readable: perms.starts_with('r'),
                writable: perms.get(1..2) == Some("w"),
                path,
            })
        })
        .collect()
}

/// The executable's writable mappings, and the anonymous one right after the last of them.
fn variable_mappings(maps: &[Mapping], exe: &str) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut last_end = None;
    for m in maps {
        if m.path == exe {
            if m.writable && m.readable {
                out.push((m.start, m.end));
            }
            last_end = Some(m.end);
        } else if m.path.is_empty()
            && m.writable
            && m.readable
            && last_end == Some(m.start)
            && out.last().is_some_and(|&(_, e)| e == m.start)
        {
            out.push((m.start, m.end));
            last_end = None;
        } else {
            last_end = None;
        }
    }
    out
}

/// Every process that descends from `starter` (not the starter itself).
pub fn descendants(starter: u32) -> BTreeSet<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    for entry in dir.flatten().take(MAX_PROCESSES * 2) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = procfs::parent_of(pid) {
            children.entry(ppid).or_default().push(pid);
        }
        if children.len() >= MAX_PROCESSES {
            break;
        }
    }
    let mut out = BTreeSet::new();
    let mut level = vec![starter];
    for _ in 0..MAX_DEPTH {
        let next: Vec<u32> = level
            .iter()
            .filter_map(|p| children.get(p))
            .flatten()
            .copied()
            .filter(|&c| c != starter && out.insert(c))
            .collect();
        if next.is_empty() {
            break;
        }
        level = next;
    }
    out
}

/// [`Facts`] over a live, stopped starter.
struct LiveFacts<'a> {
    target: &'a LiveTarget,
    readable: Vec<(u64, u64)>,
    prover: Prover,
}

impl LiveFacts<'_> {
    /// The end of the readable mapping that holds `address`.
    fn mapping_end(&self, address: u64) -> Option<u64> {
        // The mappings are sorted: the last one starting at or before `address`.
        let i = self.readable.partition_point(|&(s, _)| s <= address);
        let &(_, end) = self.readable.get(i.checked_sub(1)?)?;
        (address < end).then_some(end)
    }
}

impl Facts for LiveFacts<'_> {
    fn readable(&self, address: u64, len: u64) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        self.mapping_end(address).is_some_and(|e| end <= e)
    }

    fn read(&self, address: u64, buf: &mut [u8]) -> usize {
        // Only inside the mapping: `/proc/PID/mem` would read a PROT_NONE page too.
        let Some(end) = self.mapping_end(address) else {
            return 0;
        };
        let n = usize::try_from(end - address).map_or(buf.len(), |n| n.min(buf.len()));
        let Some(buf) = buf.get_mut(..n) else {
            return 0;
        };
        self.target.read_partial(address, buf).unwrap_or(0)
    }

    fn runs(&self, pid: u32, executable: &[u8]) -> bool {
        let Ok(name) = std::str::from_utf8(executable) else {
            return false;
        };
        ProcessFacts::read(pid).is_ok_and(|f| !f.is_gone() && self.prover.runs(&f, name))
    }
}

/// Searches the stopped starter `pid` (opened as `target`) for its table. An error names what
/// was searched, or lists the candidates when more than one matched.
pub fn discover_table(
    pid: u32,
    target: &LiveTarget,
    options: &crate::AcquireOptions,
) -> Result<Discovered, AcquireError> {
    let mut search = SearchOptions::default();
    search.max_entries = options.read.max_entries;
    search.max_string = options.read.max_string;
    discover_table_with(pid, target, options.allow_other_users, &search)
}

/// Attach mode, the starter `pid` held by `tracer`: its table searched for when `search` (the
/// process has no MPIR symbols and a job: [`searchable`]). On failure `tracer` lets go of it.
pub(super) fn while_held(
    tracer: &mpir_target::live::tracer::Tracer,
    pid: u32,
    target: &LiveTarget,
    options: &crate::AcquireOptions,
    search: bool,
) -> Result<Option<Discovered>, AcquireError> {
    if !search {
        return Ok(None);
    }
    discover_table(pid, target, options)
        .map(Some)
        .inspect_err(|_| {
            let _ = tracer.detach_all();
        })
}

/// [`discover_table`] with the search's bounds given.
pub fn discover_table_with(
    pid: u32,
    target: &LiveTarget,
    allow_other_users: bool,
    options: &SearchOptions,
) -> Result<Discovered, AcquireError> {
    let fail = |source| AcquireError::Discovery { pid, source };
    let family = descendants(pid);
    if family.is_empty() {
        return Err(fail(discover::DiscoverError::NoDescendants));
    }
    let exe: PathBuf = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| {
        AcquireError::Usage(format!("process {pid}: cannot read /proc/{pid}/exe: {e}"))
    })?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| {
        AcquireError::Usage(format!("process {pid}: cannot read /proc/{pid}/maps: {e}"))
    })?;
    let maps = parse_maps(&maps);
    let ranges = variable_mappings(&maps, &exe.to_string_lossy());
    let total: u64 = ranges.iter().map(|&(s, e)| e.saturating_sub(s)).sum();
    if total > options.max_scan_bytes {
        return Err(fail(discover::DiscoverError::Budget {
            what: "bytes of writable memory to scan",
            limit: options.max_scan_bytes,
        }));
    }
    let mut buffers = Vec::with_capacity(ranges.len());
    for &(start, end) in &ranges {
        let mut bytes = vec![0u8; (end - start) as usize];
        let got = target.read_partial(start, &mut bytes).unwrap_or(0);
        bytes.truncate(got);
        buffers.push((start, bytes));
    }
    let regions: Vec<Region<'_>> = buffers
        .iter()
        .map(|(address, bytes)| Region {
            address: *address,
            bytes,
        })
        .collect();
    let mut readable: Vec<(u64, u64)> = maps
        .iter()
        .filter(|m| m.readable)
        .map(|m| (m.start, m.end))
        .collect();
    readable.sort_unstable();
    let facts = LiveFacts {
        target,
        readable,
        prover: Prover::new(pid, allow_other_users)?,
    };
    discover::discover(&target.data_model(), &regions, &family, &facts, options).map_err(fail)
}

/// A starter whose table was discovered, as a [`Target`](mpir_target::Target): reads go to
/// the process; `MPIR_proctable` and `MPIR_proctable_size` are the discovered addresses; no
/// other MPIR symbol and no `MPIR_PROCDESC` type exist (the entries were validated with the
/// ABI layout); every write is refused.
#[derive(Debug)]
pub struct DiscoveredTarget<'a> {
    inner: &'a LiveTarget,
    found: &'a Discovered,
}

impl<'a> DiscoveredTarget<'a> {
    /// `inner` with the symbols of `found`.
    pub fn new(inner: &'a LiveTarget, found: &'a Discovered) -> Self {
        DiscoveredTarget { inner, found }
    }
}

impl Memory for DiscoveredTarget<'_> {
    fn data_model(&self) -> DataModel {
        self.inner.data_model()
    }
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> TargetResult<usize> {
        self.inner.read_partial(address, buf)
    }
    fn write(&self, address: u64, data: &[u8]) -> TargetResult<()> {
        Err(TargetError::Unsupported {
            operation: format!("writing {} bytes at {address:#x}", data.len()),
            reason: "the starter has no MPIR symbols and its table was found by a memory \
                     search: nothing is ever written into it"
                .into(),
        })
    }
    fn read_exact(&self, address: u64, buf: &mut [u8]) -> TargetResult<()> {
        self.inner.read_exact(address, buf)
    }
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> mpir_target::StringBatch {
        self.inner.read_c_strings(addresses, max_len)
    }
}

impl SymbolLookup for DiscoveredTarget<'_> {
    fn symbol(&self, name: &str) -> TargetResult<Option<Symbol>> {
        let model = self.inner.data_model();
        let found = |address: u64, size: u64| {
            let mut s = Symbol::new(name, address, size, SymbolKind::Object);
            s.found_in = Some(FOUND_BY_SEARCH.into());
            Some(s)
        };
        Ok(match name {
            symbols::PROCTABLE => found(self.found.pointer_address, model.pointer_size()),
            symbols::PROCTABLE_SIZE => found(self.found.size_address, model.int_size()),
            n if symbols::ALL.iter().any(|s| s.name == n) => None,
            _ => self.inner.symbol(name)?,
        })
    }
}

impl TypeLookup for DiscoveredTarget<'_> {
    fn type_layout(&self, query: TypeQuery<'_>) -> TargetResult<Option<TypeLayout>> {
        let procdesc = match query {
            TypeQuery::PointeeOfVariable(v) => v == symbols::PROCTABLE,
            TypeQuery::Named(n) | TypeQuery::NamedNear { name: n, .. } => {
                symbols::PROCDESC_TYPE_NAMES.contains(&n)
            }
            _ => false,
        };
        if procdesc {
            return Ok(None);
        }
        self.inner.type_layout(query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_give_the_executables_variables_and_the_bss_tail() {
        let maps = "\
00400000-00401000 r--p 00000000 08:01 42 /opt/mpich/bin/mpiexec.hydra
00401000-0049f000 r-xp 00001000 08:01 42 /opt/mpich/bin/mpiexec.hydra
004b4000-004b5000 r--p 000b3000 08:01 42 /opt/mpich/bin/mpiexec.hydra
004b5000-004b6000 rw-p 000b4000 08:01 42 /opt/mpich/bin/mpiexec.hydra
004b6000-004bd000 rw-p 00000000 00:00 0 
01eb2000-01ed3000 rw-p 00000000 00:00 0                                  [heap]
7f0000000000-7f0000001000 rw-p 00000000 08:01 7 /usr/lib/libc.so.6
";
        let m = parse_maps(maps);
        assert_eq!(m.len(), 7);
        assert_eq!(m[5].path, "[heap]");
        assert!(m[3].writable && !m[2].writable && m[2].readable);
        let v = variable_mappings(&m, "/opt/mpich/bin/mpiexec.hydra");
        assert_eq!(v, [(0x4b5000, 0x4b6000), (0x4b6000, 0x4bd000)]);
        // A path with spaces is kept whole.
        let m = parse_maps("00400000-00401000 rw-p 00000000 08:01 42 /tmp/a b/starter\n");
        assert_eq!(m[0].path, "/tmp/a b/starter");
    }

    /// A discovery made on a tiny hand-made starter (a [`Discovered`] is only ever made by the
    /// search).
    fn found() -> Discovered {
        struct Mem(Vec<u8>);
        impl Facts for Mem {
            fn readable(&self, a: u64, len: u64) -> bool {
                a >= 0x1000 && a + len <= 0x1000 + self.0.len() as u64
            }
            fn read(&self, a: u64, buf: &mut [u8]) -> usize {
                let from = (a - 0x1000) as usize;
                let n = buf.len().min(self.0.len().saturating_sub(from));
                buf[..n].copy_from_slice(&self.0[from..from + n]);
                n
            }
            fn runs(&self, pid: u32, exe: &[u8]) -> bool {
                pid == 4242 && exe == b"app"
            }
        }
        // [size 1, pad][pointer -> 0x1010][entry: host, exe, pid][zero entry]["h\0app\0"]
        let mut m = vec![0u8; 0x10 + 48];
        m[0] = 1;
        m[8..16].copy_from_slice(&0x1010u64.to_le_bytes());
        m[0x10..0x18].copy_from_slice(&0x1040u64.to_le_bytes());
        m[0x18..0x20].copy_from_slice(&0x1042u64.to_le_bytes());
        m[0x20..0x24].copy_from_slice(&4242u32.to_le_bytes());
        m.extend_from_slice(b"h\0app\0");
        let mem = Mem(m);
        let regions = [Region {
            address: 0x1000,
            bytes: &mem.0[..16],
        }];
        let family = BTreeSet::from([4242]);
        discover::discover(
            &DataModel::LP64,
            &regions,
            &family,
            &mem,
            &SearchOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_discovered_target_names_the_table_and_refuses_every_write() {
        let found = found();
        let me = LiveTarget::open(std::process::id(), Default::default()).unwrap();
        let t = DiscoveredTarget::new(&me, &found);
        let table = t.symbol(symbols::PROCTABLE).unwrap().unwrap();
        assert_eq!((table.address, table.size), (0x1008, 8));
        assert_eq!(table.found_in.as_deref(), Some(FOUND_BY_SEARCH));
        assert_eq!(
            t.symbol(symbols::PROCTABLE_SIZE).unwrap().unwrap().address,
            0x1000
        );
        for name in [
            symbols::BREAKPOINT,
            symbols::BEING_DEBUGGED,
            symbols::DEBUG_STATE,
            symbols::EXECUTABLE_PATH,
        ] {
            assert_eq!(t.symbol(name).unwrap(), None, "{name}");
        }
        assert_eq!(
            t.type_layout(TypeQuery::PointeeOfVariable(symbols::PROCTABLE))
                .unwrap(),
            None
        );
        // Writes are refused before anything reaches the process: even at a writable
        // address of ours.
        let mut x = 7u32;
        let at = std::ptr::addr_of_mut!(x) as u64;
        let e = t.write(at, &[0, 0, 0, 0]).unwrap_err();
        assert!(matches!(e, TargetError::Unsupported { .. }), "{e}");
        assert_eq!(std::hint::black_box(x), 7);
        assert!(
            !has_no_mpir_symbols(&t).unwrap(),
            "it answers MPIR_proctable"
        );
        assert!(
            has_no_mpir_symbols(&me).unwrap(),
            "this test defines no MPIR symbol"
        );
    }

    #[test]
    fn descendants_are_children_and_grandchildren() {
        use std::process::{Command, Stdio};
        // sh (child) -> sleep (grandchild).
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let me = std::process::id();
        let grandchild = || {
            descendants(me)
                .into_iter()
                .find(|&p| procfs::parent_of(p) == Some(child.id()))
        };
        assert!(mpir_target::testkit::wait_for(10, || grandchild().is_some()));
        let grandchild = grandchild();
        let family = descendants(me);
        assert!(family.contains(&child.id()), "{family:?}");
        assert!(
            grandchild.is_some_and(|g| family.contains(&g)),
            "{family:?}"
        );
        assert!(!family.contains(&me) && !family.contains(&1));
        if let Some(g) = grandchild {
            let _ = Command::new("kill").arg(g.to_string()).status();
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
