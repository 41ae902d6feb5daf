//! The agent: one per node, serving that node's ranks of a job to the front end over one
//! `mpir-wire` connection. It never listens: it talks over the stdio its engine forwards
//! ([`run_stdio`]) or a connection the caller made ([`serve`]).
//!
//! Read-only unless asked to hold: every read stops a rank only while it is read (the
//! session's rules), [`Request::Hold`] keeps them stopped until [`Request::Release`], and
//! the end of the connection — the front end said goodbye, exited, was killed, or its node
//! went away — lets every rank go before the agent returns. It writes nothing to any rank.

use std::time::Duration;

use mpir_mqd::{Engine, HelperOptions, ReaderOptions};
use mpir_session::{
    AgentFailure, QueueRead, RankError, Session, SessionOptions, StackOptions, StacksRead,
    Unreadable, chain,
};
use mpir_types::stacks::Unreached;
use mpir_types::unread::{NotRead, ReasonCode};
use mpir_wire::{
    Connection, Hello, Message, MessageKind, Options, RequestId, Transport, WireError,
};

use crate::error::{AgentError, ProtocolError};
use crate::fleet::{Down, Fleet};
use crate::merge;
use crate::protocol::{
    Adopt, EngineChoice, FailureKind, Plan, Problem, ProblemKind, RankQueuesOut, RankStatus,
    ReadSettings, Reply, Request, SampleOut, StacksAsk, StopOut, WaitsOut,
};

/// How an agent runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Its node's name, told to the front end (default: the host name).
    pub node: String,
    /// How long it waits for the front end's next request before it lets everything go and
    /// exits (default 1 h).
    pub idle_timeout: Duration,
    /// The wire's bounds.
    pub wire: Options,
    /// How an MPI's message-queue DLL is hosted out of process (the program that hosts
    /// it; default: `mpir-mqd`'s).
    pub dll_helper: Option<HelperOptions>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            node: mpir_target::live::node::this_node()
                .display_name()
                .to_string(),
            idle_timeout: Duration::from_secs(3600),
            wire: Options::default(),
            dll_helper: None,
        }
    }
}

impl AgentConfig {
    /// With this host for message-queue DLLs (e.g. this program run as the helper).
    pub fn with_dll_helper(mut self, helper: HelperOptions) -> Self {
        self.dll_helper = Some(helper);
        self
    }

    /// For node `name`, as the job's table names it: refused unless this machine's facts
    /// say the name is this node (its host names, `/etc/hosts` aliases, interface
    /// addresses), so that an agent started on the wrong node never serves there.
    ///
    /// # Errors
    /// [`AgentError::WrongNode`] naming both.
    pub fn for_node(mut self, name: &str) -> Result<Self, AgentError> {
        let here = mpir_target::live::node::this_node();
        if !here.classify(Some(name)).is_local() {
            return Err(AgentError::WrongNode {
                asked: name.to_string(),
                here: here.display_name().to_string(),
            });
        }
        self.node = name.to_string();
        Ok(self)
    }

    /// With this idle timeout.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }
}

/// How serving ended (without an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The front end said goodbye.
    Bye,
    /// The front end went away (its end of the connection closed).
    FrontEndGone,
    /// No request within the idle timeout.
    Idle,
    /// A tool-daemon agent found no token for its node: the front end expects no agent
    /// there (a node without selected ranks), so it never connected.
    NotExpected,
}

/// Serves the front end over stdin/stdout (the pipe an engine such as srun, hydra or ssh
/// forwards): hello, then requests until the end. Standard output carries frames only: it
/// is pointed at standard error once the pipe is taken, so nothing else printed can corrupt
/// the stream.
///
/// # Errors
/// [`AgentError`] when stdio cannot be set up, the handshake fails or the connection breaks
/// mid-message; every rank is let go first.
pub fn run_stdio(config: &AgentConfig) -> Result<Ended, AgentError> {
    let pipe = mpir_wire::Pipe::stdio().map_err(|source| AgentError::Setup {
        context: "taking stdin and stdout for the wire".into(),
        source,
    })?;
    // From now on a stray print goes to stderr, not into the frames.
    nix::unistd::dup2_stdout(std::io::stderr()).map_err(|e| AgentError::Setup {
        context: "pointing stdout at stderr".into(),
        source: e.into(),
    })?;
    watch_front_end()?;
    let hello = Hello::new(config.node.clone(), std::process::id());
    let (mut conn, _welcome) = Connection::agent(pipe, &hello, &config.wire)?;
    serve(&mut conn, config)
}

