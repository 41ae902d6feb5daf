//! How the front end starts one agent per node: through an engine the job already trusts,
//! never a launcher of our own. Each agent's stdin/stdout is the pipe the engine forwards;
//! its argv carries no secret.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use mpir_acquire::Job;
use mpir_acquire::quirks::Launcher;

use crate::error::FrontEndError;

mod hydra;
mod slurm;
mod template;

use template::Template;

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
    /// Slurm: one step beside the job's, on one node, per agent:
    /// `srun --jobid=J --overlap --nodes=1 --ntasks=1 --nodelist=HOST --unbuffered --quiet
    /// AGENT…` (Slurm authenticates it with munge and forwards its stdio).
    Slurm {
        /// The Slurm job id.
        job_id: u64,
    },
    /// MPICH's or Intel MPI's hydra: a second hydra job on one node per agent —
    /// `MPIEXEC [the job's launcher options] -hosts HOST -n 1 AGENT…` — with the job's own
    /// `mpiexec` and the way it reaches nodes (its `-launcher`, `-launcher-exec`,
    /// `-bootstrap`, `-bootstrap-exec` arguments and `HYDRA_*`/`I_MPI_HYDRA_*` variables);
    /// hydra forwards the agent's stdin and stdout.
    Hydra {
        /// The job's `mpiexec` (its starter's executable).
        mpiexec: std::path::PathBuf,
        /// Its launcher options, as given to it.
        options: Vec<String>,
        /// Its launcher variables.
        env: Vec<(String, String)>,
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
                (Some(Launcher::Slurm), Some(job_id)) => Ok(Launch::Slurm { job_id }),
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
            Launch::Slurm { job_id } => slurm::argv(*job_id, host, agent),
            Launch::Hydra {
                mpiexec,
                options,
                env,
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

    fn words(c: &Command) -> Vec<String> {
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
        let s = Launch::Slurm { job_id: 42 }
            .command("node3", &agent)
            .unwrap();
        let w = words(&s);
        assert_eq!(w[0], "srun");
        assert!(w.contains(&"--jobid=42".to_string()) && w.contains(&"--nodelist=node3".into()));
        assert!(w.contains(&"--overlap".to_string()));
        assert_eq!(&w[w.len() - 2..], ["/shared/mpir", "agent"]);
    }
}
