//! Which MPI call a rank is in, from its threads' stacks: frame classification by the names the
//! MPI standard fixes, for the hang analysis ([`crate::deadlock`]).
//!
//! # MPI entry points
//!
//! The standard names every procedure of its language bindings, and reserves the prefixes; a
//! frame is an **MPI entry point** when its function name is one of these spellings:
//!
//! * C: `MPI_Xxx` and the profiling name `PMPI_Xxx` (`MPI_` then a capital letter; the tool
//!   interface's `MPI_T_xxx`). `MPIX_`/`PMPIX_` (the implementations' extensions, by
//!   convention) count too.
//! * Fortran (`mpif.h`, `use mpi`): the name is `MPI_XXX` to the compiler, which the linker sees
//!   in the compiler's mangling: `mpi_xxx_`, `mpi_xxx__`, `mpi_xxx`, `MPI_XXX`, and `pmpi_…`.
//!   Case is ignored after the prefix.
//! * The linker names of MPI-3's Fortran support (§ "Fortran support through the mpi_f08
//!   module", profiling interface): `MPI_Xxx_f08`, `MPI_Xxx_f08ts`, `MPI_Xxx_f`, `MPI_Xxx_fts`
//!   and their `PMPI_` twins, in any case, with or without trailing underscores.
//! * One implementation fact, checked on Open MPI 4.1's `libmpi_mpifh.so`: its Fortran
//!   procedures are global functions `ompi_xxx_f` (and `ompi_xxx_f08`) whose *weak* aliases are
//!   the standard names above (`nm -D` shows `T ompi_barrier_f` and `W mpi_barrier_` at one
//!   address), so a symboliser preferring global symbols names the frame `ompi_barrier_f`. Such
//!   a name counts only when `xxx` is a call this module knows (its collective, point-to-point,
//!   completion, init or finalize tables), so Open MPI's internal `ompi_*` functions never do.
//! * One more, checked on Debian's Open MPI 4.1.4: `MPI_Init` and `MPI_Finalize` end in a tail
//!   call to `ompi_mpi_init` / `ompi_mpi_finalize` (ompi/mpi/c/finalize.c: `return
//!   ompi_mpi_finalize();`), so in an optimised build a rank in `MPI_Finalize` shows only
//!   `main → ompi_mpi_finalize`: those two exact names are the calls' entry points.
//!
//! A name longer than [`MAX_ENTRY_NAME`] is no MPI name (none is that long): it is rejected
//! before being examined, so hostile symbol names cost nothing.
//!
//! # The call a thread is blocked in
//!
//! Frames are innermost first. The **MPI region** of a thread is the innermost *contiguous run*
//! of MPI-named frames (inline frames count like any other). The thread is blocked in the
//! **outermost** frame of that run — the one the user (or the user's profiling library) called:
//!
//! * `main → MPI_Recv → mca_pml_ob1_recv → opal_progress → poll`: the run is `[MPI_Recv]`.
//! * a PMPI profiling wrapper, `main → MPI_Barrier (wrapper) → PMPI_Barrier → MPIR_Barrier_impl`:
//!   the run is `[PMPI_Barrier, MPI_Barrier]`, the call `MPI_Barrier`.
//! * Fortran over C, `MAIN__ → mpi_barrier_ → PMPI_Barrier → …`: the call is `mpi_barrier_`
//!   (canonical name `MPI_Barrier`).
//!
//! Taking the innermost run (not the outermost MPI frame of the stack) is what makes a callback
//! nested in MPI right: an error handler or user reduction run from inside `MPI_Allreduce` that
//! itself blocks in `MPI_Recv` is blocked in `MPI_Recv`, called from the handler. A profiling
//! wrapper that calls some of its own functions between `MPI_Send` and `PMPI_Send` is the price:
//! the call is `PMPI_Send` (canonical `MPI_Send`) and the call site is the wrapper's function.
//!
//! The **call site** is the first frame outside the run, going outward: the user's caller,
//! with its function, module+offset and file:line when known. It is `None` when the run is the
//! last frame read. In a thread running Python (its stack holds Python frames,
//! [`super::python`]), the user's caller is the innermost Python frame outward of the run:
//! the native frames between (a binding such as mpi4py's compiled code, the interpreter's
//! call machinery) are how Python reaches MPI, and the call site names the Python function,
//! file and line instead.
//!
//! # What is read, and what is not claimed
//!
//! Only frames found from the registers, call-frame information or frame pointers are read;
//! frames found by scanning the stack ([`Trust::Scan`]) may be garbage and end what is read,
//! as does a truncated stack or [`MAX_FRAMES_EXAMINED`]. A thread whose read frames contain an
//! MPI entry point is in MPI (the call site is `None` when the run reaches the end of what was
//! read). A thread whose read frames contain none is *outside MPI* only when its whole stack was
//! read; otherwise it is unknown — never claimed outside MPI from frames not read.
//!
//! # A rank
//!
//! [`classify_threads`] combines its threads. Runtime helper threads ([`builtin_helper`]) never
//! count (a thread with an MPI entry point is never a helper: the runtime's threads do not call
//! the MPI API). Then, in order: a thread in `MPI_Finalize` makes the rank
//! [`RankActivity::Finalizing`]; a thread in any other MPI call makes it
//! [`RankActivity::InMpi`] (the main thread's call when it is in one, else the first such
//! thread's); a thread whose stack was not fully read makes it [`RankActivity::Unknown`]; else
//! it is [`RankActivity::NotInMpi`]. No thread at all is `Unknown`. [`RankActivity::Finalized`]
//! and [`RankActivity::Exited`] are never inferred from stacks: a caller that knows them (the
//! process is gone, `MPI_Finalized` said so) sets them.

