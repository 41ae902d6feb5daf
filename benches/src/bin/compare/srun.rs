//! Attach mode on a running Slurm step (issue 19): `live::attach` on the step's `srun` (table
//! only, and with every task proven, attached and released) against `gdb -p` on the same
//! `srun` reading the same table (`benches/gdb/srun_table.gdb`), in one run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::{AcquireOptions, RankSelection, live};
use mpir_benches::stacks::Running;
use mpir_benches::{have, median};

use crate::Config;

/// Tasks of the measured step (`--overcommit`: more tasks than the node's CPUs).
const TASKS: usize = 32;

/// Whether a Slurm controller answers (`sinfo` within a few seconds).
fn slurm_up() -> bool {
    have("srun")
        && Command::new("timeout")
            .args(["5", "sinfo", "-h"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A running `n`-task step of `sleep` (the tasks run the program the table names), once its
/// table is complete. The `srun` we spawned is the parent of its same-command-line shepherd
/// child, and the one that holds the table.
fn running_step(n: usize) -> Option<Running> {
    let mut cmd = Command::new("srun");
    cmd.args(["--overcommit", "-n", &n.to_string(), "sleep", "3600"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let running = Running(cmd.spawn().ok()?);
    let pid = running.0.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let o = AcquireOptions::default()
            .with_ranks(RankSelection::None)
            .with_timeout(Duration::from_secs(5));
        if live::attach(pid, o).is_ok_and(|a| a.job().len() == n) {
            return Some(running);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

fn gdb_srun(pid: u32, n: usize, script: &Path) -> Duration {
    let start = std::time::Instant::now();
    let o = Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string(), "-x"])
        .arg(script)
        .output()
        .expect("run gdb");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("gdb-srun entries={n}")), "{text}");
    start.elapsed()
}

pub(crate) fn srun_attach(cfg: &Config) {
    println!("## Attach mode, {TASKS}-task Slurm step (`srun`)\n");
    if !slurm_up() {
        println!("No Slurm controller answers (scripts/ci-slurm.sh): not measured.\n");
        return;
    }
    eprintln!("compare: srun_attach");
    let Some(running) = running_step(TASKS) else {
        println!("`srun -n {TASKS}` did not start: not measured.\n");
        return;
    };
    let pid = running.0.id();
    let table = median(cfg.runs, || {
        let o = AcquireOptions::default().with_ranks(RankSelection::None);
        let a = live::attach(pid, o).expect("attach");
        assert_eq!(a.job().len(), TASKS);
    });
    let all = median(cfg.runs, || {
        let a = live::attach(pid, AcquireOptions::default().with_hold(true)).expect("attach");
        assert_eq!(a.job().attached_pids().len(), TASKS);
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/srun_table.gdb");
    let gdb =
        (cfg.gdb && have("gdb")).then(|| median(cfg.gdb_runs, || gdb_srun(pid, TASKS, &script)));
    crate::attach_table(
        "attach to srun, read table, detach",
        &format!("{TASKS} tasks"),
        table,
        all,
        gdb,
    );
    drop(running);
}
