//! The argument groups the commands share (one definition each): the common options, which
//! ranks, how queues are read, and how the job's other nodes are reached.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use mpir_agent::{FrontEndOptions, Launch, LaunchedAgents, NodeState};
use mpir_mqd::HelperOptions;
use mpir_session::{ReaderOptions, Session, SessionOptions, chain};

use crate::{DEBUGINFOD, HELPER_ARG, SYMBOL_CACHE, progress};
use mpir_target::debuginfo::SymbolStore;

#[derive(clap::Args, Clone)]
pub(crate) struct Common {
    /// Print JSON (stable schema, docs/cli-json.md) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Extra debug directory (build-id tree) for symbols of stripped programs.
    #[arg(long = "debug-dir")]
    pub(crate) debug_dirs: Vec<PathBuf>,
    /// A name (or address) the launcher reports for this node that the machine's own facts
    /// (host name, /etc/hosts aliases, interface addresses) do not list; repeatable. Ranks on
    /// any other node are never touched.
    #[arg(long = "this-node", value_name = "NAME")]
    pub(crate) this_node: Vec<String>,
    /// Which interface the job is acquired through: `auto` (what the launcher speaks: MPIR or
    /// MPI2DD from its symbols, PMIx for a launcher with no MPIR symbol and a PMIx tool
    /// rendezvous file, such as Open MPI 5's prterun), `mpir`, `mpi2dd` or `pmix`.
    #[arg(long, value_name = "IFACE", default_value = "auto")]
    pub(crate) interface: mpir_acquire::InterfaceChoice,
    /// Longest wait, in seconds, for another tracer (another mpir, a debugger) to let go of
    /// the starter or a rank before it is reported as held by it (default 15; 0: at once).
    #[arg(long = "held-wait", value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub(crate) held_wait: Option<u64>,
}

/// Session options from the common arguments: debug directories, this node's aliases, and the
/// global debuginfod switch.
pub(crate) fn session_options(common: &Common) -> SessionOptions {
    let debuginfod = match DEBUGINFOD.get().copied().flatten() {
        Some(true) => mpir_target::debuginfo::DebuginfodOptions::enabled(),
        Some(false) => mpir_target::debuginfo::DebuginfodOptions::disabled(),
        None => mpir_target::debuginfo::DebuginfodOptions::default(),
    };
    let options = common.debug_dirs.iter().fold(
        SessionOptions::default().with_debuginfod(debuginfod),
        |o, d| o.with_debug_dir(d.clone()),
    );
    let options = common
        .this_node
        .iter()
        .fold(options, |o, a| o.with_this_node_alias(a.clone()))
        .with_interface(common.interface);
    let options = match SYMBOL_CACHE.get() {
        Some(dir) => options.with_symbol_store(dir.clone()),
        None => options,
    };
    // A store that cannot be used is said once, here, when the user named its place (the
    // default place's refusal only with -v); the reads are the same without it.
    let named = options.symbol_store_named();
    let options = match options.symbol_store().map(SymbolStore::open) {
        Some(Err(e)) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                if named {
                    eprintln!("mpir: warning: {e}");
                } else {
                    tracing::info!("no symbol store: {e}");
                }
            });
            options.with_symbol_store(None)
        }
        _ => options,
    };
    match common.held_wait {
        Some(secs) => options.with_held_wait(Duration::from_secs(secs)),
        None => options,
    }
}

/// Which reader produces the queues.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The native walker when the MPI's layouts are known (it sees more: unexpected messages,
    /// global ranks, groups), else the MPI's own DLL.
    Auto,
    /// The MPI's message-queue DLL (`MPIR_dll_name`, Open MPI's `mpimsgq_dll_locations`, or
    /// `--dll`).
    Dll,
    /// mpir's own walkers of MPICH (ch3, ≥ 4.1 debug queues) and Open MPI (ob1), from the
    /// MPI's debug info or a types sidecar.
    Native,
}

impl From<Engine> for mpir_session::Engine {
    fn from(e: Engine) -> Self {
        match e {
            Engine::Auto => mpir_session::Engine::Auto,
            Engine::Dll => mpir_session::Engine::Dll,
            Engine::Native => mpir_session::Engine::Native,
        }
    }
}

/// Which ranks to read: a starter's whole job, or processes named by pid.
#[derive(clap::Args)]
pub(crate) struct RankArgs {
    /// The starter's pid (mpiexec, orterun, srun…): every rank of its job.
    #[arg(
        long,
        required_unless_present_any = ["pids", "slurm_job"],
        conflicts_with_all = ["pids", "slurm_job"]
    )]
    pub(crate) starter: Option<u32>,
    /// A Slurm job (or job step, `J.S`) whose srun runs on this node: every rank of that step,
    /// as with --starter and that srun's pid.
    #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with = "pids")]
    pub(crate) slurm_job: Option<mpir_acquire::slurm::StepId>,
    /// Rank processes to read directly (repeat, or separate with commas).
    #[arg(long = "pid", value_delimiter = ',')]
    pub(crate) pids: Vec<u32>,
    /// With --starter: only these ranks (a list and ranges, e.g. `0-3,7,12-`) are held and
    /// read; the others are not part of the result.
    #[arg(
        long = "ranks",
        id = "rank_list",
        value_name = "LIST",
        conflicts_with = "pids"
    )]
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    /// Longest wait for the starter's acquisition, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
}

