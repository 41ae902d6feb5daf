//! `agent`: serve this node's ranks of a job to a front end over stdin/stdout (issue 21), and
//! the front end's options of `queues`, `deadlock` and `stacks` that start agents on the
//! job's other nodes.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mpir_agent::{
    AgentConfig, Agents, EngineChoice, FrontEndOptions, Launch, LaunchedAgents, ReadSettings,
    TlsTarget,
};
use mpir_mqd::HelperOptions;
use mpir_session::{Session, chain};

use crate::HELPER_ARG;
use crate::cmd::queues::{Engine, ReaderArgs};

#[derive(clap::Args)]
pub(crate) struct AgentArgs {
    /// Let go of every rank and exit after this many seconds without a request from the
    /// front end.
    #[arg(long = "idle-timeout", value_name = "SECONDS", default_value_t = 3600)]
    pub(crate) idle_timeout: u64,
    /// The node this agent serves, as the job's table names it (the front end passes it);
    /// the agent refuses to start on any other node.
    #[arg(long, value_name = "HOST")]
    pub(crate) node: Option<String>,
    /// Connect out to the front end at this address over TLS instead of serving over
    /// stdin/stdout (how Open MPI's orterun starts agents as its tool daemons).
    #[arg(long, value_name = "ADDR", requires_all = ["fingerprint", "token_dir"])]
    pub(crate) connect: Option<std::net::SocketAddr>,
    /// Connect out over TLS to the front end whose certificate this is (`sha256:` and 64
    /// hex digits), pinned: at --connect, else at the address the front end writes into
    /// the token directory's `issued` file with the tokens.
    #[arg(long, value_name = "FINGERPRINT", requires = "token_dir")]
    pub(crate) fingerprint: Option<mpir_agent::Fingerprint>,
    /// With --fingerprint: the private directory holding this node's one-time token
    /// (`<node>.token`, read once and deleted). No token there: the front end expects no
    /// agent on this node, and the agent exits at once.
    #[arg(long = "token-dir", value_name = "DIR", requires = "fingerprint")]
    pub(crate) token_dir: Option<PathBuf>,
    /// With --fingerprint: wait up to this many seconds for the front end to issue the
    /// tokens (daemons started together with the job, before the front end knows its nodes).
    #[arg(long = "token-wait", value_name = "SECONDS", requires = "fingerprint",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) token_wait: Option<u64>,
}

/// `mpir agent`: started by `mpir` itself on another node (through srun or
/// `--agent-launch`), it speaks only the wire protocol on stdin/stdout; started by orterun as
/// a tool daemon (`--connect`), it connects back to the front end over TLS.
pub(crate) fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let me = std::env::current_exe()?;
    let mut config = AgentConfig::default()
        .with_idle_timeout(Duration::from_secs(args.idle_timeout))
        .with_dll_helper(HelperOptions::default().with_program_args(me, [HELPER_ARG]));
    if let Some(node) = &args.node {
        config = config.for_node(node)?;
    }
    let ended = match (&args.connect, &args.fingerprint, &args.token_dir) {
        (connect, Some(pin), Some(dir)) => {
            let target = match connect {
                Some(addr) => TlsTarget::new(*addr, *pin, dir.clone()),
                None => TlsTarget::address_in_token_dir(*pin, dir.clone()),
            };
            let target = target
                .with_token_wait(Duration::from_secs(args.token_wait.unwrap_or(0)))
                .exiting_on_hang_up();
            mpir_agent::run_tls(&target, &config)?
        }
        _ => mpir_agent::run_stdio(&config)?,
    };
    tracing::info!(?ended, "agent done");
    Ok(ExitCode::SUCCESS)
}

/// How the ranks on the job's other nodes are reached.
#[derive(clap::Args, Clone)]
pub(crate) struct RemoteArgs {
    /// How to start `mpir agent` on each other node of the job: a command with `{host}` and
    /// `{agent}` that forwards the agent's stdin and stdout, run without a shell (e.g.
    /// `ssh {host} {agent}`). By default a Slurm job's agents are started with srun, in a
    /// step beside the job's, an MPICH or Intel MPI job's by a second hydra job, an Open
    /// MPI 4 job's by its orterun as MPIR tool daemons and an Open MPI 5 job's by its PMIx
    /// server as PMIx tool daemons (both connect back over TLS: --agent-listen,
    /// --agent-token-dir); other jobs are read on this node only.
    #[arg(long = "agent-launch", value_name = "TEMPLATE")]
    pub(crate) agent_launch: Option<String>,
    /// The `mpir` program on the other nodes (default: this one's path: one binary on a
    /// shared file system).
    #[arg(long = "agent-path", value_name = "PATH")]
    pub(crate) agent_path: Option<PathBuf>,
    /// Most agents one program starts and talks to: past that many nodes the agents form a
    /// tree, each starting the agents of its share of the nodes.
    #[arg(long = "agent-fanout", value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub(crate) agent_fanout: u32,
    /// Where agents that connect back (Open MPI 4's and 5's tool daemons) connect: an
    /// address of this node the other nodes reach, with or without a port (default: the
    /// address this node sends from to reach the agents' nodes, else the first address this
    /// node's name resolves to; an ephemeral port).
    #[arg(long = "agent-listen", value_name = "ADDR", value_parser = parse_listen)]
    pub(crate) agent_listen: Option<std::net::SocketAddr>,
    /// Where the private directory of those agents' one-time token files is made: a
    /// directory this node and the job's nodes share (default `~/.mpir/agent-tokens`).
    #[arg(long = "agent-token-dir", value_name = "DIR")]
    pub(crate) agent_token_dir: Option<PathBuf>,
    /// Longest wait, in seconds, for every agent to start, and for every agent's answer to
    /// a request (plus the time its samples take).
    #[arg(long = "agent-timeout", value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) agent_timeout: u64,
    /// Read the ranks on this node only; start no agent.
    #[arg(long = "no-agents", conflicts_with = "agent_launch")]
    pub(crate) no_agents: bool,
}

