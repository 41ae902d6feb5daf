//! The front end: starts one agent per node of a job that has ranks on other nodes than
//! this one, asks them what the local session reads here, and merges their answers into the
//! session's own results — the same [`QueueRead`] and [`StacksRead`] a one-node job gives,
//! with every remote rank read by its node's agent or unreadable with the node and the reason
//! ([`Unreadable::Agent`]).
//!
//! Requests go to every agent first, then this node's ranks are read, then the answers are
//! collected: the nodes work at the same time. Every wait has a deadline for all nodes
//! together ([`FrontEndOptions::request_timeout`]). An agent that fails, hangs, sends
//! garbage or answers for a rank it was not given is cut off (its launcher killed, which
//! ends it) and its ranks say so; the others go on.

use std::ffi::OsString;
use std::time::Duration;

use mpir_acquire::live::{NodeExpectations, RankClaim, process_started_unix};
use mpir_acquire::quirks::Launcher;
use mpir_session::{
    AgentFailure, DeadlockRead, QueueRead, RankRead, RemoteSample, Session, StackOptions,
    StacksRead,
};
use mpir_wire::RequestId;

use crate::error::FrontEndError;
use crate::fleet::Fleet;
use crate::launch::{Launch, default_agent_command};
use crate::merge;
use crate::protocol::{HostClaims, Plan, ReadSettings, Request, StacksAsk};

/// How the front end starts and talks to agents.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FrontEndOptions {
    /// The engine that starts agents.
    pub launch: Launch,
    /// The agent's command (default: this program's executable with `agent`).
    pub agent: Vec<OsString>,
    /// How agents read (engine, types, debug directories: as on this node).
    pub read: ReadSettings,
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
    /// Where agents that connect out (ORTE's and PRRTE's tool daemons) connect: default, the
    /// address this node sends from to reach the agents' nodes, else the first address this
    /// node's name resolves to (port 0: an ephemeral one).
    pub listen: Option<std::net::SocketAddr>,
    /// Where the private directory of such agents' token files is made: a directory the
    /// nodes share (default `~/.mpir/agent-tokens`).
    pub token_dir: Option<std::path::PathBuf>,
}

impl Default for FrontEndOptions {
    fn default() -> Self {
        FrontEndOptions {
            launch: Launch::Auto,
            agent: default_agent_command(),
            read: ReadSettings::default(),
            start_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            clock_skew: Duration::from_secs(120),
            fanout: 32,
            listen: None,
            token_dir: None,
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

    /// With these read settings.
    pub fn with_read(mut self, read: ReadSettings) -> Self {
        self.read = read;
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
    pub fn with_token_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.token_dir = Some(dir.into());
        self
    }

    /// With this request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}

/// Where a node's agent stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeState {
    /// The node (as the job's table names it) whose agent the front end talks to.
    pub host: String,
    /// The nodes whose agents it started and answers for (a tree's subtree).
    pub subtree: Vec<String>,
    /// The ranks it answers for.
    pub ranks: Vec<u64>,
    /// `None` while its agent serves; otherwise why not.
    pub down: Option<(AgentFailure, String)>,
    /// The ranks that are not served (refused on their node, or on a node of the subtree
    /// whose agent failed), with the reason.
    pub refused: Vec<(u64, String)>,
}

/// The agents of one session's job: one per other node that has selected ranks (in a tree
/// past [`FrontEndOptions::fanout`] nodes).
pub struct Agents {
    pub(crate) fleet: Fleet,
    pub(crate) options: FrontEndOptions,
    /// Open MPI 4: the request for tool daemons, joined once the agents are gone.
    pub(crate) asking: Option<crate::orte::Asking>,
    /// Open MPI 5: the PMIx tool connection the daemons were asked through, let go once the
    /// agents are gone.
    pub(crate) pmix: Option<crate::prrte::Spawned>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("nodes", &self.states())
            .finish_non_exhaustive()
    }
}

impl Agents {
    /// Starts an agent on every other node of `session`'s job that has selected ranks, each
    /// adopting that node's ranks. A job with no rank elsewhere starts nothing. A node whose
    /// agent cannot start is recorded (its ranks will say so); it does not fail the others.
    /// For Open MPI 4 ([`Launch::OrteToolDaemons`]) the session's hold on the starter, if it
    /// still has one from its acquisition, is let go first (see [`crate::Rendezvous`]); for
    /// Open MPI 5 ([`Launch::PmixToolDaemons`]) the job's PMIx server is asked for the
    /// daemons through a PMIx tool connection kept until the agents are gone.
    ///
    /// # Errors
    /// [`FrontEndError::NoEngine`] when the job has ranks elsewhere and no engine is known
    /// to reach them; [`FrontEndError::Template`] for a bad template;
    /// [`FrontEndError::ToolDaemons`] when tool daemons cannot be set up.
    pub fn start(session: &mut Session, options: FrontEndOptions) -> Result<Agents, FrontEndError> {
        let mut agents = Agents {
            fleet: Fleet::empty(),
            options,
            asking: None,
            pmix: None,
        };
        let Some(job) = session.job() else {
            return Ok(agents);
        };
        let hosts = remote_hosts(session);
        if hosts.is_empty() {
            return Ok(agents);
        }
        let launch = agents.options.launch.resolve(job)?;
        launch.check()?;
        let plan = agents.plan(job, launch);
        agents.fleet = match plan.launch {
            Launch::OrteToolDaemons => {
                let (fleet, asking) = crate::orte::start(session, hosts, &plan, &agents.options)?;
                agents.asking = Some(asking);
                fleet
            }
            Launch::PmixToolDaemons => {
                let (fleet, spawned) = crate::prrte::start(session, hosts, &plan, &agents.options)?;
                agents.pmix = Some(spawned);
                fleet
            }
            _ => Fleet::start(hosts, &plan),
        };
        Ok(agents)
    }

