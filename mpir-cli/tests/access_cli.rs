//! Refusals made real (issue 32): a rank held by gdb, a tool under a seccomp filter that
//! denies `ptrace` (the scope-3 case on a kernel without Yama), an unprivileged user (created
//! here) reading its own job and someone else's, and ranks that made themselves non-dumpable.
//! Each must be reported with its exact reason (one `denial` object, the same in every
//! document) and its remedy, at once, with the job left as it was.
//!
//! The jobs are Debian's MPICH rings (tests/fixtures/deadlock.c, mode `ring`): rank r waits in
//! `MPI_Recv` for rank r-1.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpir_target::testkit::{assert_untouched, have, run, scratch, skip, status_field};
use serde_json::Value;

mod common;
use common::stock::{Stack, build, mpich_stock, untouched};
use common::{Job, mpir};

/// Bound on a refused command: a refusal is reported at once, never waited out. Not a
/// performance target (those live in benches/): a retry loop or a long wait would exceed it.
const PROMPT: Duration = Duration::from_secs(10);

/// The users this test creates, one at a time (`useradd` locks /etc/passwd).
static USERS: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A system user of that name (created when missing): its uid and gid. `None` (skipped) when
/// this process cannot create users.
fn user(name: &str) -> Option<(u32, u32)> {
    let _one = USERS.lock().unwrap_or_else(|e| e.into_inner());
    let ids = |flag: &str| -> Option<u32> {
        let out = Command::new("id").arg(flag).arg(name).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if ids("-u").is_none() {
        if !is_root() || !have("useradd") {
            skip("creating a test user needs root and useradd");
            return None;
        }
        run(Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(name))
        .unwrap();
    }
    Some((ids("-u")?, ids("-g")?))
}

/// `program args` as `uid`/`gid` with `home` as its home (no groups, no capabilities).
fn as_user(uid: u32, gid: u32, home: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
    ])
    .arg(program)
    .env("HOME", home)
    .env_remove("XDG_CACHE_HOME");
    c
}

/// A directory `uid` owns, readable by all (the tool's binary and the job's program are run
/// from elsewhere).
fn home_of(dir: &Path, name: &str, uid: u32, gid: u32) -> PathBuf {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    nix::unistd::chown(
        &home,
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    )
    .unwrap();
    home
}

