//! A hydra job's agents are started by **one** second hydra job for all their nodes, one
//! process per node (issue 31, point 6), connecting back over TLS: seen while they run by
//! the processes of node1 (the job's `mpiexec` and exactly one more) and by what hydra told
//! each agent (`PMI_RANK`: 0 and 1 of one job, not two rank 0s).
//!
//! The job: MPICH's ring (`common::mn::hydra_ring`, 4 ranks on node2 and node3 of the
//! simulated cluster, `scripts/ci-multinode.sh`), its `mpiexec.hydra` inside node1, where
//! `mpir` runs.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::Cluster;
use mpir_target::testkit::{scratch, wait_for};

/// Variable `name` of host process `pid`.
fn var(pid: u32, name: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|v| {
        let v = std::str::from_utf8(v).ok()?;
        v.strip_prefix(name)?.strip_prefix('=').map(str::to_string)
    })
}

#[test]
fn one_hydra_job_starts_the_agents_of_every_node() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-hydra-job");
    let Some((hydra, debug)) = common::mn::hydra_ring(&cluster, &dir) else {
        return;
    };
    let mut wrapped = cluster.run_in(1, &hydra);
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut starter = cluster.spawn(1, wrapped);
    let out = common::mn::gather(starter.child().stdout.take().unwrap());
    let ranks = || common::mn::printed(&out.lock().unwrap());
    assert!(
        wait_for(90, || ranks().len() == 4),
        "the hydra job did not start: {}",
        out.lock().unwrap()
    );
    let mpiexecs = || {
        cluster
            .processes(1)
            .into_iter()
            .filter(|p| p.comm == "mpiexec.hydra")
            .count()
    };
    assert_eq!(mpiexecs(), 1, "the job's own mpiexec");

    let pid = starter.local_pid.to_string();
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "180"])
        .arg(mpir().get_program())
        .args(["stacks", "--json", "--samples", "30", "--interval", "100"])
        .args(["--debug-dir", &debug, "--starter", &pid]);
    let mut wrapped = cluster.run_in(1, &c);
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let front = wrapped.spawn().unwrap();
    // While every node's agent runs: node1's mpiexecs, and what hydra told each agent.
    let mut seen = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && seen.is_none() {
        let agents: Vec<(usize, u32)> = [2, 3]
            .iter()
            .flat_map(|&n| {
                cluster
                    .processes(n)
                    .into_iter()
                    .filter(|p| p.comm == "mpir")
                    .map(move |p| (n, p.host_pid))
            })
            .collect();
        // Once each has its environment (a process just started by hydra's proxy may show
        // none for a moment).
        if [2, 3].iter().all(|n| agents.iter().any(|(m, _)| m == n))
            && agents.iter().all(|&(_, p)| var(p, "PMI_RANK").is_some())
        {
            let ranks_of: BTreeSet<Option<String>> =
                agents.iter().map(|&(_, p)| var(p, "PMI_RANK")).collect();
            seen = Some((mpiexecs(), agents, ranks_of));
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let o = front.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let (mpiexecs_seen, agents, ranks_of) =
        seen.unwrap_or_else(|| panic!("agents never all up: {stderr}"));
    assert!(o.status.success(), "{stderr}");
    assert_eq!(json_doc(&o)["coverage"]["read"], 4, "{stderr}");
    // The job's mpiexec and one more for both nodes' agents (one per node would be three).
    assert_eq!(mpiexecs_seen, 2, "{agents:?}");
    assert_eq!(agents.len(), 2, "one agent on each node: {agents:?}");
    // Hydra's own view: one job of two processes (ranks 0 and 1; a job per node would
    // make each agent a rank 0).
    assert_eq!(
        ranks_of,
        BTreeSet::from([Some("0".to_string()), Some("1".to_string())]),
        "{agents:?}"
    );
    for node in 1..=cluster.nodes() {
        assert!(
            wait_for(15, || !cluster
                .processes(node)
                .iter()
                .any(|p| p.comm == "mpir")),
            "an agent is left on node{node}"
        );
    }
    assert!(
        wait_for(15, || mpiexecs() == 1),
        "the agents' mpiexec is left"
    );
    for (_, pid, host) in ranks() {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, pid);
    }
    assert_eq!(ranks().len(), 4, "the job's output changed");
    starter.stop();
}
