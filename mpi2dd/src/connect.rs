//! How a traversal reaches the processes a table names: the [`Connector`] the caller supplies,
//! given a host name and a pid, returns something to read that process's memory and symbols.
//!
//! - [`LocalConnector`] opens processes of this machine as
//!   [`LiveTarget`]s (reading without stopping them); a host
//!   that is not this machine is [`ConnectError::Remote`], which a traversal lists as
//!   unreachable. A connector for remote hosts (a debug server per node) implements the same
//!   trait.
//! - [`MapConnector`] serves targets registered by `(host, pid)`, e.g. `MockTarget`s.

use std::collections::BTreeMap;
use std::sync::Arc;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::{Memory, SymbolLookup, TargetError};
use thiserror::Error;

/// A process of the job: its host (as the connector canonicalises it) and its pid there.
///
/// Ordered by host, then pid, so that results built from keys are deterministic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "a process is named by its host and pid, nothing more"
)]
pub struct ProcessKey {
    /// Host name or address.
    pub host: Arc<str>,
    /// Process id on that host.
    pub pid: i32,
}

impl ProcessKey {
    /// The key of `pid` on `host`.
    pub fn new(host: impl Into<Arc<str>>, pid: i32) -> Self {
        ProcessKey {
            host: host.into(),
            pid,
        }
    }
}

impl std::fmt::Display for ProcessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.pid)
    }
}

/// Why a process could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The host is not one this connector reaches.
    #[error("{host} is not reachable by this connector (local processes only)")]
    Remote {
        /// The host as the table gave it.
        host: String,
    },
    /// No such process on a reachable host.
    #[error("no process {pid} on {host}")]
    NoSuchProcess {
        /// The host.
        host: String,
        /// The pid.
        pid: i32,
    },
    /// The process exists (or may) but could not be opened.
    #[error("cannot open process {pid} on {host}")]
    Open {
        /// The host.
        host: String,
        /// The pid.
        pid: i32,
        /// Why.
        source: TargetError,
    },
}

/// Opens processes named by MPI2DD tables. See the [module documentation](self).
pub trait Connector {
    /// What [`Connector::connect`] returns: memory and symbols of one process.
    type Target<'a>: Memory + SymbolLookup
    where
        Self: 'a;

    /// The name under which `host` is compared with others: all names of one machine should
    /// map to one (so a process listed as `localhost` and as `node7` is one process).
    fn canonical_host(&self, host: &str) -> Arc<str> {
        Arc::from(host)
    }

    /// Opens `process` (its host already canonical).
    fn connect(&self, process: &ProcessKey) -> Result<Self::Target<'_>, ConnectError>;
}

/// Opens processes of this machine with [`LiveTarget::open`] (no stop, no trace).
///
/// A host is local when this machine's facts say so
/// ([`this_node`](mpir_target::live::node::this_node): its host name and `/etc/hosts` aliases,
/// the addresses of its interfaces, `localhost` and loopback addresses; see
/// [`mpir_types::node`] for the matching rules), or it is an alias added with
/// [`LocalConnector::with_alias`]. Local hosts are canonicalised to the host name.
#[derive(Debug, Clone)]
pub struct LocalConnector {
    hostname: Arc<str>,
    node: mpir_types::node::ThisNode,
    options: DebugOptions,
}

impl LocalConnector {
    /// A connector for this machine, with default debug options.
    pub fn new() -> Self {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".into());
        LocalConnector {
            hostname: hostname.into(),
            node: mpir_target::live::node::this_node(),
            options: DebugOptions::default(),
        }
    }

    /// Also treats `alias` as this machine.
    pub fn with_alias(mut self, alias: impl Into<String>) -> Self {
        self.node = self.node.with_alias(&alias.into());
        self
    }

    /// Uses `options` to find symbols (debug directories, symbol files).
    pub fn with_debug_options(mut self, options: DebugOptions) -> Self {
        self.options = options;
        self
    }

    /// This machine's host name, the canonical name of local processes.
    pub fn hostname(&self) -> &Arc<str> {
        &self.hostname
    }

    fn is_local(&self, host: &str) -> bool {
        *host == *self.hostname || self.node.classify(Some(host)).is_local()
    }
}

impl Default for LocalConnector {
    fn default() -> Self {
        LocalConnector::new()
    }
}

impl Connector for LocalConnector {
    type Target<'a> = LiveTarget;

    fn canonical_host(&self, host: &str) -> Arc<str> {
        if self.is_local(host) {
            self.hostname.clone()
        } else {
            Arc::from(host)
        }
    }

    fn connect(&self, process: &ProcessKey) -> Result<LiveTarget, ConnectError> {
        if !self.is_local(&process.host) {
            return Err(ConnectError::Remote {
                host: process.host.to_string(),
            });
        }
        let pid = u32::try_from(process.pid)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| ConnectError::NoSuchProcess {
                host: process.host.to_string(),
                pid: process.pid,
            })?;
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(ConnectError::NoSuchProcess {
                host: process.host.to_string(),
                pid: process.pid,
            });
        }
        LiveTarget::open(pid, self.options.clone()).map_err(|source| ConnectError::Open {
            host: process.host.to_string(),
            pid: process.pid,
            source,
        })
    }
}

/// Serves targets registered by `(host, pid)`: a host with no registered process is
/// [`ConnectError::Remote`], an unregistered pid on a known host
/// [`ConnectError::NoSuchProcess`].
#[derive(Debug)]
pub struct MapConnector<T> {
    targets: BTreeMap<ProcessKey, T>,
}

impl<T> Default for MapConnector<T> {
    fn default() -> Self {
        MapConnector {
            targets: BTreeMap::new(),
        }
    }
}

impl<T: Memory + SymbolLookup> MapConnector<T> {
    /// An empty connector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `target` as process `pid` of `host`.
    pub fn insert(&mut self, host: &str, pid: i32, target: T) -> &mut Self {
        self.targets.insert(ProcessKey::new(host, pid), target);
        self
    }

    /// The target registered for `host`:`pid`.
    pub fn get(&self, host: &str, pid: i32) -> Option<&T> {
        self.targets.get(&ProcessKey::new(host, pid))
    }

    /// Every registered target.
    pub fn targets(&self) -> impl Iterator<Item = (&ProcessKey, &T)> {
        self.targets.iter()
    }
}

impl<T: Memory + SymbolLookup> Connector for MapConnector<T> {
    type Target<'a>
        = &'a T
    where
        T: 'a;

    fn connect(&self, process: &ProcessKey) -> Result<&T, ConnectError> {
        if let Some(t) = self.targets.get(process) {
            return Ok(t);
        }
        if self.targets.keys().any(|k| k.host == process.host) {
            Err(ConnectError::NoSuchProcess {
                host: process.host.to_string(),
                pid: process.pid,
            })
        } else {
            Err(ConnectError::Remote {
                host: process.host.to_string(),
            })
        }
    }
}
