//! Ranks on other nodes (issue 21), on the simulated cluster of `scripts/ci-multinode.sh`
//! (`$MPIR_MULTINODE`): a 24-rank Open MPI job on node2..node4 (8 ranks each; every rank
//! waits for a receive nobody matches, in a sleeping `MPI_Test` loop: Open MPI's blocking
//! `MPI_Recv` spins, and two such jobs would starve the two cores) read
//! from node1 through agents started by the cluster's ssh (`nsrsh`), against the same job
//! shape with its 24 ranks on node1 (read directly), and against gdb run on each rank's node
//! through the same ssh, one per rank (what a user without a tool does).
//!
//! The front end runs inside node1: this program runs itself there (`--agents-inner`) to time
//! the library calls — agents started and every node's first answer, then single requests —
//! while `mpir stacks` and gdb are timed as whole processes from the host.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpir_agent::{FrontEndOptions, Launch};
use mpir_benches::median;
use mpir_session::{Session, SessionOptions, StackOptions};

use crate::Config;

/// Ranks per node, and the nodes (the front end is node1).
const PER_NODE: usize = 8;
const NODES: [usize; 3] = [2, 3, 4];

const RING_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, buf[4];
    char host[64];
    alarm(3600);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    printf("rank %d pid %d on %s\n", rank, (int)getpid(), host);
    fflush(stdout);
    /* A receive nobody matches, waited for in a sleeping loop: Open MPI's blocking
       MPI_Recv spins, and 48 spinning ranks on two cores starve everything else. */
    MPI_Request req;
    int done = 0;
    MPI_Irecv(buf, 4, MPI_INT, (rank + 1) % size, 42, MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        usleep(50000);
    }
    MPI_Finalize();
    return 0;
}
"#;

/// A job started in node1, killed (with its `nsenter`) when dropped.
struct NodeJob {
    child: std::process::Child,
    /// (rank, node-local pid, host) as the ranks printed them.
    ranks: Vec<(u64, u32, String)>,
    /// orterun's pid inside node1.
    starter: u32,
}