impl RemoteArgs {
    /// The front end's options these arguments give; `None` with `--no-agents`.
    pub(crate) fn front_options(&self, read: ReadSettings) -> Option<FrontEndOptions> {
        if self.no_agents {
            return None;
        }
        let launch = match &self.agent_launch {
            Some(t) => Launch::Template(t.clone()),
            None => Launch::Auto,
        };
        let agent: Vec<OsString> = match &self.agent_path {
            Some(p) => vec![p.clone().into_os_string(), "agent".into()],
            None => mpir_agent::default_agent_command(),
        };
        let mut options = FrontEndOptions::default()
            .with_launch(launch)
            .with_agent(agent)
            .with_fanout(self.agent_fanout)
            .with_start_timeout(Duration::from_secs(self.agent_timeout))
            .with_request_timeout(Duration::from_secs(self.agent_timeout))
            .with_read(read);
        if let Some(a) = self.agent_listen {
            options = options.with_listen(a);
        }
        if let Some(d) = &self.agent_token_dir {
            options = options.with_token_dir(d.clone());
        }
        Some(options)
    }

    /// Agents on the job's other nodes, when it has ranks there and a way to reach them;
    /// `None` otherwise (with a warning when ranks are left unread for want of a way).
    pub(crate) fn start(
        &self,
        session: &mut Session,
        read: ReadSettings,
    ) -> anyhow::Result<Option<Agents>> {
        let Some(options) = self.front_options(read) else {
            return Ok(None);
        };
        self.started(|| Agents::start(session, options))
    }

    /// The agents of a job launched with `prepared`'s session options (`mpir launch`).
    pub(crate) fn start_launched(
        &self,
        session: &mut Session,
        prepared: LaunchedAgents,
    ) -> anyhow::Result<Option<Agents>> {
        self.started(|| prepared.start(session))
    }

    fn started(
        &self,
        start: impl FnOnce() -> Result<Agents, mpir_agent::FrontEndError>,
    ) -> anyhow::Result<Option<Agents>> {
        let spin = crate::progress::spinner("starting agents on the job's other nodes");
        let started = start();
        spin.finish_and_clear();
        let agents = match started {
            Ok(a) => a,
            Err(e @ mpir_agent::FrontEndError::NoEngine { .. }) if self.agent_launch.is_none() => {
                eprintln!(
                    "mpir: warning: the ranks on other nodes are not read: {}",
                    chain(&e)
                );
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        if agents.is_empty() {
            return Ok(None);
        }
        for n in agents.states() {
            tracing::info!(host = %n.host, subtree = ?n.subtree, ranks = n.ranks.len(), "agent");
            if let Some((failure, detail)) = &n.down {
                eprintln!("mpir: warning: {}: {failure}: {detail}", n.host);
            }
        }
        Ok(Some(agents))
    }
}

/// An `--agent-listen` address: `IP:PORT`, or an IP alone (an ephemeral port).
fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse::<std::net::SocketAddr>()
        .or_else(|_| {
            s.trim_matches(|c| c == '[' || c == ']')
                .parse::<std::net::IpAddr>()
                .map(|ip| std::net::SocketAddr::new(ip, 0))
        })
        .map_err(|_| format!("{s:?} is not an IP address (with or without a port)"))
}

/// The agents' read settings from the reader's and the common arguments.
pub(crate) fn read_settings(
    reader: Option<&ReaderArgs>,
    debug_dirs: &[PathBuf],
    timeout: Duration,
) -> ReadSettings {
    let mut read = ReadSettings::default();
    if let Some(r) = reader {
        read.engine = match r.engine {
            Engine::Auto => EngineChoice::Auto,
            Engine::Dll => EngineChoice::Dll,
            Engine::Native => EngineChoice::Native,
        };
        read.dll.clone_from(&r.dll);
        read.types.clone_from(&r.types);
        read.no_shipped_layouts = r.no_shipped_layouts;
    }
    read.debug_dirs = debug_dirs.to_vec();
    read.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    read
}

/// A front end's error for the tool: this node's session error as itself (its hints come from
/// its type), anything else as it is.
pub(crate) fn local_error(e: mpir_agent::FrontEndError) -> anyhow::Error {
    match e {
        mpir_agent::FrontEndError::Session(s) => anyhow::Error::from(*s),
        other => anyhow::Error::from(other),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_listen;

    #[test]
    fn listen_addresses_take_an_ip_with_or_without_a_port() {
        assert_eq!(parse_listen("10.1.2.3").unwrap().to_string(), "10.1.2.3:0");
        assert_eq!(
            parse_listen("10.1.2.3:4000").unwrap().to_string(),
            "10.1.2.3:4000"
        );
        assert_eq!(parse_listen("[::1]").unwrap().to_string(), "[::1]:0");
        assert_eq!(parse_listen("::1").unwrap().to_string(), "[::1]:0");
        assert!(parse_listen("node1").unwrap_err().contains("node1"));
    }
}