use std::fmt;

use super::{Frame, SourceLocation, ThreadStack, Trust, builtin_helper};

/// Names longer than this (in bytes) are never MPI entry points.
pub const MAX_ENTRY_NAME: usize = 96;
/// Frames of one thread examined at most; a longer stack is read only this far.
pub const MAX_FRAMES_EXAMINED: usize = 4096;
/// Longest function, module or file name a [`CallSite`] or [`BlockedCall`] keeps (in bytes,
/// cut at a character boundary).
pub const MAX_KEPT_NAME: usize = 512;

/// What kind of MPI call a thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum CallKind {
    /// A blocking collective operation, a collective that creates or frees communicators,
    /// windows or files, or a collective file access: every member of the communicator must
    /// make the same call.
    Collective,
    /// Blocking point-to-point: send modes, receive, sendrecv, probe.
    PointToPoint,
    /// Completion of requests: the wait and test families.
    Completion,
    /// `MPI_Init`, `MPI_Init_thread`.
    Init,
    /// `MPI_Finalize`.
    Finalize,
    /// Any other MPI procedure (nonblocking starts, queries, …).
    Other,
}

/// A frame as the report shows it: function, module+offset, file:line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CallSite {
    /// The function's name, when symbols have one.
    pub function: Option<String>,
    /// The module's path or name.
    pub module: String,
    /// The program counter's offset in the module.
    pub offset: u64,
    /// The source position, when known.
    pub location: Option<SourceLocation>,
}

impl CallSite {
    /// The call site of a frame (names cut to [`MAX_KEPT_NAME`]).
    pub fn of(frame: &Frame) -> Self {
        CallSite {
            function: frame.symbol.as_deref().map(bounded),
            module: bounded(&frame.module),
            offset: frame.offset,
            location: frame
                .location
                .as_ref()
                .map(|l| SourceLocation::new(bounded(&l.file), l.line)),
        }
    }
}

impl fmt::Display for CallSite {
    /// `function (file:line)`, else `module+0xoffset`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.function {
            Some(func) => f.write_str(func)?,
            None => {
                let base = self.module.rsplit('/').next().unwrap_or(&self.module);
                write!(f, "{base}+{:#x}", self.offset)?;
            }
        }
        if let Some(l) = &self.location {
            write!(f, " ({}:{})", l.file, l.line)?;
        }
        Ok(())
    }
}

/// The MPI call a thread is blocked in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BlockedCall {
    /// The call's C name (`MPI_Barrier` for `mpi_barrier_`, `PMPI_Barrier`, `MPI_BARRIER`,
    /// `mpi_barrier_f08`, `ompi_barrier_f`).
    pub call: String,
    /// The frame's own function name (cut to [`MAX_KEPT_NAME`]).
    pub symbol: String,
    /// What kind of call it is.
    pub kind: CallKind,
    /// The first frame outside the MPI frames, going outward; `None` when not read.
    pub call_site: Option<CallSite>,
    /// The thread.
    pub tid: u32,
    /// How many of the rank's threads are in MPI (at least 1).
    pub threads_in_mpi: u32,
}

