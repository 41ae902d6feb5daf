//! How the agents scale with the nodes (issue 31, point 6): for 16, 64 and 252 simulated
//! nodes, one fake rank on each node of a cluster of its own
//! (`scripts/ci-multinode.sh` without Slurm, node1 the front end's, one PID+UTS+mount
//! namespace per node: an agent per *node*, not per host name, so that agents started at
//! once find their node where they run), published by a fake starter's MPIR table
//! (`mpir-cli/tests/fixtures/table_starter.c`, `scale_rank.c`, as in
//! `mpir-cli/tests/multinode_scale.rs`). The front end runs inside node1 (this program,
//! `--agents-scale-inner`), through the library, timing:
//!
//! - **start**: `mpir_agent::reach` — every agent started, connected, and its ranks proven
//!   (the session's own acquisition of the starter is not counted);
//! - **stacks**: one `Session::stacks` answer from every node, through the agents;
//! - **front-end CPU**: this process's user + system time over both, per node.
//!
//! Two engines: **hydra, one job** (`mpiexec.hydra -hosts … -ppn 1 -n N`, the agents
//! connecting back over TLS: the path of Slurm's one step too, which this machine cannot
//! simulate past three `slurmd`s) and a **command per node** (the cluster's ssh, `nsrsh`, as
//! a template: one launcher process per agent), both with the default fanout of 32 (past it
//! a tree: each root's agent starts its subtree the same way). One run per size: the
//! numbers are seconds on a shared two-core machine, each printed with the load average.
//!
//! 252, not 256: the simulated cluster gives node I the address 127.0.1.I, so it has 253
//! nodes at most (node1 the front end's). Host names that are aliases of one node (as
//! `multinode_scale.rs` uses for 256 hosts on 32 nodes) cannot stand in for nodes here:
//! agents started at once learn their node where they run, and two names of one node are
//! one node to them (the second agent finds the node's token taken). For the same reason
//! 1,024 is out of reach on this machine.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use mpir_acquire::testkit::multinode::{Cluster, NodeChild, OwnCluster};
use mpir_agent::{FrontEndOptions, Launch};
use mpir_session::{Session, SessionOptions, StackOptions};

/// The sizes measured (the simulated cluster has 253 nodes at most).
const SIZES: [usize; 3] = [16, 64, 252];

/// The 1-minute load average.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// This process's CPU time (user + system, every thread: `/proc/self/stat`), in seconds.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    ticks / hz
}

/// Inside node1: `STARTER MPIR ENGINE NSRSH`; prints `start`, `stacks`, `cpu`, `read`.
pub(crate) fn inner(args: &[String]) {
    let [starter, mpir, engine, nsrsh] = args else {
        eprintln!("compare --agents-scale-inner STARTER MPIR hydra|template NSRSH");
        std::process::exit(2);
    };
    let starter: u32 = starter.parse().expect("starter pid");
    let launch = match engine.as_str() {
        "hydra" => Launch::Hydra {
            mpiexec: "/usr/bin/mpiexec.hydra".into(),
            options: vec![
                "-launcher".into(),
                "ssh".into(),
                "-launcher-exec".into(),
                nsrsh.clone(),
            ],
            env: Vec::new(),
            token_dir: None,
        },
        _ => Launch::Template(format!("{nsrsh} {{host}} {{agent}}")),
    };
    let options = FrontEndOptions::default()
        .with_launch(launch)
        .with_agent(vec![mpir.into(), "agent".into()]);
    let mut s = Session::attach(starter, SessionOptions::default()).expect("attach");
    let (cpu0, t0) = (cpu(), Instant::now());
    let nodes = mpir_agent::reach(&mut s, options).expect("agents");
    let start = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let read = s.stacks(&StackOptions::default()).expect("stacks");
    let stacks = t1.elapsed().as_secs_f64();
    let used = cpu() - cpu0;
    let down = nodes.iter().filter(|n| n.down.is_some()).count();
    println!("start {start}");
    println!("stacks {stacks}");
    println!("cpu {used}");
    println!("unreached {}", read.last().unreached.len());
    println!("down {down}");
    s.leave_other_nodes();
}

/// The fixtures, compiled with debug information (`None` without a C compiler).
fn compile(dir: &Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-cli/tests/fixtures");
    let mut out = Vec::new();
    for name in ["table_starter", "scale_rank"] {
        let exe = dir.join(name);
        let ok = Command::new("cc")
            .args(["-g", "-O0", "-o"])
            .arg(&exe)
            .arg(fixtures.join(format!("{name}.c")))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        out.push(exe);
    }
    Some((out[0].clone(), out[1].clone()))
}

