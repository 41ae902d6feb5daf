//! Frames, sans-IO: [`Message::encode`] writes a message as frames, [`Decoder`] consumes bytes
//! and gives back whole messages. No I/O here; the transports feed these.

use crate::codec::{Codec, Dec, Enc, tags};
use crate::error::{DecodeError, FrameError};

/// The four bytes every frame starts with.
pub const MAGIC: [u8; 4] = *b"MPRW";
/// The protocol version this crate speaks (bumped on any incompatible change). The first six
/// bytes of a header — magic and version — keep their place in every version, so two sides
/// of different versions can always name each other's version.
pub const PROTOCOL_VERSION: u16 = 1;
/// Length of a frame header.
pub const HEADER_LEN: usize = 28;
/// Largest payload of one frame; longer messages are sent as several consecutive frames.
pub const MAX_FRAME: usize = 1 << 20;
/// Largest number of relays a message may pass ([`Route::hops`]).
pub const MAX_HOPS: u8 = 64;

/// Flag bit: more frames of this message follow.
const FLAG_MORE: u8 = 1;

tags! {
    /// What a message is (the header's `kind` byte).
    pub enum MessageKind {
        /// Agent → front end: the first message ([`crate::Hello`]).
        Hello = 1 => "hello",
        /// Front end → agent: accepted ([`crate::Welcome`]).
        Welcome = 2 => "welcome",
        /// Front end → agent: refused ([`crate::Refusal`]), then the connection closes.
        Refusal = 3 => "refusal",
        /// A request (usually front end → agent), answered by replies with its request id.
        Request = 4 => "request",
        /// A reply to the request of the same id.
        Reply = 5 => "reply",
        /// A message that answers nothing (progress, a warning, an event).
        Notice = 6 => "notice",
        /// An orderly end of the conversation; the payload may say why.
        Goodbye = 7 => "goodbye",
    }
}

tags! {
    /// How a payload is encoded (the header's `content` byte); the payload itself is opaque
    /// to this crate.
    pub enum ContentKind {
        /// No payload.
        Empty = 0 => "empty",
        /// This crate's own binary encoding (the handshake messages).
        Control = 1 => "control",
        /// A JSON document (UTF-8).
        Json = 2 => "JSON",
        /// A compact binary encoding the two ends agree on.
        Binary = 3 => "binary",
    }
}

/// A member of the agent tree (the front end or an agent, one per node it reads): 0 is the
/// front end; the front end gives each agent its id in its [`crate::Welcome`]. Not a node of
/// the cluster (a host name) nor of a stacks tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AgentId(pub u32);

impl AgentId {
    /// The front end.
    pub const FRONT_END: AgentId = AgentId(0);
}

impl std::fmt::Display for AgentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "agent #{}", self.0)
    }
}

/// Where a message goes or comes from when agents relay for each other: upward, the agent
/// that sent it first; downward, the agent it is for. `hops` counts relays, so that a loop in
/// a tree ends at [`MAX_HOPS`] instead of circling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Route {
    /// The originating (upward) or destination (downward) agent.
    pub agent: AgentId,
    /// Relays passed so far.
    pub hops: u8,
}

impl Route {
    /// A route to or from `agent`, not yet relayed.
    pub fn to(agent: AgentId) -> Route {
        Route { agent, hops: 0 }
    }

    /// The route after one more relay, or `None` past [`MAX_HOPS`].
    pub fn relayed(self) -> Option<Route> {
        let hops = self.hops.checked_add(1).filter(|&h| h <= MAX_HOPS)?;
        Some(Route { hops, ..self })
    }
}

/// The id that ties replies to their request (chosen by the requester; 0 when none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