/// Ends this agent as soon as its front end's end of the pipe closes, even in the middle of
/// a long request (a sampling of many seconds): see [`watch_hang_up`].
fn watch_front_end() -> Result<(), AgentError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| AgentError::Setup {
            context: "watching stdin".into(),
            source,
        })?;
    watch_hang_up(stdin, Watched::Pipe)
}

/// What a front-end watch waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watched {
    /// A pipe: its hang-up (`POLLHUP`, a poll for no event: it never consumes the requests).
    Pipe,
    /// A socket: the peer's end closed (`EPOLLRDHUP`: only that, a reset or an error wakes
    /// the watch, whatever data is waiting to be read by the serving thread).
    Socket,
}

/// A thread that waits for `fd`'s hang-up (see [`Watched`]), then lets go of every process
/// this agent holds and exits. Its own subtree's agents see their pipes close in turn.
pub(crate) fn watch_hang_up(fd: std::os::fd::OwnedFd, watched: Watched) -> Result<(), AgentError> {
    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
    use std::os::fd::AsFd;
    let setup = |context: &str, source: std::io::Error| AgentError::Setup {
        context: context.into(),
        source,
    };
    // A socket's watch: an epoll set holding it for EPOLLRDHUP (hang-ups and errors are
    // always reported).
    let epoll = match watched {
        Watched::Pipe => None,
        Watched::Socket => {
            let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
                .map_err(|e| setup("watching the connection", e.into()))?;
            epoll
                .add(&fd, EpollEvent::new(EpollFlags::EPOLLRDHUP, 0))
                .map_err(|e| setup("watching the connection", e.into()))?;
            Some(epoll)
        }
    };
    // Some(true): gone; Some(false): woken for nothing (EINTR), wait again; None: the watch
    // cannot go on (the agent then ends between requests, as without it).
    let wait = move || -> Option<bool> {
        match &epoll {
            None => {
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) => Some(fds[0].revents().is_none_or(|r| {
                        r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
                    })),
                    Err(Errno::EINTR) => Some(false),
                    Err(_) => None,
                }
            }
            Some(epoll) => {
                let mut events = [EpollEvent::empty()];
                match epoll.wait(&mut events, EpollTimeout::NONE) {
                    Ok(n) => Some(
                        n > 0
                            && events[0].events().intersects(
                                EpollFlags::EPOLLRDHUP
                                    | EpollFlags::EPOLLHUP
                                    | EpollFlags::EPOLLERR,
                            ),
                    ),
                    Err(Errno::EINTR) => Some(false),
                    Err(_) => None,
                }
            }
        }
    };
    std::thread::Builder::new()
        .name("front-end-watch".into())
        .spawn(move || {
            loop {
                match wait() {
                    Some(true) => break,
                    Some(false) => {}
                    None => return,
                }
            }
            mpir_session::release_everything();
            std::process::exit(0);
        })
        .map_err(|source| setup("starting the front-end watch", source))?;
    Ok(())
}

