//! Python frames in the session's stacks: each rank's CPython interpreter found once
//! ([`Interpreter::find`]), its frames read while the rank is stopped (its snapshot, its hold,
//! or from its core), and put in place of the interpreter's evaluation frames
//! ([`interleave`]).

use mpir_target::python::Interpreter;
use mpir_target::{Memory, SymbolLookup};
use mpir_types::stacks::{
    PythonProblem, PythonRead, PythonStack, PythonView, RankStacks, ThreadStack, interleave,
};

/// A rank's interpreter as found: none (no Python there), or one, or why it cannot be read.
pub(crate) type Found = Option<Result<Interpreter, PythonProblem>>;

/// The interpreter of `target`, if it runs one.
pub(crate) fn find<T: SymbolLookup + Memory + ?Sized>(target: &T) -> Found {
    Interpreter::find(target).transpose()
}

/// The Python frames of every thread, read from `memory` (the process stopped); `threads`
/// are (tid, thread pointer); `None` when the rank runs no Python.
pub(crate) fn read<M: Memory + ?Sized>(
    found: &Found,
    memory: &M,
    threads: &[(u32, Option<u64>)],
) -> Option<Result<Vec<PythonStack>, PythonProblem>> {
    match found.as_ref()? {
        Ok(py) => Some(py.stacks(memory, threads)),
        Err(e) => Some(Err(e.clone())),
    }
}

/// `threads` with the Python frames `read` put in, as `view` says, and what to say of the
/// rank's interpreter.
pub(crate) fn merge(
    threads: Vec<ThreadStack>,
    found: &Found,
    read: Option<Result<Vec<PythonStack>, PythonProblem>>,
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
                let (mut out, problem) = interleave(&t, p, view, py.module());
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
