//! `--slurm-job J[.S]` on the single-node Slurm of `scripts/ci-slurm.sh`: `mpir attach` and
//! `mpir deadlock` on the ring fixture run by `srun --mpi=pmi2` under the debugger-enabled
//! MPICH, the job named by its Slurm id; `srun`'s shepherd refused with the parent's pid; and
//! the clear one-line errors for a job that does not exist, a job with no `srun` here, and a
//! job with several steps here. Every Slurm job a test starts is cancelled by its guard.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{Job, json_doc, mpich_root, mpir, slurm_job_id as job_id};
use mpir_acquire::testkit::{SlurmJobs, slurm_up};
use mpir_target::testkit::{assert_untouched, run, scratch, skip, wait_for};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn attach_and_deadlock_name_the_job_by_its_slurm_id() {
    if !slurm_up() {
        return;
    }
    let mpich = mpich_root();
    if !mpich.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", mpich.display()));
        return;
    }
    let dir = scratch("cli-slurm-ring");
    let exe = dir.join("deadlock");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c");
    run(Command::new(mpich.join("bin/mpicc"))
        .args(["-g", "-o"])
        .arg(&exe)
        .arg(&src))
    .unwrap_or_else(|e| panic!("{e}"));
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let jobs = SlurmJobs::new("cli-ring");
    let mut srun = jobs.srun(&["--mpi=pmi2", "-n", "3"]);
    srun.arg(&exe).arg("ring").arg(&sub);
    let job = Job::start(&mut srun, &sub, 3, Duration::from_millis(700));
    let id = job_id(jobs.name());

    for named in [id.to_string(), format!("{id}.0")] {
        let out = mpir()
            .args(["attach", "--json", "--slurm-job", &named])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let doc = json_doc(&out);
        assert_eq!(doc["starter"]["pid"], job.starter(), "the parent srun");
        assert_eq!(doc["starter"]["launcher"], "Slurm (srun)");
        assert_eq!(doc["starter"]["job_id"], id);
        assert_eq!(doc["starter"]["step_id"], 0);
        let pids: Vec<u64> = doc["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["pid"].as_u64().unwrap())
            .collect();
        let printed: Vec<u64> = job.pids.iter().map(|&p| u64::from(p)).collect();
        assert_eq!(pids, printed);
    }
    let out = mpir()
        .args(["deadlock", "--json", "--slurm-job", &id.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc = json_doc(&out);
    let cycle: Vec<u64> = doc["cycles"][0]["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}"))
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    assert_eq!(cycle, [0, 1, 2], "{doc}");
    // The stacks of the same job, named the same way: every rank blocked in a receive.
    let out = mpir()
        .args(["stacks", "--json", "--slurm-job", &id.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json_doc(&out);
    assert!(doc.to_string().contains("MPI_Recv"), "{doc}");
    for &p in &job.pids {
        assert_untouched(p);
    }
    // The shepherd child of srun has its command line: refused, naming the parent.
    let shepherd = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", job.starter()))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
        .find(|&c| mpir_acquire::live::shepherd_parent(c) == Some(job.starter()))
        .expect("srun's shepherd");
    let out = mpir()
        .args(["attach", &shepherd.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("use pid {}", job.starter())),
        "{}",
        stderr(&out)
    );
    drop(job);
}

#[test]
fn slurm_jobs_missing_elsewhere_or_with_several_steps_are_one_clear_line() {
    if !slurm_up() {
        return;
    }
    let attach = |named: &str| {
        let out = mpir()
            .args(["attach", "--timeout", "20", "--slurm-job", named])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        err
    };
    let err = attach("4000000002");
    assert!(err.contains("Slurm job 4000000002 does not exist"), "{err}");

    let jobs = SlurmJobs::new("cli-ids");
    let batch = jobs.sbatch(&[], "sleep 60");
    let err = attach(&batch.to_string());
    assert!(
        err.contains(&format!("Slurm job {batch} (")) && err.contains("has no srun on this node"),
        "{err}"
    );
    let two = jobs.sbatch(
        &[],
        "srun --overlap -n1 sleep 60 & srun --overlap -n1 sleep 60 & wait",
    );
    assert!(
        wait_for(30, || {
            mpir_acquire::live::srun_steps(&Default::default())
                .iter()
                .filter(|s| s.0 == two)
                .count()
                == 2
        }),
        "the two steps did not start"
    );
    let err = attach(&two.to_string());
    assert!(err.contains("has 2 steps here"), "{err}");
    assert!(err.contains(&format!("name one, as {two}.S")), "{err}");
    let err = attach(&format!("{two}.9"));
    assert!(err.contains("has no step 9 here"), "{err}");
}

#[test]
fn launch_under_srun_takes_every_task_then_the_step_completes() {
    if !slurm_up() {
        return;
    }
    let jobs = SlurmJobs::new("cli-launch");
    let out = mpir()
        .args(["launch", "--json", "--timeout", "30", "--", "srun"])
        .arg(format!("--job-name={}", jobs.name()))
        .args(["-n", "3", "sleep", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json_doc(&out);
    assert_eq!(doc["starter"]["launcher"], "Slurm (srun)");
    assert!(doc["starter"]["job_id"].as_u64().is_some(), "{doc}");
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    for r in ranks {
        assert_eq!(r["control"], "attached", "{r}");
        assert_eq!(r["executable"], "sleep", "argv[0] as typed");
    }
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("SIG_DEBUG_WAKE"),
        "the quirk is explained: {notes}"
    );
    drop(jobs);
}
