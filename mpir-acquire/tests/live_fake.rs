//! Acquisition of live jobs started by fake MPIR starters (C fixtures compiled at test time):
//! every path of the protocol over real processes, and the job always left to complete.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{
    AcquireError, AcquireOptions, Note, RankControl, RankSelection, Refusal, ToolDaemon,
};
use mpir_target::proctable::{LayoutChoice, ReadOptions};
use mpir_types::LayoutSource;
use support::*;

struct Fixtures {
    _dir: Scratch,
    starter: PathBuf,
    rank: PathBuf,
    dir: PathBuf,
}

fn fixtures_with(name: &str, starter_flags: &[&str]) -> Option<Fixtures> {
    let dir = scratch(name);
    let starter = build(&dir, "starter", "starter", starter_flags)?;
    let rank = build(&dir, "rank", "rank", &["-O1"])?;
    let path = dir.to_path_buf();
    Some(Fixtures {
        _dir: dir,
        starter,
        rank,
        dir: path,
    })
}

fn command(f: &Fixtures, opts: &[&str], rank_args: &[&str]) -> Command {
    let mut c = Command::new(&f.starter);
    c.args(opts).arg("--").arg(&f.rank).args(rank_args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    c
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(20))
}

/// Closes the starter's stdin, reads its output to the end, waits: (output, exit code).
fn finish(mut child: Child) -> (String, i32) {
    drop(child.stdin.take());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (out, code)
}

/// The job's (rank, pid) pairs.
fn table(a: &Acquired) -> Vec<(u64, i64)> {
    a.job().ranks().map(|r| (r.rank, r.pid)).collect()
}

fn launched(
    f: &Fixtures,
    opts: &[&str],
    rank_args: &[&str],
    o: AcquireOptions,
) -> (Acquired, Child) {
    let mut a = live::launch(command(f, opts, rank_args), o).unwrap();
    let child = a.take_child().unwrap();
    (a, child)
}

#[test]
fn launch_with_a_function_pointer_called_from_a_thread() {
    let Some(f) = fixtures_with("fnptr", &["-g", "-O1"]) else {
        return;
    };
    let (a, child) = launched(&f, &["-n", "3", "-t", "-p"], &["stdin"], options());
    let pid = child.id();
    let job = a.job();
    assert_eq!(job.starter.pid, pid);
    assert!(job.starter.is_separate());
    assert!(matches!(
        job.table.layout.source,
        LayoutSource::DebugInfo { .. }
    ));
    for r in 0..3 {
        assert!(
            matches!(job.control(r), RankControl::Attached { .. }),
            "{:?}",
            job.control(r)
        );
    }
    let ranks = table(&a);
    drop(a);
    assert_untouched(pid);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        printed_ranks(&out),
        ranks,
        "each entry's pid is the rank's getpid()"
    );
    assert!(out.contains("starter done failed=0"));
}

#[test]
fn a_wrapper_that_execs_the_starter_with_duplicated_relative_names() {
    let Some(f) = fixtures_with("wrapper", &["-g"]) else {
        return;
    };
    let mut cmd = Command::new("sh");
    cmd.current_dir(&f.dir)
        .arg("-c")
        .arg("exec ./starter -n 4 -d -r -- ./rank")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    // Held: the ranks and the starter stay stopped while /proc is consulted.
    let mut a = live::launch(cmd, options().with_hold(true)).unwrap();
    let child = a.take_child().unwrap();
    let job = a.job();
    assert_eq!(job.len(), 4);
    assert!(job.notes.contains(&Note::WaitedForExec), "{:?}", job.notes);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for r in job.ranks() {
        assert_eq!(r.host, Some(host.trim()));
        assert_eq!(r.executable, Some("./rank"), "as the starter reports it");
    }
    // Normalised: the ranks run here, so /proc says what they run.
    for n in live::normalize(job) {
        assert!(n.local_host);
        assert_eq!(n.executable.as_deref(), Some(f.rank.as_path()));
    }
    assert_eq!(job.table.resolved.names.len(), 2, "duplicates read once");
    let ranks = table(&a);
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(printed_ranks(&out), ranks);
}

