//! What the tool's integration tests share: the `mpir` binary, the real stacks' locations, and
//! a guard for a running MPI job.
#![allow(dead_code, unreachable_pub)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::{Scratch, run, scratch, skip, wait_for};

/// The `mpir` binary under test.
pub fn mpir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mpir"))
}

/// mpir-acquire's fake starter and rank (C fixtures), compiled into a scratch directory.
pub struct Fixtures {
    pub dir: Scratch,
    pub starter: PathBuf,
    pub rank: PathBuf,
}

/// Compiles the fake starter and rank into scratch directory `name`; `None` after a skip (no
/// C compiler).
pub fn fixtures(name: &str) -> Option<Fixtures> {
    let dir = scratch(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures");
    let build = |file: &str, out: &str| -> Option<PathBuf> {
        let exe = dir.join(out);
        match run(Command::new("cc")
            .args(["-g", "-pthread"])
            .arg(src.join(file))
            .arg("-o")
            .arg(&exe))
        {
            Ok(_) => Some(exe),
            Err(e) => {
                skip(&e);
                None
            }
        }
    };
    let starter = build("starter.c", "starter")?;
    let rank = build("rank.c", "rank")?;
    Some(Fixtures { dir, starter, rank })
}

/// The Open MPI types sidecar: `$MPIR_OMPI_TYPES_SIDECAR`, else what the project script prints
/// (it builds and caches the object); `None` when neither gives a file.
pub fn ompi_sidecar() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/openmpi-types-sidecar.sh");
    let out = Command::new(script)
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines()
        .last()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// The debugger-enabled MPICH (`$MPIR_MPICH_DEBUGINFO`, default
/// `/var/cache/mpir-rs/mpich-debuginfo`), whether or not it is there.
pub fn mpich_root() -> PathBuf {
    PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    )
}

/// A running job whose ranks write `DIR/RANK.pid` when they reach the state under test;
/// everything is killed on drop.
pub struct Job {
    pub launcher: Child,
    pub pids: Vec<u32>,
}

impl Job {
    /// Starts `launcher` and waits (up to 60 s) for `ranks` pid files in `dir`, then `settle`
    /// more for the ranks to get where the files announce.
    pub fn start(launcher: &mut Command, dir: &Path, ranks: usize, settle: Duration) -> Job {
        let mut job = Job {
            launcher: launcher.spawn().expect("start the launcher"),
            pids: Vec::new(),
        };
        let file = |r: usize| dir.join(format!("{r}.pid"));
        assert!(
            wait_for(60, || (0..ranks).all(|r| file(r).is_file())),
            "the ranks did not write their pid files in time"
        );
        std::thread::sleep(settle);
        job.pids = (0..ranks)
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

    /// The launcher's pid (the starter).
    pub fn starter(&self) -> u32 {
        self.launcher.id()
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
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
    }
}
