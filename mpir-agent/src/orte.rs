//! Open MPI 4 (ORTE): agents started by `orterun` itself as MPIR tool daemons, connecting
//! back to the front end over TLS.
//!
//! `orterun` honours the MPIR tool-daemon extension (`MPIR_executable_path`,
//! `MPIR_server_arguments`) on a running job through its attach FIFO: it starts **one daemon
//! per node that has ranks**, a child of that node's `orted`, inside that node. Its daemons'
//! standard output goes to `orterun`'s own output, so no pipe reaches the front end: the
//! agent connects out instead.
//!
//! # How a front end starts them ([`Rendezvous`], used by [`crate::Agents::start`])
//!
//! 1. **Listen** on an address the nodes can reach: [`crate::FrontEndOptions::listen`]
//!    (`mpir --agent-listen ADDR`), else the local address the kernel routes to the agents'
//!    nodes from, else the first address this node's name resolves to (one that is not a
//!    loopback one first; `crate::listen`). The port is ephemeral; the socket is closed as
//!    soon as every expected agent is in or the start timeout has passed.
//! 2. **Identity**: an ephemeral TLS certificate ([`ServerIdentity::generate`]); its SHA-256
//!    fingerprint goes into the daemons' arguments (public: it grants nothing).
//! 3. **Tokens**: one one-time token per node that has selected ranks ([`TokenBook`]), each
//!    in its own file `<node>.token` (0600) in a new private directory (0700) made inside
//!    [`crate::FrontEndOptions::token_dir`] (default `~/.mpir/agent-tokens`: a home the
//!    nodes share), named `<this node>-<pid>-<random>`, removed once the agents are in or the
//!    start timeout passed. One left by a front end killed meanwhile is removed by the next
//!    front end of the same node (its pid no longer runs). No secret is on any command line.
//! 4. **Let go of `orterun`**: a session made with `with_hold_from_acquisition` keeps the
//!    starter traced until its first hold, and a second tracer cannot attach. So the session
//!    acquires first (the job's nodes are known from its table), then, when one of this
//!    process's threads traces the starter, a hold is taken and released at once (the
//!    session's later holds stop ranks by pid and never attach to the starter again).
//! 5. **Ask for the daemons**: a second acquisition of the running job with
//!    [`mpir_acquire::AcquireOptions::with_tool_daemon`]: `mpir agent --connect ADDR
//!    --fingerprint sha256:… --token-dir DIR` (attach FIFO, byte 0x01, the spawn event),
//!    while the connections are accepted on other threads — each TLS handshake on a thread
//!    of its own, at most [`MAX_HANDSHAKES`] at once, each bounded by the wire's handshake
//!    timeout. The spawn event is awaited [`ASK_TIMEOUT`] at most: `orterun` raises it for
//!    its first daemon job only (`mpir_breakpoint_fired` in ORTE), and starts later ones
//!    without it. A request that ends without it and without any daemon showing is made
//!    again (`orterun` ignores a request it reads once the tool has let go, as
//!    `MPIR_being_debugged` is 0 again), until the start timeout.
//! 6. **Match** each agent to its node by its hello: the token book admits a hello only with
//!    the token issued for the node the hello names, once, so every admitted agent is the
//!    one of a node of the job. Missing, foreign (another node's), reused and expired
//!    tokens are refused, counted ([`Rendezvous::refusals`]) and do not disturb the others.
//!    The links go to the fleet, which sends each its adoption as for any other engine.
//!
//! ORTE agents are **flat**: `orterun` starts every daemon itself, so the front end holds one
//! connection per node whatever [`crate::FrontEndOptions::fanout`] says (no tree).
//!
//! # The agent ([`run_tls`], `mpir agent --connect`)
//!
//! It takes its token from `DIR/<its node>.token` ([`Token::take_file`]: read once, deleted;
//! the name this node goes by first, then any file in `DIR` named after one of this node's
//! names or addresses). A node the front end expects no agent on (a node without selected
//! ranks, such as `orterun`'s own) has no file: the agent says so in one line on standard
//! error and ends ([`Ended::NotExpected`]). Otherwise it connects, pins the certificate,
//! proves itself with the token and serves as any agent (idle timeout, front end gone). As
//! `mpir agent` ([`TlsTarget::exiting_on_hang_up`]) it also watches its socket: when the front
//! end's end closes, even mid-request, it lets go of every rank and exits.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpir_acquire::ToolDaemon;
use mpir_session::{AgentFailure, Session, chain};
use mpir_wire::{
    Connection, Fingerprint, Gate, Hello, Options, RefusalCounts, ServerIdentity, TlsListener,
    TlsStream, Token, TokenBook, TokenError,
};

