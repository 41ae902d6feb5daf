//! `mpir` inside node1 of the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`) reading an Open MPI 4.1.4 job whose ranks all run on other nodes,
//! through `mpir agent`s started on those nodes by a command template — the cluster's ssh,
//! `nsrsh` — with their stdio as the link (issue 21). Each agent proves and reads only its
//! own node's ranks; node1's decoy, whose pid equals a remote rank's, is never touched.
//!
//! Also: the tree (fanout 2 over three nodes: one agent starts another), a node whose agent
//! cannot start, an agent started on the wrong node, and a front end killed with SIGKILL
//! while its agents run (they end on their own, leaving every rank running and untraced).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::mn::{Job, mpir_in_node1};
use common::{json_doc, mpir};
use mpir_acquire::testkit::multinode::{Cluster, StartFailure, start_job};
use mpir_target::testkit::{scratch, wait_for};

/// The template that starts an agent on `{host}` through the cluster's ssh.
fn template(cluster: &Cluster) -> String {
    format!("{} {{host}} {{agent}}", cluster.nsrsh().display())
}

/// No `mpir agent` (nor an nsrsh that carried one: orterun's own, which carry its daemons,
/// stay) is left on any node.
fn assert_no_agent_left(cluster: &Cluster, job: &Job) {
    for node in 1..=cluster.nodes() {
        let left = || {
            cluster
                .processes(node)
                .into_iter()
                .filter(|p| {
                    p.comm == "mpir"
                        || (p.comm.starts_with("nsrsh")
                            && !(node == 1 && p.local_ppid == job.orterun.local_pid))
                })
                .collect::<Vec<_>>()
        };
        assert!(
            wait_for(15, || left().is_empty()),
            "node{node} still runs {:?}",
            left()
        );
    }
}

