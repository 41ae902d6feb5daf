//! Slurm ([`super::Launch::Slurm`]): the agents run in a step beside the job's; Slurm
//! authenticates the step with munge.
//!
//! The fleet starts **one** step for all the agents it starts ([`step_argv`], as LaunchMON,
//! STAT and HPE's CTI start their daemons: one step RPC to `slurmctld` whatever the node
//! count, instead of one per node); the per-node form ([`argv`]) is kept for
//! [`super::Launch::command`].

use std::ffi::OsString;
use std::path::Path;

use crate::error::FrontEndError;

/// Longest `--nodelist=…` given on the command line; past it the list goes to a file (Linux
/// refuses a single argument over 128 KiB, `MAX_ARG_STRLEN`: about 10,000 nodes of 12
/// characters).
const INLINE_LIST: usize = 64 * 1024;

/// The step's name, as `squeue -s` and `sacct` show it.
pub(crate) const STEP_NAME: &str = "mpir-agents";

/// `srun --jobid=J --overlap --nodelist=H1,…,HN --nodes=N --ntasks=N --ntasks-per-node=1
/// --mem=0 --gres=none --cpu-bind=none --mpi=none --kill-on-bad-exit=0 --wait=0
/// --input=none --job-name=mpir-agents --quiet AGENT…`: one task per node of `hosts`, in one
/// step. The node list is written to `list_file` when it is too long for one argument.
pub(super) fn step_argv(
    job_id: u64,
    hosts: &[String],
    agent: &[OsString],
    list_file: &Path,
) -> Result<Vec<OsString>, FrontEndError> {
    let n = hosts.len();
    let list = hosts.join(",");
    let nodelist = if list.len() <= INLINE_LIST {
        format!("--nodelist={list}")
    } else {
        // srun takes an argument with a '/' as a file of node names.
        std::fs::write(list_file, format!("{}\n", hosts.join("\n"))).map_err(|e| {
            FrontEndError::ToolDaemons {
                context: format!("writing the step's node list to {}", list_file.display()),
                source: Box::new(e),
            }
        })?;
        format!("--nodelist={}", list_file.display())
    };
    let mut argv: Vec<OsString> = vec!["srun".into()];
    for a in [
        // A step of the running job (no new allocation, no queueing).
        format!("--jobid={job_id}"),
        // Beside the job's own step, on its resources: without it the step waits until
        // the job's step ends (it holds every CPU), i.e. forever.
        "--overlap".into(),
        // Exactly the nodes that have selected ranks, one task on each: with --nodes and
        // --ntasks equal and one task per node, Slurm cannot put two agents on one node or
        // leave one out; a node list that names a node outside the job fails the step at
        // once (nothing is started anywhere, and every node says why).
        nodelist,
        format!("--nodes={n}"),
        format!("--ntasks={n}"),
        "--ntasks-per-node=1".into(),
        // No memory claimed: for a step, a limit of 0 "will restrict the job step to the
        // amount of memory allocated to the job, but not remove any of the job's memory
        // allocation from being available to other job steps" (srun(1), Slurm 22.05; the
        // same words for --mem and --mem-per-cpu: for a job, not a step, --mem=0 would
        // instead mean all of each node's memory). --mem, per node, does not depend on how
        // many CPUs the step gets. Without it a site's DefMemPerCPU/DefMemPerNode would
        // reserve memory the job's step holds (--overlap shares it, but a limit still
        // applies to the agent: a large job's symbol tables could exceed a small default).
        "--mem=0".into(),
        // No GRES: a step gets all of the job's generic resources by default (GPUs held
        // from the job's step on a GRES site); "none" gives it none.
        "--gres=none".into(),
        // Not bound to the CPUs the job's ranks run on (task/affinity or task/cgroup
        // sites would pin the agent to one core beside a spinning rank). A cluster
        // without a binding task plugin says it "lacks support for cpu binding": no
        // binding is what was asked, and the fleet drops that line.
        "--cpu-bind=none".into(),
        // No MPI plugin (a site's MpiDefault=pmix would start a PMIx server for the
        // agents and make its per-step directories): agents are not MPI processes.
        "--mpi=none".into(),
        // One node's agent failing (not installed, refused) must not end the others'
        // (a site's KillOnBadExit=1 would), nor a site's WaitTime end the rest after
        // the first exits: each agent ends when the front end's connection does.
        "--kill-on-bad-exit=0".into(),
        "--wait=0".into(),
        // No standard input: the agents talk over TLS; a terminal's input is not theirs.
        "--input=none".into(),
        // Named, so that the step can be told apart (squeue -s, sacct).
        format!("--job-name={STEP_NAME}"),
        // No "srun: job step N created" chatter; errors still come.
        "--quiet".into(),
    ] {
        argv.push(a.into());
    }
    argv.extend(agent.iter().cloned());
    Ok(argv)
}

