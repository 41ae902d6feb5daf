//! How the front end starts its agents: through an engine the job already trusts, never a
//! launcher of our own. With a command per node ([`Launch::command`]: hydra, a template),
//! each agent's stdin/stdout is the pipe the engine forwards; with Slurm, one step starts the
//! agents of every node at once ([`Launch::step`]) and they connect back over TLS. No argv
//! carries a secret.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use mpir_acquire::Job;
use mpir_acquire::quirks::Launcher;

use mpir_session::AgentFailure;
use mpir_wire::{Connection, Transport};

use crate::error::FrontEndError;

mod hydra;
mod slurm;
mod template;

pub(crate) use slurm::{STEP_NAME, is_binding_notice};
use template::Template;

/// An agent's connection, whatever carries it (a pipe its engine forwards, TLS).
pub type AgentLink = Connection<Box<dyn Transport + Send>>;

/// Why an agent is out (not started, cut off, gone).
#[derive(Debug, Clone)]
pub(crate) struct Down {
    pub(crate) failure: AgentFailure,
    pub(crate) detail: String,
}

impl Down {
    pub(crate) fn new(failure: AgentFailure, detail: impl Into<String>) -> Down {
        Down {
            failure,
            detail: detail.into(),
        }
    }
}

/// Which engine starts the agents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Launch {
    /// Decided from the job: a job acquired through PMIx (Open MPI 5's `mpirun`, PRRTE's
    /// `prterun`) → [`Launch::PmixToolDaemons`]; a Slurm step (`srun`) → [`Launch::Slurm`];
    /// Open MPI 4's `orterun` → [`Launch::OrteToolDaemons`]; MPICH's or Intel MPI's hydra →
    /// [`Launch::Hydra`]; otherwise no engine is known to start an agent, and
    /// [`Launch::Template`] must be given.
    Auto,
    /// Slurm: **one** step beside the job's for all the agents a program starts (the front
    /// end's, or a subtree root's for its subtree), one task per node:
    /// `srun --jobid=J --overlap --nodelist=H1,H2,… --nodes=N --ntasks=N
    /// --ntasks-per-node=1 …` claiming no memory, GRES or CPU binding (each flag is
    /// justified in `launch/slurm.rs`). One step's stdio is one stream for all its tasks,
    /// so the agents connect back over TLS as tool daemons do ([`crate::Rendezvous`]: the
    /// certificate pinned, a one-time token per node in a private directory made inside
    /// `token_dir`). Slurm authenticates the step with munge.
    Slurm {
        /// The Slurm job id.
        job_id: u64,
        /// Where the agents' token directory is made (a directory the nodes share);
        /// `None`: `~/.mpir/agent-tokens` of whoever starts them. Handed down the tree, so
        /// that a subtree root's agents find their tokens where the front end's do.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_dir: Option<PathBuf>,
    },
    /// MPICH's or Intel MPI's hydra: **one** second hydra job for all the agents a program
    /// starts, one process per node — `MPIEXEC [the job's launcher options] -hosts
    /// H1,…,HN -ppn 1 -n N AGENT…` — with the job's own `mpiexec` and the way it reaches
    /// nodes (its `-launcher`, `-launcher-exec`, `-bootstrap`, `-bootstrap-exec` arguments
    /// and `HYDRA_*`/`I_MPI_HYDRA_*` variables). Hydra merges its processes' output and
    /// gives input to rank 0 only, so the agents connect back over TLS as Slurm's do.
    Hydra {
        /// The job's `mpiexec` (its starter's executable).
        mpiexec: std::path::PathBuf,
        /// Its launcher options, as given to it.
        options: Vec<String>,
        /// Its launcher variables.
        env: Vec<(String, String)>,
        /// Where the agents' token directory is made when one job starts several agents
        /// (see [`Launch::Slurm`]); `None`: `~/.mpir/agent-tokens`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_dir: Option<PathBuf>,
    },
    /// A command per node from a template: `{host}` is the node, `{agent}` the agent's
    /// command (several words); words are split by the POSIX shell's quoting rules (single
    /// and double quotes, backslashes), but nothing is expanded and no shell is involved
    /// (`ssh {host} {agent}`, `pdsh -N -w {host} {agent}`, the simulated cluster's
    /// `nsrsh {host} {agent}`). The command must forward the agent's stdin and stdout.
    Template(String),
    /// Open MPI 4's `orterun` starts the agents itself as MPIR tool daemons (one per node),
    /// and they connect back over TLS (see [`crate::Rendezvous`]). Flat: no tree.
    OrteToolDaemons,
    /// Open MPI 5 / PRRTE: the job's PMIx server starts the agents as PMIx tool daemons
    /// (`PMIx_Spawn` with `PMIX_DEBUGGER_DAEMONS`, `PMIX_DEBUG_TARGET` the job's namespace,
    /// `PMIX_DEBUG_DAEMONS_PER_NODE` 1: one per node of the job, each a child of its node's
    /// `prted`), asked through the front end's PMIx tool connection; PRRTE forwards no
    /// standard input to them, so they connect back over TLS as `orterun`'s do (see
    /// [`crate::Rendezvous`]). Flat: no tree.
    PmixToolDaemons,
}

