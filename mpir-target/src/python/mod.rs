//! Python frames from a CPython interpreter's memory (3.9–3.13, x86_64 release builds), for
//! stacks that show which Python line each thread runs ([`mpir_types::stacks::python`]).
//!
//! ## Finding the interpreter, by facts
//!
//! 1. **The runtime.** `_PyRuntime`, the interpreter's one global state, is an exported data
//!    symbol of every CPython since 3.7, in the executable (Debian's `python3.11`, statically
//!    linked) or in `libpython3.X.so` (pyenv, conda, embedding programs). A process without
//!    it runs no CPython: [`Interpreter::find`] says `None`.
//! 2. **The version**, from the same image's exported symbols: `Py_Version` (3.11+) holds
//!    `PY_VERSION_HEX`; older images are told apart by the newest API they export
//!    (`Py_IsNone`, added in 3.10; `PyModule_AddType`, added in 3.9). A version with no
//!    layout ([`layout`]) is refused, named.
//! 3. **The proof.** The layout of that version must decode the interpreter's own objects:
//!    every thread state points back to its interpreter, at least one names a thread of the
//!    process (`native_thread_id`), every frame object and code object has the type the image
//!    exports (`PyFrame_Type`, `PyCode_Type`), every name is a `str` (`PyUnicode_Type`) and
//!    every line table a `bytes` (`PyBytes_Type`). A build whose objects are laid out
//!    otherwise — free-threaded 3.13t, `Py_DEBUG` or `Py_TRACE_REFS` builds — fails the
//!    checks and is refused ([`PythonProblem::Unproven`](mpir_types::stacks::PythonProblem::Unproven)), never decoded wrong.
//!
//! ## Reading
//!
//! [`Interpreter::stacks`] walks every interpreter's thread states and each thread's frame
//! chain (3.9/3.10: `PyFrameObject.f_back`; 3.11+: `_PyInterpreterFrame.previous`), decodes
//! each code object's qualified name, file and line (the line tables of [`linetable`]), and
//! marks where each native evaluation call's frames end (3.11's `is_entry`, 3.12+'s frames
//! owned by the C stack). Frames still being set up (3.11+'s incomplete frames) are skipped,
//! as CPython's own tracebacks skip them.
//!
//! Run it while the process is stopped (the frames move while it runs). Everything read is
//! bounded: [`MAX_INTERPRETERS`], [`MAX_THREADS`], [`MAX_FRAMES`] per thread, names cut at
//! [`MAX_NAME`] characters, line tables of at most [`MAX_LINE_TABLE`] bytes; a loop in any
//! chain is found. A thread whose chain breaks keeps the frames read before, with the problem.

pub mod layout;
pub mod linetable;
mod read;

pub use read::{Interpreter, MAX_FRAMES, MAX_INTERPRETERS, MAX_LINE_TABLE, MAX_NAME, MAX_THREADS};
