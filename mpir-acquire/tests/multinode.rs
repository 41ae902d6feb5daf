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
//! `inside_node1_*` tests do nothing in a plain run.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::testkit::multinode::{
    Cluster, NodeChild, StartFailure, inner_test, start_job as start_with_retry,
};
use mpir_acquire::{AcquireOptions, Job, RankControl, ToolDaemon, live};
use support::*;

/// Separates the fields of an inner test's argument.
const SEP: char = '\u{1f}';

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(60))
}

/// A rank as it printed itself: (rank, node-local pid, host).
type Printed = (u64, u32, String);

/// The "rank R pid P on HOST" lines of `out`, sorted.
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

/// What the tool inside node1 reported: one line per rank, "MN rank R host H pid P control
/// C local L", and "MN out LINE" for the job's output it read.
#[derive(Debug, Default)]
struct Report {
    ranks: Vec<(Printed, String, bool)>,
    attached: usize,
    job: Option<u64>,
    out: String,
}

/// One word for how a rank was handled.
fn control_word(c: &RankControl) -> &'static str {
    match c {
        RankControl::NotAttached => "NotAttached",
        RankControl::Remote => "Remote",
        RankControl::Attached { .. } => "Attached",
        RankControl::Refused { .. } => "Refused",
        RankControl::Failed { .. } => "Failed",
        _ => "Other",
    }
}

fn report(job: &Job) {
    for r in job.ranks() {
        println!(
            "MN rank {} host {} pid {} control {} local {}",
            r.rank,
            r.host.unwrap_or("?"),
            r.pid,
            control_word(job.control(r.rank)),
            job.locality(r.rank).is_local()
        );
    }
    println!("MN attached {}", job.attached_pids().len());
    if let Some(j) = job.starter.job_id {
        println!("MN job {j}");
    }
}

fn parse_report(stdout: &str) -> Report {
    let mut rep = Report::default();
    for l in stdout.lines() {
        // The harness may print "test NAME ... " before the first line (--nocapture).
        let Some((_, l)) = l.split_once("MN ") else {
            continue;
        };
        if let Some(o) = l.strip_prefix("out ") {
            rep.out.push_str(o);
            rep.out.push('\n');
            continue;
        }
        match l.split_whitespace().collect::<Vec<_>>()[..] {
            ["rank", r, "host", h, "pid", p, "control", c, "local", local] => rep.ranks.push((
                (r.parse().unwrap(), p.parse().unwrap(), h.to_string()),
                c.to_string(),
                local == "true",
            )),
            ["attached", n] => rep.attached = n.parse().unwrap(),
            ["job", j] => rep.job = j.parse().ok(),
            _ => panic!("bad report line {l:?}"),
        }
    }
    rep
}

