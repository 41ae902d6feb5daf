//! What the caller chooses.

use std::sync::Arc;
use std::time::Duration;

use mpir_target::debuginfo::{DebugOptions, FileCache};
use mpir_target::proctable::ReadOptions;
use mpir_types::node::ThisNode;
use mpir_types::ranks::RankSet;

use crate::interface::InterfaceChoice;

/// Which ranks to attach to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RankSelection {
    /// Every rank.
    #[default]
    All,
    /// None: only read the table. (If the starter does not define `MPIR_partial_attach_ok`,
    /// every rank is still attached briefly, to release its `MPIR_debug_gate`, as the spec
    /// requires.)
    None,
    /// These ranks (others as for `None`): a [`RankSet`] such as `0-3,7,12-` parsed from
    /// what a user typed, or built from a list (`vec![0, 3].into()`).
    Only(RankSet),
}

impl RankSelection {
    /// Whether `rank` is selected.
    pub fn contains(&self, rank: u64) -> bool {
        match self {
            RankSelection::All => true,
            RankSelection::None => false,
            RankSelection::Only(v) => v.contains(rank),
        }
    }
}

/// When releasing a job writes `MPIR_debug_gate` = 1 in the attached ranks (those that define
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GateRelease {
    /// As the spec says (MPIR 1.1 §8 step 18): only when the starter does not define
    /// `MPIR_partial_attach_ok`.
    #[default]
    Auto,
    /// Always — for ranks told to wait for a debugger although the starter allows partial
    /// attach (MPICH built with `--enable-debuginfo`, run with `MPIEXEC_DEBUG=1`).
    Always,
    /// Never.
    Never,
}

/// The tool daemon launch extension (MPIR 1.1 §7.1): the starter launches this program with
/// these arguments alongside the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolDaemon {
    /// Written to `MPIR_executable_path`.
    pub executable: String,
    /// Written to `MPIR_server_arguments`, NUL-separated.
    pub arguments: Vec<String>,
    /// A starter without the extension's arrays is not an error: nothing is written, and a
    /// [`crate::Note::ToolDaemonUnsupported`] says so (see [`ToolDaemon::if_supported`]).
    pub optional: bool,
}

impl ToolDaemon {
    /// The program `executable`, started with `arguments`.
    pub fn new(
        executable: impl Into<String>,
        arguments: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ToolDaemon {
            executable: executable.into(),
            arguments: arguments.into_iter().map(Into::into).collect(),
            optional: false,
        }
    }

    /// Asked for only if the starter supports the extension: a tool that launches a job
    /// whose starter it does not know yet (`mpir launch` starting agents with whatever
    /// engine the job turns out to have) asks every starter, and one without the arrays is
    /// launched as if nothing was asked.
    pub fn if_supported(mut self) -> Self {
        self.optional = true;
        self
    }
}

/// Settings of an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// Longest wait for any one event (the starter reaching its entry point, spawning the
    /// job, ranks stopping). Every wait is bounded by it.
    pub timeout: Duration,
    /// Ranks to attach to.
    pub ranks: RankSelection,
    /// Keep attached ranks stopped after acquisition (for another tool, or for the caller
    /// to release with the gate API); otherwise they are released and detached. A rank the
    /// starter listed between its fork and its exec is held at the entry point of its own
    /// program.
    pub hold: bool,
    /// Table reading bounds and the `MPIR_PROCDESC` layout choice.
    pub read: ReadOptions,
    /// Ask the starter to launch tool daemons.
    pub tool_daemon: Option<ToolDaemon>,
    /// When the release writes `MPIR_debug_gate`.
    pub gate: GateRelease,
    /// Most MPIR events accepted before the job is spawned (a starter that keeps raising
    /// `MPIR_NULL` events would otherwise keep us forever).
    pub max_events: u32,
    /// Where live drivers look for symbols and types (debug directories with build-id files,
    /// separate symbol files, types sidecars): e.g. the rebuilt symbols of a stripped
    /// `mpiexec.hydra`.
    pub debug: DebugOptions,
    /// Which host strings name this node. `None`: the live drivers gather the machine's facts
    /// (host name, `/etc/hosts` aliases, interface addresses), and a bare [`Acquisition`](crate::Acquisition)
    ///  knows only `localhost` and loopback addresses. Ranks on any other
    /// node are never touched.
    pub this_node: Option<ThisNode>,
    /// Aliases the caller says name this node, added to its facts (a launcher that reports
    /// an address or an alias: `--this-node NAME`).
    pub aliases: Vec<String>,
    /// Touch ranks that belong to another user than the starter's (a privileged caller that
    /// knows why). Off by default: such a process is not this job's.
    pub allow_other_users: bool,
    /// Which interface to acquire through ([`InterfaceChoice::Auto`]: as the process says).
    pub interface: InterfaceChoice,
    /// How long an attach of the starter or of a rank that another tracer holds (another
    /// `mpir`, a debugger) waits for it to let go before the process is reported as refused
    /// (`traced_by`); any other refusal is reported at once. Default 5 s
    /// ([`TracerOptions::held_wait`](mpir_target::live::tracer::TracerOptions::held_wait)
    /// says why).
    pub held_wait: Duration,
    /// Files parsed for the starter's and the ranks' images, shared with the caller's own
    /// reads ([`AcquireOptions::with_files`]; `None`: the acquisition's own): a starter and
    /// its ranks map the same libraries, each parsed once.
    pub files: Option<SharedFiles>,
}

