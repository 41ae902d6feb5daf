//! Scale (issue 21): 256 agents, one per host of a job spread over 256 hosts, answer a `stacks`
//! and a `queues` request of one front end through the agents' tree.
//!
//! The shape, and why:
//! - **Hosts.** 256 host names on 32 simulated nodes (node2..node33 of a cluster of its own,
//!   node1 being the front end's), each node answering to 8 names (`node7`, `node7a1` …
//!   `node7a7`: aliases on its `/etc/hosts` line, `MPIR_MULTINODE_ALIASES`). A node is PID+UTS+mount
//!   namespaces; 256 of them would cost the same per node and add nothing an agent can tell
//!   apart: an agent knows its node only from its facts (host name, `/etc/hosts` aliases), so
//!   `mpir agent --node node7a3` runs inside node7, proves its rank there and serves it alone.
//!   The CI cluster ($MPIR_MULTINODE, 4 nodes, used by other tests) is left alone: this test
//!   brings up its own without Slurm (~0.15 s a node) and takes it down.
//! - **Ranks.** One fake rank per host (`fixtures/scale_rank.c`, no MPI, blocked in
//!   `main → rank_body → wait_here`), with `OMPI_COMM_WORLD_RANK` set as a launcher would:
//!   each agent checks it against the table. Ranks are listed host by host with the nodes
//!   interleaved (`node2, node3, …, node33, node2a1, …`), so that each subtree of the tree spans
//!   many nodes, and the pids are node-local (they repeat across nodes).
//! - **Starter.** `fixtures/table_starter.c` in node1 publishes the table (host, node-local
//!   pid, executable) written by the test, the way a starter does (`MPIR_proctable`,
//!   `MPIR_debug_state`); it is started before the ranks, as a real starter is.
//! - **Front end.** `mpir stacks|queues --starter PID --agent-launch "nsrsh {host} {agent}"
//!   --agent-fanout 16 --json` inside node1: the front end starts 16 agents, each of which
//!   starts 15 through the same template (every start crosses nodes through the cluster's
//!   ssh stand-in, as ssh would on a real cluster).
//!
//! It asserts: every rank in the merged stack tree under `main → rank_body → wait_here`, none
//! unreached, coverage complete; every rank answered *by its agent* in the queues document
//! (the agent's own reading of a process without MPI), none with an agent failure (not
//! started, unreachable, timed out, wrong answer); the tree was used, for each request (256
//! agents, one per host, each inside the node its `--node` names, each started once, at most
//! 16 by the front end, the rest by agents: the launch template is wrapped by two scripts of
//! the test's that leave a record per agent start and per agent, so that the tree is known
//! however briefly its agents lived); afterwards no agent or `nsrsh` is left on any node
//! and every rank runs on, neither stopped nor traced. Times are printed, not asserted.
//!
//! Measured (2 cores, debug build, machine otherwise idle, symbol store warm): cluster up
//! 2.8 s, ranks 0.12 s; per request the first agent starts after ~0.12 s, the last after
//! ~3.7 s, and `mpir` is done after 5–6 s; the whole test 15 s. Before the symbol store
//! (each agent inflating libc's compressed separate debug file, ~0.25 s of CPU a rank) and
//! with another developer's benchmark running: `mpir` done after 41–51 s.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::mpir;
use mpir_acquire::testkit::multinode::{Cluster, NodeChild, OwnCluster};
use mpir_target::testkit::{have, run, scratch, skip, wait_for};

/// Nodes of the cluster: node1 (the front end) and 32 nodes with ranks.
const NODES: usize = 33;
/// Host names each node answers to.
const NAMES: usize = 8;
/// Hosts, agents and ranks: (NODES - 1) × NAMES.
const HOSTS: usize = (NODES - 1) * NAMES;
/// Most agents the front end, or an agent, starts itself.
const FANOUT: usize = 16;

/// One process of the machine, as seen from the host.
#[derive(Debug, Clone)]
struct Proc {
    /// The node whose PID namespace it is in (`None`: the host's or another's).
    node: Option<usize>,
    comm: String,
    cmdline: Vec<String>,
}

