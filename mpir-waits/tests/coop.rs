//! The cooperative channel (COOP.md) in a real MPI job: Debian's MPICH 4.0.2 (`mpiexec.hydra`)
//! runs tests/fixtures/waits.c with the library preloaded and `MPIR_COOP_DIR` set to a fresh
//! directory; mpir-target's `live::coop` client talks to each rank. Oracles: `/proc/PID/*`
//! (pid, start time, executable, memory through `/proc/PID/mem`, maps, tasks) and the ELF
//! symbol table (the address of `mpir_waits`); the stack of the rank's main thread must unwind
//! through `MPI_Recv` to `main`, as the fixture is written. Skipped without MPICH, failed under
//! `MPIR_REQUIRE_PEERS=1`. The client against hostile servers: mpir-target's
//! `live::coop::tests`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use mpir_target::live::LiveTarget;
use mpir_target::live::coop::{CoopClient, CoopError, CoopMemory, announcements_in};
use mpir_target::testkit::{have, run, scratch, skip, stop_launcher, symbol_address, wait_for};
use mpir_target::unwind::Unwinder;
use mpir_target::{Fault, Memory, TargetError};

/// One job at a time: MPICH's ranks spin while they wait, and the machine has two cores.
static JOBS: Mutex<()> = Mutex::new(());

const TIMEOUT: Duration = Duration::from_secs(3);

fn mpich() -> bool {
    if have("mpicc.mpich") && have("mpiexec.hydra") {
        return true;
    }
    skip("needs Debian's MPICH (mpicc.mpich, mpiexec.hydra)");
    false
}

fn build(dir: &Path) -> PathBuf {
    let program = dir.join("waits-coop");
    run(Command::new("mpicc.mpich")
        .args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/waits.c"))
        .arg("-lpthread"))
    .unwrap();
    program
}

fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

/// A job whose ranks and launcher are killed on drop.
struct Job {
    launcher: Child,
    pids: Vec<u32>,
}

impl Job {
    fn start(program: &Path, mode: &str, n: usize, dir: &Path, env: &[(&str, &str)]) -> Job {
        let sub = dir.join(mode);
        std::fs::create_dir_all(&sub).unwrap();
        let lib = mpir_waits::library().unwrap();
        let mut cmd = Command::new("mpiexec.hydra");
        cmd.arg("-genv").arg("LD_PRELOAD").arg(&lib);
        for (k, v) in env {
            cmd.args(["-genv", k, v]);
        }
        cmd.args(["-n", &n.to_string()])
            .arg(program)
            .arg(mode)
            .arg(&sub)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut job = Job {
            launcher: cmd.spawn().expect("start mpiexec.hydra"),
            pids: Vec::new(),
        };
        let file = |r: usize| sub.join(format!("{r}.pid"));
        assert!(
            wait_for(60, || (0..n).all(|r| file(r).is_file())),
            "{mode}: the ranks did not write their pid files in time"
        );
        job.pids = (0..n)
            .map(|r| {
                let text = std::fs::read_to_string(file(r)).unwrap();
                text.trim().parse().unwrap()
            })
            .collect();
        job
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

/// Field 22 of /proc/PID/stat.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(") ").unwrap();
    rest.split(' ').nth(19).unwrap().parse().unwrap()
}

/// (start, end, perms) of /proc/PID/maps.
fn mappings(pid: u32) -> Vec<(u64, u64, String)> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, b) = f.next()?.split_once('-')?;
            let perms = f.next()?.to_string();
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
                perms,
            ))
        })
        .collect()
}

fn tasks(pid: u32) -> Vec<u32> {
    let mut t: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    t.sort_unstable();
    t
}