use crate::agent::{AgentConfig, Ended, serve};
use crate::error::{AgentError, FrontEndError};
use crate::fleet::{AgentLink, Down, Fleet};
use crate::front::FrontEndOptions;
use crate::protocol::{HostClaims, Plan};

/// Most TLS handshakes the front end runs at once (each on a thread of its own).
pub const MAX_HANDSHAKES: usize = 32;

/// How long the request for daemons waits for `orterun`'s spawn event. Open MPI 4 raises it
/// (`MPIR_Breakpoint`) for the first daemon job of an `orterun`'s life only: a later request
/// (a second `mpir` run on the same job) starts the daemons without it, so the wait is kept
/// short, and its end is no failure — the agents connecting are what counts.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an agent started as a tool daemon connects and finds its token: the arguments of
/// `mpir agent --connect ADDR --fingerprint F --token-dir DIR`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TlsTarget {
    /// The front end's address; `None`: written in the token directory's [`TOKENS_ISSUED`]
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

    /// The front end whose address is written in `token_dir`'s [`TOKENS_ISSUED`] with the
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

/// The file a front end writes into its token directory once every token is in it: an agent
/// told to wait for its token waits for this file, then looks for its token once.
pub const TOKENS_ISSUED: &str = "issued";

/// The front end's address as written in `dir`'s [`TOKENS_ISSUED`]: one line, `IP:PORT`
/// (at most 128 bytes read; a link or anything but a regular file refused).
fn issued_address(dir: &Path) -> Result<SocketAddr, AgentError> {
    use std::io::Read;
    let path = dir.join(TOKENS_ISSUED);
    let bad = |why: String| AgentError::Setup {
        context: format!("reading the front end's address in {}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    };
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&path)
    }
    .map_err(|e| AgentError::Setup {
        context: format!("reading the front end's address in {}", path.display()),
        source: e,
    })?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(bad("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(128)
        .read_to_end(&mut bytes)
        .map_err(|e| AgentError::Setup {
            context: format!("reading the front end's address in {}", path.display()),
            source: e,
        })?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    let line = text.lines().next().unwrap_or_default().trim();
    line.parse()
        .map_err(|_| bad(format!("{line:?} is not an address (IP:PORT)")))
}

/// Waits (up to `wait`, polling) until `dir` holds [`TOKENS_ISSUED`]; `false` when it did
/// not come, or the directory went away (the front end ended).
fn wait_for_tokens(dir: &Path, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if dir.join(TOKENS_ISSUED).is_file() {
            return true;
        }
        if !dir.is_dir() || Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The token file's name for `node` (as [`Token::write_file`] names it).
pub fn token_file_name(node: &str) -> String {
    Token::file_name(node)
}

/// This node's token file in `dir`: the one named after `node`, else the one named after
/// `PMIX_HOSTNAME` (set by PRRTE for its tool daemons) when it names this node, else one named
/// after any of this node's names or addresses (at most 65,536 entries looked at). `None` when there is
/// none (or no such directory).
fn find_token(dir: &Path, node: &str) -> Option<(String, PathBuf)> {
    let exact = dir.join(token_file_name(node));
    if exact.is_file() {
        return Some((node.to_string(), exact));
    }
    let here = mpir_target::live::node::this_node();
    // A PMIx tool daemon (Open MPI 5): the name PRRTE knows this node by, when this node's
    // facts agree that it is this node.
    if let Ok(name) = std::env::var("PMIX_HOSTNAME")
        && !name.is_empty()
        && here.classify(Some(&name)).is_local()
    {
        let path = dir.join(token_file_name(&name));
        if path.is_file() {
            return Some((name, path));
        }
    }
    std::fs::read_dir(dir)
        .ok()?
        .take(65_536)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| Some(n.strip_suffix(".token")?.to_string()))
        .find(|name| here.classify(Some(name)).is_local())
        .map(|name| {
            let path = dir.join(token_file_name(&name));
            (name, path)
        })
}

/// The agent of a tool-daemon engine: takes its token, connects out to the front end over
/// TLS pinned to its fingerprint, says hello with the token and serves (see [`serve`]).
/// [`Ended::NotExpected`] (after one line on standard error) when `target.token_dir` holds
/// no token for this node: the front end expects no agent here.
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
    let Some((node, path)) = find_token(&target.token_dir, &config.node) else {
        eprintln!(
            "mpir agent: no token for node {} in {}: the front end expects no agent here",
            config.node,
            target.token_dir.display()
        );
        return Ok(Ended::NotExpected);
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
        crate::agent::watch_hang_up(socket.into(), crate::agent::Watched::Socket)?;
    }
    let config = AgentConfig {
        node,
        ..config.clone()
    };
    serve(&mut conn, &config)
}

/// A private directory of token files, removed (with whatever is left in it) when dropped.
#[derive(Debug)]
struct TokenDir(PathBuf);

impl TokenDir {
    /// A new directory (0700) inside `parent` (made 0700 when it does not exist).
    fn create(parent: &Path) -> Result<TokenDir, FrontEndError> {
        let err = |context: String, e: std::io::Error| FrontEndError::ToolDaemons {
            context,
            source: Box::new(e),
        };
        if !parent.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| err(format!("making {}", parent.display()), e))?;
        }
        let t = Token::generate().map_err(|e| FrontEndError::ToolDaemons {
            context: "naming the token directory".into(),
            source: Box::new(e),
        })?;
        let host = token_file_name(mpir_target::live::node::this_node().display_name());
        let host = host.trim_end_matches(".token");
        sweep(parent, host);
        let name = format!("{host}-{}-{}", std::process::id(), &t.to_hex()[..8]);
        let dir = parent.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| err(format!("making {}", dir.display()), e))?;
        // The umask may have taken bits away, never added: 0700 exactly.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(format!("setting {}'s mode", dir.display()), e))?;
        Ok(TokenDir(dir))
    }
}