/// Serves the front end over an established connection until the end (see [`Ended`]).
///
/// # Errors
/// [`AgentError`] when the connection breaks mid-message or the front end sends frames this
/// agent cannot decode; every rank is let go first.
pub fn serve<T: Transport>(
    conn: &mut Connection<T>,
    config: &AgentConfig,
) -> Result<Ended, AgentError> {
    conn.set_silence_timeout(config.idle_timeout)?;
    let mut node: Option<Adopted> = None;
    loop {
        let Some(msg) = next(conn)? else {
            return Ok(Ended::FrontEndGone);
        };
        if msg.kind == MessageKind::Goodbye {
            return Ok(Ended::Bye);
        }
        let id = msg.request;
        let request = match Request::from_message(&msg) {
            Ok(r) => r,
            Err(e) => {
                conn.send(&failed(&e).to_message(id))?;
                continue;
            }
        };
        let reply = match (request, node.as_mut()) {
            (Request::Bye, _) => return Ok(Ended::Bye),
            (Request::Adopt(adopt), None) => match Adopted::new(&adopt, config) {
                Ok((n, reply)) => {
                    node = Some(n);
                    reply
                }
                Err(reply) => reply,
            },
            (Request::Adopt(_), Some(_)) => failed(&ProtocolError::Order("adopted already")),
            (_, None) => failed(&ProtocolError::Order("the first request must adopt ranks")),
            (Request::Queues, Some(n)) => n.queues(),
            (Request::Stacks(ask), Some(n)) => n.stacks(&ask),
            (Request::Release, Some(_)) => Reply::Released {
                problems: Vec::new(),
            },
            (Request::Hold, Some(n)) => match n.hold_until_release(conn, id)? {
                Some(end) => return Ok(end),
                None => continue,
            },
        };
        match conn.send(&reply.to_message(id)) {
            // Gone while this request was served (killed, say): nobody to answer.
            Err(e) if front_end_gone(&e) => return Ok(Ended::FrontEndGone),
            r => r?,
        }
    }
}

