//! Slurm and hydra: every agent a fleet starts, at once — **one** srun step (as LaunchMON,
//! STAT and HPE's CTI start their daemons: one step RPC to `slurmctld` for N nodes instead
//! of N), or one hydra job with a process per node. Such a step's or job's standard I/O is
//! one stream for all its processes, so no agent has a pipe of its own: each connects back
//! over TLS to a rendezvous that listens only until every agent is in, the step or job has
//! ended, or the start deadline has passed ([`crate::Rendezvous`]: the ephemeral certificate
//! pinned by fingerprint, one one-time token file per node).
//!
//! The engine's standard error is passed on to this program's, but read on the way: a line
//! in which srun says that a node's task ended (`srun: error: node3: task 1: Exited with
//! exit code 127`) means that node's agent will not connect, so nobody waits for it until
//! the deadline (hydra says no such thing: a node whose agent cannot start is told by the
//! deadline); the engine's end means no agent will. Its standard output (the agents' own)
//! goes to this program's standard error. An agent cut off later has its connection closed,
//! on which it lets go and ends (`mpir agent` watches its socket); the step or job is ended
//! with the fleet.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpir_session::{AgentFailure, chain};
use mpir_wire::Options;

use super::Rooted;
use crate::launch::{AgentLink, Down, Launch, STEP_NAME, is_binding_notice};
use crate::protocol::{HostClaims, Plan};
use crate::rendezvous::Rendezvous;
use crate::tokens::default_token_parent;

/// Longest line of srun's standard error read at once (a longer one is passed on in pieces).
const MAX_LINE: u64 = 64 * 1024;

/// The step's srun, or the job's mpiexec, ended with the fleet.
pub(super) struct Step {
    child: Child,
}

impl Step {
    /// Waits for the engine to end until `deadline` (its agents end once their connections
    /// close), then ends it with SIGTERM (srun and mpiexec pass it on to every process), and
    /// kills it if it is still there 2 s later.
    pub(super) fn end(mut self, deadline: Instant) {
        let wait_until = |child: &mut Child, until: Instant| loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return true,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => return false,
            }
        };
        if wait_until(&mut self.child, deadline) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if !wait_until(&mut self.child, Instant::now() + Duration::from_secs(2)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Each group's root (the node its agent runs on) with its subtree and its agent's link, or
/// why it has none; with the step, when srun was started.
pub(super) fn start(
    groups: Vec<(HostClaims, Vec<HostClaims>)>,
    plan: &Plan,
    listen: Option<SocketAddr>,
    deadline: Instant,
) -> (Vec<Rooted>, Option<Step>) {
    let all_down = |groups: Vec<(HostClaims, Vec<HostClaims>)>, why: String| -> Vec<Rooted> {
        groups
            .into_iter()
            .map(|(r, s)| (r, s, Err(Down::new(AgentFailure::NotStarted, why.clone()))))
            .collect()
    };
    let roots: Vec<String> = groups.iter().map(|(r, _)| r.host.clone()).collect();
    let parent = plan
        .launch
        .token_dir()
        .map_or_else(default_token_parent, std::path::Path::to_path_buf);
    let lifetime = deadline.saturating_duration_since(Instant::now());
    let rendezvous = match Rendezvous::open(listen, &parent, &roots, lifetime) {
        Ok(r) => r,
        Err(e) => return (all_down(groups, chain(&e)), None),
    };
    let mut agent: Vec<OsString> = plan.agent.iter().map(OsString::from).collect();
    agent.extend(rendezvous.agent_arguments().into_iter().map(OsString::from));
    let list_file = rendezvous.token_dir().join("nodes");
    let mut cmd = match plan.launch.step(&roots, &agent, &list_file) {
        Ok(Some(c)) => c,
        Ok(None) => {
            let why = "the engine does not start its agents at once".to_string();
            return (all_down(groups, why), None);
        }
        Err(e) => return (all_down(groups, chain(&e)), None),
    };
    // The agents' standard output (one stream, the step's) goes where their diagnostics
    // go: never into this program's own output.
    let out = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::null(), Stdio::from);
    // Its own process group: a Ctrl-C at the terminal reaches this program, which ends the
    // agents by closing their connections (srun would take a first SIGINT as a request for
    // status).
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = format!("{}: {e}", cmd.get_program().to_string_lossy());
            return (all_down(groups, why), None);
        }
    };
    // Which nodes' tasks ended, with srun's line; whether srun's standard error closed
    // (srun ended).
    let ended: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let gone = Arc::new(AtomicBool::new(false));
    if let Some(stderr) = child.stderr.take() {
        let (ended, gone) = (Arc::clone(&ended), Arc::clone(&gone));
        let launch = plan.launch.clone();
        let forward = move || {
            let mut lines = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.by_ref().take(MAX_LINE).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&line);
                if is_binding_notice(&text) {
                    continue;
                }
                eprint!("{text}");
                if let Some(host) = launch.task_ended(&text)
                    && let Ok(mut ended) = ended.lock()
                {
                    ended.insert(host.to_string(), text.trim().to_string());
                }
            }
            gone.store(true, Ordering::Relaxed);
        };
        // Not started (no thread left): srun's end is then seen only by the deadline.
        let _ = std::thread::Builder::new()
            .name("mpir-srun-stderr".into())
            .spawn(forward);
    }
    let expected = |links: &HashMap<String, AgentLink>| {
        if gone.load(Ordering::Relaxed) {
            return false;
        }
        let ended = ended.lock().map(|e| e.clone()).unwrap_or_default();
        roots
            .iter()
            .any(|r| !links.contains_key(r) && !ended.contains_key(r))
    };
    let mut links = rendezvous.accept_while(deadline, &Options::default(), &expected);
    let (engine, asked) = match &plan.launch {
        Launch::Slurm { job_id, .. } => (
            "srun",
            format!(
                "srun started the agents of {} node(s) in one step ({STEP_NAME}) of job {job_id}",
                roots.len()
            ),
        ),
        _ => (
            "mpiexec",
            format!(
                "mpiexec started the agents of {} node(s) as one hydra job",
                roots.len()
            ),
        ),
    };
    let none_connected = rendezvous.none_connected(&asked, lifetime);
    // The socket closed and the tokens left removed: nothing listens past this point.
    drop(rendezvous);
    let srun_ended = match child.try_wait() {
        Ok(Some(status)) => Some(format!(
            "{engine} ended ({status}) before this node's agent connected"
        )),
        _ => None,
    };
    let ended = ended.lock().map(|e| e.clone()).unwrap_or_default();
    let rooted = groups
        .into_iter()
        .map(|(root, subtree)| {
            let link = links.remove(&root.host).ok_or_else(|| {
                let why = match (ended.get(&root.host), &srun_ended) {
                    (Some(line), _) => {
                        format!("its task in step {STEP_NAME} ended before it connected ({line})")
                    }
                    (None, Some(s)) => s.clone(),
                    (None, None) => none_connected.clone(),
                };
                Down::new(AgentFailure::NotStarted, why)
            });
            (root, subtree, link)
        })
        .collect();
    (rooted, Some(Step { child }))
}