/// Every process of the machine that is in one of `cluster`'s nodes.
fn snapshot(cluster: &Cluster) -> HashMap<u32, Proc> {
    let ns: HashMap<PathBuf, usize> = (1..=cluster.nodes())
        .filter_map(|n| {
            Some((
                std::fs::read_link(format!("/proc/{}/ns/pid", cluster.init_pid(n))).ok()?,
                n,
            ))
        })
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let node = ns
                .get(&std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?)
                .copied();
            node?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
                    .map(str::to_string)
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            Some((
                pid,
                Proc {
                    node,
                    comm: field("Name:")?,
                    cmdline,
                },
            ))
        })
        .collect()
}

/// The tree one request used, from the records its launches left: the template is
/// `launch.sh DIR {host} agent.sh DIR {agent}` (see [`Recorder`]), so every agent start leaves
/// a launch record (the node and command line of the process that started it, and the host)
/// and every agent a record of its own (its node, its `--node`), whatever their lifetimes.
/// Snapshots of the process table, which this test used before, miss agents that start,
/// answer and exit between two of them (CI, symbol store warm: 235 of 256 seen).
#[derive(Debug, Default, Clone)]
struct TreeSeen {
    /// Agents (`mpir agent`): their node and the host their `--node` names, one per record.
    agents: Vec<(usize, String)>,
    /// Agent starts by the front end (`mpir stacks|queues`), by host.
    by_front_end: Vec<String>,
    /// Agent starts by an agent, by host.
    by_agents: Vec<String>,
    /// When the first and the last agent started (seconds of `/proc/uptime`).
    first_up: Option<f64>,
    last_up: Option<f64>,
}

/// The wrappers of one request's agent launch, and the directory where they leave records.
struct Recorder {
    dir: PathBuf,
    launch: PathBuf,
    agent: PathBuf,
}

impl Recorder {
    /// Writes the two wrappers into `dir` (a fresh `records/` beside them): `launch.sh`
    /// records who starts an agent for which host and runs `nsrsh`; `agent.sh`, inside the
    /// agent's node, records the node and the agent's arguments and becomes the agent.
    fn new(cluster: &Cluster, dir: &Path) -> Recorder {
        let records = dir.join("records");
        let _ = std::fs::remove_dir_all(&records);
        std::fs::create_dir_all(&records).unwrap();
        let launch = dir.join("launch.sh");
        let agent = dir.join("agent.sh");
        let scripts = [
            (
                &launch,
                format!(
                    "#!/bin/sh\n\
                     # launch.sh DIR HOST COMMAND...: records who starts an agent on HOST\n\
                     dir=$1 host=$2; shift 2\n\
                     read up _ < /proc/uptime\n\
                     f=$(mktemp \"$dir/launch.XXXXXX\")\n\
                     printf 'launch\\t%s\\t%s\\t%s\\t%s\\n' \"$up\" \"$(readlink /proc/self/ns/pid)\" \
                     \"$host\" \"$(tr '\\0' ' ' < /proc/$PPID/cmdline)\" > \"$f\"\n\
                     exec {} \"$host\" \"$@\"\n",
                    cluster.nsrsh().display()
                ),
            ),
            (
                &agent,
                "#!/bin/sh\n\
                 # agent.sh DIR AGENT...: records the agent's node and arguments, then is the agent\n\
                 dir=$1; shift\n\
                 read up _ < /proc/uptime\n\
                 f=$(mktemp \"$dir/agent.XXXXXX\")\n\
                 printf 'agent\\t%s\\t%s\\t%s\\n' \"$up\" \"$(readlink /proc/self/ns/pid)\" \"$*\" > \"$f\"\n\
                 exec \"$@\"\n"
                    .to_string(),
            ),
        ];
        for (path, text) in scripts {
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        Recorder {
            dir: records,
            launch,
            agent,
        }
    }

    /// The `--agent-launch` template.
    fn template(&self) -> String {
        format!(
            "{} {} {{host}} {} {} {{agent}}",
            self.launch.display(),
            self.dir.display(),
            self.agent.display(),
            self.dir.display()
        )
    }

    /// The tree the records show; a record that is neither an agent nor a start by the
    /// front end or an agent fails the test.
    fn tree(&self, cluster: &Cluster) -> TreeSeen {
        let ns: HashMap<String, usize> = (1..=cluster.nodes())
            .filter_map(|n| {
                let link = std::fs::read_link(format!("/proc/{}/ns/pid", cluster.init_pid(n)));
                Some((link.ok()?.to_string_lossy().into_owned(), n))
            })
            .collect();
        let mut tree = TreeSeen::default();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let fields: Vec<&str> = text.trim_end_matches('\n').split('\t').collect();
            let node = |f: &str| {
                *ns.get(f)
                    .unwrap_or_else(|| panic!("{}: {text:?} is in no node", path.display()))
            };
            let up: f64 = fields
                .get(1)
                .and_then(|u| u.parse().ok())
                .unwrap_or_else(|| panic!("{}: {text:?} has no time", path.display()));
            match fields.as_slice() {
                ["agent", _, pid_ns, args] => {
                    let words: Vec<&str> = args.split(' ').collect();
                    assert_eq!(words.get(1), Some(&"agent"), "{}: {text:?}", path.display());
                    let host = words
                        .iter()
                        .position(|w| *w == "--node")
                        .and_then(|i| words.get(i + 1))
                        .unwrap_or_else(|| panic!("{}: no --node in {text:?}", path.display()));
                    tree.agents.push((node(pid_ns), host.to_string()));
                    tree.first_up = Some(tree.first_up.map_or(up, |f| f.min(up)));
                    tree.last_up = Some(tree.last_up.map_or(up, |l| l.max(up)));
                }
                ["launch", _, pid_ns, host, parent] => {
                    let words: Vec<&str> = parent.split(' ').collect();
                    match words.get(1) {
                        Some(&"agent") => tree.by_agents.push(host.to_string()),
                        Some(&"stacks" | &"queues") if node(pid_ns) == 1 => {
                            tree.by_front_end.push(host.to_string());
                        }
                        _ => panic!("{}: started by what? {text:?}", path.display()),
                    }
                }
                _ => panic!("{}: not a record: {text:?}", path.display()),
            }
        }
        tree
    }
}

