//! Attach mode on starters without MPIR symbols (issue 19, "Starters without symbols"): the
//! table is found by a validated memory search, and acquisition goes on as with symbols —
//! every rank proven before it is touched, held and released — without a single write into
//! the starter.
//!
//! - The PyPI MPICH 5.0.2 wheel (`MPIR_MPICH5_PREFIX`, made by `scripts/ci-mpich5.sh`): its
//!   `mpiexec.hydra` is stripped, non-PIE and has no build-id. Every pid of the discovered
//!   table must equal the `getpid()` its rank printed.
//! - `fixtures/symbolless_starter.c`, compiled and `strip`ped at test time: a starter that
//!   forks ranks and fills an MPIR-like table, and its hostile variants (two equally valid
//!   tables, a pid that is no descendant, a wrong size word, strings unterminated or unmapped,
//!   a huge size): refused, each with its reason, every process left as found.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{AcquireError, AcquireOptions, Note, RankControl};
use mpir_types::mpir::discover::{DiscoverError, Reason};
use support::*;

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(30))
}

/// The MPICH 5 wheel's prefix, a scratch directory `name`, and the rank fixture compiled
/// there with the wheel's `mpicc`; `None` after a skip.
fn mpich5_program(name: &str) -> Option<(PathBuf, Scratch, PathBuf)> {
    let wheel = Wheel::find(&MPICH5_WHEEL)?;
    let dir = scratch(name);
    let exe = wheel.program(&fixtures().join("mpi_ranks.c"), &dir, "mpi_ranks")?;
    Some((wheel.prefix, dir, exe))
}

/// Reads lines until every one of `n` ranks printed its pid.
fn wait_ranks(out: &mut impl BufRead, seen: &mut String, n: usize) {
    while printed_ranks(seen).len() < n {
        if out.read_line(seen).unwrap() == 0 {
            panic!("the job ended early: {seen}");
        }
    }
}

/// Reads the rest of the job's output and waits: every rank said "done", exit 0.
fn assert_completes(mut child: Child, mut out: impl Read, mut seen: String, n: usize) {
    out.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the job failed: {status}\n{seen}");
    assert_eq!(seen.matches(" done").count(), n, "{seen}");
}

/// The bytes of the starter's executable file mappings and the code it runs are as before:
/// nothing was written into it (its writable memory is its own business, but a breakpoint or a
/// patched variable would show in what we compare: the table's pointer and size words).
fn words(pid: u32, at: &[u64]) -> Vec<Vec<u8>> {
    use mpir_target::Memory;
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).unwrap();
    at.iter()
        .map(|&a| {
            let mut b = vec![0u8; 8];
            t.read_exact(a, &mut b).unwrap();
            b
        })
        .collect()
}

fn discovered_note(job: &mpir_acquire::Job) -> String {
    job.notes
        .iter()
        .find(|n| matches!(n, Note::TableDiscovered { .. }))
        .map(ToString::to_string)
        .unwrap_or_else(|| panic!("no table_discovered note: {:?}", job.notes))
}

#[test]
fn mpich5_wheel_stripped_hydra_attach_4() {
    let Some((prefix, dir, exe)) = mpich5_program("mpich5") else {
        return;
    };
    let n = 4;
    let mut child = Command::new(prefix.join("bin/mpiexec.hydra"))
        .args(["-n", &n.to_string()])
        .arg(&exe)
        .arg("6")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    wait_ranks(&mut out, &mut seen, n);
    let printed = printed_ranks(&seen);

    // Reading the running job touches no rank.
    let a = live::attach(child.id(), options()).unwrap();
    let job = a.job().clone();
    drop(a);
    let found = job.discovered.clone().expect("the table was discovered");
    assert_eq!(found.entries, n as u64);
    assert_eq!(job.starter.breakpoint, 0);
    assert!(!job.starter.set_being_debugged);
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(table, printed, "every pid is its rank's own getpid()");
    for r in 0..n as u64 {
        assert!(job.locality(r).is_local(), "rank {r}");
        assert_eq!(job.control(r), &RankControl::NotAttached, "rank {r}");
    }
    let note = discovered_note(&job);
    assert!(
        note.contains(&format!("{:#x}", found.pointer_address)) && note.contains("4 entries"),
        "{note}"
    );
    // Its flags cannot be read: nothing is said about them.
    assert!(
        !job.notes.iter().any(|n| matches!(n, Note::GateLeftAlone)),
        "{:?}",
        job.notes
    );
    let before = words(child.id(), &[found.pointer_address, found.size_address]);

    // Holding it through attach_any (the session's path): every rank proven and attached.
    let any = live::attach_any(child.id(), options().with_hold(true)).unwrap();
    let a = any.mpir.as_ref().unwrap();
    assert!(a.is_held());
    let held = a.job();
    assert_eq!(held.discovered.as_ref(), Some(&found));
    for r in 0..n as u64 {
        assert!(
            matches!(
                held.control(r),
                RankControl::Attached {
                    proven: mpir_acquire::Proven::InProgram,
                    ..
                }
            ),
            "rank {r}: {:?}",
            held.control(r)
        );
    }
    drop(any);
    assert_eq!(
        words(child.id(), &[found.pointer_address, found.size_address]),
        before
    );
    assert_untouched(child.id());
    for (_, pid) in &table {
        assert_untouched(*pid as u32);
    }
    assert_completes(child, out, seen, n);
}

