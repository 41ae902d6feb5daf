//! The transport between `mpir agent` (one per node, reading that node's ranks) and the front
//! end: one versioned, bounded frame format, a hello/welcome handshake with one-time tokens,
//! and two carriers — the pipe a launcher's engine forwards (srun, hydra, ssh), or TCP with
//! TLS 1.3 to a certificate pinned by fingerprint (ORTE's tool daemons).
//!
//! # Layers
//!
//! - **Sans-IO core** (no sockets): [`Message::encode`] and the [`Decoder`] state machine for
//!   frames; [`AgentHandshake`] and [`FrontEndHandshake`] for the handshake. Feed them bytes,
//!   they return messages and the bytes to send (the rustls / quinn-proto pattern).
//! - **Tokens**: [`Token`] and the front end's [`TokenBook`].
//! - **Blocking transports**: [`Connection`] over any [`Transport`] — a [`Pipe`] (a pair of
//!   file descriptors), a `UnixStream`, a `TcpStream`, a [`TlsStream`] — with every wait
//!   bounded by a timeout. [`TlsListener`] is the front end's socket, [`TlsStream::connect`]
//!   the agent's way out.
//!
//! Payloads are opaque bytes tagged with a [`ContentKind`] (JSON documents, a compact binary
//! form); requests and replies are paired by [`RequestId`]; a [`Route`] names the node a
//! message comes from or goes to, so agents can relay for their children in a tree.
//!
//! ```
//! use mpir_wire::{Connection, ContentKind, Fingerprint, Gate, Hello, Message, MessageKind,
//!                 Options, ServerIdentity, TlsListener, TlsStream, TokenBook};
//! use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Front end: an ephemeral identity, a listener, a token for node2's agent.
//! let identity = ServerIdentity::generate()?;
//! let listener = TlsListener::bind("127.0.0.1:0".parse()?, &identity)?;
//! let book = TokenBook::new(Duration::from_secs(3600));
//! let issued = book.issue("node2")?;
//! // The agent's arguments: address and fingerprint (public). The token goes to it by a
//! // private file or its environment, never its arguments.
//! let (addr, pin) = (listener.local_addr()?, listener.fingerprint().to_string());
//! let token = issued.token;
//!
//! // The agent on node2 (another process on another node in real life): connect out, pin
//! // the certificate, prove itself, answer.
//! let agent = std::thread::spawn(move || -> Result<(), mpir_wire::WireError> {
//!     let pin: Fingerprint = pin.parse().expect("a fingerprint");
//!     let tls = TlsStream::connect(addr, &pin, &Options::default())?;
//!     let hello = Hello::new("node2", std::process::id()).with_token(token);
//!     let (mut conn, _welcome) = Connection::agent(tls, &hello, &Options::default())?;
//!     let request = conn.recv()?;
//!     let reply = Message::new(MessageKind::Reply, ContentKind::Json, b"{\"ranks\":[]}".to_vec())
//!         .with_request(request.request);
//!     conn.send(&reply)
//! });
//!
//! // The front end accepts it (one thread per pending handshake in real life).
//! let gate = Gate::Tokens(&book);
//! let mut accepted = listener.accept(Duration::from_secs(10), &gate, &Options::default())?;
//! assert_eq!(accepted.agent_id, issued.agent_id);
//! let ask = Message::new(MessageKind::Request, ContentKind::Json, b"{}".to_vec());
//! accepted.connection.send(&ask)?;
//! assert_eq!(accepted.connection.recv()?.payload, b"{\"ranks\":[]}");
//! agent.join().expect("the agent thread")?;
//! # Ok(()) }
//! ```
//!
//! # Frame format
//!
//! A message is one or more consecutive frames; each is a 28-byte header and at most
//! [`MAX_FRAME`] (1 MiB) payload bytes. Integers are little-endian.
//!
//! | offset | size | field | rule |
//! |---|---|---|---|
//! | 0 | 4 | magic | `MPRW` ([`MAGIC`]); anything else is [`FrameError::BadMagic`] |
//! | 4 | 2 | version | [`PROTOCOL_VERSION`]; another is [`FrameError::Version`] naming both. Offsets 0–5 never change between versions |
//! | 6 | 1 | message kind | [`MessageKind`]: hello, welcome, refusal, request, reply, notice, goodbye |
//! | 7 | 1 | content kind | [`ContentKind`]: empty, control (this crate's encoding), JSON, binary |
//! | 8 | 1 | flags | bit 0: more frames of this message follow; other bits must be 0 |
//! | 9 | 1 | hops | relays passed, at most [`MAX_HOPS`] |
//! | 10 | 2 | reserved | 0 |
//! | 12 | 4 | payload length | of this frame, at most the receiver's frame limit |
//! | 16 | 8 | request id | [`RequestId`] |
//! | 24 | 4 | route | [`AgentId`]: origin upward, destination downward; 0 is the front end |
//!
//! The frames of one message must agree on kind, content, request and route and may not be
//! interleaved with another message's ([`FrameError::Interleaved`]). An unknown code in any
//! field is an error naming the field and the frame's stream offset.
//!
//! The handshake messages are `control` payloads, each one `Codec` definition (encoding and decoding side by side) for
//! both directions: [`Hello`] = node name (`u16` length + UTF-8, ≤ 255 bytes), pid `u32`,
//! largest accepted message `u64`, token flag `u8` (+ 32 token bytes); [`Welcome`] = node id
//! `u32`, largest accepted message `u64`; [`Refusal`] = reason `u8` ([`RefusalReason`]),
//! detail (`u16` length + UTF-8, ≤ 1024 bytes).
//!
//! # Bounds
//!
//! | what | bound |
//! |---|---|
//! | a message before the handshake ends | [`Limits::HANDSHAKE`]: 4 KiB, one frame |
//! | a message after it | [`Limits::DEFAULT`]: 64 MiB (configurable, [`Options::limits`]); each side announces its own and the sender refuses to exceed the peer's ([`FrameError::Oversize`]) |
//! | a frame | 1 MiB ([`MAX_FRAME`]); frames per message: the message limit / 1 MiB |
//! | memory for a message | grows with the bytes received, never to what a header claims |
//! | the handshake | [`Options::handshake_timeout`] (10 s) for TLS and hello/welcome together |
//! | any later wait | [`Options::silence_timeout`] (60 s) per read or write |
//! | relays | [`MAX_HOPS`] (64) |
//! | token text read | 66 bytes |
//!
//! Bad input is a typed error ([`FrameError`], [`DecodeError`], [`HandshakeError`],
//! [`WireError`]) naming what and where; never a panic.
//!
//! # Security model
//!
//! **Over a pipe** the engine that started the agent (srun with munge, hydra or pdsh over
//! ssh) authenticated both ends and carries the bytes between two processes of the user; the
//! hello/welcome still runs (version check, node id) and the front end may still require a
//! token ([`Gate::Tokens`]) or admit whoever is on the pipe ([`Gate::Engine`]). The pipe is
//! as private as the engine makes it: ssh encrypts it; Slurm's and hydra's I/O forwarding
//! authenticate their daemons but carry the bytes in clear between nodes, where a token in a
//! hello adds little (it is consumed by its first use, so a copy seen later is useless, but
//! the rest of the conversation is readable on the network).
//!
//! **Over TCP** (the agent connects out; agents never listen):
//!
//! - *The front end proves itself to the agent* by TLS 1.3 with an ephemeral self-signed
//!   certificate (ECDSA P-256, made at start, key never written anywhere). The agent pins it
//!   by its SHA-256 [`Fingerprint`], given in its arguments: public, it grants nothing. The
//!   agent accepts no other certificate (no CA, no name check) and still verifies the
//!   handshake signature with the provider's algorithms, so only the key's holder passes. A
//!   wrong certificate is [`WireError::FingerprintMismatch`] naming both fingerprints.
//! - *The agent proves itself to the front end* by a one-time [`Token`] sent inside that TLS
//!   session in its [`Hello`]: 256 bits from the operating system's generator, one per
//!   expected node, compared in constant time, consumed by its first use, expiring with the
//!   session ([`TokenBook::new`]'s lifetime). Missing, unknown (including a token issued for
//!   another node), reused and expired tokens are refused with the reason told to the agent,
//!   and counted ([`TokenBook::refusals`]).
//! - *Where the token travels*: never on a command line (`/proc/PID/cmdline` is readable by
//!   every user of the node). Either
//!   - **a token file** ([`Token::write_file`] / [`Token::take_file`]): mode 0600, created
//!     new (never following or reusing a planted file) in a directory of the user's only
//!     (0700, checked on both sides), read once and deleted by the agent. Needs a file system
//!     both ends see (a shared home) or a way to place it; the secret rests on disk until the
//!     agent starts. Best where the engine forwards no environment (ORTE's tool daemons).
//!   - **the environment** ([`Token::from_env`]): no file, but the value stays readable in
//!     `/proc/PID/environ` for the agent's whole life — only to its own user and root, who
//!     can read the agent's memory anyway — and is inherited by its children unless removed
//!     from their environment; an engine may also pass the environment on a remote command
//!     line (ssh and ORTE's rsh launcher do), where other users could see it: use it only
//!     with an engine known to forward the environment privately.
//!   - **a reader** ([`Token::read_from`]: stdin, say) where the engine forwards stdin.
//! - *An attacker on the network* sees that connections exist and their sizes; cannot read
//!   or change what is in them, cannot pose as the front end (no key) or as an agent (no
//!   token; a replayed one is refused). It can break connections (the session reports the
//!   node as unreachable).
//! - *Another user on a node* sees the agent's arguments (address, fingerprint, token file
//!   path: nothing secret); cannot read the token file or the agent's environment; may
//!   connect to the front end's port and is refused, counted, within the handshake bounds
//!   (4 KiB, 10 s). It could use up a token by connecting first only if it had read it.
//! - *The same user or root on a node* can read everything the agent can, including its
//!   memory: out of scope, as they can already read the ranks.

mod codec;
mod error;
mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod handshake;
mod tls;
mod token;
mod transport;

pub use error::{DecodeError, FrameError, HandshakeError, Phase, TokenError, WireError};
pub use frame::{
    AgentId, ContentKind, Decoder, HEADER_LEN, Limits, MAGIC, MAX_FRAME, MAX_HOPS, Message,
    MessageKind, PROTOCOL_VERSION, Progress, RequestId, Route,
};
pub use handshake::{
    AgentHandshake, FrontEndHandshake, Hello, MAX_NODE_NAME, MAX_REFUSAL_DETAIL, Refusal,
    RefusalReason, Welcome,
};
pub use tls::{BadFingerprint, Fingerprint, ServerIdentity, TlsListener, TlsStream};
pub use token::{Issued, RefusalCounts, TOKEN_LEN, Token, TokenBook};
pub use transport::{Accepted, Connection, Gate, Options, Pipe, Transport};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
