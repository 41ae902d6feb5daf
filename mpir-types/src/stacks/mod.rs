//! Stack traces of every rank, merged like STAT: a call-prefix tree whose nodes carry the set of
//! ranks whose stacks pass through them.
//!
//! No I/O: an unwinder (in `mpir-target`) produces a [`RankStacks`] per rank; this module merges
//! them into a [`StackTree`], compares samples, groups ranks with identical stacks, and renders
//! text, Graphviz (STAT's 2D `.dot` layout) and folded stacks for flamegraph tools. With the
//! `serde` feature a tree has a JSON form ([`TreeDocument`], schema `mpir.stacks/2`) whose
//! decoder ([`StackTree::from_document`]) checks every bound before building anything.
//!
//! * **Order of frames.** [`ThreadStack::frames`] is innermost first (frame 0 is where the
//!   thread is executing), as an unwinder produces them and as gdb's `bt` prints them. The
//!   tree's root is the outermost frame's parent, so the tree reads from `_start` downwards.
//! * **Node identity.** A node is a frame's function: its symbol name, else `module+offset`;
//!   with [`MergeKey::FunctionAndLine`] also its source file and line ([`NodeKey`]).
//! * **Rank sets** ([`RankSet`](crate::ranks::RankSet)) are sorted inclusive ranges, so a node that a million consecutive ranks pass
//!   through holds one range; [`StackNode::ranks`] returns one.
//! * **Merging** ([`StackTree::merge`]) is associative and commutative while no limit cuts the
//!   result, so per-rank trees can be merged in any grouping (on each node, then up a tree of
//!   agents) and give the tree built from all ranks at once. [`TreeLimits`] bound the depth
//!   and the node count; what a limit dropped is reported in [`StackTree::cut`].
//! * **Helper threads** (progress threads of libevent, PMIx, UCX, Open MPI, MPICH) are folded
//!   into one labelled node per kind by [`HelperFolding::BuiltIn`], a heuristic on frame names
//!   only; [`HelperFolding::Off`] unfolds them.
//!
//! ## Example
//!
//! ```
//! use mpir_types::stacks::{Frame, RankStacks, StackTree, ThreadStack, TreeOptions, Trust};
//!
//! // Innermost frame first.
//! let stack = |names: &[&str]| {
//!     let frames = names
//!         .iter()
//!         .map(|n| Frame::new("/bin/app", 0x1000, Trust::Cfi).with_symbol(*n))
//!         .collect();
//!     ThreadStack::new(1, frames)
//! };
//! let ranks: Vec<RankStacks> = (0..4)
//!     .map(|rank| {
//!         let leaf = if rank == 3 { "MPI_Reduce" } else { "MPI_Barrier" };
//!         RankStacks::new(rank, 100 + rank as u32, vec![stack(&[leaf, "main", "_start"])])
//!     })
//!     .collect();
//! let tree = StackTree::build(&ranks, &[], &TreeOptions::default());
//! let text = tree.to_text();
//! assert!(text.contains("MPI_Barrier [0-2]"), "{text}");
//! assert!(text.contains("MPI_Reduce [3]"), "{text}");
//! assert!(tree.to_folded().contains("_start;main;MPI_Barrier 3"));
//! assert_eq!(tree.classes().len(), 2);
//! ```

mod analysis;
mod document;
mod helpers;
pub mod mpi_frames;
pub mod python;
mod ranges;
mod render;
mod tree;

pub use analysis::{EquivalenceClass, StackDiff, diff, unmoved};
pub use document::{
    DecodeLimits, DocumentNode, SCHEMA, TreeDecodeError, TreeDocument, TruncatedRanks,
};
pub use helpers::{BUILT_IN_HELPERS, HelperSignature, builtin_helper};
pub use mpi_frames::{
    BlockedCall, CallKind, CallSite, EntryPoint, MAX_ENTRY_NAME, MAX_FRAMES_EXAMINED,
    MAX_KEPT_NAME, RankActivity, UnknownWhy, classify_threads, mpi_entry_point, outside_mpi,
};
pub use python::{PythonFrame, PythonProblem, PythonStack, PythonSummary, PythonView, interleave};
pub use tree::{
    Cut, HelperFolding, MergeError, MergeKey, NodeId, NodeKey, NodeKind, StackNode, StackTree,
    TreeLimits, TreeOptions, TreeView,
};

