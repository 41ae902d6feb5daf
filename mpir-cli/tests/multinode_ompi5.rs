//! Open MPI 5's own engine on the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`): the PyPI wheel's `mpirun` (PRRTE's `prterun`, no MPIR at all;
//! `$MPIR_OMPI5_PREFIX`, `scripts/ci-ompi5.sh`), inside node1, runs a job on node2 and node3
//! (its `prted`s started through the cluster's `nsrsh`); `mpir stacks`, `mpir queues` and
//! `mpir deadlock`, inside node1 with no `--agent-launch`, acquire the job through PMIx and
//! have its PMIx server start `mpir agent` on each node as PMIx tool daemons (children of
//! that node's `prted`), which connect back over TLS (pinned certificate, one-time tokens)
//! and read their node's ranks; without the MPI's types, `mpir queues` says so in the same
//! one line as for a local job. Every rank is read; no agent is left on any node, no rank or
//! `prterun` is left traced or stopped, no token file is left, a process of node1 given a
//! rank's pid is never touched, and the job's output is the ranks' own.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::mn::{
    DEADLOCK_C, NodeDecoy, Printed, assert_no_token_left, assert_pending_tag_42_read, gather,
    mpir_in_node1, printed, text, unexplained,
};
use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::{Cluster, NodeChild, StartFailure, start_job};
use mpir_target::testkit::{OMPI5_WHEEL, Wheel, build_decoy, scratch, wait_for};

/// The running job: `prterun` in node1, ranks on node2 and node3, a decoy in node1 with the
/// pid of one of them.
struct Job {
    prterun: NodeChild,
    out: Arc<Mutex<String>>,
    ranks: Vec<Printed>,
    decoy: NodeDecoy,
    /// `prterun`'s standard error (its daemons' too: the agents' notes and failures).
    err: PathBuf,
    /// How much of it a test has looked at already (expected complaints).
    err_seen: usize,
}

impl Job {
    fn start(cluster: &Cluster, wheel: &Wheel, dir: &Path, hosts: &[(usize, u32)]) -> Option<Job> {
        let src = dir.join("mn_deadlock.c");
        std::fs::write(&src, DEADLOCK_C).unwrap();
        let exe = wheel.program(&src, dir, "mn_deadlock")?;
        let decoy_exe = build_decoy(dir)?;
        let total: usize = hosts.iter().map(|(_, n)| *n as usize).sum();
        let err = dir.join("prterun.err");
        // A start the MPI stack itself lost gets one more try (`start_job`).
        let (prterun, out) = start_job("the prterun job", || {
            let mut cmd = cluster.prterun(&wheel.prefix, &[], hosts, &exe, &[]);
            cmd.current_dir(dir);
            let mut wrapped = cluster.run_in(1, &cmd);
            wrapped
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&err).unwrap());
            let mut prterun = cluster.spawn(1, wrapped);
            let out = gather(prterun.child().stdout.take().unwrap());
            let count = || printed(&out.lock().unwrap()).len();
            if wait_for(90, || count() == total || prterun.has_exited()) && count() == total {
                return Ok((prterun, out));
            }
            let why = format!(
                "{}\n{}",
                out.lock().unwrap(),
                std::fs::read_to_string(&err).unwrap_or_default()
            );
            Err(if prterun.has_exited() {
                StartFailure::Ended(why)
            } else {
                StartFailure::Stuck(why)
            })
        });
        let ranks = printed(&out.lock().unwrap());
        let decoy = NodeDecoy::start(cluster, &decoy_exe, dir, &ranks);
        Some(Job {
            prterun,
            out,
            ranks,
            decoy,
            err,
            err_seen: 0,
        })
    }
}

