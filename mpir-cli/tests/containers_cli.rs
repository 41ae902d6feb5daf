//! Ranks started through a container runtime (issue 32, docs/containers.md): a ring of
//! blocking receives (tests/fixtures/deadlock.c) launched by MPICH's hydra and by Open MPI's
//! orterun, each rank wrapped in `bwrap … --unshare-pid`, its program copied into a directory
//! bound at a path that exists only inside the container. The table names the `bwrap`
//! processes; `mpir attach` must name the ranks themselves, `mpir stacks` read their frames
//! and `mpir deadlock` analyse them. The ranks are found for the oracle independently from
//! `/proc`: a descendant of the starter running the copied program, whose innermost `NSpid` is
//! the pid the rank wrote itself (its `getpid()` in the container) and whose environment names
//! its rank. And the other way round: the launcher itself in bwrap, whose table names the
//! ranks by its namespace's pids, translated to this host's. Skipped without bwrap or the
//! stacks, failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::mpir;
use common::stock::{Stack, build_fixture};
use mpir_target::testkit::{
    assert_untouched, children, have, scratch, skip, stop_launcher, wait_for,
};
use serde_json::Value;

const RANKS: usize = 3;

/// A job whose ranks run in bwrap containers; the launcher and the ranks found are killed on
/// drop (the ranks' pid files hold pids of their own namespaces: never signalled).
struct ContainerJob {
    launcher: Child,
    /// The starter's pid on this host.
    starter: u32,
    /// The ranks' pids on this host, by rank (the oracle's).
    ranks: Vec<u32>,
}

impl Drop for ContainerJob {
    fn drop(&mut self) {
        for &pid in &self.ranks {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        stop_launcher(&mut self.launcher);
    }
}

fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in children(p) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

fn ns_pids(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| {
            v.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn env_var(pid: u32, name: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    raw.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(&format!("{name}=")).map(str::to_string)
    })
}

/// The oracle: rank `rank`'s process on this host among the starter's descendants.
fn find_rank(starter: u32, program: &Path, rank: usize, ns_pid: u32) -> u32 {
    let found: Vec<u32> = descendants(starter)
        .into_iter()
        .filter(|&p| std::fs::read_link(format!("/proc/{p}/exe")).ok().as_deref() == Some(program))
        .filter(|&p| {
            let ns = ns_pids(p);
            ns.len() >= 2 && ns.last() == Some(&ns_pid)
        })
        .filter(|&p| {
            ["PMI_RANK", "OMPI_COMM_WORLD_RANK"]
                .iter()
                .any(|v| env_var(p, v).as_deref() == Some(&rank.to_string()))
        })
        .collect();
    assert_eq!(found.len(), 1, "rank {rank}: {found:?}");
    found[0]
}

/// Where the container is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wrapped {
    /// The launcher runs `bwrap … program` for each rank: the table names the `bwrap`s.
    Ranks,
    /// The launcher itself runs in `bwrap`: the table names the ranks by the pids of the
    /// container's PID namespace.
    Starter,
}

/// The arguments of a bwrap whose container sees `shared` at `inside` (a path this host does
/// not have), in a new PID namespace.
fn bwrap_args(shared: &Path, inside: &Path) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = ["bwrap", "--bind", "/", "/", "--dev", "/dev"]
        .iter()
        .map(Into::into)
        .collect();
    // MPICH's and Open MPI's shared memory is found by name in /dev/shm: the host's.
    for x in [
        "--bind", "/dev/shm", "/dev/shm", "--tmpfs", "/mnt", "--bind",
    ] {
        a.push(x.into());
    }
    a.push(shared.into());
    a.push(inside.into());
    for x in ["--proc", "/proc", "--unshare-pid", "--die-with-parent"] {
        a.push(x.into());
    }
    a
}

