//! Every `mpir` subcommand on the bundled demo job (no MPI needed): launch, attach, queues,
//! deadlock and core, in JSON, each checked against what mpir-demo/demo/rank.c builds, and each
//! leaving the job as it found it.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::process::Stdio;

use mpir_target::testkit::{assert_untouched, have, scratch, skip};
use serde_json::{Value, json};

#[path = "common/demo_paths.rs"]
mod demo_paths;
use demo_paths::demo;

mod common;
use common::mpir;

fn json_of(args: &[&str]) -> (i32, Value) {
    let out = mpir().args(args).output().unwrap();
    let v = common::json_doc(&out);
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn launch_lists_the_demo_ranks_and_the_job_ends_by_itself() {
    let path = demo_paths::starter().unwrap_or_else(|e| panic!("{e}"));
    let out = mpir()
        .args(["launch", "--json", "--"])
        .arg(path)
        .args(["-n", "3", "--lifetime", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = common::json_doc(&out);
    assert_eq!(v["schema"], "mpir.job/1");
    assert_eq!(v["layout"], "debug_info");
    assert_eq!(v["flags"]["partial_attach_ok"]["present"], false);
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    // The job's own output (on stderr with --json): every rank got past its gate.
    let err = String::from_utf8_lossy(&out.stderr);
    for r in ranks {
        assert_eq!(r["control"], "attached");
        assert!(err.contains(&format!("pid {} ready", r["pid"])), "{err}");
    }
}

#[test]
fn attach_queues_deadlock_and_core_on_a_running_demo_job() {
    let job = demo(4);
    let starter = job.starter.id().to_string();

    let (code, v) = json_of(&["attach", "--json", &starter]);
    assert_eq!(code, 0, "{v:#}");
    // The table lists every rank (ranks say "ready" in any order).
    let mut pids: Vec<u64> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    pids.sort_unstable();
    let mut ready: Vec<u64> = job.ranks.iter().map(|&p| u64::from(p)).collect();
    ready.sort_unstable();
    assert_eq!(pids, ready);

    let (code, q) = json_of(&["queues", "--json", "--starter", &starter]);
    assert_eq!(code, 0, "{q:#}");
    assert!(
        q["engine"]
            .as_str()
            .unwrap()
            .contains("native MPICH debug queues")
    );
    // rank.c: rank 3 has a wildcard receive (tag 42) and a send to 0 (tag 99) on demo-ring,
    // and an unexpected message from 1 (tag 5) on MPI_COMM_WORLD.
    let rank3 = q["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 3)
        .unwrap();
    let ops = |name: &str| -> Vec<Value> {
        rank3["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["operations"]
            .as_array()
            .unwrap()
            .clone()
    };
    let ring = ops("demo-ring");
    assert!(
        ring.iter()
            .any(|o| o["class"] == "receive" && o["any_source"] == true && o["tag"] == 42)
    );
    assert!(
        ring.iter()
            .any(|o| o["class"] == "send" && o["peer_local"] == 0 && o["tag"] == 99)
    );
    let world = ops("MPI_COMM_WORLD");
    assert!(
        world
            .iter()
            .any(|o| o["class"] == "unexpected" && o["peer_local"] == 1 && o["tag"] == 5)
    );

    let (code, d) = json_of(&["deadlock", "--json", "--starter", &starter]);
    assert_eq!(code, 3, "{d:#}");
    assert_eq!(d["cycles"][0]["ranks"], json!([0, 1, 2]));

    // Both documents, normalised, are the golden demo document's (same job, same analysis).
    let golden = common::golden_demo();
    for (mut doc, part) in [(q, "queues"), (d, "deadlock")] {
        common::normalise(&mut doc);
        assert!(
            doc == golden[part],
            "mpir {part} on the demo job differs from tests/golden/demo.json's {part}:\n{doc:#}"
        );
    }

    let out = mpir()
        .args(["deadlock", "--dot", "--samples", "1", "--starter", &starter])
        .output()
        .unwrap();
    let dot = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3));
    assert!(dot.starts_with("digraph"), "{dot}");
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        assert!(
            dot.lines()
                .any(|l| l.contains(&format!("\"r{a}\" -> \"r{b}\""))),
            "no edge {a} -> {b}: {dot}"
        );
    }

    for &pid in job.ranks.iter().chain([job.starter.id()].iter()) {
        assert_untouched(pid);
    }

    // Cores of the starter and the ranks: the job, the queues and the (potential) deadlock.
    if !have("gcore") {
        skip("no gcore (gdb)");
        return;
    }
    let dir = scratch("cli-demo-core");
    let all: Vec<u32> = [job.starter.id()]
        .iter()
        .chain(&job.ranks)
        .copied()
        .collect();
    let cores = mpir_target::testkit::gcore(&dir, &all).unwrap_or_else(|e| panic!("{e}"));
    let out = mpir()
        .args(["core", "--json"])
        .args(&cores)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = common::json_doc(&out);
    assert_eq!(c["job"]["ranks"].as_array().unwrap().len(), 4);
    assert_eq!(c["ranks"].as_array().unwrap().len(), 4);
    assert_eq!(c["deadlock"]["verdict"], "potential_deadlock");
    assert_eq!(c["deadlock"]["cycles"][0]["ranks"], json!([0, 1, 2]));
}
