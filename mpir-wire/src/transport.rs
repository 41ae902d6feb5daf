//! Blocking transports over the sans-IO core: a [`Connection`] over any [`Transport`] (a
//! pipe, a socket, TLS), established by the handshake, every wait bounded by a timeout.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::error::{HandshakeError, Phase, WireError};
use crate::frame::{AgentId, Decoder, Limits, Message};
use crate::handshake::{AgentHandshake, FrontEndHandshake, Hello, Welcome};
use crate::token::TokenBook;

/// A byte stream whose waits can be bounded: every read and write blocks at most the
/// timeout last set, then fails with [`io::ErrorKind::WouldBlock`] or
/// [`io::ErrorKind::TimedOut`].
pub trait Transport: Read + Write {
    /// Bounds each following read and write to `timeout`.
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;

    /// Ends the stream in order (TLS: `close_notify`); by default, flushes.
    fn close(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// A boxed transport is one: a front end keeps agents reached by different carriers (pipes,
/// TLS) side by side as `Connection<Box<dyn Transport + Send>>`.
impl<T: Transport + ?Sized> Transport for Box<T> {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        (**self).set_timeout(timeout)
    }

    fn close(&mut self) -> io::Result<()> {
        (**self).close()
    }
}

/// `Some(timeout)`, at least a millisecond (a zero timeout means "none" to the socket API).
fn socket_timeout(timeout: Duration) -> Option<Duration> {
    Some(timeout.max(Duration::from_millis(1)))
}

impl Transport for TcpStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(socket_timeout(timeout))?;
        self.set_write_timeout(socket_timeout(timeout))
    }
}

impl Transport for UnixStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(socket_timeout(timeout))?;
        self.set_write_timeout(socket_timeout(timeout))
    }
}

/// A pair of pipe ends (a child's stdout and stdin, or the agent's own stdin and stdout as
/// the engine forwards them): reads and writes wait with `poll(2)`, bounded by the timeout.
/// Writes go in pieces of at most `PIPE_BUF` bytes, each after the pipe said it has room,
/// so a peer that stops reading costs a timeout, not a hang.
#[derive(Debug)]
pub struct Pipe<R, W> {
    reader: R,
    writer: W,
    timeout: Duration,
}

/// What one write to a pipe may be and still never block once `poll` reports room.
const PIPE_BUF: usize = 4096;

impl<R: Read + AsFd, W: Write + AsFd> Pipe<R, W> {
    /// Reads from `reader`, writes to `writer`; waits bounded by 30 s until
    /// [`Transport::set_timeout`].
    pub fn new(reader: R, writer: W) -> Pipe<R, W> {
        Pipe {
            reader,
            writer,
            timeout: Duration::from_secs(30),
        }
    }

    /// The two ends back.
    pub fn into_inner(self) -> (R, W) {
        (self.reader, self.writer)
    }
}

impl Pipe<std::fs::File, std::fs::File> {
    /// This process's stdin and stdout (duplicated descriptors), as an agent whose engine
    /// forwards its stdio uses them. Nothing else may read stdin or write stdout afterwards
    /// (a stray print would corrupt the framing: point fd 1 elsewhere once this is made).
    pub fn stdio() -> io::Result<Pipe<std::fs::File, std::fs::File>> {
        let reader = io::stdin().as_fd().try_clone_to_owned()?;
        let writer = io::stdout().as_fd().try_clone_to_owned()?;
        Ok(Pipe::new(reader.into(), writer.into()))
    }
}

/// Waits until `fd` is ready for `events` or the timeout passes.
fn wait(fd: BorrowedFd<'_>, events: PollFlags, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms =
            PollTimeout::try_from(left.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(fd, events)];
        match poll(&mut fds, ms) {
            Ok(0) => return Err(io::ErrorKind::TimedOut.into()),
            // Ready, or hung up / in error: the read or write reports which.
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) if Instant::now() < deadline => continue,
            Err(nix::errno::Errno::EINTR) => return Err(io::ErrorKind::TimedOut.into()),
            Err(e) => return Err(e.into()),
        }
    }
}