/// Removes the token directories in `parent` that front ends of this node (`host`) left
/// when they were killed: named `<host>-<pid>-<random>`, their pid no longer running here
/// (a home shared by many nodes holds other nodes' too, whose pids mean nothing here; at
/// most 4,096 entries looked at).
fn sweep(parent: &Path, host: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.take(4096).filter_map(Result::ok) {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix(host)?.strip_prefix('-'))
        else {
            continue;
        };
        // Exactly `<pid>-<8 hex digits>` (a longer host name that starts with this one's
        // and a dash gives another shape).
        let Some(pid) = rest
            .split_once('-')
            .filter(|(_, r)| r.len() == 8 && r.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|(p, _)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != 0 && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for TokenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The front end's side of a tool-daemon engine: a TLS listener, an ephemeral identity, a
/// token per expected node in a private directory, and the agents' arguments. Dropping it
/// closes the socket and removes the token directory.
#[derive(Debug)]
pub struct Rendezvous {
    identity: ServerIdentity,
    /// `None` until [`Rendezvous::issue`] when listening was left until the job's nodes are
    /// known ([`Rendezvous::listen`] with no address).
    listener: Option<TlsListener>,
    book: TokenBook,
    dir: TokenDir,
    address: Option<SocketAddr>,
    expected: Vec<String>,
    /// Opened before the nodes were known ([`Rendezvous::listen`]): the agents wait this
    /// long for their tokens.
    token_wait: Option<Duration>,
}

impl Rendezvous {
    /// Listens on `listen` (port 0: an ephemeral one), else where the kernel routes to
    /// `nodes` from (`crate::listen`), and issues a token for each of `nodes`, valid for
    /// `lifetime`, in a new private directory inside `token_parent`.
    ///
    /// # Errors
    /// [`FrontEndError::ToolDaemons`] saying which step failed.
    pub fn open(
        listen: Option<SocketAddr>,
        token_parent: &Path,
        nodes: &[String],
        lifetime: Duration,
    ) -> Result<Rendezvous, FrontEndError> {
        let mut r = Rendezvous::bind(listen, token_parent, lifetime)?;
        r.issue(nodes)?;
        Ok(r)
    }

    /// Prepares as [`Rendezvous::open`] does, before the job's nodes are known: for daemons
    /// a starter launches together with the job (the tool-daemon extension in launch
    /// mode). Their arguments tell them to wait up to `lifetime` for their tokens, which
    /// [`Rendezvous::issue`] gives once the job's table is read. With `listen`, it listens
    /// there now; without, [`Rendezvous::issue`] listens where the job's nodes are reached
    /// from (the kernel's route to them) and writes that address into [`TOKENS_ISSUED`],
    /// where the agents, whose arguments then carry no address, read it.
    ///
    /// # Errors
    /// [`FrontEndError::ToolDaemons`] saying which step failed.
    pub fn listen(
        listen: Option<SocketAddr>,
        token_parent: &Path,
        lifetime: Duration,
    ) -> Result<Rendezvous, FrontEndError> {
        let mut r = Rendezvous::bind(listen, token_parent, lifetime)?;
        r.token_wait = Some(lifetime);
        Ok(r)
    }

    fn bind(
        listen: Option<SocketAddr>,
        token_parent: &Path,
        lifetime: Duration,
    ) -> Result<Rendezvous, FrontEndError> {
        let identity = ServerIdentity::generate().map_err(|e| FrontEndError::ToolDaemons {
            context: "making a certificate".into(),
            source: Box::new(e),
        })?;
        let dir = TokenDir::create(token_parent)?;
        let mut r = Rendezvous {
            identity,
            listener: None,
            book: TokenBook::new(lifetime),
            dir,
            address: None,
            expected: Vec::new(),
            token_wait: None,
        };
        if let Some(listen) = listen {
            r.start_listening(listen)?;
        }
        Ok(r)
    }

    fn start_listening(&mut self, listen: SocketAddr) -> Result<(), FrontEndError> {
        let listener =
            TlsListener::bind(listen, &self.identity).map_err(|e| FrontEndError::ToolDaemons {
                context: format!("listening on {listen} for the agents"),
                source: Box::new(e),
            })?;
        let address = listener
            .local_addr()
            .map_err(|e| FrontEndError::ToolDaemons {
                context: "the listening address".into(),
                source: Box::new(e),
            })?;
        self.listener = Some(listener);
        self.address = Some(address);
        Ok(())
    }

    /// Issues a token for each of `nodes` (each in its own file), then writes
    /// [`TOKENS_ISSUED`]: agents waiting for their tokens look now.
    ///
    /// # Errors
    /// [`FrontEndError::ToolDaemons`] naming the node whose token could not be written.
    pub fn issue(&mut self, nodes: &[String]) -> Result<(), FrontEndError> {
        if self.listener.is_none() {
            let listen = crate::listen::default_listen(nodes)?;
            self.start_listening(listen)?;
        }
        let token = |node: &str, e: TokenError| FrontEndError::ToolDaemons {
            context: format!("node {node}'s token"),
            source: Box::new(e),
        };
        for node in nodes {
            let issued = self.book.issue(node).map_err(|e| token(node, e))?;
            issued
                .token
                .write_file(&self.dir.0, node)
                .map_err(|e| token(node, e))?;
            self.expected.push(node.clone());
        }
        // The address, for agents whose arguments carry none: written whole to a temporary
        // name, then renamed, so an agent never reads half of it.
        let marker = self.dir.0.join(TOKENS_ISSUED);
        let partial = self.dir.0.join(format!(".{TOKENS_ISSUED}.partial"));
        let address = self.address.map(|a| format!("{a}\n")).unwrap_or_default();
        std::fs::write(&partial, address)
            .and_then(|()| std::fs::rename(&partial, &marker))
            .map_err(|e| FrontEndError::ToolDaemons {
                context: format!("writing {}", marker.display()),
                source: Box::new(e),
            })?;
        Ok(())
    }

    /// The address agents connect to; `None` before [`Rendezvous::issue`] when listening
    /// was left until then.
    pub fn address(&self) -> Option<SocketAddr> {
        self.address
    }

    /// Why no agent of a node came, for a node's failure: `asked` (how the daemons were
    /// asked for), then where they should have connected within `within`, and what to check.
    pub(crate) fn none_connected(&self, asked: &str, within: Duration) -> String {
        let address = self
            .address
            .map_or_else(|| "(no address yet)".to_string(), |a| a.to_string());
        format!(
            "{asked}, and none from this node connected to {address} within {}s (is {address} \
             reachable from the node? --agent-listen; is {} on a file system the node shares? \
             --agent-token-dir)",
            within.as_secs(),
            self.dir.0.display()
        )
    }

    /// The certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.identity.fingerprint()
    }

    /// The token directory.
    pub fn token_dir(&self) -> &Path {
        &self.dir.0
    }

    /// The arguments that follow `mpir agent` for a daemon: `--connect ADDR --fingerprint
    /// sha256:… --token-dir DIR` (nothing secret).
    pub fn agent_arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(address) = self.address {
            args.extend(["--connect".into(), address.to_string()]);
        }
        args.extend([
            "--fingerprint".into(),
            self.fingerprint().to_string(),
            "--token-dir".into(),
            self.dir.0.display().to_string(),
        ]);
        if let Some(wait) = self.token_wait {
            args.extend(["--token-wait".into(), wait.as_secs().max(1).to_string()]);
        }
        args
    }

    /// The hellos refused so far, by reason.
    pub fn refusals(&self) -> RefusalCounts {
        self.book.refusals()
    }

    /// Accepts agents until every expected node's is in, `deadline` passes or `give_up`
    /// is set; each TLS handshake on a thread of its own (at most [`MAX_HANDSHAKES`] at
    /// once). Returns each admitted agent's link by node; refused ones are counted.
    pub fn accept(
        &self,
        deadline: Instant,
        wire: &Options,
        give_up: &AtomicBool,
    ) -> HashMap<String, AgentLink> {
        let mut links: HashMap<String, AgentLink> = HashMap::new();
        let Some(listener) = &self.listener else {
            // Not listening: nothing was issued.
            return links;
        };
        let (tx, rx) = mpsc::channel::<Option<(String, AgentLink)>>();
        std::thread::scope(|scope| {
            let mut in_flight = 0usize;
            let take = |r: Option<(String, AgentLink)>,
                        links: &mut HashMap<String, AgentLink>,
                        in_flight: &mut usize| {
                *in_flight -= 1;
                if let Some((node, link)) = r {
                    links.insert(node, link);
                }
            };
            while links.len() < self.expected.len()
                && Instant::now() < deadline
                && !give_up.load(Ordering::Relaxed)
            {
                while let Ok(r) = rx.try_recv() {
                    take(r, &mut links, &mut in_flight);
                }
                if in_flight >= MAX_HANDSHAKES {
                    if let Ok(r) = rx.recv_timeout(Duration::from_millis(100)) {
                        take(r, &mut links, &mut in_flight);
                    }
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let tcp = match listener.accept_tcp(left.min(Duration::from_millis(100))) {
                    Ok(tcp) => tcp,
                    Err(mpir_wire::WireError::Timeout { .. }) => continue,
                    // Out of descriptors, say: no busy loop while it lasts.
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                in_flight += 1;
                let tx = tx.clone();
                let gate = Gate::Tokens(&self.book);
                let wire = wire.with_handshake_timeout(
                    wire.handshake_timeout
                        .min(deadline.saturating_duration_since(Instant::now()))
                        .max(Duration::from_millis(100)),
                );
                scope.spawn(move || {
                    let r = listener
                        .establish(tcp, &gate, &wire)
                        .ok()
                        .map(|a| (a.hello.node, a.connection.boxed()));
                    let _ = tx.send(r);
                });
            }
            // The handshakes under way end within their bound.
            drop(tx);
            while in_flight > 0 {
                match rx.recv() {
                    Ok(r) => take(r, &mut links, &mut in_flight),
                    Err(_) => break,
                }
            }
        });
        links
    }
}

/// Whether one of this process's threads traces `pid` (the session's acquisition held).
pub(crate) fn traced_by_us(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|t| t.trim().parse::<u32>().ok())
        .is_some_and(|t| t != 0 && Path::new(&format!("/proc/self/task/{t}")).exists())
}

/// The default parent of token directories: `~/.mpir/agent-tokens`.
pub(crate) fn default_token_parent() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".mpir").join("agent-tokens")
}

