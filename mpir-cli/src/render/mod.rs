//! What the tool prints: the tables and text forms here; every JSON document is the crate
//! [`mpir_json`]'s (one definition for the tool, the C API and the Python bindings), built from
//! its own types so that a library refactor cannot change a schema.

pub(crate) mod job;
pub(crate) mod queues;
pub(crate) mod stacks;

pub(crate) use mpir_json::deadlock;