impl<R: Read + AsFd, W: Write + AsFd> Read for Pipe<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        wait(self.reader.as_fd(), PollFlags::POLLIN, self.timeout)?;
        self.reader.read(buf)
    }
}

impl<R: Read + AsFd, W: Write + AsFd> Write for Pipe<R, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        wait(self.writer.as_fd(), PollFlags::POLLOUT, self.timeout)?;
        let n = buf.len().min(PIPE_BUF);
        self.writer.write(&buf[..n])
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

impl<R: Read + AsFd, W: Write + AsFd> Transport for Pipe<R, W> {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.timeout = timeout;
        Ok(())
    }
}

/// Bounds of a connection.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Options {
    /// The whole handshake (TLS and hello/welcome) must end within this (default 10 s).
    pub handshake_timeout: Duration,
    /// After the handshake, the longest a single wait for the peer may take (default 60 s).
    pub silence_timeout: Duration,
    /// What this side accepts after the handshake (default [`Limits::DEFAULT`], 64 MiB).
    pub limits: Limits,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            handshake_timeout: Duration::from_secs(10),
            silence_timeout: Duration::from_secs(60),
            limits: Limits::DEFAULT,
        }
    }
}

impl Options {
    /// The same options with the handshake bounded by `timeout`.
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Options {
        self.handshake_timeout = timeout;
        self
    }

    /// The same options with each later wait bounded by `timeout`.
    pub fn with_silence_timeout(mut self, timeout: Duration) -> Options {
        self.silence_timeout = timeout;
        self
    }

    /// The same options accepting messages up to `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Options {
        self.limits = limits;
        self
    }
}

/// How the front end admits an agent.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Gate<'a> {
    /// By its one-time token (required over TCP).
    Tokens(&'a TokenBook),
    /// Any agent: the engine that started it authenticated the pipe; the agent gets this id.
    Engine(AgentId),
}

/// An agent the front end accepted.
#[derive(Debug)]
#[non_exhaustive]
pub struct Accepted<T> {
    /// The connection, ready for requests.
    pub connection: Connection<T>,
    /// What the agent said.
    pub hello: Hello,
    /// The id it was given.
    pub agent_id: AgentId,
}

/// Size of the receive buffer.
const RX_BUF: usize = 64 << 10;

/// An established connection: whole messages in and out, bounded by the limits both sides
/// announced and by timeouts.
#[derive(Debug)]
pub struct Connection<T> {
    transport: T,
    decoder: Decoder,
    /// What the peer accepts.
    peer_limits: Limits,
    silence: Duration,
    rx: Box<[u8]>,
    rx_start: usize,
    rx_end: usize,
}

/// Maps an I/O error to a timeout or an I/O error of `during`.
fn io_error(e: io::Error, during: Phase, after: Duration) -> WireError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => WireError::Timeout { during, after },
        _ => WireError::Io { during, source: e },
    }
}

impl<T: Transport> Connection<T> {
    fn new(transport: T) -> Connection<T> {
        Connection {
            transport,
            decoder: Decoder::new(Limits::HANDSHAKE),
            peer_limits: Limits::HANDSHAKE,
            silence: Duration::from_secs(60),
            rx: vec![0; RX_BUF].into_boxed_slice(),
            rx_start: 0,
            rx_end: 0,
        }
    }

