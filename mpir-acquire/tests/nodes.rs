//! Ranks live on nodes: tables shaped like multi-node jobs, whose other-node entries carry the
//! pids of real local processes that are not ranks ("decoys", which record any tracer that
//! ever touches them), and a starter whose ranks are forked copies of itself. Nothing that is
//! not proven to be this node's rank of this job is ever touched, in launch and attach mode,
//! holding or not.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{AcquireOptions, Note, Proven, RankControl, Refusal};
use mpir_target::testkit::Decoys;
use support::*;

struct Fixtures {
    _dir: Scratch,
    dir: PathBuf,
    starter: PathBuf,
    rank: PathBuf,
}

fn fixtures(name: &str) -> Option<Fixtures> {
    let dir = scratch(name);
    let starter = build(&dir, "starter", "starter", &["-g"])?;
    let rank = build(&dir, "rank", "rank", &["-O1"])?;
    let path = dir.to_path_buf();
    Some(Fixtures {
        _dir: dir,
        dir: path,
        starter,
        rank,
    })
}

/// The starter's `-R` arguments: decoy 0 and 1 on other nodes, decoy 2 on this node (listed
/// with the rank program, which it does not run).
fn decoy_entries(d: &Decoys) -> Vec<String> {
    let p = d.pids();
    vec![
        "-R".into(),
        format!("far-node-1.cluster.invalid:{}", p[0]),
        "-R".into(),
        format!("far-node-2:{}", p[1]),
        "-R".into(),
        format!("=:{}", p[2]),
    ]
}

fn starter_command(f: &Fixtures, opts: &[String], rank_args: &[&str]) -> Command {
    let mut c = Command::new(&f.starter);
    c.args(opts).arg("--").arg(&f.rank).args(rank_args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    c
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(20))
}

/// Reads the job's output until `n` ranks have printed.
fn wait_ranks(out: &mut BufReader<ChildStdout>, n: usize) -> String {
    let mut seen = String::new();
    while printed_ranks(&seen).len() < n {
        if out.read_line(&mut seen).unwrap() == 0 {
            panic!("the job ended early: {seen}");
        }
    }
    seen
}

fn finish(mut child: Child, mut out: BufReader<ChildStdout>) -> i32 {
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    child.wait().unwrap().code().unwrap_or(-1)
}

/// The checks every mode shares: 2 local ranks, two other-node entries, one local pid that
/// is not the table's rank; what was touched and what was not. (A launched job's ranks may
/// be caught before their exec: proven by descent then.)
fn check_job(a: &Acquired, decoys: &Decoys, expect_attached: bool) {
    let job = a.job();
    assert_eq!(job.len(), 5);
    for r in 0..2 {
        assert!(job.locality(r).is_local(), "rank {r}");
        let c = job.control(r);
        if expect_attached {
            assert!(matches!(c, RankControl::Attached { .. }), "rank {r}: {c:?}");
        } else {
            assert_eq!(c, &RankControl::NotAttached, "rank {r}");
        }
    }
    for r in [2, 3] {
        assert!(!job.locality(r).is_local(), "rank {r}");
        assert_eq!(job.control(r), &RankControl::Remote, "rank {r}");
    }
    // The local decoy: on this node by the table, but not this job's process (it started
    // before the starter, and runs another program).
    if expect_attached {
        assert!(
            matches!(
                job.control(4),
                RankControl::Refused {
                    reason: Refusal::StartedBefore { .. } | Refusal::OtherProgram { .. }
                }
            ),
            "{:?}",
            job.control(4)
        );
        if let RankControl::Refused { reason } = job.control(4) {
            assert!(
                reason.to_string().contains("not this job's process"),
                "{reason}"
            );
        }
    }
    let nodes: Vec<(Option<&str>, bool, usize)> = job
        .nodes()
        .iter()
        .map(|n| (n.host, n.locality.is_local(), n.ranks))
        .collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert_eq!((nodes[0].1, nodes[0].2), (true, 3));
    assert_eq!(
        nodes[1],
        (Some("far-node-1.cluster.invalid"), false, 1),
        "{nodes:?}"
    );
    assert!(decoys.touched().is_empty(), "{:?}", decoys.touched());
}

