//! `mpir` run inside node1 of the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`), on an Open MPI 4.1.4 job that `orterun` (in node1 too) started on node2
//! and node3: the table lists each rank on its node with its node-local pid, as remote, and
//! nothing is touched — the ranks, nor a process of node1 whose pid equals a remote rank's (a
//! decoy that records any tracer or stop). `queues`, `deadlock` and `stacks` with
//! `--no-agents` (no way to reach another node's ranks) name each rank's node and touch
//! nothing either; with agents (the default) see `multinode_orte.rs`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::{Cluster, NodeChild};
use mpir_target::testkit::{build_decoy, have, run, scratch, skip, wait_for};

/// Every rank exchanges a token with its neighbours, prints "rank R pid P on HOST", then
/// blocks in `MPI_Recv` from a neighbour with a tag nobody sends (a deadlock across nodes).
const DEADLOCK_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, buf[4], tok, in = -1;
    char host[64];
    alarm(300);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    tok = rank;
    MPI_Sendrecv(&tok, 1, MPI_INT, (rank + size - 1) % size, 1, &in, 1, MPI_INT,
                 (rank + 1) % size, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d pid %d on %s\n", rank, (int)getpid(), host);
    fflush(stdout);
    MPI_Recv(buf, 4, MPI_INT, (rank + 1) % size, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"#;

/// A rank as it printed itself: (rank, node-local pid, host).
type Printed = (u64, u32, String);

fn printed(out: &str) -> Vec<Printed> {
    let mut v: Vec<Printed> = out
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            ["rank", r, "pid", p, "on", h] => Some((r.parse().ok()?, p.parse().ok()?, h.into())),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// The running job: orterun in node1, ranks 0,1 on node2 and 2,3 on node3; a decoy in node1
/// with the pid of one of them.
struct Job {
    orterun: NodeChild,
    out: Arc<Mutex<String>>,
    ranks: Vec<Printed>,
    decoy: NodeChild,
    decoy_log: PathBuf,
}

impl Job {
    fn start(cluster: &Cluster, dir: &Path) -> Option<Job> {
        if !have("orterun") || !have("mpicc.openmpi") {
            skip("Open MPI (orterun, mpicc.openmpi) is not installed");
            return None;
        }
        let src = dir.join("mn_deadlock.c");
        let exe = dir.join("mn_deadlock");
        std::fs::write(&src, DEADLOCK_C).unwrap();
        run(Command::new("mpicc.openmpi")
            .arg("-g")
            .arg(&src)
            .arg("-o")
            .arg(&exe))
        .unwrap_or_else(|e| panic!("{e}"));
        let decoy = build_decoy(dir)?;
        let mut cmd = cluster.orterun(&[], &[(2, 2), (3, 2)], &exe, &[]);
        cmd.current_dir(dir);
        let mut wrapped = cluster.run_in(1, &cmd);
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut orterun = cluster.spawn(1, wrapped);
        let out = Arc::new(Mutex::new(String::new()));
        let stdout = orterun.child().stdout.take().unwrap();
        let o = Arc::clone(&out);
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let mut s = o.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
        let text = || out.lock().unwrap().clone();
        assert!(
            wait_for(60, || printed(&text()).len() == 4),
            "the job did not start: {}",
            text()
        );
        let ranks = printed(&text());
        let decoy_log = dir.join("decoy.log");
        let decoy = ranks
            .iter()
            .find_map(|(_, pid, _)| {
                let mut d = Command::new(&decoy);
                d.arg(&decoy_log);
                cluster.spawn_with_pid(1, *pid, &d)
            })
            .unwrap_or_else(|| panic!("no rank pid of {ranks:?} free in node1"));
        Some(Job {
            orterun,
            out,
            ranks,
            decoy,
            decoy_log,
        })
    }

    /// Nothing was touched: the ranks on their nodes, orterun, the colliding decoy (never
    /// traced or stopped, still running); the job runs on with its output unchanged.
    fn assert_untouched(&mut self, cluster: &Cluster) {
        for (rank, pid, host) in &self.ranks {
            let node: usize = host.trim_start_matches("node").parse().unwrap();
            assert!(
                cluster.host_pid(node, *pid).is_some(),
                "rank {rank} is gone"
            );
            cluster.assert_untouched(node, *pid);
        }
        mpir_target::testkit::assert_untouched(self.orterun.host_pid);
        let touched = std::fs::read_to_string(&self.decoy_log).unwrap_or_default();
        assert!(touched.is_empty(), "node1's decoy was touched: {touched}");
        mpir_target::testkit::assert_untouched(self.decoy.host_pid);
        assert!(!self.decoy.has_exited() && !self.orterun.has_exited());
        assert_eq!(printed(&self.out.lock().unwrap()), self.ranks);
    }
}

/// `mpir ARGS` inside node1, bounded.
fn mpir_in_node1(cluster: &Cluster, args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "180"])
        .arg(mpir().get_program())
        .args(args);
    cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap()
}

#[test]
fn attach_inside_node1_lists_remote_ranks_with_their_nodes_pids_and_touches_nothing() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-attach");
    let Some(mut job) = Job::start(&cluster, &dir) else {
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
fn queues_deadlock_and_stacks_inside_node1_touch_no_remote_rank() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-reads");
    let Some(mut job) = Job::start(&cluster, &dir) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    for cmd in ["queues", "deadlock", "stacks"] {
        // Without agents (orterun would start them: tests/multinode_orte.rs).
        let o = mpir_in_node1(&cluster, &[cmd, "--starter", &starter, "--no-agents"]);
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
