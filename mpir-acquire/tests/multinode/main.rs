//! Jobs across the simulated multi-node cluster (`scripts/ci-multinode.sh`, `$MPIR_MULTINODE`):
//! Open MPI 4.1.4's `orterun` started inside node1 (the tool's node) with its ranks on node2
//! and node3, and the tool running inside node1 too — it sees what a tool sees on a real
//! cluster: the table's pids are local to each rank's node, and node1's pid of the same
//! number is a different process (a decoy made to collide with a rank's pid here). Attach
//! mode: every rank is reported on its node with its node-local pid, as remote, and nothing
//! on any node is traced or stopped (the colliding decoy included). Launch mode with MPIR
//! tool daemons: exactly one daemon per node with ranks, inside that node, a child of its
//! orted, seeing that node's ranks under the table's pids. The job's output stays intact and
//! nothing of it is left running.
//!
//! The tool side runs inside node1 as this same test binary (`Cluster::this_test_in`): the
//! `inside_node1_*` tests do nothing in a plain run. They stay at the root of the binary, so
//! their names are what the outer tests run with `--exact`.
//!
//! The tests are here; their helpers by concern: `report` (what the ranks print and the tool
//! reports, and running a test inside node1), `job` (the orterun job, the decoy, the attach
//! and its checks), `daemons` (the stand-in tool daemon) and `slurm` (srun jobs).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

#[path = "../support/mod.rs"]
mod support;

mod daemons;
mod job;
mod report;
mod slurm;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::testkit::multinode::{Cluster, inner_test};
use mpir_acquire::{RankControl, ToolDaemon, live};

use daemons::{check_daemons, tool_daemon};
use job::{Trap, assert_job_gone, attach_from_node1, check_table, program, start_job};
use report::{Printed, SEP, inside_node1, options, printed, report};
use slurm::{ClusterJobs, SIX, srun_args, start_srun};
use support::*;

#[test]
fn open_mpi_attach_from_node1_reports_remote_ranks_and_touches_nothing() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("mn-attach");
    let Some(program) = program(&dir) else {
        return;
    };
    let (orterun, out) = start_job(&cluster, &dir, &program, &[], &[(2, 2), (3, 2)]);
    wait_spawned(orterun.host_pid);
    attach_from_node1(
        &cluster,
        &dir,
        orterun,
        &out,
        &["node2", "node2", "node3", "node3"],
    );
}

/// ORTE's tree spawn (`--mca routed_radix 1`): orterun starts node2's orted, which starts
/// node3's through `nsrsh` from inside node2, and so on — the ssh stand-in works from any node.
#[test]
fn open_mpi_tree_spawn_over_three_nodes_attach_from_node1() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    if cluster.nodes() < 4 {
        skip("the tree spawn test needs node4 (MPIR_MULTINODE_NODES >= 4)");
        return;
    }
    let dir = scratch("mn-tree");
    let Some(program) = program(&dir) else {
        return;
    };
    let (orterun, out) = start_job(
        &cluster,
        &dir,
        &program,
        &["--mca", "routed_radix", "1"],
        &[(2, 1), (3, 1), (4, 2)],
    );
    // The orteds of node2 and node3 each run an nsrsh to the next node.
    for node in [2, 3] {
        let procs = cluster.processes(node);
        assert!(
            procs.iter().any(|p| p.comm == "nsrsh"),
            "node{node} started no orted: {procs:?}"
        );
    }
    wait_spawned(orterun.host_pid);
    attach_from_node1(
        &cluster,
        &dir,
        orterun,
        &out,
        &["node2", "node3", "node4", "node4"],
    );
}

/// Inside node1 (run by the tests above): attach to orterun (its pid is the argument) and
/// report the job. Nothing to do in a plain run.
#[test]
fn inside_node1_attach() {
    let Some(arg) = inner_test("inside_node1_attach") else {
        return;
    };
    let pid: u32 = arg.parse().unwrap();
    let acquired = live::attach(pid, options()).unwrap();
    let job = acquired.job().clone();
    drop(acquired);
    assert!(job.attached_pids().is_empty(), "{:?}", job.control);
    for r in job.ranks() {
        assert_eq!(job.control(r.rank), &RankControl::Remote, "rank {}", r.rank);
    }
    report(&job);
}

