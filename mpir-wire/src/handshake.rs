//! The handshake, sans-IO: the agent says [`Hello`], the front end answers [`Welcome`] or
//! [`Refusal`]. Both sides decode with [`Limits::HANDSHAKE`] (4 KiB, one frame); the
//! transports bound it in time.

use crate::codec::{Codec, Dec, Enc, decode_all, encode_to_vec, tags};
use crate::error::{DecodeError, FrameError, HandshakeError};
use crate::frame::{AgentId, ContentKind, Decoder, Limits, Message, MessageKind, Progress};
use crate::token::{TOKEN_LEN, Token};

/// Longest node name a [`Hello`] may carry.
pub const MAX_NODE_NAME: usize = 255;
/// Longest explanation a [`Refusal`] may carry.
pub const MAX_REFUSAL_DETAIL: usize = 1024;

/// The agent's first message. Its protocol version is its frame header's
/// ([`crate::PROTOCOL_VERSION`]): a front end of another version refuses it by that alone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hello {
    /// The node the agent runs on, as the front end named it to the agent (the key of its
    /// token in the [`crate::TokenBook`]).
    pub node: String,
    /// The agent's process id on its node.
    pub pid: u32,
    /// The largest message the agent accepts ([`crate::Connection::agent`] sets it from its
    /// options).
    pub max_message: u64,
    /// The one-time token proving the agent is the one the front end started (required over
    /// TCP; optional over a pipe the engine authenticated).
    pub token: Option<Token>,
}

impl Hello {
    /// A hello from `node` (cut to [`MAX_NODE_NAME`] bytes) and process `pid`, without a token.
    pub fn new(node: impl Into<String>, pid: u32) -> Hello {
        let mut node = node.into();
        if node.len() > MAX_NODE_NAME {
            let mut end = MAX_NODE_NAME;
            while !node.is_char_boundary(end) {
                end -= 1;
            }
            node.truncate(end);
        }
        Hello {
            node,
            pid,
            max_message: Limits::DEFAULT.max_message() as u64,
            token: None,
        }
    }

    /// The same hello carrying `token`.
    pub fn with_token(mut self, token: Token) -> Hello {
        self.token = Some(token);
        self
    }
}

impl Codec for Hello {
    fn encode(&self, e: &mut Enc) {
        e.str16(&self.node).u32(self.pid).u64(self.max_message);
        match &self.token {
            None => {
                e.u8(0);
            }
            Some(t) => {
                e.u8(1).raw(t.secret_bytes());
            }
        }
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let node = d.str16("node name", MAX_NODE_NAME)?;
        let pid = d.u32("pid")?;
        let max_message = d.u64("max message")?;
        let at = d.pos();
        let token = match d.u8("token flag")? {
            0 => None,
            1 => Some(Token::from_bytes(d.array::<TOKEN_LEN>("token")?)),
            v => {
                return Err(DecodeError::BadValue {
                    field: "token flag",
                    at,
                    value: v.into(),
                });
            }
        };
        Ok(Hello {
            node,
            pid,
            max_message,
            token,
        })
    }
}

/// The front end's acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Welcome {
    /// The agent's id in the tree: the [`crate::Route`] of its messages.
    pub agent_id: AgentId,
    /// The largest message the front end accepts from the agent.
    pub max_message: u64,
}

impl Welcome {
    /// A welcome giving the agent `agent_id`, accepting messages up to `limits`.
    pub fn new(agent_id: AgentId, limits: Limits) -> Welcome {
        Welcome {
            agent_id,
            max_message: limits.max_message() as u64,
        }
    }
}

impl Codec for Welcome {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.agent_id.0).u64(self.max_message);
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Welcome {
            agent_id: AgentId(d.u32("agent id")?),
            max_message: d.u64("max message")?,
        })
    }
}

tags! {
    /// Why the front end refused an agent.
    pub enum RefusalReason {
        /// The agent speaks another protocol version.
        Version = 1 => "protocol version mismatch",
        /// A token is required and the hello carried none.
        TokenMissing = 2 => "no token",
        /// The token is not one the front end issued for that node.
        TokenUnknown = 3 => "unknown token",
        /// The token was already used.
        TokenReused = 4 => "token already used",
        /// The token's session is over.
        TokenExpired = 5 => "token expired",
        /// The hello did not decode.
        Malformed = 6 => "malformed hello",
        /// Any other reason (the detail says it).
        Other = 7 => "refused",
    }
}

/// The front end's refusal; the connection closes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// Why.
    pub reason: RefusalReason,
    /// More words, possibly empty (at most [`MAX_REFUSAL_DETAIL`] bytes).
    pub detail: String,
}

impl Refusal {
    /// A refusal for `reason` with `detail`.
    pub fn new(reason: RefusalReason, detail: impl Into<String>) -> Refusal {
        let mut detail = detail.into();
        if detail.len() > MAX_REFUSAL_DETAIL {
            let mut end = MAX_REFUSAL_DETAIL;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
        }
        Refusal { reason, detail }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{} ({})", self.reason, self.detail)
        }
    }
}

impl Codec for Refusal {
    fn encode(&self, e: &mut Enc) {
        e.u8(self.reason.code()).str16(&self.detail);
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let at = d.pos();
        let code = d.u8("refusal reason")?;
        let reason = RefusalReason::from_code(code).ok_or(DecodeError::BadValue {
            field: "refusal reason",
            at,
            value: code.into(),
        })?;
        let detail = d.str16("refusal detail", MAX_REFUSAL_DETAIL)?;
        Ok(Refusal { reason, detail })
    }
}

