//! How letting ranks go went ([`ReleaseReport`]).

use crate::error::ReleaseProblem;

/// What letting the ranks go found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// The processes let go (running again, untraced).
    pub released: Vec<u32>,
    /// What went wrong meanwhile (the release goes on past each).
    pub problems: Vec<ReleaseProblem>,
}

impl ReleaseReport {
    /// Whether everything was let go without a problem.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}
