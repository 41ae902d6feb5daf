//! Acquisition on the real, unmodified MPI stacks `.ci/run` installs: Open MPI 4.1.4's
//! `orterun`, MPICH 4.0.2's stripped `mpiexec.hydra` (with its rebuilt symbol file) and Intel
//! MPI 2021.19's `mpiexec.hydra` (PyPI `impi-rt`, `scripts/ci-impi.sh`; symbols and DWARF in
//! the executable, ranks under `hydra_pmi_proxy`), in launch and attach modes. Every proctable pid must equal the pid the rank printed itself
//! (`getpid()` in the rank), and the job must finish normally after we let go.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::quirks::Launcher;
use mpir_acquire::{AcquireOptions, RankControl};
use mpir_target::debuginfo::DebugOptions;
use support::*;

#[derive(Clone, Copy, Debug)]
enum Stack {
    OpenMpi,
    Hydra,
    Intel,
}

/// Where `scripts/ci-impi.sh` installs Intel MPI.
fn impi_prefix() -> PathBuf {
    std::env::var_os("MPIR_IMPI_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/venv-impi"))
}

impl Stack {
    fn tools(self) -> (String, String) {
        let (run, cc) = match self {
            Stack::OpenMpi => ("orterun", "mpicc.openmpi"),
            Stack::Hydra => ("mpiexec.hydra", "mpicc.mpich"),
            Stack::Intel => {
                let bin = impi_prefix().join("bin");
                return (
                    bin.join("mpiexec.hydra").display().to_string(),
                    bin.join("mpicc").display().to_string(),
                );
            }
        };
        (run.to_string(), cc.to_string())
    }

    fn launcher(self) -> Launcher {
        match self {
            Stack::OpenMpi => Launcher::OpenMpi,
            Stack::Hydra | Stack::Intel => Launcher::Hydra,
        }
    }

    /// The MPI program, compiled for this stack; `None` after a skip.
    fn program(self, dir: &Path) -> Option<PathBuf> {
        let (run, cc) = self.tools();
        let present = |t: &str| t.starts_with('/') && Path::new(t).is_file() || have(t);
        if !present(&run) || !present(&cc) {
            skip(&format!(
                "{run} / {cc} not installed (Intel MPI: scripts/ci-impi.sh, MPIR_IMPI_PREFIX)"
            ));
            return None;
        }
        let exe = dir.join("mpi_ranks");
        match support::run(
            Command::new(&cc)
                // Intel's compiler wrapper finds its installation from I_MPI_ROOT.
                .env("I_MPI_ROOT", impi_prefix())
                .arg(fixtures().join("mpi_ranks.c"))
                .arg("-o")
                .arg(&exe),
        ) {
            Ok(_) => Some(exe),
            Err(e) => {
                skip(&e);
                None
            }
        }
    }

