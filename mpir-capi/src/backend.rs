//! The documents and the demo job, from the crates that own them (`mpir-json`, `mpir-demo`):
//! one place, so that the C API's JSON is the CLI's.

use std::path::PathBuf;
use std::time::Duration;

use mpir_session::{DeadlockRead, QueueRead, Session, StacksRead};
use serde_json::{Value, json};

/// `mpir.job/1`; `None` for a session of pids or cores.
pub(crate) fn job(session: &Session) -> Option<Value> {
    // Until mpir-json lands: the ranks only.
    let job = session.job()?;
    let ranks: Vec<Value> = job
        .ranks()
        .map(|r| json!({"rank": r.rank, "pid": r.pid, "host": r.host, "executable": r.executable}))
        .collect();
    Some(json!({"schema": "mpir.job/1", "ranks": ranks}))
}

/// `mpir.queues/1`.
pub(crate) fn queues(read: &QueueRead, _types_given: bool) -> Value {
    json!({"schema": "mpir.queues/1", "ranks": read.ranks.len()})
}

/// `mpir.deadlock/3`.
pub(crate) fn deadlock(read: &DeadlockRead, samples: u32, _types_given: bool) -> Value {
    let (verdict, cycles) = match &read.report {
        Some(r) => (
            format!("{:?}", r.verdict),
            r.cycles
                .iter()
                .map(|c| json!({"ranks": c.ranks}))
                .collect::<Vec<_>>(),
        ),
        None => ("unknown".to_string(), Vec::new()),
    };
    json!({"schema": "mpir.deadlock/3", "samples": samples, "verdict": verdict, "cycles": cycles})
}

/// `mpir.stacks/1`.
pub(crate) fn stacks(read: &StacksRead, source: &str, interval: Duration) -> Value {
    json!({"schema": "mpir.stacks/1", "source": source, "samples": read.samples.len(),
           "interval_ms": interval.as_millis()})
}

/// The demo job's starter, ready to run.
pub(crate) fn demo_starter() -> Result<PathBuf, String> {
    Err("the demo job is not bundled in this build".to_string())
}
