//! The front end's options ([`FrontEndOptions`]): below the front end and every engine that
//! reads them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::launch::{Launch, default_agent_command};
use crate::tokens::default_token_parent;

/// How the front end starts and talks to agents.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FrontEndOptions {
    /// The engine that starts agents.
    pub launch: Launch,
    /// The agent's command (default: this program's executable with `agent`).
    pub agent: Vec<OsString>,
    /// Every agent must have started and adopted its ranks within this (default 60 s).
    pub start_timeout: Duration,
    /// Every agent must answer a request within this, plus the time its samples take
    /// (default 120 s).
    pub request_timeout: Duration,
    /// Clock skew allowed between nodes when an agent checks a rank's start time.
    pub clock_skew: Duration,
    /// Most agents the front end (or any agent) starts and talks to (default 32): past that
    /// many nodes, agents form a tree — each of the front end's agents starts the agents of
    /// its share of the nodes and answers for them.
    pub fanout: u32,
    /// Where agents that connect back (one srun step or hydra job for all nodes, ORTE's and
    /// PRRTE's tool daemons) connect: default, the
    /// address this node sends from to reach the agents' nodes, else the first address this
    /// node's name resolves to (port 0: an ephemeral one).
    pub listen: Option<std::net::SocketAddr>,
    /// Where the private directory of such agents' token files is made: a directory the
    /// nodes share (default `~/.mpir/agent-tokens`).
    pub token_dir: Option<PathBuf>,
    /// A statically linked `mpir` to send to each node and start there from a private file
    /// (nodes that do not share this one's file system; [`crate::ship`]): through a command
    /// per node ([`Launch::Template`]) only. `None`: [`FrontEndOptions::agent`] is run where
    /// it is.
    pub ship: Option<PathBuf>,
}

impl Default for FrontEndOptions {
    fn default() -> Self {
        FrontEndOptions {
            launch: Launch::Auto,
            agent: default_agent_command(),
            start_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            clock_skew: Duration::from_secs(120),
            fanout: 32,
            listen: None,
            token_dir: None,
            ship: None,
        }
    }
}

impl FrontEndOptions {
    /// With this engine.
    pub fn with_launch(mut self, launch: Launch) -> Self {
        self.launch = launch;
        self
    }

    /// With this agent command (program and arguments).
    pub fn with_agent(mut self, agent: Vec<OsString>) -> Self {
        self.agent = agent;
        self
    }

    /// With this start timeout.
    pub fn with_start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// With this fanout (at least 2).
    pub fn with_fanout(mut self, fanout: u32) -> Self {
        self.fanout = fanout.max(2);
        self
    }

    /// With this address for agents that connect out.
    pub fn with_listen(mut self, listen: std::net::SocketAddr) -> Self {
        self.listen = Some(listen);
        self
    }

    /// With this parent directory of token files.
    pub fn with_token_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.token_dir = Some(dir.into());
        self
    }

    /// Sending `program` (a static `mpir`) to each node to run as the agent there.
    pub fn with_ship(mut self, program: impl Into<PathBuf>) -> Self {
        self.ship = Some(program.into());
        self
    }

    /// With this request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Where the token directories are made: [`FrontEndOptions::token_dir`], else
    /// `~/.mpir/agent-tokens`.
    pub(crate) fn token_parent(&self) -> PathBuf {
        self.token_dir.clone().unwrap_or_else(default_token_parent)
    }
}
