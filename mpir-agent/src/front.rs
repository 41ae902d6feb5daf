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

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Child;
use std::time::{Duration, Instant};

use mpir_acquire::live::{NodeExpectations, RankClaim, process_started_unix};
use mpir_acquire::quirks::Launcher;
use mpir_mqd::MqdError;
use mpir_session::{
    AgentFailure, DeadlockRead, QueueRead, RankError, RankRead, RemoteSample, Session,
    StackOptions, StacksRead, StopTime, Unreadable,
};
use mpir_types::stacks::{Unreached, UnreachedReason};
use mpir_wire::{
    Connection, ContentKind, Gate, Message, MessageKind, NodeId, Options, Pipe, RequestId,
    Transport,
};

use crate::error::{FrontEndError, ProtocolError};
use crate::launch::{Launch, default_agent_command};
use crate::protocol::{
    Adopt, ProblemKind, RankQueuesOut, RankStatus, ReadSettings, Reply, Request, StacksAsk,
};

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

    /// With this request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}

/// An agent's connection, whatever carries it (a pipe its engine forwards, TLS).
type AgentLink = Connection<Box<dyn Transport + Send>>;

/// Why a node's agent is out.
#[derive(Debug, Clone)]
struct Down {
    failure: AgentFailure,
    detail: String,
}

impl Down {
    fn new(failure: AgentFailure, detail: impl Into<String>) -> Down {
        Down {
            failure,
            detail: detail.into(),
        }
    }
}

/// One node's agent.
struct NodeAgent {
    host: String,
    claims: Vec<RankClaim>,
    child: Option<Child>,
    link: Result<AgentLink, Down>,
    statuses: Vec<RankStatus>,
    /// The engine it reported in its last queue read.
    engine: Option<mpir_mqd::EngineUsed>,
}

impl NodeAgent {
    /// Cuts the agent off for `down` (the first reason stays).
    fn down(&mut self, down: Down) {
        if self.link.is_ok() {
            self.failed(down);
        }
    }

    /// Records `down` whatever came before (a start that failed), and ends the agent.
    fn failed(&mut self, down: Down) {
        if let Some(c) = self.child.as_mut() {
            // Its launcher (srun, ssh…) killed: the agent's stdin closes and it lets go.
            let _ = c.kill();
            let _ = c.wait();
        }
        self.child = None;
        self.link = Err(down);
    }

    fn ranks(&self) -> HashSet<u64> {
        self.claims.iter().map(|c| c.rank).collect()
    }
}

/// Where a node's agent stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeState {
    /// The node (as the job's table names it).
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<u64>,
    /// `None` while its agent serves; otherwise why not.
    pub down: Option<(AgentFailure, String)>,
    /// The ranks its agent refused or could not serve, with the reason.
    pub refused: Vec<(u64, String)>,
}