/// Where the token directories are made: `options`' choice, else [`default_token_parent`].
pub(crate) fn token_parent(options: &FrontEndOptions) -> PathBuf {
    options
        .token_dir
        .clone()
        .unwrap_or_else(default_token_parent)
}

/// Each host with the link of the agent that connected for it, or why none did.
pub(crate) fn links_by_host(
    hosts: Vec<HostClaims>,
    mut links: HashMap<String, AgentLink>,
    why: &str,
) -> Vec<(HostClaims, Result<AgentLink, Down>)> {
    hosts
        .into_iter()
        .map(|h| {
            let link = links
                .remove(&h.host)
                .ok_or_else(|| Down::new(AgentFailure::NotStarted, why));
            (h, link)
        })
        .collect()
}

/// Starts the agents of `hosts` as `orterun`'s tool daemons (see the module docs) and
/// returns them adopted, with the request for daemons (to join). A node whose agent does not
/// come is out, with the reason.
///
/// # Errors
/// [`FrontEndError::ToolDaemons`] when the listener, identity or tokens cannot be set up;
/// [`FrontEndError::Session`] when the session's hold on the starter cannot be let go.
pub(crate) fn start(
    session: &mut Session,
    hosts: Vec<HostClaims>,
    plan: &Plan,
    options: &FrontEndOptions,
) -> Result<(Fleet, Asking), FrontEndError> {
    let Some(starter) = session.job().map(|j| j.starter.pid) else {
        return Ok((Fleet::empty(), Asking(None)));
    };
    let nodes: Vec<String> = hosts.iter().map(|h| h.host.clone()).collect();
    let parent = token_parent(options);
    let start_timeout = options.start_timeout;
    let rendezvous = Rendezvous::open(options.listen, &parent, &nodes, start_timeout)?;
    let Some((program, args)) = plan.agent.split_first() else {
        return Err(FrontEndError::NoEngine {
            reason: "no agent command".into(),
        });
    };
    let mut arguments = args.to_vec();
    arguments.extend(rendezvous.agent_arguments());
    let daemon = ToolDaemon::new(program.clone(), arguments);
    if traced_by_us(starter) {
        // The session's acquisition still holds the starter: let it go (a hold and its
        // release), so that the daemons can be asked for.
        drop(session.hold()?);
    }
    let acquire = session
        .options()
        .acquire_options()
        .clone()
        .with_hold(false)
        .with_timeout(ASK_TIMEOUT.min(start_timeout))
        .with_tool_daemon(daemon);
    let deadline = Instant::now() + start_timeout;
    let give_up = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&give_up);
    let token_dir = rendezvous.token_dir().to_path_buf();
    let expected = nodes.len();
    let handle = std::thread::Builder::new()
        .name("mpir-orte-ask".into())
        .spawn(move || {
            let r = ask(starter, &acquire, deadline, &token_dir, expected);
            // No spawn event in time is no proof that no daemon comes (orterun raises it
            // once in its life: a later request starts daemons without it): only another
            // failure ends the wait for agents.
            if r.as_ref()
                .is_err_and(|e| !matches!(e, mpir_acquire::AcquireError::Timeout { .. }))
            {
                flag.store(true, Ordering::Relaxed);
            }
            let _ = tx.send(r);
        })
        .map_err(|e| FrontEndError::ToolDaemons {
            context: "starting the thread that asks orterun for daemons".into(),
            source: Box::new(e),
        })?;
    let asking = Asking(Some(handle));
    let links = rendezvous.accept(deadline, &Options::default(), &give_up);
    let asked = "orterun was asked for a tool daemon on every node";
    let none_connected = rendezvous.none_connected(asked, start_timeout);
    // The socket closed and the tokens left removed.
    drop(rendezvous);
    let missing = links.len() < hosts.len();
    // With every agent in, the request may still be waiting for a spawn event that will not
    // come: it ends on its own (joined when the agents are dropped).
    let outcome = if missing {
        rx.recv_timeout(ASK_TIMEOUT + Duration::from_secs(5)).ok()
    } else {
        rx.try_recv().ok()
    };
    let why = match outcome {
        Some(Ok(())) | None => none_connected,
        Some(Err(e @ mpir_acquire::AcquireError::Timeout { .. })) => {
            format!("{none_connected} ({})", chain(&e))
        }
        Some(Err(e)) => format!("orterun did not start the tool daemons: {}", chain(&e)),
    };
    let links = links_by_host(hosts, links, &why);
    Ok((Fleet::connected(links, plan), asking))
}