/// The job's ranks, as the JSON's `ranks` of a queues document: each one's pending receive
/// from its right neighbour with tag 42 on `MPI_COMM_WORLD`, read on its own node.
fn assert_ring_queues(doc: &serde_json::Value, job: &Job) {
    let ranks = doc["ranks"].as_array().unwrap();
    let n = job.ranks.len() as u64;
    assert_eq!(ranks.len() as u64, n, "{doc:#}");
    for (r, (rank, pid, host)) in ranks.iter().zip(&job.ranks) {
        assert_eq!(r["rank"], *rank, "{r}");
        // The pid is the rank's own on its node (the table's), not one of node1's.
        assert_eq!(r["pid"], *pid, "{r}");
        assert!(r["error"].is_null(), "rank {rank} on {host}: {r}");
        let world = r["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "MPI_COMM_WORLD")
            .unwrap_or_else(|| panic!("rank {rank}: no MPI_COMM_WORLD: {r}"));
        assert_eq!(world["local_rank"], *rank, "{world}");
        let ops = world["operations"].as_array().unwrap();
        assert!(
            ops.iter().any(|o| o["class"] == "receive"
                && o["tag"] == 42
                && o["peer_global"] == (rank + 1) % n),
            "rank {rank}: no receive from {} tag 42: {world}",
            (rank + 1) % n
        );
    }
}

#[test]
fn agents_read_every_remote_rank_on_its_own_node() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agents");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    let launch = template(&cluster);

    // attach --verify: each node's agent proves its ranks (nothing stopped).
    let o = mpir_in_node1(
        &cluster,
        &[
            "attach",
            "--json",
            "--verify",
            "--agent-launch",
            &launch,
            &starter,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    assert!(
        doc["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "4 of 4 ranks on 2 other nodes proven on their nodes by agents"),
        "{doc:#}"
    );
    job.assert_untouched(&cluster);

    // Stacks: every rank, from its own node, blocked in MPI_Recv under main.
    let o = mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["read"], 4, "{doc:#}");
    assert_eq!(doc["unreached"], serde_json::json!([]), "{doc:#}");
    let nodes = doc["nodes"].as_array().unwrap();
    let main = nodes
        .iter()
        .position(|n| n["function"] == "main")
        .expect("main in the tree");
    assert_eq!(nodes[main]["ranks"], "0-3", "{doc:#}");
    assert!(
        nodes
            .iter()
            .any(|n| n["function"] == "MPI_Recv" && n["parent"] == main && n["ranks"] == "0-3"),
        "{doc:#}"
    );
    // Each stop is of the rank's own process on its node.
    let stops = doc["stops"][0].as_array().unwrap();
    for (rank, pid, _) in &job.ranks {
        assert!(
            stops.iter().any(|s| s["rank"] == *rank && s["pid"] == *pid),
            "rank {rank} (pid {pid}) was not stopped for its snapshot: {stops:?}"
        );
    }
    job.assert_untouched(&cluster);

    // Queues: every rank's pending receive, read by its node's agent with the shipped layouts
    // (stock Open MPI, no types given), proven by that agent on each of its ranks.
    let o = mpir_in_node1(
        &cluster,
        &[
            "queues",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    assert_eq!(doc["engine"], "native Open MPI ob1", "{doc:#}");
    assert_ring_queues(&doc, &job);
    for r in doc["ranks"].as_array().unwrap() {
        assert!(
            r["notes"]
                .to_string()
                .contains("shipped layouts of openmpi 4.1.4 debian lp64"),
            "{r:#}"
        );
    }
    job.assert_untouched(&cluster);

    // Deadlock: the ring across the two nodes, in every sample; exit 3.
    let o = mpir_in_node1(
        &cluster,
        &[
            "deadlock",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["complete"], true, "{doc:#}");
    assert_eq!(
        doc["cycles"][0]["ranks"],
        serde_json::json!([0, 1, 2, 3]),
        "{doc:#}"
    );
    // Each wait joined to the call its rank is blocked in: the agents read every rank's
    // stacks with its queues for the deadlock search (not for `queues`, which shows none).
    for link in doc["cycles"][0]["chain"].as_array().unwrap() {
        assert_eq!(link["blocked_in"]["call"], "MPI_Recv", "{link}");
    }
    job.assert_untouched(&cluster);
    assert_no_agent_left(&cluster, &job);
}

#[test]
fn past_the_fanout_agents_start_agents_and_answer_for_them() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    if cluster.nodes() < 4 {
        mpir_target::testkit::skip("the cluster has fewer than 4 nodes");
        return;
    }
    let dir = scratch("cli-mn-tree");
    // Three nodes, fanout 2: node2's agent starts node3's; node4's is the front end's.
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 1), (3, 2), (4, 1)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    let launch = template(&cluster);
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "180"])
        .arg(common::mpir().get_program())
        .args(["-v", "stacks", "--json", "--agent-fanout", "2", "--starter"])
        .arg(&starter)
        .arg("--agent-launch")
        .arg(&launch);
    let o = cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["read"], 4, "{doc:#}");
    assert_eq!(doc["unreached"], serde_json::json!([]), "{doc:#}");
    // The front end talked to two agents; node3's came through node2's.
    let agents: Vec<&str> = stderr.lines().filter(|l| l.contains(" agent")).collect();
    assert!(
        agents
            .iter()
            .any(|l| l.contains("host=node2") && l.contains("node3")),
        "{stderr}"
    );
    assert!(
        !agents.iter().any(|l| l.contains("host=node3")),
        "node3's agent was started by the front end: {stderr}"
    );
    job.assert_untouched(&cluster);
    assert_no_agent_left(&cluster, &job);
}

#[test]
fn a_node_whose_agent_cannot_start_is_named_and_the_others_are_read() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agent-fails");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    // An "installation" where node3 has no usable mpir: its agent exits at once.
    let wrapper = dir.join("mpir-on-some-nodes");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$(hostname)\" = node3 ] && {{ echo 'mpir: not installed here' >&2; exit 127; }}\nexec {} \"$@\"\n",
            common::mpir().get_program().to_string_lossy()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launch = template(&cluster);
    let wrapper = wrapper.to_string_lossy().into_owned();
    let o = mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
            "--agent-path",
            &wrapper,
        ],
    );
    // Some ranks unread: exit 4, the others in the tree.
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("node3: its agent could not be started"),
        "{stderr}"
    );
    let doc = json_doc(&o);
    let unreached = doc["unreached"].as_array().unwrap();
    let text = serde_json::to_string(unreached).unwrap();
    assert!(
        text.contains("on node3: its agent could not be started"),
        "{text}"
    );
    let main = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["function"] == "main")
        .expect("node2's ranks in the tree");
    assert_eq!(main["ranks"], "0-1", "{doc:#}");
    job.assert_untouched(&cluster);

    // An agent started on another node than it was meant for refuses to serve there.
    let wrong = format!(
        "{} node4 env MEANT_FOR={{host}} {{agent}}",
        cluster.nsrsh().display()
    );
    let o = mpir_in_node1(
        &cluster,
        &[
            "stacks",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &wrong,
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("node2: its agent could not be started"),
        "{stderr}"
    );
    job.assert_untouched(&cluster);
    assert_no_agent_left(&cluster, &job);
}