/// What `mpir` printed, the tree its records show, and when its agents started.
struct Run {
    out: Output,
    tree: TreeSeen,
    /// When the command started (seconds of `/proc/uptime`).
    started_up: f64,
    took: Duration,
}

impl Run {
    /// Its times (from the command's start) and the tree.
    fn print(&self, what: &str) {
        let after =
            |t: Option<f64>| Duration::from_secs_f64((t.unwrap_or(0.0) - self.started_up).max(0.0));
        println!(
            "{what}: first agent started after {:.1?}, last after {:.1?} ({} agents), mpir done \
             (answer printed, agents said goodbye) after {:.1?}; {} agents started by the front \
             end, {} by agents",
            after(self.tree.first_up),
            after(self.tree.last_up),
            self.tree.agents.len(),
            self.took,
            self.tree.by_front_end.len(),
            self.tree.by_agents.len()
        );
    }
}

/// Seconds since boot, as the wrappers' `/proc/uptime` reads them.
fn uptime() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/uptime")
}

/// `mpir ARGS` inside node1 (bounded), its agents started through `recorder`'s wrappers
/// when it has one.
fn mpir_in_node1(cluster: &Cluster, args: &[&str], recorder: Option<&Recorder>) -> Run {
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", "300"])
        .arg(mpir().get_program())
        .args(args);
    let template = recorder.map(Recorder::template);
    if let Some(t) = &template {
        c.args(["--agent-launch", t]);
    }
    let started = Instant::now();
    let started_up = uptime();
    let out = cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap();
    Run {
        out,
        tree: recorder.map(|r| r.tree(cluster)).unwrap_or_default(),
        started_up,
        took: started.elapsed(),
    }
}

