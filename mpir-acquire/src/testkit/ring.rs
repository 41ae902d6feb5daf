//! An Open MPI 4 job on the simulated cluster ([`super::multinode`]) for the multi-node tests
//! of the bindings and of `mpir`: `orterun` in node1, its ranks on other nodes, each rank
//! printing who it is (`rank R pid P on HOST`) and then blocked (the ring: in `MPI_Recv` from
//! its right neighbour with tag 42, a deadlock; or any program printing the same line).

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

/// The running job: stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ring {
    /// `orterun`, in node1 (its `local_pid` is the starter's pid there).
    pub orterun: NodeChild,
    /// Every rank, in rank order.
    pub ranks: Vec<RingRank>,
    /// The job's program.
    pub exe: PathBuf,
    /// Everything orterun wrote to its standard output so far (the ranks' lines).
    pub out: Arc<Mutex<String>>,
    /// orterun's standard error (its daemons' too).
    pub err: PathBuf,
}

/// The ranks a job's output names (`rank R pid P on HOST` lines), in rank order.
pub fn printed(out: &str) -> Vec<RingRank> {
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

/// Collects a child's standard output, line by line, on a thread of its own.
pub fn gather(stdout: std::process::ChildStdout) -> Arc<Mutex<String>> {
    let out = Arc::new(Mutex::new(String::new()));
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
    out
}

/// `source` built with Open MPI's `mpicc` (`-g`) as `dir/name`; `None` after a skip without
/// it.
pub fn build(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    if !have("mpicc.openmpi") {
        skip("Open MPI (mpicc.openmpi) is not installed");
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).unwrap();
    run(Command::new("mpicc.openmpi")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("{e}"));
    Some(exe)
}

impl Ring {
    /// Builds [`RING_C`] in `dir` and starts it from node1 on `hosts` (node, ranks); `None`
    /// after a skip without Open MPI.
    pub fn start(cluster: &Cluster, dir: &Path, hosts: &[(usize, u32)]) -> Option<Ring> {
        let exe = build(dir, "ring", RING_C)?;
        Ring::start_program(cluster, dir, hosts, &exe)
    }

    /// Starts `exe` (a program whose ranks print `rank R pid P on HOST`, then block) with
    /// `orterun` from node1 on `hosts` (node, ranks), in `dir`, once every rank has printed
    /// (a start the MPI stack itself lost gets one more try); `None` after a skip without
    /// `orterun`.
    pub fn start_program(
        cluster: &Cluster,
        dir: &Path,
        hosts: &[(usize, u32)],
        exe: &Path,
    ) -> Option<Ring> {
        if !have("orterun") {
            skip("Open MPI (orterun) is not installed");
            return None;
        }
        let total: usize = hosts.iter().map(|(_, n)| *n as usize).sum();
        let err = dir.join("orterun.err");
        let (orterun, out) = start_job("the orterun job", || {
            let mut cmd = cluster.orterun(&[], hosts, exe, &[]);
            cmd.current_dir(dir);
            let mut wrapped = cluster.run_in(1, &cmd);
            wrapped
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&err).unwrap());
            let mut orterun = cluster.spawn(1, wrapped);
            let out = gather(orterun.child().stdout.take().unwrap());
            let count = || printed(&out.lock().unwrap()).len();
            if wait_for(60, || count() == total || orterun.has_exited()) && count() == total {
                return Ok((orterun, out));
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
        let ranks = printed(&out.lock().unwrap());
        Some(Ring {
            orterun,
            ranks,
            exe: exe.to_path_buf(),
            out,
            err,
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
