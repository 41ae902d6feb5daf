//! The C API on the simulated multi-node cluster (`scripts/ci-multinode.sh`,
//! `$MPIR_MULTINODE`, issue 31): a C program inside node1 attaches to an Open MPI job whose
//! ranks all run on node2 and node3, with the agents' settings `mpir` takes
//! (`mpir_options_set_agent_program`, `_launch`, `_timeout_ms`), and gets the same queues
//! document as `mpir queues --json` run there with the same settings: every rank read on its
//! own node, nothing touched on node1. Without agents (`mpir_options_set_other_nodes(0)`, the
//! case the library had before) each rank says it runs on another node.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::process::{Command, Output, Stdio};

use common::{compile_dynamic, crate_dir, need, target_dir};
use mpir_acquire::testkit::multinode::Cluster;
use mpir_acquire::testkit::ring::Ring;
use mpir_target::testkit::{scratch, skip};
use serde_json::Value;

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `mpir` program this build made (the agents run it); `None` after a skip.
fn mpir_program() -> Option<std::path::PathBuf> {
    // The library is found in `target/<profile>/deps`; binaries are one level up.
    let dir = target_dir();
    let candidates = [dir.join("mpir"), dir.join("../mpir")];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Some(p.canonicalize().unwrap_or_else(|_| p.clone()));
    }
    skip(&format!(
        "no mpir program beside {} (cargo build -p mpir-cli, or run the workspace's tests)",
        dir.display()
    ));
    None
}

/// A queues document's ranks without what differs between two reads of the same blocked job
/// (nothing, for the ranks' own state: their pending operations are the same).
fn ranks(doc: &Value) -> Vec<Value> {
    doc["ranks"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_c_tool_reads_ranks_on_other_nodes_as_mpir_does() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    if !need("cc") {
        return;
    }
    let Some(mpir) = mpir_program() else {
        return;
    };
    let dir = scratch("capi-mn");
    let Some(mut ring) = Ring::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let (_lib, exe) = compile_dynamic(
        "cc",
        "capi-mn-tool",
        "-std=c99",
        &crate_dir().join("tests/multinode/other_nodes.c"),
    );
    let template = format!("{} {{host}} {{agent}}", cluster.nsrsh().display());
    let starter = ring.orterun.local_pid.to_string();

    let mut tool = Command::new("timeout");
    tool.args(["-s", "KILL", "180"])
        .arg(&exe)
        .arg(&starter)
        .arg(&mpir)
        .arg(&template);
    let o = cluster
        .run_in(1, &tool)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    let queues: Value =
        serde_json::from_str(lines.next().unwrap_or_default()).expect("queues JSON");
    let stacks: Value =
        serde_json::from_str(lines.next().unwrap_or_default()).expect("stacks JSON");

    // Every rank, with its own node's pid, read there: its receive from the right neighbour.
    let read = ranks(&queues);
    assert_eq!(read.len(), ring.ranks.len(), "{queues:#}");
    for (r, (rank, pid, host)) in read.iter().zip(&ring.ranks) {
        assert_eq!(r["rank"], *rank, "{r}");
        assert_eq!(r["pid"], *pid, "{r}");
        assert!(r["error"].is_null(), "rank {rank} on {host}: {r}");
        assert!(
            r.to_string().contains("\"tag\":42"),
            "rank {rank}: no pending receive with tag 42: {r}"
        );
    }
    // Stacks: every rank, none unreached, each under MPI_Recv.
    assert_eq!(
        stacks["unreached"].as_array().map_or(0, Vec::len),
        0,
        "{stacks:#}"
    );
    assert!(stacks.to_string().contains("MPI_Recv"), "{stacks:#}");

    // `mpir queues --json` with the same settings: the same ranks, field for field.
    let mut cli = Command::new("timeout");
    cli.args(["-s", "KILL", "180"]).arg(&mpir).args([
        "queues",
        "--json",
        "--agent-launch",
        &template,
        "--starter",
        &starter,
    ]);
    let o = cluster
        .run_in(1, &cli)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let by_mpir: Value = serde_json::from_slice(&o.stdout).expect("mpir's JSON");
    assert_eq!(by_mpir["schema"], queues["schema"]);
    assert_eq!(ranks(&by_mpir), read, "the C API and mpir disagree");

    // This node only: each rank is on another node, unread (nothing was done to its pid).
    let run = |program: &str| {
        let mut c = Command::new("timeout");
        c.args(["-s", "KILL", "120"])
            .arg(&exe)
            .arg(&starter)
            .arg(program)
            .arg(&template);
        cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap()
    };
    let o = run("-");
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let here: Value = serde_json::from_str(out.lines().next().unwrap_or_default()).unwrap();
    for r in ranks(&here) {
        assert!(
            r["error"].as_str().is_some_and(|e| e.contains("node")),
            "a rank on another node was not said to be there: {r}"
        );
    }
    // A program named that is no file fails the attach, naming it.
    let o = run("/nonexistent/mpir");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/nonexistent/mpir"),
        "{}",
        text(&o)
    );
    ring.assert_untouched(&cluster);
}