fn open_up(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A ring of 3 ranks started by `launcher` (the stack's, possibly wrapped) with `args` before
/// the program; the ranks write their pid files as `owner` (uid, gid) when given.
fn ring(
    launcher: Command,
    program: &Path,
    dir: &Path,
    args: &[&str],
    owner: Option<(u32, u32)>,
) -> Job {
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    open_up(&sub);
    if let Some((uid, gid)) = owner {
        home_of(dir, "ring", uid, gid);
    }
    let mut launcher = launcher;
    launcher
        .args(["-n", "3"])
        .args(args)
        .arg(program)
        .arg("ring")
        .arg(&sub)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Job::start(&mut launcher, &sub, 3, Duration::from_millis(700))
}

fn mpich() -> Option<Stack> {
    let stack = mpich_stock()?;
    if !have("setpriv") {
        skip("needs setpriv (util-linux)");
        return None;
    }
    Some(stack)
}

/// `mpir COMMAND --json --starter S` + the stack's extra arguments, by `cmd` (so that it can
/// be run as another user or under a filter), and its document.
fn json(mut cmd: Command, command: &str, stack: &Stack, starter: u32) -> (Output, Value) {
    let out = cmd
        .arg(command)
        .arg("--json")
        .arg("--starter")
        .arg(starter.to_string())
        .args(&stack.extra)
        .output()
        .unwrap();
    let doc = common::json_doc(&out);
    (out, doc)
}

fn mpir_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mpir"))
}

/// `mpir` as `cmd` (its command and options given) `--json --starter S` + the stack's
/// arguments, and its document.
fn json_of(mut cmd: Command, stack: &Stack, starter: u32) -> (Output, Value) {
    let out = cmd
        .arg("--json")
        .arg("--starter")
        .arg(starter.to_string())
        .args(&stack.extra)
        .output()
        .unwrap();
    let doc = common::json_doc(&out);
    (out, doc)
}

/// The `why` objects of a document's unread ranks, by rank.
fn whys_of(command: &str, doc: &Value) -> Vec<(u64, Value)> {
    unread_field(command, doc, "why")
}

/// The `denial` objects of a document's unread ranks, by rank.
fn denials(command: &str, doc: &Value) -> Vec<(u64, Value)> {
    unread_field(command, doc, "denial")
}

/// Field `field` of each rank a document lists as not read (where it has one), by rank.
fn unread_field(command: &str, doc: &Value, field: &str) -> Vec<(u64, Value)> {
    let items: Vec<&Value> = match command {
        "stacks" => doc["unreached"].as_array().unwrap().iter().collect(),
        "queues" => doc["ranks"].as_array().unwrap().iter().collect(),
        "deadlock" => doc["coverage"]["not_read"]
            .as_array()
            .unwrap()
            .iter()
            .collect(),
        other => panic!("{other}"),
    };
    items
        .into_iter()
        .filter(|r| !r[field].is_null())
        .map(|r| (r["rank"].as_u64().unwrap(), r[field].clone()))
        .collect()
}

#[test]
fn a_rank_held_by_gdb_is_named_with_its_holder_in_every_document() {
    let Some(stack) = mpich() else { return };
    if !have("gdb") {
        skip("needs gdb");
        return;
    }
    let dir = scratch("access-gdb");
    let program = build(&stack, &dir);
    let job = ring(Command::new(&stack.launcher[0]), &program, &dir, &[], None);
    let held = job.pids[1];
    // gdb at its prompt, holding rank 1 until its input closes.
    let mut gdb = Command::new("gdb")
        .args(["-q", "-nx", "-p", &held.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let tracer = loop {
        let t: u32 = status_field(held, "TracerPid:").parse().unwrap();
        if t != 0 {
            break t;
        }
        assert!(Instant::now() < deadline, "gdb did not attach");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(tracer, gdb.id(), "the holder is gdb itself");
    let expected = serde_json::json!({
        "code": "traced_by",
        "pid": tracer,
        "name": "gdb",
    });
    let mut seen = Vec::new();
    let mut whys = Vec::new();
    for command in ["stacks", "queues", "deadlock"] {
        let started = Instant::now();
        // A holder is waited for (`--held-wait`, 15 s by default): 1 s here, then named.
        let mut c = mpir();
        c.args([command, "--held-wait", "1"]);
        let (out, doc) = json_of(c, &stack, job.starter());
        assert!(
            started.elapsed() < PROMPT,
            "{command} took {:?}",
            started.elapsed()
        );
        // The one vocabulary: the same `why` (code, text, the same denial) in every document.
        // (The other ranks of a stock MPICH have no queues to read: their own reason.)
        let rank1: Vec<Value> = whys_of(command, &doc)
            .into_iter()
            .filter(|(rank, _)| *rank == 1)
            .map(|(_, why)| why)
            .collect();
        assert!(!rank1.is_empty(), "{command}: no why for rank 1: {doc}");
        whys.extend(rank1.into_iter().map(|why| (command, why)));
        let found = denials(command, &doc);
        // Rank 1 only, however many samples the command took.
        assert!(!found.is_empty(), "{command}: {doc}");
        for (rank, d) in &found {
            assert_eq!(*rank, 1, "{command}: {doc}");
            for (k, v) in expected.as_object().unwrap() {
                assert_eq!(&d[k], v, "{command}: {d}");
            }
        }
        seen.push(found[0].1.clone());
        assert_ne!(
            out.status.code(),
            Some(0),
            "{command}: an unread rank is no success"
        );
    }
    // One reason, word for word, in every document.
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    assert!(!whys.is_empty());
    for (command, why) in &whys {
        assert_eq!(why["code"], "denied", "{command}: {why}");
        assert_eq!(why["denial"], seen[0], "{command}: {why}");
        assert_eq!(
            why["text"], whys[0].1["text"],
            "{command}: {why} vs {:?}",
            whys[0]
        );
    }
    assert_eq!(
        whys[0].1["text"],
        format!("refused by the kernel: already traced by pid {tracer} (gdb)")
    );
    assert_eq!(
        seen[0]["text"],
        format!("already traced by pid {tracer} (gdb)")
    );
    // The text report says it and what to do.
    let out = mpir()
        .args([
            "stacks",
            "--held-wait",
            "1",
            "--starter",
            &job.starter().to_string(),
        ])
        .args(&stack.extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "unreached [1]: refused by the kernel: already traced by pid {tracer} (gdb)"
        )) && text.contains(&format!("what to do: detach gdb (pid {tracer})")),
        "{text}"
    );
    drop(gdb.stdin.take());
    let _ = gdb.kill();
    let _ = gdb.wait();
    untouched(&job);
}

/// seccomp_exec (tests/fixtures/seccomp_exec.c) built into `dir`.
fn seccomp_exec(dir: &Path) -> PathBuf {
    let exe = dir.join("seccomp_exec");
    run(Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seccomp_exec.c")))
    .unwrap();
    exe
}

#[test]
fn a_tool_whose_ptrace_is_filtered_says_so_at_once() {
    let Some(stack) = mpich() else { return };
    let dir = scratch("access-seccomp");
    let program = build(&stack, &dir);
    let filter = seccomp_exec(&dir);
    let job = ring(Command::new(&stack.launcher[0]), &program, &dir, &[], None);
    let mut cmd = Command::new(&filter);
    cmd.arg("ptrace,process_vm_readv,process_vm_writev")
        .arg(mpir_path());
    let started = Instant::now();
    let out = cmd
        .arg("stacks")
        .arg("--starter")
        .arg(job.starter().to_string())
        .args(&stack.extra)
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "on pid {}: refused: a seccomp filter on this tool refused the system call",
            job.starter()
        )),
        "{err}"
    );
    assert!(
        err.contains("(hint: run the tool outside the seccomp profile"),
        "{err}"
    );
    assert!(took < PROMPT, "took {took:?}");
    untouched(&job);
}