impl fmt::Display for BlockedCall {
    /// `MPI_Recv at main (ring.c:12)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.call)?;
        match &self.call_site {
            Some(s) => write!(f, " at {s}"),
            None => f.write_str(" (caller not read)"),
        }
    }
}

/// Why a rank's activity is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum UnknownWhy {
    /// No stack at all (no thread, or only helper threads).
    NoStacks,
    /// A thread's stack was not read to its end and what was read shows no MPI frame.
    Truncated,
}

/// Where a rank is, as far as MPI is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RankActivity {
    /// A thread is inside an MPI call (other than `MPI_Finalize`).
    InMpi(BlockedCall),
    /// A thread is inside `MPI_Finalize`.
    Finalizing(BlockedCall),
    /// No thread is inside MPI: every thread's stack was read whole and shows no MPI entry
    /// point (computing, sleeping, exiting without `MPI_Finalize`). `at` is the main thread's
    /// innermost frame (else the first thread's), to tell a rank that stays put from one that
    /// computes.
    NotInMpi {
        /// The innermost frame of the main thread, when it has one.
        at: Option<CallSite>,
    },
    /// The rank has returned from `MPI_Finalize` (never inferred from stacks).
    Finalized,
    /// The process is gone (never inferred from stacks).
    Exited,
    /// Not known.
    Unknown(UnknownWhy),
}

impl RankActivity {
    /// The MPI call, when the rank is in one (`MPI_Finalize` included).
    pub fn blocked_call(&self) -> Option<&BlockedCall> {
        match self {
            RankActivity::InMpi(c) | RankActivity::Finalizing(c) => Some(c),
            _ => None,
        }
    }

    /// Whether the rank is known not to be waiting inside MPI: outside MPI, finalized or gone.
    pub fn is_not_waiting(&self) -> bool {
        matches!(
            self,
            RankActivity::NotInMpi { .. } | RankActivity::Finalized | RankActivity::Exited
        )
    }

    /// Whether the rank is known to be unable to take part in any communication again.
    pub fn is_finished(&self) -> bool {
        matches!(self, RankActivity::Finalized | RankActivity::Exited)
    }

    /// Whether the rank will never start another send or receive: finished, or inside
    /// `MPI_Finalize` (which the standard forbids to return to communication; what the rank
    /// already has pending may still complete). A wait on such a rank ends only through
    /// operations already pending.
    pub fn starts_nothing_more(&self) -> bool {
        self.is_finished() || matches!(self, RankActivity::Finalizing(_))
    }
}

impl fmt::Display for RankActivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankActivity::InMpi(c) => write!(f, "in {c}"),
            RankActivity::Finalizing(c) => write!(f, "finalizing: in {c}"),
            RankActivity::NotInMpi { at: Some(a) } => write!(f, "not inside MPI (at {a})"),
            RankActivity::NotInMpi { at: None } => f.write_str("not inside MPI"),
            RankActivity::Finalized => f.write_str("finalized"),
            RankActivity::Exited => f.write_str("exited"),
            RankActivity::Unknown(UnknownWhy::NoStacks) => f.write_str("unknown (no stacks)"),
            RankActivity::Unknown(UnknownWhy::Truncated) => {
                f.write_str("unknown (stacks not read to their end)")
            }
        }
    }
}

