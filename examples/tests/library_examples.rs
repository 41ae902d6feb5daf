//! The library examples in `examples/examples/` run as their docs say, on C fixtures and on a
//! real Open MPI job. They are built by `cargo test --workspace` (cargo builds a package's
//! examples with its tests); run alone, this test builds nothing and skips with a reason.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::ompi_sidecar;
use mpir_target::testkit::{have, run, scratch, skip, wait_for};

/// `target/<profile>/examples/<name>`, next to this test's `deps` directory.
fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("examples").join(name);
    if path.is_file() {
        Some(path)
    } else {
        skip(&format!(
            "example {name} is not built ({}); `cargo test --workspace` builds it",
            path.display()
        ));
        None
    }
}

fn compile(dir: &Path, src: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.join(out);
    run(Command::new("cc")
        .args(["-g", "-pthread"])
        .args(extra)
        .arg(src)
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("{e}"));
    exe
}

#[test]
fn acquire_job_launches_a_starter_and_the_job_completes() {
    let Some(ex) = example("acquire_job") else {
        return;
    };
    let dir = scratch("ex-acquire");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures");
    let starter = compile(&dir, &fixtures.join("starter.c"), "starter", &[]);
    let rank = compile(&dir, &fixtures.join("rank.c"), "rank", &[]);
    let out = Command::new(ex)
        .arg("launch")
        .arg(&starter)
        .args(["-n", "3", "-t", "--"])
        .arg(&rank)
        .arg("linger") // the ranks stay 2 s: long enough to be attached
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(", 3 ranks"), "{text}");
    assert_eq!(text.matches("attached (stopped)").count(), 3, "{text}");
    assert!(
        text.contains("starter done failed=0"),
        "the job's own output: {text}"
    );
    assert!(text.contains("job ended: exit status: 0"), "{text}");
}