    fn command(self, n: usize, program: &Path, seconds: u32) -> Command {
        let (run, _) = self.tools();
        let mut c = Command::new(run);
        // Intel MPI's own defaults on one node (shared memory, no libfabric): no I_MPI_*.
        if let Stack::OpenMpi = self {
            c.args(["--oversubscribe"])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MPIR_DO_NOT_WARN", "1");
        }
        c.arg("-n")
            .arg(n.to_string())
            .arg(program)
            .arg(seconds.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    }

    /// Acquisition options: hydra's symbols come from the rebuilt debug file.
    fn options(self) -> Option<AcquireOptions> {
        let o = AcquireOptions::default().with_timeout(Duration::from_secs(60));
        match self {
            // Intel's mpiexec.hydra carries its own symbols and DWARF.
            Stack::OpenMpi | Stack::Intel => Some(o),
            Stack::Hydra => {
                let dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
                if !dir.join(".build-id").is_dir() {
                    skip("no hydra symbol file: run scripts/hydra-debug-symbols.sh");
                    return None;
                }
                let mut debug = DebugOptions::default();
                debug.debug_dirs.push(dir);
                Some(o.with_debug(debug))
            }
        }
    }
}

/// Reads the job's output to the end and waits: every rank said "done", exit 0.
fn assert_completes(mut child: Child, mut seen: String, n: usize) -> String {
    let mut rest = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    seen.push_str(&rest);
    let status = child.wait().unwrap();
    assert!(status.success(), "the job failed: {status}\n{seen}");
    assert_eq!(seen.matches(" done").count(), n, "{seen}");
    seen
}

fn check_job(stack: Stack, job: &mpir_acquire::Job, n: usize) {
    check_job_held(stack, job, n, true);
}

/// The job as the stack reports it: every rank on this node (by the host name the launcher
/// really reports), and attached (proven first) when `held`, else untouched.
fn check_job_held(stack: Stack, job: &mpir_acquire::Job, n: usize, held: bool) {
    assert_eq!(job.len(), n);
    assert_eq!(job.starter.launcher, Some(stack.launcher()));
    assert!(job.starter.flags.i_am_starter.present);
    assert!(job.starter.flags.partial_attach_ok.present);
    assert!(
        job.table.resolved.problems.is_empty(),
        "{:?}",
        job.table.resolved.problems
    );
    for r in 0..n as u64 {
        assert!(
            job.locality(r).is_local(),
            "rank {r}: {:?}",
            job.locality(r)
        );
        if held {
            assert!(
                matches!(job.control(r), RankControl::Attached { .. }),
                "rank {r}: {:?}",
                job.control(r)
            );
        } else {
            assert_eq!(job.control(r), &RankControl::NotAttached, "rank {r}");
        }
    }
    assert_eq!(job.nodes().len(), 1, "{:?}", job.nodes());
}

fn launch(stack: Stack, n: usize) {
    let dir = scratch(&format!("launch-{stack:?}-{n}"));
    let (Some(program), Some(options)) = (stack.program(&dir), stack.options()) else {
        return;
    };
    let mut a = live::launch(stack.command(n, &program, 1), options).unwrap();
    let child = a.take_child().unwrap();
    let job = a.job().clone();
    check_job(stack, &job, n);
    drop(a);
    assert_untouched(child.id());
    let out = assert_completes(child, String::new(), n);
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(
        printed_ranks(&out),
        table,
        "every pid is the rank's own getpid()"
    );
}

fn attach(stack: Stack, n: usize) {
    let dir = scratch(&format!("attach-{stack:?}-{n}"));
    let (Some(program), Some(options)) = (stack.program(&dir), stack.options()) else {
        return;
    };
    let mut child = stack.command(n, &program, 4).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed_ranks(&seen).len() < n {
        if out.read_line(&mut seen).unwrap() == 0 {
            panic!("the job ended early: {seen}");
        }
    }
    // Reading the running job touches no rank.
    let a = live::attach(child.id(), options.clone()).unwrap();
    check_job_held(stack, a.job(), n, false);
    drop(a);
    // Holding it attaches every rank, each proven to be the table's.
    let a = live::attach(child.id(), options.with_hold(true)).unwrap();
    let job = a.job().clone();
    check_job(stack, &job, n);
    assert!(
        job.attached()
            .iter()
            .all(|&(_, _, p)| p == mpir_acquire::Proven::InProgram)
    );
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(printed_ranks(&seen), table);
    drop(a);
    assert_untouched(child.id());
    for (_, pid) in &table {
        assert_untouched(*pid as u32);
    }
    child.stdout = Some(out.into_inner());
    assert_completes(child, seen, n);
}

#[test]
fn open_mpi_launch_4() {
    launch(Stack::OpenMpi, 4);
}

#[test]
fn open_mpi_launch_16() {
    launch(Stack::OpenMpi, 16);
}

#[test]
fn open_mpi_attach_4() {
    attach(Stack::OpenMpi, 4);
}

#[test]
fn open_mpi_attach_16() {
    attach(Stack::OpenMpi, 16);
}

#[test]
fn hydra_launch_4() {
    launch(Stack::Hydra, 4);
}

#[test]
fn hydra_attach_4() {
    attach(Stack::Hydra, 4);
}

#[test]
fn intel_mpi_launch_4() {
    launch(Stack::Intel, 4);
}

#[test]
fn intel_mpi_attach_4() {
    attach(Stack::Intel, 4);
}

/// The MPICH built by `scripts/mpich-debuginfo.sh` (`MPIR_MPICH_DEBUGINFO`, default
/// `/var/cache/mpir-rs/mpich-debuginfo`), and a program built with its mpicc.
fn debuginfo_mpich(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let prefix = std::env::var_os("MPIR_MPICH_DEBUGINFO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/mpich-debuginfo"));
    if !prefix.join("bin/mpiexec.hydra").exists() {
        skip("no debugger-enabled MPICH: run scripts/mpich-debuginfo.sh");
        return None;
    }
    let exe = dir.join("mpi_ranks");
    let built = support::run(
        Command::new(prefix.join("bin/mpicc"))
            .arg(fixtures().join("mpi_ranks.c"))
            .arg("-o")
            .arg(&exe),
    );
    match built {
        Ok(_) => Some((prefix, exe)),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

fn gated_job(prefix: &Path, program: &Path) -> Command {
    let mut c = Command::new(prefix.join("bin/mpiexec.hydra"));
    c.args(["-n", "2"])
        .arg(program)
        .arg("0")
        .env("MPIEXEC_DEBUG", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

#[test]
fn mpich_debuginfo_ranks_wait_on_the_gate_until_we_release_it() {
    let dir = scratch("mpich-gate");
    let Some((prefix, program)) = debuginfo_mpich(&dir) else {
        return;
    };
    let o = AcquireOptions::default()
        .with_timeout(Duration::from_secs(60))
        .with_hold(true);
    let mut a = live::launch(gated_job(&prefix, &program), o).unwrap();
    let child = a.take_child().unwrap();
    let job = a.job().clone();
    assert_eq!(job.len(), 2);
    assert_eq!(job.starter.launcher, Some(Launcher::Hydra));
    // hydra allows partial attach, so the spec's rule alone would not open the gate.
    assert!(job.starter.flags.partial_attach_ok.present);
    let opened = a.release_gate().unwrap();
    assert_eq!(opened.len(), 2);
    assert!(opened.iter().all(|g| g.written()), "{opened:?}");
    let mut ranks: Vec<u64> = opened.iter().map(|g| g.rank).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1]);
    assert!(a.release().unwrap().is_empty());
    let out = assert_completes(child, String::new(), 2);
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(printed_ranks(&out), table);
}

#[test]
fn mpich_debuginfo_gate_policy_always_and_never() {
    let dir = scratch("mpich-gate-policy");
    let Some((prefix, program)) = debuginfo_mpich(&dir) else {
        return;
    };
    let o = AcquireOptions::default().with_timeout(Duration::from_secs(60));
    // Always: released on the way out, the job completes.
    let mut a = live::launch(
        gated_job(&prefix, &program),
        o.clone().with_gate(mpir_acquire::GateRelease::Always),
    )
    .unwrap();
    assert_completes(a.take_child().unwrap(), String::new(), 2);
    drop(a);

    // Never: the ranks spin on their gate after we let go (the control: the gate matters).
    let mut a = live::launch(
        gated_job(&prefix, &program),
        o.with_gate(mpir_acquire::GateRelease::Never),
    )
    .unwrap();
    let mut child = a.take_child().unwrap();
    let pids: Vec<u32> = a.job().ranks().map(|r| r.pid as u32).collect();
    drop(a);
    std::thread::sleep(Duration::from_millis(1500));
    for &p in &pids {
        assert_untouched(p);
        let state = status_field(p, "State:");
        assert!(
            state.starts_with('R') || state.starts_with('S'),
            "{p}: {state}"
        );
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the job waits for a debugger"
    );
    for &p in &pids {
        let _ = Command::new("kill").arg("-9").arg(p.to_string()).status();
    }
    mpir_target::testkit::stop_launcher(&mut child);
}

/// Intel's `-tv` mode waits after `MPIR_Breakpoint` until `MPIR_being_debugged` is non-zero
/// (and starts `$TOTALVIEW` itself, here `true`): our launch, which releases the job at once,
/// must not leave it waiting for ever. Every rank runs to its end within the bound.
#[test]
fn intel_mpi_tv_launch_is_never_left_waiting() {
    let stack = Stack::Intel;
    let dir = scratch("launch-intel-tv");
    let (Some(program), Some(options)) = (stack.program(&dir), stack.options()) else {
        return;
    };
    let (run, _) = stack.tools();
    let mut cmd = Command::new(run);
    cmd.args(["-tv", "-n", "2"])
        .arg(&program)
        .arg("1")
        .env("TOTALVIEW", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut a = live::launch(cmd, options).unwrap();
    let mut child = a.take_child().unwrap();
    let job = a.job().clone();
    assert!(job.starter.keeps_being_debugged, "{:?}", job.notes);
    drop(a);
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let ended = wait_for(60, || child.try_wait().ok().flatten().is_some());
    if !ended {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        ended,
        "the -tv job was left waiting for MPIR_being_debugged"
    );
    let seen = reader.join().unwrap();
    assert_eq!(seen.matches(" done").count(), 2, "{seen}");
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(printed_ranks(&seen), table);
}
