//! A Slurm job's agents are started by **one** srun step for all the nodes the front end
//! starts (issue 31, point 6), and a subtree root's agent starts its subtree by one step of
//! its own: counted by Slurm itself (`squeue -s`, each step's name and node list) while the
//! agents run, and by each agent's own `SLURM_STEP_ID` (set by slurmstepd). Also: a node
//! whose agent cannot start is named at once (its task's end, as srun reports it), and the
//! others are read; a front end killed (SIGKILL, SIGTERM) mid-sampling leaves no agent and
//! no agent step.
//!
//! The job: `srun --ntasks-per-node=1` of the cluster's ring (`deadlock.c`) on node2..node4
//! of the simulated cluster (`scripts/ci-multinode.sh`), its srun inside node1, where `mpir`
//! runs.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::{Cluster, NodeChild, StartFailure, start_job};
use mpir_target::testkit::{scratch, skip, wait_for};

/// The job's nodes.
const NODES: [usize; 3] = [2, 3, 4];

/// A Slurm job, one rank on each of node2..node4, cancelled on drop.
struct SlurmJob {
    srun: NodeChild,
    out: Arc<Mutex<String>>,
    name: String,
    conf: PathBuf,
}

impl SlurmJob {
    fn start(cluster: &Cluster, dir: &Path) -> Option<SlurmJob> {
        let conf = cluster.slurm_conf()?.to_path_buf();
        if cluster.nodes() < 4 {
            skip("the cluster has fewer than 4 nodes");
            return None;
        }
        let exe = common::mn::build_deadlock(dir)?;
        let mut tries = 0;
        Some(start_job("the Slurm job", || {
            tries += 1;
            let name = format!("mpir-step-{}-{tries}", std::process::id());
            let mut cmd = cluster
                .srun(&[
                    &format!("--job-name={name}"),
                    "-N",
                    "3",
                    "--nodelist=node2,node3,node4",
                    "--ntasks-per-node=1",
                    "--mpi=pmix",
                    &exe.to_string_lossy(),
                ])
                .expect("the cluster runs Slurm (slurm_conf)");
            cmd.current_dir(dir);
            let mut wrapped = cluster.run_in(1, &cmd);
            let err = dir.join(format!("srun-{tries}.err"));
            wrapped
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&err).unwrap());
            let mut srun = cluster.spawn(1, wrapped);
            let out = common::mn::gather(srun.child().stdout.take().unwrap());
            let mut job = SlurmJob {
                srun,
                out,
                name,
                conf: conf.clone(),
            };
            if wait_for(90, || job.ranks().len() == 3 || job.srun.has_exited())
                && job.ranks().len() == 3
            {
                return Ok(job);
            }
            let why = format!(
                "{}\n{}",
                job.out.lock().unwrap(),
                std::fs::read_to_string(&err).unwrap_or_default()
            );
            Err(if job.srun.has_exited() {
                StartFailure::Ended(why)
            } else {
                StartFailure::Stuck(why)
            })
        }))
    }

    fn ranks(&self) -> Vec<common::mn::Printed> {
        common::mn::printed(&self.out.lock().unwrap())
    }

    /// `squeue` (on the host, Slurm's own view) with `args`.
    fn squeue(&self, args: &[&str]) -> String {
        let o = Command::new("timeout")
            .args(["-s", "KILL", "20", "squeue", "-h"])
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn id(&self) -> String {
        self.squeue(&["-o", "%i", "-n", &self.name])
            .trim()
            .to_string()
    }

    /// The job's steps as Slurm lists them: step id → (name, node list).
    fn steps(&self, id: &str) -> BTreeMap<String, (String, String)> {
        self.squeue(&["-s", "-j", id, "-o", "%i %j %N"])
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((
                    w.next()?.to_string(),
                    (w.next()?.to_string(), w.next()?.to_string()),
                ))
            })
            .collect()
    }
}

impl Drop for SlurmJob {
    fn drop(&mut self) {
        let _ = Command::new("timeout")
            .args(["-s", "KILL", "20", "scancel"])
            .arg(format!("--name={}", self.name))
            .env("SLURM_CONF", &self.conf)
            .status();
        self.srun.stop();
    }
}

