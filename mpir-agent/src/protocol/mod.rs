//! What the front end asks an agent and what the agent answers: JSON payloads
//! ([`ContentKind::Json`]) in `mpir-wire` messages, one reply per request, paired by the
//! request id. One definition for both sides; every field an agent sends is checked by the
//! front end before use (which ranks it answers for, sizes by the wire's limits).

use std::path::PathBuf;

use mpir_acquire::live::{NodeExpectations, RankClaim};
use mpir_mqd::RankQueues;
use mpir_session::AgentFailure;
use mpir_types::stacks::{PythonView, RankStacks, ThreadStack, Unreached};
use mpir_wire::{ContentKind, Message, MessageKind, RequestId};
use serde::{Deserialize, Serialize};

use crate::error::ProtocolError;
use crate::launch::Launch;

/// A request to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// The ranks this agent serves: the table's entries for its node, what the job is known
    /// by, how to read. Answered with [`Reply::Adopted`]. Must come first, once.
    Adopt(Box<Adopt>),
    /// Every adopted rank's message queues (each held only while read). [`Reply::Queues`].
    Queues,
    /// Every adopted rank's stacks. [`Reply::Stacks`].
    Stacks(StacksAsk),
    /// Hold every adopted rank stopped until [`Request::Release`] (or until the front end
    /// goes away). [`Reply::Held`].
    Hold,
    /// Let held ranks run. [`Reply::Released`].
    Release,
    /// Let everything go and exit. No reply.
    Bye,
}

/// The ranks an agent serves, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Adopt {
    /// The table's entries whose host is the agent's node (others are refused as remote).
    pub ranks: Vec<RankClaim>,
    /// What each rank must agree with.
    pub expect: NodeExpectations,
    /// How to read queues.
    pub read: ReadSettings,
    /// Nodes this agent starts agents on and answers for, in a tree (empty: none).
    pub subtree: Vec<HostClaims>,
    /// How to start and bound the subtree's agents (with a non-empty `subtree`).
    pub plan: Option<Plan>,
}

impl Adopt {
    /// Adopt `ranks`, proven against `expect`, read with `read`; no subtree.
    pub fn new(ranks: Vec<RankClaim>, expect: NodeExpectations, read: ReadSettings) -> Self {
        Adopt {
            ranks,
            expect,
            read,
            subtree: Vec::new(),
            plan: None,
        }
    }

    /// With a subtree: this agent starts agents on `subtree`'s nodes as `plan` says and
    /// answers for their ranks too.
    pub fn with_subtree(mut self, subtree: Vec<HostClaims>, plan: Plan) -> Self {
        self.subtree = subtree;
        self.plan = Some(plan);
        self
    }
}

/// One node's entries of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HostClaims {
    /// The node, as the table names it.
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<RankClaim>,
}

impl HostClaims {
    /// `ranks` on `host`.
    pub fn new(host: impl Into<String>, ranks: Vec<RankClaim>) -> Self {
        HostClaims {
            host: host.into(),
            ranks,
        }
    }
}

/// How agents are started and bounded, handed down the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Plan {
    /// The engine (resolved: never [`Launch::Auto`]).
    pub launch: Launch,
    /// The agent's command (program and arguments; `--node HOST` is added per node).
    pub agent: Vec<String>,
    /// Most agents one agent (or the front end) starts and talks to; more nodes form a tree.
    pub fanout: u32,
    /// Every agent of a subtree must have started within this, in milliseconds.
    pub start_timeout_ms: u64,
    /// Every agent of a subtree must answer within this, in milliseconds (plus sampling).
    pub request_timeout_ms: u64,
    /// What ranks must agree with.
    pub expect: NodeExpectations,
    /// How to read.
    pub read: ReadSettings,
    /// The agent program is sent to each node rather than run where it is
    /// ([`crate::ship`]): its size and digest. Absent in an older plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ship: Option<crate::ship::Shipment>,
    /// Where this program finds the bytes to send: the front end's file; `None` in an agent,
    /// which sends its own program ([`crate::ship`]). Never sent down the tree.
    #[serde(skip)]
    pub ship_from: Option<std::path::PathBuf>,
}

