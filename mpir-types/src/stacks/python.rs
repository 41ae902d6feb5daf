//! Python frames in native stacks: the frames a CPython interpreter runs, read from its memory
//! (by `mpir-target`'s `python` module), put in place of the interpreter's evaluation frames.
//!
//! CPython runs Python code in `_PyEval_EvalFrameDefault`. Each native call of it runs one or
//! more Python frames:
//!
//! * 3.9 and 3.10: exactly one (each `PyFrameObject` is evaluated by its own call);
//! * 3.11: the frame it was called with and the Python-to-Python calls it made without
//!   recursing in C (the first is marked `is_entry`);
//! * 3.12 and 3.13: the same, the first sitting on a marker frame owned by the C stack.
//!
//! The reader gives each thread's frames innermost first with [`PythonFrame::ends_call`] set on
//! the last frame of each native call, so the chain splits into one group per native
//! evaluation frame, in the same order as the native stack's `_PyEval_EvalFrameDefault`
//! frames. [`interleave`] puts each group where its native frame is.
//!
//! A stack whose groups and native evaluation frames do not pair up is left native, with the
//! problem said ([`PythonProblem::NotMatched`]): no Python frame is ever shown at a place it
//! was not run from. When the native stack was cut short (its outer part not read), the
//! groups beyond the native frames read are put at its outer end, in order.

use std::fmt;
use std::sync::Arc;

use super::{Frame, ThreadStack};

/// The native function that runs Python frames, in every CPython version read (3.9–3.13).
pub const EVAL_FUNCTION: &str = "_PyEval_EvalFrameDefault";

/// One Python frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PythonFrame {
    /// The function's qualified name (`Ring.step`; `<module>` for a module's body).
    pub function: Arc<str>,
    /// The file its code object names (`co_filename`).
    pub file: Arc<str>,
    /// The line being run (1-based; 0 when the line table has none for the instruction).
    pub line: u32,
    /// Whether this frame is the first one a native evaluation call ran: the outermost of its
    /// call's group.
    pub ends_call: bool,
}

impl PythonFrame {
    /// Frame `function` of `file` at `line`.
    pub fn new(
        function: impl Into<Arc<str>>,
        file: impl Into<Arc<str>>,
        line: u32,
        ends_call: bool,
    ) -> Self {
        PythonFrame {
            function: function.into(),
            file: file.into(),
            line,
            ends_call,
        }
    }
}

/// Why Python frames were not read, or not all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PythonProblem {
    /// The interpreter's version has no known layout.
    UnknownVersion {
        /// The version found, as text (`3.14`, `older than 3.9`).
        found: String,
    },
    /// The layout of the version found did not decode the interpreter's own objects: not a
    /// build this reader knows (free-threaded, debug), or memory not the interpreter's.
    Unproven {
        /// The version whose layout was tried.
        version: String,
        /// The check that failed.
        why: String,
    },
    /// Memory the interpreter's state points to could not be read.
    Unreadable {
        /// What was being read.
        what: String,
        /// Where.
        address: u64,
    },
    /// A value read is not what the interpreter keeps there.
    Corrupt {
        /// What was read.
        what: String,
        /// Where.
        address: u64,
        /// What is wrong with it.
        why: String,
    },
    /// The frame chain loops.
    Cycle {
        /// The frame met twice.
        address: u64,
    },
    /// More frames than the reader's limit.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The Python frames' native calls do not pair with the native stack's evaluation frames.
    NotMatched {
        /// Native evaluation calls the Python frames name.
        python_calls: usize,
        /// `_PyEval_EvalFrameDefault` frames in the native stack.
        native_calls: usize,
    },
}