use std::fmt;
use std::sync::Arc;

/// How a frame was found, most trusted first (as minidump's `FrameTrust`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Trust {
    /// From the thread's registers (the innermost frame).
    Context,
    /// Unwound with call-frame information (`.eh_frame`, `.debug_frame`).
    Cfi,
    /// Unwound by following the frame-pointer chain.
    FramePointer,
    /// Restored from the register context a signal frame saved (x86_64's `__restore_rt`
    /// `ucontext`, read when no CFI describes the trampoline): the interrupted code's own
    /// registers, exact but found without unwind information.
    SignalContext,
    /// Found by scanning the stack for a plausible return address; may be wrong.
    Scan,
}

/// A source position.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SourceLocation {
    /// The source file as debug information names it.
    pub file: Arc<str>,
    /// The line (1-based; 0 when unknown).
    pub line: u32,
}

impl SourceLocation {
    /// `file:line`.
    pub fn new(file: impl Into<Arc<str>>, line: u32) -> Self {
        SourceLocation {
            file: file.into(),
            line,
        }
    }
}

/// One frame of a thread's stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Frame {
    /// The module (shared object or executable) path or name.
    pub module: Arc<str>,
    /// The program counter's offset in the module.
    pub offset: u64,
    /// The function's name, when symbols have one.
    pub symbol: Option<Arc<str>>,
    /// The source position, when debug information has one.
    pub location: Option<SourceLocation>,
    /// Whether this frame is a function inlined into the next (outer) frame. Trees do not
    /// tell inlined frames apart: an inlined function is a node like any other.
    pub inline: bool,
    /// How the frame was found. A Python frame has the trust of the interpreter's native
    /// frame that runs it.
    pub trust: Trust,
    /// A machine-code frame, or a frame of an interpreted language that a native frame runs
    /// ([`python`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub language: Language,
}

/// What a frame is a frame of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Language {
    /// Machine code: module, offset, symbol and source position from the image.
    #[default]
    Native,
    /// A CPython function: [`Frame::symbol`] its qualified name, [`Frame::location`] its
    /// file and line, [`Frame::module`] the file, [`Frame::offset`] the line.
    Python,
}

impl Frame {
    /// A frame at `offset` in `module`, without symbol or source position.
    pub fn new(module: impl Into<Arc<str>>, offset: u64, trust: Trust) -> Self {
        Frame {
            module: module.into(),
            offset,
            symbol: None,
            location: None,
            inline: false,
            trust,
            language: Language::Native,
        }
    }

    /// A Python frame: function `function` of `file`, at `line` (0 when unknown), found with
    /// the trust of the native frame running it.
    pub fn python(
        function: impl Into<Arc<str>>,
        file: impl Into<Arc<str>>,
        line: u32,
        trust: Trust,
    ) -> Self {
        let file = file.into();
        Frame {
            module: file.clone(),
            offset: u64::from(line),
            symbol: Some(function.into()),
            location: Some(SourceLocation { file, line }),
            inline: false,
            trust,
            language: Language::Python,
        }
    }

    /// Whether this is a Python frame.
    pub fn is_python(&self) -> bool {
        self.language == Language::Python
    }

    /// With a function name.
    pub fn with_symbol(mut self, symbol: impl Into<Arc<str>>) -> Self {
        self.symbol = Some(symbol.into());
        self
    }

    /// With a source position.
    pub fn with_location(mut self, location: SourceLocation) -> Self {
        self.location = Some(location);
        self
    }