/// One message: a kind, an opaque payload tagged with its encoding, the request it belongs
/// to and its route.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Message {
    /// What it is.
    pub kind: MessageKind,
    /// How the payload is encoded.
    pub content: ContentKind,
    /// The request it is or answers.
    pub request: RequestId,
    /// Its origin or destination in the agent tree.
    pub route: Route,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Message {
    /// A message of `kind` with `payload` encoded as `content`, request 0, routed to or from
    /// the front end.
    pub fn new(kind: MessageKind, content: ContentKind, payload: Vec<u8>) -> Message {
        Message {
            kind,
            content,
            request: RequestId::default(),
            route: Route::default(),
            payload,
        }
    }

    /// The same message with request id `id`.
    pub fn with_request(mut self, id: RequestId) -> Message {
        self.request = id;
        self
    }

    /// The same message with route `route`.
    pub fn with_route(mut self, route: Route) -> Message {
        self.route = route;
        self
    }

    /// The message as a relay forwards it: the same, one more hop on its route; `None` past
    /// [`MAX_HOPS`] (a loop in the tree), when it must be dropped.
    pub fn relayed(mut self) -> Option<Message> {
        self.route = self.route.relayed()?;
        Some(self)
    }

    /// Appends the message to `out` as frames of at most [`MAX_FRAME`] payload bytes; fails
    /// if the message is over `limits` (the peer would refuse it).
    pub fn encode(&self, limits: &Limits, out: &mut Vec<u8>) -> Result<(), FrameError> {
        if self.payload.len() > limits.max_message {
            return Err(FrameError::Oversize {
                kind: self.kind,
                len: self.payload.len() as u64,
                limit: limits.max_message as u64,
            });
        }
        let frames = self.payload.len().div_ceil(MAX_FRAME).max(1);
        let mut e = Enc(std::mem::take(out));
        for i in 0..frames {
            let start = i * MAX_FRAME;
            let chunk = &self.payload[start..(start + MAX_FRAME).min(self.payload.len())];
            Header {
                version: PROTOCOL_VERSION,
                kind: self.kind,
                content: self.content,
                more: i + 1 < frames,
                route: self.route,
                // A chunk is at most MAX_FRAME (1 MiB) long.
                len: chunk.len() as u32,
                request: self.request,
            }
            .encode(&mut e);
            e.raw(chunk);
        }
        *out = e.0;
        Ok(())
    }

    /// The message as frames in a new buffer (see [`Message::encode`]).
    pub fn to_frames(&self, limits: &Limits) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        self.encode(limits, &mut out)?;
        Ok(out)
    }
}

/// How large a message may be. A receiver refuses a frame as soon as its header shows the
/// message would cross a limit; memory grows only with bytes actually received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    max_message: usize,
}

impl Limits {
    /// After the handshake: 64 MiB per message.
    pub const DEFAULT: Limits = Limits {
        max_message: 64 << 20,
    };
    /// Before authentication: 4 KiB, one frame.
    pub const HANDSHAKE: Limits = Limits { max_message: 4096 };

    /// At most `max_message` payload bytes per message.
    pub fn new(max_message: usize) -> Limits {
        Limits { max_message }
    }

    /// The largest message.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// The largest frame payload: [`MAX_FRAME`], or less when messages are smaller.
    pub fn max_frame(&self) -> usize {
        self.max_message.min(MAX_FRAME)
    }

