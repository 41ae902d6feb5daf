//! Open MPI 4's own engine on the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`): `orterun`, inside node1, runs a job on node2 and node3; `mpir stacks`
//! and `mpir queues`, inside node1 with no `--agent-launch`, have `orterun` start `mpir
//! agent` on each node as its MPIR tool daemons, which connect back over TLS (pinned
//! certificate, one-time tokens) and read their node's ranks. Every rank is read; no agent
//! is left on any node, no rank or `orterun` is left traced or stopped, no token file is
//! left, and the job's output is the ranks' own.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::process::{Command, Stdio};

use common::mn::{
    Job, assert_no_token_left, assert_pending_tag_42_read, mpir_in_node1, printed, text,
};
use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::Cluster;
use mpir_target::testkit::{scratch, wait_for};

/// No agent left on any node; every rank and orterun untraced, not stopped, running; the
/// job's output is its ranks' lines and nothing else (the daemons' standard output is
/// orterun's: an agent that printed there would show).
fn assert_clean(job: &mut Job, cluster: &Cluster) {
    let agents = || -> Vec<(usize, u32, String)> {
        (1..=3)
            .flat_map(|n| {
                cluster
                    .processes(n)
                    .into_iter()
                    .filter(|p| p.comm == "mpir")
                    .map(move |p| (n, p.local_pid, p.comm))
            })
            .collect()
    };
    assert!(
        wait_for(60, || agents().is_empty()),
        "agents left: {:?}",
        agents()
    );
    for (rank, pid, host) in &job.ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        assert!(
            cluster.host_pid(node, *pid).is_some(),
            "rank {rank} is gone"
        );
        cluster.assert_untouched(node, *pid);
    }
    mpir_target::testkit::assert_untouched(job.orterun.host_pid);
    assert!(!job.orterun.has_exited(), "orterun ended");
    let out = job.out.lock().unwrap().clone();
    assert_eq!(printed(&out), job.ranks);
    assert_eq!(out.lines().count(), job.ranks.len(), "job output:\n{out}");
    // Every agent started with the arguments it was given and ended well (a daemon's
    // errors reach orterun's standard error).
    let err = std::fs::read_to_string(&job.err).unwrap_or_default();
    assert!(!err.contains("error"), "orterun's standard error:\n{err}");
    // node1's process given a rank's pid was never touched.
    job.decoy.assert_untouched();
}

#[test]
fn stacks_and_queues_inside_node1_read_every_rank_through_orterun_tool_daemons() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-orte");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();

    // Stacks, every default: orterun is detected, its daemons are the agents.
    let started = std::time::Instant::now();
    let o = mpir_in_node1(&cluster, &["stacks", "--starter", &starter, "--json"]);
    eprintln!("mpir stacks: {:.2?}", started.elapsed());
    assert!(o.status.success(), "{}", text(&o));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["ranks"], 4, "{doc:#}");
    assert_eq!(doc["coverage"]["read"], 4, "{}", text(&o));
    assert_eq!(doc["coverage"]["complete"], true, "{doc:#}");
    assert_eq!(doc["unreached"].as_array().unwrap().len(), 0, "{doc:#}");
    // Every rank's stack reaches main and the receive it waits in.
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

    // Queues, the token directory chosen: every rank's pending receive (tag 42) is read
    // by its node's agent, with the shipped layouts (stock Open MPI, no types given); the
    // directory is left empty.
    let tokens = dir.join("tokens");
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

    // The front end killed (SIGKILL) while its agents sample (100 samples 10 s apart): each
    // agent sees its connection hang up and ends at once, mid-request, letting every rank
    // go (it would otherwise sample for 1000 s; neither orterun nor PRRTE ends its tool
    // daemons when the tool that asked for them goes).
    let killed_tokens = dir.join("tokens-killed");
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
        &killed_tokens.to_string_lossy(),
    ]);
    let mut wrapped = cluster.run_in(1, &c);
    let log = dir.join("killed-front-end.log");
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut front = cluster.spawn(1, wrapped);
    let agents_on = |n: usize| cluster.processes(n).iter().any(|p| p.comm == "mpir");
    assert!(
        wait_for(120, || agents_on(2) && agents_on(3)),
        "no agent started on node2 and node3: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Past the request for daemons (its wait for orterun's spawn event), into the samples.
    std::thread::sleep(mpir_agent::engine::orte::ASK_TIMEOUT + std::time::Duration::from_secs(1));
    let (front_ran, on2, on3) = (!front.has_exited(), agents_on(2), agents_on(3));
    assert!(
        front_ran && on2 && on3,
        "ended before the kill: front end running {front_ran}, agents on node2 {on2}, on \
         node3 {on3}: {}\nagents: {}",
        std::fs::read_to_string(&log).unwrap_or_default(),
        std::fs::read_to_string(dir.join("orterun.err")).unwrap_or_default()
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
    // Its token directory went as soon as its agents were in, before the kill.
    let dirs = || -> usize {
        std::fs::read_dir(&killed_tokens).map_or(0, |d| d.filter_map(Result::ok).count())
    };
    assert_eq!(dirs(), 0, "the killed front end's token directory");
    // One left by a front end of node1 killed while its agents were starting (pid 999999,
    // which node1 does not run) is removed by the next front end of node1.
    let stale = killed_tokens.join("node1-999999-0badc0de");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("node2.token"), "0".repeat(64)).unwrap();
    assert_eq!(dirs(), 1);
    let o = mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--starter",
            &starter,
            "--agent-token-dir",
            &killed_tokens.to_string_lossy(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(dirs(), 0, "a dead front end's token directory was left");
    assert_clean(&mut job, &cluster);
    job.orterun.stop();
}

/// A job with a rank on node1 too (orterun's own node, the front end's): that rank is read
/// by the front end itself (held and let go of first, so that orterun can be asked for
/// daemons), the others by agents; the daemon orterun starts on node1 finds no token there
/// and ends at once, saying so.
#[test]
fn a_rank_on_the_front_ends_node_is_read_here_and_its_daemon_ends_quietly() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-orte-mixed");
    let Some(mut job) = Job::start(&cluster, &dir, &[(1, 1), (2, 1), (3, 1)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
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
    // Its note reaches orterun's standard error through ORTE's forwarding.
    let err_has_note = || {
        std::fs::read_to_string(&job.err)
            .unwrap_or_default()
            .contains("no token for node node1")
    };
    assert!(
        wait_for(30, err_has_note),
        "node1's daemon: {}",
        std::fs::read_to_string(&job.err).unwrap_or_default()
    );
    assert_clean(&mut job, &cluster);
    job.orterun.stop();
}
