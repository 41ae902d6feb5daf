//! The bundled demo job (`demo/*.c`, built by `build.rs`): it runs and ends on its own without
//! a debugger; gdb (the oracle) sees the proctable and the MPICH 4.1 queue structures as
//! declared, the MPICH structures laid out as the real (debug-built) MPICH lays them out, and
//! the queues holding the operations the demo promises; our own acquisition launches it and
//! opens its gate; killing the starter, politely or not, leaves no rank behind.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

#[path = "common/demo_paths.rs"]
mod demo_paths;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use mpir_acquire::{AcquireOptions, live};
use mpir_target::testkit::{assert_untouched, have, skip, status_field, wait_for};

/// A running demo job; killed (SIGKILL, the ranks follow) if a test fails half-way.
struct Demo {
    child: Child,
    lines: Receiver<String>,
    /// (rank, pid) in rank order, from the "rank R pid P ready" lines.
    ranks: Vec<(u64, u32)>,
    banner: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ready_line(l: &str) -> Option<(u64, u32)> {
    let w: Vec<&str> = l.split_whitespace().collect();
    match w.as_slice() {
        ["rank", r, "pid", p, "ready"] => Some((r.parse().ok()?, p.parse().ok()?)),
        _ => None,
    }
}

fn reader(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Collects the banner and `n` ready lines.
fn wait_ready(lines: &Receiver<String>, n: usize) -> (String, Vec<(u64, u32)>) {
    let mut banner = String::new();
    let mut ranks = Vec::new();
    while ranks.len() < n {
        let l = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("demo ranks not ready ({e}); got {ranks:?}"));
        match ready_line(&l) {
            Some(r) => ranks.push(r),
            None if banner.is_empty() => banner = l,
            None => panic!("unexpected line {l:?}"),
        }
    }
    ranks.sort_unstable();
    (banner, ranks)
}

fn start(n: u64, lifetime: u64) -> Demo {
    let mut child = Command::new(demo_paths::starter().unwrap())
        .args(["-n", &n.to_string(), "--lifetime", &lifetime.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the demo");
    let lines = reader(&mut child);
    let (banner, ranks) = wait_ready(&lines, n as usize);
    Demo {
        child,
        lines,
        ranks,
        banner,
    }
}

/// Whether `pid` is gone (or a zombie no one reaped yet).
fn gone(pid: u32) -> bool {
    let s = status_field(pid, "State:");
    s.is_empty() || s.starts_with('Z')
}

fn gdb_present() -> bool {
    if have("gdb") {
        return true;
    }
    skip("gdb (the layout oracle) is not installed");
    false
}

/// Runs gdb in batch mode on `pid` (or a file) and returns the value of each `print`, in order
/// (`$N = VALUE`), plus the whole output.
fn gdb(target: &[&str], commands: &[&str]) -> (Vec<String>, String) {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx"]);
    for c in commands {
        cmd.args(["-ex", c]);
    }
    let out = cmd.args(target).stdin(Stdio::null()).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let values = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('$')?;
            let (num, v) = rest.split_once(" = ")?;
            num.parse::<u32>().ok()?;
            Some(v.to_string())
        })
        .collect();
    (values, text)
}

/// `ptype/o` of a struct as (member, offset, size), top-level members only (a nested
/// aggregate is named "(nested)").
fn members(ptype: &str, name: &str) -> Vec<(String, u64, u64)> {
    let start = ptype
        .find(&format!("type = struct {name} {{"))
        .unwrap_or_else(|| panic!("no struct {name} in:\n{ptype}"));
    let mut out = Vec::new();
    let mut depth = 0;
    for l in ptype[start..].lines().skip(1) {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("/*") {
            let Some((pos, decl)) = rest.split_once("*/") else {
                continue;
            };
            let decl = decl.trim();
            if depth == 0
                && let Some((off, size)) = pos.split_once('|')
                && let (Ok(off), Ok(size)) = (off.trim().parse(), size.trim().parse())
            {
                let member = if decl.ends_with('{') {
                    "(nested)"
                } else {
                    let d = decl.trim_end_matches(';');
                    let last = d.rsplit([' ', '*']).next().unwrap_or(d);
                    last.split('[').next().unwrap_or(last)
                };
                out.push((member.to_string(), off, size));
            }
            if decl.ends_with('{') {
                depth += 1;
            }
        } else if t.starts_with('}') {
            if depth == 0 {
                break;
            }
            depth -= 1;
        }
    }
    out
}

#[test]
fn runs_without_a_debugger_and_ends_after_its_lifetime() {
    let mut d = start(5, 2);
    assert!(
        d.banner
            .contains("the mpir-rs demo job, no MPI library involved"),
        "{}",
        d.banner
    );
    assert_eq!(
        d.ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    // The ranks are the starter's children.
    for &(_, pid) in &d.ranks {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let ppid: u32 = stat
            .rsplit(") ")
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(ppid, d.child.id());
    }
    let mut status = None;
    assert!(wait_for(10, || {
        status = d.child.try_wait().unwrap();
        status.is_some()
    }));
    assert_eq!(
        status.unwrap().code(),
        Some(0),
        "the lifetime ends the job cleanly"
    );
    let last = d.lines.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(last.contains("lifetime of 2 s over"), "{last}");
    for &(_, pid) in &d.ranks {
        assert!(gone(pid), "rank pid {pid} outlived the demo");
    }
}

#[test]
fn gdb_sees_the_proctable_as_declared_and_sigterm_ends_the_job() {
    if !gdb_present() {
        return;
    }
    let mut d = start(4, 60);
    let sp = d.child.id();
    let exe = demo_paths::rank();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let mut cmds = vec![
        "print MPIR_proctable_size".to_string(),
        "print MPIR_debug_state".to_string(),
        "print MPIR_being_debugged".to_string(),
        "print sizeof(MPIR_i_am_starter)".to_string(),
        "ptype MPIR_proctable".to_string(),
        "print &MPIR_partial_attach_ok".to_string(),
    ];
    for i in 0..4 {
        cmds.push(format!("print MPIR_proctable[{i}].pid"));
        cmds.push(format!("print MPIR_proctable[{i}].host_name"));
        cmds.push(format!("print MPIR_proctable[{i}].executable_name"));
    }
    cmds.push("print MPIR_proctable[0].host_name == MPIR_proctable[3].host_name".into());
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let (v, text) = gdb(&["-p", &sp.to_string()], &cmds);
    assert_eq!(&v[..4], ["4", "1", "0", "4"], "{text}");
    assert!(
        text.contains(
            "type = struct {\n    char *host_name;\n    char *executable_name;\n    int pid;\n} *"
        ),
        "{text}"
    );
    assert!(
        text.contains("No symbol \"MPIR_partial_attach_ok\""),
        "{text}"
    );
    for (i, &(rank, pid)) in d.ranks.iter().enumerate() {
        assert_eq!(rank, i as u64);
        let e = &v[4 + 3 * i..7 + 3 * i];
        assert_eq!(e[0], pid.to_string(), "{text}");
        assert!(e[1].ends_with(&format!("\"{}\"", host.trim())), "{}", e[1]);
        assert!(
            e[2].ends_with(&format!("\"{}\"", exe.display())),
            "{}",
            e[2]
        );
    }
    assert_eq!(v[16], "1", "one shared host string");
    assert_untouched(sp);
    // SIGTERM: the starter stops its ranks and dies of the same signal.
    assert!(send_signal(sp, "TERM"));
    let mut status = None;
    assert!(wait_for(10, || {
        status = d.child.try_wait().unwrap();
        status.is_some()
    }));
    assert_eq!(status.unwrap().signal(), Some(15));
    for &(_, pid) in &d.ranks {
        assert!(wait_for(5, || gone(pid)), "rank pid {pid} left running");
    }
}

/// `kill -SIG PID` through kill(1) (tests have no unsafe code).
fn send_signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn killing_the_starter_outright_takes_the_ranks_with_it() {
    let mut d = start(3, 60);
    assert!(send_signal(d.child.id(), "KILL"));
    let _ = d.child.wait();
    for &(_, pid) in &d.ranks {
        assert!(
            wait_for(5, || gone(pid)),
            "rank pid {pid} outlived its starter"
        );
    }
}

/// MPICH 4.1's `MPIR_Debugq` on LP64, from its declaration in `mpir_debugger.h`.
const DEBUGQ: &[(&str, u64, u64)] = &[
    ("req", 0, 8),
    ("tag", 8, 4),
    ("rank", 12, 4),
    ("context_id", 16, 4),
    ("buf", 24, 8),
    ("count", 32, 8),
    ("next", 40, 8),
    ("prev", 48, 8),
];

#[test]
fn gdb_sees_the_mpich_queues_the_demo_promises() {
    if !gdb_present() {
        return;
    }
    let d = start(5, 60);
    let pid = |r: usize| d.ranks[r].1.to_string();
    let layout = [
        "ptype/o struct MPIR_Debugq",
        "ptype/o struct MPIR_Comm",
        "ptype/o struct MPIR_Group",
        "ptype/o struct MPIR_Comm_list",
        "ptype/o struct MPII_Group_pmap_t",
        "whatis MPIR_Sendq_head",
        "whatis MPIR_Recvq_head",
        "whatis MPIR_Unexpq_head",
        "whatis MPIR_All_communicators",
    ];
    let (_, text) = gdb(&["-p", &pid(3)], &layout);
    let debugq: Vec<(String, u64, u64)> = members(&text, "MPIR_Debugq");
    let expect: Vec<(String, u64, u64)> = DEBUGQ
        .iter()
        .map(|&(m, o, s)| (m.to_string(), o, s))
        .collect();
    assert_eq!(debugq, expect, "{text}");
    for decl in [
        "MPIR_Request *req;",
        "const void *buf;",
        "MPI_Aint count;",
        "struct MPIR_Debugq *next;",
        "MPIR_Context_id_t recvcontext_id;",
        "MPII_Group_pmap_t *lrank_to_lpid;",
        "MPIR_Comm_kind_t comm_kind;",
        "char name[128];",
        "struct MPIR_Comm *comm_next;",
        "uint64_t lpid;",
    ] {
        assert!(text.contains(decl), "{decl} missing:\n{text}");
    }
    assert_eq!(
        text.matches("type = MPIR_Debugq *").count(),
        3,
        "the three queue heads:\n{text}"
    );
    assert!(text.contains("type = MPIR_Comm_list"), "{text}");

    // The same structures in the debug-built MPICH's libmpi: same members at the same places.
    match std::env::var_os("MPIR_MPICH_DEBUGINFO") {
        Some(dir) => {
            let lib = std::path::Path::new(&dir).join("lib/libmpi.so");
            let (_, real) = gdb(
                &[lib.to_str().unwrap()],
                &[
                    "ptype/o struct MPIR_Comm",
                    "ptype/o struct MPIR_Group",
                    "ptype/o struct MPIR_Comm_list",
                    "ptype/o struct MPII_Group_pmap_t",
                ],
            );
            for s in [
                "MPIR_Comm",
                "MPIR_Group",
                "MPIR_Comm_list",
                "MPII_Group_pmap_t",
            ] {
                let ours: HashMap<String, (u64, u64)> = members(&text, s)
                    .into_iter()
                    .map(|(m, o, z)| (m, (o, z)))
                    .collect();
                let theirs: HashMap<String, (u64, u64)> = members(&real, s)
                    .into_iter()
                    .map(|(m, o, z)| (m, (o, z)))
                    .collect();
                assert!(!theirs.is_empty(), "{s} in libmpi:\n{real}");
                // Every member we declare sits where MPICH has it ...
                for (m, place) in &ours {
                    assert_eq!(theirs.get(m), Some(place), "{s}.{m}");
                }
                // ... and we leave out only MPIR_Comm's tail, after `hints`.
                for (m, (o, _)) in &theirs {
                    assert!(
                        ours.contains_key(m) || (s == "MPIR_Comm" && *o > 344),
                        "{s}.{m} missing"
                    );
                }
            }
        }
        None => skip("MPIR_MPICH_DEBUGINFO (the debug-built MPICH) is not set"),
    }

    // The communicators, newest first, and the queues of each kind of rank.
    let comms = [
        "print MPIR_All_communicators.sequence_number",
        "print MPIR_All_communicators.head->name",
        "print MPIR_All_communicators.head->context_id",
        "print MPIR_All_communicators.head->comm_next->name",
        "print MPIR_All_communicators.head->comm_next->comm_next->name",
        "print MPIR_All_communicators.head->comm_next->comm_next->local_group",
        "print MPIR_All_communicators.head->comm_next->comm_next->comm_next->name",
        "print MPIR_All_communicators.head->comm_next->comm_next->comm_next->comm_next",
        "print MPIR_All_communicators.head->local_group->lrank_to_lpid[4].lpid",
        "print MPIR_All_communicators.head->local_size",
    ];
    let (v, text) = gdb(&["-p", &pid(3)], &comms);
    let name = |s: &str| format!("\"{s}\", '\\000' <repeats {} times>", 127 - s.len());
    assert_eq!(
        v,
        [
            "4".to_string(),
            name("demo-ring"),
            "48".into(),
            name("MPI_ICOMM_WORLD"),
            name("MPI_COMM_SELF"),
            "(MPIR_Group *) 0x0".into(),
            name("MPI_COMM_WORLD"),
            "(struct MPIR_Comm *) 0x0".into(),
            "4".into(),
            "5".into()
        ],
        "{text}"
    );
    let queue = |q: &str| {
        [
            format!("print {q}->rank"),
            format!("print {q}->tag"),
            format!("print {q}->context_id"),
            format!("print {q}->count"),
            format!("print {q}->next"),
            format!("print {q}->prev == {q}"),
            format!("print {q}->req->cc"),
        ]
    };
    let mut cmds: Vec<String> = ["MPIR_Recvq_head", "MPIR_Sendq_head", "MPIR_Unexpq_head"]
        .iter()
        .flat_map(|q| queue(q))
        .collect();
    cmds.push("print MPIR_Unexpq_head->req->status.MPI_SOURCE".into());
    cmds.push("print MPIR_Sendq_head->req->comm->name".into());
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let (v, text) = gdb(&["-p", &pid(3)], &cmds);
    let end = "(struct MPIR_Debugq *) 0x0";
    let want = [
        // MPI_Irecv(MPI_ANY_SOURCE = -2, tag 42) on demo-ring (context 48), 8 doubles.
        "-2", "42", "48", "8", end, "1", "1", //
        // MPI_Isend to 0, tag 99, 262144 doubles.
        "0", "99", "48", "262144", end, "1", "1", //
        // Unexpected from 1, tag 5, on MPI_COMM_WORLD (context 0).
        "1", "5", "0", "0", end, "1", "1", //
        "1",
    ];
    assert_eq!(&v[..want.len()], want, "{text}");
    assert!(v[want.len()].starts_with("\"demo-ring\""), "{text}");
    for r in 0..3 {
        let (v, text) = gdb(
            &["-p", &pid(r)],
            &[
                "print MPIR_Recvq_head->rank",
                "print MPIR_Recvq_head->tag",
                "print MPIR_Recvq_head->next",
                "print MPIR_Sendq_head",
                "print MPIR_Unexpq_head",
            ],
        );
        let next = ((r + 1) % 3).to_string();
        let null = "(MPIR_Debugq *) 0x0";
        assert_eq!(
            v,
            [next.as_str(), "7", "(struct MPIR_Debugq *) 0x0", null, null],
            "rank {r}: {text}"
        );
    }
    let (v, text) = gdb(
        &["-p", &pid(4)],
        &[
            "print MPIR_Recvq_head",
            "print MPIR_Sendq_head",
            "print MPIR_Unexpq_head",
            "print MPIR_debug_gate",
        ],
    );
    let null = "(MPIR_Debugq *) 0x0";
    assert_eq!(v, [null, null, null, "0"], "rank 4 is idle: {text}");
    for &(_, p) in &d.ranks {
        assert_untouched(p);
    }
}

#[test]
fn our_acquisition_launches_it_and_opens_the_gate() {
    if !gdb_present() {
        return;
    }
    let mut cmd = Command::new(demo_paths::starter().unwrap());
    cmd.args(["-n", "4", "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut acquired = match live::launch(cmd, AcquireOptions::default()) {
        Ok(a) => a,
        Err(e) => panic!("launch the demo: {e}"),
    };
    let mut child = acquired.take_child().unwrap();
    let lines = reader(&mut child);
    let job_pids: Vec<(u64, u32)> = acquired
        .job()
        .ranks()
        .map(|r| (r.rank, r.pid as u32))
        .collect();
    let exe = demo_paths::rank();
    assert!(
        acquired
            .job()
            .ranks()
            .all(|r| r.executable == Some(exe.to_str().unwrap()))
    );
    drop(acquired);
    let d = Demo {
        child,
        lines,
        ranks: Vec::new(),
        banner: String::new(),
    };
    // The gate opened, every rank went on and built its queues.
    let (banner, ranks) = wait_ready(&d.lines, 4);
    assert!(banner.contains("demo job"), "{banner}");
    assert_eq!(ranks, job_pids);
    let (v, text) = gdb(
        &["-p", &ranks[1].1.to_string()],
        &[
            "print MPIR_debug_gate",
            "print MPIR_All_communicators.sequence_number",
        ],
    );
    assert_eq!(v, ["1", "4"], "{text}");
    for &(_, p) in &ranks {
        assert_untouched(p);
    }
    assert_untouched(d.child.id());
}