/// `srun --jobid=J --overlap --nodes=1 --ntasks=1 --nodelist=HOST --unbuffered --quiet
/// AGENT…`: one agent on `host`, its stdio forwarded.
pub(super) fn argv(job_id: u64, host: &str, agent: &[OsString]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["srun".into()];
    for a in [
        format!("--jobid={job_id}"),
        "--overlap".into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--nodelist={host}"),
        "--unbuffered".into(),
        "--quiet".into(),
    ] {
        argv.push(a.into());
    }
    argv.extend(agent.iter().cloned());
    argv
}

/// The node of a line srun writes when a task ends badly (`srun: error: node3: task 1:
/// Exited with exit code 127`, `… task 1: Killed`): that node's agent ended before it was
/// done, which tells the fleet not to wait for it.
pub(crate) fn task_ended(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("srun: error: ")?;
    let (host, rest) = rest.split_once(": task ")?;
    let (task, _how) = rest.split_once(": ")?;
    (!host.is_empty() && !host.contains(' ') && task.parse::<u32>().is_ok()).then_some(host)
}

/// Whether `line` is srun saying the cluster cannot bind CPUs: it answers `--cpu-bind=none`
/// on a cluster without a binding task plugin, where nothing is bound anyway.
pub(crate) fn is_binding_notice(line: &str) -> bool {
    line.trim() == "srun: cluster configuration lacks support for cpu binding"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotted_node_is_given_to_srun_whole() {
        // Slurm's host lists split at commas and expand brackets; a dot is part of a name.
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        let argv = argv(7, "node1.cluster.example", &agent);
        assert!(
            argv.contains(&"--nodelist=node1.cluster.example".into()),
            "{argv:?}"
        );
        assert_eq!(argv[argv.len() - 2..], agent[..]);
    }

    #[test]
    fn one_step_has_a_task_on_each_node_and_claims_nothing() {
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        let hosts: Vec<String> = ["node2", "node3", "node9.x"].map(String::from).to_vec();
        let file = std::env::temp_dir().join(format!("mpir-step-{}", std::process::id()));
        let argv = step_argv(5, &hosts, &agent, &file).unwrap();
        let words: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for want in [
            "--jobid=5",
            "--overlap",
            "--nodelist=node2,node3,node9.x",
            "--nodes=3",
            "--ntasks=3",
            "--ntasks-per-node=1",
            "--mem=0",
            "--gres=none",
            "--cpu-bind=none",
            "--mpi=none",
            "--kill-on-bad-exit=0",
            "--input=none",
        ] {
            assert!(words.iter().any(|w| w == want), "{want}: {words:?}");
        }
        assert_eq!(words[words.len() - 2..], ["/shared/mpir", "agent"]);
        assert!(!file.exists(), "a short list stays on the command line");
        // 16,000 nodes: past one argument's limit, the list goes to a file srun reads.
        let many: Vec<String> = (0..16_000).map(|i| format!("node{i:05}")).collect();
        let argv = step_argv(5, &many, &agent, &file).unwrap();
        let list = format!("--nodelist={}", file.display());
        assert!(argv.contains(&list.into()));
        assert!(argv.iter().all(|a| a.len() < 128 * 1024));
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 16_000);
        assert_eq!(text.lines().nth(15_999), Some("node15999"));
        assert!(argv.contains(&"--ntasks=16000".into()));
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_task_that_ended_names_its_node() {
        // srun 22.05's own lines (seen on the simulated cluster).
        assert_eq!(
            task_ended("srun: error: node3: task 1: Exited with exit code 127"),
            Some("node3")
        );
        assert_eq!(
            task_ended("srun: error: n7.x: task 12: Killed"),
            Some("n7.x")
        );
        for other in [
            "srun: error: Unable to create step for job 4: Invalid node name specified",
            "srun: error: eio_message_socket_accept: slurm_receive_msg[127.0.0.1:1]: Zero Bytes",
            "mpir agent: no token for node node3",
        ] {
            assert_eq!(task_ended(other), None, "{other}");
        }
        assert!(is_binding_notice(
            "srun: cluster configuration lacks support for cpu binding\n"
        ));
    }
}