fn sockets(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".sock"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ranks_answer_for_themselves() {
    if !mpich() {
        return;
    }
    let dir = scratch("coop-ring");
    let coop = dir.join("coop");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    let coop_s = coop.display().to_string();
    let job = Job::start(&program, "ring", 3, &dir, &[("MPIR_COOP_DIR", &coop_s)]);
    assert!(
        wait_for(20, || sockets(&coop).len() == 3),
        "the ranks' sockets never appeared: {:?}",
        sockets(&coop)
    );
    // The library made the directory private.
    let meta = std::fs::symlink_metadata(&coop).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    let uid = euid();
    for (rank, &pid) in job.pids.iter().enumerate() {
        let mut c = CoopClient::connect_in(&coop, uid, pid, TIMEOUT).unwrap();

        // HELLO, against /proc.
        let who = c.hello().unwrap();
        assert_eq!(who.pid, pid);
        assert_eq!(
            (who.rank, who.size),
            (Some(rank as u64), Some(3)),
            "{who:?}"
        );
        assert_eq!(who.uid, uid);
        assert_eq!(who.start_time, start_time(pid), "{who:?}");
        assert_eq!(
            who.executable,
            std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
        );
        let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let ppid: u32 = ppid
            .rsplit_once(") ")
            .unwrap()
            .1
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(who.ppid, ppid);
        // Hydra gives every rank PMI_RANK and PMI_SIZE.
        let env = |k: &str| who.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(env("PMI_RANK"), Some(rank.to_string()), "{who:?}");
        assert_eq!(env("PMI_SIZE"), Some("3".to_string()), "{who:?}");

        // READ: the export's header as /proc/PID/mem holds it, at the address the ELF symbol
        // table gives.
        let at = symbol_address(pid, mpir_waits::SYMBOL);
        let mut oracle = [0u8; 232];
        std::fs::File::open(format!("/proc/{pid}/mem"))
            .unwrap()
            .read_exact_at(&mut oracle, at)
            .unwrap();
        assert_eq!(&oracle[..8], b"MPIRWAIT");
        let mut got = [0u8; 232];
        assert_eq!(c.read(at, &mut got).unwrap(), 232);
        assert_eq!(got, oracle);
        // Nothing at 0; a read running off the end of a mapping with nothing after it is short.
        let e = c.read(0, &mut got).unwrap_err();
        assert!(matches!(e, CoopError::Refused { status: 14, .. }), "{e}");
        let maps = mappings(pid);
        if let Some(&(_, end, _)) = maps
            .iter()
            .find(|(_, end, p)| p.starts_with("rw") && !maps.iter().any(|m| m.0 == *end))
        {
            let mut buf = [0u8; 64];
            assert_eq!(c.read(end - 16, &mut buf).unwrap(), 16, "at {end:#x}");
        }

        // MAPS: the library's own lines are those of /proc/PID/maps.
        let text = c.maps().unwrap();
        let proc_maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let ours: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("libmpir_waits.so"))
            .collect();
        assert!(!ours.is_empty(), "{text}");
        for l in ours {
            assert!(proc_maps.lines().any(|p| p == l), "{l} not in\n{proc_maps}");
        }

        // THREADS: every thread of /proc/PID/task but the channel's own (named mpir-coop:
        // the tool's helper, left out), each captured; its stack pointer inside its copied
        // stack, its pc in executable memory.
        let snap = c.threads().unwrap();
        let mut tids: Vec<u32> = snap.threads.iter().map(|t| t.tid).collect();
        tids.sort_unstable();
        let program_threads: Vec<u32> = tasks(pid)
            .into_iter()
            .filter(|t| {
                std::fs::read_to_string(format!("/proc/{pid}/task/{t}/comm"))
                    .is_ok_and(|c| c.trim_end() != "mpir-coop")
            })
            .collect();
        assert_eq!(
            program_threads.len() + 1,
            tasks(pid).len(),
            "one channel thread"
        );
        assert_eq!(tids, program_threads, "{snap:?}");
        let not_captured: Vec<_> = snap
            .threads
            .iter()
            .filter(|t| t.registers.is_err())
            .collect();
        assert!(not_captured.is_empty(), "{not_captured:?}");
        for t in &snap.threads {
            let Ok(r) = &t.registers else { continue };
            let (sp, pc) = (r.sp().unwrap(), r.pc().unwrap());
            let mut word = [0u8; 8];
            assert_eq!(
                snap.stacks.read_partial(sp, &mut word).unwrap(),
                8,
                "thread {}: sp {sp:#x} outside its copy",
                t.tid
            );
            assert!(
                maps.iter()
                    .any(|(a, b, p)| *a <= pc && pc < *b && p.contains('x')),
                "thread {}: pc {pc:#x} not in executable memory",
                t.tid
            );
            // The stack copy holds the live stack: the word at sp is what /proc/PID/mem has
            // there unless the thread has moved on (the main thread is blocked in MPI_Recv).
            assert!(r.thread_pointer().is_some(), "thread {}", t.tid);
        }
        assert!(
            snap.stopped_for < Duration::from_millis(500),
            "{:?}",
            snap.stopped_for
        );

        // The capture unwinds like a ptrace snapshot: the main thread is in MPI_Recv from main.
        let target = LiveTarget::open(pid, Default::default()).unwrap();
        let stacks = Unwinder::new(target.images()).thread_stacks(&snap);
        let main = stacks
            .iter()
            .find(|s| s.tid == pid)
            .expect("the main thread");
        let names: Vec<&str> = main
            .frames
            .iter()
            .filter_map(|f| f.symbol.as_deref())
            .collect();
        let recv = names.iter().position(|n| *n == "MPI_Recv");
        let main_at = names.iter().position(|n| *n == "main");
        assert!(
            matches!((recv, main_at), (Some(a), Some(b)) if a < b),
            "rank {rank}: {names:?}"
        );
        eprintln!(
            "rank {rank}: {} threads, captured in {:?}; main thread: {names:?}",
            snap.threads.len(),
            snap.stopped_for
        );

        // A second capture works the same (the handler stays installed), and the rank lives on.
        let again = c.threads().unwrap();
        assert_eq!(again.threads.len(), snap.threads.len());
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());

        // PTRACER: this kernel has no Yama (EINVAL); with Yama it is granted.
        match c.grant_ptracer() {
            Ok(()) => c.end_ptracer().unwrap(),
            Err(CoopError::Refused { status: 22, .. }) => {}
            Err(e) => panic!("PTRACER: {e}"),
        }

        // The same memory as a Memory.
        let memory = CoopMemory::new(c, target.data_model());
        let mut again = [0u8; 232];
        memory.read_exact(at, &mut again).unwrap();
        assert_eq!(again[..8], oracle[..8]);
        assert!(matches!(
            memory.read_partial(0, &mut again),
            Err(TargetError::Unreadable {
                fault: Fault::Unmapped,
                ..
            })
        ));
        assert!(memory.write(at, &[0]).is_err());
    }

    // Every rank announces itself.
    let all = announcements_in(&coop, uid, TIMEOUT).unwrap();
    let mut ranks: Vec<(u32, Option<u64>)> = all
        .iter()
        .map(|(pid, a)| (*pid, a.as_ref().unwrap().rank))
        .collect();
    ranks.sort_by_key(|r| r.1);
    let want: Vec<(u32, Option<u64>)> = job
        .pids
        .iter()
        .enumerate()
        .map(|(r, &p)| (p, Some(r as u64)))
        .collect();
    assert_eq!(ranks, want);
}

