//! `agent`: serve this node's ranks of a job to a front end over stdin/stdout (issue 21), or
//! over TLS as a launcher's tool daemon. How the front end reaches the agents is in
//! [`crate::args::RemoteArgs`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mpir_agent::{AgentConfig, TlsTarget};
use mpir_mqd::HelperOptions;

use crate::HELPER_ARG;

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
    /// This program was sent to this node by the front end (`--agent-ship`) and runs from a
    /// private file: remove that file as it starts (nothing is left on the node however the
    /// agent ends).
    #[arg(long)]
    pub(crate) shipped: bool,
}

/// `mpir agent`: started by `mpir` itself on another node (through srun or
/// `--agent-launch`), it speaks only the wire protocol on stdin/stdout; started by orterun as
/// a tool daemon (`--connect`), it connects back to the front end over TLS.
pub(crate) fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let me = if args.shipped {
        if let Err(why) = mpir_agent::ship::remove_own_file() {
            eprintln!("mpir agent: warning: the program sent here was left in place: {why}");
        }
        // Its file is gone: the kernel's link to it still runs it (the DLL helper).
        PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe()?
    };
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
