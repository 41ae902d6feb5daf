//! Fault injection on live jobs: a tool (`examples/fault_tool.rs`, built on the public API)
//! acquires a job and holds it, and then something goes wrong — the tool is told to stop
//! (`SIGTERM`, `SIGINT`) while it holds the job or while it waits for the spawn event, a
//! thread of it panics, it exits without releasing, the starter is killed at its breakpoint, a
//! rank is killed or exits during the attach. After each, the test checks what the issue
//! asks: every breakpoint byte restored (the code around `MPIR_Breakpoint` and the entry
//! points reads as in the ELF file), `MPIR_being_debugged` back to 0, no process traced or
//! stopped, and the job runs to completion with the output of an undisturbed run (pids
//! masked). One test (the control) shows the harm when the tool has no safety net.
//!
//! The fixtures are mpir-acquire's fake starter and rank (C, compiled here), stock Open MPI,
//! and the debugger-enabled MPICH whose ranks wait on `MPIR_debug_gate`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use support::*;

/// The fault tool, built (or brought up to date) once per run of this test binary.
fn fault_tool() -> PathBuf {
    static TOOL: OnceLock<PathBuf> = OnceLock::new();
    TOOL.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args([
                "build",
                "--quiet",
                "-p",
                "mpir-acquire",
                "--example",
                "fault_tool",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo to build the fault tool");
        assert!(status.success(), "cargo build --example fault_tool failed");
        profile_dir.join("examples/fault_tool")
    })
    .clone()
}

fn kill(pid: u32, signal: &str) {
    assert!(
        Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap()
            .success(),
        "kill -{signal} {pid}"
    );
}

/// A job run through the fault tool: its stdout (the job's output) collected by a thread, its
/// stderr read up to the "held" line.
struct ToolRun {
    tool: Child,
    stdin: Option<ChildStdin>,
    output: mpsc::Receiver<String>,
    starter: u32,
    ranks: Vec<u32>,
    stderr: String,
}

impl ToolRun {
    /// Starts `fault_tool ARGS` in `dir` and waits for it to hold the job.
    fn held(dir: &Path, args: &[&str], starter: &[&str]) -> ToolRun {
        ToolRun::held_env(dir, args, starter, &[])
    }

    /// [`ToolRun::held`] with extra environment variables (the job inherits them).
    fn held_env(dir: &Path, args: &[&str], starter: &[&str], env: &[(&str, &str)]) -> ToolRun {
        let mut run = ToolRun::start(dir, args, starter, env);
        run.wait_held();
        run
    }

    fn start(dir: &Path, args: &[&str], starter: &[&str], env: &[(&str, &str)]) -> ToolRun {
        // SIGINT at its default action: CI runs this from a background job, which ignores it,
        // and a program started with a signal ignored keeps it ignored.
        let mut tool = mpir_target::testkit::with_default_sigint(fault_tool())
            .args(args)
            .envs(env.iter().copied())
            .arg("--")
            .args(starter)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = tool.stdout.take().unwrap();
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            let _ = tx.send(s);
        });
        ToolRun {
            stdin: tool.stdin.take(),
            tool,
            output,
            starter: 0,
            ranks: Vec::new(),
            stderr: String::new(),
        }
    }

    fn wait_held(&mut self) {
        let mut err = BufReader::new(self.tool.stderr.take().unwrap());
        loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                panic!("the tool ended before holding the job:\n{}", self.stderr);
            }
            self.stderr.push_str(&line);
            if let Some(rest) = line.trim().strip_prefix("fault_tool: held ") {
                for w in rest.split_whitespace() {
                    if let Some(p) = w.strip_prefix("starter=") {
                        self.starter = p.parse().unwrap();
                    } else if let Some(r) = w.strip_prefix("ranks=") {
                        self.ranks = r.split(',').filter_map(|p| p.parse().ok()).collect();
                    }
                }
                break;
            }
        }
        // Keep draining stderr (a full pipe must not block the tool).
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    }

    /// Waits for the tool itself (keeping the job's stdin open).
    fn tool_status(&mut self) -> ExitStatus {
        self.tool.wait().unwrap()
    }

    /// Closes the job's stdin and returns its whole output; fails (killing the job) when the
    /// job has not ended within 60 s — e.g. ranks left spinning on a closed gate.
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let _ = self.tool.wait();
        match self.output.recv_timeout(Duration::from_secs(60)) {
            Ok(out) => out,
            Err(_) => {
                for &p in self.ranks.iter().chain([&self.starter]) {
                    let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
                }
                panic!("the job did not end within 60 s (killed)");
            }
        }
    }
}

impl Drop for ToolRun {
    fn drop(&mut self) {
        let _ = self.tool.kill();
        let _ = self.tool.wait();
    }
}