#[test]
fn threads_blocked_in_mpi_are_all_captured() {
    if !mpich() {
        return;
    }
    let dir = scratch("coop-threads");
    let coop = dir.join("coop");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    let coop_s = coop.display().to_string();
    let job = Job::start(&program, "threads", 1, &dir, &[("MPIR_COOP_DIR", &coop_s)]);
    let pid = job.pids[0];
    assert!(wait_for(20, || sockets(&coop).len() == 1));
    let mut c = CoopClient::connect_in(&coop, euid(), pid, TIMEOUT).unwrap();
    let snap = c.threads().unwrap();
    let target = LiveTarget::open(pid, Default::default()).unwrap();
    let stacks = Unwinder::new(target.images()).thread_stacks(&snap);
    // The four receivers (fixture: `receiver` in MPI_Recv), each unwound through MPI_Recv.
    let in_recv = stacks
        .iter()
        .filter(|s| {
            let names: Vec<&str> = s
                .frames
                .iter()
                .filter_map(|f| f.symbol.as_deref())
                .collect();
            names.contains(&"MPI_Recv") && names.contains(&"receiver")
        })
        .count();
    assert_eq!(in_recv, 4, "{stacks:#?}");
}

#[test]
fn no_channel_when_disabled_or_the_directory_is_not_private() {
    if !mpich() {
        return;
    }
    let dir = scratch("coop-off");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    // MPIR_COOP=0.
    let off = dir.join("off");
    let off_s = off.display().to_string();
    let job = Job::start(
        &program,
        "ring",
        2,
        &dir,
        &[("MPIR_COOP_DIR", &off_s), ("MPIR_COOP", "0")],
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(!off.exists(), "MPIR_COOP=0 made {}", off.display());
    drop(job);
    // A directory open to others: refused, and left as it was.
    let open = dir.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let open_s = open.display().to_string();
    let job = Job::start(&program, "ring", 2, &dir, &[("MPIR_COOP_DIR", &open_s)]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(sockets(&open).is_empty(), "{:?}", sockets(&open));
    let e = CoopClient::connect_in(&open, euid(), job.pids[0], TIMEOUT).unwrap_err();
    assert!(matches!(e, CoopError::NotOurs { .. }), "{e}");
}

#[test]
fn the_socket_is_removed_when_the_rank_finishes() {
    if !mpich() {
        return;
    }
    let dir = scratch("coop-exit");
    let coop = dir.join("coop");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    // badrank: MPI_Init, a failing send, MPI_Finalize, exit 0.
    let lib = mpir_waits::library().unwrap();
    let out = Command::new("mpiexec.hydra")
        .arg("-genv")
        .arg("LD_PRELOAD")
        .arg(&lib)
        .arg("-genv")
        .arg("MPIR_COOP_DIR")
        .arg(&coop)
        .args(["-n", "2"])
        .arg(&program)
        .args(["badrank", "/nonexistent"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(coop.is_dir(), "the ranks made their directory");
    assert!(sockets(&coop).is_empty(), "{:?}", sockets(&coop));
}

/// A thread that blocks the capture signal is reported, not waited for; a program that has
/// its own handler on the capture signal gets THREADS refused with the signal named, and
/// `MPIR_COOP_SIGNAL` moves the capture to another signal.
#[test]
fn blocked_and_taken_signals_are_reported() {
    if !mpich() {
        return;
    }
    let dir = scratch("coop-blocker");
    let coop = dir.join("coop");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    let coop_s = coop.display().to_string();
    let uid = euid();
    let sigrtmax = nix::libc::SIGRTMAX();
    let capture = |env: &[(&str, &str)]| {
        // The last job's pid file and socket are not this one's.
        let _ = std::fs::remove_dir_all(&coop);
        let _ = std::fs::remove_dir_all(dir.join("blocker"));
        let job = Job::start(&program, "blocker", 1, &dir, env);
        let pid = job.pids[0];
        assert!(wait_for(20, || coop.join(format!("{pid}.sock")).exists()));
        let mut c = CoopClient::connect_in(&coop, uid, pid, TIMEOUT).unwrap();
        (job, c.threads())
    };

    let (job, snap) = capture(&[("MPIR_COOP_DIR", &coop_s)]);
    let snap = snap.unwrap();
    let blocked: Vec<_> = snap
        .threads
        .iter()
        .filter(|t| {
            t.registers
                .as_ref()
                .is_err_and(|e| e.contains("blocks the capture signal"))
        })
        .collect();
    assert_eq!(blocked.len(), 1, "{snap:?}");
    assert_ne!(blocked[0].tid, job.pids[0]);
    // Not waited for: the capture of the others took well under the 300 ms deadline.
    assert!(
        snap.stopped_for < Duration::from_millis(250),
        "{:?}",
        snap.stopped_for
    );
    let main = snap.threads.iter().find(|t| t.tid == job.pids[0]).unwrap();
    assert!(main.registers.is_ok(), "{main:?}");
    drop(job);

    let (job, refused) = capture(&[("MPIR_COOP_DIR", &coop_s), ("WAITS_TAKE_SIGNAL", "1")]);
    match refused {
        Err(CoopError::SignalTaken { pid, signal }) => {
            assert_eq!((pid, signal), (job.pids[0], (sigrtmax - 2) as u32));
        }
        other => panic!("{other:?}"),
    }
    drop(job);

    let other = (sigrtmax - 3).to_string();
    let (job, moved) = capture(&[
        ("MPIR_COOP_DIR", &coop_s),
        ("WAITS_TAKE_SIGNAL", "1"),
        ("MPIR_COOP_SIGNAL", &other),
    ]);
    let moved = moved.unwrap();
    let main = moved.threads.iter().find(|t| t.tid == job.pids[0]).unwrap();
    assert!(main.registers.is_ok(), "{moved:?}");
}

/// The point of the channel: a tool that may not trace or read another process (a seccomp
/// filter returning `EPERM` for `ptrace` and `process_vm_readv`, applied by bubblewrap to this
/// test binary re-run as the helper below) still gets the rank's identity, memory and stacks.
#[test]
fn a_tool_denied_ptrace_reads_through_the_channel() {
    if !mpich() {
        return;
    }
    if !have("bwrap") {
        skip("needs bubblewrap (bwrap) to apply a seccomp filter");
        return;
    }
    let dir = scratch("coop-seccomp");
    let coop = dir.join("coop");
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let program = build(&dir);
    let coop_s = coop.display().to_string();
    let job = Job::start(&program, "ring", 2, &dir, &[("MPIR_COOP_DIR", &coop_s)]);
    assert!(wait_for(20, || sockets(&coop).len() == 2));
    let filter = dir.join("deny-ptrace.bpf");
    std::fs::write(&filter, deny_ptrace_filter()).unwrap();
    let exe = std::env::current_exe().unwrap();
    // bwrap reads the filter from descriptor 3, which the shell opens.
    let script = format!(
        "exec bwrap --bind / / --seccomp 3 -- '{}' --exact seccomp_helper --nocapture 3<'{}'",
        exe.display(),
        filter.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("COOP_HELPER_PID", job.pids[1].to_string())
        .env("COOP_HELPER_DIR", &coop)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("COOP-SECCOMP-OK rank 1"), "{text}");
}

/// A classic BPF seccomp program (`struct sock_filter` records: u16 code, u8 jt, u8 jf, u32
/// k, little-endian): on x86_64, `ptrace` (101) and `process_vm_readv` (310) fail with `EPERM`;
/// everything else is allowed.
fn deny_ptrace_filter() -> Vec<u8> {
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = 0x0005_0000 | 1; // SECCOMP_RET_ERRNO | EPERM
    let program: [(u16, u8, u8, u32); 8] = [
        (LD_ABS, 0, 0, 4),        // seccomp_data.arch
        (JEQ, 1, 0, 0xC000_003E), // AUDIT_ARCH_X86_64
        (RET, 0, 0, ALLOW),
        (LD_ABS, 0, 0, 0), // seccomp_data.nr
        (JEQ, 2, 0, 101),  // ptrace
        (JEQ, 1, 0, 310),  // process_vm_readv
        (RET, 0, 0, ALLOW),
        (RET, 0, 0, EPERM),
    ];
    let mut out = Vec::new();
    for (code, jt, jf, k) in program {
        out.extend_from_slice(&code.to_le_bytes());
        out.extend_from_slice(&[jt, jf]);
        out.extend_from_slice(&k.to_le_bytes());
    }
    out
}

/// Run by [`a_tool_denied_ptrace_reads_through_the_channel`] under the seccomp filter; does
/// nothing otherwise.
#[test]
fn seccomp_helper() {
    let (Ok(pid), Ok(dir)) = (
        std::env::var("COOP_HELPER_PID"),
        std::env::var("COOP_HELPER_DIR"),
    ) else {
        return;
    };
    let pid: u32 = pid.parse().unwrap();
    let target_pid = nix::unistd::Pid::from_raw(pid as i32);
    // The filter holds: no ptrace, no process_vm_readv.
    assert_eq!(
        nix::sys::ptrace::attach(target_pid),
        Err(nix::errno::Errno::EPERM)
    );
    let mut buf = [0u8; 8];
    let read = nix::sys::uio::process_vm_readv(
        target_pid,
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &[nix::sys::uio::RemoteIoVec {
            base: 0x1000,
            len: 8,
        }],
    );
    assert_eq!(read, Err(nix::errno::Errno::EPERM));
    // The channel answers.
    let mut c = CoopClient::connect_in(Path::new(&dir), euid(), pid, TIMEOUT).unwrap();
    let who = c.hello().unwrap();
    let snap = c.threads().unwrap();
    let target = LiveTarget::open(pid, Default::default()).unwrap();
    let stacks = Unwinder::new(target.images()).thread_stacks(&snap);
    let main = stacks.iter().find(|s| s.tid == pid).unwrap();
    let names: Vec<&str> = main
        .frames
        .iter()
        .filter_map(|f| f.symbol.as_deref())
        .collect();
    assert!(
        names.contains(&"MPI_Recv") && names.contains(&"main"),
        "{names:?}"
    );
    let at = symbol_address(pid, mpir_waits::SYMBOL);
    let memory = CoopMemory::new(c, target.data_model());
    let mut magic = [0u8; 8];
    memory.read_exact(at, &mut magic).unwrap();
    assert_eq!(&magic, b"MPIRWAIT");
    println!("COOP-SECCOMP-OK rank {}", who.rank.unwrap());
}