/// One fake rank on each of node2..=node(n+1), started at once per node; (host, pid).
fn start_ranks(cluster: &Cluster, exe: &Path, n: usize) -> Vec<(String, u32)> {
    let children: Vec<_> = (2..=n + 1)
        .map(|node| {
            let mut sh = Command::new("/bin/sh");
            sh.arg("-c")
                .arg(format!(
                    "OMPI_COMM_WORLD_RANK={} \"$0\" </dev/null >/dev/null 2>&1 & echo $!",
                    node - 2
                ))
                .arg(exe);
            let child = cluster
                .run_in(node, &sh)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a rank");
            (node, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(node, child)| {
            let out = child.wait_with_output().expect("rank started");
            let pid = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("pid");
            (format!("node{node}"), pid)
        })
        .collect()
}

/// A starter in node1 publishing `ranks` (the first `n`) of `exe`.
fn start_starter(
    cluster: &Cluster,
    dir: &Path,
    starter_exe: &Path,
    rank_exe: &Path,
    ranks: &[(String, u32)],
) -> NodeChild {
    let table = dir.join(format!("table-{}", ranks.len()));
    let mut cmd = Command::new(starter_exe);
    cmd.arg(&table);
    let mut wrapped = cluster.run_in(1, &cmd);
    wrapped
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut starter = cluster.spawn(1, wrapped);
    let text: String = ranks
        .iter()
        .map(|(h, p)| format!("{h} {p} {}\n", rank_exe.display()))
        .collect();
    let tmp = dir.join("table.tmp");
    std::fs::write(&tmp, text).expect("table");
    std::fs::rename(&tmp, &table).expect("table");
    let mut line = String::new();
    BufReader::new(starter.child().stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the starter's line");
    assert_eq!(line.trim(), format!("table {}", ranks.len()));
    starter
}

pub(crate) fn agents_scale(max: usize, dir: &Path) {
    println!("## Agents at scale: start and answer time against the node count\n");
    if !nix::unistd::geteuid().is_root() || !mpir_benches::have("mpiexec.hydra") {
        println!("Needs root (namespaces) and MPICH's mpiexec.hydra: not measured.\n");
        return;
    }
    let Some((starter_exe, rank_exe)) = compile(dir) else {
        println!("No C compiler for the fixtures: not measured.\n");
        return;
    };
    let mpir = crate::mpir_binary();
    let sizes: Vec<usize> = SIZES.iter().copied().filter(|&n| n <= max).collect();
    let biggest = *sizes.last().expect("sizes");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci-multinode.sh");
    let state = std::env::temp_dir().join("mpir-rs-mn-bench-scale");
    let t = Instant::now();
    let Some(own) = OwnCluster::up(&script, &state, biggest + 1, 1) else {
        println!("The simulated cluster could not be brought up: not measured.\n");
        return;
    };
    let cluster = own.cluster();
    eprintln!(
        "compare: agents-scale: {} nodes up in {:.0?}",
        biggest + 1,
        t.elapsed()
    );
    let ranks = start_ranks(cluster, &rank_exe, biggest);
    let me = std::env::current_exe().expect("current exe");
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!(
        "{date}; release build; one fake rank per node; fanout 32; one run per row; load = \
         the 1-minute load average just before the run (2 cores).\n"
    );
    println!(
        "| engine | nodes | start (s) | stacks answer (s) | front-end CPU per node (ms) | load |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for &n in &sizes {
        let mut starter = start_starter(cluster, dir, &starter_exe, &rank_exe, &ranks[..n]);
        for engine in ["hydra", "template"] {
            let before = load();
            let mut c = Command::new("timeout");
            c.args(["-s", "KILL", "1200"])
                .arg(&me)
                .arg("--agents-scale-inner")
                .arg(starter.local_pid.to_string())
                .arg(&mpir)
                .arg(engine)
                .arg(cluster.nsrsh());
            let o = cluster
                .run_in(1, &c)
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .expect("the inner front end");
            let text = String::from_utf8_lossy(&o.stdout);
            let value = |key: &str| -> Option<f64> {
                text.lines()
                    .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            };
            let name = if engine == "hydra" {
                "hydra, one job (TLS back)"
            } else {
                "a command per node (nsrsh)"
            };
            match (value("start "), value("stacks "), value("cpu ")) {
                (Some(s), Some(a), Some(c)) => {
                    let missed = value("unreached ").unwrap_or(0.0);
                    let note = if missed > 0.0 {
                        format!(" ({missed} ranks unread)")
                    } else {
                        String::new()
                    };
                    println!(
                        "| {name} | {n} | {s:.2} | {a:.2}{note} | {:.1} | {before} |",
                        c * 1000.0 / n as f64
                    );
                }
                _ => println!("| {name} | {n} | failed | | | {before} |"),
            }
        }
        starter.stop();
    }
    println!();
}
