//! Agents for a job this program launches (`mpir launch --verify`).
//!
//! Every engine but one starts agents after the job runs, as for a job attached to
//! ([`Agents::start`]). The exception is Open MPI 4's `orterun` launched under a tool: it
//! sets `MPIR_being_debugged` and so never opens the attach FIFO the attach-mode request
//! for daemons goes through ([`crate::engine::orte`], step 3). What it honours instead is the
//! tool-daemon extension's launch mode: `MPIR_executable_path` and `MPIR_server_arguments`
//! written before it spawns the job make it start one daemon per node with the job.
//!
//! Those daemons start before the front end has read the job's table, so before it knows
//! which nodes to issue tokens for, or where they are reached from. [`LaunchedAgents::prepare`]
//! therefore prepares a rendezvous with no token yet ([`crate::Rendezvous::listen`]: listening
//! now only at a given [`FrontEndOptions::listen`]; otherwise once the nodes are known, at the
//! address the kernel routes to them from, which the agents read with their tokens) and puts
//! the agent, told to wait for its token (`--token-wait`), into the session's options as a tool daemon asked for *if the
//! starter supports the extension* ([`mpir_acquire::ToolDaemon::if_supported`]): the engine
//! is only known from the job, and a starter without the arrays (srun, hydra) is launched as
//! if nothing had been asked. [`LaunchedAgents::start`], once the session has the job,
//! either issues the tokens of the job's other nodes and takes the daemons that connect
//! ([`Launch::OrteToolDaemons`]), or closes the socket at once — the daemons that wait, if
//! any, then end — and starts agents as for an attached job.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use mpir_acquire::{Note, ToolDaemon};
use mpir_session::{Session, SessionOptions};

use crate::engine::orte::traced_by_us;
use crate::error::FrontEndError;
use crate::fleet::Fleet;
use crate::front::{Agents, remote_hosts};
use crate::launch::Launch;
use crate::options::FrontEndOptions;
use crate::protocol::ReadSettings;
use crate::rendezvous::{Rendezvous, links_by_host};

/// Agents prepared for a job about to be launched (`mpir launch --verify`): every engine
/// but Open MPI 4's starts agents once the job runs; an `orterun` launched under a tool never
/// opens the attach FIFO the daemons are asked through, so its agents are asked for at launch
/// as tool daemons, and wait for the tokens issued once the table is read.
#[derive(Debug)]
pub struct LaunchedAgents {
    options: FrontEndOptions,
    rendezvous: Option<Rendezvous>,
}

impl LaunchedAgents {
    /// Prepares for `options.launch`: for [`Launch::Auto`] and [`Launch::OrteToolDaemons`]
    /// a TLS listener and a token directory (no token in it yet) for daemons the starter may
    /// start with the job; nothing for the other engines.
    ///
    /// # Errors
    /// [`FrontEndError::ToolDaemons`] when the listener or the directory cannot be made;
    /// [`FrontEndError::Ship`] for a program to send without a template.
    pub fn prepare(options: FrontEndOptions) -> Result<LaunchedAgents, FrontEndError> {
        // A program to send needs a command per node to carry it; tool daemons run theirs
        // where they are.
        if let Some(program) = &options.ship
            && !matches!(options.launch, Launch::Template(_))
        {
            return Err(FrontEndError::Ship {
                path: program.clone(),
                why: "only a command per node (an agent launch template) carries it".into(),
            });
        }
        let rendezvous = match options.launch {
            Launch::Auto | Launch::OrteToolDaemons => {
                // The job's nodes are not known before it starts: unless given, the address
                // is chosen (the route to them) and told to the agents when they are.
                let parent = options.token_parent();
                Some(Rendezvous::listen(
                    options.listen,
                    &parent,
                    options.start_timeout,
                )?)
            }
            _ => None,
        };
        Ok(LaunchedAgents {
            options,
            rendezvous,
        })
    }

    /// `options` with the agent asked for as the starter's tool daemon, when prepared for
    /// one: only if the starter supports the extension under [`Launch::Auto`], always under
    /// [`Launch::OrteToolDaemons`] (a starter without it then fails the launch).
    pub fn session_options(&self, options: SessionOptions) -> SessionOptions {
        let Some(r) = &self.rendezvous else {
            return options;
        };
        let mut argv = self
            .options
            .agent
            .iter()
            .map(|a| a.to_string_lossy().into_owned());
        let Some(program) = argv.next() else {
            return options;
        };
        let arguments: Vec<String> = argv.chain(r.agent_arguments()).collect();
        let mut daemon = ToolDaemon::new(program, arguments);
        if self.options.launch == Launch::Auto {
            daemon = daemon.if_supported();
        }
        let acquire = options.acquire_options().clone().with_tool_daemon(daemon);
        options.with_acquire_options(acquire)
    }

    /// The agents of `session`'s job, launched with [`LaunchedAgents::session_options`]: the
    /// daemons the starter started with the job, each given its node's token now and taken
    /// when it connects ([`Launch::OrteToolDaemons`]); otherwise agents started as
    /// [`Agents::start`] does. A node whose agent does not connect within the start timeout
    /// is recorded as not started, with what to check.
    ///
    /// # Errors
    /// As [`Agents::start`]; [`FrontEndError::ToolDaemons`] when a token cannot be written.
    pub fn start(mut self, session: &mut Session) -> Result<Agents, FrontEndError> {
        let Some(job) = session.job() else {
            return Agents::start(session, self.options);
        };
        let launch = self.options.launch.resolve(job)?;
        let asked = !job
            .notes
            .iter()
            .any(|n| matches!(n, Note::ToolDaemonUnsupported { .. }));
        // Not the daemons' engine: the rendezvous is dropped here, and daemons waiting for a
        // token, if any, see their directory go and end.
        let Some(mut rendezvous) = self
            .rendezvous
            .take()
            .filter(|_| asked && launch == Launch::OrteToolDaemons)
        else {
            return Agents::start(session, self.options);
        };
        let starter = job.starter.pid;
        let hosts = remote_hosts(session);
        let mut agents = Agents {
            fleet: Fleet::empty(),
            options: self.options,
            asking: None,
            pmix: None,
            pending: None,
        };
        let plan = agents.plan(job, launch, ReadSettings::of(session.options()));
        let nodes: Vec<String> = hosts.iter().map(|h| h.host.clone()).collect();
        // Every daemon is told: those of nodes without a token end at once.
        rendezvous.issue(&nodes)?;
        if hosts.is_empty() {
            return Ok(agents);
        }
        if traced_by_us(starter) {
            // The starter still held from the acquisition spawns nothing: let it go.
            drop(session.hold()?);
        }
        let start_timeout = agents.options.start_timeout;
        let deadline = Instant::now() + start_timeout;
        let links = rendezvous.accept(
            deadline,
            &mpir_wire::Options::default(),
            &AtomicBool::new(false),
        );
        let why = rendezvous.none_connected(
            "the starter was asked at launch for a tool daemon on every node",
            start_timeout,
        );
        // The socket closed and the tokens left removed.
        drop(rendezvous);
        let links = links_by_host(hosts, links, &why);
        agents.fleet = Fleet::connected(links, &plan);
        Ok(agents)
    }
}