    /// Marked as inlined into the next (outer) frame.
    pub fn inlined(mut self) -> Self {
        self.inline = true;
        self
    }

    /// The function's name, else `module+0xoffset` (module's file name only).
    pub fn function_label(&self) -> String {
        match &self.symbol {
            Some(s) => s.to_string(),
            None => {
                let base = self.module.rsplit('/').next().unwrap_or(&self.module);
                format!("{base}+{:#x}", self.offset)
            }
        }
    }
}

/// Why a thread's stack stops before its outermost frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Truncation {
    /// The unwinder's frame limit.
    FrameLimit,
    /// The stack pointer or a frame pointed into memory that could not be read.
    UnreadableStack,
    /// No unwind information and no usable fallback.
    NoUnwindInfo,
    /// The frame chain looped.
    Cycle,
    /// Anything else, as text.
    Other(String),
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Truncation::FrameLimit => f.write_str("frame limit reached"),
            Truncation::UnreadableStack => f.write_str("stack memory unreadable"),
            Truncation::NoUnwindInfo => f.write_str("no unwind information"),
            Truncation::Cycle => f.write_str("frame chain loops"),
            Truncation::Other(s) => f.write_str(s),
        }
    }
}

/// One thread's stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ThreadStack {
    /// The thread id (Linux tid).
    pub tid: u32,
    /// The thread's name (`comm`), when known.
    pub name: Option<String>,
    /// The frames, **innermost first**.
    pub frames: Vec<Frame>,
    /// Why the stack stops early, if it does (the last frame is the last one found).
    pub truncated: Option<Truncation>,
    /// Why the thread's Python frames are missing or incomplete, when the rank runs Python
    /// and they are ([`python`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub python_problem: Option<PythonProblem>,
}

impl ThreadStack {
    /// A complete stack of thread `tid`; `frames` innermost first.
    pub fn new(tid: u32, frames: Vec<Frame>) -> Self {
        ThreadStack {
            tid,
            name: None,
            frames,
            truncated: None,
            python_problem: None,
        }
    }

    /// With the thread's name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Marked as stopping early, for `reason`.
    pub fn with_truncation(mut self, reason: Truncation) -> Self {
        self.truncated = Some(reason);
        self
    }
}

/// Every thread's stack of one rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RankStacks {
    /// The MPI rank.
    pub rank: u64,
    /// The process id.
    pub pid: u32,
    /// The threads; the main thread is the one whose tid equals `pid`.
    pub threads: Vec<ThreadStack>,
    /// The Python interpreter the rank runs, when it runs one: its version and what kept
    /// its frames from being read.
    #[cfg_attr(feature = "serde", serde(default))]
    pub python: Option<PythonRead>,
}

/// What was read of a rank's Python interpreter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PythonRead {
    /// The interpreter's version (`3.11`), when known.
    pub version: Option<String>,
    /// Why no thread's Python frames were read, when none were.
    pub problem: Option<PythonProblem>,
}

impl PythonRead {
    /// Version `version` read, with `problem` if the frames were not.
    pub fn new(version: Option<String>, problem: Option<PythonProblem>) -> Self {
        PythonRead { version, problem }
    }
}

impl RankStacks {
    /// The stacks of `rank` (process `pid`).
    pub fn new(rank: u64, pid: u32, threads: Vec<ThreadStack>) -> Self {
        RankStacks {
            rank,
            pid,
            threads,
            python: None,
        }
    }
}

/// Why a rank has no stacks: the one "not read" vocabulary ([`crate::unread`]).
pub use crate::unread::{NotRead, ReasonCode};

/// A rank without stacks, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Unreached {
    /// The MPI rank.
    pub rank: u64,
    /// Why it has no stacks.
    pub reason: NotRead,
}

impl Unreached {
    /// Rank `rank`, unreached for `reason`.
    pub fn new(rank: u64, reason: NotRead) -> Self {
        Unreached { rank, reason }
    }
}