    /// The most frames one message may take (what [`Message::encode`] uses for the largest
    /// message; an empty message is one frame).
    pub fn max_frames(&self) -> usize {
        self.max_message.div_ceil(MAX_FRAME).max(1)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The fixed header of a frame (see the crate docs for the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    version: u16,
    kind: MessageKind,
    content: ContentKind,
    more: bool,
    route: Route,
    len: u32,
    request: RequestId,
}

impl Header {
    /// Decodes a header that has already passed [`Header::check_prefix`].
    fn parse(bytes: &[u8; HEADER_LEN], at: u64) -> Result<Header, FrameError> {
        let mut d = Dec::new(bytes);
        Header::check_prefix(bytes, at)?;
        Header::decode(&mut d).map_err(|e| match e {
            DecodeError::BadValue { field, value, .. } => {
                FrameError::UnknownCode { at, field, value }
            }
            // A header is decoded from exactly HEADER_LEN bytes: nothing else can fail.
            _ => FrameError::UnknownCode {
                at,
                field: "header",
                value: 0,
            },
        })
    }

    /// Magic and version: the part that is the same in every version.
    fn check_prefix(bytes: &[u8], at: u64) -> Result<(), FrameError> {
        let mut found = [0u8; 4];
        let n = bytes.len().min(4);
        found[..n].copy_from_slice(&bytes[..n]);
        if found[..n] != MAGIC[..n] {
            return Err(FrameError::BadMagic {
                at,
                found,
                expected: MAGIC,
            });
        }
        if let Some(v) = bytes.get(4..6) {
            let theirs = u16::from_le_bytes([v[0], v[1]]);
            if theirs != PROTOCOL_VERSION {
                return Err(FrameError::Version {
                    at,
                    ours: PROTOCOL_VERSION,
                    theirs,
                });
            }
        }
        Ok(())
    }
}

impl Codec for Header {
    fn encode(&self, e: &mut Enc) {
        e.raw(&MAGIC)
            .u16(self.version)
            .u8(self.kind.code())
            .u8(self.content.code())
            .u8(if self.more { FLAG_MORE } else { 0 })
            .u8(self.route.hops)
            .u16(0)
            .u32(self.len)
            .u64(self.request.0)
            .u32(self.route.agent.0);
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        fn bad(field: &'static str, at: usize, value: impl Into<u64>) -> DecodeError {
            DecodeError::BadValue {
                field,
                at,
                value: value.into(),
            }
        }
        d.take(4, "magic")?;
        let version = d.u16("version")?;
        let at = d.pos();
        let kind = d.u8("message kind")?;
        let kind = MessageKind::from_code(kind).ok_or(bad("message kind", at, kind))?;
        let content = d.u8("content kind")?;
        let content = ContentKind::from_code(content).ok_or(bad("content kind", at, content))?;
        let flags = d.u8("flags")?;
        if flags & !FLAG_MORE != 0 {
            return Err(bad("flags", at, flags));
        }
        let hops = d.u8("hops")?;
        if hops > MAX_HOPS {
            return Err(bad("hops", at, hops));
        }
        let reserved = d.u16("reserved")?;
        if reserved != 0 {
            return Err(bad("reserved", at, reserved));
        }
        let len = d.u32("payload length")?;
        let request = RequestId(d.u64("request id")?);
        let agent = AgentId(d.u32("route")?);
        Ok(Header {
            version,
            kind,
            content,
            more: flags & FLAG_MORE != 0,
            route: Route { agent, hops },
            len,
            request,
        })
    }
}

/// What one [`Decoder::feed`] did: how many bytes it consumed, and the message they
/// completed, if any. Bytes past `consumed` were not looked at; feed them next.
#[derive(Debug)]
#[non_exhaustive]
pub struct Progress<T> {
    /// Bytes consumed from the input.
    pub consumed: usize,
    /// What they completed.
    pub output: Option<T>,
}

/// The frame decoder: a state machine that consumes bytes and emits whole messages (sans-IO;
/// the caller reads and feeds). Bounded: a header is checked (magic and version first) before
/// its payload is accepted; a payload grows only with the bytes that arrive, never to what a
/// header claims; the frames of one message must be consecutive and alike. After an error
/// the decoder keeps returning it.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    head: [u8; HEADER_LEN],
    head_len: usize,
    /// The current frame's header and the payload bytes it still expects.
    frame: Option<(Header, usize)>,
    /// The message being reassembled and its frame count.
    partial: Option<(Message, usize)>,
    /// Bytes consumed so far.
    offset: u64,
    /// Offset of the current frame.
    frame_start: u64,
    failed: Option<FrameError>,
}

impl Decoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            head: [0; HEADER_LEN],
            head_len: 0,
            frame: None,
            partial: None,
            offset: 0,
            frame_start: 0,
            failed: None,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Enforces `limits` from the next frame on (after the handshake, say).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Bytes consumed so far (the offset errors give).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True between messages, where the stream may end cleanly.
    pub fn is_idle(&self) -> bool {
        self.head_len == 0 && self.frame.is_none() && self.partial.is_none()
    }