/// The agents of one session's job: one per other node that has selected ranks.
pub struct Agents {
    nodes: Vec<NodeAgent>,
    next: u64,
    options: FrontEndOptions,
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
    ///
    /// # Errors
    /// [`FrontEndError::NoEngine`] when the session has no job (pids, cores) with other
    /// nodes' ranks and no engine is known; [`FrontEndError::Template`] for a bad template.
    pub fn start(session: &Session, options: FrontEndOptions) -> Result<Agents, FrontEndError> {
        let mut agents = Agents {
            nodes: Vec::new(),
            next: 1,
            options,
        };
        let Some(job) = session.job() else {
            return Ok(agents);
        };
        let selection = session.options().ranks().cloned();
        let mut by_host: BTreeMap<String, Vec<RankClaim>> = BTreeMap::new();
        for r in job.ranks() {
            if selection.as_ref().is_some_and(|s| !s.contains(r.rank))
                || job.locality(r.rank).is_local()
            {
                continue;
            }
            let Some(host) = r.host.filter(|h| !h.is_empty()) else {
                continue;
            };
            by_host
                .entry(host.to_string())
                .or_default()
                .push(RankClaim::new(
                    r.rank,
                    r.pid,
                    host,
                    r.executable.map(str::to_string),
                ));
        }
        if by_host.is_empty() {
            return Ok(agents);
        }
        let launch = agents.options.launch.resolve(job)?;
        launch.check()?;
        let starter = job.starter.pid;
        let uid = mpir_target::live::procfs::ProcessFacts::read(starter)
            .map(|f| f.uid)
            .unwrap_or_else(|_| nix::unistd::getuid().as_raw());
        let mut expect = NodeExpectations::new(uid)
            .with_job_started_unix(process_started_unix(starter))
            .with_clock_skew(agents.options.clock_skew)
            .with_allow_other_users(agents.options.read.allow_other_users);
        if let (Some(Launcher::Slurm), Some(id)) = (job.starter.launcher, job.starter.job_id) {
            expect = expect.with_job_env("SLURM_JOB_ID", id.to_string());
        }
        // Every agent started first, so that they start at the same time; each one's pipe
        // waits here for its handshake.
        let mut pipes = Vec::new();
        for (host, claims) in by_host {
            let mut node = NodeAgent {
                host,
                claims,
                child: None,
                link: Err(Down::new(AgentFailure::NotStarted, "not started")),
                statuses: Vec::new(),
                engine: None,
            };
            let mut agent = agents.options.agent.clone();
            agent.extend(["--node".into(), node.host.clone().into()]);
            match launch.command(&node.host, &agent) {
                Ok(mut cmd) => {
                    // Its own process group: a Ctrl-C at the terminal reaches this program,
                    // which ends the agents by closing their pipes (srun would take a
                    // first SIGINT as a request for status).
                    cmd.process_group(0);
                    match cmd.spawn() {
                        Ok(mut child) => {
                            let (Some(stdout), Some(stdin)) =
                                (child.stdout.take(), child.stdin.take())
                            else {
                                unreachable!("both piped by Launch::command")
                            };
                            node.child = Some(child);
                            // Parked as a pipe until the handshake below.
                            agents.nodes.push(node);
                            let i = agents.nodes.len() - 1;
                            let pipe: Box<dyn Transport + Send> =
                                Box::new(Pipe::new(stdout, stdin));
                            pipes.push((i, pipe));
                            continue;
                        }
                        Err(e) => {
                            node.link = Err(Down::new(
                                AgentFailure::NotStarted,
                                format!("{:?}: {e}", cmd.get_program()),
                            ));
                        }
                    }
                }
                Err(e) => node.link = Err(Down::new(AgentFailure::NotStarted, e.to_string())),
            }
            agents.nodes.push(node);
        }
        agents.handshake_all(pipes, &expect);
        Ok(agents)
    }

    /// Each node's state.
    pub fn states(&self) -> Vec<NodeState> {
        self.nodes
            .iter()
            .map(|n| NodeState {
                host: n.host.clone(),
                ranks: n.claims.iter().map(|c| c.rank).collect(),
                down: n.link.as_ref().err().map(|d| (d.failure, d.detail.clone())),
                refused: n
                    .statuses
                    .iter()
                    .filter_map(|s| Some((s.rank, s.problem.as_ref()?.message.clone())))
                    .collect(),
            })
            .collect()
    }