/// Builds the symbol-less fixture starter with `defines`, then strips it; `None` after a skip.
fn stripped_starter(dir: &Path, name: &str, defines: &[&str]) -> Option<PathBuf> {
    let exe = build(dir, "symbolless_starter", name, defines)?;
    if !have("strip") {
        skip("no strip (binutils)");
        return None;
    }
    run(Command::new("strip").arg(&exe)).unwrap();
    // No symbol table left: what the search is for.
    let syms = run(Command::new("nm").arg(&exe)).unwrap_or_default();
    assert!(!syms.contains("MPIR_proctable"), "{syms}");
    Some(exe)
}

/// A running fixture job: the starter, its output, and its ranks' pids.
struct Fixture {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    seen: String,
    ranks: Vec<(u64, i64)>,
    /// The starter's directory, kept while it runs.
    _dir: Option<Scratch>,
}

impl Fixture {
    fn start(exe: &Path, n: usize, extra: &[&str]) -> Fixture {
        let mut child = Command::new(exe)
            .arg(n.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        wait_ranks(&mut out, &mut seen, n);
        // The table is filled once every rank has printed: the starter says "ready".
        while !seen.contains("ready") {
            if out.read_line(&mut seen).unwrap() == 0 {
                panic!("the starter ended early: {seen}");
            }
        }
        let ranks = printed_ranks(&seen);
        Fixture {
            child,
            out,
            seen,
            ranks,
            _dir: None,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything left as found, then the job stopped.
    fn finish(mut self) {
        assert_untouched(self.pid());
        for (_, p) in &self.ranks {
            assert_untouched(*p as u32);
        }
        stop_launcher(&mut self.child);
        let _ = self.out.read_to_string(&mut self.seen);
    }
}

fn stop_launcher(child: &mut Child) {
    mpir_target::testkit::stop_launcher(child);
}

#[test]
fn a_stripped_fixture_starters_table_is_discovered_and_held() {
    let dir = scratch("stripped-ok");
    let Some(exe) = stripped_starter(&dir, "starter_ok", &[]) else {
        return;
    };
    let f = Fixture::start(&exe, 3, &[]);
    let a = live::attach(f.pid(), options().with_hold(true)).unwrap();
    let job = a.job().clone();
    assert!(job.discovered.is_some(), "{:?}", job.notes);
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(table, f.ranks);
    for r in 0..3 {
        assert!(
            matches!(job.control(r), RankControl::Attached { .. }),
            "rank {r}: {:?}",
            job.control(r)
        );
    }
    // Held: the ranks are stopped under us.
    for (_, p) in &f.ranks {
        assert!(status_field(*p as u32, "TracerPid:") != "0");
    }
    drop(a);
    f.finish();
}

/// Attaches to the hostile starter built with `define` and returns the discovery error.
fn refused(define: &str, n: usize) -> (DiscoverError, Fixture) {
    let dir = scratch(&format!("stripped-{define}"));
    let exe = stripped_starter(&dir, "starter", &[&format!("-D{define}")])
        .expect("cc and strip are there (the first test checks)");
    let mut f = Fixture::start(&exe, n, &[]);
    f._dir = Some(dir);
    let e = live::attach(f.pid(), options()).unwrap_err();
    let AcquireError::Discovery { source, .. } = e else {
        panic!("{define}: expected a discovery error, got {e}");
    };
    (source, f)
}

fn near_misses(e: &DiscoverError) -> Vec<Reason> {
    match e {
        DiscoverError::NotFound { rejections, .. } => {
            rejections.iter().map(|r| r.reason.clone()).collect()
        }
        other => panic!("expected NotFound, got {other}"),
    }
}

#[test]
fn two_equally_valid_tables_are_refused_naming_both() {
    if !have("cc") || !have("strip") {
        skip("no C compiler or no strip");
        return;
    }
    let (e, f) = refused("TWO_TABLES", 2);
    let DiscoverError::Ambiguous { candidates } = &e else {
        panic!("expected Ambiguous, got {e}");
    };
    assert_eq!(candidates.len(), 2, "{e}");
    assert_ne!(candidates[0].pointer_address, candidates[1].pointer_address);
    let text = e.to_string();
    for c in candidates {
        assert!(
            text.contains(&format!("{:#x}", c.pointer_address)),
            "{text}"
        );
    }
    f.finish();
}

#[test]
fn hostile_tables_are_rejected_with_their_reason() {
    if !have("cc") || !have("strip") {
        skip("no C compiler or no strip");
        return;
    }
    // A pid that is no descendant of the starter (our own test process's parent).
    let (e, f) = refused("STRANGER", 2);
    assert!(
        near_misses(&e)
            .iter()
            .any(|r| matches!(r, Reason::NotDescendant { index: 1, .. })),
        "{e}"
    );
    f.finish();
    // A size word one less than the table: the table goes on past it.
    let (e, f) = refused("SHORT_SIZE", 3);
    assert!(
        near_misses(&e)
            .iter()
            .any(|r| matches!(r, Reason::TableContinues { entries: 2, .. })),
        "{e}"
    );
    f.finish();
    // An executable name with no NUL before unmapped memory.
    let (e, f) = refused("UNTERMINATED", 2);
    assert!(
        near_misses(&e).iter().any(|r| matches!(
            r,
            Reason::BadString {
                field: "executable_name",
                ..
            }
        )),
        "{e}"
    );
    f.finish();
    // A host name pointing at nothing mapped.
    let (e, f) = refused("UNMAPPED", 2);
    assert!(
        near_misses(&e).iter().any(|r| matches!(
            r,
            Reason::BadString {
                field: "host_name",
                address: 0x10,
                ..
            }
        )),
        "{e}"
    );
    f.finish();
    // A huge size, whose table is never read.
    let (e, f) = refused("HUGE_SIZE", 2);
    assert!(
        near_misses(&e)
            .iter()
            .any(|r| matches!(r, Reason::NoSize { .. })),
        "{e}"
    );
    f.finish();
}

#[test]
fn launch_mode_and_no_job_say_what_they_cannot_do() {
    let dir = scratch("stripped-nojob");
    let Some(exe) = stripped_starter(&dir, "starter_nojob", &[]) else {
        return;
    };
    // Before it has any child: no job under it, not a starter.
    let mut lone = Command::new(&exe)
        .arg("0")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let e = live::attach(lone.id(), options()).unwrap_err();
    assert!(matches!(e, AcquireError::NotAStarter { .. }), "{e}");
    assert_untouched(lone.id());
    stop_launcher(&mut lone);
}

#[test]
fn mpich5_launch_is_refused_at_once() {
    let Some((prefix, dir, exe)) = mpich5_program("mpich5-launch") else {
        return;
    };
    let mut cmd = Command::new(prefix.join("bin/mpiexec.hydra"));
    cmd.args(["-n", "2"])
        .arg(&exe)
        .arg("1")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = std::time::Instant::now();
    let e = live::launch(cmd, options()).unwrap_err();
    assert!(
        matches!(e, AcquireError::LaunchWithoutSymbols { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("attach to it by pid"), "{e}");
    // At its entry point, before its job ran (the ranks sleep 1 s).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Let go untouched: it runs its job to the end on its own.
    let pid = match &e {
        AcquireError::LaunchWithoutSymbols { pid } => *pid,
        _ => unreachable!(),
    };
    assert!(wait_for(20, || !is_running(pid)), "the starter still runs");
}

/// Debian's stock `mpiexec.hydra` (MPICH 4.0.2) is stripped too: without its rebuilt symbol
/// file the table is discovered — exactly where the symbol file says `MPIR_proctable` and
/// `MPIR_proctable_size` are.
#[test]
fn debian_hydra_without_its_symbols_is_discovered_where_the_symbols_say() {
    use mpir_target::SymbolLookup;
    if !have("mpiexec.hydra") || !have("mpicc.mpich") {
        skip("mpiexec.hydra / mpicc.mpich not installed");
        return;
    }
    let debug_dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
    if !debug_dir.join(".build-id").is_dir() {
        skip("no hydra symbol file: run scripts/hydra-debug-symbols.sh");
        return;
    }
    let dir = scratch("debian-hydra");
    let exe = dir.join("mpi_ranks");
    run(Command::new("mpicc.mpich")
        .arg(fixtures().join("mpi_ranks.c"))
        .arg("-o")
        .arg(&exe))
    .unwrap();
    let n = 3;
    let mut child = Command::new("mpiexec.hydra")
        .args(["-n", &n.to_string()])
        .arg(&exe)
        .arg("4")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    wait_ranks(&mut out, &mut seen, n);
    // The symbols say the spawn was announced (the table is filled) before we look.
    let mut debug = mpir_target::debuginfo::DebugOptions::default();
    debug.debug_dirs.push(debug_dir);
    let symbolic = mpir_target::live::LiveTarget::open(child.id(), debug).unwrap();
    let at = |name: &str| symbolic.symbol(name).unwrap().unwrap().address;
    assert!(wait_for(20, || {
        use mpir_target::MemoryExt;
        symbolic
            .read_c_int(at("MPIR_debug_state"), "state")
            .is_ok_and(|s| s == 1)
    }));

    let a = live::attach(child.id(), options()).unwrap();
    let job = a.job().clone();
    drop(a);
    let found = job
        .discovered
        .expect("no symbols given: the table was discovered");
    assert_eq!(found.pointer_address, at("MPIR_proctable"));
    assert_eq!(found.size_address, at("MPIR_proctable_size"));
    let table: Vec<(u64, i64)> = job
        .table
        .resolved
        .ranks()
        .map(|r| (r.rank, r.pid))
        .collect();
    assert_eq!(table, printed_ranks(&seen));
    assert_untouched(child.id());
    assert_completes(child, out, seen, n);
}
