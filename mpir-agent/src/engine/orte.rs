//! Open MPI 4 (ORTE): agents started by `orterun` itself as MPIR tool daemons, connecting
//! back to the front end over TLS ([`crate::Rendezvous`], [`crate::run_tls`]).
//!
//! `orterun` honours the MPIR tool-daemon extension (`MPIR_executable_path`,
//! `MPIR_server_arguments`) on a running job through its attach FIFO: it starts **one daemon
//! per node that has ranks**, a child of that node's `orted`, inside that node. Its daemons'
//! standard output goes to `orterun`'s own output, so no pipe reaches the front end: the
//! agent connects out instead.
//!
//! # How a front end starts them (used by [`crate::Agents::start`])
//!
//! 1. **The rendezvous** is opened for the nodes that have selected ranks
//!    ([`crate::Rendezvous::open`]: listener, ephemeral certificate, one token file per node).
//! 2. **Let go of `orterun`**: a session made with `with_hold_from_acquisition` keeps the
//!    starter traced until its first hold, and a second tracer cannot attach. So the session
//!    acquires first (the job's nodes are known from its table), then, when one of this
//!    process's threads traces the starter, a hold is taken and released at once (the
//!    session's later holds stop ranks by pid and never attach to the starter again).
//! 3. **Ask for the daemons**: a second acquisition of the running job with
//!    [`mpir_acquire::AcquireOptions::with_tool_daemon`]: `mpir agent --connect ADDR
//!    --fingerprint sha256:… --token-dir DIR` (attach FIFO, byte 0x01, the spawn event),
//!    while the connections are accepted on other threads ([`crate::Rendezvous::accept`]).
//!    The spawn event is awaited [`ASK_TIMEOUT`] at most: `orterun` raises it for its first
//!    daemon job only (`mpir_breakpoint_fired` in ORTE), and starts later ones without it. A
//!    request that ends without it and without any daemon showing is made again (`orterun`
//!    ignores a request it reads once the tool has let go, as `MPIR_being_debugged` is 0
//!    again), until the start timeout.
//! 4. **Match** each agent to its node by its token, as the rendezvous does for every
//!    tool-daemon engine, and adopt.
//!
//! ORTE agents are **flat**: `orterun` starts every daemon itself, so the front end holds one
//! connection per node whatever [`crate::FrontEndOptions::fanout`] says (no tree). An
//! `orterun` this program launches is asked at launch instead ([`crate::LaunchedAgents`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpir_acquire::ToolDaemon;
use mpir_session::{Session, chain};
use mpir_wire::Options;

use crate::error::FrontEndError;
use crate::fleet::Fleet;
use crate::options::FrontEndOptions;
use crate::protocol::{HostClaims, Plan};
use crate::rendezvous::{Rendezvous, links_by_host};

/// How long the request for daemons waits for `orterun`'s spawn event. Open MPI 4 raises it
/// (`MPIR_Breakpoint`) for the first daemon job of an `orterun`'s life only: a later request
/// (a second `mpir` run on the same job) starts the daemons without it, so the wait is kept
/// short, and its end is no failure — the agents connecting are what counts.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether one of this process's threads traces `pid` (the session's acquisition held).
pub(crate) fn traced_by_us(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|t| t.trim().parse::<u32>().ok())
        .is_some_and(|t| t != 0 && Path::new(&format!("/proc/self/task/{t}")).exists())
}