fn bounded(s: &str) -> String {
    if s.len() <= MAX_KEPT_NAME {
        return s.to_string();
    }
    let mut end = MAX_KEPT_NAME;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Blocking collectives and the collectives that create or free communicators, windows and
/// files (lowercase, without `mpi_`).
const COLLECTIVES: &[&str] = &[
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "exscan",
    "neighbor_allgather",
    "neighbor_allgatherv",
    "neighbor_alltoall",
    "neighbor_alltoallv",
    "neighbor_alltoallw",
    "comm_split",
    "comm_split_type",
    "comm_dup",
    "comm_dup_with_info",
    "comm_create",
    "comm_create_group",
    "comm_create_from_group",
    "comm_free",
    "comm_spawn",
    "comm_spawn_multiple",
    "comm_accept",
    "comm_connect",
    "intercomm_create",
    "intercomm_create_from_groups",
    "intercomm_merge",
    "cart_create",
    "cart_sub",
    "graph_create",
    "dist_graph_create",
    "dist_graph_create_adjacent",
    "win_create",
    "win_allocate",
    "win_allocate_shared",
    "win_create_dynamic",
    "win_fence",
    "win_free",
    "file_open",
    "file_close",
    "file_set_view",
    "file_set_size",
    "file_preallocate",
    "file_sync",
    "file_read_all",
    "file_write_all",
    "file_read_at_all",
    "file_write_at_all",
    "file_read_ordered",
    "file_write_ordered",
];

const POINT_TO_POINT: &[&str] = &[
    "send",
    "bsend",
    "ssend",
    "rsend",
    "recv",
    "sendrecv",
    "sendrecv_replace",
    "probe",
    "mprobe",
    "mrecv",
];

const COMPLETION: &[&str] = &[
    "wait", "waitall", "waitany", "waitsome", "test", "testall", "testany", "testsome",
];

/// The kind of a call given its lowercase name without `mpi_` (and without a large-count
/// `_c` suffix); `None` when this module does not know it.
fn known_kind(base: &str) -> Option<CallKind> {
    let base = base.strip_suffix("_c").unwrap_or(base);
    if COLLECTIVES.contains(&base) {
        Some(CallKind::Collective)
    } else if POINT_TO_POINT.contains(&base) {
        Some(CallKind::PointToPoint)
    } else if COMPLETION.contains(&base) {
        Some(CallKind::Completion)
    } else if base == "finalize" {
        Some(CallKind::Finalize)
    } else if base == "init" || base == "init_thread" {
        Some(CallKind::Init)
    } else {
        None
    }
}

/// An MPI entry point recognised in a function name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EntryPoint {
    /// The C name of the call (`MPI_Barrier`, `MPI_T_pvar_read`, `MPIX_…`).
    pub call: String,
    /// What kind of call it is.
    pub kind: CallKind,
}

