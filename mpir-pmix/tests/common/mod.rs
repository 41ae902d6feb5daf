//! Helpers of the tests on the real Open MPI 5 wheel (`MPIR_OMPI5_PREFIX`, made by
//! scripts/ci-ompi5.sh).
#![allow(dead_code, unreachable_pub)]

use mpir_target::testkit::{self, Scratch};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One PMIx tool per process: the tests that connect take turns.
pub fn one_tool_at_a_time() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The wheel's venv, or `None` after skipping (failing under MPIR_REQUIRE_PEERS=1).
pub fn prefix() -> Option<PathBuf> {
    match std::env::var_os("MPIR_OMPI5_PREFIX").map(PathBuf::from) {
        Some(p) if p.join("bin/mpirun").is_file() => Some(p),
        Some(p) => {
            testkit::skip(&format!(
                "no bin/mpirun in MPIR_OMPI5_PREFIX={}",
                p.display()
            ));
            None
        }
        None => {
            testkit::skip(
                "MPIR_OMPI5_PREFIX is not set (bash scripts/ci-ompi5.sh makes the Open MPI 5 wheel venv)",
            );
            None
        }
    }
}

/// The fixture: each rank prints `rank R pid P` after MPI_Init, sleeps argv[1] seconds, then
/// finalizes.
const FIXTURE: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    sleep(argc > 1 ? atoi(argv[1]) : 0);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"#;

/// A running `mpirun` of the fixture, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Job {
    pub child: Child,
    pub dir: Scratch,
    pub out: PathBuf,
    pub np: usize,
}

impl Drop for Job {
    fn drop(&mut self) {
        testkit::stop_launcher(&mut self.child);
        // Ranks of a launcher that was killed outright are orphans: ours are those running the
        // fixture of this scratch directory.
        let ours = self.dir.join("fixture");
        for (_, pid) in self.printed_pids() {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmd.starts_with(ours.as_os_str().as_encoded_bytes()) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        // And its session directory stays behind.
        let _ = std::fs::remove_dir_all(format!("/tmp/ompi.{}", self.pid()));
    }
}

impl Job {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `mpirun -n np fixture secs` with `extra` launcher arguments and `env`.
    pub fn start(prefix: &Path, np: usize, secs: u32, extra: &[&str], env: &[(&str, &str)]) -> Job {
        let dir = testkit::scratch("ompi5");
        let src = dir.join("fixture.c");
        std::fs::write(&src, FIXTURE).unwrap();
        let exe = dir.join("fixture");
        testkit::run(
            Command::new(prefix.join("bin/mpicc"))
                .arg("-o")
                .arg(&exe)
                .arg(&src),
        )
        .unwrap();
        let out = dir.join("job.out");
        let child = Command::new(prefix.join("bin/mpirun"))
            .args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                &np.to_string(),
            ])
            .args(extra)
            .arg(&exe)
            .arg(secs.to_string())
            .envs(env.iter().copied())
            .current_dir(&*dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Job {
            child,
            dir,
            out,
            np,
        }
    }

    /// Waits until the launcher's rendezvous file validates.
    pub fn wait_for_server(&self) -> mpir_pmix::Rendezvous {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match mpir_pmix::rendezvous(self.pid()) {
                Ok(r) => return r,
                Err(e) if Instant::now() > deadline => panic!("no PMIx server in 30 s: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The `rank R pid P` lines printed so far: pid by rank.
    pub fn printed_pids(&self) -> Vec<(u32, i32)> {
        let f = std::fs::File::open(&self.out).unwrap();
        let mut v: Vec<(u32, i32)> = BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                match w.as_slice() {
                    ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                    _ => None,
                }
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Waits up to `secs` for every rank's line.
    pub fn wait_printed(&self, secs: u64) -> Vec<(u32, i32)> {
        testkit::wait_for(secs, || self.printed_pids().len() == self.np);
        self.printed_pids()
    }

    /// Waits up to `secs` for the launcher to exit: its status.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The job's namespace as prterun names it under mpirun.
    pub fn nspace(&self) -> String {
        let host = testkit::run(Command::new("hostname").arg("-s")).unwrap();
        format!("prterun-{}-{}@1", host.trim(), self.pid())
    }
}

/// The wheel's libpmix, through the launcher.
pub fn library(job: &Job) -> mpir_pmix::Library {
    mpir_pmix::Library::load(&mpir_pmix::LoadOptions::default().with_launcher_pid(job.pid()))
        .unwrap()
}