    /// Whether no agent was needed (every selected rank is on this node).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn handshake_all(
        &mut self,
        pipes: Vec<(usize, Box<dyn Transport + Send>)>,
        expect: &NodeExpectations,
    ) {
        let deadline = Instant::now() + self.options.start_timeout;
        for (i, pipe) in pipes {
            let node = &mut self.nodes[i];
            let left = deadline.saturating_duration_since(Instant::now());
            let wire =
                Options::default().with_handshake_timeout(left.max(Duration::from_millis(1)));
            let id = NodeId(u32::try_from(i + 1).unwrap_or(u32::MAX));
            match Connection::front_end(pipe, &Gate::Engine(id), &wire) {
                Ok(accepted) => {
                    if accepted.hello.node != node.host {
                        node.failed(Down::new(
                            AgentFailure::BadAnswer,
                            format!(
                                "the agent started runs on {}, not on {}: check the agent \
                                 launch command",
                                accepted.hello.node, node.host
                            ),
                        ));
                        continue;
                    }
                    node.link = Ok(accepted.connection);
                }
                Err(e) => {
                    // A launcher that failed has usually exited by now: its status says
                    // more than the closed pipe (waited for briefly).
                    let mut status = String::new();
                    if let Some(c) = node.child.as_mut() {
                        for _ in 0..25 {
                            if let Ok(Some(s)) = c.try_wait() {
                                status = format!(" (its launcher exited: {s})");
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                    let failure = match &e {
                        mpir_wire::WireError::Timeout { .. } => AgentFailure::TimedOut,
                        mpir_wire::WireError::Closed { .. } | mpir_wire::WireError::Io { .. } => {
                            AgentFailure::NotStarted
                        }
                        _ => AgentFailure::BadAnswer,
                    };
                    node.failed(Down::new(
                        failure,
                        format!("{}{status}", mpir_session::chain(&e)),
                    ));
                }
            }
        }
        // Adopt: every agent asked first, then the answers.
        let read = self.options.read.clone();
        let id = self.fresh_id();
        for node in &mut self.nodes {
            let adopt = Request::Adopt(Adopt::new(
                node.claims.clone(),
                expect.clone(),
                read.clone(),
            ));
            send(node, &adopt.to_message(id));
        }
        for i in 0..self.nodes.len() {
            match self.receive(i, id, deadline) {
                Ok(Reply::Adopted { ranks, .. }) => {
                    let node = &mut self.nodes[i];
                    let claims: Vec<u64> = node.claims.iter().map(|c| c.rank).collect();
                    let answered: Vec<u64> = ranks.iter().map(|r| r.rank).collect();
                    if answered != claims {
                        node.down(Down::new(
                            AgentFailure::BadAnswer,
                            format!("it adopted ranks {answered:?}, asked {claims:?}"),
                        ));
                        continue;
                    }
                    node.statuses = ranks;
                }
                Ok(Reply::Failed { error }) => {
                    self.nodes[i].down(Down::new(AgentFailure::ReadFailed, error));
                }
                Ok(_) => self.nodes[i].down(Down::new(
                    AgentFailure::BadAnswer,
                    ProtocolError::WrongReply {
                        asked: "adopt",
                        got: "another",
                    }
                    .to_string(),
                )),
                Err(down) => self.nodes[i].down(down),
            }
        }
    }

    fn fresh_id(&mut self) -> RequestId {
        self.next += 1;
        RequestId(self.next)
    }

    /// Sends `request` to every agent that serves; returns its id.
    fn send_all(&mut self, request: &Request) -> RequestId {
        let id = self.fresh_id();
        let message = request.to_message(id);
        for node in &mut self.nodes {
            send(node, &message);
        }
        id
    }

    /// Node `i`'s reply to `id`, by `deadline`; a node that fails is cut off.
    fn receive(&mut self, i: usize, id: RequestId, deadline: Instant) -> Result<Reply, Down> {
        let node = &mut self.nodes[i];
        let link = match node.link.as_mut() {
            Ok(l) => l,
            Err(d) => return Err(d.clone()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let got = link
            .set_silence_timeout(left.max(Duration::from_millis(1)))
            .and_then(|()| link.recv());
        let result = match got {
            Ok(m) if m.request != id => Err(Down::new(
                AgentFailure::BadAnswer,
                ProtocolError::OtherRequest {
                    expected: id.0,
                    got: m.request.0,
                }
                .to_string(),
            )),
            Ok(m) => Reply::from_message(&m)
                .map_err(|e| Down::new(AgentFailure::BadAnswer, e.to_string())),
            Err(e @ mpir_wire::WireError::Timeout { .. }) => {
                Err(Down::new(AgentFailure::TimedOut, mpir_session::chain(&e)))
            }
            Err(e @ (mpir_wire::WireError::Closed { .. } | mpir_wire::WireError::Io { .. })) => {
                Err(Down::new(
                    AgentFailure::Unreachable,
                    mpir_session::chain(&e),
                ))
            }
            Err(e) => Err(Down::new(AgentFailure::BadAnswer, mpir_session::chain(&e))),
        };
        if let Err(d) = &result {
            node.down(d.clone());
        }
        result
    }

    /// Every node's reply to `id`, by one deadline for all.
    fn collect(&mut self, id: RequestId, timeout: Duration) -> Vec<Result<Reply, Down>> {
        let deadline = Instant::now() + timeout;
        (0..self.nodes.len())
            .map(|i| self.receive(i, id, deadline))
            .collect()
    }

    /// Every selected rank's queues: this node's read by `session`, the others' by their
    /// agents, merged into one [`QueueRead`] in the job's order.
    ///
    /// # Errors
    /// As [`Session::queues`] for this node's part.
    pub fn queues(&mut self, session: &mut Session) -> Result<QueueRead, FrontEndError> {
        let id = self.send_all(&Request::Queues);
        let local = session.queues();
        // Every agent's answer is read, even when this node's part failed.
        let mut read = match local {
            Ok(read) => read,
            Err(e) => {
                let _ = self.collect(id, self.options.request_timeout);
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
        let replies = self.collect(id, self.options.request_timeout);
        for (i, reply) in replies.into_iter().enumerate() {
            let outcome = match reply {
                Ok(Reply::Queues { engine, ranks, .. }) => {
                    let mine = self.nodes[i].ranks();
                    match ranks.iter().find(|r| !mine.contains(&r.rank)) {
                        Some(r) => {
                            let d = Down::new(
                                AgentFailure::BadAnswer,
                                ProtocolError::ForeignRank { rank: r.rank }.to_string(),
                            );
                            self.nodes[i].down(d.clone());
                            Err(d)
                        }
                        None => {
                            self.nodes[i].engine = engine;
                            Ok(ranks)
                        }
                    }
                }
                Ok(Reply::Failed { error }) => Err(Down::new(AgentFailure::ReadFailed, error)),
                Ok(_) => Err(Down::new(
                    AgentFailure::BadAnswer,
                    "a reply of another kind to a queues request",
                )),
                Err(d) => Err(d),
            };
            merge_queues(ranks, &self.nodes[i], outcome);
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
            let _ = self.collect(id, self.options.request_timeout);
        }
        let mut read = read?;
        if read.engine.is_none() {
            read.engine = self.engine();
        }
        Ok(read)
    }

    /// The engines the agents used (node, engine), from the last queue read.
    pub fn engines(&self) -> Vec<(String, mpir_mqd::EngineUsed)> {
        self.nodes
            .iter()
            .filter_map(|n| Some((n.host.clone(), n.engine.clone()?)))
            .collect()
    }

    /// The engine of the first agent that reported one (for a read with no rank here).
    fn engine(&self) -> Option<mpir_mqd::EngineUsed> {
        self.nodes.iter().find_map(|n| n.engine.clone())
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
        let ask = StacksAsk::new(
            options.samples(),
            u64::try_from(options.interval().as_millis()).unwrap_or(u64::MAX),
            options
                .max_stop()
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        );
        let id = self.send_all(&Request::Stacks(ask));
        let local = session.stacks(options);
        let sampling = options
            .interval()
            .saturating_mul(options.samples().saturating_sub(1));
        let replies = self.collect(id, self.options.request_timeout + sampling);
        let mut read = local?;
        let samples = read.samples.len();
        let mut parts = Vec::new();
        for (i, reply) in replies.into_iter().enumerate() {
            let node = &mut self.nodes[i];
            let mine = node.ranks();
            let outcome = match reply {
                Ok(Reply::Stacks { samples }) => {
                    let foreign = samples.iter().find_map(|s| {
                        s.ranks
                            .iter()
                            .map(|r| r.rank)
                            .chain(s.unreached.iter().map(|u| u.rank))
                            .find(|r| !mine.contains(r))
                    });
                    match foreign {
                        Some(rank) => {
                            let d = Down::new(
                                AgentFailure::BadAnswer,
                                ProtocolError::ForeignRank { rank }.to_string(),
                            );
                            node.down(d.clone());
                            Err(d)
                        }
                        None => Ok(samples),
                    }
                }
                Ok(Reply::Failed { error }) => Err(Down::new(AgentFailure::ReadFailed, error)),
                Ok(_) => Err(Down::new(
                    AgentFailure::BadAnswer,
                    "a reply of another kind to a stacks request",
                )),
                Err(d) => Err(d),
            };
            let part: Vec<RemoteSample> = match outcome {
                Ok(samples) => samples
                    .into_iter()
                    .map(|s| {
                        RemoteSample::new(s.ranks, s.unreached).with_stops(
                            s.stops
                                .iter()
                                .map(|t| {
                                    StopTime::new(
                                        t.rank,
                                        t.pid,
                                        Duration::from_micros(t.stopped_us),
                                    )
                                })
                                .collect(),
                            s.overran,
                        )
                    })
                    .collect(),
                Err(d) => {
                    let why = Unreadable::Agent {
                        host: node.host.clone(),
                        failure: d.failure,
                        detail: d.detail,
                    };
                    let unreached: Vec<Unreached> = node
                        .claims
                        .iter()
                        .map(|c| Unreached::new(c.rank, UnreachedReason::Other(why.to_string())))
                        .collect();
                    (0..samples)
                        .map(|_| RemoteSample::new(Vec::new(), unreached.clone()))
                        .collect()
                }
            };
            parts.push(part);
        }
        read.merge_remote(&parts, options);
        Ok(read)
    }

    /// Says goodbye to every agent and waits (bounded, 5 s in all) for their launchers to
    /// end; kills what is left. Dropping the agents does the same.
    pub fn shutdown(mut self) {
        self.close();
    }

    fn close(&mut self) {
        let bye = Message::new(MessageKind::Goodbye, ContentKind::Empty, Vec::new());
        for node in &mut self.nodes {
            if let Ok(link) = node.link.as_mut() {
                let _ = link.set_silence_timeout(Duration::from_millis(500));
                let _ = link.send(&bye);
            }
            // Closing our ends: an agent that missed the goodbye sees its stdin end.
            node.link = Err(Down::new(AgentFailure::Unreachable, "closed"));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for node in &mut self.nodes {
            if let Some(mut c) = node.child.take() {
                loop {
                    match c.try_wait() {
                        Ok(Some(_)) => break,
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        _ => {
                            let _ = c.kill();
                            let _ = c.wait();
                            break;
                        }
                    }
                }
            }
        }
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        self.close();
    }
}

fn send(node: &mut NodeAgent, message: &Message) {
    if let Ok(link) = node.link.as_mut() {
        let _ = link.set_silence_timeout(Duration::from_secs(10));
        if let Err(e) = link.send(message) {
            node.down(Down::new(
                AgentFailure::Unreachable,
                mpir_session::chain(&e),
            ));
        }
    }
}

/// The agents as [`mpir_session::RemoteReads`] of a deadlock search: one queue request per
/// sample.
struct Remote<'a> {
    agents: &'a mut Agents,
    pending: Option<RequestId>,
}

impl mpir_session::RemoteReads for Remote<'_> {
    fn start(&mut self, _sample: u32) {
        self.pending = Some(self.agents.send_all(&Request::Queues));
    }

    fn finish(&mut self, _sample: u32, ranks: &mut [RankRead]) {
        if let Some(id) = self.pending.take() {
            self.agents.finish_queues(id, ranks);
        }
    }
}

/// Puts one node's outcome into a read's ranks: each of its ranks read, or why not.
fn merge_queues(
    ranks: &mut [RankRead],
    node: &NodeAgent,
    outcome: Result<Vec<RankQueuesOut>, Down>,
) {
    let agent = |failure: AgentFailure, detail: String| {
        RankError::Unreadable(Unreadable::Agent {
            host: node.host.clone(),
            failure,
            detail,
        })
    };
    match outcome {
        Ok(answered) => {
            for out in answered {
                let Some(r) = ranks.iter_mut().find(|r| r.rank == Some(out.rank)) else {
                    continue;
                };
                r.stacks = out.stacks;
                r.queues = match (out.queues, out.problem) {
                    (Some(q), _) => Ok(q),
                    (None, Some(p)) => Err(match p.kind {
                        ProblemKind::ReadFailed => RankError::Read(MqdError::Relayed {
                            message: format!("on {}: {}", node.host, p.message),
                        }),
                        ProblemKind::Remote | ProblemKind::Refused => {
                            agent(AgentFailure::Refused, p.message)
                        }
                        _ => agent(AgentFailure::ReadFailed, p.message),
                    }),
                    (None, None) => Err(agent(
                        AgentFailure::BadAnswer,
                        "no queues, no reason".into(),
                    )),
                };
            }
        }
        Err(d) => {
            let mine = node.ranks();
            for r in ranks.iter_mut() {
                if r.rank.is_some_and(|k| mine.contains(&k)) {
                    r.queues = Err(agent(d.failure, d.detail.clone()));
                    r.stacks = None;
                }
            }
        }
    }
}