/// The ring in containers: the program is visible at `inside` only in the container;
/// `wrapped` says what runs in it.
fn start(stack: &Stack, dir: &Path, inside: &Path, wrapped: Wrapped) -> ContainerJob {
    let built = build_fixture(stack, dir, "deadlock");
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::copy(&built, shared.join("deadlock")).unwrap();
    let out = dir.join("ring");
    std::fs::create_dir_all(&out).unwrap();
    let program = inside.join("deadlock");
    let bwrap = bwrap_args(&shared, inside);
    let mut argv: Vec<std::ffi::OsString> = Vec::new();
    let launcher_args = stack.launcher.iter().map(Into::into);
    match wrapped {
        Wrapped::Ranks => {
            argv.extend(launcher_args);
            argv.extend(["-n".into(), RANKS.to_string().into()]);
            argv.extend(bwrap);
        }
        Wrapped::Starter => {
            argv.extend(bwrap);
            argv.extend(launcher_args);
            argv.extend(["-n".into(), RANKS.to_string().into()]);
        }
    }
    let mut launcher = Command::new(&argv[0]);
    launcher
        .args(&argv[1..])
        .arg(&program)
        .arg("ring")
        .arg(&out)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut job = ContainerJob {
        launcher: launcher.spawn().expect("start the launcher"),
        starter: 0,
        ranks: Vec::new(),
    };
    let file = |r: usize| out.join(format!("{r}.pid"));
    assert!(
        wait_for(60, || (0..RANKS).all(|r| file(r).is_file())),
        "{}: the ranks did not write their pid files in time",
        stack.name
    );
    std::thread::sleep(std::time::Duration::from_millis(700));
    job.starter = match wrapped {
        Wrapped::Ranks => job.launcher.id(),
        Wrapped::Starter => {
            // The launcher under bwrap's init: the descendant running its program.
            let exe = which(&stack.launcher[0]);
            descendants(job.launcher.id())
                .into_iter()
                .find(|&p| std::fs::read_link(format!("/proc/{p}/exe")).ok() == Some(exe.clone()))
                .expect("the launcher under bwrap")
        }
    };
    let starter = job.starter;
    job.ranks = (0..RANKS)
        .map(|r| {
            let ns_pid: u32 = std::fs::read_to_string(file(r))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            find_rank(starter, &program, r, ns_pid)
        })
        .collect();
    job
}

fn bwrap() -> bool {
    if !have("bwrap") {
        skip("needs bubblewrap (bwrap)");
        return false;
    }
    true
}

/// The file `program` names through `PATH`, links resolved.
fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| PathBuf::from(program))
}

/// A path inside the container that this host does not have.
fn inside_only(name: &str) -> PathBuf {
    let p = PathBuf::from(format!("/mnt/mpir-ctr-{}-{name}", std::process::id()));
    assert!(!p.exists(), "{} exists on this host", p.display());
    p
}