impl RankArgs {
    /// The session of the ranks named: the starter's job (its selected ranks held from the
    /// acquisition for the first read, not acquired twice), or the pids.
    pub(crate) fn open(&self, options: SessionOptions) -> anyhow::Result<Session> {
        let options = options.with_timeout(Duration::from_secs(self.timeout));
        let held = || {
            let mut options = options.clone().with_hold_from_acquisition(true);
            if let Some(r) = &self.ranks {
                options = options.with_ranks(r.clone());
            }
            options
        };
        match (self.starter, self.slurm_job) {
            (Some(pid), _) => {
                let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
                let session = Session::attach(pid, held())?;
                spin.finish_and_clear();
                tracing::info!(starter = pid, "job acquired and held");
                Ok(session)
            }
            (None, Some(step)) => {
                let spin = progress::spinner(&format!("acquiring Slurm job {step}"));
                let session = Session::attach_slurm(step, held())?;
                spin.finish_and_clear();
                tracing::info!(slurm_job = %step, "job acquired and held");
                Ok(session)
            }
            (None, None) => Ok(Session::pids(self.pids.iter().copied(), options)?),
        }
    }
}

/// How to read queues: the reader and what it needs.
#[derive(clap::Args)]
pub(crate) struct ReaderArgs {
    /// The message-queue DLL to use instead of the one the MPI names.
    #[arg(long)]
    pub(crate) dll: Option<PathBuf>,
    /// A types sidecar: an object file whose DWARF describes the MPI's internal types, for an
    /// MPI library without debug information that no shipped layout set fits (`mpir layouts`
    /// lists them; a stock Open MPI of a shipped release needs none).
    #[arg(long = "types")]
    pub(crate) types: Vec<PathBuf>,
    /// Which reader to use.
    #[arg(long, value_enum, default_value_t = Engine::Auto)]
    pub(crate) engine: Engine,
    /// Read a stock Open MPI only with the types given (--types) or its debug information:
    /// the layout sets shipped with mpir (`mpir layouts`) are not tried.
    #[arg(long)]
    pub(crate) no_shipped_layouts: bool,
    /// Load the DLL into this process (faster) instead of a helper process (safer: a DLL
    /// that crashes or hangs cannot take the tool, and the ranks it holds, down with it).
    #[arg(long)]
    pub(crate) in_process: bool,
}

impl ReaderArgs {
    /// Checks that the files named exist, and gives the session options: the common ones,
    /// the types sidecars and how to read queues (the out-of-process DLL host is this program
    /// run with [`HELPER_ARG`]).
    pub(crate) fn options(&self, common: &Common) -> anyhow::Result<SessionOptions> {
        if let Some(t) = self.types.iter().find(|t| !t.is_file()) {
            anyhow::bail!("types sidecar {}: no such file", t.display());
        }
        if let Some(d) = self.dll.as_ref().filter(|d| !d.is_file()) {
            anyhow::bail!("DLL {}: no such file", d.display());
        }
        let me = std::env::current_exe().context("cannot find mpir itself")?;
        let mut reader = ReaderOptions::default()
            .with_engine(self.engine.into())
            .with_helper(HelperOptions::default().with_program_args(me, [HELPER_ARG]));
        if let Some(d) = &self.dll {
            reader = reader.with_dll(d.clone());
        }
        if self.no_shipped_layouts {
            reader = reader.without_shipped_layouts();
        }
        if self.in_process {
            #[allow(unsafe_code)]
            // SAFETY: the DLL is the one the MPI library of the target names (or the user
            // gave); in-process hosting is the user's explicit choice (`--in-process`).
            let in_process = unsafe { reader.clone().with_dll_in_process() };
            reader = in_process;
        }
        Ok(self
            .types
            .iter()
            .fold(session_options(common), |o, t| {
                o.with_types_sidecar(t.clone())
            })
            .with_reader_options(reader))
    }

    /// Whether a types sidecar was given (else a missing type is worth a hint).
    pub(crate) fn types_given(&self) -> bool {
        !self.types.is_empty()
    }
}