#[test]
fn a_front_end_killed_or_terminated_leaves_no_agent_and_every_rank_running() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agent-kill");
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    let launch = template(&cluster);
    for signal in [
        nix::sys::signal::Signal::SIGKILL,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        // A long sampling: the agents are up and sampling when the front end is ended.
        let mut c = Command::new(common::mpir().get_program());
        c.args([
            "stacks",
            "--samples",
            "100",
            "--interval",
            "200",
            "--starter",
        ])
        .arg(&starter)
        .arg("--agent-launch")
        .arg(&launch);
        let mut wrapped = cluster.run_in(1, &c);
        wrapped
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut front = cluster.spawn(1, wrapped);
        let agents_up = || {
            [2, 3]
                .iter()
                .all(|&n| cluster.processes(n).iter().any(|p| p.comm == "mpir"))
        };
        assert!(wait_for(60, agents_up), "the agents did not start");
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(front.host_pid as i32), signal).unwrap();
        let ended = Instant::now();
        front.wait_timeout(Duration::from_secs(20));
        assert!(front.has_exited(), "the front end did not end on {signal}");
        // The agents see their link end, let go and exit, on their own, promptly.
        assert_no_agent_left(&cluster, &job);
        eprintln!(
            "agents gone {:?} after the front end's {signal}",
            ended.elapsed()
        );
        job.assert_untouched(&cluster);
    }
}

/// A Slurm job (srun in node1, two ranks on each of node2 and node3), cancelled on drop.
struct SlurmJob {
    srun: mpir_acquire::testkit::multinode::NodeChild,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    name: String,
    conf: std::path::PathBuf,
}