impl fmt::Display for PythonProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PythonProblem::UnknownVersion { found } => {
                write!(f, "CPython {found} has no known layout (3.9–3.13 are read)")
            }
            PythonProblem::Unproven { version, why } => write!(
                f,
                "the CPython {version} layout does not fit this interpreter: {why}"
            ),
            PythonProblem::Unreadable { what, address } => {
                write!(f, "cannot read {what} at {address:#x}")
            }
            PythonProblem::Corrupt { what, address, why } => {
                write!(f, "{what} at {address:#x}: {why}")
            }
            PythonProblem::Cycle { address } => {
                write!(f, "the frame chain loops (frame {address:#x} met twice)")
            }
            PythonProblem::TooDeep { limit } => write!(f, "more than {limit} Python frames"),
            PythonProblem::NotMatched {
                python_calls,
                native_calls,
            } => write!(
                f,
                "{python_calls} Python evaluation calls against {native_calls} native \
                 {EVAL_FUNCTION} frames: native frames kept"
            ),
        }
    }
}

/// One thread's Python frames.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PythonStack {
    /// The thread (Linux tid).
    pub tid: u32,
    /// Innermost first.
    pub frames: Vec<PythonFrame>,
    /// Why the chain stops before its outermost frame, when it does (the frames are those read
    /// before).
    pub problem: Option<PythonProblem>,
}

impl PythonStack {
    /// The frames of thread `tid`, innermost first.
    pub fn new(tid: u32, frames: Vec<PythonFrame>) -> Self {
        PythonStack {
            tid,
            frames,
            problem: None,
        }
    }

    /// Stopping early for `problem`.
    pub fn with_problem(mut self, problem: PythonProblem) -> Self {
        self.problem = Some(problem);
        self
    }

    /// The frames split into one group per native evaluation call, innermost first; a last
    /// group whose outermost frame is not marked (the chain was cut) is kept as a group.
    pub fn calls(&self) -> Vec<&[PythonFrame]> {
        let mut groups = Vec::new();
        let mut start = 0;
        for (i, f) in self.frames.iter().enumerate() {
            if f.ends_call {
                groups.push(self.frames.get(start..=i).unwrap_or(&[]));
                start = i + 1;
            }
        }
        if start < self.frames.len() {
            groups.push(self.frames.get(start..).unwrap_or(&[]));
        }
        groups
    }
}

/// How Python frames are shown in a native stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PythonView {
    /// Python frames in place of the interpreter's frames that run them: each evaluation frame
    /// becomes its Python frames, and the interpreter's own frames between the outermost
    /// evaluation frame and the stack's innermost frame (its call machinery, the functions
    /// of its built-in modules) are left out. Frames of other modules (extension modules such
    /// as mpi4py's, the MPI library, the C library) stay.
    #[default]
    Interleaved,
    /// Every native frame kept; each evaluation frame preceded by the Python frames it runs.
    WithNative,
}

/// `stack` with `python`'s frames in place of its evaluation frames, as `view` says.
/// `interpreter` is the path of the module that holds the interpreter (the executable or
/// `libpython3.X.so`): its frames are the ones [`PythonView::Interleaved`] leaves out.
///
/// Returns the stack unchanged, with the problem, when the calls do not pair up
/// ([`PythonProblem::NotMatched`]). A stack with no evaluation frame and no Python frame is
/// returned as is.
pub fn interleave(
    mut stack: ThreadStack,
    python: &PythonStack,
    view: PythonView,
    interpreter: &str,
) -> (ThreadStack, Option<PythonProblem>) {
    let is_eval = |f: &Frame| !f.is_python() && f.symbol.as_deref() == Some(EVAL_FUNCTION);
    let evals: Vec<usize> = stack
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| is_eval(f))
        .map(|(i, _)| i)
        .collect();
    let calls = python.calls();
    if calls.is_empty() && evals.is_empty() {
        return (stack, None);
    }
    // The native stack read whole must pair one to one; one cut short may hold fewer
    // evaluation frames than there are calls (the outer ones were not read).
    let cut = stack.truncated.is_some();
    let paired = calls.len() == evals.len() || (cut && evals.len() < calls.len());
    if !paired || evals.is_empty() {
        let problem = PythonProblem::NotMatched {
            python_calls: calls.len(),
            native_calls: evals.len(),
        };
        return (stack, Some(problem));
    }
    let outermost_eval = evals.last().copied().unwrap_or(0);
    // Python frames carry the trust of the native frame that runs them (the last native
    // frame's, for calls past the native frames read).
    fn as_frames(group: &[PythonFrame], trust: super::Trust) -> impl Iterator<Item = Frame> + '_ {
        group
            .iter()
            .map(move |p| Frame::python(p.function.clone(), p.file.clone(), p.line, trust))
    }
    let native = std::mem::take(&mut stack.frames);
    let last_trust = native.last().map_or(super::Trust::Cfi, |f| f.trust);
    let mut frames = Vec::with_capacity(native.len() + python.frames.len());
    let mut next_call = calls.iter();
    for (i, f) in native.into_iter().enumerate() {
        if is_eval(&f) {
            if let Some(group) = next_call.next() {
                frames.extend(as_frames(group, f.trust));
            }
            if view == PythonView::WithNative {
                frames.push(f);
            }
            continue;
        }
        let inside = i < outermost_eval && &*f.module == interpreter;
        if view == PythonView::Interleaved && inside {
            continue;
        }
        frames.push(f);
    }
    // Calls beyond the native frames read: at the outer end, in order.
    for group in next_call {
        frames.extend(as_frames(group, last_trust));
    }
    stack.frames = frames;
    (stack, None)
}

