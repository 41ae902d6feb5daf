//! Bad input: what is not a PMIx server, rendezvous files that must be refused, and libraries
//! of the wrong PMIx version. Every refusal is a typed error naming the file, pid or library and
//! why.

mod common;

use mpir_pmix::{Library, LoadOptions, PmixError, RendezvousProblem, Server, Tool};
use mpir_target::testkit;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A process that is not a PMIx server, killed when dropped.
struct Sleeper(Child);
impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
fn sleeper() -> Sleeper {
    Sleeper(Command::new("sleep").arg("60").spawn().unwrap())
}

/// A pid no process has (a reaped child's).
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

const PRTERUN: &str =
    "prterun-vm-{pid}@0.0;tcp4://127.0.0.1:1\n5.0.11rc1\n{pid}\n0:0\nTue Nov 24 21:57:49 2026\n";

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn problem(e: PmixError, file: &Path) -> RendezvousProblem {
    match e {
        PmixError::Rendezvous { file: f, problem } => {
            assert_eq!(f, file);
            problem
        }
        other => panic!("not a rendezvous error: {other}"),
    }
}

#[test]
fn a_process_that_is_not_a_pmix_server_is_named_so() {
    let s = sleeper();
    let e = mpir_pmix::rendezvous(s.0.id()).unwrap_err();
    assert!(
        matches!(e, PmixError::NotAServer { pid, .. } if pid == s.0.id()),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("pmix.<host>.tool.{}", s.0.id())),
        "{e}"
    );
    let dead = dead_pid();
    let e = mpir_pmix::rendezvous(dead).unwrap_err();
    assert!(e.to_string().contains("no such process"), "{e}");
}

#[test]
fn rendezvous_files_are_refused_with_the_reason() {
    let dir = testkit::scratch("rndz");
    let s = sleeper();
    let me = std::process::id();
    let f = dir.join("pmix.vm.tool");
    // Good: ours, 0600, names a running process.
    write(&f, &PRTERUN.replace("{pid}", &me.to_string()), 0o600);
    let r = mpir_pmix::validate_file(&f, Some(me)).unwrap();
    assert_eq!((r.pid, r.version.as_str()), (me, "5.0.11rc1"));
    assert!(r.uri.ends_with(";tcp4://127.0.0.1:1"), "{r:?}");
    // Another pid than asked.
    let p = problem(
        mpir_pmix::validate_file(&f, Some(s.0.id())).unwrap_err(),
        &f,
    );
    assert_eq!(
        p,
        RendezvousProblem::OtherPid {
            found: me,
            asked: s.0.id()
        }
    );
    // Stale: its server is gone.
    let dead = dead_pid();
    write(&f, &PRTERUN.replace("{pid}", &dead.to_string()), 0o600);
    let e = mpir_pmix::validate_file(&f, None).unwrap_err();
    assert!(e.to_string().contains("stale"), "{e}");
    assert_eq!(problem(e, &f), RendezvousProblem::Stale { pid: dead });
    // Writable by others.
    write(&f, &PRTERUN.replace("{pid}", &me.to_string()), 0o666);
    let p = problem(mpir_pmix::validate_file(&f, None).unwrap_err(), &f);
    assert_eq!(p, RendezvousProblem::Writable { mode: 0o666 });
    // Garbage.
    write(&f, "\u{1}\u{2}garbage\nnot a version\n", 0o600);
    let p = problem(mpir_pmix::validate_file(&f, None).unwrap_err(), &f);
    assert!(
        matches!(p, RendezvousProblem::Garbage(ref w) if w.contains("not a PMIx server URI")),
        "{p:?}"
    );
    write(&f, &"x".repeat(1 << 20), 0o600);
    let p = problem(mpir_pmix::validate_file(&f, None).unwrap_err(), &f);
    assert!(matches!(p, RendezvousProblem::Garbage(_)), "{p:?}");
    // Not a regular file: a symlink to a good one, a directory.
    let good = dir.join("good");
    write(&good, &PRTERUN.replace("{pid}", &me.to_string()), 0o600);
    let link = dir.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let p = problem(mpir_pmix::validate_file(&link, None).unwrap_err(), &link);
    assert_eq!(p, RendezvousProblem::NotRegularFile);
    let p = problem(mpir_pmix::validate_file(&dir, None).unwrap_err(), &dir);
    assert_eq!(p, RendezvousProblem::NotRegularFile);
    // Foreign: another user's (needs root to make one).
    let ours = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    if ours == 0 {
        write(&f, &PRTERUN.replace("{pid}", &me.to_string()), 0o600);
        testkit::run(Command::new("chown").arg("65534").arg(&f)).unwrap();
        let p = problem(mpir_pmix::validate_file(&f, None).unwrap_err(), &f);
        assert_eq!(
            p,
            RendezvousProblem::Foreign {
                owner: 65534,
                ours: 0
            }
        );
    } else {
        eprintln!("foreign rendezvous file not tested: not root, cannot chown");
    }
}