/// `SLURM_JOB_ID.SLURM_STEP_ID` of host process `pid`, as slurmstepd set them.
fn step_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let var = |name: &str| {
        env.split(|&b| b == 0).find_map(|v| {
            let v = std::str::from_utf8(v).ok()?;
            v.strip_prefix(name)?.strip_prefix('=').map(str::to_string)
        })
    };
    Some(format!(
        "{}.{}",
        var("SLURM_JOB_ID")?,
        var("SLURM_STEP_ID")?
    ))
}

/// The running agents (`mpir` processes) on each of the job's nodes, each with its step.
fn agents(cluster: &Cluster) -> BTreeMap<usize, Vec<Option<String>>> {
    NODES
        .iter()
        .map(|&n| {
            let steps = cluster
                .processes(n)
                .into_iter()
                .filter(|p| p.comm == "mpir")
                .map(|p| step_of(p.host_pid))
                .collect();
            (n, steps)
        })
        .collect()
}

/// What was seen while a front end ran: the job's steps and the agents at the moment
/// every node had its agent.
struct Seen {
    steps: BTreeMap<String, (String, String)>,
    agents: BTreeMap<usize, Vec<Option<String>>>,
    output: Output,
}

/// `mpir ARGS` inside node1, long enough (a sampling) to be seen while its agents run.
fn run_and_watch(cluster: &Cluster, job: &SlurmJob, id: &str, args: &[&str]) -> Seen {
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "180"])
        .arg(mpir().get_program())
        .args(args);
    let mut wrapped = cluster.run_in(1, &c);
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut front = cluster.spawn(1, wrapped);
    let stdout = front.child().stdout.take().unwrap();
    let stderr = front.child().stderr.take().unwrap();
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let mut seen = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !front.has_exited() {
        let now = agents(cluster);
        if now.values().all(|a| !a.is_empty()) {
            // Every node's agent is up: Slurm's steps now.
            seen = Some((job.steps(id), now));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    front.wait_timeout(Duration::from_secs(150));
    let status = front.child().wait().unwrap();
    let output = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    let (steps, agents) = seen.unwrap_or_else(|| {
        panic!(
            "the agents were never all up: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    Seen {
        steps,
        agents,
        output,
    }
}

/// No agent and no agent step is left; every rank runs on, untouched.
fn assert_clean(cluster: &Cluster, job: &SlurmJob, id: &str) {
    assert!(
        wait_for(20, || job.steps(id).len() == 1),
        "steps left: {:?}",
        job.steps(id)
    );
    assert!(
        wait_for(15, || agents(cluster).values().all(Vec::is_empty)),
        "agents left: {:?}",
        agents(cluster)
    );
    for (_, pid, host) in job.ranks() {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, pid);
    }
    assert_eq!(job.ranks().len(), 3, "the job's output changed");
}

#[test]
fn one_srun_step_starts_every_agent_and_one_more_each_subtree() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-slurm-step");
    let Some(job) = SlurmJob::start(&cluster, &dir) else {
        return;
    };
    let id = job.id();
    assert!(!id.is_empty(), "no job id");
    let sampling = ["--samples", "30", "--interval", "100"];

    // Three nodes, the default fanout: the front end starts all three agents in one step.
    let mut args = vec!["stacks", "--json", "--slurm-job", &id];
    args.extend(sampling);
    let seen = run_and_watch(&cluster, &job, &id, &args);
    let stderr = String::from_utf8_lossy(&seen.output.stderr);
    assert!(seen.output.status.success(), "{stderr}");
    let doc = json_doc(&seen.output);
    assert_eq!(doc["coverage"]["read"], 3, "{doc:#}");
    let agent_steps: Vec<_> = seen
        .steps
        .iter()
        .filter(|(_, (name, _))| name == "mpir-agents")
        .collect();
    // Slurm's view: the job's own step and exactly one more, on all three nodes.
    assert_eq!(seen.steps.len(), 2, "{:?}", seen.steps);
    assert_eq!(agent_steps.len(), 1, "{:?}", seen.steps);
    let (step, (_, nodes)) = agent_steps[0];
    assert_eq!(nodes, "node[2-4]", "{:?}", seen.steps);
    // The agents' view: one per node, every one in that step.
    for (node, steps) in &seen.agents {
        assert_eq!(
            steps,
            &[Some(step.clone())],
            "node{node}: {:?}",
            seen.agents
        );
    }
    assert_clean(&cluster, &job, &id);

    // Fanout 2: the front end's step has node2's and node4's agents; node2's agent starts
    // node3's in a step of its own.
    let mut args = vec![
        "-v",
        "stacks",
        "--json",
        "--agent-fanout",
        "2",
        "--slurm-job",
        &id,
    ];
    args.extend(sampling);
    let seen = run_and_watch(&cluster, &job, &id, &args);
    let stderr = String::from_utf8_lossy(&seen.output.stderr);
    assert!(seen.output.status.success(), "{stderr}");
    let doc = json_doc(&seen.output);
    assert_eq!(doc["coverage"]["read"], 3, "{doc:#}");
    let by_nodes: BTreeSet<&str> = seen
        .steps
        .values()
        .filter(|(name, _)| name == "mpir-agents")
        .map(|(_, nodes)| nodes.as_str())
        .collect();
    assert_eq!(
        by_nodes,
        BTreeSet::from(["node[2,4]", "node3"]),
        "{:?}",
        seen.steps
    );
    assert_eq!(seen.steps.len(), 3, "{:?}", seen.steps);
    let step_of_node = |n: usize| seen.agents[&n][0].clone();
    assert_eq!(step_of_node(2), step_of_node(4), "{:?}", seen.agents);
    assert_ne!(step_of_node(2), step_of_node(3), "{:?}", seen.agents);
    assert_clean(&cluster, &job, &id);
}

#[test]
fn in_one_step_a_node_whose_agent_cannot_start_is_named_and_the_others_are_read() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-slurm-step-fails");
    let Some(job) = SlurmJob::start(&cluster, &dir) else {
        return;
    };
    let id = job.id();
    // An "installation" where node3 has no usable mpir: its task exits at once.
    let wrapper = dir.join("mpir-on-some-nodes");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$(hostname)\" = node3 ] && {{ echo 'mpir: not installed here' >&2; exit 127; }}\nexec {} \"$@\"\n",
            mpir().get_program().to_string_lossy()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let wrapper = wrapper.to_string_lossy().into_owned();
    let started = Instant::now();
    let o = common::mn::mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--json",
            "--slurm-job",
            &id,
            "--agent-path",
            &wrapper,
        ],
    );
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("node3: its agent could not be started"),
        "{stderr}"
    );
    let doc = json_doc(&o);
    let text = serde_json::to_string(&doc["unreached"]).unwrap();
    // Told by srun's own report of the task's end, not by the 60 s start timeout.
    assert!(text.contains("ended before it connected"), "{text}");
    assert!(text.contains("exit code 127"), "{text}");
    assert!(took < Duration::from_secs(50), "took {took:?}: {stderr}");
    assert_eq!(doc["coverage"]["read"], 2, "{doc:#}");
    assert_clean(&cluster, &job, &id);
}

#[test]
fn a_front_end_killed_leaves_no_agent_and_no_step() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-slurm-step-kill");
    let Some(job) = SlurmJob::start(&cluster, &dir) else {
        return;
    };
    let id = job.id();
    for signal in [
        nix::sys::signal::Signal::SIGKILL,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        // A long sampling: the agents are up and sampling when the front end is ended.
        let mut c = Command::new(mpir().get_program());
        c.args([
            "stacks",
            "--samples",
            "100",
            "--interval",
            "200",
            "--slurm-job",
        ])
        .arg(&id);
        let mut wrapped = cluster.run_in(1, &c);
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut front = cluster.spawn(1, wrapped);
        assert!(
            wait_for(60, || agents(&cluster).values().all(|a| !a.is_empty())),
            "the agents did not start"
        );
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(front.host_pid as i32), signal).unwrap();
        front.wait_timeout(Duration::from_secs(20));
        assert!(front.has_exited(), "the front end did not end on {signal}");
        // Each agent sees its connection end, lets go and exits; the step ends with them
        // (its srun, in a process group of its own, was not signalled).
        assert_clean(&cluster, &job, &id);
    }
}
