//! The agent's side of the tool-daemon engines ([`crate::engine`]): an agent started by the
//! job's launcher with no pipe to the front end takes its node's token from the shared token
//! directory ([`crate::tokens`]), connects out over TLS pinned to the front end's
//! certificate, proves itself with the token and serves as any agent ([`run_tls`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mpir_wire::{Connection, Fingerprint, Hello, TlsStream, Token, TokenError};

use crate::agent::{AgentConfig, Ended, Watched, serve, watch_hang_up};
use crate::error::AgentError;
use crate::tokens::{Found, find_token, issued_address, wait_for_tokens};

/// Where an agent started as a tool daemon connects and finds its token: the arguments of
/// `mpir agent --connect ADDR --fingerprint F --token-dir DIR`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TlsTarget {
    /// The front end's address; `None`: written in the token directory's `issued` file
    /// when the tokens are issued ([`TlsTarget::address_in_token_dir`]).
    pub connect: Option<SocketAddr>,
    /// The front end's certificate, pinned.
    pub fingerprint: Fingerprint,
    /// The directory holding `<node>.token`.
    pub token_dir: PathBuf,
    /// How long to wait for the front end to issue the tokens (`mpir agent --token-wait`):
    /// daemons a starter launches with the job start before the front end knows the job's
    /// nodes. Zero (the default): the tokens are there already, or never will be.
    pub token_wait: Duration,
    /// Whether this process is the agent alone (`mpir agent`): then, as soon as the front
    /// end's end of the connection closes (a front end killed, say), even in the middle of a
    /// long request, every process this agent holds is let go and the process exits
    /// ([`TlsTarget::exiting_on_hang_up`]). Off by default: an agent served on a thread of a
    /// larger program ends only between requests.
    pub exit_on_hang_up: bool,
}

impl TlsTarget {
    /// The front end at `connect`, certificate `fingerprint`, tokens in `token_dir`.
    pub fn new(connect: SocketAddr, fingerprint: Fingerprint, token_dir: PathBuf) -> TlsTarget {
        TlsTarget {
            connect: Some(connect),
            fingerprint,
            token_dir,
            token_wait: Duration::ZERO,
            exit_on_hang_up: false,
        }
    }

    /// Exiting the process, every rank let go, as soon as the front end's end closes (see
    /// [`TlsTarget::exit_on_hang_up`]): for a process that is the agent and nothing else.
    pub fn exiting_on_hang_up(mut self) -> TlsTarget {
        self.exit_on_hang_up = true;
        self
    }

    /// The front end whose address is written in `token_dir`'s `issued` file with the
    /// tokens (a front end that chose it once the job's nodes were known), certificate
    /// `fingerprint`.
    pub fn address_in_token_dir(fingerprint: Fingerprint, token_dir: PathBuf) -> TlsTarget {
        TlsTarget {
            connect: None,
            fingerprint,
            token_dir,
            token_wait: Duration::ZERO,
            exit_on_hang_up: false,
        }
    }

    /// Waiting up to `wait` for the tokens to be issued.
    pub fn with_token_wait(mut self, wait: Duration) -> TlsTarget {
        self.token_wait = wait;
        self
    }
}

/// The agent of a tool-daemon engine: takes its token, connects out to the front end over
/// TLS pinned to its fingerprint, says hello with the token and serves (see [`serve`]).
/// [`Ended::NotExpected`] (after one line on standard error) when `target.token_dir` holds
/// no token for this node: the front end expects no agent here.
///
/// It takes its token from `DIR/<its node>.token` ([`Token::take_file`]: read once, deleted;
/// the name this node goes by first, then the one in `PMIX_HOSTNAME` when it names this node,
/// then any file in `DIR` named after one of this node's names or addresses). A node the
/// front end expects no agent on (a node without selected ranks, such as `orterun`'s own)
/// has no file: the agent says so in one line on standard error and ends. Otherwise it
/// connects, pins the certificate, proves itself with the token and serves as any agent
/// (idle timeout, front end gone). As `mpir agent` ([`TlsTarget::exiting_on_hang_up`]) it
/// also watches its socket: when the front end's end closes, even mid-request, it lets go of
/// every rank and exits.
///
/// # Errors
/// [`AgentError::Token`] when the token file is unsafe or unreadable; [`AgentError::Wire`]
/// when the connection, TLS (a certificate other than the pinned one:
/// [`mpir_wire::WireError::FingerprintMismatch`], nothing sent), or the handshake (the front
/// end refused the token) fails.
pub fn run_tls(target: &TlsTarget, config: &AgentConfig) -> Result<Ended, AgentError> {
    if !target.token_wait.is_zero() && !wait_for_tokens(&target.token_dir, target.token_wait) {
        eprintln!(
            "mpir agent: no tokens were issued in {} within {}s: the front end expects no \
             agent here, or has ended",
            target.token_dir.display(),
            target.token_wait.as_secs()
        );
        return Ok(Ended::NotExpected);
    }
    let (node, path) = match find_token(&target.token_dir, &config.node) {
        Found::Token { name, path } => (name, path),
        Found::Nothing => {
            eprintln!(
                "mpir agent: no token for node {} in {}: the front end expects no agent here",
                config.node,
                target.token_dir.display()
            );
            return Ok(Ended::NotExpected);
        }
        Found::Ambiguous(names) => {
            eprintln!(
                "mpir agent: the tokens of nodes {} in {} all name this node ({}), none \
                 exactly: none is taken (give the node's name with --node, or its fully \
                 qualified name to its host name)",
                names.join(", "),
                target.token_dir.display(),
                config.node
            );
            return Ok(Ended::NotExpected);
        }
    };
    let token = match Token::take_file(&path) {
        Ok(t) => t,
        // Gone since it was seen: another agent of this node took it.
        Err(TokenError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("mpir agent: node {node}'s token was taken by another agent");
            return Ok(Ended::NotExpected);
        }
        Err(source) => return Err(AgentError::Token { source }),
    };
    let connect = match target.connect {
        Some(a) => a,
        None => issued_address(&target.token_dir)?,
    };
    let tls = TlsStream::connect(connect, &target.fingerprint, &config.wire)?;
    let watch = if target.exit_on_hang_up {
        Some(tls.watch_socket().map_err(|source| AgentError::Setup {
            context: "watching the connection".into(),
            source,
        })?)
    } else {
        None
    };
    let hello = Hello::new(node.clone(), std::process::id()).with_token(token);
    let (mut conn, _welcome) = Connection::agent(tls, &hello, &config.wire)?;
    if let Some(socket) = watch {
        // Ended, letting go of everything, as soon as the front end's end closes: even in
        // the middle of a long request (a killed front end's socket closes).
        watch_hang_up(socket.into(), Watched::Socket)?;
    }
    let config = AgentConfig {
        node,
        ..config.clone()
    };
    serve(&mut conn, &config)
}