#[test]
fn attach_to_a_running_job_reads_the_table_and_leaves_it_running() {
    let Some(f) = fixtures_with("attach", &["-g"]) else {
        return;
    };
    let mut child = command(&f, &["-n", "3"], &["stdin"]).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed_ranks(&seen).len() < 3 {
        std::io::BufRead::read_line(&mut out, &mut seen).unwrap();
    }
    // The starter's files are parsed into the caller's cache, to be shared with its reads.
    let files = std::sync::Arc::new(mpir_target::debuginfo::FileCache::new());
    let a = live::attach(
        child.id(),
        options().with_files(std::sync::Arc::clone(&files)),
    )
    .unwrap();
    assert_eq!(table(&a), printed_ranks(&seen));
    let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
    assert!(
        files.holds(&exe),
        "{} not in the shared cache",
        exe.display()
    );
    let pids: Vec<u32> = a.job().ranks().map(|r| r.pid as u32).collect();
    drop(a);
    assert_untouched(child.id());
    for p in pids {
        assert_untouched(p);
    }
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
}

#[test]
fn the_gate_is_released_when_partial_attach_is_not_allowed() {
    // MINIMAL: no MPIR_partial_attach_ok, no MPIR_i_am_starter; ranks spin on their gate.
    let Some(f) = fixtures_with("gate", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let o = options().with_ranks(RankSelection::Only(vec![0].into()));
    let (a, child) = launched(&f, &["-n", "3"], &["gate"], o);
    let job = a.job();
    assert!(!job.starter.flags.partial_attach_ok.present);
    assert!(!job.starter.is_separate());
    assert_eq!(job.attached_pids().len(), 3, "every rank, for its gate");
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("released").count(), 3, "{out}");
}

