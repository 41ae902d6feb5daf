//! The simulated multi-node cluster of `scripts/ci-multinode.sh` (issue 21), for tests of jobs
//! whose ranks run on other nodes than the tool: node1..N are PID+UTS+mount namespaces of this
//! machine (own pids, host names `nodeI` on 127.0.1.I), reached from the host with
//! `nsenter -t <node init> -p -u -m`, and from node to node through the cluster's ssh stand-in
//! `nsrsh` (Open MPI's rsh agent). With Slurm, slurmd runs in node2..N.
//!
//! A test runs on the host; the tool under test must run *inside* a node (node1, the front end)
//! to see what a tool on a real cluster sees: [`Cluster::run_in`] wraps any command, and
//! [`Cluster::this_test_in`] runs one test of the current test binary there (see
//! [`inner_test`]). From the host, a node's processes are listed with their node-local pids
//! ([`Cluster::processes`]), so a rank's table pid (local to its node) maps to the process
//! that can be checked ([`Cluster::assert_untouched`]).
//!
//! For tests only: these panic.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::{skip, wait_for};

/// Environment variable naming the cluster's state directory (the last line of
/// `scripts/ci-multinode.sh up`).
pub const ENV: &str = "MPIR_MULTINODE";

/// Environment variable that tells a re-run test binary which test runs inside a node, and
/// its argument ([`Cluster::this_test_in`], [`inner_test`]).
pub const INNER_ENV: &str = "MPIR_MULTINODE_INNER";

/// The cluster a test runs on: its state directory, its nodes' init processes (host pids,
/// checked against their recorded start times), Slurm's configuration if it runs. One test at
/// a time has it (an exclusive lock on `run/tests.lock`, held until the last clone is
/// dropped): jobs of two tests on the same nodes would see each other's ranks.
#[derive(Debug, Clone)]
pub struct Cluster {
    dir: PathBuf,
    inits: Vec<u32>,
    slurm: Option<PathBuf>,
    _lock: std::sync::Arc<TestLock>,
}

/// The exclusive lock of one test on the cluster.
struct TestLock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

impl std::fmt::Debug for TestLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestLock")
    }
}

/// Waits (up to 10 min) for the exclusive lock on `path`.
fn lock(path: &Path) -> Result<TestLock, String> {
    use nix::fcntl::{Flock, FlockArg};
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for _ in 0..6000 {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(TestLock(l)),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => file = f,
            Err((_, e)) => return Err(format!("lock {}: {e}", path.display())),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{} stayed locked for 10 min", path.display()))
}

/// A process of one node, as seen from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeProcess {
    /// Its pid on the host (what `/proc` of the host, and a test, can use).
    pub host_pid: u32,
    /// Its pid inside its node (what the node's own tools, and an MPIR table, say).
    pub local_pid: u32,
    /// Its parent's pid inside its node (0 for the node's init).
    pub local_ppid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub comm: String,
}

/// The start time (field 22 of `/proc/PID/stat`) of host process `pid`.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19).map(str::to_string)
}

fn ns_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// `NSpid` and `PPid` of host process `pid`: (innermost pid, parent's host pid).
fn ns_pids(pid: u32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let local = field("NSpid:")?.split_whitespace().last()?.parse().ok()?;
    let ppid = field("PPid:")?.parse().ok()?;
    Some((local, ppid))
}

impl Cluster {
    /// The cluster named by `$MPIR_MULTINODE`, if it is up; otherwise `None` after a
    /// [`skip`] with the reason (a failure under `MPIR_REQUIRE_PEERS=1`).
    pub fn from_env() -> Option<Cluster> {
        let Some(dir) = std::env::var_os(ENV) else {
            skip(&format!(
                "no simulated multi-node cluster: {ENV} is not set \
                 (MPIR_MULTINODE=$(scripts/ci-multinode.sh up | tail -n1))"
            ));
            return None;
        };
        match Cluster::open(Path::new(&dir)) {
            Ok(c) => Some(c),
            Err(e) => {
                skip(&format!("no simulated multi-node cluster at {dir:?}: {e}"));
                None
            }
        }
    }