impl Drop for NodeJob {
    fn drop(&mut self) {
        // orterun ends its job when told to.
        if let Some(host) = host_pid_of_child(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(host as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}

/// The first child of `pid` (the program `nsenter` started).
fn host_pid_of_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A process's pid in its own PID namespace (the last `NSpid` field).
fn ns_pid(host: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{host}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

fn init_of(mn: &Path, node: usize) -> Option<u32> {
    std::fs::read_to_string(mn.join(format!("run/node{node}.pid")))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `cmd` run inside node1 (its PID, UTS and mount namespaces), killed after `secs` unless
/// 0 (a benchmark that hangs tells nothing: it fails instead).
fn in_node1(init: u32, secs: u32, cmd: &mut Command) -> Command {
    let mut c = if secs == 0 {
        Command::new("nsenter")
    } else {
        let mut t = Command::new("timeout");
        t.args(["-s", "KILL", &secs.to_string(), "nsenter"]);
        t
    };
    c.args(["-t", &init.to_string(), "-p", "-u", "-m", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

fn start_job(init: u32, mn: &Path, exe: &Path, hosts: &str, n: usize) -> Option<NodeJob> {
    let mut orterun = Command::new("orterun");
    orterun
        .args(["--mca", "plm_rsh_agent"])
        .arg(mn.join("bin/nsrsh"))
        .args(["--mca", "oob_tcp_if_include", "lo"])
        .args(["--mca", "btl_tcp_if_include", "lo"])
        .args(["--mca", "btl", "self,vader,tcp"])
        .args(["--oversubscribe", "--host", hosts, "-n", &n.to_string()])
        .arg(exe);
    // Not bounded here: the job is the nsenter's child, ended when dropped (and by its alarm).
    let mut c = in_node1(init, 0, &mut orterun);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().ok()?;
    let out = BufReader::new(child.stdout.take()?);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["rank", r, "pid", p, "on", h] = w[..]
                && let (Ok(r), Ok(p)) = (r.parse(), p.parse())
            {
                let _ = tx.send((r, p, h.to_string()));
            }
        }
    });
    let mut ranks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while ranks.len() < n && Instant::now() < deadline {
        if let Ok(r) = rx.recv_timeout(Duration::from_millis(200)) {
            ranks.push(r);
        }
    }
    ranks.sort();
    let starter = host_pid_of_child(child.id()).and_then(ns_pid)?;
    let job = NodeJob {
        child,
        ranks,
        starter,
    };
    // Every rank in its waiting loop.
    std::thread::sleep(Duration::from_millis(500));
    (job.ranks.len() == n).then_some(job)
}

pub(crate) fn agents(cfg: &Config, dir: &Path) {
    println!("## Ranks on other nodes: agents on the simulated cluster\n");
    let Some(mn) = std::env::var_os("MPIR_MULTINODE").map(PathBuf::from) else {
        println!(
            "No simulated cluster ($MPIR_MULTINODE, scripts/ci-multinode.sh): not measured.\n"
        );
        return;
    };
    let Some(init) = init_of(&mn, 1) else {
        println!("The simulated cluster is not up: not measured.\n");
        return;
    };
    eprintln!("compare: agents");
    let src = dir.join("ring24.c");
    let exe = dir.join("ring24");
    std::fs::write(&src, RING_C).expect("write the ring");
    let built = Command::new("mpicc.openmpi")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        println!("No Open MPI (mpicc.openmpi): not measured.\n");
        return;
    }
    // Built before the jobs start (their ranks are 48 processes on this machine).
    let mpir = crate::mpir_binary();
    let n = PER_NODE * NODES.len();
    let hosts: Vec<String> = NODES
        .iter()
        .map(|i| format!("node{i}:{PER_NODE}"))
        .collect();
    let Some(remote) = start_job(init, &mn, &exe, &hosts.join(","), n) else {
        println!("The {n}-rank job on node2..4 did not start: not measured.\n");
        return;
    };
    let Some(local) = start_job(init, &mn, &exe, &format!("node1:{n}"), n) else {
        println!("The {n}-rank job on node1 did not start: not measured.\n");
        return;
    };
    eprintln!("compare: agents: both jobs up ({n} ranks each)");
    let nsrsh = mn.join("bin/nsrsh");
    let template = format!("{} {{host}} {{agent}}", nsrsh.display());

    // The library, inside node1.
    let me = std::env::current_exe().expect("current exe");
    let mut inner = Command::new(&me);
    inner
        .arg("--agents-inner")
        .arg(remote.starter.to_string())
        .arg(local.starter.to_string())
        .arg(&template)
        .arg(&mpir)
        .arg(cfg.runs.to_string());
    let o = in_node1(init, 1800, &mut inner)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the inner front end");
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("compare: agents: library timings done");
    let value = |key: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
    };

    // `mpir stacks --json` end to end, inside node1.
    let e2e = |starter: u32, agents: bool| {
        median(cfg.runs, || {
            let mut c = Command::new(&mpir);
            c.args(["stacks", "--json", "--starter", &starter.to_string()]);
            if agents {
                c.args(["--agent-launch", &template]);
            }
            let (_, out) = crate::run_to_end(&mut in_node1(init, 300, &mut c), true);
            let doc = String::from_utf8_lossy(&out);
            assert!(
                doc.contains(&format!("\"read\": {n}")),
                "not every rank read: {doc:.2000}"
            );
        })
    };
    let e2e_local = e2e(local.starter, false);
    eprintln!("compare: agents: mpir stacks, {n} ranks here, done");
    let e2e_agents = e2e(remote.starter, true);
    eprintln!("compare: agents: mpir stacks through agents done");

    // gdb on each rank's node through the same ssh, one after the other.
    let gdb = (cfg.gdb && mpir_benches::have("gdb")).then(|| {
        median(cfg.gdb_runs, || {
            for (rank, pid, host) in &remote.ranks {
                let o = Command::new("timeout")
                    .args(["-s", "KILL", "120"])
                    .arg(&nsrsh)
                    .arg(host)
                    .args([
                        "gdb",
                        "-nx",
                        "-batch",
                        "-p",
                        &pid.to_string(),
                        "-ex",
                        // ssh (and nsrsh) hand the words to a shell on the node: quoted.
                        "'thread apply all bt'",
                    ])
                    .stdin(Stdio::null())
                    .output()
                    .expect("gdb through nsrsh");
                let t = String::from_utf8_lossy(&o.stdout);
                assert!(t.contains("main"), "gdb on rank {rank}: {t:.500}");
            }
        })
    });
    // The floor of an agent's start: the engine alone, `nsrsh HOST true` on every node at
    // once (from node1, as the front end starts them).
    let floor = median(cfg.runs, || {
        let mut children: Vec<_> = NODES
            .iter()
            .map(|i| {
                let mut c = Command::new(&nsrsh);
                c.arg(format!("node{i}")).arg("true");
                in_node1(init, 60, &mut c)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("nsrsh")
            })
            .collect();
        for c in &mut children {
            assert!(c.wait().expect("wait").success(), "nsrsh true");
        }
    });
    let ms = |s: Option<f64>| s.map_or_else(|| "—".into(), |s| format!("{:.1} ms", s * 1e3));
    println!(
        "| what | {n} ranks on node1 (this node, read directly) | {n} ranks on node2..4 (3 agents) | gdb per rank on its node (via the same ssh) |"
    );
    println!("|---|---|---|---|");
    println!(
        "| floor: the engine alone, `nsrsh HOST true` on the 3 nodes at once | — | {} | — |",
        ms(Some(floor))
    );
    println!(
        "| agents started + every node's first stacks answer (library) | — | {} | — |",
        ms(value("first"))
    );
    println!(
        "| one stacks request, every rank (library, agents already up) | {} | {} | — |",
        ms(value("local_stacks")),
        ms(value("agent_stacks"))
    );
    println!(
        "| `mpir stacks --json` end to end (process, from node1) | {} | {} | {} |",
        ms(Some(e2e_local)),
        ms(Some(e2e_agents)),
        ms(gdb)
    );
    if let (Some(g), a) = (gdb, e2e_agents) {
        println!(
            "\ngdb per rank / ours through agents, end to end: {:.0}×.\n",
            g / a
        );
    } else {
        println!();
    }
    drop(remote);
    drop(local);
}

/// Inside node1: the library's timings, one `key seconds` line each.
pub(crate) fn inner(args: &[String]) {
    let [remote, local, template, mpir, runs] = args else {
        eprintln!("compare --agents-inner REMOTE_STARTER LOCAL_STARTER TEMPLATE MPIR RUNS");
        std::process::exit(2);
    };
    let (remote, local): (u32, u32) = (remote.parse().unwrap(), local.parse().unwrap());
    let runs: usize = runs.parse().unwrap();
    let stacks = StackOptions::default();
    let options = || {
        FrontEndOptions::default()
            .with_launch(Launch::Template(template.clone()))
            .with_agent(vec![mpir.into(), "agent".into()])
    };
    // Timed from the start of the agents (the session's own acquisition is not theirs).
    let mut firsts: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let mut s = Session::attach(remote, SessionOptions::default()).expect("attach");
            let start = Instant::now();
            mpir_agent::reach(&mut s, options()).expect("agents");
            let read = s.stacks(&stacks).expect("stacks");
            let took = start.elapsed().as_secs_f64();
            assert!(
                read.last().unreached.is_empty(),
                "{:?}",
                read.last().unreached
            );
            s.leave_other_nodes();
            took
        })
        .collect();
    firsts.sort_by(f64::total_cmp);
    println!("first {}", firsts[firsts.len() / 2]);
    eprintln!("compare: agents (node1): first answers timed");
    let mut s = Session::attach(remote, SessionOptions::default()).expect("attach");
    mpir_agent::reach(&mut s, options()).expect("agents");
    let _ = s.stacks(&stacks).expect("warm");
    let agent_stacks = median(runs, || {
        let read = s.stacks(&stacks).expect("stacks");
        assert!(read.last().unreached.is_empty());
    });
    println!("agent_stacks {agent_stacks}");
    s.leave_other_nodes();
    let mut l = Session::attach(local, SessionOptions::default()).expect("attach local");
    let _ = l.stacks(&stacks).expect("warm");
    let local_stacks = median(runs, || {
        let read = l.stacks(&stacks).expect("stacks");
        assert!(read.last().unreached.is_empty());
    });
    println!("local_stacks {local_stacks}");
}