/// What the ranks' Python interpreters said, grouped for a report: each distinct problem (a
/// rank's, or one of its threads') with the ranks that have it, in the order first met; and
/// each version read with its ranks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PythonSummary {
    /// Versions read (`3.11`) and the ranks running each.
    pub versions: Vec<(String, crate::ranks::RankSet)>,
    /// Each problem's text and the ranks it was met in.
    pub problems: Vec<(String, crate::ranks::RankSet)>,
}

impl PythonSummary {
    /// The summary of `ranks`.
    pub fn of(ranks: &[super::RankStacks]) -> Self {
        fn add(list: &mut Vec<(String, crate::ranks::RankSet)>, key: String, rank: u64) {
            let one = crate::ranks::RankSet::from_ranks([rank]);
            match list.iter_mut().find(|(k, _)| *k == key) {
                Some((_, set)) => *set = set.union(&one),
                None => list.push((key, one)),
            }
        }
        let mut out = PythonSummary::default();
        for r in ranks {
            let Some(py) = &r.python else { continue };
            if let Some(v) = &py.version {
                add(&mut out.versions, v.clone(), r.rank);
            }
            if let Some(p) = &py.problem {
                add(&mut out.problems, p.to_string(), r.rank);
            }
            for t in &r.threads {
                if let Some(p) = &t.python_problem {
                    add(&mut out.problems, p.to_string(), r.rank);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{Truncation, Trust};

    const PY: &str = "/usr/bin/python3.11";

    fn native(names: &[(&str, &str)]) -> ThreadStack {
        ThreadStack::new(
            7,
            names
                .iter()
                .map(|(m, n)| Frame::new(*m, 0x10, Trust::Cfi).with_symbol(*n))
                .collect(),
        )
    }

    fn labels(t: &ThreadStack) -> Vec<String> {
        t.frames
            .iter()
            .map(|f| match &f.location {
                Some(l) if f.is_python() => format!("{}@{}", f.function_label(), l.line),
                _ => f.function_label(),
            })
            .collect()
    }

    fn ring_stack() -> ThreadStack {
        native(&[
            ("/lib/libc.so.6", "poll"),
            ("/lib/libmpi.so.40", "PMPI_Recv"),
            ("/site/mpi4py/MPI.so", "__pyx_pw_recv"),
            (PY, "cfunction_vectorcall"),
            (PY, EVAL_FUNCTION),
            (PY, "_PyFunction_Vectorcall"),
            (PY, EVAL_FUNCTION),
            (PY, "PyEval_EvalCode"),
            (PY, "main"),
            ("/lib/libc.so.6", "__libc_start_main"),
        ])
    }

    fn ring_python() -> PythonStack {
        PythonStack::new(
            7,
            vec![
                PythonFrame::new("recv_left", "ring.py", 12, false),
                PythonFrame::new("step", "ring.py", 20, true),
                PythonFrame::new("<module>", "ring.py", 30, true),
            ],
        )
    }

    #[test]
    fn calls_split_at_the_frames_that_end_them() {
        let p = ring_python();
        let calls = p.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].len(), 2);
        assert_eq!(&*calls[1][0].function, "<module>");
        // A cut chain's last frames form a group of their own.
        let cut = PythonStack::new(1, vec![PythonFrame::new("f", "a.py", 1, false)]);
        assert_eq!(cut.calls().len(), 1);
    }

    #[test]
    fn interleaved_replaces_evaluation_frames_and_drops_the_interpreter_inside() {
        let (out, problem) = interleave(ring_stack(), &ring_python(), PythonView::Interleaved, PY);
        assert_eq!(problem, None);
        assert_eq!(
            labels(&out),
            [
                "poll",
                "PMPI_Recv",
                "__pyx_pw_recv",
                "recv_left@12",
                "step@20",
                "<module>@30",
                "PyEval_EvalCode",
                "main",
                "__libc_start_main"
            ]
        );
        assert!(out.frames[3].is_python());
        assert_eq!(
            out.frames[3].location.as_ref().unwrap().file.as_ref(),
            "ring.py"
        );
    }

    #[test]
    fn with_native_keeps_every_native_frame() {
        let (out, problem) = interleave(ring_stack(), &ring_python(), PythonView::WithNative, PY);
        assert_eq!(problem, None);
        assert_eq!(
            labels(&out),
            [
                "poll",
                "PMPI_Recv",
                "__pyx_pw_recv",
                "cfunction_vectorcall",
                "recv_left@12",
                "step@20",
                EVAL_FUNCTION,
                "_PyFunction_Vectorcall",
                "<module>@30",
                EVAL_FUNCTION,
                "PyEval_EvalCode",
                "main",
                "__libc_start_main"
            ]
        );
    }

    #[test]
    fn calls_that_do_not_pair_leave_the_stack_native() {
        let mut python = ring_python();
        python.frames[0].ends_call = true; // three calls against two native frames
        let (out, problem) = interleave(ring_stack(), &python, PythonView::Interleaved, PY);
        assert_eq!(out, ring_stack());
        assert_eq!(
            problem,
            Some(PythonProblem::NotMatched {
                python_calls: 3,
                native_calls: 2
            })
        );
        // Python frames with no evaluation frame at all: native kept too.
        let plain = native(&[("/lib/libc.so.6", "poll")]);
        let (out, problem) = interleave(plain.clone(), &ring_python(), PythonView::Interleaved, PY);
        assert_eq!(out, plain);
        assert!(problem.is_some());
        // Neither: nothing to say.
        let empty = PythonStack::new(7, Vec::new());
        assert_eq!(
            interleave(plain.clone(), &empty, PythonView::Interleaved, PY),
            (plain.clone(), None)
        );
    }

    #[test]
    fn a_cut_native_stack_gets_the_outer_calls_at_its_end() {
        let mut stack = ring_stack();
        stack.frames.truncate(5); // up to the first evaluation frame
        let stack = stack.with_truncation(Truncation::UnreadableStack);
        let (out, problem) = interleave(stack, &ring_python(), PythonView::Interleaved, PY);
        assert_eq!(problem, None);
        assert_eq!(
            labels(&out),
            [
                "poll",
                "PMPI_Recv",
                "__pyx_pw_recv",
                "recv_left@12",
                "step@20",
                "<module>@30"
            ]
        );
        assert!(out.truncated.is_some());
    }

    #[test]
    fn problems_read_as_sentences() {
        let p = PythonProblem::UnknownVersion {
            found: "3.14".into(),
        };
        assert_eq!(
            p.to_string(),
            "CPython 3.14 has no known layout (3.9–3.13 are read)"
        );
        assert!(
            PythonProblem::Cycle { address: 0x10 }
                .to_string()
                .contains("0x10")
        );
    }
}
