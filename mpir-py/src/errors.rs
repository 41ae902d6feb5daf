//! Errors for Python: the library's errors become the exceptions of `mpir._errors` (defined
//! in Python, so they are typed and documented there), chosen by variant, with the whole
//! chain of causes as the message ([`mpir_session::chain`]).

use mpir_session::SessionError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// An exception of class `class` (a name in `mpir._errors`) with message `text`.
pub(crate) fn err(class: &'static str, text: impl Into<String>) -> PyErr {
    let text = text.into();
    Python::attach(|py| {
        let class = py
            .import("mpir._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| Ok(c.cast_into::<PyType>()?));
        match class {
            Ok(class) => PyErr::from_type(class, text),
            Err(e) => PyRuntimeError::new_err(format!("{text} (and mpir._errors: {e})")),
        }
    })
}

/// The exception for a session error: its class by variant, its message the whole chain.
pub(crate) fn session_error(e: &SessionError) -> PyErr {
    let text = mpir_session::chain(e);
    let class = match e {
        SessionError::Acquire { .. } => "AcquireError",
        SessionError::Control { .. } => "ControlError",
        SessionError::Core { .. } | SessionError::SeveralStarterCores { .. } => "CoreError",
        SessionError::NoSuchFile { .. } => "NoSuchFile",
        SessionError::Empty(_) => "NothingToRead",
        SessionError::Analysis(_) => "AnalysisError",
        SessionError::Unsupported { .. } => "UnsupportedError",
        _ => "Error",
    };
    err(class, text)
}
