//! The crate's errors: what went wrong, where in the stream, in which phase.

use std::io;
use std::time::Duration;

use crate::frame::MessageKind;
use crate::handshake::Refusal;
use crate::tls::Fingerprint;

/// Bytes that are not a frame of this protocol. `at` is the stream offset of the frame's
/// first byte (bytes fed to the [`crate::Decoder`] before it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The frame does not start with the protocol's magic.
    #[error("not an mpir-wire frame at byte {at}: magic {found:02x?}, expected {expected:02x?}")]
    BadMagic {
        /// Offset of the frame.
        at: u64,
        /// The four bytes found.
        found: [u8; 4],
        /// [`crate::MAGIC`].
        expected: [u8; 4],
    },
    /// The peer speaks another protocol version.
    #[error(
        "the peer speaks protocol version {theirs}, this side version {ours} (frame at byte {at})"
    )]
    Version {
        /// Offset of the frame.
        at: u64,
        /// [`crate::PROTOCOL_VERSION`].
        ours: u16,
        /// The version in the peer's frame.
        theirs: u16,
    },
    /// A header field holds a value this version does not define.
    #[error("frame at byte {at}: unknown {field} {value:#04x}")]
    UnknownCode {
        /// Offset of the frame.
        at: u64,
        /// Which field: `message kind`, `content kind`, `flags`, `reserved`, `hops`.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// A frame's announced payload is longer than a frame may be.
    #[error("frame at byte {at} announces {len} payload bytes, the limit is {limit}")]
    FrameTooLarge {
        /// Offset of the frame.
        at: u64,
        /// The announced length.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The frames of one message add up to more than a message may be, or to more frames.
    #[error(
        "message ending at the frame at byte {at} would be {len} bytes in {frames} frames, \
         the limits are {limit} bytes and {max_frames} frames"
    )]
    MessageTooLarge {
        /// Offset of the frame that crossed a limit.
        at: u64,
        /// The message's length with that frame.
        len: u64,
        /// Its frames with that one.
        frames: u64,
        /// The byte limit in force.
        limit: u64,
        /// The frame limit in force.
        max_frames: u64,
    },
    /// A continuation frame does not belong to the message being reassembled.
    #[error(
        "frame at byte {at} is a {got} frame inside a {expected} message (frames may not interleave)"
    )]
    Interleaved {
        /// Offset of the frame.
        at: u64,
        /// The kind of the message being reassembled.
        expected: MessageKind,
        /// The kind of the intruding frame.
        got: MessageKind,
    },
    /// The stream ended inside a frame.
    #[error("the stream ended inside the frame at byte {at}: {have} of {wanted} bytes")]
    Truncated {
        /// Offset of the frame.
        at: u64,
        /// Bytes of it received (header included).
        have: u64,
        /// Bytes it needed (header, then header and payload).
        wanted: u64,
    },
    /// The message to send is larger than the limits allow.
    #[error("a {kind} message of {len} bytes is over the limit of {limit}")]
    Oversize {
        /// Its kind.
        kind: MessageKind,
        /// Its payload length.
        len: u64,
        /// The limit.
        limit: u64,
    },
}

/// A control payload (hello, welcome, refusal) that does not decode. `at` is the offset in
/// the payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Too few bytes for a field.
    #[error("{field} at payload byte {at}: wanted {wanted} bytes, {left} left")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
        /// Bytes it needs.
        wanted: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// A string longer than its field allows.
    #[error("{field} at payload byte {at}: {len} bytes, the limit is {limit}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
        /// Its announced length.
        len: usize,
        /// The field's limit.
        limit: usize,
    },
    /// A string that is not UTF-8.
    #[error("{field} at payload byte {at} is not UTF-8")]
    NotUtf8 {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
    },
    /// A tag or flag byte of unknown value.
    #[error("{field} at payload byte {at}: unknown value {value}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
        /// The value.
        value: u64,
    },
    /// Bytes after the message's last field.
    #[error("{count} bytes after the end of the {message} at payload byte {at}")]
    Trailing {
        /// The message.
        message: &'static str,
        /// Where its fields ended.
        at: usize,
        /// How many bytes follow.
        count: usize,
    },
}

/// The hello/welcome exchange failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The bytes are not frames of this protocol (a version mismatch among them).
    #[error("the peer's bytes are not frames of this protocol")]
    Frame(#[source] FrameError),
    /// A handshake message did not decode.
    #[error("a {kind} message did not decode")]
    Decode {
        /// The message's kind.
        kind: MessageKind,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The peer sent a message the handshake does not expect now.
    #[error("expected {expected}, the peer sent a {got} message")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What came.
        got: MessageKind,
    },
    /// The front end refused this agent (the agent's side).
    #[error("the front end refused: {0}")]
    Refused(Refusal),
}

/// A transport failed: I/O, time, TLS, or the protocol. Each names the phase it happened in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Reading or writing failed.
    #[error("I/O error during {during}")]
    Io {
        /// The phase.
        during: Phase,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A wait for the peer took longer than its bound.
    #[error("the peer was silent for {after:?} during {during}")]
    Timeout {
        /// The phase.
        during: Phase,
        /// The bound that expired.
        after: Duration,
    },
    /// The peer closed the connection cleanly between messages.
    #[error("the peer closed the connection during {during}")]
    Closed {
        /// The phase.
        during: Phase,
    },
    /// The bytes are not frames of this protocol, or the peer died inside a frame.
    #[error("bad framing during {during}")]
    Frame {
        /// The phase.
        during: Phase,
        /// What was wrong.
        #[source]
        source: FrameError,
    },
    /// The handshake failed (refusals included).
    #[error("handshake failed")]
    Handshake(#[source] HandshakeError),
    /// The TLS server's certificate is not the pinned one (agent side).
    #[error("the server's certificate has fingerprint {presented}, the pinned one is {expected}")]
    FingerprintMismatch {
        /// The pinned fingerprint.
        expected: Fingerprint,
        /// The certificate's.
        presented: Fingerprint,
    },
    /// TLS failed for another reason.
    #[error("TLS error during {during}")]
    Tls {
        /// The phase.
        during: Phase,
        /// The error.
        #[source]
        source: rustls::Error,
    },
    /// The front end's certificate or TLS configuration could not be made.
    #[error("could not set up TLS: {what}")]
    Setup {
        /// What was being made.
        what: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// When a [`WireError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Connecting or accepting a connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// The hello/welcome exchange.
    Handshake,
    /// Sending a message.
    Send,
    /// Receiving a message.
    Receive,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connect",
            Phase::Tls => "the TLS handshake",
            Phase::Handshake => "the hello/welcome handshake",
            Phase::Send => "send",
            Phase::Receive => "receive",
        })
    }
}

/// A token could not be made, stored or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The operating system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,
    /// The text is not a token (64 hexadecimal digits).
    #[error("not a token: expected {expected} hexadecimal digits, found {found} characters")]
    Malformed {
        /// Digits expected.
        expected: usize,
        /// Characters found (the text itself is never shown).
        found: usize,
    },
    /// The environment variable is not set (or not Unicode).
    #[error("environment variable {var} holds no token")]
    NoVariable {
        /// The variable.
        var: String,
    },
    /// The token file or its directory may be read or replaced by someone else.
    #[error("{path} is unsafe for a token: {why}")]
    Unsafe {
        /// The file or directory.
        path: std::path::PathBuf,
        /// What is wrong (owner, mode, type).
        why: String,
    },
    /// Reading, writing or removing the token file failed.
    #[error("token file {path}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}