    /// The cluster whose state directory is `dir`: every node's init still runs. Waits for the
    /// tests that have it (up to 10 min).
    ///
    /// # Errors
    /// What is missing.
    pub fn open(dir: &Path) -> Result<Cluster, String> {
        let run = dir.join("run");
        let config = std::fs::read_to_string(run.join("config"))
            .map_err(|e| format!("{}: {e} (not up?)", run.join("config").display()))?;
        let nodes: usize = config
            .split_whitespace()
            .find_map(|w| w.strip_prefix("nodes="))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("bad {}: {config:?}", run.join("config").display()))?;
        let mut inits = Vec::with_capacity(nodes);
        for i in 1..=nodes {
            let f = run.join(format!("node{i}.pid"));
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            let mut w = text.split_whitespace();
            let (Some(pid), Some(started)) = (w.next().and_then(|p| p.parse().ok()), w.next())
            else {
                return Err(format!("bad {}: {text:?}", f.display()));
            };
            if start_time(pid).as_deref() != Some(started) {
                return Err(format!("node{i} is down (its init {pid} is gone)"));
            }
            inits.push(pid);
        }
        let slurm = run
            .join("slurm")
            .is_file()
            .then(|| dir.join("etc-slurm/slurm.conf"));
        let lock = lock(&run.join("tests.lock"))?;
        let cluster = Cluster {
            dir: dir.to_path_buf(),
            inits,
            slurm,
            _lock: std::sync::Arc::new(lock),
        };
        cluster.separate_front_end();
        Ok(cluster)
    }

    /// Keeps node1's pids well above every other node's, so that node1's own processes
    /// (launchers, the tool) do not take the pids of other nodes' ranks by chance: a test
    /// places such collisions itself ([`Cluster::spawn_with_pid`]).
    fn separate_front_end(&self) {
        let others = (2..=self.nodes())
            .filter_map(|n| self.last_pid(n))
            .max()
            .unwrap_or(0);
        if self
            .last_pid(1)
            .is_some_and(|p| p < others.saturating_add(1000))
        {
            self.set_last_pid(1, others.saturating_add(10_000));
        }
    }

    /// Node `node`'s last allocated pid (`/proc/sys/kernel/ns_last_pid` inside it).
    pub fn last_pid(&self, node: usize) -> Option<u32> {
        let out = self
            .run_in(
                node,
                Command::new("cat").arg("/proc/sys/kernel/ns_last_pid"),
            )
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Makes `pid` node `node`'s last allocated pid: its next process gets the next free pid
    /// after it. Whether that worked.
    pub fn set_last_pid(&self, node: usize, pid: u32) -> bool {
        let mut sh = Command::new("/bin/sh");
        sh.arg("-c")
            .arg(format!("echo {pid} > /proc/sys/kernel/ns_last_pid"));
        self.run_in(node, &sh)
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many nodes (node1..nodeN).
    pub fn nodes(&self) -> usize {
        self.inits.len()
    }

    /// Node `node`'s host name (`node3`).
    pub fn name(node: usize) -> String {
        format!("node{node}")
    }

    /// The host pid of node `node`'s init (1-based).
    ///
    /// # Panics
    /// For a node the cluster does not have.
    pub fn init_pid(&self, node: usize) -> u32 {
        assert!(
            (1..=self.nodes()).contains(&node),
            "no node{node} (1..={})",
            self.nodes()
        );
        self.inits[node - 1]
    }

    /// Every host name node `node` answers to, its own first (`node3`, then its aliases
    /// `node3a1`… when the cluster was brought up with `MPIR_MULTINODE_ALIASES`): the names on
    /// its line of the cluster's hosts file, which each node sees as `/etc/hosts`.
    ///
    /// # Panics
    /// When the hosts file cannot be read.
    pub fn host_names(&self, node: usize) -> Vec<String> {
        let path = self.dir.join("hosts");
        let hosts =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let own = Cluster::name(node);
        hosts
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default())
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
            .find(|names| names.first() == Some(&own.as_str()))
            .map(|names| names.into_iter().map(str::to_string).collect())
            .unwrap_or_else(|| vec![own])
    }

    /// The ssh stand-in, for Open MPI's `--mca plm_rsh_agent` (usable inside any node).
    pub fn nsrsh(&self) -> PathBuf {
        self.dir.join("bin/nsrsh")
    }

    /// This cluster's `slurm.conf` when Slurm runs on it (slurmd in node2..N).
    pub fn slurm_conf(&self) -> Option<&Path> {
        self.slurm.as_deref()
    }

    /// `cmd` (program, arguments, environment changes, working directory) to run inside node
    /// `node`, as `nsenter -t <init> -p -u -m [--wd=DIR] -- PROGRAM ARGS` from the host. The
    /// rest of the environment is this process's. `SLURM_CONF` is set to this cluster's (or
    /// removed without Slurm): a Slurm client inside a node must not reach the single-node CI
    /// cluster. Stdio is not copied: set it on the result.
    pub fn run_in(&self, node: usize, cmd: &Command) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.init_pid(node).to_string())
            .args(["-p", "-u", "-m"]);
        if let Some(wd) = cmd.get_current_dir() {
            let mut a = OsString::from("--wd=");
            a.push(wd);
            c.arg(a);
        }
        c.arg("--").arg(cmd.get_program()).args(cmd.get_args());
        match &self.slurm {
            Some(conf) => c.env("SLURM_CONF", conf),
            None => c.env_remove("SLURM_CONF"),
        };
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Starts `wrapped`, a command made by [`Cluster::run_in`] for node `node` (with its stdio
    /// set): the running program, once `nsenter` has forked it.
    ///
    /// # Panics
    /// When it cannot be started or has not appeared within 10 s.
    pub fn spawn(&self, node: usize, wrapped: Command) -> NodeChild {
        self.spawn_wrapped(node, wrapped)
    }

    fn spawn_wrapped(&self, node: usize, mut wrapped: Command) -> NodeChild {
        let mut nsenter = wrapped
            .spawn()
            .unwrap_or_else(|e| panic!("nsenter into node{node}: {e}"));
        let ns = self.node_ns(node);
        let id = nsenter.id();
        let mut found = None;
        let ok = wait_for(10, || {
            let children = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
                .unwrap_or_default();
            found = children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .find(|&p| ns_of(p) == ns);
            found.is_some() || matches!(nsenter.try_wait(), Ok(Some(_)))
        });
        let Some(host_pid) = found.filter(|_| ok) else {
            let _ = nsenter.kill();
            let _ = nsenter.wait();
            panic!("nothing started in node{node} by {wrapped:?}");
        };
        let local_pid = ns_pids(host_pid).map(|(l, _)| l).unwrap_or(0);
        NodeChild {
            nsenter,
            host_pid,
            local_pid,
            node,
        }
    }

    /// Starts `cmd` inside node `node` so that it gets the node-local pid `local_pid` (by
    /// writing the node's `ns_last_pid` right before the fork): a process that collides with
    /// another node's rank. `None` when that pid is taken in `node`, or another process of the
    /// node took it first (then try again, or another pid).
    pub fn spawn_with_pid(&self, node: usize, local_pid: u32, cmd: &Command) -> Option<NodeChild> {
        if local_pid < 2 || self.host_pid(node, local_pid).is_some() {
            return None;
        }
        // The shell below must not get `local_pid` itself (it would, were it the node's next
        // pid): first move the node's next pid away; afterwards, back where it was.
        let before = self.last_pid(node)?;
        if !self.set_last_pid(node, before.max(local_pid).saturating_add(1000)) {
            return None;
        }
        let placed = self.place_with_pid(node, local_pid, cmd);
        self.set_last_pid(node, before);
        placed
    }

    fn place_with_pid(&self, node: usize, local_pid: u32, cmd: &Command) -> Option<NodeChild> {
        // sh (inside the node) sets the next pid, then forks the program: `exec` in a
        // subshell keeps the forked pid. The sh waits for it, so `nsenter`'s child is the sh.
        let mut inner = Command::new("/bin/sh");
        inner
            .arg("-c")
            .arg(format!(
                "echo {} > /proc/sys/kernel/ns_last_pid && (exec \"$0\" \"$@\") ; exit $?",
                local_pid - 1
            ))
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => inner.env(k, v),
                None => inner.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            inner.current_dir(d);
        }
        let mut wrapped = self.run_in(node, &inner);
        wrapped
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut sh = self.spawn_wrapped(node, wrapped);
        let shell = sh.host_pid;
        let mut program = None;
        wait_for(10, || {
            program = self
                .processes(node)
                .into_iter()
                .find(|p| p.local_ppid == sh.local_pid && p.host_pid != shell);
            program.is_some()
        });
        match program {
            Some(p) if p.local_pid == local_pid => {
                sh.host_pid = p.host_pid;
                sh.local_pid = p.local_pid;
                Some(sh)
            }
            other => {
                // Not the pid wanted (another process of the node took it): end both.
                if let Some(p) = other.and_then(|p| i32::try_from(p.host_pid).ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                sh.stop();
                None
            }
        }
    }

    fn node_ns(&self, node: usize) -> Option<PathBuf> {
        ns_of(self.init_pid(node))
    }

    /// Every process of node `node` (its init included), by node-local pid.
    pub fn processes(&self, node: usize) -> Vec<NodeProcess> {
        let Some(ns) = self.node_ns(node) else {
            return Vec::new();
        };
        let mut v: Vec<NodeProcess> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| ns_of(p).as_ref() == Some(&ns))
            .filter_map(|host_pid| {
                let (local_pid, ppid) = ns_pids(host_pid)?;
                let local_ppid = ns_pids(ppid)
                    .filter(|_| ns_of(ppid).as_ref() == Some(&ns))
                    .map_or(0, |(l, _)| l);
                let comm = std::fs::read_to_string(format!("/proc/{host_pid}/comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                Some(NodeProcess {
                    host_pid,
                    local_pid,
                    local_ppid,
                    comm,
                })
            })
            .collect();
        v.sort_by_key(|p| p.local_pid);
        v
    }

    /// The host pid of node `node`'s process `local_pid`, if it exists.
    pub fn host_pid(&self, node: usize, local_pid: u32) -> Option<u32> {
        self.processes(node)
            .into_iter()
            .find(|p| p.local_pid == local_pid)
            .map(|p| p.host_pid)
    }

    /// Asserts that node `node`'s process `local_pid` (if it still exists) is untraced and
    /// not stopped ([`mpir_target::testkit::assert_untouched`]).
    ///
    /// # Panics
    /// When it is traced or stopped.
    pub fn assert_untouched(&self, node: usize, local_pid: u32) {
        if let Some(p) = self.host_pid(node, local_pid) {
            mpir_target::testkit::assert_untouched(p);
        }
    }

    /// Open MPI 4's `orterun` (run it inside the front-end node) starting `program` with
    /// `args` on `hosts` (node, slots), one rank per slot, with orterun's own `options` (e.g.
    /// `--mca routed_radix 1`: each orted starts the next one, a tree spawn): the rsh agent
    /// is the cluster's `nsrsh`, and Open MPI's TCP traffic stays on loopback
    /// (`*_tcp_if_include lo`; the nodes' names resolve to 127.0.1.N, which orterun needs
    /// to tell them from itself).
    pub fn orterun(
        &self,
        options: &[&str],
        hosts: &[(usize, u32)],
        program: &Path,
        args: &[&str],
    ) -> Command {
        let list: Vec<String> = hosts.iter().map(|(n, s)| format!("node{n}:{s}")).collect();
        let ranks: u32 = hosts.iter().map(|(_, s)| s).sum();
        let mut c = Command::new("orterun");
        c.args(["--mca", "plm_rsh_agent"])
            .arg(self.nsrsh())
            .args(["--mca", "oob_tcp_if_include", "lo"])
            .args(["--mca", "btl_tcp_if_include", "lo"])
            .args(["--mca", "btl", "self,vader,tcp"])
            .args(options)
            .arg("--host")
            .arg(list.join(","))
            .arg("-n")
            .arg(ranks.to_string())
            .arg(program)
            .args(args)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MPIR_DO_NOT_WARN", "1");
        c
    }

    /// Open MPI 5's launcher (PRRTE's `prterun`, run through the `mpirun` of the installation
    /// at `prefix`, e.g. the PyPI wheel's venv; run it inside the front-end node) starting
    /// `program` with `args` on `hosts` (node, slots), one rank per slot, with its own
    /// `options`: PRRTE's ssh agent is the cluster's `nsrsh` (`PRTE_MCA_plm_ssh_agent`; its
    /// `prted`s then start each other, a tree spawn), and the ranks' TCP traffic stays on
    /// loopback (`btl_tcp_if_include lo`). PRRTE's own out-of-band traffic keeps its default
    /// interface: PRRTE 3.0.14 told `--prtemca oob_tcp_if_include lo` (or `prte_if_include
    /// 127.0.0.0/8`) finds "No network interfaces ... for out-of-band communications"
    /// (measured); the nodes share the host's network, so any of its addresses reaches them.
    pub fn prterun(
        &self,
        prefix: &Path,
        options: &[&str],
        hosts: &[(usize, u32)],
        program: &Path,
        args: &[&str],
    ) -> Command {
        let list: Vec<String> = hosts.iter().map(|(n, s)| format!("node{n}:{s}")).collect();
        let ranks: u32 = hosts.iter().map(|(_, s)| s).sum();
        let mut c = Command::new(prefix.join("bin/mpirun"));
        c.args(["--mca", "btl_tcp_if_include", "lo"])
            .args(["--mca", "btl", "self,sm,tcp"])
            .args(options)
            .arg("--host")
            .arg(list.join(","))
            .arg("-n")
            .arg(ranks.to_string())
            .arg(program)
            .args(args)
            .env("PRTE_MCA_plm_ssh_agent", self.nsrsh())
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        c
    }

    /// `srun` of this cluster's Slurm (run it inside node1, which has no slurmd) with `args`;
    /// Open MPI ranks keep their TCP traffic on loopback. `None` (after a [`skip`]) when
    /// Slurm does not run on the cluster.
    pub fn srun(&self, args: &[&str]) -> Option<Command> {
        let Some(conf) = &self.slurm else {
            skip("the simulated cluster runs no Slurm (MPIR_MULTINODE_SLURM=0, or not installed)");
            return None;
        };
        let mut c = Command::new("srun");
        c.args(args)
            .env("SLURM_CONF", conf)
            .env("OMPI_MCA_btl", "self,vader,tcp")
            .env("OMPI_MCA_btl_tcp_if_include", "lo")
            .env("OMPI_MCA_oob_tcp_if_include", "lo");
        Some(c)
    }

    /// The current test binary, running only test `test` (with `--exact`) inside node `node`,
    /// with `arg` in [`INNER_ENV`] for [`inner_test`] to return.
    ///
    /// # Panics
    /// When the current executable is unknown.
    pub fn this_test_in(&self, node: usize, test: &str, arg: &str) -> Command {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut c = Command::new(exe);
        c.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(INNER_ENV, format!("{test}={arg}"));
        self.run_in(node, &c)
    }
}