#[test]
fn an_unprivileged_user_reads_its_own_job_and_is_refused_another_s() {
    let Some(stack) = mpich() else { return };
    let Some((a_uid, a_gid)) = user("mpir-test-a") else {
        return;
    };
    let Some((b_uid, b_gid)) = user("mpir-test-b") else {
        return;
    };
    let dir = scratch("access-users");
    open_up(&dir);
    let program = build(&stack, &dir);
    let a_home = home_of(&dir, "a", a_uid, a_gid);
    let b_home = home_of(&dir, "b", b_uid, b_gid);
    let job = ring(
        as_user(a_uid, a_gid, &a_home, &stack.launcher[0]),
        &program,
        &dir,
        &[],
        Some((a_uid, a_gid)),
    );
    // The job is a's, all of it.
    for &p in job.pids.iter().chain([job.starter()].iter()) {
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap();
        assert!(
            status.lines().any(|l| l.starts_with("Uid:")
                && l.split_whitespace().nth(1) == Some(&a_uid.to_string())),
            "pid {p}: {status}"
        );
    }
    // a reads its own job end to end, with no privilege.
    let (out, doc) = json(
        as_user(a_uid, a_gid, &a_home, mpir_path()),
        "stacks",
        &stack,
        job.starter(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(doc["unreached"], serde_json::json!([]), "{doc}");
    let tree = doc.to_string();
    assert!(
        tree.contains("MPI_Recv") && tree.contains("\"main\""),
        "{doc}"
    );
    // b is refused the starter, and told why and what to do.
    let started = Instant::now();
    let out = as_user(b_uid, b_gid, &b_home, mpir_path())
        .args(["stacks", "--starter", &job.starter().to_string()])
        .args(&stack.extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "refused: it runs as uid {a_uid}, this tool as uid {b_uid} without CAP_SYS_PTRACE"
        )) && err.contains(&format!("(hint: run the tool as uid {a_uid}")),
        "{err}"
    );
    assert!(started.elapsed() < PROMPT);
    untouched(&job);
}

