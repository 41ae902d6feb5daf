//! What a session knows of its job's ranks once it has proven them ([`Known`]), and a
//! table built from the ranks' announcements ([`Announced`]).

use std::path::PathBuf;

use crate::error::Unreadable;

/// A job whose starter the kernel refuses this tool, its table built from its ranks'
/// announcements on their cooperative channels ([`Session::announced`](crate::Session::announced)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Announced {
    /// The starter named.
    pub starter: u32,
    /// Why its table could not be read.
    pub denial: mpir_types::access::AccessDenial,
}

/// A rank as the first hold found it.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) rank: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) image: PathBuf,
    /// The start time read while it was held first, or why it is never touched.
    pub(crate) state: Result<u64, Unreadable>,
}