/// A job with ranks on node1 too (orterun forks them there itself) and on node2/node3, a
/// decoy in node1 with a remote rank's pid: held from node1, only node1's two ranks are
/// attached (proven local), the remote ones and the decoy are never touched, and once
/// released every process runs on.
#[test]
fn open_mpi_mixed_job_held_from_node1_takes_only_node1_ranks() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("mn-mixed");
    let Some(program) = program(&dir) else {
        return;
    };
    let (mut orterun, out) = start_job(&cluster, &dir, &program, &[], &[(1, 2), (2, 1), (3, 1)]);
    wait_spawned(orterun.host_pid);
    let ranks = printed(&out.text());
    let hosts: Vec<&str> = ranks.iter().map(|(_, _, h)| h.as_str()).collect();
    assert_eq!(hosts, ["node1", "node1", "node2", "node3"]);
    let remote: Vec<Printed> = ranks.iter().filter(|r| r.2 != "node1").cloned().collect();
    let trap = Trap::set(&cluster, &dir, &remote).unwrap();
    let rep = inside_node1(
        &cluster,
        "inside_node1_hold",
        &orterun.local_pid.to_string(),
        &Command::new("true"),
    );
    let table: Vec<Printed> = rep.ranks.iter().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(table, ranks);
    for ((rank, _, host), control, local) in &rep.ranks {
        let want = if host == "node1" {
            "Attached"
        } else {
            "Remote"
        };
        assert_eq!(control, want, "rank {rank} on {host}");
        assert_eq!(*local, host == "node1", "rank {rank} on {host}");
    }
    assert_eq!(rep.attached, 2);
    trap.check();
    for (_, pid, host) in &ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, *pid);
    }
    mpir_target::testkit::assert_untouched(orterun.host_pid);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!orterun.has_exited(), "the job ended after the hold");
    assert_eq!(printed(&out.text()), ranks);
    orterun.stop();
    drop(trap);
    assert_job_gone(&cluster);
}

/// Inside node1 (run by the test above): attach to orterun holding the ranks (this node's
/// only), check that they are stopped while held, release, report.
#[test]
fn inside_node1_hold() {
    let Some(arg) = inner_test("inside_node1_hold") else {
        return;
    };
    let pid: u32 = arg.parse().unwrap();
    let mut acquired = live::attach(pid, options().with_hold(true)).unwrap();
    let job = acquired.job().clone();
    let held = job.attached_pids();
    for &p in &held {
        let state = status_field(p, "State:");
        assert!(
            state.starts_with('t') || state.starts_with('T'),
            "held rank {p}: {state}"
        );
    }
    acquired.release().unwrap();
    drop(acquired);
    for &p in &held {
        assert_untouched(p);
    }
    report(&job);
}

#[test]
fn open_mpi_launch_from_node1_with_one_tool_daemon_per_node() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("mn-launch");
    let Some(program) = program(&dir) else {
        return;
    };
    let daemon = tool_daemon(&dir);
    let cmd = cluster.orterun(&[], &[(2, 2), (3, 2)], &program, &[]);
    let mut fields = vec![daemon.display().to_string(), dir.display().to_string()];
    fields.push(cmd.get_program().to_string_lossy().into_owned());
    fields.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let arg = fields.join(&SEP.to_string());
    let rep = inside_node1(
        &cluster,
        "inside_node1_launch_with_tool_daemons",
        &arg,
        &cmd,
    );
    let ranks = printed(&rep.out);
    assert_eq!(ranks.len(), 4, "{}", rep.out);
    // The ranks are stopped with orterun by now: check the table against what they printed.
    let table: Vec<Printed> = rep.ranks.iter().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(table, ranks);
    for (_, control, local) in &rep.ranks {
        assert_eq!(control, "Remote");
        assert!(!local);
    }
    check_daemons(&dir, &ranks);
    assert_job_gone(&cluster);
}