#[test]
fn rendezvous_by_pid_finds_and_refuses_a_session_directory_file() {
    // A session directory named like prterun's, in the temporary directory the search reads.
    let s = sleeper();
    let pid = s.0.id();
    let session = std::env::temp_dir().join(format!("mpir-pmix-fake.{pid}"));
    std::fs::create_dir_all(&session).unwrap();
    let f = session.join(format!("pmix.vm.tool.{pid}"));
    write(&f, "garbage\n", 0o600);
    let e = mpir_pmix::rendezvous(pid).unwrap_err();
    // Beside it, in another session directory, a good one: it is found, the bad one ignored.
    let session2 = std::env::temp_dir().join(format!("mpir-pmix-fake2.{pid}"));
    std::fs::create_dir_all(&session2).unwrap();
    let good = session2.join(format!("pmix.vm.tool.{pid}"));
    write(&good, &PRTERUN.replace("{pid}", &pid.to_string()), 0o600);
    let found = mpir_pmix::rendezvous(pid);
    let _ = std::fs::remove_dir_all(&session);
    let _ = std::fs::remove_dir_all(&session2);
    assert_eq!(found.unwrap().file, good);
    assert_eq!(
        problem(e, &f),
        RendezvousProblem::Garbage("first line \"garbage\" is not a PMIx server URI".into())
    );
}

/// A shared library exporting only `PMIx_Get_version`, returning `version`.
fn fake_libpmix(dir: &Path, version: &str) -> std::path::PathBuf {
    let src = dir.join("fake.c");
    std::fs::write(
        &src,
        format!("const char *PMIx_Get_version(void) {{ return \"{version}\"; }}\n"),
    )
    .unwrap();
    let so = dir.join("libpmix.so.2");
    testkit::run(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src),
    )
    .unwrap();
    so
}

#[test]
fn a_libpmix_of_another_major_version_is_refused_with_both_versions() {
    if !testkit::have("cc") {
        testkit::skip("no C compiler");
        return;
    }
    let dir = testkit::scratch("fakepmix");
    let so = fake_libpmix(&dir, "OpenPMIx 9.0.0 (PMIx Standard: 9.0)");
    let e = Library::load(&LoadOptions::default().with_path(&so)).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, PmixError::IncompatibleVersion { ref path, .. } if *path == so),
        "{text}"
    );
    assert!(
        text.contains("OpenPMIx 9.0.0") && text.contains(mpir_pmix::SUPPORTED),
        "{text}"
    );
    assert!(text.contains(&*so.to_string_lossy()), "{text}");
    // The right version but not a libpmix: the missing entry point is named.
    let dir5 = testkit::scratch("fakepmix5");
    let so5 = fake_libpmix(&dir5, "OpenPMIx 5.0.11");
    let e = Library::load_path(&so5).unwrap_err();
    assert!(e.to_string().contains("exports no PMIx_"), "{e}");
    // Not a shared library at all.
    let junk = dir.join("junk.so");
    std::fs::write(&junk, "not ELF").unwrap();
    let e = Library::load_path(&junk).unwrap_err();
    assert!(matches!(e, PmixError::Load { .. }), "{e}");
}

/// The wheel's libpmix when there is one, else the system's: `None` after skipping.
fn some_libpmix() -> Option<Library> {
    if let Some(p) = std::env::var_os("MPIR_OMPI5_PREFIX") {
        return Some(Library::load_path(&Path::new(&p).join("lib/openmpi/libpmix.so.2")).unwrap());
    }
    match Library::load(&LoadOptions::default()) {
        Ok(l) => Some(l),
        Err(e) => {
            testkit::skip(&format!("no libpmix: {e}"));
            None
        }
    }
}

#[test]
fn connecting_to_what_is_not_a_server_fails_in_time_and_frees_the_slot() {
    let Some(lib) = some_libpmix() else { return };
    let _one = common::one_tool_at_a_time();
    let s = sleeper();
    let e = Tool::connect(&lib, &Server::Pid(s.0.id()), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, PmixError::NotAServer { .. }), "{e}");
    // A valid file whose URI nobody listens on.
    let dir = testkit::scratch("nolisten");
    let f = dir.join("pmix.vm.tool");
    write(
        &f,
        &PRTERUN.replace("{pid}", &std::process::id().to_string()),
        0o600,
    );
    let t0 = Instant::now();
    let e = Tool::connect(
        &lib,
        &Server::RendezvousFile(f.clone()),
        Duration::from_secs(5),
    )
    .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
    assert!(
        matches!(e, PmixError::Call { .. } | PmixError::Timeout { .. }),
        "{e}"
    );
    eprintln!("no listener: {e}");
    let e = Tool::connect(
        &lib,
        &Server::Uri("nonsense".into()),
        Duration::from_secs(5),
    )
    .unwrap_err();
    assert!(matches!(e, PmixError::InvalidArgument(_)), "{e}");
    // None of these left the process's one connection taken.
    let e = Tool::connect(
        &lib,
        &Server::Uri("x@0.0;tcp4://127.0.0.1:1".into()),
        Duration::from_secs(5),
    )
    .unwrap_err();
    assert!(!matches!(e, PmixError::AlreadyConnected { .. }), "{e}");
}