/// Whether `name` is an MPI entry point (see the [module documentation](self)), and which.
///
/// ```
/// use mpir_types::stacks::{CallKind, mpi_entry_point};
/// for n in ["MPI_Barrier", "PMPI_Barrier", "mpi_barrier_", "mpi_barrier__", "MPI_BARRIER",
///           "pmpi_barrier_", "mpi_barrier_f08", "MPI_Barrier_f08", "ompi_barrier_f"] {
///     let e = mpi_entry_point(n).unwrap();
///     assert_eq!((e.call.as_str(), e.kind), ("MPI_Barrier", CallKind::Collective), "{n}");
/// }
/// assert!(mpi_entry_point("MPIR_Barrier_impl").is_none());
/// assert!(mpi_entry_point("ompi_coll_base_barrier_intra_basic_linear").is_none());
/// assert!(mpi_entry_point("mpich_progress").is_none());
/// assert_eq!(mpi_entry_point("ompi_mpi_finalize").unwrap().kind, CallKind::Finalize);
/// ```
pub fn mpi_entry_point(name: &str) -> Option<EntryPoint> {
    if name.len() > MAX_ENTRY_NAME || !name.is_ascii() {
        return None;
    }
    // Open MPI's `MPI_Init` and `MPI_Finalize` end in a tail call to these (ompi/mpi/c/init.c,
    // finalize.c: `return ompi_mpi_finalize();`): in an optimised build the entry point's frame
    // is gone and the body is the only frame of the call.
    match name {
        "ompi_mpi_finalize" => {
            return Some(EntryPoint {
                call: "MPI_Finalize".to_string(),
                kind: CallKind::Finalize,
            });
        }
        "ompi_mpi_init" => {
            return Some(EntryPoint {
                call: "MPI_Init".to_string(),
                kind: CallKind::Init,
            });
        }
        _ => {}
    }
    let lower = name.to_ascii_lowercase();
    let (rest, ompi) = if let Some(r) = lower.strip_prefix("ompi_") {
        (r, true)
    } else if let Some(r) = lower.strip_prefix("pmpix_") {
        (r, false)
    } else if let Some(r) = lower.strip_prefix("mpix_") {
        (r, false)
    } else if let Some(r) = lower.strip_prefix("pmpi_") {
        (r, false)
    } else if let Some(r) = lower.strip_prefix("mpi_") {
        (r, false)
    } else {
        return None;
    };
    let extension = !ompi && (lower.starts_with("mpix_") || lower.starts_with("pmpix_"));
    // The character after the prefix, as written: C names continue with a capital letter
    // (`MPI_Barrier`, `MPI_T_…`); lowercase forms are Fortran's (`mpi_barrier_`).
    let prefix_len = name.len() - rest.len();
    let first = name.as_bytes().get(prefix_len).copied()?;
    if !first.is_ascii_alphabetic() {
        return None;
    }
    if !rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let mut base = rest.trim_end_matches('_');
    let mut fortran_linker = false;
    for suffix in ["_f08ts", "_f08", "_fts", "_f"] {
        if let Some(b) = base.strip_suffix(suffix) {
            base = b;
            fortran_linker = true;
            break;
        }
    }
    if base.is_empty() {
        return None;
    }
    let kind = known_kind(base);
    if ompi && (!fortran_linker || kind.is_none()) {
        return None;
    }
    // C naming: a lowercase name (Fortran's) whose prefix was lowercase too is accepted; a
    // mixed-case C-looking name must start with a capital after the prefix, as the standard's
    // C names do (`MPI_barrier` is no binding).
    let prefix_written = name.get(..prefix_len)?;
    let c_style = prefix_written.bytes().any(|b| b.is_ascii_uppercase());
    let rest_written = name.get(prefix_len..)?;
    let mixed = rest_written.bytes().any(|b| b.is_ascii_uppercase())
        && rest_written.bytes().any(|b| b.is_ascii_lowercase());
    if c_style && !ompi && rest_written.bytes().any(|b| b.is_ascii_lowercase()) {
        // `MPI_Xxx` (C) or `MPI_XXX` (Fortran, all caps): the first letter is a capital.
        if !first.is_ascii_uppercase() {
            return None;
        }
    } else if !c_style && mixed {
        return None;
    }
    let call = canonical(base, extension);
    Some(EntryPoint {
        call,
        kind: kind.unwrap_or(CallKind::Other),
    })
}

/// The C name: `MPI_` + a capital + lowercase (`MPI_T_` + lowercase for the tool interface).
fn canonical(base: &str, extension: bool) -> String {
    let prefix = if extension { "MPIX_" } else { "MPI_" };
    let mut out = String::with_capacity(prefix.len() + base.len());
    out.push_str(prefix);
    if let Some(t) = base.strip_prefix("t_").filter(|_| !extension) {
        out.push_str("T_");
        out.push_str(t);
        return out;
    }
    let mut chars = base.chars();
    if let Some(c) = chars.next() {
        out.push(c.to_ascii_uppercase());
    }
    out.extend(chars);
    out
}

/// What one thread shows.
enum ThreadView {
    Helper,
    In(BlockedCall),
    Outside(Option<CallSite>),
    Unread,
}