/// A [`FileCache`] shared between an acquisition and its caller (two options are equal when
/// they share the same cache).
#[derive(Debug, Clone)]
pub struct SharedFiles(pub Arc<FileCache>);

impl PartialEq for SharedFiles {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedFiles {}

impl Default for AcquireOptions {
    fn default() -> Self {
        AcquireOptions {
            timeout: Duration::from_secs(60),
            ranks: RankSelection::All,
            hold: false,
            read: ReadOptions::default(),
            tool_daemon: None,
            gate: GateRelease::Auto,
            max_events: 1000,
            debug: DebugOptions::default(),
            this_node: None,
            aliases: Vec::new(),
            allow_other_users: false,
            interface: InterfaceChoice::Auto,
            held_wait: mpir_target::live::tracer::TracerOptions::default().held_wait,
            files: None,
        }
    }
}

impl AcquireOptions {
    /// With this wait for another tracer to let go of the starter or a rank
    /// ([`AcquireOptions::held_wait`]; zero: refused at once).
    pub fn with_held_wait(mut self, held_wait: Duration) -> Self {
        self.held_wait = held_wait;
        self
    }

    /// The settings of the tracers the live drivers start: the stop timeout is the
    /// acquisition's timeout, the wait for another tracer [`AcquireOptions::held_wait`].
    pub fn tracer_options(&self) -> mpir_target::live::tracer::TracerOptions {
        mpir_target::live::tracer::TracerOptions::default()
            .with_stop_timeout(self.timeout)
            .with_held_wait(self.held_wait)
    }

    /// With this wait bound.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// With this rank selection.
    pub fn with_ranks(mut self, ranks: RankSelection) -> Self {
        self.ranks = ranks;
        self
    }

    /// Holding the attached ranks stopped, or not.
    pub fn with_hold(mut self, hold: bool) -> Self {
        self.hold = hold;
        self
    }

    /// With these table reading options.
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// With this gate policy.
    pub fn with_gate(mut self, gate: GateRelease) -> Self {
        self.gate = gate;
        self
    }

    /// Parsing the images' files into `files`, shared with the caller's reads
    /// ([`AcquireOptions::files`]).
    pub fn with_files(mut self, files: Arc<FileCache>) -> Self {
        self.files = Some(SharedFiles(files));
        self
    }

    /// Looking for symbols and types there.
    pub fn with_debug(mut self, debug: DebugOptions) -> Self {
        self.debug = debug;
        self
    }

    /// With these facts about this node (instead of the machine's own).
    pub fn with_this_node(mut self, node: ThisNode) -> Self {
        self.this_node = Some(node);
        self
    }

    /// With `alias` naming this node too.
    pub fn with_alias(mut self, alias: impl Into<String>) -> Self {
        self.aliases.push(alias.into());
        self
    }

    /// Touching ranks of other users than the starter's, or not.
    pub fn with_allow_other_users(mut self, allow: bool) -> Self {
        self.allow_other_users = allow;
        self
    }

    /// The facts about this node in force: the given ones (or only loopback when none were
    /// given) plus the aliases.
    pub fn node_facts(&self) -> ThisNode {
        let base = self.this_node.clone().unwrap_or_default();
        self.aliases.iter().fold(base, |n, a| n.with_alias(a))
    }

    /// Acquiring through this interface (the default: whichever the process speaks).
    pub fn with_interface(mut self, interface: InterfaceChoice) -> Self {
        self.interface = interface;
        self
    }

    /// Launching this tool daemon.
    pub fn with_tool_daemon(mut self, daemon: ToolDaemon) -> Self {
        self.tool_daemon = Some(daemon);
        self
    }
}
