//! `agent`: serve this node's ranks of a job to a front end over stdin/stdout (issue 21), and
//! the front end's options of `queues`, `deadlock` and `stacks` that start agents on the
//! job's other nodes.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mpir_agent::{AgentConfig, Agents, EngineChoice, FrontEndOptions, Launch, ReadSettings};
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
}

/// `mpir agent`: started by `mpir` itself on another node (through srun or
/// `--agent-launch`), it speaks only the wire protocol on stdin/stdout.
pub(crate) fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let me = std::env::current_exe()?;
    let mut config = AgentConfig::default()
        .with_idle_timeout(Duration::from_secs(args.idle_timeout))
        .with_dll_helper(HelperOptions::default().with_program_args(me, [HELPER_ARG]));
    if let Some(node) = &args.node {
        config = config.for_node(node)?;
    }
    let ended = mpir_agent::run_stdio(&config)?;
    tracing::info!(?ended, "agent done");
    Ok(ExitCode::SUCCESS)
}

/// How the ranks on the job's other nodes are reached.
#[derive(clap::Args, Clone)]
pub(crate) struct RemoteArgs {
    /// How to start `mpir agent` on each other node of the job: a command with `{host}` and
    /// `{agent}` that forwards the agent's stdin and stdout, run without a shell (e.g.
    /// `ssh {host} {agent}`). By default a Slurm job's agents are started with srun, in a
    /// step beside the job's; other jobs are read on this node only.
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
    /// Agents on the job's other nodes, when it has ranks there and a way to reach them;
    /// `None` otherwise (with a warning when ranks are left unread for want of a way).
    pub(crate) fn start(
        &self,
        session: &Session,
        read: ReadSettings,
    ) -> anyhow::Result<Option<Agents>> {
        if self.no_agents {
            return Ok(None);
        }
        let launch = match &self.agent_launch {
            Some(t) => Launch::Template(t.clone()),
            None => Launch::Auto,
        };
        let agent: Vec<OsString> = match &self.agent_path {
            Some(p) => vec![p.clone().into_os_string(), "agent".into()],
            None => mpir_agent::default_agent_command(),
        };
        let options = FrontEndOptions::default()
            .with_launch(launch)
            .with_agent(agent)
            .with_fanout(self.agent_fanout)
            .with_start_timeout(Duration::from_secs(self.agent_timeout))
            .with_request_timeout(Duration::from_secs(self.agent_timeout))
            .with_read(read);
        let spin = crate::progress::spinner("starting agents on the job's other nodes");
        let started = Agents::start(session, options);
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