fn view_thread(t: &ThreadStack, pid: Option<u32>) -> ThreadView {
    let mut read_all = t.truncated.is_none();
    let mut frames: &[Frame] = &t.frames;
    if frames.len() > MAX_FRAMES_EXAMINED {
        frames = frames.get(..MAX_FRAMES_EXAMINED).unwrap_or(&[]);
        read_all = false;
    }
    if let Some(scan) = frames.iter().position(|f| f.trust == Trust::Scan) {
        frames = frames.get(..scan).unwrap_or(&[]);
        read_all = false;
    }
    if frames.is_empty() {
        return ThreadView::Unread;
    }
    let entry = |f: &Frame| {
        (!f.is_python())
            .then_some(f.symbol.as_deref())
            .flatten()
            .and_then(mpi_entry_point)
    };
    let Some(inner) = frames.iter().position(|f| entry(f).is_some()) else {
        // No MPI frame: a helper by its frames (never the main thread), else outside MPI
        // when read whole.
        if builtin_helper(t, pid.unwrap_or(u32::MAX)).is_some() && Some(t.tid) != pid {
            return ThreadView::Helper;
        }
        return if read_all {
            ThreadView::Outside(frames.first().map(CallSite::of))
        } else {
            ThreadView::Unread
        };
    };
    let mut outer = inner;
    let mut outer_entry = None;
    for (i, f) in frames.iter().enumerate().skip(inner) {
        match entry(f) {
            Some(e) => {
                outer = i;
                outer_entry = Some(e);
            }
            None => break,
        }
    }
    let Some(e) = outer_entry else {
        return ThreadView::Unread;
    };
    let frame = frames.get(outer);
    ThreadView::In(BlockedCall {
        call: e.call,
        symbol: frame
            .and_then(|f| f.symbol.as_deref())
            .map(bounded)
            .unwrap_or_default(),
        kind: e.kind,
        call_site: frames
            .iter()
            .skip(outer + 1)
            .find(|f| f.is_python())
            .or_else(|| frames.get(outer + 1))
            .map(CallSite::of),
        tid: t.tid,
        threads_in_mpi: 1,
    })
}

/// The part of a thread's stack outside MPI: the frames from the MPI call it is blocked in
/// outward (that call's frame included), without the frames inside it — the MPI library's
/// progress engine, which polls and so differs from one sample to the next while the call
/// never returns. A thread in no MPI call is returned whole. What "did not move" compares for
/// a rank in MPI (as the hang analysis's confirmation compares the call and its call site).
pub fn outside_mpi(thread: &ThreadStack) -> ThreadStack {
    let examined = thread.frames.len().min(MAX_FRAMES_EXAMINED);
    let entry = |f: &Frame| f.symbol.as_deref().and_then(mpi_entry_point).is_some();
    let frames = thread.frames.get(..examined).unwrap_or(&[]);
    let Some(inner) = frames.iter().position(entry) else {
        return thread.clone();
    };
    let outer = frames
        .iter()
        .skip(inner)
        .take_while(|f| entry(f))
        .count()
        .saturating_sub(1)
        + inner;
    let mut out = thread.clone();
    out.frames = thread.frames.get(outer..).unwrap_or(&[]).to_vec();
    out
}