/// An error and its causes, as one line (a refusal's detail).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// A control message as frames (handshake messages always fit [`Limits::HANDSHAKE`]).
fn control_frames<T: Codec>(kind: MessageKind, value: &T) -> Vec<u8> {
    let msg = Message::new(kind, ContentKind::Control, encode_to_vec(value));
    msg.to_frames(&Limits::DEFAULT).unwrap_or_default()
}

/// A control message's payload, decoded.
fn control<T: Codec>(msg: &Message) -> Result<T, HandshakeError> {
    let decode = |source| HandshakeError::Decode {
        kind: msg.kind,
        source,
    };
    if msg.content != ContentKind::Control {
        return Err(decode(DecodeError::BadValue {
            field: "content kind",
            at: 0,
            value: msg.content.code().into(),
        }));
    }
    decode_all(&msg.payload, msg.kind.name()).map_err(decode)
}

/// The agent's side: sends [`Hello`], then waits for [`Welcome`] or [`Refusal`].
#[derive(Debug)]
pub struct AgentHandshake {
    decoder: Decoder,
    outgoing: Vec<u8>,
}

impl AgentHandshake {
    /// Starts the handshake; the hello is in [`AgentHandshake::take_outgoing`].
    pub fn new(hello: &Hello) -> AgentHandshake {
        AgentHandshake {
            decoder: Decoder::new(Limits::HANDSHAKE),
            outgoing: control_frames(MessageKind::Hello, hello),
        }
    }

    /// Bytes to send to the front end now.
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.outgoing)
    }

    /// Consumes the front end's bytes; the output is its [`Welcome`]. A refusal is
    /// [`HandshakeError::Refused`]. Bytes past `consumed` belong to the conversation after it.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress<Welcome>, HandshakeError> {
        let p = self.decoder.feed(data).map_err(HandshakeError::Frame)?;
        let Some(msg) = p.output else {
            return Ok(Progress {
                consumed: p.consumed,
                output: None,
            });
        };
        match msg.kind {
            MessageKind::Welcome => Ok(Progress {
                consumed: p.consumed,
                output: Some(control(&msg)?),
            }),
            MessageKind::Refusal => Err(HandshakeError::Refused(control(&msg)?)),
            got => Err(HandshakeError::Unexpected {
                expected: "a welcome or a refusal",
                got,
            }),
        }
    }

    /// The stream ended: the error to report (a truncated frame, or a close before any answer).
    pub fn finish(&self) -> Option<FrameError> {
        self.decoder.finish().err()
    }
}

/// The front end's side: waits for [`Hello`]; the caller decides (with a
/// [`crate::TokenBook`], say) and calls [`FrontEndHandshake::welcome`] or
/// [`FrontEndHandshake::refuse`], then sends [`FrontEndHandshake::take_outgoing`].
#[derive(Debug)]
pub struct FrontEndHandshake {
    decoder: Decoder,
    outgoing: Vec<u8>,
}

impl Default for FrontEndHandshake {
    fn default() -> Self {
        FrontEndHandshake::new()
    }
}

impl FrontEndHandshake {
    /// Waits for a hello.
    pub fn new() -> FrontEndHandshake {
        FrontEndHandshake {
            decoder: Decoder::new(Limits::HANDSHAKE),
            outgoing: Vec::new(),
        }
    }

    /// Consumes the agent's bytes; the output is its [`Hello`]. On a bad hello (another
    /// version, garbage, another message) the refusal to send is queued before the error is
    /// returned.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress<Hello>, HandshakeError> {
        let p = match self.decoder.feed(data) {
            Ok(p) => p,
            Err(e) => {
                let refusal = match &e {
                    FrameError::Version { ours, theirs, .. } => Refusal::new(
                        RefusalReason::Version,
                        format!("the front end speaks version {ours}, the agent {theirs}"),
                    ),
                    other => Refusal::new(RefusalReason::Malformed, other.to_string()),
                };
                self.refuse(&refusal);
                return Err(HandshakeError::Frame(e));
            }
        };
        let Some(msg) = p.output else {
            return Ok(Progress {
                consumed: p.consumed,
                output: None,
            });
        };
        let hello = match msg.kind {
            MessageKind::Hello => control::<Hello>(&msg),
            got => Err(HandshakeError::Unexpected {
                expected: "a hello",
                got,
            }),
        };
        match hello {
            Ok(hello) => Ok(Progress {
                consumed: p.consumed,
                output: Some(hello),
            }),
            Err(e) => {
                self.refuse(&Refusal::new(RefusalReason::Malformed, chain(&e)));
                Err(e)
            }
        }
    }

    /// Accepts the agent: queues `welcome`.
    pub fn welcome(&mut self, welcome: &Welcome) {
        self.outgoing
            .extend(control_frames(MessageKind::Welcome, welcome));
    }

    /// Refuses the agent: queues `refusal`.
    pub fn refuse(&mut self, refusal: &Refusal) {
        self.outgoing
            .extend(control_frames(MessageKind::Refusal, refusal));
    }

    /// Bytes to send to the agent now.
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.outgoing)
    }

    /// The stream ended: the error to report (a truncated frame, or a close before a hello).
    pub fn finish(&self) -> Option<FrameError> {
        self.decoder.finish().err()
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