/// Asks `orterun` for the daemons until it has started them. A request `orterun` reads
/// while no tool is attached is a false alarm to it (it checks `MPIR_being_debugged`, which
/// the request sets only while attached), and a request after its first daemon job raises
/// no spawn event: so a request that ends without the event is made again, until its
/// daemons show — one of them has taken its token file — or `deadline`. A repeated request
/// may start a second daemon per node: those find no token and end at once.
fn ask(
    starter: u32,
    acquire: &mpir_acquire::AcquireOptions,
    deadline: Instant,
    token_dir: &Path,
    expected: usize,
) -> Result<(), mpir_acquire::AcquireError> {
    // A token taken is a daemon started (the directory also holds `TOKENS_ISSUED`).
    let started = || {
        std::fs::read_dir(token_dir).map_or(true, |d| {
            d.take(expected + 2)
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".token"))
                .count()
                < expected
        })
    };
    loop {
        let r = mpir_acquire::live::attach(starter, acquire.clone()).map(drop);
        let timed_out = matches!(r, Err(mpir_acquire::AcquireError::Timeout { .. }));
        if !timed_out || Instant::now() + ASK_TIMEOUT >= deadline {
            return r;
        }
        // Daemons start within moments of the request being read.
        let settle = Instant::now() + Duration::from_secs(2);
        while !started() && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(50));
        }
        if started() {
            return r;
        }
    }
}

