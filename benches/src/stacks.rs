//! Real MPI jobs (Open MPI's `orterun`, MPICH's `mpiexec.hydra`) running mpir-acquire's
//! `mpi_ranks.c`, and gdb doing the same jobs as our crates (`gdb/launch.py`,
//! `gdb/attach_table.py`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpir_target::debuginfo::DebugOptions;

use crate::have;

/// A stack to launch jobs with.
#[derive(Debug, Clone)]
pub struct Stack {
    /// `openmpi` or `hydra`.
    pub name: &'static str,
    /// The starter command.
    pub run: &'static str,
    /// `mpi_ranks.c` compiled with the stack's `mpicc`.
    pub program: PathBuf,
    /// Debug options our crates need for this starter (hydra: its rebuilt symbols).
    pub debug: DebugOptions,
}

/// The stacks installed here (Open MPI; hydra when its rebuilt symbol file is there), with the
/// rank program compiled into `dir`.
pub fn stacks(dir: &Path) -> Vec<Stack> {
    let mut stacks = Vec::new();
    if have("orterun")
        && have("mpicc.openmpi")
        && let Some(program) = compile("mpicc.openmpi", dir, "ranks_ompi")
    {
        stacks.push(Stack {
            name: "openmpi",
            run: "orterun",
            program,
            debug: DebugOptions::default(),
        });
    }
    if have("mpiexec.hydra")
        && have("mpicc.mpich")
        && let (Some(program), Some(debug)) =
            (compile("mpicc.mpich", dir, "ranks_mpich"), hydra_debug())
    {
        stacks.push(Stack {
            name: "hydra",
            run: "mpiexec.hydra",
            program,
            debug,
        });
    }
    stacks
}

/// Compiles mpir-acquire's `mpi_ranks.c` with `cc` into `dir/name`.
pub fn compile(cc: &str, dir: &Path, name: &str) -> Option<PathBuf> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    let exe = dir.join(name);
    Command::new(cc)
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .status()
        .ok()?
        .success()
        .then_some(exe)
}

/// The command of an `n`-rank job of `program` (each rank prints a line, then sleeps
/// `seconds` and exits), output discarded.
pub fn job(run: &str, n: usize, program: &Path, seconds: u32) -> Command {
    let mut c = Command::new(run);
    if run == "orterun" {
        c.arg("--oversubscribe")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MPIR_DO_NOT_WARN", "1");
    }
    c.arg("-n")
        .arg(n.to_string())
        .arg(program)
        .arg(seconds.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Debug options with hydra's rebuilt symbols (`$MPIR_HYDRA_DEBUG_DIR`, default
/// `/var/cache/mpir-rs/debug`), if they are there.
pub fn hydra_debug() -> Option<DebugOptions> {
    let dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
    dir.join(".build-id").is_dir().then(|| {
        let mut d = DebugOptions::default();
        d.debug_dirs.push(dir);
        d
    })
}

/// A preloadable library that sets `MPIR_being_debugged` before `main` (where the starter
/// defines it) and hides itself from the starter's children: Open MPI's own debugger handshake
/// with no tracer at all.
pub fn debug_mode_shim(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("shim.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         extern int MPIR_being_debugged __attribute__((weak));\n\
         __attribute__((constructor)) static void set(void) {\n\
             if (&MPIR_being_debugged) MPIR_being_debugged = 1;\n\
             unsetenv(\"LD_PRELOAD\");\n\
         }\n",
    )
    .ok()?;
    let so = dir.join("shim.so");
    Command::new("cc")
        .args(["-shared", "-fPIC"])
        .arg(&src)
        .arg("-o")
        .arg(&so)
        .status()
        .ok()?
        .success()
        .then_some(so)
}

/// Runs `job` (4 ranks) under gdb with `gdb/launch.py` (breakpoint on `MPIR_Breakpoint`,
/// `MPIR_being_debugged` set, table read, continue) until the job's output ends.
pub fn gdb_launch(mut job: Command, debug_dir: Option<&Path>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/launch.py");
    let mut gdb = Command::new("gdb");
    gdb.args(["-nx", "-batch"]);
    if let Some(d) = debug_dir {
        gdb.arg("-iex").arg(format!(
            "set debug-file-directory /usr/lib/debug:{}",
            d.display()
        ));
    }
    gdb.arg("-x")
        .arg(&script)
        .arg("--args")
        .arg(job.get_program())
        .args(job.get_args());
    for (k, v) in job.get_envs() {
        if let Some(v) = v {
            gdb.env(k, v);
        }
    }
    job.stdout(Stdio::null());
    let mut child = gdb
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gdb");
    // The job inherits gdb's stdout: end of file when both are gone.
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().expect("stdout"), &mut out)
        .expect("read gdb's output");
    child.wait().expect("wait for gdb");
    assert_eq!(out.matches(" done").count(), 4, "{out}");
}

/// One `gdb -p` run of `gdb/attach_table.py` on the starter `pid` of an `n`-rank job, timed
/// whole (attach, symbols, table, detach).
pub fn gdb_attach(pid: u32, n: usize) -> Duration {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/attach_table.py");
    let start = Instant::now();
    let o = Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string(), "-x"])
        .arg(&script)
        .output()
        .expect("run gdb");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("gdb-attach entries={n}")), "{text}");
    start.elapsed()
}

/// A running job, killed on drop.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts an `n`-rank Open MPI job that runs for an hour, and returns once every rank has
/// printed its line (the table is complete then).
pub fn running_job(program: &Path, n: usize) -> Running {
    let mut cmd = job("orterun", n, program, 3600);
    cmd.stdout(Stdio::piped());
    let mut running = Running(cmd.spawn().expect("start orterun"));
    let mut out = BufReader::new(running.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    for _ in 0..n {
        line.clear();
        out.read_line(&mut line).expect("a rank's line");
    }
    running
}