/// Runs test `test` of this binary inside node1 with `arg`; its report (its own assertions
/// passed).
fn inside_node1(cluster: &Cluster, test: &str, arg: &str, envs: &Command) -> Report {
    let mut c = cluster.this_test_in(1, test, arg);
    for (k, v) in envs.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    let out = c
        .stdin(Stdio::null())
        .output()
        .expect("run the test in node1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{test} inside node1 failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    parse_report(&stdout)
}

/// The job's program, compiled with Open MPI's wrapper; `None` after a skip.
fn program(dir: &Path) -> Option<PathBuf> {
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
fn check_table(cluster: &Cluster, rep: &Report, ranks: &[Printed], hosts: &[&str]) {
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
fn assert_job_gone(cluster: &Cluster) {
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
fn start_job(
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
struct Trap {
    decoy: NodeChild,
    rank: Printed,
    log: PathBuf,
}

impl Trap {
    fn set(cluster: &Cluster, dir: &Path, ranks: &[Printed]) -> Option<Trap> {
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
    fn check(&self) {
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
fn attach_from_node1(
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

/// The stand-in tool daemon: records where it runs (host name, its pid and its parent's
/// command inside its node, its second argument, the node's `mn_deadlock` pids) in
/// `$1/daemon.<host>.<pid>.txt`, then lingers.
const TOOL_DAEMON: &str = r#"#!/bin/sh
i=0
while [ $i -lt 100 ] && [ "$(pgrep -x mn_deadlock | wc -l)" -lt 2 ]; do sleep 0.1; i=$((i+1)); done
f="$1/daemon.$(hostname).$$.txt"
{ echo "host=$(hostname)"; echo "pid=$$"; echo "parent=$(cat /proc/$PPID/comm)"; echo "arg=$2"
  echo "ranks=$(pgrep -x mn_deadlock | sort -n | tr '\n' ' ')"; } > "$f.tmp" && mv "$f.tmp" "$f"
exec sleep 120
"#;

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

/// Exactly one daemon per node with ranks (node2, node3), inside that node, started by its
/// orted, seeing that node's ranks under the table's pids.
fn check_daemons(dir: &Path, ranks: &[Printed]) {
    let mut daemons: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("daemon.") && n.ends_with(".txt"))
        .collect();
    daemons.sort();
    assert_eq!(daemons.len(), 2, "{daemons:?}");
    let mut nodes = BTreeSet::new();
    for name in &daemons {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        let host = field("host");
        assert!(
            name.starts_with(&format!("daemon.{host}.")),
            "{name}: {text}"
        );
        assert_eq!(field("parent"), "orted", "{text}");
        assert_eq!(field("arg"), "two words", "{text}");
        let seen: Vec<u32> = field("ranks")
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        let want: Vec<u32> = ranks
            .iter()
            .filter(|(_, _, h)| *h == host)
            .map(|(_, p, _)| *p)
            .collect();
        assert_eq!(
            seen, want,
            "{host}'s daemon sees other ranks than the table: {text}"
        );
        nodes.insert(host);
    }
    assert_eq!(
        nodes,
        BTreeSet::from(["node2".to_string(), "node3".to_string()])
    );
}

/// Writes the stand-in tool daemon into `dir`.
fn tool_daemon(dir: &Path) -> PathBuf {
    let daemon = dir.join("tooldaemon.sh");
    std::fs::write(&daemon, TOOL_DAEMON).unwrap();
    run(Command::new("chmod").arg("755").arg(&daemon)).unwrap();
    daemon
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

/// Cancels this cluster's jobs of one name when dropped (`scancel` from the host, with the
/// cluster's `SLURM_CONF`: the single-node CI Slurm's is the one exported).
struct ClusterJobs {
    name: String,
    conf: PathBuf,
}

impl ClusterJobs {
    fn new(cluster: &Cluster, tag: &str) -> Option<ClusterJobs> {
        let Some(conf) = cluster.slurm_conf() else {
            skip("the simulated cluster runs no Slurm (MPIR_MULTINODE_SLURM=0, or not installed)");
            return None;
        };
        Some(ClusterJobs {
            name: format!("mpir-mn-{}-{tag}", std::process::id()),
            conf: conf.to_path_buf(),
        })
    }

    /// The job id of this name (`squeue` on the host).
    fn job_id(&self) -> u64 {
        let out = run(Command::new("timeout")
            .args(["-s", "KILL", "20", "squeue", "-h", "-o", "%i", "-n"])
            .arg(&self.name)
            .env("SLURM_CONF", &self.conf))
        .unwrap_or_else(|e| panic!("{e}"));
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("squeue said {out:?}"))
    }
}

impl ClusterJobs {
    /// Cancels the jobs of this name and waits (up to 30 s) until `squeue` lists none, so
    /// that a new job of the name is the only one [`ClusterJobs::job_id`] finds.
    fn cancel_and_wait(&self) {
        self.cancel();
        let listed = || {
            Command::new("timeout")
                .args(["-s", "KILL", "20", "squeue", "-h", "-o", "%i", "-n"])
                .arg(&self.name)
                .env("SLURM_CONF", &self.conf)
                .output()
                .map(|o| !o.stdout.trim_ascii().is_empty())
                .unwrap_or(false)
        };
        wait_for(30, || !listed());
    }

    fn cancel(&self) {
        let _ = Command::new("timeout")
            .args(["-s", "KILL", "20", "scancel"])
            .arg(format!("--name={}", self.name))
            .env("SLURM_CONF", &self.conf)
            .status();
    }
}

impl Drop for ClusterJobs {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// `srun` arguments of a 6-rank Open MPI job on node2..4, two ranks each.
fn srun_args(jobs: &ClusterJobs, program: &Path) -> Vec<String> {
    vec![
        format!("--job-name={}", jobs.name),
        "-N".into(),
        "3".into(),
        "--ntasks-per-node=2".into(),
        "--mpi=pmix".into(),
        program.display().to_string(),
    ]
}

const SIX: [&str; 6] = ["node2", "node2", "node3", "node3", "node4", "node4"];

/// srun inside node1 (no slurmd there), its tasks on node2..4, until all six printed (a
/// start the MPI stack itself lost gets one more try: [`start_with_retry`]).
fn start_srun(
    cluster: &Cluster,
    dir: &Path,
    jobs: &ClusterJobs,
    program: &Path,
) -> Option<(NodeChild, Output)> {
    let args = srun_args(jobs, program);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.srun(&args)?; // None: the cluster runs no Slurm (skipped there)
    Some(start_with_retry("the srun job", || {
        let mut cmd = cluster.srun(&args).expect("srun was found above");
        cmd.current_dir(dir);
        let mut wrapped = cluster.run_in(1, &cmd);
        let err = std::fs::File::create(dir.join("srun.err")).unwrap();
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut srun = cluster.spawn(1, wrapped);
        let out = Output::of(srun.child());
        let up = wait_for(90, || printed(&out.text()).len() == 6 || srun.has_exited())
            && printed(&out.text()).len() == 6;
        if up {
            return Ok((srun, out));
        }
        let why = format!(
            "{}\n{}",
            out.text(),
            std::fs::read_to_string(dir.join("srun.err")).unwrap_or_default()
        );
        let ended = srun.has_exited();
        drop(srun);
        jobs.cancel_and_wait();
        Err(if ended {
            StartFailure::Ended(why)
        } else {
            StartFailure::Stuck(why)
        })
    }))
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
