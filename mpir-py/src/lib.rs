//! The extension module `mpir._mpir`: the Rust half of the Python bindings of mpir-rs.
//!
//! The public, typed API is the Python package around it (`python/mpir/`): it turns paths
//! into bytes (`os.fsencode`), checks the thread, parses the JSON documents into dicts and
//! builds the dataclasses. This module keeps to what needs the library: a session
//! (`session.rs`, one per job, never shared between threads), the documents as JSON text,
//! the library's errors as the exceptions of `mpir._errors` (`errors.rs`), the demo job's
//! starter and the mock starters of `mpir.testing` (`testing.rs`).
//!
//! Nothing here panics on input: every argument is checked and every library error becomes
//! an `mpir.Error` subclass carrying the library's message and its causes.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use pyo3::prelude::*;

mod args;
mod errors;
mod session;
mod testing;

/// The path of the bundled demo job's starter, written out once (privately, verified).
#[pyfunction]
#[pyo3(signature = () -> "str")]
fn demo_starter(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let path = mpir_demo::starter()
        .map_err(|e| mpir_session::chain(&e))
        .map_err(|e| errors::err("Error", e))?;
    args::path_to_py(py, &path)
}

/// Lets go of every process this program holds, now, whichever session holds it (from any
/// thread): the way out for a session that cannot be closed — one Python collected on
/// another thread than its own, which the bindings cannot drop there.
#[pyfunction]
fn release_everything() {
    mpir_session::release_everything();
}

/// The module `mpir._mpir` (the Rust half of the package `mpir`).
#[pymodule]
mod _mpir {
    #[pymodule_export]
    use super::demo_starter;
    #[pymodule_export]
    use super::release_everything;
    #[pymodule_export]
    use super::session::Session;
    #[pymodule_export]
    use super::testing::read_mock_job;

    /// The version of the bindings (the mpir-rs workspace's).
    #[pymodule_export]
    #[allow(non_upper_case_globals, reason = "Python's name for it")]
    const __version__: &str = env!("CARGO_PKG_VERSION");
}