#[test]
fn core_proctable_reads_a_starter_core_and_takes_a_moved_executable() {
    let Some(ex) = example("core_proctable") else {
        return;
    };
    if !have("gcore") {
        skip("needs gcore (gdb)");
        return;
    }
    let dir = scratch("ex-core");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-target/tests/fixtures");
    let include = format!("-I{}", fixtures.display());
    let exe = compile(
        &dir,
        &fixtures.join("fake_starter.c"),
        "starter",
        &[&include],
    );
    let mut starter = Command::new(&exe)
        .args(["12", "dup"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(starter.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let core = mpir_target::testkit::gcore(&dir, &[starter.id()])
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    let _ = starter.kill();
    let _ = starter.wait();
    let moved = dir.join("elsewhere");
    std::fs::rename(&exe, &moved).unwrap();
    let out = Command::new(ex).arg(&core).arg(&moved).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("12 ranks"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("rank ")).count(),
        12,
        "{text}"
    );
}

#[test]
fn rank_queues_lists_an_open_mpi_rank() {
    let Some(ex) = example("rank_queues") else {
        return;
    };
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let Some(sidecar) = ompi_sidecar() else {
        skip("no Open MPI types sidecar");
        return;
    };
    let dir = scratch("ex-queues");
    let app = dir.join("pending");
    run(Command::new("mpicc.openmpi")
        .args(["-g", "-o"])
        .arg(&app)
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-mqd/tests/fixtures/ompi_pending.c"),
        ))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut job = Command::new("orterun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(&app)
        .arg(&*dir)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(60, || dir.join("1.pid").is_file()
        && dir.join("0.pid").is_file()));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid: u32 = std::fs::read_to_string(dir.join("0.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let out = Command::new(ex)
        .arg(pid.to_string())
        .arg(&sidecar)
        .output()
        .unwrap();
    let _ = job.kill();
    let _ = job.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ompi_pending.c posts, on rank 0: a receive of 16 bytes from rank 1 with tag 77.
    assert!(
        text.lines()
            .any(|l| l.contains("Receive") && l.contains("Some(77)") && l.contains("Some(16)")),
        "{text}"
    );
}

/// (rank, pid) of each "rank R pid P ready" line the demo job printed.
fn demo_ready(text: &str) -> Vec<(u64, u32)> {
    let mut v: Vec<(u64, u32)> = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p, "ready"] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn debugger_loop_drives_the_sans_io_protocol_over_the_demo_job() {
    let Some(ex) = example("debugger_loop") else {
        return;
    };
    let starter = mpir_cli::demo_job::starter().unwrap();
    let out = Command::new(ex)
        .arg(&starter)
        .args(["-n", "3", "--lifetime", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("job: 3 ranks"), "{text}");
    // The table's pids are the ones the ranks report, each attached by the example's own
    // check, and each released from its gate: only then does a demo rank say "ready".
    let ready = demo_ready(&text);
    assert_eq!(ready.len(), 3, "{text}");
    for (rank, pid) in ready {
        assert!(
            text.contains(&format!("rank {rank} pid {pid} attached")),
            "{text}"
        );
        assert!(
            text.contains(&format!("rank {rank}: gate opened")),
            "{text}"
        );
    }
    assert!(text.contains("job ended: exit status: 0"), "{text}");
}

/// What an example run against a running demo job left: its success, its stdout, its stderr,
/// the demo ranks (rank, pid), and the ranks it left traced or stopped (pid, TracerPid, State).
struct OnDemo {
    ok: bool,
    text: String,
    stderr: String,
    ranks: Vec<(u64, u32)>,
    left: Vec<(u32, String, String)>,
}

/// Starts an `n`-rank demo job, waits until every rank is ready, runs example `ex` with the
/// starter's pid and `args`, checks which ranks it left traced or stopped, and ends the job.
fn run_on_demo(ex: &Path, n: usize, args: &[&str]) -> OnDemo {
    use std::io::BufRead;
    let mut demo = Command::new(mpir_cli::demo_job::starter().unwrap())
        .args(["-n", &n.to_string(), "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    while demo_ready(&seen).len() < n {
        let l = lines.next().expect("the demo ended early").unwrap();
        seen.push_str(&l);
        seen.push('\n');
    }
    let ranks = demo_ready(&seen);
    let out = Command::new(ex)
        .arg(demo.id().to_string())
        .args(args)
        .output()
        .unwrap();
    // Every rank runs on, untraced, once the example is done.
    let left = ranks
        .iter()
        .map(|&(_, p)| {
            let status = |f| mpir_target::testkit::status_field(p, f);
            (p, status("TracerPid:"), status("State:"))
        })
        .filter(|(_, tracer, state)| {
            tracer != "0" || state.starts_with('t') || state.starts_with('T')
        })
        .collect();
    let _ = demo.kill();
    let _ = demo.wait();
    OnDemo {
        ok: out.status.success(),
        text: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        ranks,
        left,
    }
}

#[test]
fn profiler_samples_every_ranks_queues_of_the_running_demo_job() {
    let Some(ex) = example("profiler") else {
        return;
    };
    let OnDemo {
        ok,
        text,
        stderr,
        ranks,
        left,
    } = run_on_demo(&ex, 4, &["3", "50"]);
    assert!(ok, "{text}{stderr}");
    assert!(left.is_empty(), "ranks left traced or stopped: {left:?}");
    assert!(text.contains("job: starter pid"), "{text}");
    assert!(text.contains(", 4 ranks on 1 nodes"), "{text}");
    // What the demo keeps pending (examples/demo/rank.c): ranks 0-2 each a receive of the
    // ring; rank 3 a wildcard receive, a send, and an unexpected message.
    for s in 1..=3 {
        for r in 0..3 {
            assert!(
                text.contains(&format!(
                    "sample {s} rank {r}: sends 0 receives 1 unexpected 0"
                )),
                "{text}"
            );
        }
        assert!(
            text.contains(&format!(
                "sample {s} rank 3: sends 1 receives 1 unexpected 1"
            )),
            "{text}"
        );
    }
    assert!(
        text.contains("rank 3 peak: sends 1 receives 1 unexpected 1"),
        "{text}"
    );
    assert_eq!(ranks.len(), 4);
}

#[test]
fn stack_sampler_prints_folded_stacks_of_the_running_demo_job() {
    let Some(ex) = example("stack_sampler") else {
        return;
    };
    // 300 ms at 50 ms: 6 samples.
    let OnDemo {
        ok,
        text,
        stderr,
        ranks,
        left,
    } = run_on_demo(&ex, 3, &["300", "50"]);
    assert_eq!(ranks.len(), 3);
    assert!(ok, "{text}{stderr}");
    assert!(left.is_empty(), "ranks left traced or stopped: {left:?}");
    for s in 1..=6 {
        assert!(
            text.contains(&format!("sample {s}: 3 ranks read, longest stop ")),
            "{text}"
        );
    }
    assert!(!text.contains("sample 7:"), "{text}");
    // The demo's 3 ranks are a ring, each waiting in its MPI_Recv under main
    // (mpir-demo/demo/rank.c, step 4): 3 main threads in each of 6 samples.
    let folded = text
        .lines()
        .find(|l| l.contains(";main;MPI_Recv;"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(folded.starts_with("_start;"), "{text}");
    assert!(folded.ends_with("pause 18"), "{text}");
    assert!(text.contains("6 samples, "), "{text}");
}