    /// The agent's side over `transport` (already through TLS, if any): sends `hello`, waits
    /// for the front end's answer, bounded by `options.handshake_timeout`.
    pub fn agent(
        transport: T,
        hello: &Hello,
        options: &Options,
    ) -> Result<(Connection<T>, Welcome), WireError> {
        let mut conn = Connection::new(transport);
        let deadline = Instant::now() + options.handshake_timeout;
        let mut hello = hello.clone();
        hello.max_message = options.limits.max_message() as u64;
        let mut hs = AgentHandshake::new(&hello);
        conn.write_before(&hs.take_outgoing(), deadline, options)?;
        let welcome = loop {
            let data = conn.fill_before(deadline, options)?;
            let p = match data {
                Some(data) => hs.feed(data).map_err(WireError::Handshake)?,
                None => {
                    return Err(match hs.finish() {
                        Some(source) => WireError::Frame {
                            during: Phase::Handshake,
                            source,
                        },
                        None => WireError::Closed {
                            during: Phase::Handshake,
                        },
                    });
                }
            };
            conn.rx_start += p.consumed;
            if let Some(w) = p.output {
                break w;
            }
        };
        conn.established(options, Limits::new(usize_of(welcome.max_message)))?;
        Ok((conn, welcome))
    }

    /// The front end's side over `transport` (already through TLS, if any): waits for the
    /// agent's hello, admits it through `gate`, answers; bounded by
    /// `options.handshake_timeout`. A refused agent has been told why before this returns
    /// [`HandshakeError::Refused`].
    pub fn front_end(
        transport: T,
        gate: &Gate<'_>,
        options: &Options,
    ) -> Result<Accepted<T>, WireError> {
        let mut conn = Connection::new(transport);
        let deadline = Instant::now() + options.handshake_timeout;
        let mut hs = FrontEndHandshake::new();
        let hello = loop {
            let Some(data) = conn.fill_before(deadline, options)? else {
                return Err(match hs.finish() {
                    Some(source) => WireError::Frame {
                        during: Phase::Handshake,
                        source,
                    },
                    None => WireError::Closed {
                        during: Phase::Handshake,
                    },
                });
            };
            match hs.feed(data) {
                Ok(p) => {
                    conn.rx_start += p.consumed;
                    if let Some(h) = p.output {
                        break h;
                    }
                }
                Err(e) => {
                    // Tell the agent why (best effort: it may be gone), then fail.
                    let _ = conn.write_before(&hs.take_outgoing(), deadline, options);
                    return Err(WireError::Handshake(e));
                }
            }
        };
        let admitted = match gate {
            Gate::Tokens(book) => book.admit(&hello),
            Gate::Engine(id) => Ok(*id),
        };
        match admitted {
            Ok(agent_id) => {
                hs.welcome(&Welcome::new(agent_id, options.limits));
                conn.write_before(&hs.take_outgoing(), deadline, options)?;
                let agent_accepts = Limits::new(usize_of(hello.max_message));
                conn.established(options, agent_accepts)?;
                Ok(Accepted {
                    connection: conn,
                    hello,
                    agent_id,
                })
            }
            Err(refusal) => {
                hs.refuse(&refusal);
                let _ = conn.write_before(&hs.take_outgoing(), deadline, options);
                Err(WireError::Handshake(HandshakeError::Refused(refusal)))
            }
        }
    }

    fn established(&mut self, options: &Options, peer_limits: Limits) -> Result<(), WireError> {
        self.decoder.set_limits(options.limits);
        self.peer_limits = peer_limits;
        self.silence = options.silence_timeout;
        self.transport
            .set_timeout(self.silence)
            .map_err(|e| io_error(e, Phase::Receive, self.silence))
    }

