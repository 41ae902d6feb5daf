//! A job across the simulated cluster's nodes (`scripts/ci-multinode.sh`): orterun in node1,
//! ranks on other nodes that deadlock in a ring, a decoy in node1 with a rank's pid.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use mpir_acquire::testkit::multinode::{Cluster, NodeChild};
use mpir_acquire::testkit::ring::Ring;
use mpir_target::testkit::{build_decoy, have, run, skip};

use super::mpir;

/// Every rank exchanges a token with its neighbours, prints "rank R pid P on HOST", then
/// blocks in `MPI_Recv` from a neighbour with a tag nobody sends (a deadlock across nodes).
pub const DEADLOCK_C: &str = r#"
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
pub use mpir_acquire::testkit::ring::RingRank as Printed;
#[allow(unused_imports)] // each test file uses part of it
pub use mpir_acquire::testkit::ring::{gather, printed};

/// [`DEADLOCK_C`] built with Open MPI's `mpicc` in `dir` (`None` after a skip without it).
pub fn build_deadlock(dir: &Path) -> Option<PathBuf> {
    mpir_acquire::testkit::ring::build(dir, "mn_deadlock", DEADLOCK_C)
}

/// A process of node1 given the pid of one of the job's ranks on another node, which no
/// tool may touch, and a control: the same program under an ordinary pid of node1, which
/// nothing names. The decoy logs every tracer and every stop it notices; a loaded VM stalls
/// every process for seconds (measured), so a stop counts only when the control did not
/// stall alike.
pub struct NodeDecoy {
    pub decoy: NodeChild,
    log: PathBuf,
    _control: NodeChild,
    control_log: PathBuf,
}

impl NodeDecoy {
    /// Starts the decoy program `exe` ([`build_decoy`]) in node1 under the first pid of
    /// `ranks` free there, and its control; logs in `dir`.
    pub fn start(cluster: &Cluster, exe: &Path, dir: &Path, ranks: &[Printed]) -> NodeDecoy {
        let log = dir.join("decoy.log");
        let decoy = ranks
            .iter()
            .find_map(|(_, pid, _)| {
                let mut d = Command::new(exe);
                d.arg(&log);
                cluster.spawn_with_pid(1, *pid, &d)
            })
            .unwrap_or_else(|| panic!("no rank pid of {ranks:?} free in node1"));
        let control_log = dir.join("control.log");
        let mut c = cluster.run_in(1, Command::new(exe).arg(&control_log));
        // It runs until its standard input closes: the pipe `nsenter` keeps.
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let control = cluster.spawn(1, c);
        NodeDecoy {
            decoy,
            log,
            _control: control,
            control_log,
        }
    }

    /// Never traced, never stopped but for the machine's stalls, still running.
    pub fn assert_untouched(&mut self) {
        let touched = std::fs::read_to_string(&self.log).unwrap_or_default();
        let control = std::fs::read_to_string(&self.control_log).unwrap_or_default();
        let unexplained = unexplained(&touched, &control);
        assert!(
            unexplained.is_empty(),
            "node1's decoy was touched: {unexplained:?}\n(its log:\n{touched}; the control \
             decoy's:\n{control})"
        );
        mpir_target::testkit::assert_untouched(self.decoy.host_pid);
        assert!(!self.decoy.has_exited(), "node1's decoy ended");
    }
}

/// The lines of a decoy's log that say it was touched: every "traced by" line, and every
/// "stopped for N ms" line that the control decoy's log does not match with a stall of its
/// own of about the same length (within 10 %, or 100 ms): a stall of the whole machine.
pub fn unexplained(log: &str, control: &str) -> Vec<String> {
    let stall = |l: &str| -> Option<u64> {
        l.strip_prefix("stopped for ")?
            .strip_suffix(" ms")?
            .parse()
            .ok()
    };
    let stalls: Vec<u64> = control.lines().filter_map(stall).collect();
    log.lines()
        .filter(|l| match stall(l) {
            Some(n) => !stalls.iter().any(|&c| c.abs_diff(n) <= (n / 10).max(100)),
            None => !l.trim().is_empty(),
        })
        .map(str::to_string)
        .collect()
}

/// The running job: orterun in node1, ranks on other nodes (`hosts`: (node, ranks)); a decoy
/// in node1 with the pid of one of them.
pub struct Job {
    pub orterun: NodeChild,
    pub out: Arc<Mutex<String>>,
    pub ranks: Vec<Printed>,
    pub decoy: NodeDecoy,
    pub exe: PathBuf,
    /// orterun's standard error (its daemons' too: the agents' notes and failures).
    pub err: PathBuf,
}