fn run_mpir(args: &[&str], stack: &Stack, starter: u32) -> (i32, Vec<u8>, String) {
    let out = mpir()
        .args(args)
        .arg(starter.to_string())
        .args(&stack.extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `mpir attach`, `stacks` and `deadlock` on the ring in containers of `stack`.
fn check(stack: &Stack, wrapped: Wrapped) {
    let name = format!("{}-{wrapped:?}", stack.name);
    let dir = scratch(&format!("containers-{name}"));
    let inside = inside_only(&name);
    let job = start(stack, &dir, &inside, wrapped);
    let starter = job.starter;
    let program = inside.join("deadlock");

    // attach: each rank's pid is the oracle's, found under a bwrap the table names.
    let (code, stdout, stderr) = run_mpir(&["attach", "--json"], stack, starter);
    assert_eq!(code, 0, "{}: {stderr}", stack.name);
    let doc: Value = serde_json::from_slice(&stdout).unwrap();
    common::validate(&doc);
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), RANKS);
    for (r, entry) in ranks.iter().enumerate() {
        let pid = job.ranks[r];
        assert_eq!(
            entry["pid"].as_u64(),
            Some(u64::from(pid)),
            "{}: rank {r}: {entry}",
            stack.name
        );
        let c = &entry["container"];
        assert_eq!(
            c["executable"].as_str(),
            Some(program.to_str().unwrap()),
            "{entry}"
        );
        assert_eq!(
            c["ns_pid"].as_u64(),
            ns_pids(pid).last().map(|&p| u64::from(p))
        );
        let table_pid = c["table_pid"].as_u64().unwrap() as u32;
        if wrapped == Wrapped::Starter {
            // The table's pid is the rank's own in the starter's namespace (what it wrote).
            assert_eq!(c["runtime"], Value::Null, "{entry}");
            assert_eq!(Some(&table_pid), ns_pids(pid).last(), "{entry}");
            continue;
        }
        let runtime = table_pid;
        // The runtime is an ancestor of the rank, runs bwrap, and lives in our PID namespace.
        let mut p = pid;
        let mut hops = 0;
        while p != runtime && p > 1 && hops < 16 {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
            let after = stat.rsplit_once(')').unwrap().1;
            p = after.split_whitespace().nth(1).unwrap().parse().unwrap();
            hops += 1;
        }
        assert_eq!(
            p, runtime,
            "{}: rank {r}: runtime {runtime} is no ancestor",
            stack.name
        );
        assert_eq!(
            std::fs::read_link(format!("/proc/{runtime}/exe")).unwrap(),
            Path::new("/usr/bin/bwrap")
        );
        assert_eq!(c["runtime"].as_str(), Some("/usr/bin/bwrap"));
        assert_eq!(ns_pids(runtime).len(), 1, "the runtime is in our namespace");
    }
    // The program's path does not exist here: its symbols were read inside the container.
    assert!(!program.exists());

    // stacks: main → MPI_Recv in every rank.
    let (code, stdout, stderr) = run_mpir(&["stacks", "--starter"], stack, starter);
    let text = String::from_utf8_lossy(&stdout);
    assert_eq!(code, 0, "{}: {text}\n{stderr}", stack.name);
    let all = format!("[0-{}] {RANKS} ranks", RANKS - 1);
    for frame in ["main", "MPI_Recv"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{frame} {all}"))),
            "{}: no {frame} for every rank:\n{text}\n{stderr}",
            stack.name
        );
    }

    // deadlock: the ranks analysed, not refused nor "no queue reader" for bwrap.
    let (_, stdout, stderr) = run_mpir(&["deadlock", "--json", "--starter"], stack, starter);
    let doc: Value =
        serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{}: {e}: {stderr}", stack.name));
    common::validate(&doc);
    // Open MPI's queues are read (the shipped layouts): the ring itself. Stock MPICH exports
    // none: its ranks are all blocked in MPI by their stacks.
    let expected = if stack.name.starts_with("openmpi") {
        "deadlock"
    } else {
        "blocked_in_mpi"
    };
    assert_eq!(doc["verdict"], expected, "{}: {doc:#}", stack.name);
    if stack.name.starts_with("openmpi") {
        let mut chain: Vec<(u64, u64)> = doc["cycles"][0]["chain"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["rank"].as_u64().unwrap(),
                    s["waits_for"].as_u64().unwrap(),
                )
            })
            .collect();
        chain.sort();
        assert_eq!(chain, [(0, 1), (1, 2), (2, 0)], "{}", stack.name);
    }
    for &p in &job.ranks {
        assert_untouched(p);
    }
}

#[test]
fn ranks_in_bwrap_under_hydra_are_found_proven_and_read() {
    if !bwrap() {
        return;
    }
    let Some(stack) = common::stock::mpich_stock() else {
        return;
    };
    check(&stack, Wrapped::Ranks);
}

#[test]
fn ranks_in_bwrap_under_orterun_are_found_proven_and_read() {
    if !bwrap() {
        return;
    }
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    check(&stack, Wrapped::Ranks);
}

#[test]
fn hydra_in_bwrap_names_its_ranks_by_its_namespaces_pids_and_they_are_translated() {
    if !bwrap() {
        return;
    }
    let Some(stack) = common::stock::mpich_stock() else {
        return;
    };
    check(&stack, Wrapped::Starter);
}

#[test]
fn orterun_in_bwrap_names_its_ranks_by_its_namespaces_pids_and_they_are_translated() {
    if !bwrap() {
        return;
    }
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    check(&stack, Wrapped::Starter);
}