impl Launch {
    /// The engine for `job`: `self`, or for [`Launch::Auto`] the one the job's starter says.
    ///
    /// # Errors
    /// [`FrontEndError::NoEngine`] when nothing in the job says how to reach its nodes.
    pub fn resolve(&self, job: &Job) -> Result<Launch, FrontEndError> {
        match self {
            // PRRTE names no launcher kind (it has no MPIR); a job acquired through PMIx
            // says so by its PMIx evidence.
            Launch::Auto if job.pmix.is_some() => Ok(Launch::PmixToolDaemons),
            Launch::Auto => match (job.starter.launcher, job.starter.job_id) {
                (Some(Launcher::Slurm), Some(job_id)) => Ok(Launch::Slurm {
                    job_id,
                    token_dir: None,
                }),
                (Some(Launcher::OpenMpi), _) => Ok(Launch::OrteToolDaemons),
                (Some(Launcher::Hydra), _) => hydra::of(job.starter.pid),
                (Some(Launcher::Slurm), None) => Err(FrontEndError::NoEngine {
                    reason: "the srun does not say its Slurm job id (SLURM_JOB_ID)".into(),
                }),
                (launcher, _) => Err(FrontEndError::NoEngine {
                    reason: format!(
                        "the starter is {}, whose own daemons do not forward an agent's \
                         standard I/O; give a command that does (--agent-launch \
                         'ssh {{host}} {{agent}}')",
                        launcher.map_or_else(|| "not a known launcher".into(), |l| l.to_string())
                    ),
                }),
            },
            other => Ok(other.clone()),
        }
    }

    /// Checks a template: its words (split by the shell's quoting rules, nothing expanded)
    /// name `{host}` (in a word) and have `{agent}` as a word of its own.
    ///
    /// # Errors
    /// [`FrontEndError::Template`] saying what is wrong (a quote left open: where).
    pub fn check(&self) -> Result<(), FrontEndError> {
        if let Launch::Template(t) = self {
            Template::parse(t)?;
        }
        Ok(())
    }

    /// The command that starts the agents of all of `hosts` at once, for an engine that
    /// does so (Slurm: one step, one task per node; hydra: one job, one process per node;
    /// `agent` then carries the rendezvous' arguments, and no `--node`, as each agent
    /// learns its node where it runs); `None` for
    /// the engines that start one agent per command ([`Launch::command`]). A node list too
    /// long for one argument (Linux caps one at 128 KiB) is written to `list_file`, which
    /// srun reads instead (its argument then names a path).
    ///
    /// # Errors
    /// [`FrontEndError::ToolDaemons`] when the node list cannot be written.
    pub(crate) fn step(
        &self,
        hosts: &[String],
        agent: &[OsString],
        list_file: &std::path::Path,
    ) -> Result<Option<Command>, FrontEndError> {
        match self {
            Launch::Slurm { job_id, .. } => {
                let argv = slurm::step_argv(*job_id, hosts, agent, list_file)?;
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                Ok(Some(c))
            }
            Launch::Hydra {
                mpiexec,
                options,
                env,
                ..
            } => hydra::job_command(mpiexec, options, env, hosts, agent, list_file).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether this engine starts every agent of a fleet with one command ([`Launch::step`]).
    pub(crate) fn starts_all_at_once(&self) -> bool {
        matches!(self, Launch::Slurm { .. } | Launch::Hydra { .. })
    }

    /// Where the token directory of agents started at once is made (`None`: the default).
    pub(crate) fn token_dir(&self) -> Option<&std::path::Path> {
        match self {
            Launch::Slurm { token_dir, .. } | Launch::Hydra { token_dir, .. } => {
                token_dir.as_deref()
            }
            _ => None,
        }
    }

    /// The same engine, its token directory `dir` unless it has one.
    pub(crate) fn with_token_dir(self, dir: Option<PathBuf>) -> Launch {
        match self {
            Launch::Slurm {
                job_id,
                token_dir: None,
            } => Launch::Slurm {
                job_id,
                token_dir: dir,
            },
            Launch::Hydra {
                mpiexec,
                options,
                env,
                token_dir: None,
            } => Launch::Hydra {
                mpiexec,
                options,
                env,
                token_dir: dir,
            },
            other => other,
        }
    }

    /// The node whose agent ended, if `line` (of the engine's standard error) says so:
    /// srun names each task that ends badly; hydra does not.
    pub(crate) fn task_ended<'a>(&self, line: &'a str) -> Option<&'a str> {
        match self {
            Launch::Slurm { .. } => slurm::task_ended(line),
            _ => None,
        }
    }