/// The fixtures, compiled with debug information and no optimisation (no call inlined).
fn compile(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    if !have("cc") {
        skip("no C compiler (cc) for the fixtures");
        return None;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for name in ["table_starter", "scale_rank"] {
        let exe = dir.join(name);
        run(Command::new("cc")
            .args(["-g", "-O0", "-o"])
            .arg(&exe)
            .arg(fixtures.join(format!("{name}.c"))))
        .unwrap_or_else(|e| panic!("{e}"));
        out.push(exe);
    }
    Some((out[0].clone(), out[1].clone()))
}

/// A rank: its number, node, host name and node-local pid.
#[derive(Debug, Clone)]
struct Rank {
    rank: usize,
    node: usize,
    host: String,
    pid: u32,
}

/// Starts one fake rank per host of node2..N (rank numbers: hosts by alias index, nodes
/// interleaved), each with `OMPI_COMM_WORLD_RANK`, detached from the test (the node's init
/// reaps them); the nodes' starters run at the same time.
fn start_ranks(cluster: &Cluster, exe: &Path, per_node: usize) -> Vec<Rank> {
    let names: Vec<Vec<String>> = (2..=cluster.nodes())
        .map(|n| cluster.host_names(n))
        .collect();
    assert!(
        names.iter().all(|n| n.len() == per_node),
        "each node should answer to {per_node} names: {names:?}"
    );
    let mut planned: Vec<(usize, usize, String)> = Vec::new();
    for a in 0..per_node {
        for (i, n) in names.iter().enumerate() {
            planned.push((planned.len(), i + 2, n[a].clone()));
        }
    }
    let starters: Vec<_> = (2..=cluster.nodes())
        .map(|node| {
            let ranks: Vec<String> = planned
                .iter()
                .filter(|(_, n, _)| *n == node)
                .map(|(r, _, _)| r.to_string())
                .collect();
            let mut sh = Command::new("/bin/sh");
            sh.arg("-c")
                .arg(
                    "exe=$1; shift; for r in \"$@\"; do \
                     OMPI_COMM_WORLD_RANK=$r \"$exe\" </dev/null >/dev/null 2>&1 & \
                     echo \"$r $!\"; done",
                )
                .arg("sh")
                .arg(exe)
                .args(ranks);
            let child = cluster
                .run_in(node, &sh)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            (node, child)
        })
        .collect();
    let mut pids: HashMap<usize, u32> = HashMap::new();
    for (node, child) in starters {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "starting node{node}'s ranks failed");
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let (r, p) = l.split_once(' ').unwrap();
            pids.insert(r.parse().unwrap(), p.parse().unwrap());
        }
    }
    planned
        .into_iter()
        .map(|(rank, node, host)| Rank {
            rank,
            node,
            pid: *pids
                .get(&rank)
                .unwrap_or_else(|| panic!("rank {rank} not started")),
            host,
        })
        .collect()
}

