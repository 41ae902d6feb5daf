//! Everything `unsafe` of this crate: the hand-written subset of PMIx's C types (`types`), owned
//! info arrays and copies of libpmix's results (`info`), and the library and its calls (`api`).

pub(crate) mod api;
pub(crate) mod info;
pub(crate) mod types;

#[cfg(test)]
mod layout_test;
