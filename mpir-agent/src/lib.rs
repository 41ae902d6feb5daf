//! # mpir-agent
//!
//! Ranks on other nodes (issue 21). A job's ranks on this node are read by an
//! [`mpir_session::Session`]; every other node's ranks are read by an **agent** on that node
//! — `mpir agent`, the same binary, or [`run_stdio`] / [`serve`] in any program — started
//! through an engine the job already trusts (Slurm's `srun`, MPICH's hydra, Open MPI 4's
//! `orterun` through its MPIR tool daemons, Open MPI 5's PRRTE through PMIx tool daemons, or
//! a command such as `ssh` given as a template: [`Launch`]), never a launcher of ours. An
//! agent never listens; the front end listens only while agents that connect back (one srun
//! step or one hydra job for all nodes, Open MPI's tool daemons) come in, authenticated.
//! [`reach`] makes them part of the session: its reads return the whole job.
//!
//! - **The agent** ([`serve`]) adopts the table's entries for its node, proves each one from
//!   its own `/proc` ([`mpir_acquire::live::prove_on_node`]: the node, the job's user and
//!   start, the executable, the launcher's rank variables) and serves queues, stacks, hold
//!   and release for the proven ones, with the session's rules: a rank is stopped only while
//!   it is read, nothing is written, and everything is let go when the front end says
//!   goodbye, goes away or stays silent past the idle timeout.
//! - **The front end** ([`Agents`], the session's [`mpir_session::OtherNodes`]) starts the
//!   agents; each read of the session sends its request to all of them before reading this
//!   node's ranks, and merges the answers into the session's own results: a multi-node job
//!   gives the same [`mpir_session::QueueRead`] and [`mpir_session::StacksRead`] as a
//!   one-node job, with each rank an agent could not read marked
//!   [`mpir_session::Unreadable::Agent`] (the node, the failure, the agent's own reason).
//! - **The protocol** ([`Request`], [`Reply`]) is JSON in `mpir-wire` messages: framed,
//!   versioned, bounded, over the pipe the engine forwards (the engine authenticated it), or,
//!   where no pipe carries one agent's frames (one srun step or hydra job for all nodes,
//!   `orterun`'s and PRRTE's tool daemons), over TLS to the front end, pinned by fingerprint,
//!   each agent proving itself with a one-time token ([`Rendezvous`], [`run_tls`]).
//!
//! ```no_run
//! use mpir_agent::{FrontEndOptions, Launch};
//! use mpir_session::{Session, SessionOptions, StackOptions};
//!
//! let mut session = Session::attach(4242, SessionOptions::default())?;
//! // srun jobs are detected; anything else says how to reach a node.
//! let options = FrontEndOptions::default().with_launch(Launch::Template("ssh {host} {agent}".into()));
//! // From here on the session reads the whole job: its agents read the other nodes.
//! let nodes = mpir_agent::reach(&mut session, options)?;
//! let stacks = session.stacks(&StackOptions::default())?;
//! print!("{}", stacks.tree().to_text());
//! # let _ = nodes;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Where things live
//!
//! Modules by concern, each depending only on those below it (CI checks that no two modules
//! import each other, directly or round a longer circle: `scripts/check-module-cycles.py`):
//!
//! - the protocol ([`Request`], [`Reply`], [`Plan`]) and, below it, the engines that start an
//!   agent with a command per node whose standard I/O the engine forwards ([`Launch`]:
//!   `srun`, hydra, a command template);
//! - the agent ([`serve`], [`run_stdio`]) and the fleet of agents one program talks to
//!   ([`AgentLink`]);
//! - the rendezvous of agents that connect back ([`Rendezvous`]: TLS listener, ephemeral
//!   certificate, one-time token files) and the agent's side of it ([`run_tls`],
//!   [`TlsTarget`]);
//! - the front end's options ([`FrontEndOptions`]), the tool-daemon engines ([`engine`]:
//!   each one's start and its asking, Open MPI 4's [`engine::orte`] and Open MPI 5's
//!   [`engine::prrte`]), the front end ([`Agents`], [`reach`]) and, on top, agents asked
//!   for with a job this program launches ([`LaunchedAgents`]) and a library's way to other
//!   nodes ([`reach_from_library`]).
//!
//! ## Design notes
//!
//! - *Symbolised where the process is.* An agent unwinds and names its ranks' frames with its
//!   own session's caches (each file parsed once per agent, each build-id's CFI and symbols
//!   once); the front end only merges. With one binary per job, that is one parse per node,
//!   the smallest that still reads each node's own files (a node's libraries may differ).
//! - *The front end never trusts an answer's ranks*: an answer for a rank the agent was not
//!   given cuts that agent off; its ranks become [`mpir_session::AgentFailure::BadAnswer`].
//! - *Every wait is bounded*: starting ([`FrontEndOptions::start_timeout`]), each request
//!   ([`FrontEndOptions::request_timeout`], one deadline for all nodes), the agent's idle
//!   wait ([`AgentConfig::idle_timeout`]).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod agent;
pub mod engine;
mod error;
#[cfg(test)]
mod fault_tests;
mod fleet;
mod front;
mod launch;
mod launched;
mod library;
mod listen;
mod merge;
mod options;
mod protocol;
mod rendezvous;
pub mod ship;
mod tls_agent;
mod tokens;

pub use agent::{AgentConfig, Ended, run_stdio, serve, session_options, stack_options};
pub use error::{AgentError, FrontEndError, ProtocolError, TemplateError};
pub use fleet::AgentLink;
pub use front::{Agents, install, reach};
pub use launch::{Launch, default_agent_command};
pub use launched::LaunchedAgents;
pub use library::{OtherNodeOptions, parse_listen, reach_from_library};
pub use mpir_session::NodeState;
pub use mpir_wire::{Fingerprint, RefusalCounts};
pub use options::FrontEndOptions;
pub use protocol::{
    Adopt, EngineChoice, FailureKind, HostClaims, Plan, Problem, ProblemKind, PythonAsk,
    RankQueuesOut, RankStatus, ReadSettings, Reply, Request, SampleOut, StacksAsk, StopOut,
    WaitsOut,
};
pub use rendezvous::Rendezvous;
pub use tls_agent::{TlsTarget, run_tls};