    /// What every agent is started, bound and checked with.
    pub(crate) fn plan(&self, job: &mpir_acquire::Job, launch: Launch) -> Plan {
        let starter = job.starter.pid;
        let uid = mpir_target::live::procfs::ProcessFacts::read(starter)
            .map(|f| f.uid)
            .unwrap_or_else(|_| nix::unistd::getuid().as_raw());
        let mut expect = NodeExpectations::new(uid)
            .with_job_started_unix(process_started_unix(starter))
            .with_clock_skew(self.options.clock_skew)
            .with_allow_other_users(self.options.read.allow_other_users);
        if let (Some(Launcher::Slurm), Some(id)) = (job.starter.launcher, job.starter.job_id) {
            expect = expect.with_job_env("SLURM_JOB_ID", id.to_string());
        }
        // PRRTE gives every rank its job's PMIx namespace.
        if let Some(p) = &job.pmix {
            expect = expect.with_job_env("PMIX_NAMESPACE", p.nspace.clone());
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Plan {
            launch,
            agent: self
                .options
                .agent
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            fanout: self.options.fanout,
            start_timeout_ms: ms(self.options.start_timeout),
            request_timeout_ms: ms(self.options.request_timeout),
            expect,
            read: self.options.read.clone(),
        }
    }

    /// Each node's state (of the agents the front end talks to).
    pub fn states(&self) -> Vec<NodeState> {
        self.fleet
            .members
            .iter()
            .map(|m| NodeState {
                host: m.host.clone(),
                subtree: m.subtree.clone(),
                ranks: m.ranks.iter().map(|c| c.rank).collect(),
                down: m.out().map(|d| (d.failure, d.detail.clone())),
                refused: m
                    .statuses
                    .iter()
                    .filter_map(|s| Some((s.rank, s.problem.as_ref()?.message.clone())))
                    .collect(),
            })
            .collect()
    }

    /// Whether no agent was needed (every selected rank is on this node).
    pub fn is_empty(&self) -> bool {
        self.fleet.members.is_empty()
    }

    /// Every selected rank's queues: this node's read by `session`, the others' by their
    /// agents, merged into one [`QueueRead`] in the job's order.
    ///
    /// # Errors
    /// As [`Session::queues`] for this node's part.
    pub fn queues(&mut self, session: &mut Session) -> Result<QueueRead, FrontEndError> {
        let id = self.fleet.send_all(&Request::Queues);
        let local = session.queues();
        // Every agent's answer is read, even when this node's part failed.
        let mut read = match local {
            Ok(read) => read,
            Err(e) => {
                let _ = self.fleet.collect(id, self.options.request_timeout);
                return Err(e.into());
            }
        };
        self.finish_queues(id, &mut read.ranks);
        if read.engine.is_none() {
            read.engine = self.engine();
        }
        Ok(read)
    }

    /// Every agent's answer to queue request `id`, put into `ranks`.
    fn finish_queues(&mut self, id: RequestId, ranks: &mut [RankRead]) {
        let replies = self.fleet.collect(id, self.options.request_timeout);
        for (reply, m) in replies.into_iter().zip(self.fleet.members.iter_mut()) {
            let outcome = merge::queue_outcome(reply, m);
            merge::queues(ranks, m, outcome);
        }
    }

    /// Who waits for whom across every node: [`Session::deadlock_across`] with this node's
    /// ranks read by `session` and the others' by their agents, in every sample.
    ///
    /// # Errors
    /// As [`Session::deadlock`].
    pub fn deadlock(
        &mut self,
        session: &mut Session,
        samples: u32,
        interval: Duration,
        progress: impl FnMut(mpir_session::Progress<'_>),
    ) -> Result<DeadlockRead, FrontEndError> {
        let mut remote = Remote {
            agents: self,
            pending: None,
        };
        let read = session.deadlock_across(samples, interval, progress, &mut remote);
        if let Some(id) = remote.pending.take() {
            let _ = self.fleet.collect(id, self.options.request_timeout);
        }
        let mut read = read?;
        if read.engine.is_none() {
            read.engine = self.engine();
        }
        Ok(read)
    }

    /// The engines the agents used (node, engine), from the last queue read.
    pub fn engines(&self) -> Vec<(String, mpir_mqd::EngineUsed)> {
        self.fleet
            .members
            .iter()
            .filter_map(|m| Some((m.host.clone(), m.engine.clone()?)))
            .collect()
    }

    /// The engine of the first agent that reported one (for a read with no rank here).
    fn engine(&self) -> Option<mpir_mqd::EngineUsed> {
        self.fleet.members.iter().find_map(|m| m.engine.clone())
    }

    /// Every selected rank's stacks: this node's read by `session`, the others' by their
    /// agents in the same samples, merged into one [`StacksRead`] (trees rebuilt from every
    /// rank's stacks with `options`).
    ///
    /// # Errors
    /// As [`Session::stacks`] for this node's part.
    pub fn stacks(
        &mut self,
        session: &mut Session,
        options: &StackOptions,
    ) -> Result<StacksRead, FrontEndError> {
        self.stacks_with(session, options, |_| {})
    }

    /// [`stacks`](Agents::stacks), telling `progress` how far this node's read is (the other
    /// nodes' agents read at the same time; their answers are awaited after it).
    ///
    /// # Errors
    /// As [`stacks`](Agents::stacks).
    pub fn stacks_with(
        &mut self,
        session: &mut Session,
        options: &StackOptions,
        progress: impl FnMut(mpir_session::StackProgress),
    ) -> Result<StacksRead, FrontEndError> {
        let id = self.fleet.send_all(&Request::Stacks(ask_of(options)));
        let local = session.stacks_with(options, progress);
        let sampling = options
            .interval()
            .saturating_mul(options.samples().saturating_sub(1));
        let replies = self
            .fleet
            .collect(id, self.options.request_timeout + sampling);
        let mut read = local?;
        let samples = read.samples.len();
        let parts: Vec<Vec<RemoteSample>> = replies
            .into_iter()
            .zip(self.fleet.members.iter_mut())
            .map(|(reply, m)| merge::stacks_part(reply, m, samples))
            .collect();
        read.merge_remote(&parts, options);
        Ok(read)
    }

    /// Says goodbye to every agent and waits (bounded, 5 s in all) for their launchers to
    /// end; kills what is left. Dropping the agents does the same.
    pub fn shutdown(mut self) {
        self.fleet.close();
        self.asking = None;
        self.pmix = None;
    }
}

/// A stacks request from the session's options.
pub(crate) fn ask_of(options: &StackOptions) -> StacksAsk {
    StacksAsk::new(
        options.samples(),
        u64::try_from(options.interval().as_millis()).unwrap_or(u64::MAX),
        options
            .max_stop()
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
    )
    .with_python(crate::protocol::PythonAsk::of(options.python()))
}

/// The selected ranks of `session`'s job that are not on this node, by node (in the order
/// of the nodes' first ranks).
pub(crate) fn remote_hosts(session: &Session) -> Vec<HostClaims> {
    let mut hosts: Vec<HostClaims> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for r in session.ranks_elsewhere() {
        let Some(host) = r.host.filter(|h| !h.is_empty()) else {
            continue;
        };
        let claim = RankClaim::new(r.rank, r.pid, host, r.executable.map(str::to_string));
        match index.get(host) {
            Some(&i) => hosts[i].ranks.push(claim),
            None => {
                index.insert(host.to_string(), hosts.len());
                hosts.push(HostClaims::new(host, vec![claim]));
            }
        }
    }
    hosts
}

/// The agents as [`mpir_session::RemoteReads`] of a deadlock search: one queue request per
/// sample.
struct Remote<'a> {
    agents: &'a mut Agents,
    pending: Option<RequestId>,
}

impl mpir_session::RemoteReads for Remote<'_> {
    fn start(&mut self, _sample: u32) {
        self.pending = Some(self.agents.fleet.send_all(&Request::Queues));
    }

    fn finish(&mut self, _sample: u32, ranks: &mut [RankRead]) {
        if let Some(id) = self.pending.take() {
            self.agents.finish_queues(id, ranks);
        }
    }
}
