//! Helpers for test suites that run Slurm jobs (feature `testkit`): whether a Slurm cluster
//! answers here (else skip, or fail under `MPIR_REQUIRE_PEERS=1`), and a guard that cancels
//! the jobs a test started — even when the test fails; and [`multinode`], the simulated
//! multi-node cluster of `scripts/ci-multinode.sh`. For tests only: these panic.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::skip;

pub mod multinode;
pub mod ring;

/// Whether a Slurm cluster answers (`SLURM_CONF` names a file and `sinfo` lists an idle or
/// allocated node within 10 s); otherwise skips the test with the reason (see
/// [`mpir_target::testkit::skip`]). `scripts/ci-slurm.sh` starts one.
pub fn slurm_up() -> bool {
    let Some(conf) = std::env::var_os("SLURM_CONF") else {
        skip("no Slurm: SLURM_CONF is not set (scripts/ci-slurm.sh starts a single-node one)");
        return false;
    };
    // Without its configuration file every Slurm client retries for 60 s.
    if !std::path::Path::new(&conf).is_file() {
        skip(&format!("no Slurm: SLURM_CONF={conf:?} is no file"));
        return false;
    }
    let answer = crate::slurm::run_bounded(
        Command::new("sinfo").args(["-h", "-o", "%T"]),
        Duration::from_secs(10),
    );
    match answer {
        Ok((true, out)) if out.lines().any(|l| !l.trim().is_empty()) => true,
        Ok((_, out)) => {
            skip(&format!("no Slurm: sinfo says {:?}", out.trim()));
            false
        }
        Err(e) => {
            skip(&format!("no Slurm: sinfo: {e}"));
            false
        }
    }
}

/// The jobs of one test, named uniquely: [`SlurmJobs::srun`] and [`SlurmJobs::sbatch`] start
/// them under that name; dropping the guard kills the `srun`s it spawned and cancels every job
/// of that name (`scancel --name`), whatever happened in the test.
#[derive(Debug)]
pub struct SlurmJobs {
    name: String,
    children: Vec<u32>,
    adopted: Vec<Child>,
}

impl SlurmJobs {
    /// A guard for jobs named `mpir-test-<pid>-<tag>`.
    pub fn new(tag: &str) -> Self {
        SlurmJobs {
            name: format!("mpir-test-{}-{tag}", std::process::id()),
            children: Vec::new(),
            adopted: Vec::new(),
        }
    }

    /// The job name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An `srun` command for a job of this name (`args` follow the options): stdin closed,
    /// stdout piped, stderr discarded.
    pub fn srun(&self, args: &[&str]) -> Command {
        let mut c = Command::new("srun");
        c.arg(format!("--job-name={}", self.name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    }

    /// Registers a process this test spawned (an `srun`) to be killed by the guard.
    pub fn track(&mut self, child: &Child) {
        self.children.push(child.id());
    }

    /// Takes a process this test spawned (an `srun` it does not wait for itself): killed and
    /// reaped by the guard.
    pub fn adopt(&mut self, child: Child) {
        self.adopted.push(child);
    }

    /// Submits a batch job of this name running `script` (`sbatch --wrap`); its job id.
    ///
    /// # Panics
    /// When `sbatch` fails or answers something else than a job id.
    pub fn sbatch(&self, args: &[&str], script: &str) -> u64 {
        let (ok, out) = crate::slurm::run_bounded(
            Command::new("sbatch")
                .arg("--parsable")
                .arg(format!("--job-name={}", self.name))
                .args(["--output=/dev/null"])
                .args(args)
                .arg("--wrap")
                .arg(script),
            Duration::from_secs(30),
        )
        .expect("sbatch answers");
        assert!(ok, "sbatch failed: {out}");
        out.trim()
            .split(';')
            .next()
            .and_then(|j| j.parse().ok())
            .unwrap_or_else(|| panic!("sbatch said {out:?}"))
    }
}

impl Drop for SlurmJobs {
    fn drop(&mut self) {
        for &pid in &self.children {
            if let Ok(p) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for child in &mut self.adopted {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = crate::slurm::run_bounded(
            Command::new("scancel").arg(format!("--name={}", self.name)),
            Duration::from_secs(20),
        );
    }
}
