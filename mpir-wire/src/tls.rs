//! TCP with TLS 1.3 (rustls on ring): the front end listens with an ephemeral self-signed
//! certificate; an agent connects out and accepts exactly the certificate whose SHA-256
//! fingerprint it was given — no certificate authority, no host name.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, OtherError,
    ServerConfig, ServerConnection, SignatureScheme, StreamOwned,
};
use subtle::ConstantTimeEq;

use crate::error::{Phase, WireError};
use crate::transport::{Accepted, Connection, Gate, Options, Transport};

/// The name the front end's certificate carries and agents ask for (it identifies nothing:
/// the pin does).
const SERVER_NAME: &str = "mpir-front-end";

/// A certificate's SHA-256 fingerprint, written `sha256:` and 64 hexadecimal digits. It is
/// public: an agent's arguments carry it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of_certificate(der: &[u8]) -> Fingerprint {
        let d = ring::digest::digest(&ring::digest::SHA256, der);
        let mut b = [0u8; 32];
        b.copy_from_slice(d.as_ref());
        Fingerprint(b)
    }

    /// Its 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// Text that is not a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a certificate fingerprint: expected sha256: and 64 hexadecimal digits, found {found:?}"
)]
#[non_exhaustive]
pub struct BadFingerprint {
    /// The text given (public, so shown).
    pub found: String,
}

impl FromStr for Fingerprint {
    type Err = BadFingerprint;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadFingerprint {
            found: s.chars().take(80).collect(),
        };
        let hex = s.trim().strip_prefix("sha256:").unwrap_or(s.trim());
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut b = [0u8; 32];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(b))
    }
}

/// The front end's ephemeral identity: a fresh ECDSA P-256 key and a self-signed certificate
/// for it, made at start and never written anywhere.
pub struct ServerIdentity {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
    fingerprint: Fingerprint,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

fn setup(what: &'static str) -> impl FnOnce(rcgen::Error) -> WireError {
    move |e| WireError::Setup {
        what,
        source: Box::new(e),
    }
}

impl ServerIdentity {
    /// Makes a new key and certificate (from the operating system's random number generator).
    pub fn generate() -> Result<ServerIdentity, WireError> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(setup("the key pair"))?;
        let params = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])
            .map_err(setup("the certificate parameters"))?;
        let cert = params.self_signed(&key).map_err(setup("the certificate"))?;
        let cert = cert.der().clone();
        Ok(ServerIdentity {
            fingerprint: Fingerprint::of_certificate(&cert),
            cert,
            key: key.serialize_der(),
        })
    }

    /// The certificate's fingerprint: what agents pin.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The certificate, DER-encoded.
    pub fn certificate_der(&self) -> &[u8] {
        &self.cert
    }

    fn server_config(&self) -> Result<Arc<ServerConfig>, WireError> {
        let key = PrivateKeyDer::try_from(self.key.clone()).map_err(|e| WireError::Setup {
            what: "the private key",
            source: e.into(),
        })?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .and_then(|b| {
                b.with_no_client_auth()
                    .with_single_cert(vec![self.cert.clone()], key)
            })
            .map_err(|e| WireError::Setup {
                what: "the TLS server configuration",
                source: Box::new(e),
            })?;
        // Connections are never resumed: no session tickets.
        config.send_tls13_tickets = 0;
        Ok(Arc::new(config))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What the pinning verifier reports when the certificate is not the pinned one (carried
/// through rustls as the certificate error's cause, turned into
/// [`WireError::FingerprintMismatch`]).
#[derive(Debug, thiserror::Error)]
#[error("certificate fingerprint {presented} is not the pinned {expected}")]
struct PinMismatch {
    expected: Fingerprint,
    presented: Fingerprint,
}

/// Accepts exactly the certificate with the pinned fingerprint (compared in constant time),
/// and still checks the handshake's signature with that certificate's key through the
/// provider's algorithms, so only the holder of the private key passes.
#[derive(Debug)]
struct PinnedServer {
    pin: Fingerprint,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = Fingerprint::of_certificate(end_entity);
        if bool::from(presented.0.ct_eq(&self.pin.0)) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(PinMismatch {
                    expected: self.pin,
                    presented,
                })),
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A TLS connection over TCP, either end.
#[derive(Debug)]
pub struct TlsStream {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
}

/// The rustls error inside an I/O error, if any.
fn tls_error(e: io::Error, during: Phase, timeout: Duration) -> WireError {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .cloned();
    match tls {
        Some(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(cause)))) => {
            match cause.downcast_ref::<PinMismatch>() {
                Some(m) => WireError::FingerprintMismatch {
                    expected: m.expected,
                    presented: m.presented,
                },
                None => WireError::Tls {
                    during,
                    source: rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(
                        cause,
                    ))),
                },
            }
        }
        Some(source) => WireError::Tls { during, source },
        None => match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => WireError::Timeout {
                during,
                after: timeout,
            },
            io::ErrorKind::UnexpectedEof => WireError::Closed { during },
            _ => WireError::Io { during, source: e },
        },
    }
}