/// A cluster of its own that a test brings up with `scripts/ci-multinode.sh` in a state
/// directory of its own (beside the CI cluster, which it leaves alone) and takes down when
/// dropped: for a shape the CI cluster does not have (many nodes, many host names per node).
/// One test process at a time has a given directory (a lock on `DIR.lock` beside it, waited
/// for up to 10 min, held until the cluster is down).
#[derive(Debug)]
pub struct OwnCluster {
    cluster: Option<Cluster>,
    script: PathBuf,
    env: Vec<(&'static str, String)>,
    _lock: TestLock,
}

impl OwnCluster {
    /// Brings up `nodes` nodes without Slurm, each answering to `aliases` host names
    /// ([`Cluster::host_names`]), in state directory `dir`: whatever ran there before is
    /// taken down first (a cluster of a test that died), and all of it when this is dropped.
    /// `script` is `scripts/ci-multinode.sh`. `None` (after a [`skip`], a failure under
    /// `MPIR_REQUIRE_PEERS=1`) when this machine cannot run it (not root, no `unshare`).
    ///
    /// # Panics
    /// When the script fails on a machine that can run it.
    pub fn up(script: &Path, dir: &Path, nodes: usize, aliases: usize) -> Option<OwnCluster> {
        if !nix::unistd::geteuid().is_root() {
            skip("a simulated cluster needs root (PID, UTS and mount namespaces)");
            return None;
        }
        if !mpir_target::testkit::have("unshare") || !mpir_target::testkit::have("nsenter") {
            skip("util-linux's unshare and nsenter are not installed");
            return None;
        }
        let mut lock_file = dir.as_os_str().to_owned();
        lock_file.push(".lock");
        let lock = lock(Path::new(&lock_file)).unwrap_or_else(|e| panic!("{e}"));
        let mut own = OwnCluster {
            cluster: None,
            script: script.to_path_buf(),
            env: vec![
                ("MPIR_MULTINODE_DIR", dir.display().to_string()),
                ("MPIR_MULTINODE_NODES", nodes.to_string()),
                ("MPIR_MULTINODE_ALIASES", aliases.to_string()),
                ("MPIR_MULTINODE_SLURM", "0".into()),
            ],
            _lock: lock,
        };
        // Nothing of a run that died is reused: its nodes may hold its ranks.
        let _ = own.script("down").stdin(Stdio::null()).output();
        let out = own
            .script("up")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} up: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        own.cluster = Some(cluster);
        Some(own)
    }