/// Attach mode with the tool daemon extension (Open MPI 4: through the attach FIFO, the job
/// running): one daemon per node with ranks, as in launch mode; the ranks are read as a
/// running job's and left untouched.
#[test]
fn open_mpi_attach_from_node1_starts_one_tool_daemon_per_node() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("mn-attach-daemons");
    let Some(program) = program(&dir) else {
        return;
    };
    let daemon = tool_daemon(&dir);
    let (mut orterun, out) = start_job(&cluster, &dir, &program, &[], &[(2, 2), (3, 2)]);
    wait_spawned(orterun.host_pid);
    let ranks = printed(&out.text());
    let arg = [
        orterun.local_pid.to_string(),
        daemon.display().to_string(),
        dir.display().to_string(),
    ]
    .join(&SEP.to_string());
    let rep = inside_node1(
        &cluster,
        "inside_node1_attach_with_tool_daemons",
        &arg,
        &Command::new("true"),
    );
    check_table(
        &cluster,
        &rep,
        &ranks,
        &["node2", "node2", "node3", "node3"],
    );
    check_daemons(&dir, &ranks);
    mpir_target::testkit::assert_untouched(orterun.host_pid);
    assert!(!orterun.has_exited(), "the job ended after the attach");
    assert_eq!(printed(&out.text()), ranks);
    orterun.stop();
    assert_job_gone(&cluster);
}

/// Inside node1 (run by the test above): attach to orterun asking for tool daemons
/// (argument: orterun's pid, the daemon, its output directory), wait for both daemons' files,
/// report.
#[test]
fn inside_node1_attach_with_tool_daemons() {
    let Some(arg) = inner_test("inside_node1_attach_with_tool_daemons") else {
        return;
    };
    let mut f = arg.split(SEP);
    let pid: u32 = f.next().unwrap().parse().unwrap();
    let (daemon, dir) = (f.next().unwrap(), PathBuf::from(f.next().unwrap()));
    let o = options().with_tool_daemon(ToolDaemon::new(
        daemon,
        [dir.display().to_string(), "two words".into()],
    ));
    let acquired = live::attach(pid, o).unwrap();
    let job = acquired.job().clone();
    drop(acquired);
    assert!(job.attached_pids().is_empty(), "{:?}", job.control);
    let files = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("daemon.") && n.ends_with(".txt"))
                    .count()
            })
            .unwrap_or(0)
    };
    assert!(
        wait_for(30, || files() >= 2),
        "the tool daemons did not start"
    );
    report(&job);
}

/// Inside node1 (run by the test above): launch orterun under the tool with the tool daemon
/// extension (argument: daemon, output directory, orterun's argv), let the job run, wait for
/// both daemons' files, report the job and its output, stop orterun.
#[test]
fn inside_node1_launch_with_tool_daemons() {
    let Some(arg) = inner_test("inside_node1_launch_with_tool_daemons") else {
        return;
    };
    let mut f = arg.split(SEP);
    let (daemon, dir) = (f.next().unwrap(), PathBuf::from(f.next().unwrap()));
    let mut cmd = Command::new(f.next().unwrap());
    cmd.args(f)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let o = options().with_tool_daemon(ToolDaemon::new(
        daemon,
        [dir.display().to_string(), "two words".into()],
    ));
    let mut acquired = live::launch(cmd, o).unwrap();
    let mut orterun = acquired.take_child().unwrap();
    let job = acquired.job().clone();
    drop(acquired);
    assert!(job.attached_pids().is_empty(), "{:?}", job.control);
    let out = Output::of(&mut orterun);
    let daemons = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("daemon.") && n.ends_with(".txt"))
                    .count()
            })
            .unwrap_or(0)
    };
    let started = wait_for(60, || printed(&out.text()).len() == 4 && daemons() >= 2);
    report(&job);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(daemons(), 2, "the tool daemons");
    assert!(
        orterun.try_wait().unwrap().is_none(),
        "orterun ended: {}",
        out.text()
    );
    mpir_target::testkit::stop_launcher(&mut orterun);
    for l in out.text().lines() {
        println!("MN out {l}");
    }
    assert!(started, "ranks or daemons missing: {}", out.text());
}

#[test]
fn srun_attach_from_node1_reports_remote_tasks_and_touches_nothing() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(jobs) = ClusterJobs::new(&cluster, "attach") else {
        return;
    };
    let dir = scratch("mn-srun-attach");
    let Some(program) = program(&dir) else {
        return;
    };
    let Some((srun, out)) = start_srun(&cluster, &dir, &jobs, &program) else {
        return;
    };
    let job = jobs.job_id();
    let rep = attach_from_node1(&cluster, &dir, srun, &out, &SIX).unwrap();
    assert_eq!(rep.job, Some(job), "srun's job id");
}