impl TlsStream {
    /// Connects to the front end at `addr` and completes TLS, accepting only the certificate
    /// whose fingerprint is `pin`; bounded by `options.handshake_timeout`. Follow with
    /// [`Connection::agent`].
    pub fn connect(
        addr: SocketAddr,
        pin: &Fingerprint,
        options: &Options,
    ) -> Result<TlsStream, WireError> {
        let deadline = Instant::now() + options.handshake_timeout;
        let tcp = TcpStream::connect_timeout(&addr, options.handshake_timeout)
            .map_err(|e| tls_error(e, Phase::Connect, options.handshake_timeout))?;
        let _ = tcp.set_nodelay(true);
        let provider = provider();
        let verifier = PinnedServer {
            pin: *pin,
            algorithms: provider.signature_verification_algorithms,
        };
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|source| WireError::Tls {
                during: Phase::Tls,
                source,
            })?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let name = ServerName::try_from(SERVER_NAME).map_err(|e| WireError::Setup {
            what: "the server name",
            source: Box::new(e),
        })?;
        let conn =
            ClientConnection::new(Arc::new(config), name).map_err(|source| WireError::Tls {
                during: Phase::Tls,
                source,
            })?;
        let mut s = StreamOwned::new(conn, tcp);
        complete(&mut s.conn, &mut s.sock, deadline, options)?;
        Ok(TlsStream {
            inner: Inner::Client(Box::new(s)),
        })
    }

    fn sock(&self) -> &TcpStream {
        match &self.inner {
            Inner::Client(s) => &s.sock,
            Inner::Server(s) => &s.sock,
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock().peer_addr()
    }

    /// A second handle on the TCP socket under the TLS, for a thread that only watches it for
    /// the peer's hang-up (an epoll set waiting for `EPOLLRDHUP`) while this stream waits on
    /// something else. Reading or writing through it would corrupt the TLS stream.
    ///
    /// # Errors
    /// The socket cannot be duplicated (out of file descriptors).
    pub fn watch_socket(&self) -> io::Result<TcpStream> {
        self.sock().try_clone()
    }
}

/// Runs the TLS handshake to its end within `deadline`.
fn complete<C, D>(
    conn: &mut C,
    sock: &mut TcpStream,
    deadline: Instant,
    options: &Options,
) -> Result<(), WireError>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
{
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WireError::Timeout {
                during: Phase::Tls,
                after: options.handshake_timeout,
            });
        }
        sock.set_timeout(left)
            .map_err(|e| tls_error(e, Phase::Tls, options.handshake_timeout))?;
        match conn.complete_io(sock) {
            Ok((0, 0)) if conn.is_handshaking() => {
                return Err(WireError::Closed { during: Phase::Tls });
            }
            Ok(_) => {}
            Err(e) => return Err(tls_error(e, Phase::Tls, options.handshake_timeout)),
        }
    }
    Ok(())
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Client(s) => s.read(buf),
            Inner::Server(s) => s.read(buf),
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Client(s) => s.write(buf),
            Inner::Server(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Client(s) => s.flush(),
            Inner::Server(s) => s.flush(),
        }
    }
}

impl Transport for TlsStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        // The socket's timeouts, set through a shared reference.
        let t = Some(timeout.max(Duration::from_millis(1)));
        self.sock().set_read_timeout(t)?;
        self.sock().set_write_timeout(t)
    }

    fn close(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Client(s) => {
                s.conn.send_close_notify();
                s.flush()?;
            }
            Inner::Server(s) => {
                s.conn.send_close_notify();
                s.flush()?;
            }
        }
        self.sock().shutdown(std::net::Shutdown::Write)
    }
}

/// The front end's listening socket. Agents connect to it; it never connects to them.
#[derive(Debug)]
pub struct TlsListener {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    fingerprint: Fingerprint,
}

impl TlsListener {
    /// Listens on `addr` (port 0: an ephemeral port) with `identity`'s certificate. Several
    /// threads may accept on it at once.
    pub fn bind(addr: SocketAddr, identity: &ServerIdentity) -> Result<TlsListener, WireError> {
        let io = |source| WireError::Io {
            during: Phase::Connect,
            source,
        };
        let listener = TcpListener::bind(addr).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        Ok(TlsListener {
            listener,
            config: identity.server_config()?,
            fingerprint: identity.fingerprint(),
        })
    }

    /// The address agents connect to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The certificate's fingerprint (to give to agents).
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Waits at most `timeout` for a TCP connection. Finish it with
    /// [`TlsListener::establish`] (on another thread, if others are waiting).
    pub fn accept_tcp(&self, timeout: Duration) -> Result<TcpStream, WireError> {
        let io = |source| WireError::Io {
            during: Phase::Connect,
            source,
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(0) => {
                    return Err(WireError::Timeout {
                        during: Phase::Connect,
                        after: timeout,
                    });
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(io(e.into())),
            }
            // The listener is non-blocking: another thread may have taken the connection.
            match self.listener.accept() {
                Ok((tcp, _)) => {
                    tcp.set_nonblocking(false).map_err(io)?;
                    let _ = tcp.set_nodelay(true);
                    return Ok(tcp);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
            if Instant::now() >= deadline {
                return Err(WireError::Timeout {
                    during: Phase::Connect,
                    after: timeout,
                });
            }
        }
    }

    /// TLS, then the hello/welcome handshake through `gate`, on an accepted connection;
    /// both bounded by `options.handshake_timeout`.
    pub fn establish(
        &self,
        tcp: TcpStream,
        gate: &Gate<'_>,
        options: &Options,
    ) -> Result<Accepted<TlsStream>, WireError> {
        let deadline = Instant::now() + options.handshake_timeout;
        let conn = ServerConnection::new(self.config.clone()).map_err(|source| WireError::Tls {
            during: Phase::Tls,
            source,
        })?;
        let mut s = StreamOwned::new(conn, tcp);
        complete(&mut s.conn, &mut s.sock, deadline, options)?;
        let stream = TlsStream {
            inner: Inner::Server(Box::new(s)),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        Connection::front_end(stream, gate, &options.with_handshake_timeout(left))
    }

    /// [`TlsListener::accept_tcp`], then [`TlsListener::establish`].
    pub fn accept(
        &self,
        timeout: Duration,
        gate: &Gate<'_>,
        options: &Options,
    ) -> Result<Accepted<TlsStream>, WireError> {
        let tcp = self.accept_tcp(timeout)?;
        self.establish(tcp, gate, options)
    }
}
