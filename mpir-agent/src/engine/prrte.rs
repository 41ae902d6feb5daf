//! Open MPI 5 (PRRTE): agents started by the job's own PMIx server as PMIx tool daemons,
//! connecting back to the front end over TLS.
//!
//! PRRTE's `prterun` (Open MPI 5's `mpirun`) has no MPIR at all; a job it runs is acquired
//! through the PMIx tool interface (`mpir_acquire::live::pmix`), and the same interface starts
//! daemons beside it: `PMIx_Spawn` with `PMIX_DEBUGGER_DAEMONS`, `PMIX_DEBUG_TARGET` the
//! job's namespace and `PMIX_DEBUG_DAEMONS_PER_NODE` 1 makes PRRTE start **one daemon per
//! node that has ranks of the job**, a child of that node's `prted` (of `prterun` on its own
//! node), inside that node ([`mpir_acquire::live::Acquired::spawn_tool_daemons`]). PRRTE
//! forwards their standard output and error to the tool, but not a standard input: no pipe
//! carries frames both ways, so the agents connect out, exactly as `orterun`'s tool daemons
//! do ([`crate::Rendezvous`]: ephemeral certificate pinned by fingerprint in the daemons'
//! arguments, one one-time token file per expected node in a private directory, nothing
//! secret on a command line; see its documentation for each step).
//!
//! # How a front end starts them ([`crate::Agents::start`] with [`crate::Launch::PmixToolDaemons`])
//!
//! 1. The rendezvous is opened for the nodes that have selected ranks ([`crate::Rendezvous::open`]).
//! 2. The running job is acquired again through PMIx, holding nothing (no rank is stopped, no
//!    tracer made: the acquisition only connects as a tool and finds the job's namespace; a
//!    process has one PMIx tool connection, which the session's own acquisitions share).
//! 3. `PMIx_Spawn` asks for `mpir agent --connect ADDR --fingerprint sha256:… --token-dir
//!    DIR`, one per node; the call returns once PRRTE has started them.
//! 4. The agents are accepted until every expected node's is in or the start timeout passed,
//!    then matched to their nodes by their tokens and adopted as for any engine. Each agent
//!    names its node by the name the job's table gives it — the node's host name, else
//!    `PMIX_HOSTNAME` (PRRTE's name for the node, in every daemon's environment), else any of
//!    the node's names — and proves its ranks from its own `/proc` as every agent does, the
//!    job's namespace (`PMIX_NAMESPACE`) in each rank's environment included.
//!
//! A daemon PRRTE starts on a node the front end expects no agent on (the front end's own
//! node, when it has ranks) finds no token there and ends at once. The tool connection is kept
//! while the agents serve and let go when they are gone. Flat, as for `orterun`: the front end
//! holds one connection per node.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use mpir_acquire::InterfaceChoice;
use mpir_acquire::live::Acquired;
use mpir_session::{Session, chain};
use mpir_wire::Options;

use crate::error::FrontEndError;
use crate::fleet::Fleet;
use crate::options::FrontEndOptions;
use crate::protocol::{HostClaims, Plan};
use crate::rendezvous::{Rendezvous, links_by_host};

/// Tool daemons per node: one agent per node.
const PER_NODE: u16 = 1;

/// The PMIx tool connection the daemons were asked through, kept while the agents serve (and
/// the daemons' namespace); dropped after them.
pub(crate) struct Spawned {
    _acquired: Option<Box<Acquired>>,
    /// The daemons' PMIx namespace, once they were started.
    pub(crate) nspace: Option<String>,
}

impl std::fmt::Debug for Spawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawned")
            .field("nspace", &self.nspace)
            .finish_non_exhaustive()
    }
}

/// Starts the agents of `hosts` as PRRTE's PMIx tool daemons (see the [module](self)) and
/// returns them adopted, with the tool connection that asked for them (keep it while they
/// serve). A node whose agent does not come is out, with the reason: a job whose daemons
/// cannot be asked for has every node out, and this node's ranks are still read.
///
/// # Errors
/// [`FrontEndError::ToolDaemons`] when the listener, identity or tokens cannot be set up.
pub(crate) fn start(
    session: &Session,
    hosts: Vec<HostClaims>,
    plan: &Plan,
    options: &FrontEndOptions,
) -> Result<(Fleet, Spawned), FrontEndError> {
    let none = Spawned {
        _acquired: None,
        nspace: None,
    };
    let Some(starter) = session.job().map(|j| j.starter.pid) else {
        return Ok((Fleet::empty(), none));
    };
    let nodes: Vec<String> = hosts.iter().map(|h| h.host.clone()).collect();
    let parent = options.token_parent();
    let start_timeout = options.start_timeout;
    let deadline = Instant::now() + start_timeout;
    let rendezvous = Rendezvous::open(options.listen, &parent, &nodes, start_timeout)?;
    let mut argv = plan.agent.clone();
    if argv.is_empty() {
        return Err(FrontEndError::NoEngine {
            reason: "no agent command".into(),
        });
    }
    argv.extend(rendezvous.agent_arguments());
    // The job again, through PMIx, holding nothing: only its tool connection is wanted.
    let acquire = session
        .options()
        .acquire_options()
        .clone()
        .with_hold(false)
        .with_interface(InterfaceChoice::Pmix)
        .with_timeout(
            session
                .options()
                .acquire_options()
                .timeout
                .min(start_timeout),
        );
    let asked = mpir_acquire::live::attach(starter, acquire)
        .map_err(|e| {
            format!(
                "the job's PMIx server (launcher pid {starter}) could not be reached to start \
                 tool daemons: {}",
                chain(&e)
            )
        })
        .and_then(
            |acquired| match acquired.spawn_tool_daemons(&argv, PER_NODE) {
                Ok(nspace) => Ok((acquired, nspace)),
                // "PMIx (launcher pid N): cannot start tool daemons (PMIx_Spawn): …": the
                // server's answer says the rest.
                Err(e) => Err(chain(&e)),
            },
        );
    let (spawned, links, why) = match asked {
        Ok((acquired, nspace)) => {
            let links = rendezvous.accept(deadline, &Options::default(), &AtomicBool::new(false));
            let why = rendezvous.none_connected(
                &format!("PRRTE started tool daemons (namespace {nspace})"),
                start_timeout,
            );
            let spawned = Spawned {
                _acquired: Some(Box::new(acquired)),
                nspace: Some(nspace),
            };
            (spawned, links, why)
        }
        Err(why) => (none, Default::default(), why),
    };
    // The socket closed and the tokens left removed.
    drop(rendezvous);
    let links = links_by_host(hosts, links, &why);
    Ok((Fleet::connected(links, plan), spawned))
}
