//! The subcommands: each parses its arguments, calls the library and hands the result to the
//! renderers.

pub(crate) mod agent;
pub(crate) mod core;
pub(crate) mod deadlock;
pub(crate) mod demo;
pub(crate) mod job;
pub(crate) mod layouts;
pub(crate) mod queues;
pub(crate) mod report;
pub(crate) mod stacks;
pub(crate) mod watch;

/// Exit status when a hang is found: a cycle, a collective mismatch, or ranks waiting on
/// ranks that finished.
pub(crate) const HANG: u8 = 3;