/// Which queue engine an agent uses (as [`mpir_mqd::Engine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EngineChoice {
    /// The library's choice.
    #[default]
    Auto,
    /// The MPI's message-queue DLL.
    Dll,
    /// The native walkers.
    Native,
}

/// How an agent reads: the same settings the front end's own session uses, with paths as
/// the agent's node sees them (one installation on a shared file system is the expected
/// setup).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadSettings {
    /// The queue engine.
    pub engine: EngineChoice,
    /// A message-queue DLL to use.
    pub dll: Option<PathBuf>,
    /// Types sidecars.
    pub types: Vec<PathBuf>,
    /// Directories of separate debug files.
    pub debug_dirs: Vec<PathBuf>,
    /// The bound of each stop, in milliseconds (0: the library's default).
    pub timeout_ms: u64,
    /// Ranks of other users may be read (a privileged tool that said so).
    pub allow_other_users: bool,
    /// Queue reads leave the stacks out (the front end shows none: `mpir queues`); a
    /// deadlock search keeps them (it joins each wait to the call it is blocked in).
    #[serde(default)]
    pub queues_without_stacks: bool,
    /// Not to try the Open MPI layout sets shipped with mpir (`--no-shipped-layouts`).
    #[serde(default)]
    pub no_shipped_layouts: bool,
}

impl ReadSettings {
    /// The settings of a session with `options`: every agent reads as the front end's own
    /// session does (one source of truth; the wire form is only this mirror).
    pub fn of(options: &mpir_session::SessionOptions) -> ReadSettings {
        let reader = options.reader_options();
        let acquire = options.acquire_options();
        let default_dirs = mpir_target::debuginfo::DebugOptions::default().debug_dirs;
        ReadSettings {
            engine: match reader.engine() {
                mpir_mqd::Engine::Dll => EngineChoice::Dll,
                mpir_mqd::Engine::Native => EngineChoice::Native,
                _ => EngineChoice::Auto,
            },
            dll: reader.dll().map(std::path::Path::to_path_buf),
            types: acquire.debug.types_sidecars.clone(),
            // The agent's own session starts from the same defaults: only what was added.
            debug_dirs: acquire
                .debug
                .debug_dirs
                .iter()
                .filter(|d| !default_dirs.contains(d))
                .cloned()
                .collect(),
            timeout_ms: u64::try_from(acquire.timeout.as_millis()).unwrap_or(u64::MAX),
            allow_other_users: acquire.allow_other_users,
            queues_without_stacks: !options.queue_stacks(),
            no_shipped_layouts: !reader.uses_shipped_layouts(),
        }
    }
}

/// A stacks request's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StacksAsk {
    /// Samples to take (at least 1).
    pub samples: u32,
    /// Between samples, in milliseconds.
    pub interval_ms: u64,
    /// Longest acceptable stop of one process, in microseconds.
    pub max_stop_us: Option<u64>,
    /// How Python frames are shown (absent from older front ends: interleaved).
    #[serde(default)]
    pub python: PythonAsk,
}

/// How an agent shows the Python frames of its ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PythonAsk {
    /// In place of the interpreter's frames.
    #[default]
    Interleaved,
    /// Beside every native frame.
    WithNative,
    /// Not read.
    Off,
}

impl PythonAsk {
    /// The wire form of the session's Python view (`None`: not read).
    pub fn of(view: Option<PythonView>) -> Self {
        match view {
            Some(PythonView::WithNative) => PythonAsk::WithNative,
            Some(_) => PythonAsk::Interleaved,
            None => PythonAsk::Off,
        }
    }

    /// The session's Python view it asks for (`None`: not read).
    pub fn view(self) -> Option<PythonView> {
        match self {
            PythonAsk::Interleaved => Some(PythonView::Interleaved),
            PythonAsk::WithNative => Some(PythonView::WithNative),
            PythonAsk::Off => None,
        }
    }
}