#[test]
fn ranks_that_made_themselves_non_dumpable_are_refused_as_such() {
    let Some(stack) = mpich() else { return };
    let Some((uid, gid)) = user("mpir-test-a") else {
        return;
    };
    let dir = scratch("access-dumpable");
    open_up(&dir);
    let program = build(&stack, &dir);
    let home = home_of(&dir, "a", uid, gid);
    let preload = dir.join("undumpable.so");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&preload)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/undumpable.c")))
    .unwrap();
    // The ranks only: hydra gives -genv to the program, not to itself. UCX's shared memory
    // needs ranks to open each other's /proc files, which non-dumpable ranks refuse: TCP.
    let preload_arg = preload.display().to_string();
    let job = ring(
        as_user(uid, gid, &home, &stack.launcher[0]),
        &program,
        &dir,
        &[
            "-genv",
            "LD_PRELOAD",
            &preload_arg,
            "-genv",
            "UCX_TLS",
            "tcp,self",
        ],
        Some((uid, gid)),
    );
    // The oracle: the kernel hands a non-dumpable process's private /proc files to root.
    let owner = |p: u32| {
        std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata(format!("/proc/{p}/environ")).unwrap(),
        )
    };
    assert_eq!(owner(job.starter()), uid, "the starter stays dumpable");
    for &p in &job.pids {
        assert_eq!(owner(p), 0, "rank pid {p} is not dumpable");
    }
    let mut seen = Vec::new();
    for command in ["stacks", "deadlock"] {
        let (_, doc) = json(
            as_user(uid, gid, &home, mpir_path()),
            command,
            &stack,
            job.starter(),
        );
        let found = denials(command, &doc);
        let ranks: std::collections::BTreeSet<u64> = found.iter().map(|(r, _)| *r).collect();
        assert_eq!(ranks, [0, 1, 2].into(), "{command}: {doc}");
        for (_, d) in &found {
            assert_eq!(d["code"], "not_dumpable", "{command}: {d}");
            assert!(
                d["remedy"].as_str().unwrap().contains("CAP_SYS_PTRACE"),
                "{d}"
            );
        }
        seen.push(found[0].1.clone());
    }
    assert_eq!(seen[0], seen[1]);
    assert_untouched(job.starter());
    for &p in &job.pids {
        assert_untouched(p);
    }
}

#[test]
fn under_a_seccomp_filter_preloaded_ranks_answer_for_themselves() {
    let Some(stack) = mpich() else { return };
    let dir = scratch("access-coop");
    let program = build(&stack, &dir);
    let filter = seccomp_exec(&dir);
    let channels = dir.join("channels");
    let library = mpir_waits::library().expect("the wait-state library");
    let library_arg = library.display().to_string();
    let channels_arg = channels.display().to_string();
    let job = ring(
        Command::new(&stack.launcher[0]),
        &program,
        &dir,
        &[
            "-genv",
            "LD_PRELOAD",
            &library_arg,
            "-genv",
            "MPIR_COOP_DIR",
            &channels_arg,
        ],
        None,
    );
    // The tool may neither trace nor read another process's memory: the scope-3 case.
    let denied = || {
        let mut c = Command::new(&filter);
        c.arg("ptrace,process_vm_readv,process_vm_writev")
            .arg(mpir_path())
            .env("MPIR_COOP_DIR", &channels);
        c
    };
    let seccomp = serde_json::json!("seccomp");
    let (out, doc) = json(denied(), "stacks", &stack, job.starter());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(doc["unreached"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["announced"]["starter"], job.starter(), "{doc}");
    assert_eq!(doc["announced"]["denial"]["code"], seccomp);
    let cooperative: Vec<u64> = doc["cooperative"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["denial"]["code"], seccomp, "{c}");
            c["rank"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(cooperative, [0, 1, 2], "{doc}");
    // Nothing was stopped: each thread copied itself.
    assert!(
        doc["stops"]
            .as_array()
            .unwrap()
            .iter()
            .all(|sample| sample.as_array().unwrap().is_empty()),
        "{doc}"
    );
    // Every rank's frames, unwound from what each thread copied of itself.
    let functions: Vec<(&str, &str)> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| Some((n["function"].as_str()?, n["ranks"].as_str()?)))
        .collect();
    for f in ["main", "MPI_Recv"] {
        assert!(
            functions.iter().any(|&(l, r)| l == f && r == "0-2"),
            "{f}: {functions:?}"
        );
    }
    // The ring's cycle, from the wait-state exports read through the channels.
    let (out, doc) = json(denied(), "deadlock", &stack, job.starter());
    assert_eq!(out.status.code(), Some(3), "{doc}");
    assert_eq!(doc["verdict"], "deadlock", "{doc}");
    let mut chain: Vec<u64> = doc["cycles"][0]["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["rank"].as_u64().unwrap())
        .collect();
    chain.sort_unstable();
    assert_eq!(chain, [0, 1, 2], "{doc}");
    assert_eq!(doc["coverage"]["cooperative"].as_array().unwrap().len(), 3);
    // The text says it too.
    let out = denied()
        .args(["stacks", "--starter", &job.starter().to_string()])
        .args(&stack.extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("read through their cooperative channel, not stopped [0,1,2]")
            && text.contains("job table: from its ranks' announcements"),
        "{text}"
    );
    untouched(&job);
}