impl Job {
    pub fn start(cluster: &Cluster, dir: &Path, hosts: &[(usize, u32)]) -> Option<Job> {
        let exe = build_deadlock(dir)?;
        let decoy = build_decoy(dir)?;
        let Ring {
            orterun,
            ranks,
            exe,
            out,
            err,
            ..
        } = Ring::start_program(cluster, dir, hosts, &exe)?;
        let decoy = NodeDecoy::start(cluster, &decoy, dir, &ranks);
        Some(Job {
            orterun,
            out,
            ranks,
            decoy,
            exe,
            err,
        })
    }

    /// Nothing was touched: the ranks on their nodes, orterun, the colliding decoy (never
    /// traced or stopped, still running); the job runs on with its output unchanged.
    pub fn assert_untouched(&mut self, cluster: &Cluster) {
        for (rank, pid, host) in &self.ranks {
            let node: usize = host.trim_start_matches("node").parse().unwrap();
            assert!(
                cluster.host_pid(node, *pid).is_some(),
                "rank {rank} is gone"
            );
            cluster.assert_untouched(node, *pid);
        }
        mpir_target::testkit::assert_untouched(self.orterun.host_pid);
        self.decoy.assert_untouched();
        assert!(!self.orterun.has_exited(), "orterun ended");
        assert_eq!(printed(&self.out.lock().unwrap()), self.ranks);
    }
}

/// A command's exit, standard output and standard error, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `mpir queues --json` of a 4-rank [`DEADLOCK_C`] job succeeded and read every rank of
/// `ranks` (in order, with its pid), each with its pending receive of tag 42.
pub fn assert_pending_tag_42_read(o: &Output, ranks: &[Printed]) {
    assert!(o.status.success(), "{}", text(o));
    let doc = super::json_doc(o);
    let read = doc["ranks"].as_array().unwrap();
    let got: Vec<u64> = read.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(got, [0, 1, 2, 3], "{doc:#}");
    for (r, (rank, pid, _)) in read.iter().zip(ranks) {
        assert_eq!(r["rank"], *rank);
        assert_eq!(r["pid"], *pid, "{r:#}");
        assert!(r["error"].is_null(), "rank {rank}: {r:#}");
        assert!(
            r.to_string().contains("\"tag\":42"),
            "rank {rank}'s receive with tag 42 is missing: {r:#}"
        );
    }
}

/// Nothing is left in the token directories' parent `tokens`.
pub fn assert_no_token_left(tokens: &Path) {
    let left: Vec<_> = std::fs::read_dir(tokens)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "token directories left: {left:?}");
}

/// `mpir ARGS` inside node1, bounded.
pub fn mpir_in_node1(cluster: &Cluster, args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "180"])
        .arg(mpir().get_program())
        .args(args);
    cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap()
}

/// A 4-rank MPICH job on node2 and node3 ([`DEADLOCK_C`] built with `mpicc.mpich` in `dir`):
/// `mpiexec.hydra` reaching the nodes through the cluster's ssh, UCX over TCP only (its
/// shared-memory transports cannot cross the nodes' PID namespaces), to run inside node1;
/// and the debug directory of Debian's stripped hydra (`MPIR_HYDRA_DEBUG_DIR`). `None`
/// after a skip without MPICH or that directory.
pub fn hydra_ring(cluster: &Cluster, dir: &Path) -> Option<(Command, String)> {
    if !have("mpicc.mpich") || !have("mpiexec.hydra") {
        skip("MPICH (mpicc.mpich, mpiexec.hydra) is not installed");
        return None;
    }
    let debug = super::stock::hydra_debug_dir()?;
    let src = dir.join("ring.c");
    let exe = dir.join("ring_mpich");
    std::fs::write(&src, DEADLOCK_C).unwrap();
    run(Command::new("mpicc.mpich")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut hydra = Command::new("mpiexec.hydra");
    hydra
        .args(["-launcher", "ssh", "-launcher-exec"])
        .arg(cluster.nsrsh())
        .args(["-hosts", "node2,node3", "-n", "4"])
        .arg(&exe)
        .env("UCX_TLS", "tcp,self")
        .env("UCX_NET_DEVICES", "lo")
        .current_dir(dir);
    Some((hydra, debug))
}
