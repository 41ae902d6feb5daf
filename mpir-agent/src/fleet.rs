//! A set of agents one program talks to: the front end's, or a parent agent's for its
//! subtree. Each member is one agent's link, answering for its own node's ranks and for
//! those of the subtree it started.
//!
//! A member is started through the [`Plan`]'s engine with its stdio as the link; or, for
//! Slurm and hydra, every member at once (one step, one job) whose agents connect back over
//! TLS ([`step`]);
//! or given already connected (engines whose agents connect out). Requests go to every member before
//! any answer is awaited; the answers are awaited with one deadline for all. A member that
//! fails, hangs, sends garbage or answers for a rank it was not given is cut off: its
//! launcher is killed (which ends the agent: its stdin closes) and every rank it answered for
//! gets the reason.

use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::Child;
use std::time::{Duration, Instant};

use mpir_acquire::live::RankClaim;
use mpir_session::AgentFailure;
use mpir_wire::{
    Accepted, AgentId, Connection, ContentKind, Gate, Message, MessageKind, Options, Pipe,
    RequestId, Transport, WireError,
};

use crate::error::ProtocolError;
use crate::protocol::{Adopt, HostClaims, Plan, RankStatus, Reply, Request};
use crate::ship;

mod step;

pub use crate::launch::AgentLink;
pub(crate) use crate::launch::Down;

/// One agent and what it answers for.
pub(crate) struct Member {
    /// Its node.
    pub(crate) host: String,
    /// Every rank it answers for, its own node's first, with each rank's host.
    pub(crate) ranks: Vec<RankClaim>,
    /// The nodes of its subtree (its own excluded).
    pub(crate) subtree: Vec<String>,
    child: Option<Child>,
    link: Result<AgentLink, Down>,
    /// How each rank stood when adopted.
    pub(crate) statuses: Vec<RankStatus>,
    /// The engine it reported in its last queue read.
    pub(crate) engine: Option<mpir_mqd::EngineUsed>,
}

impl Member {
    fn new(root: HostClaims, subtree: &[HostClaims]) -> Member {
        let mut ranks = root.ranks;
        ranks.extend(subtree.iter().flat_map(|h| h.ranks.iter().cloned()));
        Member {
            host: root.host,
            ranks,
            subtree: subtree.iter().map(|h| h.host.clone()).collect(),
            child: None,
            link: Err(Down::new(AgentFailure::NotStarted, "not started")),
            statuses: Vec::new(),
            engine: None,
        }
    }

    /// Cuts the agent off for `down` (the first reason stays).
    pub(crate) fn down(&mut self, down: Down) {
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

    /// Why it is out, if it is.
    pub(crate) fn out(&self) -> Option<&Down> {
        self.link.as_ref().err()
    }

    /// The ranks it answers for.
    pub(crate) fn rank_set(&self) -> HashSet<u64> {
        self.ranks.iter().map(|c| c.rank).collect()
    }

    /// What a failure of this agent means for rank `claim`: the rank's node, and the
    /// details (through which agent, when the rank is in its subtree).
    pub(crate) fn reason_for(&self, claim: &RankClaim, down: &Down) -> (String, String) {
        if claim.host == self.host {
            (claim.host.clone(), down.detail.clone())
        } else {
            (
                claim.host.clone(),
                format!("through {}'s agent: {}", self.host, down.detail),
            )
        }
    }
}

/// Splits `hosts` into at most `fanout` groups of consecutive nodes: each group's first node
/// is started directly, and its agent starts the rest (recursively, by the same rule).
pub(crate) fn tree_groups(
    mut hosts: Vec<HostClaims>,
    fanout: usize,
) -> Vec<(HostClaims, Vec<HostClaims>)> {
    let fanout = fanout.max(2);
    if hosts.len() <= fanout {
        return hosts.into_iter().map(|h| (h, Vec::new())).collect();
    }
    let n = hosts.len();
    let mut groups = Vec::with_capacity(fanout);
    let mut rest = hosts.split_off(0);
    for g in 0..fanout {
        // Sizes differ by at most one.
        let size = n / fanout + usize::from(g < n % fanout);
        let tail = rest.split_off(size.min(rest.len()));
        let mut group = std::mem::replace(&mut rest, tail);
        if group.is_empty() {
            break;
        }
        let root = group.remove(0);
        groups.push((root, group));
    }
    groups
}

/// The set of agents.
pub(crate) struct Fleet {
    pub(crate) members: Vec<Member>,
    next: u64,
    /// The one step that runs every member's agent (Slurm), ended after the members.
    step: Option<step::Step>,
}

impl Fleet {
    /// No agent.
    pub(crate) fn empty() -> Fleet {
        Fleet {
            members: Vec::new(),
            next: 1,
            step: None,
        }
    }