    /// Buffered bytes, or newly read ones before `deadline`; `None` at end of stream.
    fn fill_before(
        &mut self,
        deadline: Instant,
        options: &Options,
    ) -> Result<Option<&[u8]>, WireError> {
        if self.rx_start == self.rx_end {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WireError::Timeout {
                    during: Phase::Handshake,
                    after: options.handshake_timeout,
                });
            }
            let timeout = |e| io_error(e, Phase::Handshake, options.handshake_timeout);
            self.transport.set_timeout(left).map_err(timeout)?;
            if !self.read_more().map_err(timeout)? {
                return Ok(None);
            }
        }
        Ok(Some(&self.rx[self.rx_start..self.rx_end]))
    }

    /// Reads into the empty buffer; false at end of stream.
    fn read_more(&mut self) -> io::Result<bool> {
        loop {
            match self.transport.read(&mut self.rx) {
                Ok(0) => return Ok(false),
                // TLS without `close_notify`: an end like any other; the framing itself
                // tells a cut inside a message from a close between messages.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
                Ok(n) => {
                    self.rx_start = 0;
                    self.rx_end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn write_before(
        &mut self,
        bytes: &[u8],
        deadline: Instant,
        options: &Options,
    ) -> Result<(), WireError> {
        let timeout = |e| io_error(e, Phase::Handshake, options.handshake_timeout);
        let left = deadline.saturating_duration_since(Instant::now());
        self.transport.set_timeout(left).map_err(timeout)?;
        self.transport.write_all(bytes).map_err(timeout)?;
        self.transport.flush().map_err(timeout)
    }

    /// Sends `msg` (refused before anything is written if it is over the peer's limit).
    pub fn send(&mut self, msg: &Message) -> Result<(), WireError> {
        let frames = msg
            .to_frames(&self.peer_limits)
            .map_err(|source| WireError::Frame {
                during: Phase::Send,
                source,
            })?;
        let silence = self.silence;
        let err = |e| io_error(e, Phase::Send, silence);
        self.transport.write_all(&frames).map_err(err)?;
        self.transport.flush().map_err(err)
    }

    /// Receives the next message. A clean end of stream between messages is
    /// [`WireError::Closed`]; inside a frame, [`crate::FrameError::Truncated`]. Each wait is
    /// bounded by the silence timeout. Frame offsets in errors count from the end of the
    /// handshake.
    pub fn recv(&mut self) -> Result<Message, WireError> {
        loop {
            if self.rx_start < self.rx_end {
                let p = self
                    .decoder
                    .feed(&self.rx[self.rx_start..self.rx_end])
                    .map_err(|source| WireError::Frame {
                        during: Phase::Receive,
                        source,
                    })?;
                self.rx_start += p.consumed;
                if let Some(msg) = p.output {
                    return Ok(msg);
                }
            }
            let more = self
                .read_more()
                .map_err(|e| io_error(e, Phase::Receive, self.silence))?;
            if !more {
                return Err(match self.decoder.finish() {
                    Ok(()) => WireError::Closed {
                        during: Phase::Receive,
                    },
                    Err(source) => WireError::Frame {
                        during: Phase::Receive,
                        source,
                    },
                });
            }
        }
    }

    /// Ends the connection in order (over TLS, the peer then reads a clean end). Dropping a
    /// connection closes it too, without that notice.
    pub fn close(mut self) -> Result<(), WireError> {
        let silence = self.silence;
        self.transport
            .close()
            .map_err(|e| io_error(e, Phase::Send, silence))
    }

    /// Bounds each later wait to `timeout`.
    pub fn set_silence_timeout(&mut self, timeout: Duration) -> Result<(), WireError> {
        self.silence = timeout;
        self.transport
            .set_timeout(timeout)
            .map_err(|e| io_error(e, Phase::Receive, timeout))
    }

    /// The largest message the peer accepts.
    pub fn peer_limits(&self) -> Limits {
        self.peer_limits
    }

    /// The transport.
    pub fn get_ref(&self) -> &T {
        &self.transport
    }

    /// The transport, mutably (writing to it directly breaks the framing).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The same connection (its state, buffered bytes and limits kept) with its transport
    /// boxed: connections of different carriers (a pipe, a [`crate::TlsStream`] from
    /// [`crate::TlsListener::accept`]) side by side in one collection.
    pub fn boxed<'a>(self) -> Connection<Box<dyn Transport + Send + 'a>>
    where
        T: Send + 'a,
    {
        Connection {
            transport: Box::new(self.transport),
            decoder: self.decoder,
            peer_limits: self.peer_limits,
            silence: self.silence,
            rx: self.rx,
            rx_start: self.rx_start,
            rx_end: self.rx_end,
        }
    }
}

/// A peer's `u64` limit as a `usize` (saturating on narrow targets).
fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
