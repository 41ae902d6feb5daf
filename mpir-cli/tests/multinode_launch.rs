//! `mpir launch --verify` across the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`): `mpir`, inside node1, launches a job whose ranks run on node2 and
//! node3 and has each node's agent prove that node's ranks.
//!
//! - Open MPI 4: `orterun` launched under a tool never opens its attach FIFO, so the agents
//!   are its tool daemons asked for at launch (`MPIR_executable_path` written before it
//!   spawns); they start with the job, wait for the tokens the front end issues once it has
//!   read the table, and connect back over TLS.
//! - Slurm: `srun` launched by `mpir`; the agents run in a step beside the job's.
//! - MPICH: `mpiexec.hydra` reaching the nodes through the cluster's ssh; the agents are a
//!   second hydra job per node, reaching them the same way.
//! - Open MPI 5: the wheel's `mpirun` (PRRTE, no MPIR) launched through PMIx (ranks held in
//!   `PMIx_Init` until released); the agents are PMIx tool daemons of the job's server.
//!
//! In both: every remote rank proven on its own node, nothing stopped or traced, no agent
//! left, no token file left, the job's output intact and its exit status `mpir`'s.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::mn::{Printed, assert_no_token_left, build_deadlock, gather, printed};
use common::mpir;
use mpir_acquire::testkit::multinode::{Cluster, NodeChild};
use mpir_target::testkit::{OMPI5_WHEEL, Wheel, scratch, wait_for};

/// `mpir launch` running inside node1: its stdout (the JSON document), its stderr file (the
/// job's own output goes there with `--json`).
struct Launched {
    /// `timeout`, whose child is `mpir`.
    mpir: NodeChild,
    /// `mpir`'s pid inside node1.
    front: u32,
    out: Arc<Mutex<String>>,
    err: std::path::PathBuf,
}

impl Launched {
    /// `mpir launch --json --verify [extra] -- STARTER…` inside node1.
    fn start(cluster: &Cluster, dir: &Path, extra: &[&str], starter: &Command) -> Launched {
        let mut c = Command::new("timeout");
        c.args(["-s", "KILL", "280"])
            .arg(mpir().get_program())
            .args(["launch", "--json", "--verify", "--timeout", "60"])
            .args(extra)
            .arg("--")
            .arg(starter.get_program())
            .args(starter.get_args())
            .current_dir(dir);
        for (k, v) in starter.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        let err = dir.join("mpir-launch.err");
        let mut wrapped = cluster.run_in(1, &c);
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err).unwrap());
        let mut mpir = cluster.spawn(1, wrapped);
        let out = gather(mpir.child().stdout.take().unwrap());
        let front = || {
            cluster
                .processes(1)
                .into_iter()
                .find(|p| p.comm == "mpir" && p.local_ppid == mpir.local_pid)
                .map(|p| p.local_pid)
        };
        assert!(
            wait_for(10, || front().is_some()),
            "mpir did not start in node1"
        );
        let front = front().unwrap();
        Launched {
            mpir,
            front,
            out,
            err,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// The JSON document, once printed (within `secs`).
    fn document(&mut self, secs: u64) -> serde_json::Value {
        let parsed = || serde_json::from_str::<serde_json::Value>(&self.out.lock().unwrap()).ok();
        assert!(
            wait_for(secs, || parsed().is_some() || self.mpir.has_exited()),
            "no document within {secs}s; stderr:\n{}",
            self.stderr()
        );
        parsed().unwrap_or_else(|| {
            panic!(
                "mpir launch ended without a document: {}\nstderr:\n{}",
                self.out.lock().unwrap(),
                self.stderr()
            )
        })
    }
}

/// The table's ranks as (rank, pid, host), in rank order.
fn table(doc: &serde_json::Value) -> Vec<Printed> {
    doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                u32::try_from(r["pid"].as_i64().unwrap()).unwrap(),
                r["host"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The checks both launches share, while the job runs: every rank proven by its node's
/// agent, each one running and untouched on its node, no agent left anywhere.
fn check_running(cluster: &Cluster, launched: &Launched, doc: &serde_json::Value) -> Vec<Printed> {
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    eprintln!("mpir launch --verify: notes {notes:?}");
    assert!(
        notes.contains(&"4 of 4 ranks on 2 other nodes proven on their nodes by agents"),
        "{doc:#}\nstderr:\n{}",
        launched.stderr()
    );
    let ranks = table(doc);
    // Two on each node (which ranks where is the launcher's mapping: the ranks' own lines
    // below must agree with the table).
    let mut hosts: Vec<&str> = ranks.iter().map(|(_, _, h)| h.as_str()).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, ["node2", "node2", "node3", "node3"], "{doc:#}");
    for r in doc["ranks"].as_array().unwrap() {
        assert_eq!(r["local"], false, "{r}");
    }
    // The job runs: each rank printed itself (into mpir's stderr, with --json) as the table
    // says, and is neither stopped nor traced on its node.
    assert!(
        wait_for(60, || printed(&launched.stderr()) == ranks),
        "the ranks printed {:?}, the table says {ranks:?}",
        printed(&launched.stderr())
    );
    for (rank, pid, host) in &ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        assert!(
            cluster.host_pid(node, *pid).is_some(),
            "rank {rank} is gone"
        );
        cluster.assert_untouched(node, *pid);
    }
    for node in 1..=cluster.nodes() {
        let left = || {
            cluster
                .processes(node)
                .into_iter()
                .filter(|p| p.comm == "mpir" && (node != 1 || p.local_pid != launched.front))
                .map(|p| (p.local_pid, p.comm))
                .collect::<Vec<_>>()
        };
        assert!(
            wait_for(30, || left().is_empty()),
            "node{node} still runs agents {:?}",
            left()
        );
    }
    ranks
}