/// The functions from the root to the node with index `i` of a stacks document's tree.
fn path_to(nodes: &[serde_json::Value], mut i: usize) -> Vec<String> {
    let mut path = Vec::new();
    loop {
        path.push(
            nodes[i]["function"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        match nodes[i]["parent"].as_u64() {
            Some(p) => i = usize::try_from(p).unwrap(),
            None => break,
        }
    }
    path.reverse();
    path
}

/// The failures of an agent itself, as a rank's error says them
/// (`mpir_session::AgentFailure`'s words): none of them may appear.
const AGENT_FAILURES: [&str; 4] = [
    "its agent could not be started",
    "its agent cannot be reached",
    "its agent did not answer in time",
    "its agent answered wrongly",
];

/// The tree a request used, from its records: one agent per host with a rank, each in the
/// node that answers to that host, each started once; at most FANOUT started by the front
/// end, the others by agents.
fn assert_tree(cluster: &Cluster, what: &str, run: &Run, ranks: &[Rank]) {
    let tree = &run.tree;
    assert_eq!(
        tree.agents.len(),
        HOSTS,
        "{what}: {} agents recorded, want {HOSTS}",
        tree.agents.len()
    );
    let mut hosts: Vec<&str> = tree.agents.iter().map(|(_, h)| h.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    assert_eq!(hosts.len(), HOSTS, "{what}: one agent per host");
    for (node, host) in &tree.agents {
        assert!(
            cluster.host_names(*node).contains(host),
            "{what}: the agent for {host} runs in node{node}"
        );
        assert!(ranks.iter().any(|r| &r.host == host && r.node == *node));
    }
    let (by_front_end, by_agents) = (tree.by_front_end.len(), tree.by_agents.len());
    assert!(
        (1..=FANOUT).contains(&by_front_end),
        "{what}: the front end started {by_front_end} agents itself (fanout {FANOUT})"
    );
    let mut started: Vec<&str> = tree
        .by_front_end
        .iter()
        .chain(&tree.by_agents)
        .map(String::as_str)
        .collect();
    started.sort_unstable();
    assert_eq!(
        started, hosts,
        "{what}: {by_front_end} agents started by the front end, {by_agents} by agents: one \
         start per host"
    );
}

/// Afterwards: no agent and no `nsrsh` on any node (bounded wait: agents let go and exit on
/// the front end's goodbye), and every rank runs on, neither stopped nor traced.
fn assert_clean(cluster: &Cluster, what: &str, ranks: &[Rank]) {
    let mut left = Vec::new();
    let gone = wait_for(20, || {
        left = snapshot(cluster)
            .into_values()
            .filter(|p| p.comm == "mpir" || p.comm == "nsrsh")
            .map(|p| (p.node, p.cmdline.join(" ")))
            .collect();
        left.is_empty()
    });
    assert!(gone, "{what}: left behind: {left:?}");
    for r in ranks {
        let host_pid = cluster.host_pid(r.node, r.pid).unwrap_or_else(|| {
            panic!(
                "{what}: rank {} (pid {} on node{}) is gone",
                r.rank, r.pid, r.node
            )
        });
        mpir_target::testkit::assert_untouched(host_pid);
    }
}

/// The starter in node1 (first: it waits for its table), then one rank per host of
/// node2..N, then the table: the starter and the ranks.
fn start_job(
    cluster: &Cluster,
    dir: &Path,
    starter_exe: &Path,
    rank_exe: &Path,
    per_node: usize,
) -> (NodeChild, Vec<Rank>) {
    let table = dir.join("table");
    let mut cmd = Command::new(starter_exe);
    cmd.arg(&table);
    let mut wrapped = cluster.run_in(1, &cmd);
    wrapped
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut starter = cluster.spawn(1, wrapped);
    let t = Instant::now();
    let ranks = start_ranks(cluster, rank_exe, per_node);
    println!("{} ranks started in {:.1?}", ranks.len(), t.elapsed());
    let text: String = ranks
        .iter()
        .map(|r| format!("{} {} {}\n", r.host, r.pid, rank_exe.display()))
        .collect();
    let tmp = dir.join("table.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &table).unwrap();
    let mut line = String::new();
    BufReader::new(starter.child().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("table {}", ranks.len()),
        "the starter said {line:?}"
    );
    (starter, ranks)
}

/// One scale test at a time: each brings up a cluster of its own and keeps both cores busy
/// (256 agents unwinding their ranks); run side by side, the 256-host requests took 73–78 s
/// instead of 60–76 s and `mpir stacks` came back partial (exit 4) in 3 of 4 runs.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn agents_on_256_hosts_answer_stacks_and_queues_through_a_tree() {
    let _one = ONE_CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let whole = Instant::now();
    let dir = scratch("cli-mn-scale");
    let Some((starter_exe, rank_exe)) = compile(&dir) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci-multinode.sh");
    // A fixed place, so that CI's clean-up finds it (`MPIR_MULTINODE_DIR=… ci-multinode.sh
    // down` when the test was killed); one test process at a time (OwnCluster's lock).
    let state = std::env::temp_dir().join("mpir-rs-mn-scale");
    let t = Instant::now();
    let Some(own) = OwnCluster::up(&script, &state, NODES, NAMES) else {
        return;
    };
    let cluster = own.cluster();
    println!(
        "cluster of {NODES} nodes × {NAMES} names up in {:.1?}",
        t.elapsed()
    );

    let (mut starter, ranks) = start_job(cluster, &dir, &starter_exe, &rank_exe, NAMES);
    let starter_pid = starter.local_pid.to_string();
    let fanout = FANOUT.to_string();
    let args = |command: &'static str| {
        vec![
            command,
            "--starter",
            &starter_pid,
            "--agent-fanout",
            &fanout,
            "--json",
        ]
    };

    // Stacks: every rank in the merged tree, under the fixture's call chain.
    let stacks = mpir_in_node1(
        cluster,
        &args("stacks"),
        Some(&Recorder::new(cluster, &dir.join("stacks"))),
    );
    let stderr = String::from_utf8_lossy(&stacks.out.stderr);
    stacks.print("stacks");
    if stacks.out.status.code() != Some(0) {
        // What was not read, and why: the document says (stderr is empty on a partial read).
        let d = common::json_doc(&stacks.out);
        println!(
            "unreached: {:#}\ncoverage: {:#}",
            d["unreached"], d["coverage"]
        );
    }
    assert_eq!(stacks.out.status.code(), Some(0), "mpir stacks: {stderr}");
    let doc = common::json_doc(&stacks.out);
    common::validate(&doc);
    assert_eq!(doc["coverage"]["ranks"], HOSTS, "{}", doc["coverage"]);
    assert_eq!(doc["coverage"]["read"], HOSTS, "{}", doc["coverage"]);
    assert_eq!(doc["unreached"], serde_json::json!([]), "{stderr}");
    let nodes = doc["nodes"].as_array().unwrap();
    let all = format!("0-{}", HOSTS - 1);
    let wait = nodes
        .iter()
        .position(|n| n["function"] == "wait_here")
        .unwrap_or_else(|| panic!("no wait_here in the tree: {doc:#}"));
    assert_eq!(nodes[wait]["ranks"], all.as_str(), "{}", nodes[wait]);
    let path = path_to(nodes, wait);
    let at = |f: &str| path.iter().position(|p| p == f);
    assert!(
        matches!((at("main"), at("rank_body")), (Some(m), Some(b)) if m + 1 == b && b + 1 == path.len() - 1),
        "wait_here is reached through {path:?}"
    );
    assert_tree(cluster, "stacks", &stacks, &ranks);
    assert_clean(cluster, "stacks", &ranks);

    // Queues: every rank answered by its agent (a process without MPI has no queues to
    // read), none for want of its agent.
    let queues = mpir_in_node1(
        cluster,
        &args("queues"),
        Some(&Recorder::new(cluster, &dir.join("queues"))),
    );
    let stderr = String::from_utf8_lossy(&queues.out.stderr);
    queues.print("queues");
    let doc = common::json_doc(&queues.out);
    common::validate(&doc);
    let read = doc["ranks"].as_array().unwrap();
    assert_eq!(read.len(), HOSTS, "{doc:#}");
    for (r, want) in read.iter().zip(&ranks) {
        assert_eq!(r["rank"], want.rank, "{r}");
        assert_eq!(r["pid"], want.pid, "{r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            !AGENT_FAILURES.iter().any(|f| error.contains(f)),
            "rank {} was not answered by its agent: {r}",
            want.rank
        );
        // Its agent opened it, looked for an MPI's queues and said so, naming its host.
        assert!(
            error.contains(&format!("on {}: ", want.host))
                && error.contains("the process exports no message queues"),
            "rank {}: {r}",
            want.rank
        );
    }
    assert_eq!(queues.out.status.code(), Some(4), "mpir queues: {stderr}");
    assert_tree(cluster, "queues", &queues, &ranks);
    assert_clean(cluster, "queues", &ranks);

    starter.stop();
    println!("whole test: {:.1?}", whole.elapsed());
}

/// One agent whose start is slow (its launcher waits 12 s, as an ssh to a loaded node may)
/// keeps no other agent waiting: the others are welcomed and adopted at once, not after it
/// (an agent waits 10 s for its welcome: the front end used to greet its agents one after
/// the other, and every agent after a slow one gave up). A cluster of its own: node2..4,
/// one rank each, no tree.
#[test]
fn a_slow_agent_start_keeps_no_other_agent_waiting() {
    let _one = ONE_CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch("cli-mn-slow-start");
    let Some((starter_exe, rank_exe)) = compile(&dir) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci-multinode.sh");
    let state = std::env::temp_dir().join("mpir-rs-mn-slow-start");
    let Some(own) = OwnCluster::up(&script, &state, 4, 1) else {
        return;
    };
    let cluster = own.cluster();
    let (mut starter, ranks) = start_job(cluster, &dir, &starter_exe, &rank_exe, 1);
    assert_eq!(ranks[0].host, "node2", "{ranks:?}");
    // node2's agent (the first) starts 12 s late; the others at once.
    let launcher = dir.join("slow-launch.sh");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\n[ \"$1\" = node2 ] && sleep 12\nexec {} \"$@\"\n",
            cluster.nsrsh().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &launcher,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let starter_pid = starter.local_pid.to_string();
    let launch = format!("{} {{host}} {{agent}}", launcher.display());
    let run = mpir_in_node1(
        cluster,
        &[
            "stacks",
            "--starter",
            &starter_pid,
            "--agent-launch",
            &launch,
            "--json",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&run.out.stderr);
    assert_eq!(run.out.status.code(), Some(0), "mpir stacks: {stderr}");
    let doc = common::json_doc(&run.out);
    assert_eq!(doc["coverage"]["read"], ranks.len(), "{stderr}");
    assert_eq!(doc["unreached"], serde_json::json!([]), "{stderr}");
    assert!(
        run.took >= Duration::from_secs(12),
        "node2's start was not slow"
    );
    assert_clean(cluster, "slow start", &ranks);
    starter.stop();
}
