//! The documented JSON documents (docs/cli-json.md, docs/schema/) and the demo job: one
//! private function each, over the workspace's mpir-json and mpir-demo crates.

use std::path::PathBuf;
use std::time::Duration;

use mpir_session::{DeadlockRead, QueueRead, Session, StacksRead};
use serde_json::Value;

/// `mpir.job/1`; `None` for sessions of pids or cores.
pub(crate) fn job(session: &Session) -> Option<Value> {
    // Until mpir-json is merged: a stand-in.
    session
        .job()
        .map(|_| serde_json::json!({"schema": "mpir.job/1"}))
}

/// `mpir.queues/1`.
pub(crate) fn queues(_read: &QueueRead, _types_given: bool) -> Value {
    serde_json::json!({"schema": "mpir.queues/1"})
}

/// `mpir.deadlock/3`.
pub(crate) fn deadlock(_read: &DeadlockRead, _samples: u32, _types_given: bool) -> Value {
    serde_json::json!({"schema": "mpir.deadlock/3"})
}

/// `mpir.stacks/1`.
pub(crate) fn stacks(_read: &StacksRead, _source: &str, _interval: Duration) -> Value {
    serde_json::json!({"schema": "mpir.stacks/1"})
}

/// The demo job's starter, written out and ready to run.
pub(crate) fn demo_starter() -> Result<PathBuf, String> {
    Err("the demo job is not bundled yet".into())
}

/// A rank's `control` text: "attached", "not_attached", "remote", "refused: …", "failed: …".
pub(crate) fn control_text(job: &mpir_acquire::Job, rank: u64) -> String {
    use mpir_acquire::RankControl;
    match job.control(rank) {
        RankControl::Attached { .. } => "attached".into(),
        RankControl::Remote => "remote".into(),
        RankControl::Refused { reason } => format!("refused: {reason}"),
        RankControl::Failed { error } => format!("failed: {}", mpir_session::chain(error)),
        _ => "not_attached".into(),
    }
}
