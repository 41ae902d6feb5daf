//! Arguments from Python: paths (any of `str`, `bytes`, `os.PathLike`, through `os.fsencode`,
//! so names that are not UTF-8 pass unchanged), the session options, file descriptors for a
//! launched starter's standard streams, durations.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpir_session::SessionOptions;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// The bytes of a path or argument: `os.fsencode(obj)` (str, bytes, os.PathLike).
pub(crate) fn os_bytes(obj: &Bound<'_, PyAny>) -> PyResult<OsString> {
    let os = obj.py().import("os")?;
    let encoded = os.call_method1("fsencode", (obj,))?;
    let bytes = encoded.cast::<PyBytes>()?;
    Ok(OsString::from_vec(bytes.as_bytes().to_vec()))
}

/// A path argument.
pub(crate) fn path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    Ok(PathBuf::from(os_bytes(obj)?))
}

/// A path for Python: `str` as `os.fsdecode` gives it (a name that is not UTF-8 keeps its
/// bytes as surrogate escapes, and `os.fsencode` gives them back).
pub(crate) fn path_to_py(py: Python<'_>, path: &Path) -> PyResult<Py<PyAny>> {
    let os = py.import("os")?;
    let bytes = PyBytes::new(py, path.as_os_str().as_bytes());
    Ok(os.call_method1("fsdecode", (bytes,))?.unbind())
}

/// Seconds (a non-negative, finite number of at most a day) as a duration.
pub(crate) fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    if !value.is_finite() || !(0.0..=86_400.0).contains(&value) {
        return Err(PyValueError::new_err(format!(
            "{what} must be a number of seconds between 0 and 86400, not {value}"
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

/// What a session is made with, beyond the library's options.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// Launch: leave the starter running when the session is closed.
    pub(crate) leave_running: bool,
    /// A types sidecar was given (the documents say so).
    pub(crate) types_given: bool,
    /// How the job's other nodes are read (`other_nodes`, `agent_*`).
    pub(crate) other_nodes: mpir_agent::OtherNodeOptions,
}

/// The keyword options every session source takes (`timeout`, `ranks`, `debug_dirs`,
/// `types_sidecar`, `shipped_layouts`, `hold_from_acquisition`, `allow_other_users`, `exe`, `this_node_aliases`,
/// `held_wait`, the other nodes' `other_nodes`, `agent_program`, `agent_launch`, `agent_fanout`,
/// `agent_listen`, `agent_token_dir`, `agent_timeout`, and for launch `leave_running`).
pub(crate) fn options(
    given: Option<&Bound<'_, PyDict>>,
    launch: bool,
) -> PyResult<(SessionOptions, Extra)> {
    let mut options = SessionOptions::default();
    let mut extra = Extra::default();
    let Some(given) = given else {
        return Ok((options, extra));
    };
    for (key, value) in given.iter() {
        let key: String = key.extract()?;
        if value.is_none() {
            continue;
        }
        match key.as_str() {
            "timeout" => options = options.with_timeout(seconds("timeout", value.extract()?)?),
            "ranks" => {
                let text: String = value.extract()?;
                let ranks = text
                    .parse()
                    .map_err(|e| PyValueError::new_err(format!("ranks {text:?}: {e}")))?;
                options = options.with_ranks(ranks);
            }
            "debug_dirs" => {
                for dir in value.try_iter()? {
                    options = options.with_debug_dir(path(&dir?)?);
                }
            }
            "types_sidecar" => {
                options = options.with_types_sidecar(path(&value)?);
                extra.types_given = true;
            }
            "shipped_layouts" => {
                if !value.extract::<bool>()? {
                    options = options.without_shipped_layouts();
                }
            }
            "hold_from_acquisition" => {
                options = options.with_hold_from_acquisition(value.extract()?)
            }
            "allow_other_users" => options = options.with_allow_other_users(value.extract()?),
            "exe" => options = options.with_exe(path(&value)?),
            "this_node_aliases" => {
                for alias in value.try_iter()? {
                    options = options.with_this_node_alias(alias?.extract::<String>()?);
                }
            }
            "held_wait" => {
                options = options.with_held_wait(seconds("held_wait", value.extract()?)?)
            }
            "other_nodes" => extra.other_nodes.enabled = value.extract()?,
            "agent_program" => extra.other_nodes.program = Some(path(&value)?),
            "agent_launch" => extra.other_nodes.launch = Some(value.extract()?),
            "agent_fanout" => {
                let fanout: u32 = value.extract()?;
                if !(2..=1024).contains(&fanout) {
                    return Err(PyValueError::new_err(format!(
                        "agent_fanout must be between 2 and 1024, not {fanout}"
                    )));
                }
                extra.other_nodes.fanout = Some(fanout);
            }
            "agent_listen" => {
                let text: String = value.extract()?;
                extra.other_nodes.listen =
                    Some(mpir_agent::parse_listen(&text).map_err(PyValueError::new_err)?);
            }
            "agent_token_dir" => extra.other_nodes.token_dir = Some(path(&value)?),
            "agent_timeout" => {
                extra.other_nodes.timeout = Some(seconds("agent_timeout", value.extract()?)?)
            }
            "leave_running" if launch => extra.leave_running = value.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unknown session option {other:?} (known: timeout, ranks, debug_dirs, \
                     types_sidecar, shipped_layouts, hold_from_acquisition, allow_other_users, exe, \
                     this_node_aliases, held_wait, other_nodes, agent_program, agent_launch, agent_fanout, \
                     agent_listen, agent_token_dir, agent_timeout{})",
                    if launch { ", leave_running" } else { "" }
                )));
            }
        }
    }
    Ok((options, extra))
}

/// How a launched starter's standard stream is connected: `"inherit"` (this process's),
/// `"devnull"`, or `"pipe"` (stdout and stderr only: read it from the session).
pub(crate) fn stdio(what: &str, value: &str, pipe_ok: bool) -> PyResult<std::process::Stdio> {
    use std::process::Stdio;
    match value {
        "inherit" => Ok(Stdio::inherit()),
        "devnull" => Ok(Stdio::null()),
        "pipe" if pipe_ok => Ok(Stdio::piped()),
        _ => Err(PyValueError::new_err(format!(
            "{what}={value:?}: one of \"inherit\", \"devnull\"{}",
            if pipe_ok { ", \"pipe\"" } else { "" }
        ))),
    }
}