/// A rank's activity from its threads' stacks (each innermost first); `pid` is the process
/// id, which names the main thread (tid = pid) when known. See the [module
/// documentation](self) for the rules.
pub fn classify_threads(threads: &[ThreadStack], pid: Option<u32>) -> RankActivity {
    let mut in_mpi: Vec<BlockedCall> = Vec::new();
    let mut unread = false;
    let mut outside = None;
    let mut any = false;
    for t in threads {
        match view_thread(t, pid) {
            ThreadView::Helper => {}
            ThreadView::In(c) => {
                any = true;
                in_mpi.push(c);
            }
            ThreadView::Outside(at) => {
                any = true;
                if Some(t.tid) == pid || outside.is_none() {
                    outside = Some(at);
                }
            }
            ThreadView::Unread => {
                any = true;
                unread = true;
            }
        }
    }
    let count = u32::try_from(in_mpi.len()).unwrap_or(u32::MAX);
    let chosen = in_mpi
        .iter()
        .position(|c| c.kind == CallKind::Finalize)
        .or_else(|| in_mpi.iter().position(|c| Some(c.tid) == pid))
        .or(if in_mpi.is_empty() { None } else { Some(0) });
    if let Some(i) = chosen
        && i < in_mpi.len()
    {
        let mut call = in_mpi.swap_remove(i);
        call.threads_in_mpi = count;
        return if call.kind == CallKind::Finalize {
            RankActivity::Finalizing(call)
        } else {
            RankActivity::InMpi(call)
        };
    }
    match (any, unread, outside) {
        (false, _, _) => RankActivity::Unknown(UnknownWhy::NoStacks),
        (true, true, _) => RankActivity::Unknown(UnknownWhy::Truncated),
        (true, false, at) => RankActivity::NotInMpi { at: at.flatten() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_mpi_drops_the_frames_inside_the_call_only() {
        let f = |n: &str| Frame::new("/lib/libmpi.so", 0x10, Trust::Cfi).with_symbol(n);
        let t = ThreadStack::new(
            7,
            vec![
                f("poll"),
                f("opal_progress"),
                f("PMPI_Recv"),
                f("main"),
                f("_start"),
            ],
        );
        let out = outside_mpi(&t);
        let names: Vec<_> = out
            .frames
            .iter()
            .filter_map(|f| f.symbol.as_deref())
            .collect();
        assert_eq!(names, ["PMPI_Recv", "main", "_start"]);
        // A PMPI wrapper: the outermost frame of the run is kept.
        let t = ThreadStack::new(
            7,
            vec![f("poll"), f("PMPI_Barrier"), f("MPI_Barrier"), f("main")],
        );
        let names: Vec<_> = outside_mpi(&t)
            .frames
            .iter()
            .filter_map(|f| f.symbol.as_deref())
            .map(str::to_string)
            .collect();
        assert_eq!(names, ["MPI_Barrier", "main"]);
        // Not in MPI: whole.
        let t = ThreadStack::new(7, vec![f("pause"), f("main")]);
        assert_eq!(outside_mpi(&t), t);
    }

    #[test]
    fn names_the_standard_fixes() {
        let yes = [
            ("MPI_Recv", "MPI_Recv", CallKind::PointToPoint),
            ("PMPI_Allreduce", "MPI_Allreduce", CallKind::Collective),
            ("mpi_allreduce__", "MPI_Allreduce", CallKind::Collective),
            ("pmpi_allreduce_", "MPI_Allreduce", CallKind::Collective),
            ("MPI_ALLREDUCE", "MPI_Allreduce", CallKind::Collective),
            ("mpi_allreduce", "MPI_Allreduce", CallKind::Collective),
            ("mpi_comm_split_f08", "MPI_Comm_split", CallKind::Collective),
            ("mpi_barrier_f08_", "MPI_Barrier", CallKind::Collective),
            ("pmpi_barrier_f08_", "MPI_Barrier", CallKind::Collective),
            ("MPI_Barrier_f", "MPI_Barrier", CallKind::Collective),
            ("PMPI_Status_c2f08", "MPI_Status_c2f08", CallKind::Other),
            ("MPI_Send_f08ts", "MPI_Send", CallKind::PointToPoint),
            ("MPI_Waitall", "MPI_Waitall", CallKind::Completion),
            ("MPI_Bcast_c", "MPI_Bcast_c", CallKind::Collective),
            ("MPI_Finalize", "MPI_Finalize", CallKind::Finalize),
            ("mpi_init_thread_", "MPI_Init_thread", CallKind::Init),
            ("MPI_Comm_rank", "MPI_Comm_rank", CallKind::Other),
            ("MPI_Ibarrier", "MPI_Ibarrier", CallKind::Other),
            ("MPI_T_pvar_read", "MPI_T_pvar_read", CallKind::Other),
            ("MPIX_Comm_agree", "MPIX_Comm_agree", CallKind::Other),
            ("ompi_recv_f", "MPI_Recv", CallKind::PointToPoint),
        ];
        for (name, call, kind) in yes {
            let e = mpi_entry_point(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!((e.call.as_str(), e.kind), (call, kind), "{name}");
        }
        let no = [
            "MPIR_Barrier_impl",
            "MPID_Progress_wait",
            "MPIDI_CH3I_Progress",
            "MPII_Comm_init",
            "ompi_coll_base_barrier_intra_bruck",
            "ompi_mpi_finalize_",
            "ompi_mpi_initialized",
            "ompi_comm_split_f2",
            "ompi_info_f",
            "mca_pml_ob1_recv",
            "opal_progress",
            "MPI_barrier",
            "mpi_Barrier",
            "MPI_",
            "MPI__",
            "MPI_1x",
            "my_MPI_Recv",
            "MPI_Recv.cold",
            "_ZN3mpi4Comm4SendEv",
        ];
        for name in no {
            assert!(mpi_entry_point(name).is_none(), "{name}");
        }
        assert!(mpi_entry_point(&format!("MPI_{}", "x".repeat(10_000))).is_none());
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let s = "é".repeat(MAX_KEPT_NAME);
        let b = bounded(&s);
        assert!(b.len() <= MAX_KEPT_NAME + '…'.len_utf8());
        assert!(b.ends_with('…'));
    }
}
