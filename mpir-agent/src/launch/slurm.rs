//! Slurm ([`super::Launch::Slurm`]): one step beside the job's, on one node, per agent; Slurm
//! authenticates it with munge and forwards its standard I/O.

use std::ffi::OsString;

/// `srun --jobid=J --overlap --nodes=1 --ntasks=1 --nodelist=HOST --unbuffered --quiet
/// AGENT…`.
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
}