impl StacksAsk {
    /// `samples` samples `interval_ms` apart.
    pub fn new(samples: u32, interval_ms: u64, max_stop_us: Option<u64>) -> Self {
        StacksAsk {
            samples,
            interval_ms,
            max_stop_us,
            python: PythonAsk::Interleaved,
        }
    }

    /// With Python frames shown as `python` says.
    pub fn with_python(mut self, python: PythonAsk) -> Self {
        self.python = python;
        self
    }
}

/// An agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reply {
    /// The adopted ranks and how each stands.
    Adopted {
        /// The agent's node (its host name).
        node: String,
        /// One per entry of the request, in order.
        ranks: Vec<RankStatus>,
    },
    /// Every adopted rank's queues.
    Queues {
        /// The engine used, when one could be set up.
        engine: Option<mpir_mqd::EngineUsed>,
        /// One per adopted rank.
        ranks: Vec<RankQueuesOut>,
        /// Problems letting the ranks go (none: all running again).
        release: Vec<String>,
    },
    /// Every sample of every adopted rank's stacks.
    Stacks {
        /// In order.
        samples: Vec<SampleOut>,
    },
    /// The ranks are held.
    Held {
        /// One per adopted rank.
        ranks: Vec<RankStatus>,
    },
    /// The ranks run again.
    Released {
        /// Problems letting them go (none: all running again).
        problems: Vec<String>,
    },
    /// The request failed as a whole.
    Failed {
        /// Why, as one line.
        error: String,
    },
}

/// Why an agent did not read a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// Not on the agent's node: not touched.
    Remote,
    /// Not proven to be the rank: not touched.
    Refused,
    /// Proven, but it could not be stopped or opened, or it exited.
    NotStopped,
    /// Held, but reading it failed.
    ReadFailed,
    /// On a node of the agent's subtree, whose agent failed ([`Problem::failure`]).
    Agent,
}

/// Why an agent of a subtree did not serve (as [`AgentFailure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// See [`AgentFailure::NotStarted`].
    NotStarted,
    /// See [`AgentFailure::Unreachable`].
    Unreachable,
    /// See [`AgentFailure::TimedOut`].
    TimedOut,
    /// See [`AgentFailure::Refused`].
    Refused,
    /// See [`AgentFailure::ReadFailed`].
    ReadFailed,
    /// See [`AgentFailure::BadAnswer`].
    BadAnswer,
}

impl From<AgentFailure> for FailureKind {
    fn from(f: AgentFailure) -> Self {
        match f {
            AgentFailure::NotStarted => FailureKind::NotStarted,
            AgentFailure::Unreachable => FailureKind::Unreachable,
            AgentFailure::TimedOut => FailureKind::TimedOut,
            AgentFailure::Refused => FailureKind::Refused,
            AgentFailure::ReadFailed => FailureKind::ReadFailed,
            _ => FailureKind::BadAnswer,
        }
    }
}

impl From<FailureKind> for AgentFailure {
    fn from(f: FailureKind) -> Self {
        match f {
            FailureKind::NotStarted => AgentFailure::NotStarted,
            FailureKind::Unreachable => AgentFailure::Unreachable,
            FailureKind::TimedOut => AgentFailure::TimedOut,
            FailureKind::Refused => AgentFailure::Refused,
            FailureKind::ReadFailed => AgentFailure::ReadFailed,
            FailureKind::BadAnswer => AgentFailure::BadAnswer,
        }
    }
}

/// A rank an agent did not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Problem {
    /// The kind.
    pub kind: ProblemKind,
    /// The reason, as one line.
    pub message: String,
    /// With [`ProblemKind::Agent`]: how that agent failed.
    pub failure: Option<FailureKind>,
    /// The kernel on the agent's node refused it the rank: why, as is (every document shows
    /// the same `denial` for a rank of any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial: Option<mpir_types::access::AccessDenial>,
    /// The agent's reason in the one "not read" vocabulary, made where the cause is known
    /// and carried as is (a code this front end does not know is kept, with its text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<mpir_types::unread::NotRead>,
}