    fn script(&self, verb: &str) -> Command {
        let mut c = Command::new("bash");
        c.arg(&self.script).arg(verb).envs(self.env.iter().cloned());
        c
    }

    /// The cluster.
    ///
    /// # Panics
    /// Never once [`OwnCluster::up`] has returned it.
    pub fn cluster(&self) -> &Cluster {
        self.cluster.as_ref().expect("brought up")
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        // The lock goes with the cluster: nobody else uses this state directory.
        self.cluster = None;
        let _ = self
            .script("down")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Inside [`Cluster::this_test_in`]: the argument given to test `test`; `None` for a plain
/// run of the test binary (where such an inner test has nothing to do and returns).
pub fn inner_test(test: &str) -> Option<String> {
    let v = std::env::var(INNER_ENV).ok()?;
    let (name, arg) = v.split_once('=')?;
    // `test` is the path within the binary (`module::name`); the harness may print either.
    (name == test || name.ends_with(&format!("::{test}"))).then(|| arg.to_string())
}

/// A process started inside a node from the host ([`Cluster::spawn`]): `nsenter` (a child
/// of this process) and the program it forked in the node. Dropping it stops the program
/// (SIGTERM, 10 s, SIGKILL) and reaps `nsenter`.
#[derive(Debug)]
pub struct NodeChild {
    nsenter: Child,
    /// The program's host pid.
    pub host_pid: u32,
    /// The program's pid inside its node.
    pub local_pid: u32,
    /// The node.
    pub node: usize,
}

impl NodeChild {
    /// `nsenter`, whose stdio the program shares (take its stdout to read the program's).
    pub fn child(&mut self) -> &mut Child {
        &mut self.nsenter
    }

    /// Whether the program has ended (its `nsenter` has exited).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.nsenter.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the program to end; its exit code (`None`: still running,
    /// or killed by a signal).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<i32> {
        let mut code = None;
        wait_for(timeout.as_secs().max(1), || match self.nsenter.try_wait() {
            Ok(Some(s)) => {
                code = s.code();
                true
            }
            Ok(None) => false,
            Err(_) => true,
        });
        code
    }

    /// Stops the program the way a user's Ctrl-C would (SIGTERM, up to 10 s, then SIGKILL)
    /// and reaps `nsenter`.
    pub fn stop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        if self.has_exited() {
            return;
        }
        let pid = i32::try_from(self.host_pid).map(Pid::from_raw);
        if let Ok(p) = pid {
            let _ = kill(p, Signal::SIGTERM);
        }
        if !wait_for(10, || self.has_exited()) {
            if let Ok(p) = pid {
                let _ = kill(p, Signal::SIGKILL);
            }
            let _ = self.nsenter.kill();
        }
        let _ = self.nsenter.wait();
    }
}

