//! `mpir` run inside node1 of the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`), on an Open MPI 4.1.4 job that `orterun` (in node1 too) started on node2
//! and node3: the table lists each rank on its node with its node-local pid, as remote, and
//! nothing is touched — the ranks, nor a process of node1 whose pid equals a remote rank's (a
//! decoy that records any tracer or stop). `queues`, `deadlock` and `stacks` without agents
//! (`--no-agents`) name each rank's node and touch nothing either; with agents
//! (`multinode_agents.rs`, `multinode_orte.rs`) they read every rank on its own node.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use common::json_doc;
use common::mn::{Job, mpir_in_node1};
use mpir_acquire::testkit::multinode::Cluster;
use mpir_target::testkit::scratch;

#[test]
fn attach_inside_node1_lists_remote_ranks_with_their_nodes_pids_and_touches_nothing() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-attach");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    let o = mpir_in_node1(&cluster, &["attach", "--json", &starter]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4, "{doc:#}");
    for (r, (rank, pid, host)) in ranks.iter().zip(&job.ranks) {
        assert_eq!(r["rank"], *rank, "{r}");
        assert_eq!(r["host"], host.as_str(), "{r}");
        assert_eq!(r["pid"], *pid, "{r}");
        assert_eq!(r["local"], false, "{r}");
        assert_eq!(r["control"], "remote", "{r}");
    }
    let nodes: Vec<(String, u64, bool)> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["host"].as_str().unwrap().to_string(),
                n["ranks"].as_u64().unwrap(),
                n["local"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [("node2".into(), 2, false), ("node3".into(), 2, false)],
        "{doc:#}"
    );
    assert!(
        doc["this_node"]["names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "node1"),
        "{doc:#}"
    );
    job.assert_untouched(&cluster);

    // The table for people: each rank's line names its node and its node-local pid.
    let o = mpir_in_node1(&cluster, &["attach", &starter]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    for (rank, pid, host) in &job.ranks {
        assert!(
            text.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&rank.to_string().as_str())
                    && w.contains(&host.as_str())
                    && w.contains(&pid.to_string().as_str())
            }),
            "rank {rank} ({host}, pid {pid}) is not in:\n{text}"
        );
    }
    job.assert_untouched(&cluster);
}

#[test]
fn without_agents_queues_deadlock_and_stacks_inside_node1_touch_no_remote_rank() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-reads");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    for cmd in ["queues", "deadlock", "stacks"] {
        let o = mpir_in_node1(&cluster, &[cmd, "--no-agents", "--starter", &starter]);
        // Killed by `timeout` would be no answer at all.
        assert!(o.status.code().is_some(), "{cmd}: {}", o.status);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("mpir {cmd} (exit {:?}):\n{text}", o.status.code());
        // Each remote rank's node is named (today: why it was not reached).
        for host in ["node2", "node3"] {
            assert!(text.contains(host), "{cmd} does not name {host}:\n{text}");
        }
        job.assert_untouched(&cluster);
    }
}