impl Problem {
    /// A problem of `kind`.
    pub fn new(kind: ProblemKind, message: impl Into<String>) -> Self {
        Problem {
            kind,
            message: message.into(),
            failure: None,
            denial: None,
            why: None,
        }
    }

    /// A subtree agent's failure.
    pub fn agent(failure: FailureKind, message: impl Into<String>) -> Self {
        Problem {
            kind: ProblemKind::Agent,
            message: message.into(),
            failure: Some(failure),
            denial: None,
            why: None,
        }
    }
}

/// How one adopted rank stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RankStatus {
    /// The rank.
    pub rank: u64,
    /// Its pid on the agent's node.
    pub pid: u32,
    /// Why it is not served, if it is not.
    pub problem: Option<Problem>,
}

/// One rank's queues as an agent read them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RankQueuesOut {
    /// The rank.
    pub rank: u64,
    /// Its pid on the agent's node.
    pub pid: u32,
    /// The queues, or `None` with a `problem`.
    pub queues: Option<RankQueues>,
    /// Why not.
    pub problem: Option<Problem>,
    /// Every thread's stack, read while the rank was held for its queues.
    pub stacks: Option<Vec<ThreadStack>>,
    /// Its wait-state export (mpir-rs's preload library), read while it was held: absent when
    /// the process has none (and from agents older than the export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<WaitsOut>,
}

/// A rank's wait-state export as an agent read it: the decoded export, or why it could not be
/// used (the agent's own words, carried as they are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WaitsOut {
    /// The export.
    Read(Box<mpir_types::waits::WaitStates>),
    /// Why it could not be used.
    Problem(String),
}

/// One process's stop, as an agent measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StopOut {
    /// The rank.
    pub rank: u64,
    /// Its pid on the agent's node.
    pub pid: u32,
    /// Microseconds stopped.
    pub stopped_us: u64,
}

/// One sample of an agent's ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SampleOut {
    /// The stacks of every rank read.
    pub ranks: Vec<RankStacks>,
    /// The ranks not read, with the reason.
    pub unreached: Vec<Unreached>,
    /// How long each process was stopped.
    pub stops: Vec<StopOut>,
    /// Ranks whose stop exceeded the asked maximum.
    pub overran: Vec<u64>,
}

impl Request {
    /// As a request message with `id`.
    pub fn to_message(&self, id: RequestId) -> Message {
        Message::new(MessageKind::Request, ContentKind::Json, to_json(self)).with_request(id)
    }

    /// From a request message.
    ///
    /// # Errors
    /// [`ProtocolError`] for another kind of message or content, or a payload that is not a
    /// request.
    pub fn from_message(message: &Message) -> Result<Request, ProtocolError> {
        from_json(message, MessageKind::Request)
    }
}

impl Reply {
    /// As the reply to request `id`.
    pub fn to_message(&self, id: RequestId) -> Message {
        Message::new(MessageKind::Reply, ContentKind::Json, to_json(self)).with_request(id)
    }

    /// From a reply message.
    ///
    /// # Errors
    /// [`ProtocolError`] for another kind of message or content, or a payload that is not a
    /// reply.
    pub fn from_message(message: &Message) -> Result<Reply, ProtocolError> {
        from_json(message, MessageKind::Reply)
    }
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Our own types serialise to JSON without failing (no maps with non-string keys, no
    // non-finite floats).
    serde_json::to_vec(value).unwrap_or_else(|e| {
        format!(r#"{{"reply":"failed","error":"cannot encode: {e}"}}"#).into_bytes()
    })
}

fn from_json<T: for<'de> Deserialize<'de>>(
    message: &Message,
    kind: MessageKind,
) -> Result<T, ProtocolError> {
    if message.kind != kind {
        return Err(ProtocolError::Unexpected {
            expected: kind,
            got: message.kind,
        });
    }
    if message.content != ContentKind::Json {
        return Err(ProtocolError::Content {
            got: message.content,
        });
    }
    serde_json::from_slice(&message.payload).map_err(|e| ProtocolError::Payload {
        reason: e.to_string(),
        len: message.payload.len(),
    })
}

#[cfg(test)]
mod tests;
