//! Errors of the agent and of the front end.

use std::path::PathBuf;

use mpir_wire::{ContentKind, MessageKind, WireError};
use thiserror::Error;

/// A message that is not what the protocol says comes next.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Another kind of message.
    #[error("expected a {expected:?} message, got a {got:?}")]
    Unexpected {
        /// What the protocol expects.
        expected: MessageKind,
        /// What came.
        got: MessageKind,
    },
    /// Not JSON content.
    #[error("expected JSON content, got {got:?}")]
    Content {
        /// What came.
        got: ContentKind,
    },
    /// JSON that is not a request or reply of this protocol.
    #[error("a {len}-byte payload that is no message of this protocol: {reason}")]
    Payload {
        /// serde_json's reason (with line and column).
        reason: String,
        /// The payload's size.
        len: usize,
    },
    /// A reply to another request than the one asked.
    #[error("a reply to request {got}, while request {expected} was asked")]
    OtherRequest {
        /// The request asked.
        expected: u64,
        /// The one answered.
        got: u64,
    },
    /// A reply of another kind than the request asks for.
    #[error("a {got} reply to a {asked} request")]
    WrongReply {
        /// The request.
        asked: &'static str,
        /// The reply's kind.
        got: &'static str,
    },
    /// An answer for a rank the agent was not given.
    #[error("an answer for rank {rank}, which this agent was not given")]
    ForeignRank {
        /// The rank.
        rank: u64,
    },
    /// The first request was not [`crate::Request::Adopt`], or it came twice.
    #[error("{0}")]
    Order(&'static str),
}

/// Why an agent stopped serving.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The connection to the front end failed (or the handshake).
    #[error("the connection to the front end")]
    Wire(#[from] WireError),
    /// The front end sent something this agent cannot use.
    #[error("the front end broke the protocol")]
    Protocol(#[from] ProtocolError),
    /// The agent was started for another node than the one it runs on.
    #[error("this agent was started for node {asked}, but runs on {here}")]
    WrongNode {
        /// The node named.
        asked: String,
        /// This node's name.
        here: String,
    },
    /// This node's token (a tool-daemon agent's) is unsafe or unreadable.
    #[error("taking this node's token")]
    Token {
        /// Why.
        #[source]
        source: mpir_wire::TokenError,
    },
    /// Setting up stdio or the agent's own process.
    #[error("{context}")]
    Setup {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// Why the front end could not use the agents as a whole (per-node trouble is per rank, in
/// the results: [`mpir_session::Unreadable::Agent`]).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FrontEndError {
    /// No engine can start agents for this job, and none was given.
    #[error("no way to start agents on the job's other nodes: {reason}")]
    NoEngine {
        /// Why (what was detected).
        reason: String,
    },
    /// The agent launch template is unusable.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// Setting up the tool-daemon engine (the listener, its certificate, the tokens).
    #[error("starting agents as tool daemons: {context}")]
    ToolDaemons {
        /// The step.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A library (no program of its own to start as the agent) was given no `mpir` program,
    /// and none is on the `PATH`.
    #[error("no `mpir` program to start as the agent on the other nodes: {reason}")]
    NoAgentProgram {
        /// What was looked at.
        reason: String,
    },
    /// The agent program to send to the nodes ([`crate::FrontEndOptions::ship`]) cannot be
    /// sent: it is not a static executable, cannot be read, or the engine has no link to
    /// send it through.
    #[error("cannot send the agent program {path} to the nodes: {why}")]
    Ship {
        /// The program.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The local part of a read failed.
    #[error("reading this node's ranks")]
    Session(#[source] Box<mpir_session::SessionError>),
}

impl From<mpir_session::SessionError> for FrontEndError {
    fn from(e: mpir_session::SessionError) -> Self {
        FrontEndError::Session(Box::new(e))
    }
}

/// Why an agent launch template ([`crate::Launch::Template`]) is unusable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// It has no word.
    #[error("agent launch template {template:?}: it is empty")]
    Empty {
        /// The template.
        template: String,
    },
    /// A quote opened and never closed.
    #[error(
        "agent launch template {template:?}: the {quote} quote at column {column} is not closed"
    )]
    UnclosedQuote {
        /// The template.
        template: String,
        /// The quote character (`'` or `"`).
        quote: char,
        /// Where the quote opens, in characters from 1.
        column: usize,
    },
    /// It ends with a backslash, which escapes nothing.
    #[error(
        "agent launch template {template:?}: the backslash at column {column} ends it, escaping nothing"
    )]
    TrailingBackslash {
        /// The template.
        template: String,
        /// Where the backslash is, in characters from 1.
        column: usize,
    },
    /// No word names `{host}`.
    #[error("agent launch template {template:?}: it does not name {{host}}")]
    NoHost {
        /// The template.
        template: String,
    },
    /// No word is `{agent}` alone.
    #[error("agent launch template {template:?}: it does not have {{agent}} as a word of its own")]
    NoAgent {
        /// The template.
        template: String,
    },
}
