//! The rendezvous of agents that connect back to the front end (the tool-daemon engines,
//! [`crate::engine`]): a TLS listener on an address the nodes reach (`crate::listen`), an
//! ephemeral certificate pinned by fingerprint in the agents' arguments, and a one-time
//! token per expected node in a private directory ([`crate::tokens`]). The token book admits
//! a hello only with the token issued for the node it names, once; refused hellos are
//! counted and do not disturb the others.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpir_session::AgentFailure;
use mpir_wire::{
    Fingerprint, Gate, Options, RefusalCounts, ServerIdentity, TlsListener, TokenBook, TokenError,
};

use crate::error::FrontEndError;
use crate::launch::{AgentLink, Down};
use crate::protocol::HostClaims;
use crate::tokens::{TOKENS_ISSUED, TokenDir};

/// Most TLS handshakes the front end runs at once (each on a thread of its own).
const MAX_HANDSHAKES: usize = 32;

/// The front end's side of a tool-daemon engine: a TLS listener, an ephemeral identity, a
/// token per expected node in a private directory, and the agents' arguments. Dropping it
/// closes the socket and removes the token directory.
///
/// # How a front end meets its agents
///
/// 1. **Listen** on an address the nodes can reach: [`crate::FrontEndOptions::listen`]
///    (`mpir --agent-listen ADDR`), else the local address the kernel routes to the agents'
///    nodes from, else the first address this node's name resolves to (one that is not a
///    loopback one first). The port is ephemeral; the socket is closed as soon as every
///    expected agent is in or the start timeout has passed (the rendezvous is dropped).
/// 2. **Identity**: an ephemeral TLS certificate ([`mpir_wire::ServerIdentity::generate`]);
///    its SHA-256 fingerprint goes into the agents' arguments (public: it grants nothing).
/// 3. **Tokens**: one one-time token per node that has selected ranks
///    ([`mpir_wire::TokenBook`]), each in its own file `<node>.token` (0600) in a new private
///    directory (0700) made inside [`crate::FrontEndOptions::token_dir`] (default
///    `~/.mpir/agent-tokens`: a home the nodes share), named `<this node>-<pid>-<random>`,
///    removed with the rendezvous. One left by a front end killed meanwhile is removed by the
///    next front end of the same node (its pid no longer runs). No secret is on any command
///    line.
/// 4. The engine asks the job's launcher for the agents ([`crate::engine`]) with
///    [`Rendezvous::agent_arguments`], while [`Rendezvous::accept`] takes the connections.
/// 5. **Match** each agent to its node by its hello: the token book admits a hello only with
///    the token issued for the node the hello names, once, so every admitted agent is the
///    one of a node of the job. Missing, foreign (another node's), reused and expired
///    tokens are refused, counted ([`Rendezvous::refusals`]) and do not disturb the others.
///    The links go to the fleet, which sends each its adoption as for any other engine.
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
    /// from (the kernel's route to them) and writes that address into the token directory's
    /// `issued` file, where the agents, whose arguments then carry no address, read it.
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
    /// the token directory's `issued` file: agents waiting for their tokens look now.
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
                .write_file(self.dir.path(), node)
                .map_err(|e| token(node, e))?;
            self.expected.push(node.clone());
        }
        // The address, for agents whose arguments carry none: written whole to a temporary
        // name, then renamed, so an agent never reads half of it.
        let marker = self.dir.path().join(TOKENS_ISSUED);
        let partial = self.dir.path().join(format!(".{TOKENS_ISSUED}.partial"));
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
            self.dir.path().display()
        )
    }

    /// The certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.identity.fingerprint()
    }

    /// The token directory.
    pub fn token_dir(&self) -> &Path {
        self.dir.path()
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
            self.dir.path().display().to_string(),
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
    /// is set; each TLS handshake on a thread of its own (at most 32 at
    /// once). Returns each admitted agent's link by node; refused ones are counted.
    pub fn accept(
        &self,
        deadline: Instant,
        wire: &Options,
        give_up: &AtomicBool,
    ) -> HashMap<String, AgentLink> {
        self.accept_while(deadline, wire, &|_| !give_up.load(Ordering::Relaxed))
    }

    /// [`Rendezvous::accept`], giving up as soon as `go_on`, asked with the links so far
    /// (at least every 100 ms), says no more will come.
    pub(crate) fn accept_while(
        &self,
        deadline: Instant,
        wire: &Options,
        go_on: &dyn Fn(&HashMap<String, AgentLink>) -> bool,
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
            while links.len() < self.expected.len() && Instant::now() < deadline && go_on(&links) {
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