/// What an agent launch through Slurm will do: a step beside the running job
/// (`srun --jobid=J --overlap --ntasks-per-node=1`), from node1, runs one task on each of
/// the job's nodes, inside that node, where it sees exactly that node's ranks under the pids
/// the ranks printed.
#[test]
fn srun_step_beside_the_job_runs_one_task_per_node_seeing_its_ranks() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(jobs) = ClusterJobs::new(&cluster, "beside") else {
        return;
    };
    let dir = scratch("mn-srun-beside");
    let Some(program) = program(&dir) else {
        return;
    };
    let Some((mut srun, out)) = start_srun(&cluster, &dir, &jobs, &program) else {
        return;
    };
    let ranks = printed(&out.text());
    let job = jobs.job_id().to_string();
    let step = cluster
        .srun(&[
            &format!("--jobid={job}"),
            "--overlap",
            "--ntasks-per-node=1",
            "-N",
            "3",
            "/bin/sh",
            "-c",
            "echo step $(hostname) $(pgrep -x mn_deadlock | sort -n | tr '\\n' ' ')",
        ])
        .unwrap();
    let got = run(cluster.run_in(1, &step).stdin(Stdio::null())).unwrap_or_else(|e| panic!("{e}"));
    let mut lines: Vec<&str> = got.lines().filter(|l| l.starts_with("step ")).collect();
    lines.sort_unstable();
    let want: Vec<String> = ["node2", "node3", "node4"]
        .iter()
        .map(|n| {
            let pids: Vec<String> = ranks
                .iter()
                .filter(|(_, _, h)| h == n)
                .map(|(_, p, _)| p.to_string())
                .collect();
            format!("step {n} {}", pids.join(" "))
        })
        .collect();
    assert_eq!(lines, want, "{got}");
    for (rank, pid, host) in &ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        assert!(cluster.host_pid(node, *pid).is_some(), "rank {rank}");
        cluster.assert_untouched(node, *pid);
    }
    assert!(!srun.has_exited());
    assert_eq!(printed(&out.text()), ranks);
    srun.stop();
    drop(jobs);
    assert_job_gone(&cluster);
}

#[test]
fn srun_launch_from_node1_releases_every_remote_task() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(jobs) = ClusterJobs::new(&cluster, "launch") else {
        return;
    };
    let dir = scratch("mn-srun-launch");
    let Some(program) = program(&dir) else {
        return;
    };
    let Some(cmd) = cluster.srun(&[]) else {
        return;
    };
    let mut fields = vec![dir.display().to_string(), "srun".to_string()];
    fields.extend(srun_args(&jobs, &program));
    let rep = inside_node1(
        &cluster,
        "inside_node1_launch",
        &fields.join(&SEP.to_string()),
        &cmd,
    );
    let ranks = printed(&rep.out);
    assert_eq!(ranks.len(), 6, "{}", rep.out);
    let table: Vec<Printed> = rep.ranks.iter().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(table, ranks);
    let hosts: Vec<&str> = table.iter().map(|(_, _, h)| h.as_str()).collect();
    assert_eq!(hosts, SIX);
    for (_, control, local) in &rep.ranks {
        assert_eq!(control, "Remote");
        assert!(!local);
    }
    assert_eq!(rep.attached, 0);
    drop(jobs);
    assert_job_gone(&cluster);
}

/// Inside node1 (run by the test above): launch the command (argument: working directory,
/// then argv) under the tool and let go at once: every task, stopped by its slurmstepd at
/// the loader's entry on its own node, must be released and print (which needs all six
/// running: they exchange tokens first). Reports the job and its output, stops the job.
#[test]
fn inside_node1_launch() {
    let Some(arg) = inner_test("inside_node1_launch") else {
        return;
    };
    let mut f = arg.split(SEP);
    let dir = PathBuf::from(f.next().unwrap());
    let mut cmd = Command::new(f.next().unwrap());
    cmd.args(f)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut acquired = live::launch(cmd, options()).unwrap();
    let mut starter = acquired.take_child().unwrap();
    let job = acquired.job().clone();
    drop(acquired);
    assert!(job.attached_pids().is_empty(), "{:?}", job.control);
    let out = Output::of(&mut starter);
    let started = wait_for(90, || printed(&out.text()).len() == job.len());
    report(&job);
    mpir_target::testkit::stop_launcher(&mut starter);
    for l in out.text().lines() {
        println!("MN out {l}");
    }
    assert!(started, "not every task ran: {}", out.text());
}
