//! The preload library in real MPI jobs: Debian's MPICH 4.0.2 and Open MPI 4.1.4, Intel MPI
//! 2021 (PyPI wheel) when installed, and MPICH 5 built for the MPI-5 standard ABI (which must be
//! refused). Programs: tests/fixtures/waits.c (its header says what
//! each mode does, so what each rank must be waiting for). The oracle is gdb: it attaches to
//! each rank and prints the export through the DWARF of the library (built with `-g`), so the
//! layout read is the C compiler's, not ours. Skipped without a stack or gdb, failed under
//! `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod oracle;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use mpir_target::testkit::{IMPI_WHEEL, Wheel, have, run, scratch, skip, stop_launcher, wait_for};
use oracle::{Export, read_export};

/// mpir_waits.h: enum values the tests look for.
const RECORDING: u32 = 1;
const LOADED: u32 = 0;
const ABI_MPICH: u32 = 1;
const ABI_OPENMPI: u32 = 2;
const CALL_NONE: u32 = 0;
const CALL_RECV: u32 = 5;
const CALL_ISSEND: u32 = 21;
const CALL_IRECV: u32 = 24;
const CALL_WAITALL: u32 = 41;
const CALL_BARRIER: u32 = 60;
const CALL_COMM_SPLIT: u32 = 101;
const ANY_SOURCE: i32 = -1;

/// One job at a time: MPICH's ranks spin while they wait, and the machine has two cores.
static JOBS: Mutex<()> = Mutex::new(());

struct Stack {
    name: &'static str,
    mpicc: PathBuf,
    /// Environment for the compiler and the launcher.
    env: Vec<(String, String)>,
    launcher: Vec<String>,
    /// The launcher's way of passing an environment variable to the ranks.
    hydra: bool,
    abi: u32,
}

impl Stack {
    fn preload_args(&self, lib: &Path) -> Vec<String> {
        if self.hydra {
            vec![
                "-genv".into(),
                "LD_PRELOAD".into(),
                lib.display().to_string(),
            ]
        } else {
            vec!["-x".into(), format!("LD_PRELOAD={}", lib.display())]
        }
    }
}

fn gdb() -> bool {
    if have("gdb") {
        return true;
    }
    skip("needs gdb (the oracle)");
    false
}

fn mpich() -> Option<Stack> {
    if !have("mpicc.mpich") || !have("mpiexec.hydra") {
        skip("needs Debian's MPICH (mpicc.mpich, mpiexec.hydra)");
        return None;
    }
    Some(Stack {
        name: "mpich",
        mpicc: "mpicc.mpich".into(),
        env: Vec::new(),
        launcher: vec!["mpiexec.hydra".into()],
        hydra: true,
        abi: ABI_MPICH,
    })
}

fn open_mpi() -> Option<Stack> {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    Some(Stack {
        name: "openmpi",
        mpicc: "mpicc.openmpi".into(),
        env: vec![("OMPI_MPIR_DO_NOT_WARN".into(), "1".into())],
        launcher: ["orterun", "--allow-run-as-root", "--oversubscribe"]
            .map(String::from)
            .to_vec(),
        hydra: false,
        abi: ABI_OPENMPI,
    })
}

fn intel_mpi() -> Option<Stack> {
    let prefix = Wheel::find(&IMPI_WHEEL)?.prefix;
    Some(Stack {
        name: "intel-mpi",
        mpicc: prefix.join("bin/mpicc"),
        env: vec![("I_MPI_ROOT".into(), prefix.display().to_string())],
        launcher: vec![prefix.join("bin/mpiexec.hydra").display().to_string()],
        hydra: true,
        abi: ABI_MPICH,
    })
}

fn stacks() -> Vec<Stack> {
    [mpich(), open_mpi(), intel_mpi()]
        .into_iter()
        .flatten()
        .collect()
}

fn build(stack: &Stack, dir: &Path) -> PathBuf {
    let program = dir.join(format!("waits-{}", stack.name));
    let mut cc = Command::new(&stack.mpicc);
    cc.envs(stack.env.iter().map(|(k, v)| (k, v)))
        .args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/waits.c"))
        .arg("-lpthread");
    run(&mut cc).unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    program
}

/// A running job whose ranks write `DIR/RANK.pid` when they reach the state under test; the
/// ranks and the launcher are killed on drop, whatever the test's outcome.
struct Job {
    launcher: Child,
    pids: Vec<u32>,
}