/// Runs `starter ARGS` without any tool, its stdin closed at once: the undisturbed output.
fn undisturbed(dir: &Path, starter: &[&str]) -> String {
    undisturbed_env(dir, starter, &[])
}

fn undisturbed_env(dir: &Path, starter: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(starter[0])
        .args(&starter[1..])
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fake starter and rank, compiled into a scratch directory.
struct Fake {
    dir: Scratch,
    starter: String,
    rank: String,
}

fn fake(name: &str, starter_flags: &[&str]) -> Option<Fake> {
    let dir = scratch(name);
    let starter = build(&dir, "starter", "starter", starter_flags)?;
    let rank = build(&dir, "rank", "rank", &["-O1", "-g"])?;
    Some(Fake {
        starter: starter.to_str()?.into(),
        rank: rank.to_str()?.into(),
        dir,
    })
}

/// What must hold once the tool is gone: nothing traced or stopped, and in every process
/// still running, code as in its files (around `MPIR_Breakpoint` and the entry points, where
/// breakpoints were planted) and, in the starter, `MPIR_being_debugged` back to 0. With
/// `alive`, every process must still run (the test keeps them alive through their stdin):
/// the checks are not vacuous.
fn assert_left_as_found(run: &ToolRun, alive: bool) {
    assert!(run.starter != 0);
    // A check that fails because its process ended meanwhile is no failure without `alive`.
    let checked = |pid: u32, what: &str, f: &dyn Fn()| {
        assert_untouched(pid);
        if alive {
            assert!(is_running(pid), "{what} {pid} still runs");
        }
        if !is_running(pid) {
            return;
        }
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            && (alive || is_running(pid))
        {
            std::panic::resume_unwind(p);
        }
    };
    let s = run.starter;
    checked(s, "the starter", &|| {
        assert_code_as_in_file(s, &[symbol_address(s, "MPIR_Breakpoint"), entry_point(s)]);
        assert_eq!(
            read_int(s, "MPIR_being_debugged"),
            0,
            "being_debugged reset"
        );
    });
    for &r in &run.ranks {
        checked(r, "rank", &|| assert_code_as_in_file(r, &[entry_point(r)]));
    }
}

#[test]
fn sigterm_while_the_job_is_held() {
    let Some(f) = fake("fi-sigterm", &["-g"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "3", "--", &*f.rank, "stdin"];
    let expected = undisturbed(&f.dir, &job);
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    assert_eq!(run.ranks.len(), 3);
    assert_eq!(read_int(run.starter, "MPIR_being_debugged"), 1, "set by us");
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

#[test]
fn sigint_while_waiting_for_the_spawn_event() {
    let Some(f) = fake("fi-sigint-spawn", &["-g"]) else {
        return;
    };
    // -z: the starter never spawns; the tool waits for the spawn event with its breakpoint
    // planted and MPIR_being_debugged set.
    let job = [&*f.starter, "-z", "--", &*f.rank];
    let expected = undisturbed(&f.dir, &job);
    let mut run = ToolRun::start(&f.dir, &["--safety", "signals"], &job, &[]);
    let starter = child_of(run.tool.id());
    run.starter = starter;
    assert!(
        wait_for(20, || read_int_opt(starter, "MPIR_being_debugged")
            == Some(1)),
        "the tool set MPIR_being_debugged"
    );
    assert!(
        wait_for(20, || breakpoint_byte(starter) == 0xcc),
        "the tool planted its breakpoint"
    );
    kill(run.tool.id(), "INT");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGINT));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

/// The first child of `pid` (waits up to 20 s for it).
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

fn read_int_opt(pid: u32, name: &str) -> Option<i64> {
    use mpir_target::{MemoryExt, SymbolLookupExt};
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).ok()?;
    let a = t.require_symbol(name).ok()?.address;
    t.read_c_int(a, name).ok()
}

fn breakpoint_byte(pid: u32) -> u8 {
    use mpir_target::{MemoryExt, SymbolLookupExt};
    let Ok(t) = mpir_target::live::LiveTarget::open(pid, Default::default()) else {
        return 0;
    };
    let Ok(s) = t.require_symbol("MPIR_Breakpoint") else {
        return 0;
    };
    t.read_vec(s.address, 1).map_or(0, |v| v[0])
}

#[test]
fn sigint_while_held_opens_the_closed_gates() {
    // MINIMAL: no MPIR_partial_attach_ok, so every rank is attached and its gate is ours to
    // open; the ranks spin on it (and give up after 30 s with status 3).
    let Some(f) = fake("fi-gate", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "3", "--", &*f.rank, "gate", "stdin"];
    let baseline = ToolRun::held(&f.dir, &["--then", "release"], &job).finish();
    assert_eq!(baseline.matches("released").count(), 3, "{baseline}");
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    assert_eq!(run.ranks.len(), 3);
    for &r in &run.ranks {
        assert_eq!(read_int(r, "MPIR_debug_gate"), 0, "still closed while held");
    }
    kill(run.tool.id(), "INT");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGINT));
    assert_left_as_found(&run, true);
    let out = run.finish();
    assert!(out.contains("starter done failed=0"), "{out}");
    assert_eq!(normalized(&out), normalized(&baseline));
}