    /// The command that starts `agent` (its program and arguments) on `host`, stdin and
    /// stdout piped, stderr inherited (an agent's diagnostics reach the user).
    ///
    /// # Errors
    /// [`FrontEndError::Template`] for an unusable template; [`FrontEndError::NoEngine`]
    /// for [`Launch::Auto`] (resolve it first).
    pub fn command(&self, host: &str, agent: &[OsString]) -> Result<Command, FrontEndError> {
        self.check()?;
        let argv: Vec<OsString> = match self {
            Launch::Auto => {
                return Err(FrontEndError::NoEngine {
                    reason: "the engine was not resolved from the job".into(),
                });
            }
            Launch::OrteToolDaemons => {
                return Err(FrontEndError::NoEngine {
                    reason: "orterun starts its tool daemons itself: no command per node".into(),
                });
            }
            Launch::PmixToolDaemons => {
                return Err(FrontEndError::NoEngine {
                    reason: "the job's PMIx server starts its tool daemons itself: no command \
                             per node"
                        .into(),
                });
            }
            Launch::Slurm { job_id, .. } => slurm::argv(*job_id, host, agent),
            Launch::Hydra {
                mpiexec,
                options,
                env,
                ..
            } => return Ok(hydra::command(mpiexec, options, env, host, agent)),
            Launch::Template(t) => Template::parse(t)?.argv(host, agent),
        };
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        Ok(c)
    }
}

/// The agent's command: this program's own executable (one binary on a shared file system is
/// the expected setup) with `agent`.
pub fn default_agent_command() -> Vec<OsString> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("mpir"));
    vec![exe.into_os_string(), "agent".into()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command's program and arguments, as text (the engines' tests use it too).
    pub(super) fn words(c: &Command) -> Vec<String> {
        std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn templates_expand_host_and_agent_without_a_shell() {
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        let c = Launch::Template("ssh -o BatchMode=yes {host} {agent}".into())
            .command("node7", &agent)
            .unwrap();
        assert_eq!(
            words(&c),
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "node7",
                "/shared/mpir",
                "agent"
            ]
        );
        let c = Launch::Template("pdsh -N -w {host} {agent}".into())
            .command("n[1]; rm -rf /", &agent)
            .unwrap();
        // A host is one word, whatever it holds: no shell splits or runs it.
        assert_eq!(words(&c)[3], "n[1]; rm -rf /");
        for (t, why) in [
            ("", "empty"),
            ("ssh {agent}", "{host}"),
            ("ssh {host} x{agent}", "{agent}"),
        ] {
            let e = Launch::Template(t.into()).command("n", &agent).unwrap_err();
            assert!(e.to_string().contains(why), "{t}: {e}");
        }
        // Engines that start their daemons themselves have no command per node.
        for engine in [
            Launch::OrteToolDaemons,
            Launch::PmixToolDaemons,
            Launch::Auto,
        ] {
            let e = engine.command("node3", &agent).unwrap_err();
            assert!(
                matches!(e, FrontEndError::NoEngine { .. }),
                "{engine:?}: {e}"
            );
        }
        let s = Launch::Slurm {
            job_id: 42,
            token_dir: None,
        }
        .command("node3", &agent)
        .unwrap();
        let w = words(&s);
        assert_eq!(w[0], "srun");
        assert!(w.contains(&"--jobid=42".to_string()) && w.contains(&"--nodelist=node3".into()));
        assert!(w.contains(&"--overlap".to_string()));
        assert_eq!(&w[w.len() - 2..], ["/shared/mpir", "agent"]);
    }
}