    /// The stream ended: an error if it ended inside a frame or a message.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.is_idle() {
            return Ok(());
        }
        let at = self.frame_start;
        let have = self.offset - self.frame_start;
        let wanted = match &self.frame {
            Some((h, _)) => HEADER_LEN as u64 + u64::from(h.len),
            // Between frames of a message: the next frame's header is missing.
            None => HEADER_LEN as u64,
        };
        Err(FrameError::Truncated { at, have, wanted })
    }

    /// Consumes bytes from `data` up to the end of the next message (or all of them).
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress<Message>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut consumed = 0;
        let result = self.feed_inner(data, &mut consumed);
        self.offset += consumed as u64;
        match result {
            Ok(output) => Ok(Progress { consumed, output }),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    fn feed_inner(
        &mut self,
        mut data: &[u8],
        consumed: &mut usize,
    ) -> Result<Option<Message>, FrameError> {
        loop {
            if self.frame.is_none() {
                if data.is_empty() {
                    return Ok(None);
                }
                if self.head_len == 0 {
                    self.frame_start = self.offset + *consumed as u64;
                }
                let n = (HEADER_LEN - self.head_len).min(data.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&data[..n]);
                self.head_len += n;
                data = &data[n..];
                *consumed += n;
                // Wrong magic or version is named as soon as its bytes are in.
                Header::check_prefix(&self.head[..self.head_len], self.frame_start)?;
                if self.head_len < HEADER_LEN {
                    return Ok(None);
                }
                self.head_len = 0;
                let header = Header::parse(&self.head, self.frame_start)?;
                self.start_frame(header)?;
            }
            let Some((header, left)) = &mut self.frame else {
                continue;
            };
            let n = (*left).min(data.len());
            if let Some((msg, _)) = &mut self.partial {
                msg.payload.extend_from_slice(&data[..n]);
            }
            *left -= n;
            data = &data[n..];
            *consumed += n;
            if *left > 0 {
                return Ok(None);
            }
            let more = header.more;
            self.frame = None;
            if !more {
                return Ok(self.partial.take().map(|(m, _)| m));
            }
        }
    }

    /// Checks a new frame's header against the limits and the message being reassembled.
    fn start_frame(&mut self, header: Header) -> Result<(), FrameError> {
        let at = self.frame_start;
        let len = header.len as usize;
        if len > self.limits.max_frame() {
            return Err(FrameError::FrameTooLarge {
                at,
                len: u64::from(header.len),
                limit: self.limits.max_frame() as u64,
            });
        }
        let (so_far, frames) = match &self.partial {
            Some((msg, frames)) => {
                if msg.kind != header.kind
                    || msg.content != header.content
                    || msg.request != header.request
                    || msg.route != header.route
                {
                    return Err(FrameError::Interleaved {
                        at,
                        expected: msg.kind,
                        got: header.kind,
                    });
                }
                (msg.payload.len(), *frames + 1)
            }
            None => (0, 1),
        };
        let total = so_far.saturating_add(len);
        if total > self.limits.max_message || frames > self.limits.max_frames() {
            return Err(FrameError::MessageTooLarge {
                at,
                len: total as u64,
                frames: frames as u64,
                limit: self.limits.max_message as u64,
                max_frames: self.limits.max_frames() as u64,
            });
        }
        match &mut self.partial {
            Some((_, n)) => *n = frames,
            None => {
                let msg = Message {
                    kind: header.kind,
                    content: header.content,
                    request: header.request,
                    route: header.route,
                    payload: Vec::new(),
                };
                self.partial = Some((msg, 1));
            }
        }
        self.frame = Some((header, len));
        Ok(())
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