/// The request for daemons, possibly still waiting (bounded by [`ASK_TIMEOUT`]) for
/// `orterun`'s spawn event while the agents already serve; joined when dropped, so that
/// `orterun` is let go before this program ends.
pub(crate) struct Asking(Option<std::thread::JoinHandle<()>>);

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issued_address_is_read_bounded_and_refused_when_it_is_not_one() {
        let dir = std::env::temp_dir().join(format!("mpir-issued-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join(TOKENS_ISSUED);
        std::fs::write(&marker, "127.0.0.1:4242\n").unwrap();
        assert_eq!(
            issued_address(&dir).unwrap(),
            "127.0.0.1:4242".parse().unwrap()
        );
        std::fs::write(&marker, "[::1]:7\nmore").unwrap();
        assert_eq!(issued_address(&dir).unwrap(), "[::1]:7".parse().unwrap());
        // Empty (an older front end's marker), garbage, endless: errors naming the file.
        for bad in [String::new(), "node2:80".into(), "1".repeat(1 << 20)] {
            std::fs::write(&marker, &bad).unwrap();
            let e = issued_address(&dir).unwrap_err().to_string();
            assert!(e.contains(TOKENS_ISSUED), "{e}");
        }
        // A link is not followed.
        std::fs::remove_file(&marker).unwrap();
        let elsewhere = dir.join("elsewhere");
        std::fs::write(&elsewhere, "127.0.0.1:1\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &marker).unwrap();
        assert!(issued_address(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn token_file_names_match_the_wire_crates() {
        let parent = std::env::temp_dir().join(format!("mpir-orte-{}", std::process::id()));
        let dir = TokenDir::create(&parent).unwrap();
        for node in ["node2", "n[1]; rm", ".hidden", "a.b-c_d"] {
            let t = Token::generate().unwrap();
            let path = t.write_file(&dir.0, node).unwrap();
            assert_eq!(path, dir.0.join(token_file_name(node)), "{node}");
        }
        let mode = std::fs::metadata(&dir.0).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let kept = dir.0.clone();
        drop(dir);
        assert!(!kept.exists(), "the token directory is removed");
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn token_directories_of_killed_front_ends_of_this_node_are_swept() {
        let parent = std::env::temp_dir().join(format!("mpir-orte-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let host = token_file_name(mpir_target::live::node::this_node().display_name());
        let host = host.trim_end_matches(".token").to_string();
        let stale = parent.join(format!("{host}-{dead}-0badc0de"));
        let alive = parent.join(format!("{host}-{}-600dc0de", std::process::id()));
        let other = parent.join(format!("{host}x-{dead}-0badc0de"));
        // Node "<host>-<n>"'s directory (n: a pid this node does not run).
        let longer = parent.join(format!("{host}-{dead}-{dead}-0badc0de"));
        let unrelated = parent.join("notes");
        for d in [&stale, &alive, &other, &unrelated, &longer] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("node2.token"), "x").unwrap();
        }
        let fresh = TokenDir::create(&parent).unwrap();
        assert!(!stale.exists(), "a dead front end's tokens were left");
        for d in [&alive, &other, &unrelated, &longer, &fresh.0] {
            assert!(d.exists(), "{} was swept", d.display());
        }
        drop(fresh);
        let _ = std::fs::remove_dir_all(&parent);
    }
}