#[test]
fn launch_touches_only_this_nodes_proven_ranks() {
    let Some(f) = fixtures("nodes-launch") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 3).unwrap();
    for hold in [false, true] {
        let mut opts = vec!["-n".to_string(), "2".into()];
        opts.extend(decoy_entries(&decoys));
        let mut a = live::launch(
            starter_command(&f, &opts, &["stdin"]),
            options().with_hold(hold),
        )
        .unwrap();
        let mut child = a.take_child().unwrap();
        check_job(&a, &decoys, true);
        assert_eq!(a.is_held(), hold);
        let ranks: Vec<u32> = a.job().attached_pids();
        assert_eq!(ranks.len(), 2);
        drop(a);
        for p in ranks.iter().chain(decoys.pids().iter()) {
            assert_untouched(*p);
        }
        let out = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(finish(child, out), 0);
        assert!(decoys.touched().is_empty(), "{:?}", decoys.touched());
    }
}

#[test]
fn attach_reads_without_touching_and_holds_only_proven_ranks() {
    let Some(f) = fixtures("nodes-attach") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 3).unwrap();
    for hold in [false, true] {
        let mut opts = vec!["-n".to_string(), "2".into()];
        opts.extend(decoy_entries(&decoys));
        let mut child = starter_command(&f, &opts, &["stdin"]).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        wait_ranks(&mut out, 2);
        wait_spawned(child.id());
        let a = live::attach(child.id(), options().with_hold(hold)).unwrap();
        check_job(&a, &decoys, hold);
        if !hold {
            // Reading a running job touches no rank at all.
            assert!(a.job().attached_pids().is_empty());
        }
        let ranks: Vec<u32> = a.job().ranks().take(2).map(|r| r.pid as u32).collect();
        drop(a);
        for p in ranks.iter().chain(decoys.pids().iter()) {
            assert_untouched(*p);
        }
        assert_untouched(child.id());
        assert_eq!(finish(child, out), 0);
    }
    assert!(decoys.touched().is_empty(), "{:?}", decoys.touched());
}

#[test]
fn a_caller_alias_makes_a_far_node_local_and_its_decoy_is_still_refused() {
    let Some(f) = fixtures("nodes-alias") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 3).unwrap();
    let mut opts = vec!["-n".to_string(), "2".into()];
    opts.extend(decoy_entries(&decoys));
    let mut child = starter_command(&f, &opts, &["stdin"]).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 2);
    wait_spawned(child.id());
    // The caller says far-node-2 is this node: its entry becomes a candidate, and the proof
    // (it runs the decoy, not the rank program) still refuses it.
    let a = live::attach(
        child.id(),
        options().with_hold(true).with_alias("FAR-NODE-2."),
    )
    .unwrap();
    let job = a.job();
    assert!(job.locality(3).is_local());
    assert!(
        matches!(
            job.control(3),
            RankControl::Refused {
                reason: Refusal::StartedBefore { .. } | Refusal::OtherProgram { .. }
            }
        ),
        "{:?}",
        job.control(3)
    );
    assert_eq!(job.control(2), &RankControl::Remote);
    drop(a);
    assert_eq!(finish(child, out), 0);
    assert!(decoys.touched().is_empty(), "{:?}", decoys.touched());
}

#[test]
fn forked_ranks_that_never_exec_are_proven_and_never_waited_for() {
    let Some(f) = fixtures("nodes-forked") else {
        return;
    };
    // Attach mode, holding: the ranks run the starter's image, which the table names.
    let opts = vec!["-F".to_string(), "-n".into(), "3".into()];
    let mut child = starter_command(&f, &opts, &["stdin"]).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = wait_ranks(&mut out, 3);
    let started = Instant::now();
    let a = live::attach(child.id(), options().with_hold(true)).unwrap();
    let took = started.elapsed();
    let job = a.job();
    for r in 0..3 {
        assert!(
            matches!(
                job.control(r),
                RankControl::Attached {
                    proven: Proven::InProgram,
                    ..
                }
            ),
            "rank {r}: {:?}",
            job.control(r)
        );
    }
    let pids: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(pids, printed_ranks(&seen));
    // Nothing waited for an exec that never comes (the ranks live until stdin closes).
    assert!(took < Duration::from_secs(10), "took {took:?}");
    drop(a);
    for (_, p) in &pids {
        assert_untouched(*p as u32);
    }
    assert_eq!(finish(child, out), 0);

    // Launch mode, holding.
    let mut a = live::launch(
        starter_command(&f, &opts, &["stdin"]),
        options().with_hold(true),
    )
    .unwrap();
    let child = a.take_child().unwrap();
    assert_eq!(a.job().attached_pids().len(), 3);
    assert!(
        a.job()
            .attached()
            .iter()
            .all(|&(_, _, p)| p == Proven::InProgram)
    );
    let pids = a.job().attached_pids();
    drop(a);
    for p in pids {
        assert_untouched(p);
    }
    let mut child = child;
    let out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(finish(child, out), 0);
}

