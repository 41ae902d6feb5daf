//! An Open MPI 4 ring on the simulated cluster ([`super::multinode`]) for the bindings' tests:
//! `orterun` in node1, its ranks on other nodes, each rank blocked in `MPI_Recv` from its
//! right neighbour with tag 42 (a deadlock), after printing who it is.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use mpir_target::testkit::{have, run, skip, wait_for};

use super::multinode::{Cluster, NodeChild, StartFailure, start_job};

/// The ring's source: each rank prints `rank R pid P on HOST`, then waits for ever for a
/// message with tag 42 from its right neighbour (no rank sends one).
pub const RING_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, buf[4];
    char host[64];
    alarm(300);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d pid %d on %s\n", rank, (int)getpid(), host);
    fflush(stdout);
    MPI_Recv(buf, 4, MPI_INT, (rank + 1) % size, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"#;

/// A rank as it printed itself: (rank, pid on its node, host).
pub type RingRank = (u64, u32, String);

/// The running ring: stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ring {
    /// `orterun`, in node1 (its `local_pid` is the starter's pid there).
    pub orterun: NodeChild,
    /// Every rank, in rank order.
    pub ranks: Vec<RingRank>,
    /// The ring's program.
    pub exe: PathBuf,
}

fn parse(out: &str) -> Vec<RingRank> {
    let mut v: Vec<RingRank> = out
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            ["rank", r, "pid", p, "on", h] => Some((r.parse().ok()?, p.parse().ok()?, h.into())),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

impl Ring {
    /// Builds [`RING_C`] with Open MPI's `mpicc` in `dir` and starts it from node1 on `hosts`
    /// (node, ranks); `None` after a skip without Open MPI.
    pub fn start(cluster: &Cluster, dir: &Path, hosts: &[(usize, u32)]) -> Option<Ring> {
        if !have("mpicc.openmpi") || !have("orterun") {
            skip("Open MPI (mpicc.openmpi, orterun) is not installed");
            return None;
        }
        let src = dir.join("ring.c");
        let exe = dir.join("ring");
        std::fs::write(&src, RING_C).unwrap();
        run(Command::new("mpicc.openmpi")
            .arg("-g")
            .arg(&src)
            .arg("-o")
            .arg(&exe))
        .unwrap_or_else(|e| panic!("{e}"));
        let total: usize = hosts.iter().map(|(_, n)| *n as usize).sum();
        let err = dir.join("orterun.err");
        let (orterun, ranks) = start_job("the orterun ring", || {
            let mut cmd = cluster.orterun(&[], hosts, &exe, &[]);
            cmd.current_dir(dir);
            let mut wrapped = cluster.run_in(1, &cmd);
            wrapped
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&err).unwrap());
            let mut orterun = cluster.spawn(1, wrapped);
            let out = Arc::new(Mutex::new(String::new()));
            let stdout = orterun.child().stdout.take().unwrap();
            let o = Arc::clone(&out);
            std::thread::spawn(move || {
                for l in std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                {
                    let mut o = o.lock().unwrap();
                    o.push_str(&l);
                    o.push('\n');
                }
            });
            let count = || parse(&out.lock().unwrap()).len();
            if wait_for(60, || count() == total || orterun.has_exited()) && count() == total {
                return Ok((orterun, parse(&out.lock().unwrap())));
            }
            let why = format!(
                "{}\n{}",
                out.lock().unwrap(),
                std::fs::read_to_string(&err).unwrap_or_default()
            );
            Err(if orterun.has_exited() {
                StartFailure::Ended(why)
            } else {
                StartFailure::Stuck(why)
            })
        });
        Some(Ring {
            orterun,
            ranks,
            exe,
        })
    }

    /// Every rank still runs on its node, never traced or stopped; orterun runs.
    pub fn assert_untouched(&mut self, cluster: &Cluster) {
        for (rank, pid, host) in &self.ranks {
            let node: usize = host.trim_start_matches("node").parse().unwrap();
            assert!(
                cluster.host_pid(node, *pid).is_some(),
                "rank {rank} is gone"
            );
            cluster.assert_untouched(node, *pid);
        }
        assert!(!self.orterun.has_exited(), "orterun ended");
    }
}