/// How the ranks on the job's other nodes are reached.
#[derive(clap::Args, Clone)]
pub(crate) struct RemoteArgs {
    /// How to start `mpir agent` on each other node of the job: a command with `{host}` and
    /// `{agent}` that forwards the agent's stdin and stdout, run without a shell, its words
    /// split by the shell's quoting rules ('…', "…", \) with nothing expanded (e.g. `ssh
    /// {host} {agent}`). By default a Slurm job's agents are started by one srun step beside
    /// the job's, an MPICH or Intel MPI job's by one second hydra job, an Open MPI 4 job's by
    /// its orterun as MPIR tool daemons and an Open MPI 5 job's by its PMIx server as PMIx
    /// tool daemons (all of these connect back over TLS: --agent-listen, --agent-token-dir);
    /// other jobs are read on this node only.
    #[arg(long = "agent-launch", value_name = "TEMPLATE")]
    pub(crate) agent_launch: Option<String>,
    /// The `mpir` program on the other nodes (default: this one's path: one binary on a
    /// shared file system).
    #[arg(
        long = "agent-path",
        value_name = "PATH",
        conflicts_with = "agent_ship"
    )]
    pub(crate) agent_path: Option<PathBuf>,
    /// Send this statically linked `mpir` (`cargo build --release --target
    /// x86_64-unknown-linux-musl -p mpir-cli`) to each other node through --agent-launch's
    /// command and run it there from a private file, checked by its SHA-256 on arrival and
    /// removed as it starts: for nodes that do not share this one's file system. The nodes
    /// need `sh`, `mktemp`, `head` and `sha256sum`.
    #[arg(long = "agent-ship", value_name = "PROGRAM", requires = "agent_launch")]
    pub(crate) agent_ship: Option<PathBuf>,
    /// Most agents one program starts and talks to: past that many nodes the agents form a
    /// tree, each starting the agents of its share of the nodes.
    #[arg(long = "agent-fanout", value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub(crate) agent_fanout: u32,
    /// Where agents that connect back (srun's and hydra's, Open MPI's tool daemons) connect: an
    /// address of this node the other nodes reach, with or without a port (default: the
    /// address this node sends from to reach the agents' nodes, else the first address this
    /// node's name resolves to; an ephemeral port).
    #[arg(long = "agent-listen", value_name = "ADDR", value_parser = mpir_agent::parse_listen)]
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
    /// The front end's options these arguments give; `None` with `--no-agents`. How agents
    /// read is not among them: they read as `session` does.
    pub(crate) fn front_options(&self) -> Option<FrontEndOptions> {
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
            .with_request_timeout(Duration::from_secs(self.agent_timeout));
        if let Some(a) = self.agent_listen {
            options = options.with_listen(a);
        }
        if let Some(d) = &self.agent_token_dir {
            options = options.with_token_dir(d.clone());
        }
        if let Some(p) = &self.agent_ship {
            options = options.with_ship(p.clone());
        }
        Some(options)
    }

    /// Makes the job's other nodes part of `session` (agents started through the job's
    /// engine), when it has ranks there and a way to reach them; otherwise nothing (with a
    /// warning when ranks are left unread for want of a way). Returns the nodes' states.
    pub(crate) fn reach(&self, session: &mut Session) -> anyhow::Result<Vec<NodeState>> {
        let Some(options) = self.front_options() else {
            return Ok(Vec::new());
        };
        self.reached(session, |s| mpir_agent::reach(s, options))
    }

    /// [`reach`](RemoteArgs::reach) for a job launched with `prepared`'s session options
    /// (`mpir launch`).
    pub(crate) fn reach_launched(
        &self,
        session: &mut Session,
        prepared: LaunchedAgents,
    ) -> anyhow::Result<Vec<NodeState>> {
        self.reached(session, |s| {
            let agents = prepared.start(s)?;
            Ok(mpir_agent::install(s, agents))
        })
    }

    fn reached(
        &self,
        session: &mut Session,
        start: impl FnOnce(&mut Session) -> Result<Vec<NodeState>, mpir_agent::FrontEndError>,
    ) -> anyhow::Result<Vec<NodeState>> {
        let spin = progress::spinner("starting agents on the job's other nodes");
        let started = start(session);
        spin.finish_and_clear();
        let nodes = match started {
            Ok(nodes) => nodes,
            Err(e @ mpir_agent::FrontEndError::NoEngine { .. }) if self.agent_launch.is_none() => {
                eprintln!(
                    "mpir: warning: the ranks on other nodes are not read: {}",
                    chain(&e)
                );
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        for n in &nodes {
            tracing::info!(host = %n.host, subtree = ?n.subtree, ranks = n.ranks.len(), "agent");
            if let Some((failure, detail)) = &n.down {
                eprintln!("mpir: warning: {}: {failure}: {detail}", n.host);
            }
        }
        Ok(nodes)
    }
}

/// Lets `session` go (every process it holds released, its files' symbol answers written to
/// the store) and, with `-v`, says why store files were not used or written: the reads are
/// the same without them, only slower.
pub(crate) fn let_go(session: mpir_session::Session) {
    let store = session.symbol_store();
    let mut problems = session.symbol_store_problems();
    drop(session);
    if let Some(store) = store {
        problems = store.problems();
    }
    for p in problems {
        tracing::info!("{p}");
    }
}