/// Whether `e` says the front end's end of the connection is closed.
fn front_end_gone(e: &WireError) -> bool {
    match e {
        WireError::Closed { .. } => true,
        WireError::Io { source, .. } => matches!(
            source.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        _ => false,
    }
}

/// An agent's ranks: its own node's (a session) and its subtree's (the agents it started).
struct Adopted {
    session: Session,
    own: Vec<mpir_acquire::live::RankClaim>,
    children: Option<(Fleet, Plan)>,
}

impl Adopted {
    /// Proves the node's ranks, starts the subtree's agents; the reply says how every rank
    /// stands.
    fn new(adopt: &Adopt, config: &AgentConfig) -> Result<(Adopted, Reply), Reply> {
        // The subtree's agents first: they start while this node's ranks are proven.
        let children = adopt
            .plan
            .as_ref()
            .filter(|_| !adopt.subtree.is_empty())
            .map(|plan| (Fleet::start(adopt.subtree.clone(), plan), plan.clone()));
        let options = session_options(&adopt.read, config.dll_helper.clone());
        let mut ranks: Vec<RankStatus> = Vec::new();
        // Every node of a table has ranks: an adoption without any is not one.
        let session =
            Session::node_ranks(&adopt.ranks, &adopt.expect, options).map_err(|e| failed(&e))?;
        ranks.extend(
            session
                .known_ranks()
                .into_iter()
                .map(|(rank, pid, why)| RankStatus {
                    rank: rank.unwrap_or(u64::MAX),
                    pid,
                    problem: why.map(problem_of),
                }),
        );
        if let Some((fleet, _)) = &children {
            for m in &fleet.members {
                match m.out() {
                    None => ranks.extend(m.statuses.iter().cloned()),
                    Some(d) => ranks.extend(m.ranks.iter().map(|c| RankStatus {
                        rank: c.rank,
                        pid: u32::try_from(c.pid).unwrap_or(0),
                        problem: Some(Problem::agent(d.failure.into(), m.reason_for(c, d).1)),
                    })),
                }
            }
        }
        let reply = Reply::Adopted {
            node: config.node.clone(),
            ranks,
        };
        Ok((
            Adopted {
                session,
                own: adopt.ranks.clone(),
                children,
            },
            reply,
        ))
    }

    /// The subtree's request sent, with the bound of its answers.
    fn ask_children(
        &mut self,
        request: &Request,
        extra: Duration,
    ) -> Option<(RequestId, Duration)> {
        let (fleet, plan) = self.children.as_mut()?;
        let id = fleet.send_all(request);
        Some((id, Duration::from_millis(plan.request_timeout_ms) + extra))
    }

    fn queues(&mut self) -> Reply {
        let asked = self.ask_children(&Request::Queues, Duration::ZERO);
        let (mut engine, mut ranks, mut release) = match self.session.queues() {
            Ok(read) => match queues_reply(&read) {
                Reply::Queues {
                    engine,
                    ranks,
                    release,
                } => (engine, ranks, release),
                _ => unreachable!("queues_reply answers queues"),
            },
            Err(e) => {
                let why = chain(&e);
                let ranks = self
                    .own
                    .iter()
                    .map(|c| RankQueuesOut {
                        rank: c.rank,
                        pid: u32::try_from(c.pid).unwrap_or(0),
                        queues: None,
                        problem: Some(Problem::new(ProblemKind::ReadFailed, why.clone())),
                        stacks: None,
                        waits: None,
                    })
                    .collect();
                (None, ranks, Vec::new())
            }
        };
        if let (Some((id, timeout)), Some((fleet, _))) = (asked, self.children.as_mut()) {
            let replies = fleet.collect(id, timeout);
            for (reply, m) in replies.into_iter().zip(fleet.members.iter_mut()) {
                if let Ok(Reply::Queues { release: r, .. }) = &reply {
                    release.extend(r.iter().cloned());
                }
                let outcome = merge::queue_outcome(reply, m);
                if engine.is_none() {
                    engine.clone_from(&m.engine);
                }
                ranks.extend(merge::wire_queues(m, outcome));
            }
        }
        Reply::Queues {
            engine,
            ranks,
            release,
        }
    }

    fn stacks(&mut self, ask: &StacksAsk) -> Reply {
        let sampling = Duration::from_millis(ask.interval_ms.min(3_600_000))
            .saturating_mul(ask.samples.saturating_sub(1));
        let asked = self.ask_children(&Request::Stacks(*ask), sampling);
        let mut samples = match self.session.stacks(&stack_options(ask)) {
            Ok(read) => match stacks_reply(&read) {
                Reply::Stacks { samples } => samples,
                _ => unreachable!("stacks_reply answers stacks"),
            },
            Err(e) => {
                let why = NotRead::new(ReasonCode::ReadFailed, chain(&e));
                let unreached: Vec<Unreached> = self
                    .own
                    .iter()
                    .map(|c| Unreached::new(c.rank, why.clone()))
                    .collect();
                (0..ask.samples.max(1))
                    .map(|_| SampleOut {
                        ranks: Vec::new(),
                        unreached: unreached.clone(),
                        stops: Vec::new(),
                        overran: Vec::new(),
                    })
                    .collect()
            }
        };
        if let (Some((id, timeout)), Some((fleet, _))) = (asked, self.children.as_mut()) {
            let replies = fleet.collect(id, timeout);
            for (reply, m) in replies.into_iter().zip(fleet.members.iter_mut()) {
                let outcome = merge::stacks_outcome(reply, m);
                merge::wire_stacks(&mut samples, m, outcome);
            }
        }
        Reply::Stacks { samples }
    }

    /// Holds every rank (the subtree's too) until the front end releases them, says goodbye
    /// or goes away; `Some(end)` when serving is over.
    fn hold_until_release<T: Transport>(
        &mut self,
        conn: &mut Connection<T>,
        id: RequestId,
    ) -> Result<Option<Ended>, AgentError> {
        let asked = self.ask_children(&Request::Hold, Duration::ZERO);
        let held = match self.session.hold() {
            Ok(h) => h,
            Err(e) => {
                if let (Some((cid, timeout)), Some((fleet, _))) = (asked, self.children.as_mut()) {
                    let _ = fleet.collect(cid, timeout);
                    let rid = fleet.send_all(&Request::Release);
                    let _ = fleet.collect(rid, timeout);
                }
                conn.send(&failed(&e).to_message(id))?;
                return Ok(None);
            }
        };
        let mut ranks: Vec<RankStatus> = held
            .ranks()
            .iter()
            .map(|r| RankStatus {
                rank: r.rank.unwrap_or(u64::MAX),
                pid: r.pid,
                problem: r.unreadable().map(problem_of),
            })
            .collect();
        if let (Some((cid, timeout)), Some((fleet, _))) = (asked, self.children.as_mut()) {
            let replies = fleet.collect(cid, timeout);
            for (reply, m) in replies.into_iter().zip(fleet.members.iter()) {
                match reply {
                    Ok(Reply::Held { ranks: r }) => ranks.extend(r),
                    Ok(Reply::Failed { error }) => {
                        ranks.extend(m.ranks.iter().map(|c| RankStatus {
                            rank: c.rank,
                            pid: u32::try_from(c.pid).unwrap_or(0),
                            problem: Some(Problem::agent(FailureKind::ReadFailed, error.clone())),
                        }))
                    }
                    other => {
                        let d = match other {
                            Err(d) => d,
                            _ => Down::new(AgentFailure::BadAnswer, "not an answer to hold"),
                        };
                        ranks.extend(m.ranks.iter().map(|c| RankStatus {
                            rank: c.rank,
                            pid: u32::try_from(c.pid).unwrap_or(0),
                            problem: Some(Problem::agent(d.failure.into(), m.reason_for(c, &d).1)),
                        }));
                    }
                }
            }
        }
        conn.send(&Reply::Held { ranks }.to_message(id))?;
        // Held until the front end says so, goes away, or is silent too long: dropping
        // `held` on any way out lets the ranks go; the subtree is released with them.
        let outcome = while_held(conn)?;
        let report = held.release();
        let mut problems: Vec<String> = report.problems.iter().map(|p| chain(p)).collect();
        if let Some((fleet, plan)) = self.children.as_mut() {
            let rid = fleet.send_all(&Request::Release);
            for reply in fleet.collect(rid, Duration::from_millis(plan.request_timeout_ms)) {
                match reply {
                    Ok(Reply::Released { problems: p }) => problems.extend(p),
                    Ok(_) => problems.push("a subtree agent answered release wrongly".into()),
                    Err(d) => problems.push(format!("a subtree agent: {}", d.detail)),
                }
            }
        }
        match outcome {
            Some((release_id, None)) => {
                conn.send(&Reply::Released { problems }.to_message(release_id))?;
                Ok(None)
            }
            Some((_, Some(end))) => Ok(Some(end)),
            None => Ok(Some(Ended::FrontEndGone)),
        }
    }
}

/// While ranks are held: waits for [`Request::Release`] (its id), a goodbye or the end
/// (`Some((_, Some(end)))`), answering anything else with a refusal.
fn while_held<T: Transport>(
    conn: &mut Connection<T>,
) -> Result<Option<(mpir_wire::RequestId, Option<Ended>)>, AgentError> {
    loop {
        let Some(msg) = next(conn)? else {
            return Ok(None);
        };
        if msg.kind == MessageKind::Goodbye {
            return Ok(Some((msg.request, Some(Ended::Bye))));
        }
        match Request::from_message(&msg) {
            Ok(Request::Release) => {
                // The reply is sent by the caller once the ranks run.
                return Ok(Some((msg.request, None)));
            }
            Ok(Request::Bye) => return Ok(Some((msg.request, Some(Ended::Bye)))),
            Ok(_) => conn.send(
                &failed(&ProtocolError::Order("ranks are held: only release or bye"))
                    .to_message(msg.request),
            )?,
            Err(e) => conn.send(&failed(&e).to_message(msg.request))?,
        }
    }
}

/// The next message, or `None` when the front end has gone (its end closed) or stayed
/// silent past the idle timeout.
fn next<T: Transport>(conn: &mut Connection<T>) -> Result<Option<Message>, AgentError> {
    match conn.recv() {
        Ok(m) => Ok(Some(m)),
        Err(WireError::Closed { .. } | WireError::Timeout { .. }) => Ok(None),
        Err(WireError::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn failed(e: &dyn std::error::Error) -> Reply {
    Reply::Failed { error: chain(e) }
}

/// The session's options from the front end's settings (and this agent's DLL host).
pub fn session_options(read: &ReadSettings, dll_helper: Option<HelperOptions>) -> SessionOptions {
    let engine = match read.engine {
        EngineChoice::Auto => Engine::Auto,
        EngineChoice::Dll => Engine::Dll,
        EngineChoice::Native => Engine::Native,
    };
    let mut reader = ReaderOptions::default().with_engine(engine);
    if let Some(h) = dll_helper {
        reader = reader.with_helper(h);
    }
    if let Some(dll) = &read.dll {
        reader = reader.with_dll(dll);
    }
    if read.no_shipped_layouts {
        reader = reader.without_shipped_layouts();
    }
    let mut options = SessionOptions::default()
        .with_reader_options(reader)
        .with_allow_other_users(read.allow_other_users)
        .with_queue_stacks(!read.queues_without_stacks);
    for t in &read.types {
        options = options.with_types_sidecar(t);
    }
    for d in &read.debug_dirs {
        options = options.with_debug_dir(d);
    }
    if read.timeout_ms > 0 {
        options = options.with_timeout(Duration::from_millis(read.timeout_ms));
    }
    options
}

fn problem_of(why: &Unreadable) -> Problem {
    let kind = match why {
        Unreadable::Remote { .. } => ProblemKind::Remote,
        Unreadable::Refused(_) | Unreadable::NoPid { .. } | Unreadable::NoSuchProcess { .. } => {
            ProblemKind::Refused
        }
        _ => ProblemKind::NotStopped,
    };
    let mut problem = Problem::new(kind, chain(why));
    problem.denial = why.denial().cloned();
    problem.why = Some(why.not_read());
    problem
}

fn queues_reply(read: &QueueRead) -> Reply {
    let ranks = read
        .ranks
        .iter()
        .map(|r| {
            let (queues, problem) = match &r.queues {
                Ok(q) => (Some(q.clone()), None),
                Err(RankError::Unreadable(why)) => (None, Some(problem_of(why))),
                Err(e) => {
                    let mut p = Problem::new(ProblemKind::ReadFailed, chain(e));
                    p.why = Some(e.not_read());
                    (None, Some(p))
                }
            };
            RankQueuesOut {
                rank: r.rank.unwrap_or(u64::MAX),
                pid: r.pid,
                queues,
                problem,
                stacks: r.stacks.clone(),
                waits: r.waits.as_ref().map(|w| match w {
                    Ok(w) => WaitsOut::Read(Box::new(w.clone())),
                    Err(e) => WaitsOut::Problem(chain(e)),
                }),
            }
        })
        .collect();
    Reply::Queues {
        engine: read.engine.clone(),
        ranks,
        release: read.release.problems.iter().map(|p| chain(p)).collect(),
    }
}

/// The session's stack options from a request (the tree's options are the front end's: it
/// builds the merged tree).
pub fn stack_options(ask: &StacksAsk) -> StackOptions {
    StackOptions::default()
        .with_samples(ask.samples.clamp(1, 1000))
        .with_interval(Duration::from_millis(ask.interval_ms.min(3_600_000)))
        .with_max_stop(ask.max_stop_us.map(Duration::from_micros))
        .with_python(ask.python.view())
}

fn stacks_reply(read: &StacksRead) -> Reply {
    Reply::Stacks {
        samples: read
            .samples
            .iter()
            .map(|s| SampleOut {
                ranks: s.ranks.clone(),
                unreached: s.unreached.clone(),
                stops: s
                    .stops
                    .iter()
                    .map(|t| StopOut {
                        rank: t.rank,
                        pid: t.pid,
                        stopped_us: u64::try_from(t.stopped_for.as_micros()).unwrap_or(u64::MAX),
                    })
                    .collect(),
                overran: s.overran.clone(),
            })
            .collect(),
    }
}