#[test]
fn hold_keeps_the_ranks_stopped_until_release() {
    let Some(f) = fixtures_with("hold", &["-g"]) else {
        return;
    };
    let (mut a, child) = launched(&f, &["-n", "2"], &["stdin"], options().with_hold(true));
    assert!(a.is_held());
    let pids = a.job().attached_pids();
    assert_eq!(pids.len(), 2);
    std::thread::sleep(Duration::from_millis(200));
    for &p in &pids {
        assert!(status_field(p, "State:").starts_with('t'), "rank {p} held");
    }
    assert!(a.release().unwrap().is_empty());
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_second_spawn_event_after_release_runs_free() {
    let Some(f) = fixtures_with("twice", &["-g"]) else {
        return;
    };
    let (a, child) = launched(&f, &["-n", "2", "-2"], &[], options());
    assert_eq!(a.job().len(), 2);
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn an_abort_is_reported_with_its_message_and_the_starter_goes_on() {
    let Some(f) = fixtures_with("abort", &["-g"]) else {
        return;
    };
    let mut cmd = command(&f, &["-a", "rank 1 called MPI_Abort"], &[]);
    cmd.stdout(Stdio::piped());
    let e = live::launch(cmd, options()).unwrap_err();
    let AcquireError::JobAborted { message, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(message, "rank 1 called MPI_Abort");
}

#[test]
fn a_starter_that_exits_early_or_never_spawns_is_an_error_not_a_hang() {
    let Some(f) = fixtures_with("early", &["-g"]) else {
        return;
    };
    let e = live::launch(command(&f, &["-x"], &[]), options()).unwrap_err();
    assert!(
        matches!(&e, AcquireError::StarterEnded { how, .. } if how.contains("status 3")),
        "{e}"
    );

    let mut child = command(&f, &["-z"], &[]).spawn().unwrap();
    let mut line = [0u8; 1];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut line)
        .unwrap(); // it runs
    let o = options().with_timeout(Duration::from_millis(500));
    let e = live::attach(child.id(), o).unwrap_err();
    assert!(matches!(&e, AcquireError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("spawn event"), "{e}");
    assert_untouched(child.id());
    let (_, code) = finish(child);
    assert_eq!(code, 0);
}

#[test]
fn absent_and_wrong_debug_types() {
    // No DWARF: the ABI layout, and the job says so.
    let Some(f) = fixtures_with("nodwarf", &["-O1"]) else {
        return;
    };
    let (a, child) = launched(&f, &["-n", "2"], &[], options());
    assert_eq!(a.job().table.layout.source, LayoutSource::Abi);
    drop(a);
    assert_eq!(finish(child).1, 0);

    // A debug type that is not MPIR_PROCDESC: an error naming it, unless the ABI is chosen.
    let Some(f) = fixtures_with("wrongtype", &["-g", "-DWRONG_TYPE"]) else {
        return;
    };
    let mut cmd = command(&f, &["-n", "2"], &[]);
    cmd.stdout(Stdio::null());
    let e = live::launch(cmd, options()).unwrap_err();
    assert!(chain(&e).contains("host_name"), "{}", chain(&e));
    let abi = options().with_read(ReadOptions::default().with_layout(LayoutChoice::Abi));
    let (a, child) = launched(&f, &["-n", "2"], &[], abi);
    assert_eq!(a.job().len(), 2);
    assert_eq!(a.job().table.layout.source, LayoutSource::Abi);
    drop(a);
    assert_eq!(finish(child).1, 0);
}

#[test]
fn the_tool_daemon_is_launched_with_our_arguments() {
    let Some(f) = fixtures_with("daemon", &["-g"]) else {
        return;
    };
    let Some(daemon) = build(Path::new(&f.dir), "daemon", "toold", &[]) else {
        return;
    };
    let argv_file = f.dir.join("argv.txt");
    let o = options().with_tool_daemon(ToolDaemon::new(
        daemon.to_str().unwrap(),
        [argv_file.to_str().unwrap(), "--port", "4000"],
    ));
    // -w: the starter spawns (and breaks) only for a debugger, as Open MPI does.
    let (a, child) = launched(&f, &["-n", "2", "-w"], &[], o);
    assert_eq!(a.job().len(), 2);
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    let argv = std::fs::read_to_string(&argv_file).unwrap();
    let expected = format!(
        "{}\n{}\n--port\n4000\n",
        daemon.display(),
        argv_file.display()
    );
    assert_eq!(argv, expected);
}

#[test]
fn the_attach_fifo_wakes_the_starter() {
    let Some(f) = fixtures_with("fifo", &["-g"]) else {
        return;
    };
    let mut child = command(&f, &["-n", "2", "-f", "-w"], &[]).spawn().unwrap();
    let pid = child.id();
    let fifo = format!("/tmp/mpir-test-fifo-{pid}");
    let mut first = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    for _ in 0..200 {
        if Path::new(&fifo).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let a = live::attach(pid, options()).unwrap();
    assert_eq!(a.job().len(), 2);
    assert!(
        a.job()
            .notes
            .iter()
            .any(|n| matches!(n, Note::AttachFifoWritten { .. })),
        "{:?}",
        a.job().notes
    );
    drop(a);
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("fifo byte=1 being_debugged=1"), "{rest}");
    assert!(child.wait().unwrap().success(), "{rest}");
}

#[test]
fn not_a_starter_names_what_was_looked_for() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let e = live::attach(sleeper.id(), options()).unwrap_err();
    assert!(matches!(e, AcquireError::NotAStarter { .. }), "{e}");
    assert!(e.to_string().contains("MPIR_Breakpoint"), "{e}");
    assert_untouched(sleeper.id());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let mut cmd = Command::new("true");
    cmd.stdout(Stdio::null());
    let e = live::launch(cmd, options()).unwrap_err();
    assert!(matches!(e, AcquireError::NotAStarter { .. }), "{e}");
    let _ = std::io::stdout().flush();
}

#[test]
fn ranks_that_exit_before_we_attach_are_per_rank_problems() {
    let Some(f) = fixtures_with("exiting", &["-g"]) else {
        return;
    };
    // The ranks print and exit at once: by the spawn event they are gone or going.
    let (a, child) = launched(&f, &["-n", "4"], &[], options());
    let job = a.job();
    assert_eq!(job.len(), 4, "the table is complete");
    for r in 0..4 {
        match job.control(r) {
            RankControl::Attached { .. } => {}
            RankControl::Failed { error } => {
                assert!(error.to_string().contains("exited"), "rank {r}: {error}")
            }
            // Gone before it could be proven: never touched.
            RankControl::Refused {
                reason: Refusal::NoProcess { .. },
            } => {}
            other => panic!("rank {r}: {other:?}"),
        }
    }
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(printed_ranks(&out).len(), 4);
}

#[test]
fn the_gate_is_opened_even_for_ranks_listed_before_their_exec() {
    // The table lists the ranks while they are still forks of the starter: their gate lives
    // in the program they are about to exec.
    let Some(f) = fixtures_with("late-exec", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let (a, child) = launched(&f, &["-n", "3", "-e"], &["gate"], options());
    assert_eq!(a.job().len(), 3);
    assert!(
        a.job().notes.iter().all(|n| !matches!(
            n,
            Note::NoGate { .. }
                | Note::GateFailed { .. }
                | Note::NotRunToProgram { .. }
                | Note::NoBeingDebugged
        )),
        "{:?}",
        a.job().notes
    );
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("released").count(), 3, "{out}");
}

#[test]
fn a_held_job_is_handed_over_stopped_to_another_tool() {
    let Some(f) = fixtures_with("handover", &["-g"]) else {
        return;
    };
    let (mut a, child) = launched(&f, &["-n", "2"], &["stdin"], options().with_hold(true));
    let stopped = a.hand_over().unwrap();
    assert_eq!(stopped.len(), 2);
    assert!(a.release().unwrap().is_empty(), "nothing left to release");
    assert_untouched(child.id());
    for &p in &stopped {
        assert_eq!(status_field(p, "TracerPid:"), "0");
        assert!(
            wait_for(5, || status_field(p, "State:").starts_with('T')),
            "{p}: {}",
            status_field(p, "State:")
        );
    }
    // The other tool's part, done here: let them run.
    for &p in &stopped {
        assert!(
            Command::new("kill")
                .args(["-CONT", &p.to_string()])
                .status()
                .unwrap()
                .success()
        );
    }
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_starter_killed_while_held_leaves_the_ranks_running() {
    let Some(f) = fixtures_with("killed", &["-g"]) else {
        return;
    };
    let (mut a, mut child) = launched(&f, &["-n", "2"], &["stdin"], options().with_hold(true));
    let ranks = a.job().attached_pids();
    assert_eq!(ranks.len(), 2);
    child.kill().unwrap(); // SIGKILL while stopped under our control
    // The release copes: the starter is gone, the ranks are let go of.
    let _ = a.release();
    for &p in &ranks {
        assert_untouched(p);
        assert_eq!(status_field(p, "TracerPid:"), "0");
    }
    let _ = child.wait();
    // The ranks wait for their stdin, which `wait` just closed: they end.
    for &p in &ranks {
        assert!(wait_for(10, || {
            let s = status_field(p, "State:");
            s.is_empty() || s.starts_with('Z')
        }));
    }
}

#[test]
fn a_rank_killed_while_held_does_not_stop_the_release() {
    let Some(f) = fixtures_with("rank-killed", &["-g"]) else {
        return;
    };
    let (mut a, child) = launched(&f, &["-n", "3"], &["stdin"], options().with_hold(true));
    let ranks = a.job().attached_pids();
    assert_eq!(ranks.len(), 3);
    let victim = ranks[1];
    assert!(
        Command::new("kill")
            .args(["-9", &victim.to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(wait_for(10, || !status_field(victim, "State:").starts_with('t')));
    let problems = a.release().unwrap();
    for &p in ranks.iter().filter(|&&p| p != victim) {
        assert_untouched(p);
    }
    drop(problems);
    let (out, code) = finish(child);
    // The starter saw one rank die (killed): it reports the failure, nothing hangs.
    assert_eq!(code, 1, "{out}");
    // The survivors ran on (the victim may have died before printing).
    let printed: Vec<i64> = printed_ranks(&out).into_iter().map(|(_, p)| p).collect();
    for &p in ranks.iter().filter(|&&p| p != victim) {
        assert!(printed.contains(&i64::from(p)), "{p} in {out}");
    }
}

#[test]
fn ranks_listed_before_their_exec_are_held_in_their_own_program() {
    // -e: the ranks wait 300 ms between fork and exec, so the table lists forks of the starter.
    let Some(f) = fixtures_with("held-late-exec", &["-g"]) else {
        return;
    };
    let (mut a, child) = launched(
        &f,
        &["-n", "3", "-e"],
        &["stdin"],
        options().with_hold(true),
    );
    let pids = a.job().attached_pids();
    assert_eq!(pids.len(), 3);
    for &p in &pids {
        let exe = std::fs::read_link(format!("/proc/{p}/exe")).unwrap();
        assert_eq!(exe, f.rank, "pid {p} is held in the rank's program");
        assert!(status_field(p, "State:").starts_with('t'), "pid {p} held");
    }
    assert!(a.release().unwrap().is_empty());
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(printed_ranks(&out).len(), 3);
}
