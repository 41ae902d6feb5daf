//! The job under test and the checks on it: the program, orterun started inside node1, the
//! table checked against what the ranks printed, the decoy in node1 with a remote rank's pid,
//! the attach from node1, and nothing of the job left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::testkit::multinode::{
    Cluster, NodeChild, StartFailure, start_job as start_with_retry,
};

use crate::report::{Printed, Report, inside_node1, printed};
use crate::support::*;

/// The job's program, compiled with Open MPI's wrapper; `None` after a skip.
pub(crate) fn program(dir: &Path) -> Option<PathBuf> {
    if !have("orterun") || !have("mpicc.openmpi") {
        skip("Open MPI (orterun, mpicc.openmpi) is not installed");
        return None;
    }
    let exe = dir.join("mn_deadlock");
    run(Command::new("mpicc.openmpi")
        .arg("-g")
        .arg(fixtures().join("mn_deadlock.c"))
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("{e}"));
    Some(exe)
}

/// The checks both modes share: the table is exactly what the ranks printed (node-local pids,
/// two on node2 and two on node3), every rank remote and not attached, and each is, on its
/// node, the job's program, untouched.
pub(crate) fn check_table(cluster: &Cluster, rep: &Report, ranks: &[Printed], hosts: &[&str]) {
    let table: Vec<Printed> = rep.ranks.iter().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(table, ranks, "the table is not what the ranks printed");
    let got: Vec<&str> = table.iter().map(|(_, _, h)| h.as_str()).collect();
    assert_eq!(got, hosts);
    for ((rank, pid, host), control, local) in &rep.ranks {
        assert_eq!(control, "Remote", "rank {rank}");
        assert!(!local, "rank {rank} on {host} was taken for node1's");
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        let proc = cluster
            .processes(node)
            .into_iter()
            .find(|p| p.local_pid == *pid)
            .unwrap_or_else(|| panic!("rank {rank}: no pid {pid} on {host}"));
        assert_eq!(proc.comm, "mn_deadlock", "rank {rank} on {host}");
        cluster.assert_untouched(node, *pid);
    }
    assert_eq!(rep.attached, 0);
}

/// After the job is stopped: nothing of it is left on node2..N (within 15 s).
pub(crate) fn assert_job_gone(cluster: &Cluster) {
    let left = |c: &Cluster| -> Vec<(usize, String)> {
        (2..=c.nodes())
            .flat_map(|n| c.processes(n).into_iter().map(move |p| (n, p.comm)))
            .filter(|(_, comm)| {
                ["mn_deadlock", "orted", "tooldaemon.sh", "sleep"].contains(&comm.as_str())
            })
            .collect()
    };
    assert!(
        wait_for(15, || left(cluster).is_empty()),
        "left running: {:?}",
        left(cluster)
    );
}

/// orterun inside node1, ranks 0,1 on node2 and 2,3 on node3, until all four printed (a
/// start the MPI stack itself lost gets one more try: [`start_with_retry`]).
pub(crate) fn start_job(
    cluster: &Cluster,
    dir: &Path,
    program: &Path,
    options: &[&str],
    hosts: &[(usize, u32)],
) -> (NodeChild, Output) {
    let n: u32 = hosts.iter().map(|(_, slots)| slots).sum();
    let n = n as usize;
    start_with_retry("the orterun job", || {
        let mut cmd = cluster.orterun(options, hosts, program, &[]);
        cmd.current_dir(dir);
        let mut wrapped = cluster.run_in(1, &cmd);
        let err = std::fs::File::create(dir.join("orterun.err")).unwrap();
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut orterun = cluster.spawn(1, wrapped);
        let out = Output::of(orterun.child());
        if wait_for(60, || {
            printed(&out.text()).len() == n || orterun.has_exited()
        }) && printed(&out.text()).len() == n
        {
            return Ok((orterun, out));
        }
        let why = format!(
            "{}\n{}",
            out.text(),
            std::fs::read_to_string(dir.join("orterun.err")).unwrap_or_default()
        );
        Err(if orterun.has_exited() {
            StartFailure::Ended(why)
        } else {
            StartFailure::Stuck(why)
        })
    })
}

/// The trap: a process in node1 (a decoy that records any tracer or stop) whose pid is a
/// remote rank's (the first rank pid free in node1). A tool that took the table's pid for a
/// local one would trace it.
pub(crate) struct Trap {
    decoy: NodeChild,
    rank: Printed,
    log: PathBuf,
}

impl Trap {
    pub(crate) fn set(cluster: &Cluster, dir: &Path, ranks: &[Printed]) -> Option<Trap> {
        let decoy = mpir_target::testkit::build_decoy(dir)?;
        let log = dir.join("decoy.log");
        for rank in ranks {
            let mut d = Command::new(&decoy);
            d.arg(&log);
            if let Some(c) = cluster.spawn_with_pid(1, rank.1, &d) {
                eprintln!(
                    "ranks {ranks:?}; node1's decoy has pid {} (host pid {}), as rank {} on {}",
                    c.local_pid, c.host_pid, rank.0, rank.2
                );
                return Some(Trap {
                    decoy: c,
                    rank: rank.clone(),
                    log,
                });
            }
        }
        panic!(
            "no rank pid of {ranks:?} could be given to a decoy in node1: {:?}",
            cluster.processes(1)
        )
    }

    /// The decoy has the pid of a rank on another node, was never traced or stopped, and
    /// still runs.
    pub(crate) fn check(&self) {
        assert_eq!(self.decoy.node, 1);
        assert_eq!(self.decoy.local_pid, self.rank.1);
        assert_ne!(self.rank.2, "node1");
        let touched = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            touched.is_empty(),
            "the colliding decoy was touched: {touched}"
        );
        mpir_target::testkit::assert_untouched(self.decoy.host_pid);
        assert!(is_running(self.decoy.host_pid));
    }
}

/// Attaches from node1 to `starter` (running in node1, its ranks printed): the table is what
/// the ranks printed, on `hosts`, all remote and untouched, the pid-colliding decoy in node1
/// untouched, the job running on; then stops it, leaving nothing behind. The report.
pub(crate) fn attach_from_node1(
    cluster: &Cluster,
    dir: &Path,
    mut starter: NodeChild,
    out: &Output,
    hosts: &[&str],
) -> Option<Report> {
    let ranks = printed(&out.text());
    let trap = Trap::set(cluster, dir, &ranks)?;
    let rep = inside_node1(
        cluster,
        "inside_node1_attach",
        &starter.local_pid.to_string(),
        &Command::new("true"),
    );
    check_table(cluster, &rep, &ranks, hosts);
    trap.check();
    mpir_target::testkit::assert_untouched(starter.host_pid);
    // The job runs on, undisturbed; stopped like a user would, it leaves nothing behind.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!starter.has_exited(), "the job ended after the attach");
    assert_eq!(printed(&out.text()), ranks, "{}", out.text());
    starter.stop();
    drop(trap);
    assert_job_gone(cluster);
    Some(rep)
}
