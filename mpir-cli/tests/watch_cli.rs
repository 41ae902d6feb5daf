//! `mpir watch` and `mpir launch --watch` on real Open MPI jobs (tests/fixtures/watch.c: a ring
//! that passes a token for some seconds, then either hangs in a ring of receives or ends), and
//! on a Slurm job near its time limit: a job that runs fine and then hangs gets exactly one
//! bundle, written after the hang (the report, the documents and a core per stack class that
//! gdb reads); a job that never hangs gets none; SIGUSR1 asks for one; an output directory that
//! disappears ends the watch and leaves the job alone; `--then kill` ends the job. Skipped
//! without the stacks (or Slurm), failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::stock::{Stack, build_fixture, start, untouched};
use common::{Job, mpir};
use mpir_target::testkit::{have, scratch, skip, wait_for};
use serde_json::Value;

/// The bundles in `out` (hidden partial ones excluded) and whether a partial one was left.
fn bundles(out: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut partial = false;
    for e in std::fs::read_dir(out).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            partial = true;
        } else {
            found.push(e.path());
        }
    }
    found.sort();
    (found, partial)
}

/// Starts `mpir` with `args`; its stderr lines arrive on the returned channel.
fn spawn(args: &[String]) -> (Child, mpsc::Receiver<String>) {
    let mut child = mpir()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("[mpir] {line}");
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Waits (bounded) for the tool to end; its status and every stderr line.
fn finish(mut child: Child, rx: &mpsc::Receiver<String>, secs: u64) -> (i32, String) {
    let mut lines = Vec::new();
    let ended = wait_for(secs, || {
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    while let Ok(l) = rx.try_recv() {
        lines.push(l);
    }
    assert!(ended, "mpir did not end in {secs} s:\n{}", lines.join("\n"));
    (status.code().unwrap_or(-1), lines.join("\n"))
}

/// Waits until the tool says it is watching.
fn watching(rx: &mpsc::Receiver<String>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if rx
            .recv_timeout(Duration::from_millis(200))
            .is_ok_and(|l| l.contains("watching"))
        {
            return;
        }
    }
    panic!("mpir never said it was watching");
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The latest time any rank wrote to `DIR/RANK.hang` (seconds since the epoch).
fn hang_time(dir: &Path, ranks: usize) -> u64 {
    (0..ranks)
        .map(|r| {
            std::fs::read_to_string(dir.join(format!("{r}.hang")))
                .unwrap_or_else(|e| panic!("rank {r} never hung: {e}"))
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .max()
        .unwrap()
}

fn watch_args(stack: &Stack, job: &Job, out: &Path, every: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "watch".into(),
        "--starter".into(),
        job.starter().to_string(),
        "--every".into(),
        every.into(),
        "--out".into(),
        out.display().to_string(),
    ];
    a.extend(stack.extra.iter().cloned());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// A 3-rank job of tests/fixtures/watch.c in `mode` on Open MPI with its types, in scratch
/// directory `name`; `None` after a skip.
fn ring(name: &str, mode: &str) -> Option<(Stack, mpir_target::testkit::Scratch, Job)> {
    let stack = common::stock::open_mpi_stock()?;
    let dir = scratch(name);
    let program = build_fixture(&stack, &dir, "watch");
    let job = start(&stack, &dir, &program, mode, 3);
    Some((stack, dir, job))
}

/// A bundle's documents are valid and its report holds them.
fn check_bundle(bundle: &Path) -> Value {
    let summary = read_json(&bundle.join("bundle.json"));
    common::validate(&summary);
    for f in ["job.json", "stacks.json", "deadlock.json"] {
        common::validate(&read_json(&bundle.join(f)));
    }
    let html = std::fs::read_to_string(bundle.join("report.html")).unwrap();
    assert!(html.contains("mpir.report/1") && html.contains("mpir.deadlock/4"));
    summary
}

#[test]
fn a_job_that_hangs_later_gets_exactly_one_bundle_with_a_core_per_class() {
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    if !have("gdb") {
        skip("needs gdb (the cores' oracle)");
        return;
    }
    let dir = scratch("watch-hang");
    let program = build_fixture(&stack, &dir, "watch");
    let job = start(&stack, &dir, &program, "hang_after:5", 3);
    let out = dir.join("bundles");
    let args = watch_args(
        &stack,
        &job,
        &out,
        "1",
        &["--cores", "--then", "keep", "--for", "30"],
    );
    let (child, rx) = spawn(&args);
    let (code, log) = finish(child, &rx, 120);
    assert_eq!(code, 3, "a hang's bundle was written:\n{log}");
    untouched(&job);
    let (found, partial) = bundles(&out);
    assert!(!partial, "a partial bundle was left");
    assert_eq!(found.len(), 1, "exactly one bundle: {found:?}\n{log}");
    let bundle = &found[0];
    assert!(
        bundle
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-hang")
    );
    let summary = check_bundle(bundle);
    assert_eq!(summary["trigger"], "hang");
    assert_eq!(summary["verdict"], "deadlock", "{summary}");
    // Written after the hang began (the ranks' own clocks, to the second).
    let written = std::fs::metadata(bundle.join("bundle.json"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let hung = hang_time(&dir.join("hang_after:5"), 3);
    assert!(written >= hung, "bundle at {written}, hang at {hung}");
    // The cores: one per class (the ring's three ranks are in the same place: one class).
    let cores = summary["cores"].as_array().unwrap();
    assert!(!cores.is_empty(), "{summary}");
    for c in cores {
        let file = c["file"].as_str().unwrap_or_else(|| panic!("no core: {c}"));
        let core = bundle.join(file);
        let bt = Command::new("gdb")
            .args(["-batch", "-nx", "-ex", "thread apply all bt"])
            .arg(&program)
            .arg(&core)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&bt.stdout);
        assert!(
            text.contains("MPI_Recv") && text.contains("main"),
            "gdb on {}:\n{text}",
            core.display()
        );
    }
}

#[test]
fn a_job_that_never_hangs_gets_no_bundle() {
    let Some((stack, dir, job)) = ring("watch-fine", "fine:8") else {
        return;
    };
    let out = dir.join("bundles");
    let (child, rx) = spawn(&watch_args(&stack, &job, &out, "1", &[]));
    let (code, log) = finish(child, &rx, 120);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("the job ended"), "{log}");
    assert_eq!(bundles(&out), (Vec::new(), false), "{log}");
}

#[test]
fn sigusr1_asks_for_a_bundle_now() {
    let Some((stack, dir, job)) = ring("watch-usr1", "fine:12") else {
        return;
    };
    let out = dir.join("bundles");
    let (child, rx) = spawn(&watch_args(&stack, &job, &out, "3", &[]));
    watching(&rx);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let (code, log) = finish(child, &rx, 120);
    assert_eq!(code, 0, "the job never hung:\n{log}");
    let (found, _) = bundles(&out);
    assert_eq!(found.len(), 1, "{found:?}\n{log}");
    let summary = check_bundle(&found[0]);
    assert_eq!(summary["trigger"], "request");
    assert_ne!(summary["verdict"], "deadlock");
}

#[test]
fn an_output_directory_that_disappears_ends_the_watch_and_leaves_the_job() {
    let Some((stack, dir, job)) = ring("watch-gone", "hang_after:2") else {
        return;
    };
    let out = dir.join("bundles");
    let (child, rx) = spawn(&watch_args(&stack, &job, &out, "1", &[]));
    watching(&rx);
    std::fs::remove_dir_all(&out).unwrap();
    let (code, log) = finish(child, &rx, 120);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("could not be written; the watch ends and the job runs on untouched"),
        "{log}"
    );
    assert!(!out.exists());
    untouched(&job);
}

#[test]
fn launch_watch_then_kill_ends_a_hung_job() {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let stack = common::stock::open_mpi(false).expect("checked above");
    let dir = scratch("watch-launch");
    let program = build_fixture(&stack, &dir, "watch");
    let sub = dir.join("ranks");
    std::fs::create_dir_all(&sub).unwrap();
    let out = dir.join("bundles");
    let mut args: Vec<String> = [
        "launch", "--watch", "--every", "1", "--then", "kill", "--out",
    ]
    .map(String::from)
    .to_vec();
    args.push(out.display().to_string());
    args.push("--".into());
    args.extend(stack.launcher.iter().cloned());
    args.extend(["-n".into(), "3".into()]);
    args.push(program.display().to_string());
    args.push("hang_after:2".into());
    args.push(sub.display().to_string());
    let (child, rx) = spawn(&args);
    let (code, log) = finish(child, &rx, 120);
    // Stock Open MPI without types: its queues are not read, so the stacks judge (every rank
    // blocked in MPI): a hang all the same.
    assert_eq!(code, 3, "{log}");
    assert!(log.contains("the job was told to end"), "{log}");
    let (found, _) = bundles(&out);
    assert_eq!(found.len(), 1, "{found:?}\n{log}");
    let summary = check_bundle(&found[0]);
    assert_eq!(summary["trigger"], "hang");
    let pids: Vec<u32> = (0..3)
        .map(|r| {
            std::fs::read_to_string(sub.join(format!("{r}.pid")))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        wait_for(30, || pids.iter().all(|p| !Path::new(&format!(
            "/proc/{p}"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| s.contains(") Z")))),
        "the job's ranks {pids:?} still run"
    );
}

#[test]
fn slurm_s_time_limit_writes_a_bundle_before_the_end() {
    use mpir_acquire::testkit::{SlurmJobs, slurm_up};
    if !slurm_up() {
        return;
    }
    let mpich = common::mpich_root();
    if !mpich.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", mpich.display()));
        return;
    }
    let stack = Stack {
        name: "mpich-debuginfo",
        mpicc: mpich.join("bin/mpicc"),
        env: Vec::new(),
        launcher: Vec::new(),
        extra: Vec::new(),
    };
    let dir = scratch("watch-slurm");
    let program = build_fixture(&stack, &dir, "watch");
    let sub = dir.join("ranks");
    std::fs::create_dir_all(&sub).unwrap();
    let jobs = SlurmJobs::new("watch-limit");
    // One minute of time limit; the job itself would run 50 s and end.
    let mut srun = jobs.srun(&["--mpi=pmi2", "-n", "2", "--time", "1"]);
    srun.arg(&program).arg("fine:50").arg(&sub);
    let job = Job::start(&mut srun, &sub, 2, Duration::from_millis(500));
    let id = common::slurm_job_id(jobs.name());
    let out = dir.join("bundles");
    let args = |named: [&str; 2], out: &Path| -> Vec<String> {
        let mut a: Vec<String> = vec!["watch".into(), named[0].into(), named[1].into()];
        for x in [
            "--every",
            "1",
            "--time-margin",
            "90",
            "--then",
            "detach",
            "--out",
        ] {
            a.push(x.into());
        }
        a.push(out.display().to_string());
        a
    };
    let id_arg = id.to_string();
    let started = SystemTime::now();
    let (child, rx) = spawn(&args(["--slurm-job", &id_arg], &out));
    let (code, log) = finish(child, &rx, 90);
    assert_eq!(code, 0, "no hang:\n{log}");
    let (found, _) = bundles(&out);
    assert_eq!(found.len(), 1, "{found:?}\n{log}");
    let summary = check_bundle(&found[0]);
    assert_eq!(summary["trigger"], "time-limit");
    let why = summary["why"].as_str().unwrap();
    let left: u64 = why
        .trim_start_matches("the Slurm job has ")
        .trim_end_matches(" s left")
        .parse()
        .unwrap_or_else(|_| panic!("{why}"));
    assert!(left <= 60, "{why}");
    assert!(started.elapsed().unwrap() < Duration::from_secs(60));
    common::stock::untouched(&job);

    // Named by its srun alone: the job the srun itself names (totalview_jobid) is watched.
    let out2 = dir.join("bundles-by-starter");
    let srun = job.starter().to_string();
    let (child, rx) = spawn(&args(["--starter", &srun], &out2));
    let (code, log) = finish(child, &rx, 90);
    assert_eq!(code, 0, "no hang:\n{log}");
    let (found, _) = bundles(&out2);
    assert_eq!(found.len(), 1, "{found:?}\n{log}");
    assert_eq!(check_bundle(&found[0])["trigger"], "time-limit");
    common::stock::untouched(&job);
}

#[test]
fn ranks_that_die_end_the_watch() {
    let Some((_, dir, job)) = ring("watch-die", "fine:60") else {
        return;
    };
    let out = dir.join("bundles");
    // Named by pid: no starter whose exit would say the job ended; the ranks' own deaths must.
    let pids: Vec<String> = job.pids.iter().map(u32::to_string).collect();
    let mut args: Vec<String> = ["watch", "--every", "1", "--pid"]
        .map(String::from)
        .to_vec();
    args.push(pids.join(","));
    args.push("--out".into());
    args.push(out.display().to_string());
    let (child, rx) = spawn(&args);
    watching(&rx);
    std::thread::sleep(Duration::from_secs(2));
    for &p in &job.pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let (code, log) = finish(child, &rx, 60);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("no rank of the job can be read any more"),
        "{log}"
    );
    assert_eq!(bundles(&out), (Vec::new(), false), "{log}");
}

/// A tmpfs of `kib` KiB mounted on `dir` for the guard's life.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, kib: u32) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_output_directory_ends_the_watch_and_leaves_no_half_bundle() {
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    let dir = scratch("watch-full");
    let out = dir.join("bundles");
    // 16 KiB: the report page alone is larger.
    let Some(_fs) = Tmpfs::mount(&out, 16) else {
        skip("cannot mount a small tmpfs here (needs root): the full-disk case is not run");
        return;
    };
    let program = build_fixture(&stack, &dir, "watch");
    let job = start(&stack, &dir, &program, "hang_after:1", 3);
    let (child, rx) = spawn(&watch_args(&stack, &job, &out, "1", &[]));
    let (code, log) = finish(child, &rx, 120);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("could not be written; the watch ends and the job runs on untouched")
            && log.contains("No space left on device"),
        "{log}"
    );
    assert_eq!(
        bundles(&out),
        (Vec::new(), false),
        "nothing left behind: {log}"
    );
    untouched(&job);
}