impl SlurmJob {
    /// The job, up (a start the MPI stack itself lost gets one more try, under a new name:
    /// [`start_job`]).
    fn start(cluster: &Cluster, dir: &Path) -> Option<SlurmJob> {
        let conf = cluster.slurm_conf()?.to_path_buf();
        let exe = common::mn::build_deadlock(dir)?;
        let mut tries = 0;
        Some(start_job("the Slurm job", || {
            tries += 1;
            let name = format!("mpir-agents-{}-{tries}", std::process::id());
            let mut cmd = cluster
                .srun(&[
                    &format!("--job-name={name}"),
                    "-N",
                    "2",
                    "--nodelist=node2,node3",
                    "--ntasks-per-node=2",
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
            if wait_for(90, || job.ranks().len() == 4 || job.srun.has_exited())
                && job.ranks().len() == 4
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

    /// `squeue` (on the host) with `args` for this job.
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

#[test]
fn a_slurm_jobs_agents_run_in_a_step_beside_it_and_read_every_rank() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agents-slurm");
    let Some(job) = SlurmJob::start(&cluster, &dir) else {
        return;
    };
    let id = job.id();
    assert!(!id.is_empty(), "no job id");
    // No template: the job is srun's, so the agents are started with srun, in a step of
    // their own beside the job's, one task per node.
    let o = mpir_in_node1(&cluster, &["stacks", "--json", "--slurm-job", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["read"], 4, "{doc:#}");
    let stops = doc["stops"][0].as_array().unwrap();
    for (rank, pid, _) in job.ranks() {
        assert!(
            stops.iter().any(|s| s["rank"] == rank && s["pid"] == pid),
            "rank {rank} (pid {pid}): {stops:?}"
        );
    }
    let o = mpir_in_node1(&cluster, &["deadlock", "--json", "--slurm-job", &id]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = json_doc(&o);
    assert_eq!(
        doc["cycles"][0]["ranks"],
        serde_json::json!([0, 1, 2, 3]),
        "{doc:#}"
    );
    // The HTML report reads every node's ranks through the same agents: its embedded data
    // hold the cycle and every rank's stacks (the page itself is checked in report_cli.rs).
    let page = dir.join("across-nodes.html");
    let page_arg = page.display().to_string();
    let o = mpir_in_node1(
        &cluster,
        &["report", "--json", "--slurm-job", &id, "-o", &page_arg],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let data = json_doc(&o);
    let docs = &data["documents"];
    assert_eq!(
        docs["deadlock"]["cycles"][0]["ranks"],
        serde_json::json!([0, 1, 2, 3])
    );
    assert_eq!(docs["stacks"]["coverage"]["read"], 4, "{data:#}");
    for (rank, _, host) in job.ranks() {
        assert!(
            docs["job"]["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["rank"] == rank && r["host"] == host.as_str()),
            "rank {rank} on {host}"
        );
    }
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("\"schema\":\"mpir.report/1\""));
    // The agents' steps are over; only the job's own step runs, its ranks untouched.
    let steps = || job.squeue(&["-s", "-o", "%i", "-j", &id]);
    assert!(
        wait_for(20, || steps().lines().count() == 1),
        "steps left: {}",
        steps()
    );
    for node in [2, 3] {
        assert!(
            wait_for(15, || !cluster
                .processes(node)
                .iter()
                .any(|p| p.comm == "mpir")),
            "an agent is left on node{node}"
        );
    }
    for (_, pid, host) in job.ranks() {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, pid);
    }
    assert_eq!(job.ranks().len(), 4, "the job's output changed");
}

#[test]
fn a_hydra_jobs_agents_are_a_second_hydra_job_reaching_nodes_as_the_first() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agents-hydra");
    let Some((hydra, debug)) = common::mn::hydra_ring(&cluster, &dir) else {
        return;
    };
    let (mut starter, out) = hydra_ring_running(&cluster, &hydra);
    let ranks = || common::mn::printed(&out.lock().unwrap());
    // No template: the job's own mpiexec starts the agents, one hydra job per node.
    let pid = starter.local_pid.to_string();
    let o = mpir_in_node1(
        &cluster,
        &["stacks", "--json", "--debug-dir", &debug, "--starter", &pid],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json_doc(&o);
    assert_eq!(doc["coverage"]["read"], 4, "{doc:#}");
    let stops = doc["stops"][0].as_array().unwrap();
    for (rank, pid, host) in ranks() {
        assert!(
            stops.iter().any(|s| s["rank"] == rank && s["pid"] == pid),
            "rank {rank} (pid {pid} on {host}): {stops:?}"
        );
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, pid);
    }
    for node in 1..=cluster.nodes() {
        assert!(
            wait_for(15, || !cluster
                .processes(node)
                .iter()
                .any(|p| p.comm == "mpir")),
            "an agent is left on node{node}"
        );
    }
    assert_eq!(ranks().len(), 4, "the job's output changed");
    starter.stop();
}

#[test]
fn ranks_on_other_nodes_are_read_from_their_wait_state_exports() {
    // A hydra ring across node2 and node3 whose ranks have the wait-state library (hydra
    // passes LD_PRELOAD to every node's ranks); from node1, `mpir deadlock` reads each rank's
    // export through the agents on their nodes: the cycle of the four MPI_Recv (tag 42), every
    // rank's waits from its export (issue 29).
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let dir = scratch("cli-mn-agents-waits");
    let Some((mut hydra, debug)) = common::mn::hydra_ring(&cluster, &dir) else {
        return;
    };
    let lib = {
        let o = mpir().arg("preload").output().unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    hydra.env("LD_PRELOAD", &lib);
    let (mut starter, out) = hydra_ring_running(&cluster, &hydra);
    let ranks = || common::mn::printed(&out.lock().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let pid = starter.local_pid.to_string();
    let o = mpir_in_node1(
        &cluster,
        &[
            "deadlock",
            "--json",
            "--debug-dir",
            &debug,
            "--starter",
            &pid,
        ],
    );
    let doc = json_doc(&o);
    assert_eq!(o.status.code(), Some(3), "{doc:#}");
    assert_eq!(doc["verdict"], "deadlock", "{doc:#}");
    assert_eq!(
        doc["sources"],
        serde_json::json!([{ "source": "wait_states", "ranks": "0-3" }]),
        "{doc:#}"
    );
    assert_eq!(doc["cycles"][0]["ranks"], serde_json::json!([0, 1, 2, 3]));
    for step in doc["cycles"][0]["chain"].as_array().unwrap() {
        assert_eq!(step["op"]["tag"], 42, "{step}");
        assert_eq!(step["op"]["class"], "receive", "{step}");
    }
    for (_, pid, host) in ranks() {
        let node: usize = host.trim_start_matches("node").parse().unwrap();
        cluster.assert_untouched(node, pid);
    }
    starter.stop();
}

/// The hydra ring of [`common::mn::hydra_ring`] started inside node1, once its four ranks
/// printed themselves: the starter and the job's output.
fn hydra_ring_running(
    cluster: &Cluster,
    hydra: &Command,
) -> (
    mpir_acquire::testkit::multinode::NodeChild,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    let mut wrapped = cluster.run_in(1, hydra);
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut starter = cluster.spawn(1, wrapped);
    let out = common::mn::gather(starter.child().stdout.take().unwrap());
    assert!(
        wait_for(90, || common::mn::printed(&out.lock().unwrap()).len() == 4),
        "the hydra job did not start: {}",
        out.lock().unwrap()
    );
    (starter, out)
}