#[test]
fn ranks_listed_before_their_exec_are_proven_by_descent() {
    let Some(f) = fixtures("nodes-late") else {
        return;
    };
    // -e: each rank waits 300 ms between fork and exec, so the table lists the starter's
    // image for them; they are the starter's children, so proven as caught before the exec.
    let opts = vec!["-e".to_string(), "-n".into(), "2".into()];
    let mut a = live::launch(
        starter_command(&f, &opts, &["stdin"]),
        options().with_hold(true),
    )
    .unwrap();
    let mut child = a.take_child().unwrap();
    let proofs: Vec<Proven> = a.job().attached().iter().map(|&(_, _, p)| p).collect();
    assert_eq!(proofs, [Proven::BeforeExec, Proven::BeforeExec]);
    // Held in their own program (run to its entry point), so their own image is mapped.
    for pid in a.job().attached_pids() {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe, f.rank.canonicalize().unwrap(), "pid {pid}");
    }
    let pids = a.job().attached_pids();
    drop(a);
    for p in pids {
        assert_untouched(p);
    }
    let out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(finish(child, out), 0);
}

#[test]
fn reserved_duplicate_and_oddly_spelled_entries() {
    let Some(f) = fixtures("nodes-odd") else {
        return;
    };
    // The ranks' host as the kernel's name in capitals with DNS's trailing dot: still this
    // node. Extra entries on this node: pid 1, this test's own pid (the tool), the starter
    // itself, and rank 0's pid again.
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let shouted = format!("{}.", hostname.trim().to_ascii_uppercase());
    let me = std::process::id();
    let opts: Vec<String> = [
        "-n",
        "2",
        "-H",
        &shouted,
        "-R",
        "=:1",
        "-R",
        &format!("=:{me}"),
        "-R",
        "=:self",
        "-R",
        "=:rank0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut child = starter_command(&f, &opts, &["stdin"]).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 2);
    wait_spawned(child.id());
    let a = live::attach(child.id(), options().with_hold(true)).unwrap();
    let job = a.job();
    assert_eq!(job.len(), 6);
    assert_eq!(job.nodes().len(), 1, "{:?}", job.nodes());
    for r in 0..2 {
        assert!(
            matches!(job.control(r), RankControl::Attached { .. }),
            "rank {r}: {:?}",
            job.control(r)
        );
    }
    assert_eq!(
        job.control(2),
        &RankControl::Refused {
            reason: Refusal::Reserved {
                pid: 1,
                what: "init"
            }
        }
    );
    assert_eq!(
        job.control(3),
        &RankControl::Refused {
            reason: Refusal::Reserved {
                pid: me,
                what: "this tool"
            }
        }
    );
    // The starter is held as the starter, never attached a second time as a rank.
    assert_eq!(job.control(4), &RankControl::NotAttached);
    assert!(
        job.notes
            .iter()
            .any(|n| matches!(n, Note::RankIsStarter { rank: 4, .. })),
        "{:?}",
        job.notes
    );
    let rank0 = job.ranks().next().unwrap().pid as u32;
    assert_eq!(
        job.control(5),
        &RankControl::Refused {
            reason: Refusal::Duplicate {
                pid: rank0,
                first: 0
            }
        }
    );
    assert_eq!(job.attached_pids().len(), 2);
    drop(a);
    assert_untouched(child.id());
    assert_untouched(1);
    assert_eq!(finish(child, out), 0);
}
