//! The documented JSON documents (docs/cli-json.md, docs/schema/) from the workspace's
//! mpir-json crate — the same documents the tool `mpir` and the C API give — and the bundled
//! demo job from mpir-demo.

use std::path::PathBuf;
use std::time::Duration;

use mpir_session::{DeadlockRead, QueueRead, Session, StacksRead};
use serde_json::Value;

/// `mpir.job/1`; `None` for sessions of pids (or of ranks' cores only).
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

/// The demo job's starter, written out and ready to run (the error with its causes).
pub(crate) fn demo_starter() -> Result<PathBuf, String> {
    mpir_demo::starter().map_err(|e| mpir_session::chain(&e))
}

/// A rank's `control` text, in the documents' words: "attached", "not_attached", "remote",
/// "refused: …", "failed: …".
pub(crate) fn control_text(job: &mpir_acquire::Job, rank: u64) -> String {
    mpir_json::job::control_text(job, rank).into_owned()
}

/// A rank's `local`: `None` when unknown.
pub(crate) fn local(job: &mpir_acquire::Job, rank: u64) -> Option<bool> {
    mpir_json::job::local_of(&job.locality(rank))
}