/// Ends the job by SIGTERM to the starter (mpir's child in node1), and checks that `mpir
/// launch` ends with it, the ranks gone.
fn end_job(cluster: &Cluster, launched: &mut Launched, ranks: &[Printed]) {
    let starter = cluster
        .processes(1)
        .into_iter()
        .find(|p| p.local_ppid == launched.front)
        .unwrap_or_else(|| panic!("no starter under mpir in node1"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(starter.host_pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        wait_for(60, || launched.mpir.has_exited()),
        "mpir launch did not end with its job"
    );
    for (rank, pid, host) in ranks {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        assert!(
            wait_for(30, || cluster.host_pid(node, *pid).is_none()),
            "rank {rank} on {host} outlived its job"
        );
    }
}

#[test]
fn launch_verify_has_orterun_start_the_agents_with_the_job() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-launch-orte");
    let Some(exe) = build_deadlock(&dir) else {
        return;
    };
    let tokens = dir.join("tokens");
    let starter = cluster.orterun(&[], &[(2, 2), (3, 2)], &exe, &[]);
    let mut launched = Launched::start(
        &cluster,
        &dir,
        &["--agent-token-dir", &tokens.to_string_lossy()],
        &starter,
    );
    let doc = launched.document(240);
    assert_eq!(doc["starter"]["launcher"], "Open MPI (orterun)", "{doc:#}");
    let ranks = check_running(&cluster, &launched, &doc);
    // The daemons were orterun's: each under its node's orted, none asked for in vain.
    let err = launched.stderr();
    assert!(!err.contains("warning"), "{err}");
    assert!(
        !doc.to_string().contains("no tool daemon was asked for"),
        "{doc:#}"
    );
    // Every token taken or removed: the front end's private directory is gone.
    assert_no_token_left(&tokens);
    end_job(&cluster, &mut launched, &ranks);
}

#[test]
fn launch_verify_of_an_srun_job_runs_its_agents_in_a_step_beside_it() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-launch-srun");
    let Some(exe) = build_deadlock(&dir) else {
        return;
    };
    let name = format!("mpir-launch-{}", std::process::id());
    let Some(starter) = cluster.srun(&[
        &format!("--job-name={name}"),
        "-N",
        "2",
        "--nodelist=node2,node3",
        "--ntasks-per-node=2",
        "--mpi=pmix",
        &exe.to_string_lossy(),
    ]) else {
        return;
    };
    let cancel = Cancel {
        name,
        conf: cluster.slurm_conf().unwrap().to_path_buf(),
    };
    let mut launched = Launched::start(&cluster, &dir, &[], &starter);
    let doc = launched.document(240);
    assert_eq!(doc["starter"]["launcher"], "Slurm (srun)", "{doc:#}");
    let ranks = check_running(&cluster, &launched, &doc);
    end_job(&cluster, &mut launched, &ranks);
    drop(cancel);
}

/// Cancels the Slurm job by name when the test ends, however it ends.
struct Cancel {
    name: String,
    conf: std::path::PathBuf,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        let _ = Command::new("timeout")
            .args(["-s", "KILL", "20", "scancel"])
            .arg(format!("--name={}", self.name))
            .env("SLURM_CONF", &self.conf)
            .status();
    }
}

#[test]
fn launch_verify_of_an_open_mpi_5_job_has_its_pmix_server_start_the_agents() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let dir = scratch("cli-mn-launch-ompi5");
    let src = dir.join("mn_deadlock.c");
    std::fs::write(&src, common::mn::DEADLOCK_C).unwrap();
    let Some(exe) = wheel.program(&src, &dir, "mn_deadlock") else {
        return;
    };
    let tokens = dir.join("tokens");
    let starter = cluster.prterun(&wheel.prefix, &[], &[(2, 2), (3, 2)], &exe, &[]);
    let mut launched = Launched::start(
        &cluster,
        &dir,
        &["--agent-token-dir", &tokens.to_string_lossy()],
        &starter,
    );
    let doc = launched.document(240);
    let ranks = check_running(&cluster, &launched, &doc);
    assert_no_token_left(&tokens);
    end_job(&cluster, &mut launched, &ranks);
}

#[test]
fn launch_verify_of_a_hydra_job_starts_one_second_hydra_job_for_its_agents() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-launch-hydra");
    let Some((hydra, debug)) = common::mn::hydra_ring(&cluster, &dir) else {
        return;
    };
    let mut launched = Launched::start(&cluster, &dir, &["--debug-dir", &debug], &hydra);
    let doc = launched.document(240);
    assert!(
        doc["starter"]["launcher"]
            .as_str()
            .is_some_and(|l| l.contains("hydra")),
        "{doc:#}"
    );
    let ranks = check_running(&cluster, &launched, &doc);
    end_job(&cluster, &mut launched, &ranks);
}