/// The agents (`mpir` processes) running on nodes 1 to 3: (node, node-local pid, parent's
/// command name).
fn agents(cluster: &Cluster) -> Vec<(usize, u32, String)> {
    (1..=3)
        .flat_map(|n| {
            let procs = cluster.processes(n);
            procs
                .iter()
                .filter(|p| p.comm == "mpir")
                .map(|p| {
                    let parent = procs
                        .iter()
                        .find(|q| q.local_pid == p.local_ppid)
                        .map_or_else(String::new, |q| q.comm.clone());
                    (n, p.local_pid, parent)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// No agent left on any node; every rank, `prterun` and node1's decoy untraced, not stopped,
/// running; the job's output is its ranks' lines and nothing else (the daemons' standard
/// output is forwarded to the tool, never into the job's).
fn assert_clean(job: &mut Job, cluster: &Cluster) {
    assert!(
        wait_for(60, || agents(cluster).is_empty()),
        "agents left: {:?}",
        agents(cluster)
    );
    for (rank, pid, host) in &job.ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        assert!(
            cluster.host_pid(node, *pid).is_some(),
            "rank {rank} is gone"
        );
        cluster.assert_untouched(node, *pid);
    }
    mpir_target::testkit::assert_untouched(job.prterun.host_pid);
    assert!(!job.prterun.has_exited(), "prterun ended");
    let out = job.out.lock().unwrap().clone();
    assert_eq!(printed(&out), job.ranks);
    assert_eq!(out.lines().count(), job.ranks.len(), "job output:\n{out}");
    let err = std::fs::read(&job.err).unwrap_or_default();
    let err = String::from_utf8_lossy(err.get(job.err_seen..).unwrap_or_default());
    assert!(!err.contains("error"), "prterun's standard error:\n{err}");
    job.decoy.assert_untouched();
}

#[test]
fn a_decoys_stall_is_the_machines_only_when_the_control_decoy_stalled_alike() {
    let control = "stopped for 4023 ms\nstopped for 1879 ms\n";
    let log = "stopped for 4011 ms\nstopped for 1880 ms\nstopped for 900 ms\ntraced by 12\n";
    assert_eq!(
        unexplained(log, control),
        ["stopped for 900 ms", "traced by 12"]
    );
    assert!(unexplained("", "").is_empty());
}

#[test]
fn stacks_and_queues_inside_node1_read_every_rank_through_prrte_tool_daemons() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let dir = scratch("cli-mn-ompi5");
    let Some(mut job) = Job::start(&cluster, &wheel, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    // Every rank on node2 or node3, none here.
    let hosts: Vec<&str> = job.ranks.iter().map(|(_, _, h)| h.as_str()).collect();
    assert_eq!(
        hosts,
        ["node2", "node2", "node3", "node3"],
        "{:?}",
        job.ranks
    );
    let starter = job.prterun.local_pid.to_string();

    // Stacks, every default: the job is acquired through PMIx and PRRTE's tool daemons are
    // the agents.
    let started = std::time::Instant::now();
    let o = mpir_in_node1(&cluster, &["stacks", "--starter", &starter, "--json"]);
    eprintln!("mpir stacks: {:.2?}", started.elapsed());
    assert!(o.status.success(), "{}", text(&o));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["ranks"], 4, "{doc:#}");
    assert_eq!(doc["coverage"]["read"], 4, "{}", text(&o));
    assert_eq!(doc["coverage"]["complete"], true, "{doc:#}");
    assert_eq!(doc["unreached"].as_array().unwrap().len(), 0, "{doc:#}");
    let nodes = doc["nodes"].as_array().unwrap();
    for f in ["main", "MPI_Recv"] {
        assert!(
            nodes.iter().any(|n| {
                n["function"].as_str().is_some_and(|s| s.contains(f)) && n["ranks"] == "0-3"
            }),
            "no {f} frame for ranks 0-3: {doc:#}"
        );
    }
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("warning"),
        "{}",
        text(&o)
    );
    assert_clean(&mut job, &cluster);

    // An agent PRRTE cannot start (no such program on the nodes): each rank says so, with
    // its node and PRRTE's answer; the job is untouched and goes on, and later requests
    // start agents again.
    let o = mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--starter",
            &starter,
            "--agent-path",
            "/nonexistent/mpir",
            "--agent-timeout",
            "5",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["read"], 0, "{doc:#}");
    let unreached = doc["unreached"].as_array().unwrap();
    assert_eq!(unreached.len(), 4, "{doc:#}");
    for u in unreached {
        let node = if u["rank"].as_u64() < Some(2) {
            "node2"
        } else {
            "node3"
        };
        let why = u["text"].as_str().unwrap();
        assert!(
            why.contains(&format!("on {node}")) && why.contains("PMIx_Spawn"),
            "{u:#}"
        );
    }
    assert!(agents(&cluster).is_empty(), "{:?}", agents(&cluster));
    // prterun says why on its standard error; that is all it says.
    let err = std::fs::read_to_string(&job.err).unwrap_or_default();
    assert!(err.contains("/nonexistent/mpir"), "{err}");
    job.err_seen = err.len();
    assert_clean(&mut job, &cluster);

    // The agents are PRRTE's: while a sampling front end runs, exactly one per node with
    // ranks, each a child of its node's prted, and none on node1.
    let tokens = dir.join("tokens");
    let mut c = Command::new(mpir().get_program());
    c.args([
        "stacks",
        "--starter",
        &starter,
        "--samples",
        "100",
        "--interval",
        "10000",
        "--agent-token-dir",
        &tokens.to_string_lossy(),
    ]);
    let mut wrapped = cluster.run_in(1, &c);
    let log = dir.join("sampling-front-end.log");
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut front = cluster.spawn(1, wrapped);
    let on = |n: usize| agents(&cluster).iter().filter(|a| a.0 == n).count();
    assert!(
        wait_for(120, || on(2) == 1 && on(3) == 1),
        "no agent started on node2 and node3: {:?}\n{}",
        agents(&cluster),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // The front end is node1's only `mpir`.
    let running: Vec<_> = agents(&cluster)
        .into_iter()
        .filter(|&(n, pid, _)| (n, pid) != (1, front.local_pid))
        .collect();
    assert_eq!(running.len(), 2, "{running:?}");
    for (node, pid, parent) in &running {
        assert_eq!(parent, "prted", "node{node}'s agent {pid}: {running:?}");
    }
    // Its tokens were taken (the directory goes once every agent is in), and nothing is on a
    // command line but the directory: the agents' arguments hold no token.
    assert!(
        wait_for(30, || std::fs::read_dir(&tokens)
            .is_ok_and(|d| d.filter_map(Result::ok).count() == 0)),
        "token directories left while the agents serve"
    );
    // The front end killed (SIGKILL) while its agents sample (100 samples 10 s apart): each
    // agent sees its connection hang up and ends at once, mid-request, letting every rank
    // go (it would otherwise sample for 1000 s; neither orterun nor PRRTE ends its tool
    // daemons when the tool that asked for them goes).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let still = agents(&cluster).iter().filter(|a| a.0 != 1).count();
    assert!(
        !front.has_exited() && still == 2,
        "ended before the kill: {:?}\n{}",
        agents(&cluster),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let killed = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(front.host_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_clean(&mut job, &cluster);
    eprintln!(
        "agents gone {:.2?} after the front end was killed",
        killed.elapsed()
    );
    drop(front);

    // Queues without any types (the shipped layouts turned off), every rank on another node:
    // the same one line as for a local job (the agents tell the front end why no reader could
    // be set up, not only in words), naming a node, exit 4, the --types hint.
    let o = mpir_in_node1(
        &cluster,
        &["queues", "--no-shipped-layouts", "--starter", &starter],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert_eq!(err.trim_end().lines().count(), 1, "{}", text(&o));
    assert!(
        err.contains("no rank's message queues can be read")
            && err.contains("libompi_dbg_msgq.so")
            && err.contains("--types")
            && (err.contains("on node2: ") || err.contains("on node3: ")),
        "{}",
        text(&o)
    );
    assert_clean(&mut job, &cluster);

    // Queues with no types given: every rank's pending receive (tag 42) is read by its
    // node's agent, with the shipped 5.0 layouts proven there on each rank.
    let started = std::time::Instant::now();
    let o = mpir_in_node1(
        &cluster,
        &[
            "queues",
            "--starter",
            &starter,
            "--agent-token-dir",
            &tokens.to_string_lossy(),
            "--json",
        ],
    );
    eprintln!("mpir queues: {:.2?}", started.elapsed());
    assert_pending_tag_42_read(&o, &job.ranks);
    assert_no_token_left(&tokens);
    assert_clean(&mut job, &cluster);

    // The deadlock across nodes: one cycle of the four ranks, each wait joined to the call
    // its rank is blocked in (read by the agents with its queues).
    let o = mpir_in_node1(&cluster, &["deadlock", "--json", "--starter", &starter]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["complete"], true, "{doc:#}");
    assert_eq!(
        doc["cycles"][0]["ranks"],
        serde_json::json!([0, 1, 2, 3]),
        "{doc:#}"
    );
    for link in doc["cycles"][0]["chain"].as_array().unwrap() {
        assert_eq!(link["blocked_in"]["call"], "MPI_Recv", "{link}");
    }
    assert_clean(&mut job, &cluster);
    job.prterun.stop();
}

/// A job with a rank on node1 too (`prterun`'s own node, the front end's): that rank is read
/// by the front end itself, the others by agents; the tool daemon PRRTE starts on node1
/// finds no token there and ends at once, saying so.
#[test]
fn a_rank_on_the_front_ends_node_is_read_here_and_its_daemon_ends_quietly() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let dir = scratch("cli-mn-ompi5-mixed");
    let Some(mut job) = Job::start(&cluster, &wheel, &dir, &[(1, 1), (2, 1), (3, 1)]) else {
        return;
    };
    let starter = job.prterun.local_pid.to_string();
    let o = mpir_in_node1(&cluster, &["stacks", "--starter", &starter, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["ranks"], 3, "{doc:#}");
    assert_eq!(doc["coverage"]["read"], 3, "{}", text(&o));
    assert!(
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["function"] == "main" && n["ranks"] == "0-2"),
        "{doc:#}"
    );
    // node1's daemon's note reaches the front end's standard error (PRRTE forwards its tool
    // daemons' output to the tool), or prterun's.
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let noted = || {
        stderr.contains("no token for node node1")
            || std::fs::read_to_string(&job.err)
                .unwrap_or_default()
                .contains("no token for node node1")
    };
    assert!(wait_for(30, noted), "node1's daemon: {}", text(&o));
    assert_clean(&mut job, &cluster);
    job.prterun.stop();
}
