//! Python frames in the session's stacks: each rank's CPython interpreter, found once per
//! target ([`ImageTarget::python`]), its frames read while the rank is stopped (its snapshot,
//! its hold, or from its core), and put in place of the interpreter's evaluation frames
//! ([`interleave`]).

use mpir_target::python::Interpreter;
use mpir_target::unwind::Registers;
use mpir_target::{ImageTarget, Memory};
use mpir_types::stacks::{
    PythonProblem, PythonRead, PythonStack, PythonView, RankStacks, ThreadStack, interleave,
};

/// A rank's interpreter as found: none (no Python there), or one, or why it cannot be read.
pub(crate) type Found<'a> = Option<Result<&'a Interpreter, &'a PythonProblem>>;

/// What a read of the interpreter gave: `None` when the rank runs no Python.
pub(crate) type Read = Option<Result<Vec<PythonStack>, PythonProblem>>;

/// The interpreter of `target`, if it runs one (found on the target's first use).
pub(crate) fn find<M: Memory>(target: &ImageTarget<M>) -> Found<'_> {
    target.python().transpose()
}

/// Each thread's id and thread pointer, which is how a thread state names its thread.
pub(crate) fn thread_ids<'a>(
    threads: impl Iterator<Item = (u32, Option<&'a Registers>)>,
) -> Vec<(u32, Option<u64>)> {
    threads
        .map(|(tid, r)| (tid, r.and_then(Registers::thread_pointer)))
        .collect()
}

/// The Python frames of every thread, read from `memory` (the process stopped); `threads`
/// are (tid, thread pointer).
pub(crate) fn read<M: Memory + ?Sized>(
    found: Found<'_>,
    memory: &M,
    threads: &[(u32, Option<u64>)],
) -> Read {
    Some(match found? {
        Ok(py) => py.stacks(memory, threads),
        Err(e) => Err(e.clone()),
    })
}

/// `threads` with the Python frames `read` put in, as `view` says, and what to say of the
/// rank's interpreter.
pub(crate) fn merge(
    threads: Vec<ThreadStack>,
    found: Found<'_>,
    read: Read,
    view: PythonView,
) -> (Vec<ThreadStack>, Option<PythonRead>) {
    let Some(found) = found else {
        return (threads, None);
    };
    let py = match found {
        Ok(py) => py,
        Err(problem) => {
            return (threads, Some(PythonRead::new(None, Some(problem.clone()))));
        }
    };
    let version = Some(py.version().to_string());
    let stacks = match read {
        Some(Ok(s)) => s,
        Some(Err(problem)) => return (threads, Some(PythonRead::new(version, Some(problem)))),
        None => return (threads, Some(PythonRead::new(version, None))),
    };
    let threads = threads
        .into_iter()
        .map(|t| match stacks.iter().find(|p| p.tid == t.tid) {
            Some(p) => {
                let (mut out, problem) = interleave(t, p, view, py.module());
                out.python_problem = p.problem.clone().or(problem);
                out
            }
            None => t,
        })
        .collect();
    (threads, Some(PythonRead::new(version, None)))
}

/// A rank's stacks with what was read of its interpreter.
pub(crate) fn rank_stacks(
    rank: u64,
    pid: u32,
    threads: Vec<ThreadStack>,
    python: Option<PythonRead>,
) -> RankStacks {
    let mut r = RankStacks::new(rank, pid, threads);
    r.python = python;
    r
}