    /// Starts agents for `hosts` as `plan` says (a tree past `plan.fanout` nodes), each
    /// adopting its node's ranks and its subtree. Never fails as a whole: a member that
    /// cannot start is out, with the reason.
    /// A subtree root's agent starts its subtree this way; the front end with
    /// [`Fleet::start_at`].
    pub(crate) fn start(hosts: Vec<HostClaims>, plan: &Plan) -> Fleet {
        Fleet::start_at(hosts, plan, None)
    }

    /// [`Fleet::start`]; agents that connect back (Slurm's step, hydra's job) connect to `listen` when
    /// given (`--agent-listen`), else where the kernel routes to their nodes from.
    pub(crate) fn start_at(
        hosts: Vec<HostClaims>,
        plan: &Plan,
        listen: Option<SocketAddr>,
    ) -> Fleet {
        let deadline = Instant::now() + Duration::from_millis(plan.start_timeout_ms);
        let groups = tree_groups(hosts, usize::try_from(plan.fanout).unwrap_or(usize::MAX));
        if plan.launch.starts_all_at_once() {
            let (links, step) = step::start(groups, plan, listen, deadline);
            let mut fleet = Fleet::with_links(links, plan, deadline);
            fleet.step = step;
            return fleet;
        }
        let mut fleet = Fleet::empty();
        // The program to send, read and checked once for all members.
        let program: Option<Result<Vec<u8>, String>> = plan.ship.as_ref().map(|s| {
            let from = plan.ship_from.clone().unwrap_or_else(ship::own_program);
            ship::load(&from, s)
        });
        // Every agent started first, so that they start at the same time.
        let mut pipes = Vec::new();
        let mut adopts = Vec::new();
        for (root, subtree) in groups {
            let mut adopt = Adopt::new(root.ranks.clone(), plan.expect.clone(), plan.read.clone());
            if !subtree.is_empty() {
                adopt = adopt.with_subtree(subtree.clone(), child_plan(plan));
            }
            let mut member = Member::new(root, &subtree);
            let mut agent: Vec<OsString> = plan.agent.iter().map(OsString::from).collect();
            agent.extend(["--node".into(), member.host.clone().into()]);
            // A program sent to the node: its shell receives it (`sh -s`, see crate::ship),
            // then runs it with the agent's arguments.
            let shipping = match (&plan.ship, &program) {
                (Some(s), Some(Ok(_))) => {
                    ship::bootstrap(s, agent.get(1..).unwrap_or_default()).map(Some)
                }
                (_, Some(Err(why))) => Err(format!("sending the agent program: {why}")),
                _ => Ok(None),
            };
            let shipping = match shipping {
                Ok(None) => None,
                Ok(Some(line)) => {
                    agent = vec!["sh".into(), "-s".into()];
                    Some(line)
                }
                Err(why) => {
                    member.link = Err(Down::new(AgentFailure::NotStarted, why));
                    fleet.members.push(member);
                    adopts.push(adopt);
                    continue;
                }
            };
            match plan.launch.command(&member.host, &agent) {
                Ok(mut cmd) => {
                    // Its own process group: a Ctrl-C at the terminal reaches this program,
                    // which ends the agents by closing their pipes (srun would take a first
                    // SIGINT as a request for status).
                    cmd.process_group(0);
                    match cmd.spawn() {
                        Ok(mut child) => {
                            if let (Some(stdout), Some(stdin)) =
                                (child.stdout.take(), child.stdin.take())
                            {
                                let pipe: Box<dyn Transport + Send> =
                                    Box::new(Pipe::new(stdout, stdin));
                                pipes.push((fleet.members.len(), pipe, shipping));
                            }
                            member.child = Some(child);
                        }
                        Err(e) => {
                            member.link = Err(Down::new(
                                AgentFailure::NotStarted,
                                format!("{}: {e}", cmd.get_program().to_string_lossy()),
                            ));
                        }
                    }
                }
                Err(e) => member.link = Err(Down::new(AgentFailure::NotStarted, e.to_string())),
            }
            fleet.members.push(member);
            adopts.push(adopt);
        }
        // Every handshake at once, each followed by its adoption: an agent waits for its
        // welcome only as long as the wire's handshake timeout, so one whose launcher hangs
        // must keep neither the others' welcome nor their adoption waiting.
        let id = fleet.fresh_id();
        let mut adopts: Vec<Option<Adopt>> = adopts.into_iter().map(Some).collect();
        let handshakes: Vec<_> = std::thread::scope(|s| {
            let running: Vec<_> = pipes
                .into_iter()
                .filter_map(|(i, mut pipe, shipping)| {
                    let adopt = adopts.get_mut(i)?.take()?;
                    let host = fleet.members[i].host.clone();
                    let bytes = program.as_ref().and_then(|p| p.as_ref().ok());
                    Some(s.spawn(move || {
                        if let (Some(line), Some(bytes)) = (shipping, bytes)
                            && let Err(why) = ship::deliver(pipe.as_mut(), &line, bytes, deadline)
                        {
                            return (i, Err(LinkError::Shipped(why)));
                        }
                        (
                            i,
                            handshake_and_adopt(i, pipe, &host, adopt, id, deadline)
                                .map_err(LinkError::Started),
                        )
                    }))
                })
                .collect();
            running
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for (i, result) in handshakes {
            match result {
                Err(LinkError::Shipped(why)) => fleet.members[i].failed(Down::new(
                    AgentFailure::NotStarted,
                    format!("sending the agent program: {why}"),
                )),
                Err(LinkError::Started(e)) => fleet.accept(i, Err(e)),
                Ok(accepted) => fleet.accept(i, Ok(accepted)),
            }
        }
        fleet.adopted(id, deadline);
        fleet
    }

    /// Members whose agents are connected already (engines whose agents connect out), each
    /// adopting its node's ranks. `links` pairs each node with its link or why it has none.
    pub(crate) fn connected(
        links: Vec<(HostClaims, Result<AgentLink, Down>)>,
        plan: &Plan,
    ) -> Fleet {
        let deadline = Instant::now() + Duration::from_millis(plan.start_timeout_ms);
        let links = links
            .into_iter()
            .map(|(host, link)| (host, Vec::new(), link))
            .collect();
        Fleet::with_links(links, plan, deadline)
    }

    /// Members whose agents are connected already, each a subtree's root (or alone) with
    /// its link or why it has none, each adopting its node's ranks and its subtree by
    /// `deadline`.
    fn with_links(links: Vec<Rooted>, plan: &Plan, deadline: Instant) -> Fleet {
        let mut fleet = Fleet::empty();
        let mut adopts = Vec::new();
        for (root, subtree, link) in links {
            let mut adopt = Adopt::new(root.ranks.clone(), plan.expect.clone(), plan.read.clone());
            if !subtree.is_empty() {
                adopt = adopt.with_subtree(subtree.clone(), child_plan(plan));
            }
            adopts.push(adopt);
            let mut m = Member::new(root, &subtree);
            m.link = link;
            fleet.members.push(m);
        }
        fleet.adopt(adopts, deadline);
        fleet
    }

    /// Member `i`'s handshake's outcome: its link, or why it has none.
    fn accept(&mut self, i: usize, result: Result<Accepted<AgentTransport>, WireError>) {
        let member = &mut self.members[i];
        match result {
            Ok(accepted) if accepted.hello.node != member.host => {
                member.failed(Down::new(
                    AgentFailure::BadAnswer,
                    format!(
                        "the agent started says it serves {}, not {}: check the agent launch \
                         command",
                        accepted.hello.node, member.host
                    ),
                ));
            }
            Ok(accepted) => member.link = Ok(accepted.connection),
            Err(e) => {
                // A launcher that failed has usually exited by now: its status says more
                // than the closed pipe (waited for briefly).
                let mut status = String::new();
                if let Some(c) = member.child.as_mut() {
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
                member.failed(Down::new(
                    failure,
                    format!("{}{status}", mpir_session::chain(&e)),
                ));
            }
        }
    }

    /// Sends each member its adoption, then checks each answer: it must list exactly the
    /// ranks asked, in order.
    fn adopt(&mut self, adopts: Vec<Adopt>, deadline: Instant) {
        let id = self.fresh_id();
        for (m, mut adopt) in self.members.iter_mut().zip(adopts) {
            clamp_subtree(&mut adopt, deadline);
            send(m, &Request::Adopt(Box::new(adopt)).to_message(id));
        }
        self.adopted(id, deadline);
    }

    /// Checks each member's answer to adoption request `id`: it must list exactly the ranks
    /// asked, in order.
    fn adopted(&mut self, id: RequestId, deadline: Instant) {
        for i in 0..self.members.len() {
            match self.receive(i, id, deadline) {
                Ok(Reply::Adopted { ranks, .. }) => {
                    let m = &mut self.members[i];
                    let asked: Vec<u64> = m.ranks.iter().map(|c| c.rank).collect();
                    let answered: Vec<u64> = ranks.iter().map(|r| r.rank).collect();
                    if answered == asked {
                        m.statuses = ranks;
                    } else {
                        m.down(Down::new(
                            AgentFailure::BadAnswer,
                            format!("it adopted ranks {answered:?}, asked {asked:?}"),
                        ));
                    }
                }
                Ok(Reply::Failed { error }) => {
                    self.members[i].down(Down::new(AgentFailure::ReadFailed, error));
                }
                Ok(_) => self.members[i].down(Down::new(
                    AgentFailure::BadAnswer,
                    ProtocolError::WrongReply {
                        asked: "adopt",
                        got: "another",
                    }
                    .to_string(),
                )),
                Err(down) => self.members[i].down(down),
            }
        }
    }

    fn fresh_id(&mut self) -> RequestId {
        self.next += 1;
        RequestId(self.next)
    }

    /// Sends `request` to every member that serves; returns its id.
    pub(crate) fn send_all(&mut self, request: &Request) -> RequestId {
        let id = self.fresh_id();
        let message = request.to_message(id);
        for m in &mut self.members {
            send(m, &message);
        }
        id
    }

    /// Member `i`'s reply to `id`, by `deadline`; a member that fails is cut off.
    fn receive(&mut self, i: usize, id: RequestId, deadline: Instant) -> Result<Reply, Down> {
        let m = &mut self.members[i];
        let link = match m.link.as_mut() {
            Ok(l) => l,
            Err(d) => return Err(d.clone()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let got = link
            .set_silence_timeout(left.max(Duration::from_millis(1)))
            .and_then(|()| link.recv());
        let result = match got {
            Ok(msg) if msg.request != id => Err(Down::new(
                AgentFailure::BadAnswer,
                ProtocolError::OtherRequest {
                    expected: id.0,
                    got: msg.request.0,
                }
                .to_string(),
            )),
            Ok(msg) => Reply::from_message(&msg)
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
            m.down(d.clone());
        }
        result
    }

    /// Every member's reply to `id`, by one deadline for all.
    pub(crate) fn collect(&mut self, id: RequestId, timeout: Duration) -> Vec<Result<Reply, Down>> {
        let deadline = Instant::now() + timeout;
        (0..self.members.len())
            .map(|i| self.receive(i, id, deadline))
            .collect()
    }

    /// Says goodbye to every member and waits (bounded, 5 s in all) for their launchers to
    /// end; kills what is left (a step: ended as srun ends one, then killed).
    pub(crate) fn close(&mut self) {
        let bye = Message::new(MessageKind::Goodbye, ContentKind::Empty, Vec::new());
        for m in &mut self.members {
            if let Ok(link) = m.link.as_mut() {
                let _ = link.set_silence_timeout(Duration::from_millis(500));
                let _ = link.send(&bye);
            }
            // Closing our ends: an agent that missed the goodbye sees its stdin end.
            m.link = Err(Down::new(AgentFailure::Unreachable, "closed"));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
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
        if let Some(step) = self.step.take() {
            step.end(deadline);
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.close();
    }
}

/// How much sooner a subtree's agents must have answered their parent than the parent its
/// own parent.
const LEVEL_MARGIN: Duration = Duration::from_secs(5);

/// An agent's carrier.
type AgentTransport = Box<dyn Transport + Send>;

/// A subtree's root (or a node alone), its subtree, and its agent's link or why it has none.
type Rooted = (HostClaims, Vec<HostClaims>, Result<AgentLink, Down>);

/// A subtree's root must answer by `deadline`: its own agents get what is left of it now
/// (less the margin), not a bound counted from when it receives `adopt` — starting the roots
/// took time already.
fn clamp_subtree(adopt: &mut Adopt, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    let budget = u64::try_from(left.saturating_sub(LEVEL_MARGIN).as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    if let Some(plan) = adopt.plan.as_mut() {
        plan.start_timeout_ms = plan.start_timeout_ms.min(budget);
    }
}

/// The front end's side of member `i`'s handshake over `pipe` by `deadline`, then its
/// adoption request `id` (sent only to an agent that says it serves `host`).
/// Why a started agent's link did not come up.
enum LinkError {
    /// Its program could not be sent to its node ([`ship::deliver`]).
    Shipped(String),
    /// The handshake or the adoption failed.
    Started(WireError),
}

fn handshake_and_adopt(
    i: usize,
    pipe: AgentTransport,
    host: &str,
    mut adopt: Adopt,
    id: RequestId,
    deadline: Instant,
) -> Result<Accepted<AgentTransport>, WireError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let wire = Options::default().with_handshake_timeout(left.max(Duration::from_millis(1)));
    let node = AgentId(u32::try_from(i + 1).unwrap_or(u32::MAX));
    let mut accepted = Connection::front_end(pipe, &Gate::Engine(node), &wire)?;
    if accepted.hello.node == host {
        clamp_subtree(&mut adopt, deadline);
        accepted
            .connection
            .set_silence_timeout(Duration::from_secs(10))?;
        accepted
            .connection
            .send(&Request::Adopt(Box::new(adopt)).to_message(id))?;
    }
    Ok(accepted)
}

/// The plan a subtree's root gets: the same, its bounds shortened so that it answers its
/// parent in time (5 s less per level, at least 5 s).
fn child_plan(plan: &Plan) -> Plan {
    let margin = u64::try_from(LEVEL_MARGIN.as_millis()).unwrap_or(u64::MAX);
    let shorter = |ms: u64| ms.saturating_sub(margin).max(5_000);
    let mut p = plan.clone();
    // A subtree root sends its own program.
    p.ship_from = None;
    p.start_timeout_ms = shorter(plan.start_timeout_ms);
    p.request_timeout_ms = shorter(plan.request_timeout_ms);
    p
}

fn send(m: &mut Member, message: &Message) {
    if let Ok(link) = m.link.as_mut() {
        let _ = link.set_silence_timeout(Duration::from_secs(10));
        if let Err(e) = link.send(message) {
            m.down(Down::new(
                AgentFailure::Unreachable,
                mpir_session::chain(&e),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Vec<HostClaims> {
        (0..n)
            .map(|i| {
                HostClaims::new(
                    format!("n{i}"),
                    vec![RankClaim::new(i as u64, 100, format!("n{i}"), None)],
                )
            })
            .collect()
    }

    #[test]
    fn nodes_past_the_fanout_form_groups_of_near_equal_size_covering_every_node() {
        assert_eq!(tree_groups(hosts(3), 4).len(), 3);
        assert!(tree_groups(hosts(3), 4).iter().all(|(_, s)| s.is_empty()));
        for (n, k) in [(5, 4), (256, 16), (257, 16), (1000, 32), (33, 32)] {
            let groups = tree_groups(hosts(n), k);
            assert_eq!(groups.len(), k, "{n} nodes, fanout {k}");
            let sizes: Vec<usize> = groups.iter().map(|(_, s)| s.len() + 1).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{sizes:?}");
            // Every node once, in order.
            let order: Vec<String> = groups
                .iter()
                .flat_map(|(r, s)| std::iter::once(&r.host).chain(s.iter().map(|h| &h.host)))
                .cloned()
                .collect();
            let want: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            assert_eq!(order, want);
        }
        // A fanout under 2 would make a chain: 2 is the least.
        assert_eq!(tree_groups(hosts(5), 0).len(), 2);
    }
}
