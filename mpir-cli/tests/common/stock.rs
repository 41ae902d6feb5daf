//! The MPIs as Debian, Intel and the PyPI wheels ship them, for tests that run the same
//! programs (tests/fixtures/deadlock.c) on each: how to build for it, start a job, and check
//! that the job was left as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::{
    IMPI_WHEEL, MPICH5_WHEEL, OMPI5_WHEEL, Wheel, assert_untouched, have, run, skip,
};

use super::{Job, ompi_sidecar};

/// One MPI stack: its compiler, its launcher, what mpir needs to be told about it.
pub struct Stack {
    pub name: &'static str,
    pub mpicc: PathBuf,
    /// Environment for the compiler and the launcher.
    pub env: Vec<(String, String)>,
    pub launcher: Vec<String>,
    /// Extra arguments for mpir.
    pub extra: Vec<String>,
}

/// The debug directory of Debian's stripped hydra (`MPIR_HYDRA_DEBUG_DIR`, made by
/// scripts/hydra-debug-symbols.sh); `None` after a skip without it.
pub fn hydra_debug_dir() -> Option<String> {
    let dir = std::env::var("MPIR_HYDRA_DEBUG_DIR")
        .ok()
        .filter(|d| Path::new(d).is_dir());
    if dir.is_none() {
        skip("no hydra debug file (MPIR_HYDRA_DEBUG_DIR, scripts/hydra-debug-symbols.sh)");
    }
    dir
}

/// Debian's MPICH 4.0.2 (ch4:ucx, no debugger support) and its stripped hydra, whose symbols
/// come from `MPIR_HYDRA_DEBUG_DIR`.
pub fn mpich_stock() -> Option<Stack> {
    if !have("mpicc.mpich") || !have("mpiexec.hydra") {
        skip("needs Debian's MPICH (mpicc.mpich, mpiexec.hydra)");
        return None;
    }
    let debug = hydra_debug_dir()?;
    Some(Stack {
        name: "mpich-stock",
        mpicc: "mpicc.mpich".into(),
        env: Vec::new(),
        launcher: vec!["mpiexec.hydra".into()],
        extra: vec!["--debug-dir".into(), debug],
    })
}

/// Debian's Open MPI 4.1.4 without a types sidecar; with `pml_ucx`, run under its UCX PML and
/// given the sidecar (the ob1 readers must refuse it).
pub fn open_mpi(pml_ucx: bool) -> Option<Stack> {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    let mut launcher: Vec<String> = ["orterun", "--allow-run-as-root", "--oversubscribe"]
        .map(String::from)
        .to_vec();
    // An Open MPI whose types are nowhere: the shipped layouts not tried either.
    let mut extra = vec!["--no-shipped-layouts".to_string()];
    if pml_ucx {
        // UCX is Open MPI's PML on InfiniBand clusters; 4.1 enables it elsewhere only with
        // these two (docs: ../shared/notes/stock-stacks.md).
        for a in [
            "--mca",
            "pml",
            "ucx",
            "--mca",
            "pml_ucx_tls",
            "any",
            "--mca",
            "pml_ucx_devices",
            "any",
        ] {
            launcher.push(a.into());
        }
        // The types are given: the ob1 reader could read ob1's structures, and must refuse
        // because this job's PML is not ob1.
        let Some(sidecar) = ompi_sidecar() else {
            skip("no Open MPI types sidecar");
            return None;
        };
        extra = vec!["--types".into(), sidecar.display().to_string()];
    }
    Some(Stack {
        name: if pml_ucx {
            "openmpi-ucx"
        } else {
            "openmpi-no-types"
        },
        mpicc: "mpicc.openmpi".into(),
        env: Vec::new(),
        launcher,
        extra,
    })
}

/// Debian's Open MPI 4.1.4 as it is (no debug information, no `--types`): its queues are read
/// with the layouts shipped with mpir.
pub fn open_mpi_stock() -> Option<Stack> {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    Some(Stack {
        env: Vec::new(),
        name: "openmpi",
        mpicc: "mpicc.openmpi".into(),
        launcher: ["orterun", "--allow-run-as-root", "--oversubscribe"]
            .map(String::from)
            .to_vec(),
        extra: Vec::new(),
    })
}

/// Intel MPI 2021 from PyPI (`MPIR_IMPI_PREFIX`).
pub fn intel_mpi() -> Option<Stack> {
    let wheel = Wheel::find(&IMPI_WHEEL)?;
    let prefix = wheel.prefix;
    Some(Stack {
        name: "intel-mpi",
        mpicc: prefix.join("bin/mpicc"),
        env: vec![("I_MPI_ROOT".into(), prefix.display().to_string())],
        launcher: vec![prefix.join("bin/mpiexec.hydra").display().to_string()],
        extra: Vec::new(),
    })
}

/// tests/fixtures/deadlock.c built with the stack's compiler into `dir`.
pub fn build(stack: &Stack, dir: &Path) -> PathBuf {
    build_fixture(stack, dir, "deadlock")
}

/// tests/fixtures/`name`.c built with the stack's compiler into `dir`/`name`.
pub fn build_fixture(stack: &Stack, dir: &Path, name: &str) -> PathBuf {
    let program = dir.join(name);
    let mut cc = Command::new(&stack.mpicc);
    cc.envs(stack.env.iter().map(|(k, v)| (k, v)))
        .args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c")));
    run(&mut cc).unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    program
}

/// `n` ranks of `program` in `mode`, launched by the stack's launcher, once every rank wrote
/// its pid file under `dir`/`mode`.
pub fn start(stack: &Stack, dir: &Path, program: &Path, mode: &str, n: usize) -> Job {
    let sub = dir.join(mode);
    std::fs::create_dir_all(&sub).unwrap();
    let mut launcher = Command::new(&stack.launcher[0]);
    launcher
        .args(&stack.launcher[1..])
        .args(["-n", &n.to_string()])
        .arg(program)
        .arg(mode)
        .arg(&sub)
        .envs(stack.env.iter().map(|(k, v)| (k, v)))
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Job::start(&mut launcher, &sub, n, Duration::from_millis(700))
}

/// The starter and every rank were left running and untraced.
pub fn untouched(job: &Job) {
    assert_untouched(job.starter());
    for &p in &job.pids {
        assert_untouched(p);
    }
}

/// Open MPI 5.0 from PyPI (`MPIR_OMPI5_PREFIX`): PRRTE's `mpirun`, reached through PMIx.
pub fn open_mpi_5() -> Option<Stack> {
    let wheel = Wheel::find(&OMPI5_WHEEL)?;
    Some(Stack {
        name: "openmpi5",
        mpicc: wheel.bin("mpicc"),
        env: Vec::new(),
        launcher: vec![
            wheel.bin("mpirun").display().to_string(),
            "--allow-run-as-root".into(),
            "--oversubscribe".into(),
        ],
        extra: Vec::new(),
    })
}

/// MPICH 5.0 from PyPI (`MPIR_MPICH5_PREFIX`): a stripped hydra whose table is found by a
/// search of its memory.
pub fn mpich_5() -> Option<Stack> {
    let wheel = Wheel::find(&MPICH5_WHEEL)?;
    Some(Stack {
        name: "mpich5",
        mpicc: wheel.bin("mpicc"),
        env: Vec::new(),
        launcher: vec![wheel.bin("mpiexec.hydra").display().to_string()],
        extra: Vec::new(),
    })
}