/// Starts the agents of `hosts` as `orterun`'s tool daemons (see the module docs) and
/// returns them adopted, with the request for daemons (to join). A node whose agent does not
/// come is out, with the reason.
///
/// # Errors
/// [`FrontEndError::ToolDaemons`] when the listener, identity or tokens cannot be set up;
/// [`FrontEndError::Session`] when the session's hold on the starter cannot be let go.
pub(crate) fn start(
    session: &mut Session,
    hosts: Vec<HostClaims>,
    plan: &Plan,
    options: &FrontEndOptions,
) -> Result<(Fleet, Asking), FrontEndError> {
    let Some(starter) = session.job().map(|j| j.starter.pid) else {
        return Ok((Fleet::empty(), Asking(None)));
    };
    let nodes: Vec<String> = hosts.iter().map(|h| h.host.clone()).collect();
    let parent = options.token_parent();
    let start_timeout = options.start_timeout;
    let rendezvous = Rendezvous::open(options.listen, &parent, &nodes, start_timeout)?;
    let Some((program, args)) = plan.agent.split_first() else {
        return Err(FrontEndError::NoEngine {
            reason: "no agent command".into(),
        });
    };
    let mut arguments = args.to_vec();
    arguments.extend(rendezvous.agent_arguments());
    let daemon = ToolDaemon::new(program.clone(), arguments);
    if traced_by_us(starter) {
        // The session's acquisition still holds the starter: let it go (a hold and its
        // release), so that the daemons can be asked for.
        drop(session.hold()?);
    }
    let acquire = session
        .options()
        .acquire_options()
        .clone()
        .with_hold(false)
        .with_timeout(ASK_TIMEOUT.min(start_timeout))
        .with_tool_daemon(daemon);
    let deadline = Instant::now() + start_timeout;
    let give_up = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&give_up);
    let token_dir = rendezvous.token_dir().to_path_buf();
    let expected = nodes.len();
    let handle = std::thread::Builder::new()
        .name("mpir-orte-ask".into())
        .spawn(move || {
            let r = ask(starter, &acquire, deadline, &token_dir, expected);
            // No spawn event in time is no proof that no daemon comes (orterun raises it
            // once in its life: a later request starts daemons without it): only another
            // failure ends the wait for agents.
            if r.as_ref()
                .is_err_and(|e| !matches!(e, mpir_acquire::AcquireError::Timeout { .. }))
            {
                flag.store(true, Ordering::Relaxed);
            }
            let _ = tx.send(r);
        })
        .map_err(|e| FrontEndError::ToolDaemons {
            context: "starting the thread that asks orterun for daemons".into(),
            source: Box::new(e),
        })?;
    let asking = Asking(Some(handle));
    let links = rendezvous.accept(deadline, &Options::default(), &give_up);
    let asked = "orterun was asked for a tool daemon on every node";
    let none_connected = rendezvous.none_connected(asked, start_timeout);
    // The socket closed and the tokens left removed.
    drop(rendezvous);
    let missing = links.len() < hosts.len();
    // With every agent in, the request may still be waiting for a spawn event that will not
    // come: it ends on its own (joined when the agents are dropped).
    let outcome = if missing {
        rx.recv_timeout(ASK_TIMEOUT + Duration::from_secs(5)).ok()
    } else {
        rx.try_recv().ok()
    };
    let why = match outcome {
        Some(Ok(())) | None => none_connected,
        Some(Err(e @ mpir_acquire::AcquireError::Timeout { .. })) => {
            format!("{none_connected} ({})", chain(&e))
        }
        Some(Err(e)) => format!("orterun did not start the tool daemons: {}", chain(&e)),
    };
    let links = links_by_host(hosts, links, &why);
    Ok((Fleet::connected(links, plan), asking))
}

/// Asks `orterun` for the daemons until it has started them. A request `orterun` reads
/// while no tool is attached is a false alarm to it (it checks `MPIR_being_debugged`, which
/// the request sets only while attached), and a request after its first daemon job raises
/// no spawn event: so a request that ends without the event is made again, until its
/// daemons show — one of them has taken its token file — or `deadline`. A repeated request
/// may start a second daemon per node: those find no token and end at once.
fn ask(
    starter: u32,
    acquire: &mpir_acquire::AcquireOptions,
    deadline: Instant,
    token_dir: &Path,
    expected: usize,
) -> Result<(), mpir_acquire::AcquireError> {
    // A token taken is a daemon started (the directory also holds `TOKENS_ISSUED`).
    let started = || {
        std::fs::read_dir(token_dir).map_or(true, |d| {
            d.take(expected + 2)
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".token"))
                .count()
                < expected
        })
    };
    loop {
        let r = mpir_acquire::live::attach(starter, acquire.clone()).map(drop);
        let timed_out = matches!(r, Err(mpir_acquire::AcquireError::Timeout { .. }));
        if !timed_out || Instant::now() + ASK_TIMEOUT >= deadline {
            return r;
        }
        // Daemons start within moments of the request being read.
        let settle = Instant::now() + Duration::from_secs(2);
        while !started() && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(50));
        }
        if started() {
            return r;
        }
    }
}

/// The request for daemons, possibly still waiting (bounded by [`ASK_TIMEOUT`]) for
/// `orterun`'s spawn event while the agents already serve; joined when dropped, so that
/// `orterun` is let go before this program ends.
pub(crate) struct Asking(Option<std::thread::JoinHandle<()>>);

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}