impl Job {
    fn start(
        stack: &Stack,
        program: &Path,
        mode: &str,
        n: usize,
        dir: &Path,
        env_preload: Option<&Path>,
        lib: Option<&Path>,
    ) -> Job {
        let sub = dir.join(format!("{}-{mode}", stack.name));
        std::fs::create_dir_all(&sub).unwrap();
        let mut cmd = Command::new(&stack.launcher[0]);
        cmd.args(&stack.launcher[1..]);
        if let Some(lib) = lib {
            cmd.args(stack.preload_args(lib));
        }
        if let Some(lib) = env_preload {
            cmd.env("LD_PRELOAD", lib);
        }
        cmd.args(["-n", &n.to_string()])
            .arg(program)
            .arg(mode)
            .arg(&sub)
            .envs(stack.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut job = Job {
            launcher: cmd.spawn().expect("start the launcher"),
            pids: Vec::new(),
        };
        let file = |r: usize| sub.join(format!("{r}.pid"));
        assert!(
            wait_for(60, || (0..n).all(|r| file(r).is_file())),
            "{} {mode}: the ranks did not write their pid files in time",
            stack.name
        );
        job.pids = (0..n)
            .map(|r| {
                std::fs::read_to_string(file(r))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        job
    }

    /// Each rank's export once every rank's main thread is inside `call` (read again until
    /// then: a rank announces itself just before its call).
    fn settled(&self, stack: &Stack, ranks: &[usize], call: u32) -> Vec<Export> {
        let mut last = Vec::new();
        for _ in 0..50 {
            last = self.pids.iter().map(|&p| read_export(p)).collect();
            if ranks.iter().all(|&r| {
                last[r].state == RECORDING && last[r].main_slot().is_some_and(|s| s.call == call)
            }) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "{}: the ranks never all reached call {call}: {last:#?}",
            stack.name
        );
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        for &pid in &self.pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        stop_launcher(&mut self.launcher);
    }
}

fn lib() -> PathBuf {
    mpir_waits::library().expect("write out the library")
}

fn common_header(stack: &Stack, e: &Export, rank: usize, size: i32) {
    let name = stack.name;
    assert_eq!(e.magic, "MPIRWAIT", "{name}");
    assert_eq!(e.state, RECORDING, "{name} rank {rank}: {e:#?}");
    assert_eq!(e.abi, stack.abi, "{name} rank {rank}");
    assert_eq!(e.disabled, 0, "{name} rank {rank}");
    assert_eq!(e.world_rank, rank as i32, "{name}");
    assert_eq!(e.world_size, size, "{name}");
    // MPI_COMM_WORLD (id 1) and MPI_COMM_SELF (id 2), this process's ranks in them.
    let world = e
        .comm(1)
        .unwrap_or_else(|| panic!("{name}: no world: {e:#?}"));
    assert_eq!(
        (world.size, world.rank, world.parent),
        (size, rank as i32, 0)
    );
    let me = e
        .comm(2)
        .unwrap_or_else(|| panic!("{name}: no self: {e:#?}"));
    assert_eq!((me.size, me.rank, me.rank0_world), (1, 0, rank as i32));
}

#[test]
fn a_ring_of_receives_is_exported_by_every_rank() {
    if !gdb() {
        return;
    }
    let dir = scratch("waits-ring");
    let lib = lib();
    for stack in stacks() {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let program = build(&stack, &dir);
        let job = Job::start(&stack, &program, "ring", 3, &dir, None, Some(&lib));
        let exports = job.settled(&stack, &[0, 1, 2], CALL_RECV);
        for (rank, e) in exports.iter().enumerate() {
            common_header(&stack, e, rank, 3);
            assert_eq!(e.slots_used, 1, "{}: one thread: {e:#?}", stack.name);
            let s = &e.slots[0];
            assert_eq!(s.tid, job.pids[rank], "{}: the main thread", stack.name);
            assert_eq!(s.generation % 2, 0, "{}", stack.name);
            assert_eq!(
                (s.call, s.comm, s.peer, s.tag, s.send_peer, s.root, s.nreqs),
                (CALL_RECV, 1, ((rank + 1) % 3) as i32, 10, -2, -2, 0),
                "{} rank {rank}: {s:#?}",
                stack.name
            );
            assert_eq!(s.count, 1, "{}", stack.name);
        }
        eprintln!("{}: ring exported", stack.name);
    }
}

#[test]
fn a_waitall_lists_its_requests() {
    if !gdb() {
        return;
    }
    let dir = scratch("waits-waitall");
    let lib = lib();
    for stack in stacks() {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let program = build(&stack, &dir);
        let job = Job::start(&stack, &program, "waitall", 3, &dir, None, Some(&lib));
        let exports = job.settled(&stack, &[0, 1, 2], CALL_WAITALL);
        for (rank, e) in exports.iter().enumerate() {
            common_header(&stack, e, rank, 3);
            let s = &e.slots[0];
            assert_eq!((s.nreqs, s.flags), (2, 0), "{}: {s:#?}", stack.name);
            let req = |i: usize| {
                let idx = s.reqs[i];
                assert_ne!(
                    idx, 0,
                    "{}: request {i} not in the table: {e:#?}",
                    stack.name
                );
                e.request(idx - 1)
                    .unwrap_or_else(|| panic!("{}: entry {idx} empty: {e:#?}", stack.name))
            };
            let (recv, send) = (req(0), req(1));
            assert_eq!(
                (recv.kind, recv.peer, recv.tag, recv.comm, recv.active),
                (CALL_IRECV, ((rank + 1) % 3) as i32, 20, 1, 1),
                "{}: {recv:#?}",
                stack.name
            );
            assert_eq!(
                (send.kind, send.peer, send.tag, send.comm, send.active),
                (CALL_ISSEND, ((rank + 2) % 3) as i32, 30, 1, 1),
                "{}: {send:#?}",
                stack.name
            );
            assert_eq!(
                e.requests.len(),
                2,
                "{}: only these two: {e:#?}",
                stack.name
            );
        }
        eprintln!("{}: waitall exported", stack.name);
    }
}

#[test]
fn a_split_communicator_has_one_id_per_part() {
    if !gdb() {
        return;
    }
    let dir = scratch("waits-split");
    let lib = lib();
    for stack in stacks() {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let program = build(&stack, &dir);
        let job = Job::start(&stack, &program, "split", 4, &dir, None, Some(&lib));
        let mut exports = job.settled(&stack, &[0, 1], CALL_BARRIER);
        // Ranks 2 and 3 are in their receive too.
        for _ in 0..25 {
            if [2, 3]
                .iter()
                .all(|&r| exports[r].slots[0].call == CALL_RECV)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            exports = job.pids.iter().map(|&p| oracle::read_export(p)).collect();
        }
        let sub = |r: usize| {
            let e = &exports[r];
            common_header(&stack, e, r, 4);
            let made: Vec<_> = e
                .comms
                .iter()
                .filter(|c| c.kind == CALL_COMM_SPLIT)
                .collect();
            assert_eq!(made.len(), 1, "{} rank {r}: {e:#?}", stack.name);
            let c = made[0].clone();
            assert_eq!(c.parent, 1, "{}", stack.name);
            assert!(c.id > 2, "{}: {c:#?}", stack.name);
            // The world's first communicator-creating call and collective.
            let world = e.comm(1).unwrap();
            assert_eq!(
                (world.creations, world.coll_seq),
                (1, 1),
                "{}: {world:#?}",
                stack.name
            );
            c
        };
        let parts: Vec<_> = (0..4).map(sub).collect();
        let name = stack.name;
        // Members 0, 1, 2 (color 0; local rank 0 is world rank 0), member 3 alone.
        assert_eq!(parts[0].id, parts[1].id, "{name}");
        assert_eq!(parts[0].id, parts[2].id, "{name}");
        assert_ne!(parts[0].id, parts[3].id, "{name}");
        for (r, c) in parts.iter().enumerate() {
            let (size, rank, rank0) = if r < 3 { (3, r as i32, 0) } else { (1, 0, 3) };
            assert_eq!(
                (c.size, c.rank, c.rank0_world),
                (size, rank, rank0),
                "{name} rank {r}"
            );
        }
        // Ranks 0 and 1 in the barrier on it: the same communicator and sequence number (2:
        // after the allreduce), which rank 2, gone to its receive, has not reached.
        let (s0, s1) = (&exports[0].slots[0], &exports[1].slots[0]);
        assert_eq!((s0.comm, s0.coll_seq), (parts[0].id, 2), "{name}: {s0:#?}");
        assert_eq!((s1.comm, s1.coll_seq), (parts[0].id, 2), "{name}: {s1:#?}");
        assert_eq!(parts[2].coll_seq, 1, "{name}");
        let s2 = &exports[2].slots[0];
        assert_eq!(
            (s2.call, s2.comm, s2.peer, s2.tag),
            (CALL_RECV, 1, ANY_SOURCE, 99),
            "{name}"
        );
        eprintln!("{name}: split exported");
    }
}

#[test]
fn multiple_threads_get_a_slot_each() {
    if !gdb() {
        return;
    }
    let dir = scratch("waits-threads");
    let lib = lib();
    for stack in stacks() {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let program = build(&stack, &dir);
        let job = Job::start(&stack, &program, "threads", 1, &dir, None, Some(&lib));
        let pid = job.pids[0];
        let mut e = read_export(pid);
        for _ in 0..25 {
            if e.slots.iter().filter(|s| s.call == CALL_RECV).count() == 4 {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            e = read_export(pid);
        }
        let name = stack.name;
        common_header(&stack, &e, 0, 1);
        assert_eq!(e.slots_used, 5, "{name}: main and 4 threads: {e:#?}");
        assert_eq!(
            (e.slots[0].tid, e.slots[0].call),
            (pid, CALL_NONE),
            "{name}"
        );
        let tasks: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .map(|t| t.unwrap().file_name().to_string_lossy().parse().unwrap())
            .collect();
        let mut tids: Vec<u32> = Vec::new();
        let mut tags: Vec<i32> = Vec::new();
        for s in &e.slots[1..] {
            assert_eq!(
                (s.call, s.peer, s.comm),
                (CALL_RECV, ANY_SOURCE, 1),
                "{name}: {s:#?}"
            );
            assert!(
                tasks.contains(&s.tid) && s.tid != pid,
                "{name}: {s:#?} {tasks:?}"
            );
            tids.push(s.tid);
            tags.push(s.tag);
        }
        tids.sort_unstable();
        tids.dedup();
        tags.sort_unstable();
        assert_eq!(tids.len(), 4, "{name}: distinct threads");
        assert_eq!(tags, [40, 41, 42, 43], "{name}");
        eprintln!("{name}: threads exported");
    }
}

/// A program's exit status and output.
fn outcome(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn error_returns_are_unchanged() {
    let dir = scratch("waits-badrank");
    let lib = lib();
    for stack in stacks() {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let program = build(&stack, &dir);
        let go = |preload: bool| {
            let mut cmd = Command::new(&stack.launcher[0]);
            cmd.args(&stack.launcher[1..]);
            if preload {
                cmd.args(stack.preload_args(&lib));
            }
            cmd.args(["-n", "1"])
                .arg(&program)
                .args(["badrank", "/nonexistent"])
                .envs(stack.env.iter().map(|(k, v)| (k, v)))
                .stderr(Stdio::null());
            outcome(&mut cmd)
        };
        let (with, without) = (go(true), go(false));
        assert_eq!(with.0, without.0, "{}: exit status", stack.name);
        // MPICH's error codes carry the index of a message in a ring, which differs from run
        // to run with or without the library (seen: rc=738871814, 67783174, ... for the same
        // program): their class must agree; Open MPI's codes are the classes themselves.
        let class = |out: &str| {
            out.lines()
                .find(|l| l.starts_with("rc="))
                .map(|l| l.split_once(' ').map_or("", |(_, c)| c).to_string())
        };
        assert_eq!(class(&with.1), class(&without.1), "{}", stack.name);
        if stack.abi == ABI_OPENMPI {
            assert_eq!(with, without, "{}", stack.name);
        }
        let line = with
            .1
            .lines()
            .find(|l| l.starts_with("rc="))
            .unwrap_or_else(|| {
                panic!("{}: no result line: {with:?}", stack.name);
            });
        // The error class is MPI_ERR_RANK (the fixture prints the constant of its mpi.h).
        let field = |k: &str| line.split(' ').find_map(|f| f.strip_prefix(k)).unwrap();
        assert_eq!(
            field("class="),
            field("rank_class="),
            "{}: {line}",
            stack.name
        );
        assert_ne!(field("rc="), "0", "{}", stack.name);
        eprintln!("{}: {line}", stack.name);
    }
}

#[test]
fn a_process_without_mpi_is_untouched_and_says_loaded() {
    let lib = lib();
    let script = "echo out; echo err >&2; sleep 2; exit 7";
    let go = |preload: bool| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        if preload {
            cmd.env("LD_PRELOAD", &lib);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        (out.status.code(), out.stdout, out.stderr)
    };
    assert_eq!(go(true), go(false));
    assert_eq!(go(true).0, Some(7));
    if !gdb() {
        return;
    }
    let mut sh = Command::new("sh")
        .args(["-c", "sleep 5"])
        .env("LD_PRELOAD", &lib)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // `sh -c CMD` may exec CMD: the process is then `sleep`, preloaded alike.
    std::thread::sleep(Duration::from_millis(300));
    let e = read_export(sh.id());
    let _ = sh.kill();
    let _ = sh.wait();
    assert_loaded(&e);
}

fn assert_loaded(e: &Export) {
    assert_eq!(e.magic, "MPIRWAIT");
    // Hand-computed from mpir_waits.h: the sizes of the four structures.
    assert_eq!(
        (
            e.version,
            e.header_size,
            e.slot_size,
            e.comm_size,
            e.request_size
        ),
        (1, 232, 136, 56, 56),
        "{e:#?}"
    );
    assert_eq!(
        (e.slot_capacity, e.comm_capacity, e.request_capacity),
        (256, 1024, 4096)
    );
    assert_eq!(
        (e.state, e.abi, e.disabled, e.world_rank),
        (LOADED, 0, 0, -1),
        "{e:#?}"
    );
    assert_eq!(e.slots_used, 0);
    assert!(e.comms.is_empty() && e.requests.is_empty(), "{e:#?}");
}

/// The launcher itself preloaded (its whole environment, as a careless user would): it runs
/// as before, says LOADED, and its ranks record.
#[test]
fn a_preloaded_launcher_is_untouched() {
    if !gdb() {
        return;
    }
    let Some(stack) = mpich() else { return };
    let dir = scratch("waits-launcher");
    let lib = lib();
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&stack, &dir);
    let job = Job::start(&stack, &program, "ring", 3, &dir, Some(&lib), None);
    let exports = job.settled(&stack, &[0, 1, 2], CALL_RECV);
    for (rank, e) in exports.iter().enumerate() {
        common_header(&stack, e, rank, 3);
    }
    assert_loaded(&read_export(job.launcher.id()));
    drop(job);
    // Its result is the same with and without (the error class: see error_returns_are_unchanged).
    let go = |preload: bool| {
        let mut cmd = Command::new(&stack.launcher[0]);
        if preload {
            cmd.env("LD_PRELOAD", &lib);
        }
        cmd.args(["-n", "1"])
            .arg(&program)
            .args(["badrank", "/nonexistent"])
            .stderr(Stdio::null());
        let (code, out) = outcome(&mut cmd);
        (
            code,
            out.split_once(' ').map(|(_, class)| class.to_string()),
        )
    };
    let with = go(true);
    assert_eq!(with, go(false));
    assert_eq!(
        with.1.as_deref(),
        Some("class=6 rank_class=6\n"),
        "{with:?}"
    );
}

/// MPICH 5 built for the MPI-5 standard ABI (`mpicc_abi`, `libmpi_abi.so`): its version string
/// starts with "MPICH" like the MPICH ABI's, and its handles are not MPICH's. The library must
/// see `libmpi_abi` behind `PMPI_Send`, record nothing and say why, and the job run as before.
#[test]
fn the_standard_abi_is_refused() {
    if !gdb() {
        return;
    }
    let Some(wheel) = Wheel::find(&mpir_target::testkit::MPICH5_WHEEL) else {
        return;
    };
    if !wheel.bin("mpicc_abi").is_file() {
        skip("the MPICH 5 wheel has no mpicc_abi");
        return;
    }
    let stack = Stack {
        name: "mpich5-abi",
        mpicc: wheel.bin("mpicc_abi"),
        env: Vec::new(),
        launcher: vec![wheel.bin("mpiexec.hydra").display().to_string()],
        hydra: true,
        abi: 0,
    };
    let dir = scratch("waits-abi");
    let lib = lib();
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&stack, &dir);
    let job = Job::start(&stack, &program, "ring", 3, &dir, None, Some(&lib));
    std::thread::sleep(Duration::from_millis(500));
    for &pid in &job.pids {
        let e = read_export(pid);
        // DISABLED (3) because of MPIR_WAITS_STANDARD_ABI (3); the MPI named.
        assert_eq!(
            (e.state, e.disabled, e.abi, e.slots_used),
            (3, 3, 0, 0),
            "{e:#?}"
        );
        assert!(e.comms.is_empty(), "{e:#?}");
    }
}