impl Drop for NodeChild {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Why one try at starting a job on the cluster did not bring every rank up.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartFailure {
    /// The launcher ended before every rank was up: the MPI stack lost a rank in its own
    /// start-up, before any tool had touched the job.
    Ended(String),
    /// The launcher still runs but not every rank came up in time.
    Stuck(String),
}

/// Starts a job with `attempt`, and once more if the first try ended on its own.
///
/// A real MPI stack on the loaded simulated cluster now and then loses a rank while it
/// starts (measured in CI: Open MPI 4.1.4 under Slurm's `pmix_v4` plugin, one rank killed
/// by SIGSEGV inside `MPI_Init`, srun aborting the step), before any tool has looked at the
/// job. That start is not what a test tests, so it gets one more try, its reason printed.
/// A start that hangs ([`StartFailure::Stuck`]) or fails twice fails the test. `attempt`
/// must clean up after a failed try (stop the launcher, cancel the allocation).
pub fn start_job<T>(what: &str, mut attempt: impl FnMut() -> Result<T, StartFailure>) -> T {
    match attempt() {
        Ok(t) => t,
        Err(StartFailure::Stuck(why)) => panic!("{what} did not start: {why}"),
        Err(StartFailure::Ended(why)) => {
            eprintln!("{what} ended before every rank was up; trying once more. It said:\n{why}");
            match attempt() {
                Ok(t) => t,
                Err(StartFailure::Ended(why) | StartFailure::Stuck(why)) => {
                    panic!("{what} did not start, twice: {why}")
                }
            }
        }
    }
}
