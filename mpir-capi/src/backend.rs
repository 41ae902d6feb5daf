//! The documents and the demo job, from the crates that own them (`mpir-json`, `mpir-demo`):
//! the C API's JSON is the CLI's and the Python bindings', the demo job the same program.

use std::path::PathBuf;
use std::time::Duration;

use mpir_session::{DeadlockRead, QueueRead, Session, StacksRead};
use serde_json::Value;

/// `mpir.job/1`; `None` for a session of pids or cores without a starter's core.
pub(crate) fn job(session: &Session) -> Option<Value> {
    mpir_json::job(session)
}

/// `mpir.queues/1`.
pub(crate) fn queues(read: &QueueRead, types_given: bool) -> Value {
    mpir_json::queues(read, types_given)
}

/// `mpir.deadlock/3`.
pub(crate) fn deadlock(read: &DeadlockRead, samples: u32, types_given: bool) -> Value {
    mpir_json::deadlock(read, samples, types_given)
}

/// `mpir.stacks/1`.
pub(crate) fn stacks(read: &StacksRead, source: &str, interval: Duration) -> Value {
    mpir_json::stacks(read, source, interval)
}

/// The demo job's starter, ready to run: the path, or why not (its error chain).
pub(crate) fn demo_starter() -> Result<PathBuf, String> {
    mpir_demo::starter().map_err(|e| mpir_session::chain(&e))
}
