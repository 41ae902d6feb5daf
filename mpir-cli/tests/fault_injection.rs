//! The reference tool `mpir` told to stop (`SIGINT`, `SIGTERM`) in the middle of an
//! acquisition — launch or attach, on a fake starter and on the real Open MPI: it must die of
//! the signal only after letting go, leaving the starter's code as in its files,
//! `MPIR_being_debugged` back to 0, no process traced or stopped, and the job's output that of
//! an undisturbed run (pids masked). (`mpir_cli.rs` has the basic SIGTERM case; the library's
//! own fault-injection tests, with a tool that holds a job, are in
//! `mpir-acquire/tests/fault_injection.rs`.)

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::fixtures;
use mpir_target::testkit::{
    assert_code_as_in_file, assert_untouched, entry_point, have, run, scratch, skip, status_field,
    symbol_address, wait_for,
};
use mpir_target::{MemoryExt, SymbolLookupExt};

/// `mpir`, with `SIGINT` at its default action: these tests interrupt it as a user at a
/// terminal would, and CI runs them from a background job, which ignores `SIGINT` (a program
/// started with a signal ignored keeps it ignored).
fn mpir() -> Command {
    mpir_target::testkit::with_default_sigint(env!("CARGO_BIN_EXE_mpir"))
}

/// Output lines with pids masked, sorted.
fn normalized(output: &str) -> Vec<String> {
    let mut v: Vec<String> = output
        .lines()
        .map(|l| {
            let mut mask = false;
            l.split_whitespace()
                .map(|w| {
                    let out = if mask {
                        "P".to_string()
                    } else if w.starts_with("pid=") {
                        "pid=P".to_string()
                    } else {
                        w.to_string()
                    };
                    mask = w == "pid";
                    out
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    v.sort();
    v
}

fn kill(pid: u32, signal: &str) {
    assert!(
        Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

fn read_int(pid: u32, name: &str) -> Option<i64> {
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).ok()?;
    let a = t.require_symbol(name).ok()?.address;
    t.read_c_int(a, name).ok()
}

/// The first child of `pid` (waits up to 20 s for one).
fn child_of(pid: u32) -> u32 {
    let mut child = None;
    assert!(wait_for(20, || {
        child = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        child.is_some()
    }));
    child.unwrap()
}

/// A process whose stdout is collected by a thread, readable with a time bound.
struct Collected(mpsc::Receiver<String>);

impl Collected {
    fn of(child: &mut Child) -> Collected {
        let mut out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            let _ = tx.send(s);
        });
        Collected(rx)
    }

    fn within(self, secs: u64) -> String {
        self.0
            .recv_timeout(Duration::from_secs(secs))
            .expect("the job's output ended in time")
    }
}

/// The starter's code (around `MPIR_Breakpoint` and its entry point) as in its files,
/// `MPIR_being_debugged` 0, nothing traced or stopped.
fn assert_starter_as_found(pid: u32) {
    assert_untouched(pid);
    assert_code_as_in_file(
        pid,
        &[symbol_address(pid, "MPIR_Breakpoint"), entry_point(pid)],
    );
    assert_eq!(read_int(pid, "MPIR_being_debugged"), Some(0));
}

#[test]
fn sigint_while_launch_waits_for_the_spawn_event() {
    let Some(f) = fixtures("cli-fi-launch") else {
        return;
    };
    // -z: the starter never spawns; closing its stdin ends it.
    let undisturbed = Command::new(&f.starter)
        .args(["-z", "--"])
        .arg(&f.rank)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut tool = mpir()
        .args(["launch", "--timeout", "60", "--"])
        .arg(&f.starter)
        .args(["-z", "--"])
        .arg(&f.rank)
        .current_dir(&*f.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = tool.stdin.take();
    let output = Collected::of(&mut tool);
    let starter = child_of(tool.id());
    assert!(
        wait_for(20, || read_int(starter, "MPIR_being_debugged") == Some(1)),
        "mpir set MPIR_being_debugged"
    );
    let bp = symbol_address(starter, "MPIR_Breakpoint");
    let planted = || {
        mpir_target::live::LiveMemory::new(starter, mpir_types::DataModel::host())
            .read_vec(bp, 1)
            .is_ok_and(|b| b[0] == 0xcc)
    };
    assert!(wait_for(20, planted), "mpir planted its breakpoint");
    kill(tool.id(), "INT");
    let status = tool.wait().unwrap();
    assert_eq!(status.signal(), Some(2), "dies of the signal");
    assert_starter_as_found(starter);
    drop(stdin);
    let out = output.within(30);
    assert_eq!(
        normalized(&out),
        normalized(&String::from_utf8_lossy(&undisturbed.stdout))
    );
}

#[test]
fn sigterm_while_attach_waits_for_the_spawn_event() {
    let Some(f) = fixtures("cli-fi-attach") else {
        return;
    };
    let mut starter = Command::new(&f.starter)
        .args(["-z", "--"])
        .arg(&f.rank)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = starter.id();
    let mut out = BufReader::new(starter.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap(); // it runs
    let mut tool = mpir()
        .args(["attach", "--timeout", "60", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(20, || read_int(pid, "MPIR_being_debugged") == Some(1)),
        "mpir attached and set MPIR_being_debugged"
    );
    kill(tool.id(), "TERM");
    assert_eq!(tool.wait().unwrap().signal(), Some(15));
    assert_starter_as_found(pid);
    drop(starter.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(starter.wait().unwrap().success(), "{first}{rest}");
}

#[test]
fn sigterm_while_launching_open_mpi() {
    if !have("orterun") || !have("mpicc.openmpi") {
        return skip("Open MPI (orterun, mpicc.openmpi) not installed");
    }
    let dir = scratch("cli-fi-ompi");
    let program = dir.join("mpi_ranks");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    if let Err(e) = run(Command::new("mpicc.openmpi")
        .arg(src)
        .arg("-o")
        .arg(&program))
    {
        return skip(&e);
    }
    let job = |cmd: &mut Command| {
        cmd.args(["orterun", "--oversubscribe", "-n", "2"])
            .arg(&program)
            .arg("3")
            .env("OMPI_MPIR_DO_NOT_WARN", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null())
            .stderr(Stdio::null());
    };
    let Some(lib) = library_of("orterun", "libopen-rte.so") else {
        return skip("orterun links no libopen-rte.so");
    };
    let mut plain = Command::new("env");
    job(&mut plain);
    let undisturbed = plain.output().unwrap();
    let expected = String::from_utf8_lossy(&undisturbed.stdout).into_owned();
    assert_eq!(expected.matches(" done").count(), 2, "{expected}");
    // The signal comes as soon as mpir has set MPIR_being_debugged in orterun (libopen-rte
    // loaded, stopped at or past its entry point): wherever the acquisition is then (before,
    // at or after the spawn event), the job must run as it would have.
    let mut tool = mpir();
    tool.args(["launch", "--timeout", "60", "--", "env"]);
    job(&mut tool);
    let mut tool = tool.stdout(Stdio::piped()).spawn().unwrap();
    let output = Collected::of(&mut tool);
    let orterun = child_of(tool.id());
    // Watched with cheap reads (the acquisition takes a fraction of a second): the
    // variable's address from libopen-rte's file and the load address /proc/PID/maps gives.
    let var = variable_when_mapped(orterun, &lib, "MPIR_being_debugged");
    let memory = mpir_target::live::LiveMemory::new(orterun, mpir_types::DataModel::host());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while memory.read_c_int(var, "MPIR_being_debugged").ok() != Some(1) {
        assert!(
            std::time::Instant::now() < deadline,
            "mpir set MPIR_being_debugged in orterun"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    kill(tool.id(), "TERM");
    assert_eq!(tool.wait().unwrap().signal(), Some(15));
    if status_field(orterun, "State:").is_empty() {
        panic!("orterun ended before it could be checked");
    }
    // MPIR_Breakpoint lives in libopen-rte.so: its code segment is compared with that file.
    assert_starter_as_found(orterun);
    let out = output.within(60);
    assert_eq!(normalized(&out), normalized(&expected));
}

/// The path of the shared library `name` that `program` links (from `ldd`).
fn library_of(program: &str, name: &str) -> Option<PathBuf> {
    let exe = run(Command::new("sh").args(["-c", &format!("command -v {program}")])).ok()?;
    let out = run(Command::new("ldd").arg(exe.trim())).ok()?;
    out.lines().filter(|l| l.contains(name)).find_map(|l| {
        l.split("=>")
            .nth(1)?
            .split_whitespace()
            .next()
            .map(PathBuf::from)
    })
}

/// The run-time address of `symbol` of `library` in `pid`, once the library is mapped there
/// (polls /proc/PID/maps, up to 30 s).
fn variable_when_mapped(pid: u32, library: &Path, symbol: &str) -> u64 {
    let elf = mpir_target::debuginfo::ElfFile::open(library).unwrap();
    let link = elf.symbols(symbol).first().expect("the symbol").address;
    let real = std::fs::canonicalize(library).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let first = maps.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || Path::new(f[5]) != real {
                return None;
            }
            let start = u64::from_str_radix(f[0].split('-').next()?, 16).ok()?;
            let offset = u64::from_str_radix(f[2], 16).ok()?;
            Some((start, offset))
        });
        if let Some((start, offset)) = first {
            return link + elf.bias_for_mapping(start, offset).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} mapped in {pid}",
            library.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[path = "common/demo_paths.rs"]
mod demo_paths;

/// SIGINT while `mpir deadlock` holds the ranks to read their queues (it samples them over and
/// over): the tool dies of the signal, every rank and the starter are left untraced and
/// running, and the job runs to its end as if nothing happened.
#[test]
fn sigint_in_the_middle_of_a_queue_walk() {
    let starter = demo_paths::starter().unwrap_or_else(|e| panic!("{e}"));
    // The demo job (no MPI needed): 4 ranks, which print "ready" once their queues are built,
    // and a starter that ends the job (exit 0) after its lifetime. 30 s: with 8 s, a cold CI
    // run (stop 42) reached its first hold only as the job ended, and the tool, told by then
    // that every rank had exited, was already ending with exit 4 ("no rank's queues could be
    // read") when the signal came: the test raced the job, no signal was lost.
    let lifetime = Duration::from_secs(30);
    let started = std::time::Instant::now();
    let mut job = Command::new(&starter)
        .args(["-n", "4", "--lifetime", &lifetime.as_secs().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(job.stdout.take().unwrap());
    let mut ready = Vec::new();
    while ready.len() < 4 {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the demo job ended early"
        );
        if line.trim_end().ends_with(" ready") {
            ready.push(line);
        }
    }
    let ranks: Vec<u32> = ready
        .iter()
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();

    // 100 samples 400 ms apart: at least 40 s of sampling, longer than the job lives, so the
    // tool cannot end on its own with a verdict before the signal reaches it. (With 10 ms
    // apart, a loaded machine that starved this test until the last samples let the tool
    // finish first and exit 3: a race of the test, not a lost signal.)
    let mut tool = mpir()
        .args([
            "deadlock",
            "--samples",
            "100",
            "--interval-ms",
            "400",
            "--starter",
        ])
        .arg(job.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until a sample holds a rank (traced by the tool's tracer thread), then interrupt
    // the tool right there.
    assert!(
        holds_a_rank_within(&ranks, 20),
        "the tool never held a rank"
    );
    // The signal must come while the job runs, or the test proves nothing about a hold.
    assert!(
        started.elapsed() < lifetime - Duration::from_secs(5) && job.try_wait().unwrap().is_none(),
        "the first hold came {:?} after the job started, too near its end ({lifetime:?})",
        started.elapsed()
    );
    if let Some(status) = tool.try_wait().unwrap() {
        let mut err = String::new();
        let _ = tool.stderr.take().unwrap().read_to_string(&mut err);
        panic!("the tool ended before it was interrupted: {status:?} {err}");
    }
    kill(tool.id(), "INT");
    let status = tool.wait().unwrap();
    let mut err = String::new();
    tool.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(2),
        "the tool dies of SIGINT: {status:?} {err}"
    );

    for &pid in ranks.iter().chain([job.id()].iter()) {
        assert_untouched(pid);
    }
    // The job goes on to its end, undisturbed: the starter exits 0 after its lifetime.
    let end = job.wait().unwrap();
    assert_eq!(end.code(), Some(0), "the demo job was disturbed: {end:?}");
}

/// Whether one of `ranks` is traced (held by the tool) within `secs` seconds. Looked at every
/// 200 µs: a hold of a warm `mpir` read lasts a few milliseconds, which a 20 ms poll missed in
/// every one of 10 samples (CI, an_ignored_sigint_stays_ignored).
fn holds_a_rank_within(ranks: &[u32], secs: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if ranks
            .iter()
            .any(|&p| !matches!(status_field(p, "TracerPid:").as_str(), "0" | ""))
        {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Started with SIGINT ignored (a script's background job, `nohup`-like callers), the tool
/// keeps it ignored, as any program does: a SIGINT during a hold changes nothing, the read goes
/// on to its verdict, and every rank is let go as usual.
#[test]
fn an_ignored_sigint_stays_ignored() {
    let demo = demo_paths::demo(4);
    // bash execs the tool with SIGINT ignored (an ignored signal stays so through exec).
    let mut tool = Command::new("bash")
        .arg("-c")
        .arg("trap '' INT; exec \"$0\" deadlock --samples 10 --interval-ms 200 --starter \"$1\"")
        .arg(env!("CARGO_BIN_EXE_mpir"))
        .arg(demo.starter.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        holds_a_rank_within(&demo.ranks, 20),
        "the tool never held a rank"
    );
    kill(tool.id(), "INT");
    let status = tool.wait().unwrap();
    let mut err = String::new();
    let _ = tool.stderr.take().unwrap().read_to_string(&mut err);
    // The demo's ranks 0-2 deadlock in a ring: the verdict's exit status, not the signal.
    assert_eq!(status.signal(), None, "{status:?} {err}");
    assert_eq!(status.code(), Some(3), "{status:?} {err}");
    for &pid in demo.ranks.iter().chain([demo.starter.id()].iter()) {
        assert_untouched(pid);
    }
}
