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

use std::time::Duration;

use mpir_acquire::live::{NodeExpectations, RankClaim, process_started_unix};
use mpir_acquire::quirks::Launcher;
use mpir_session::{NodeState, OtherNodes, RankRead, RemoteSample, Session, StackOptions};
use mpir_wire::RequestId;

use crate::engine::{orte, prrte};
use crate::error::FrontEndError;
use crate::fleet::Fleet;
use crate::launch::Launch;
use crate::merge;
use crate::options::FrontEndOptions;
use crate::protocol::{HostClaims, Plan, PythonAsk, ReadSettings, Request, StacksAsk};

/// The agents of one session's job: one per other node that has selected ranks (in a tree
/// past [`FrontEndOptions::fanout`] nodes).
pub struct Agents {
    pub(crate) fleet: Fleet,
    pub(crate) options: FrontEndOptions,
    /// Open MPI 4: the request for tool daemons, joined once the agents are gone.
    pub(crate) asking: Option<orte::Asking>,
    /// Open MPI 5: the PMIx tool connection the daemons were asked through, let go once the
    /// agents are gone.
    pub(crate) pmix: Option<prrte::Spawned>,
    /// The request whose answers the session's read awaits next.
    pub(crate) pending: Option<RequestId>,
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
            pending: None,
        };
        let Some(job) = session.job() else {
            return Ok(agents);
        };
        let hosts = remote_hosts(session);
        if hosts.is_empty() {
            return Ok(agents);
        }
        // Agents started at once (Slurm's step, hydra's job), a subtree root's too, find
        // their tokens where this front end puts them.
        let launch = agents
            .options
            .launch
            .resolve(job)?
            .with_token_dir(agents.options.token_dir.clone());
        launch.check()?;
        let read = ReadSettings::of(session.options());
        let mut plan = agents.plan(job, launch, read);
        if let Some(program) = &agents.options.ship {
            plan.ship = Some(crate::ship::Shipment::of(program)?);
            plan.ship_from = Some(program.clone());
            if !matches!(plan.launch, Launch::Template(_)) {
                return Err(FrontEndError::Ship {
                    path: program.clone(),
                    why: format!(
                        "only a command per node (--agent-launch) carries it; the job's engine \
                         is {:?}, whose agents must find their program where they run",
                        plan.launch
                    ),
                });
            }
        }
        agents.fleet = match plan.launch {
            Launch::OrteToolDaemons => {
                let (fleet, asking) = orte::start(session, hosts, &plan, &agents.options)?;
                agents.asking = Some(asking);
                fleet
            }
            Launch::PmixToolDaemons => {
                let (fleet, spawned) = prrte::start(session, hosts, &plan, &agents.options)?;
                agents.pmix = Some(spawned);
                fleet
            }
            _ => Fleet::start_at(hosts, &plan, agents.options.listen),
        };
        Ok(agents)
    }

    /// What every agent is started, bound and checked with.
    pub(crate) fn plan(&self, job: &mpir_acquire::Job, launch: Launch, read: ReadSettings) -> Plan {
        let starter = job.starter.pid;
        let uid = mpir_target::live::procfs::ProcessFacts::read(starter)
            .map(|f| f.uid)
            .unwrap_or_else(|_| nix::unistd::getuid().as_raw());
        let mut expect = NodeExpectations::new(uid)
            .with_job_started_unix(process_started_unix(starter))
            .with_clock_skew(self.options.clock_skew)
            .with_allow_other_users(read.allow_other_users);
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
            read,
            ship: None,
            ship_from: None,
        }
    }

    /// Each node's state (of the agents the front end talks to).
    pub fn states(&self) -> Vec<NodeState> {
        self.fleet
            .members
            .iter()
            .map(|m| {
                let state = NodeState::new(
                    m.host.clone(),
                    m.subtree.clone(),
                    m.ranks.iter().map(|c| c.rank).collect(),
                )
                .with_refused(
                    m.statuses
                        .iter()
                        .filter_map(|s| Some((s.rank, s.problem.as_ref()?.message.clone())))
                        .collect(),
                );
                match m.out() {
                    Some(d) => state.with_down(d.failure, d.detail.clone()),
                    None => state,
                }
            })
            .collect()
    }

    /// Whether no agent was needed (every selected rank is on this node).
    pub fn is_empty(&self) -> bool {
        self.fleet.members.is_empty()
    }

    /// Every agent's answer to queue request `id`, put into `ranks`.
    fn collect_queues(&mut self, id: RequestId, ranks: &mut [RankRead]) {
        let replies = self.fleet.collect(id, self.options.request_timeout);
        for (reply, m) in replies.into_iter().zip(self.fleet.members.iter_mut()) {
            let outcome = merge::queue_outcome(reply, m);
            merge::queues(ranks, m, outcome);
        }
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
    .with_python(PythonAsk::of(options.python()))
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

/// The agents as the session's other nodes: each read sent to every agent before this node's
/// ranks are held, the answers awaited (one deadline for all) and merged.
impl OtherNodes for Agents {
    fn start_queues(&mut self) {
        self.pending = Some(self.fleet.send_all(&Request::Queues));
    }

    fn finish_queues(&mut self, ranks: &mut [RankRead]) {
        if let Some(id) = self.pending.take() {
            self.collect_queues(id, ranks);
        }
    }

    fn start_stacks(&mut self, options: &StackOptions) {
        self.pending = Some(self.fleet.send_all(&Request::Stacks(ask_of(options))));
    }

    fn finish_stacks(&mut self, options: &StackOptions, samples: usize) -> Vec<Vec<RemoteSample>> {
        let Some(id) = self.pending.take() else {
            return Vec::new();
        };
        let sampling = options
            .interval()
            .saturating_mul(options.samples().saturating_sub(1));
        let replies = self
            .fleet
            .collect(id, self.options.request_timeout + sampling);
        replies
            .into_iter()
            .zip(self.fleet.members.iter_mut())
            .map(|(reply, m)| merge::stacks_part(reply, m, samples))
            .collect()
    }

    fn engine(&self) -> Option<mpir_mqd::EngineUsed> {
        self.fleet.members.iter().find_map(|m| m.engine.clone())
    }

    fn nodes(&self) -> Vec<NodeState> {
        self.states()
    }
}

/// Starts an agent on every other node of `session`'s job that has selected ranks
/// ([`Agents::start`]) and makes them part of the session: from then on
/// [`Session::queues`], [`Session::stacks`] and [`Session::deadlock`] read the whole job.
/// Returns each node's state (empty when every selected rank is on this node).
///
/// # Errors
/// As [`Agents::start`].
pub fn reach(
    session: &mut Session,
    options: FrontEndOptions,
) -> Result<Vec<NodeState>, FrontEndError> {
    let agents = Agents::start(session, options)?;
    Ok(install(session, agents))
}

/// Makes `agents` part of `session` (unless there is none) and returns their nodes' states.
pub fn install(session: &mut Session, agents: Agents) -> Vec<NodeState> {
    let states = agents.states();
    if !agents.is_empty() {
        session.reach_other_nodes(Box::new(agents));
    }
    states
}
