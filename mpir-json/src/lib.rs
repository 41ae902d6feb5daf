//! # mpir-json
//!
//! The JSON documents of mpir-rs, defined once for every front end: the tool `mpir --json`,
//! the C API (`mpir_session_*_json`) and the Python bindings (dicts). Each document carries a
//! `schema` name and version; they are described in `docs/cli-json.md` and by the JSON Schemas
//! in `docs/schema/*.json`, which the tool's tests validate every document against.
//!
//! | function | document | from |
//! |---|---|---|
//! | [`job()`] | `mpir.job/1` (or `mpir.core/3`'s job part for a starter's core) | [`Session`] |
//! | [`queues()`] | `mpir.queues/1` | [`QueueRead`] |
//! | [`deadlock()`] | `mpir.deadlock/4` | [`DeadlockRead`] |
//! | [`stacks()`] | `mpir.stacks/2` | [`StacksRead`] |
//!
//! Every document is built from the types of this crate, field by field, never from a
//! library type's own serde output: a refactor of the library cannot change a schema. Those
//! types are public for the tool `mpir`, which prints its tables from the same data, but they
//! are not this crate's API: their meaning and stability are the schemas' (each field is
//! described in `docs/schema`), so they are hidden from the documentation.
//!
//! ```no_run
//! use mpir_session::{Session, SessionOptions};
//! let mut session = Session::attach(4242, SessionOptions::default())?;
//! let job = mpir_json::job(&session).expect("a starter's session has a job");
//! let read = session.queues()?;
//! println!("{job}\n{}", mpir_json::queues(&read, false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![forbid(unsafe_code)]

use std::time::Duration;

use mpir_session::{DeadlockRead, QueueRead, Session, StacksRead};
use serde_json::Value;

#[doc(hidden)]
pub mod activity;
mod denial;
mod names;
pub use denial::{AnnouncedOut, CooperativeOut, DenialOut, WhyOut};
#[doc(hidden)]
pub mod deadlock;
#[doc(hidden)]
pub mod job;
#[doc(hidden)]
pub mod queues;
#[doc(hidden)]
pub mod stacks;

/// A target address as the documents write it: a hex string (`"0x7ffd82250590"`; JSON numbers
/// are not exact beyond 2^53).
pub fn hex(address: u64) -> String {
    format!("{address:#x}")
}

/// Any document as a JSON value. Our document types serialise to strings, numbers, maps and
/// lists only, which `serde_json` cannot fail on.
fn value(doc: &impl serde::Serialize) -> Value {
    serde_json::to_value(doc).unwrap_or_else(|e| {
        serde_json::json!({"schema": "mpir.error/1", "error": format!("document not serialisable: {e}")})
    })
}

/// The job document (`mpir.job/1`) of a session from a starter (attached or launched) or of a
/// process that exports MPI2DD; for core files, the job of the starter's core when one was
/// given. `None` when the session has no job: processes named by pid, ranks' cores only.
pub fn job(session: &Session) -> Option<Value> {
    match (session.job(), session.mpi2dd(), session.starter_core()) {
        (Some(j), mpi2dd, _) => {
            let mut out = job::job_out(j, "mpir");
            if let Some(m) = mpi2dd {
                out.interfaces.push("mpi2dd");
                out.notes
                    .extend(m.mismatches.iter().map(|m| format!("MPIR vs MPI2DD: {m}")));
            }
            Some(value(&out))
        }
        (None, Some(m), _) => Some(value(&job::mpi2dd_job_out(
            m,
            session.starter_pid().unwrap_or(0),
            &session.node_facts(),
        ))),
        (None, None, Some(core)) => Some(value(&job::core_job(&core.table, core.flags))),
        (None, None, None) => None,
    }
}

/// The queues document (`mpir.queues/1`) of one read of every rank's message queues.
/// `types_given`: whether the user supplied the MPI's types (a types sidecar), which changes
/// the advice given for ranks that could not be read.
pub fn queues(read: &QueueRead, types_given: bool) -> Value {
    value(&queues::queues_doc(read, types_given))
}

/// The deadlock document (`mpir.deadlock/4`) of a sampled wait-for analysis over `samples`
/// snapshots. When nothing could be read the verdict is `"unknown"` and `error` says why —
/// never "no cycle".
pub fn deadlock(read: &DeadlockRead, samples: u32, types_given: bool) -> Value {
    let coverage = deadlock::CoverageOut::of(&read.coverage, types_given);
    let notes = queues::printed_notes(read.engine.as_ref(), &read.printed);
    let mut doc = deadlock::doc(read, &coverage, &notes, samples, types_given);
    if read.report.is_none() {
        doc.error = Some(coverage.nothing_read(None));
    }
    value(&doc)
}

/// The stacks document (`mpir.stacks/2`) of a read of every rank's stacks. `source` says where
/// the ranks came from (`"starter"`, `"pids"` or `"cores"`), `interval` the time between
/// samples.
pub fn stacks(read: &StacksRead, source: &str, interval: Duration) -> Value {
    value(&stacks::StacksDoc::of(read, source, interval))
}
