//! Slurm on the cluster: this test's jobs (cancelled when dropped), and srun started inside
//! node1 with its tasks on node2..4.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mpir_acquire::testkit::multinode::{
    Cluster, NodeChild, StartFailure, start_job as start_with_retry,
};

use crate::report::printed;
use crate::support::*;

/// Cancels this cluster's jobs of one name when dropped (`scancel` from the host, with the
/// cluster's `SLURM_CONF`: the single-node CI Slurm's is the one exported).
pub(crate) struct ClusterJobs {
    name: String,
    conf: PathBuf,
}

impl ClusterJobs {
    pub(crate) fn new(cluster: &Cluster, tag: &str) -> Option<ClusterJobs> {
        let Some(conf) = cluster.slurm_conf() else {
            skip("the simulated cluster runs no Slurm (MPIR_MULTINODE_SLURM=0, or not installed)");
            return None;
        };
        Some(ClusterJobs {
            name: format!("mpir-mn-{}-{tag}", std::process::id()),
            conf: conf.to_path_buf(),
        })
    }

    /// The job id of this name (`squeue` on the host).
    pub(crate) fn job_id(&self) -> u64 {
        let out = run(Command::new("timeout")
            .args(["-s", "KILL", "20", "squeue", "-h", "-o", "%i", "-n"])
            .arg(&self.name)
            .env("SLURM_CONF", &self.conf))
        .unwrap_or_else(|e| panic!("{e}"));
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("squeue said {out:?}"))
    }
}

impl ClusterJobs {
    /// Cancels the jobs of this name and waits (up to 30 s) until `squeue` lists none, so
    /// that a new job of the name is the only one [`ClusterJobs::job_id`] finds.
    fn cancel_and_wait(&self) {
        self.cancel();
        let listed = || {
            Command::new("timeout")
                .args(["-s", "KILL", "20", "squeue", "-h", "-o", "%i", "-n"])
                .arg(&self.name)
                .env("SLURM_CONF", &self.conf)
                .output()
                .map(|o| !o.stdout.trim_ascii().is_empty())
                .unwrap_or(false)
        };
        wait_for(30, || !listed());
    }

    fn cancel(&self) {
        let _ = Command::new("timeout")
            .args(["-s", "KILL", "20", "scancel"])
            .arg(format!("--name={}", self.name))
            .env("SLURM_CONF", &self.conf)
            .status();
    }
}

impl Drop for ClusterJobs {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// `srun` arguments of a 6-rank Open MPI job on node2..4, two ranks each.
pub(crate) fn srun_args(jobs: &ClusterJobs, program: &Path) -> Vec<String> {
    vec![
        format!("--job-name={}", jobs.name),
        "-N".into(),
        "3".into(),
        "--ntasks-per-node=2".into(),
        "--mpi=pmix".into(),
        program.display().to_string(),
    ]
}

pub(crate) const SIX: [&str; 6] = ["node2", "node2", "node3", "node3", "node4", "node4"];

/// srun inside node1 (no slurmd there), its tasks on node2..4, until all six printed (a
/// start the MPI stack itself lost gets one more try: [`start_with_retry`]).
pub(crate) fn start_srun(
    cluster: &Cluster,
    dir: &Path,
    jobs: &ClusterJobs,
    program: &Path,
) -> Option<(NodeChild, Output)> {
    let args = srun_args(jobs, program);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.srun(&args)?; // None: the cluster runs no Slurm (skipped there)
    Some(start_with_retry("the srun job", || {
        let mut cmd = cluster.srun(&args).expect("srun was found above");
        cmd.current_dir(dir);
        let mut wrapped = cluster.run_in(1, &cmd);
        let err = std::fs::File::create(dir.join("srun.err")).unwrap();
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut srun = cluster.spawn(1, wrapped);
        let out = Output::of(srun.child());
        let up = wait_for(90, || printed(&out.text()).len() == 6 || srun.has_exited())
            && printed(&out.text()).len() == 6;
        if up {
            return Ok((srun, out));
        }
        let why = format!(
            "{}\n{}",
            out.text(),
            std::fs::read_to_string(dir.join("srun.err")).unwrap_or_default()
        );
        let ended = srun.has_exited();
        drop(srun);
        jobs.cancel_and_wait();
        Err(if ended {
            StartFailure::Ended(why)
        } else {
            StartFailure::Stuck(why)
        })
    }))
}