#[test]
fn a_worker_thread_panics_and_the_panic_hook_lets_go() {
    let Some(f) = fake("fi-panic-hook", &["-g"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "2", "--", &*f.rank, "stdin"];
    let expected = undisturbed(&f.dir, &job);
    let mut run = ToolRun::held(
        &f.dir,
        &["--safety", "panic", "--then", "panic-thread"],
        &job,
    );
    assert_eq!(run.tool_status().code(), Some(101));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

#[test]
fn without_a_safety_net_a_dying_tool_kills_the_starter() {
    // The control for the test above: the same panic with no hook. The kernel detaches the
    // tracees when the tool dies, but the int3 in MPIR_Breakpoint stays: the starter's next
    // MPIR event (-2: a second spawn event) runs into it and it dies of SIGTRAP. (This is the
    // harm the safety nets prevent; the ranks survive and end when their stdin closes.)
    let Some(f) = fake("fi-control", &["-g"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "2", "-2", "--", &*f.rank, "stdin"];
    let mut run = ToolRun::held(&f.dir, &["--then", "panic-thread"], &job);
    assert_eq!(run.tool_status().code(), Some(101));
    let s = run.starter;
    assert!(
        wait_for(10, || {
            let st = status_field(s, "State:");
            st.is_empty() || st.starts_with('Z')
        }),
        "the starter died"
    );
    let ranks = run.ranks.clone();
    let out = run.finish();
    assert!(!out.contains("starter done"), "{out}");
    for r in ranks {
        assert_untouched(r);
    }
}

#[test]
fn a_panic_on_the_main_thread_unwinds_and_releases() {
    let Some(f) = fake("fi-panic-main", &["-g"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "2", "--", &*f.rank, "stdin"];
    let expected = undisturbed(&f.dir, &job);
    // No safety net at all: unwinding drops the held job, which releases it.
    let mut run = ToolRun::held(&f.dir, &["--then", "panic-main"], &job);
    assert_eq!(run.tool_status().code(), Some(101));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

#[test]
fn exit_while_the_job_is_held_and_the_at_exit_handler() {
    let Some(f) = fake("fi-exit", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "2", "--", &*f.rank, "gate", "stdin"];
    let baseline = ToolRun::held(&f.dir, &["--then", "release"], &job).finish();
    let mut run = ToolRun::held(&f.dir, &["--safety", "exit", "--then", "exit"], &job);
    assert_eq!(run.tool_status().code(), Some(3));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&baseline));
}

#[test]
fn the_starter_is_killed_at_its_breakpoint_then_the_tool_is_stopped() {
    let Some(f) = fake("fi-starter-killed", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "2", "--", &*f.rank, "gate", "stdin"];
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    let s = run.starter;
    assert!(
        status_field(s, "State:").starts_with('t'),
        "held at MPIR_Breakpoint"
    );
    kill(s, "KILL");
    assert!(wait_for(10, || {
        let st = status_field(s, "State:");
        st.is_empty() || st.starts_with('Z')
    }));
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, false);
    // The ranks' gates were opened on the way out: they finish although their starter died.
    let out = run.finish();
    assert_eq!(out.matches("released").count(), 2, "{out}");
    assert!(!out.contains("starter done"), "{out}");
}

#[test]
fn a_rank_is_killed_while_held_then_the_tool_is_stopped() {
    let Some(f) = fake("fi-rank-killed", &["-g"]) else {
        return;
    };
    let job = [&*f.starter, "-n", "3", "--", &*f.rank, "stdin"];
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    let victim = run.ranks[1];
    kill(victim, "KILL");
    assert!(wait_for(10, || !status_field(victim, "State:").starts_with('t')));
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, false);
    let survivors: Vec<u32> = run.ranks.iter().copied().filter(|&r| r != victim).collect();
    let out = run.finish();
    // The starter reports the killed rank, and only that.
    assert!(out.contains("starter done failed=1"), "{out}");
    let printed: Vec<i64> = printed_ranks(&out).into_iter().map(|(_, p)| p).collect();
    for p in survivors {
        assert!(printed.contains(&i64::from(p)), "{p} ran on: {out}");
    }
}

#[test]
fn ranks_exit_during_the_attach_then_the_tool_is_stopped() {
    let Some(f) = fake("fi-exiting", &["-g"]) else {
        return;
    };
    // The ranks print and exit at once: some are gone before they can be attached.
    let job = [&*f.starter, "-n", "4", "--", &*f.rank];
    let expected = undisturbed(&f.dir, &job);
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, false);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

/// `mpi_ranks` compiled with `mpicc` (a real MPI program); `None` after a skip.
fn mpi_program(dir: &Path, mpicc: &Path) -> Option<String> {
    let exe = dir.join("mpi_ranks");
    match run(Command::new(mpicc)
        .arg(fixtures().join("mpi_ranks.c"))
        .arg("-o")
        .arg(&exe))
    {
        Ok(_) => Some(exe.to_str()?.into()),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

const OMPI_ENV: [(&str, &str); 3] = [
    ("OMPI_MPIR_DO_NOT_WARN", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
];

#[test]
fn open_mpi_sigterm_while_held_and_the_job_completes() {
    if !have("orterun") || !have("mpicc.openmpi") {
        return skip("Open MPI (orterun, mpicc.openmpi) not installed");
    }
    let dir = scratch("fi-ompi");
    let Some(program) = mpi_program(&dir, Path::new("mpicc.openmpi")) else {
        return;
    };
    let job = ["orterun", "--oversubscribe", "-n", "2", &program, "4"];
    let expected = undisturbed_env(&dir, &job, &OMPI_ENV);
    assert_eq!(expected.matches(" done").count(), 2, "{expected}");
    let mut run = ToolRun::held_env(&dir, &["--safety", "signals"], &job, &OMPI_ENV);
    assert_eq!(run.ranks.len(), 2);
    assert_eq!(read_int(run.starter, "MPIR_being_debugged"), 1, "set by us");
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    // MPIR_Breakpoint lives in libopen-rte.so: its text segment is compared with that file.
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&expected));
}

#[test]
fn mpich_gated_ranks_are_released_when_the_tool_is_stopped() {
    let prefix = std::env::var_os("MPIR_MPICH_DEBUGINFO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/mpich-debuginfo"));
    if !prefix.join("bin/mpiexec.hydra").exists() {
        return skip("no debugger-enabled MPICH: run scripts/mpich-debuginfo.sh");
    }
    let dir = scratch("fi-mpich");
    let Some(program) = mpi_program(&dir, &prefix.join("bin/mpicc")) else {
        return;
    };
    let mpiexec = prefix.join("bin/mpiexec.hydra");
    let job = [mpiexec.to_str().unwrap(), "-n", "2", &program, "4"];
    // Every rank waits on MPIR_debug_gate; hydra allows partial attach, so only "always"
    // makes the gate ours to open.
    let env = [("MPIEXEC_DEBUG", "1")];
    let tool = ["--safety", "signals", "--gate", "always"];
    let baseline = ToolRun::held_env(
        &dir,
        &[&tool[..], &["--then", "release"]].concat(),
        &job,
        &env,
    )
    .finish();
    assert_eq!(baseline.matches(" done").count(), 2, "{baseline}");
    let mut run = ToolRun::held_env(&dir, &tool, &job, &env);
    assert_eq!(run.ranks.len(), 2);
    for &r in &run.ranks {
        assert_eq!(read_int(r, "MPIR_debug_gate"), 0, "still closed while held");
    }
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, true);
    assert_eq!(normalized(&run.finish()), normalized(&baseline));
}

#[test]
fn sigterm_while_held_never_touches_other_nodes_pids() {
    // The table also lists "other nodes'" ranks whose pids are local processes that are no
    // rank (decoys recording any tracer or stop). The tool holds the job and is told to stop:
    // the clean-up lets go of what it held and never reaches the decoys.
    let Some(f) = fake("fi-decoys", &["-g"]) else {
        return;
    };
    let Some(decoys) = mpir_target::testkit::Decoys::start(&f.dir, 2) else {
        return;
    };
    let pids = decoys.pids();
    let far0 = format!("far-node-1:{}", pids[0]);
    let far1 = format!("far-node-2.cluster.invalid:{}", pids[1]);
    let job = [
        &*f.starter,
        "-n",
        "2",
        "-R",
        &far0,
        "-R",
        &far1,
        "--",
        &*f.rank,
        "stdin",
    ];
    let mut run = ToolRun::held(&f.dir, &["--safety", "signals"], &job);
    assert_eq!(run.ranks.len(), 2, "only this node's ranks are held");
    kill(run.tool.id(), "TERM");
    assert_eq!(run.tool_status().signal(), Some(libc::SIGTERM));
    assert_left_as_found(&run, true);
    run.finish();
    decoys.assert_untouched();
}
