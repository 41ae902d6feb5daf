//! A node that does not share the front end's file system (issue 31, point 6): on the
//! simulated cluster (`scripts/ci-multinode.sh`, `$MPIR_MULTINODE`), node4's view of the
//! directory holding the `mpir` under test is an empty file system of its own, so the agent
//! cannot be run from there. `--agent-ship` sends a static `mpir` (`$MPIR_STATIC_MPIR`, the
//! musl build `.ci/run` makes) through the `--agent-launch` command: it is checked by its
//! SHA-256 on arrival, runs from a private file that it removes as it starts, and reads
//! node4's ranks, also down a tree (an agent sends its own program on); nothing is left on the
//! nodes.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::json_doc;
use common::mn::{Job, assert_pending_tag_42_read, mpir_in_node1, text};
use mpir_acquire::testkit::multinode::Cluster;
use mpir_target::testkit::{scratch, skip};

/// The node whose view of the tool's directory is hidden.
const PRIVATE: usize = 4;

/// The static `mpir` to send, from `$MPIR_STATIC_MPIR`.
fn static_mpir() -> Option<PathBuf> {
    match std::env::var_os("MPIR_STATIC_MPIR").map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        _ => {
            skip(
                "no static mpir (MPIR_STATIC_MPIR: .ci/run builds it for x86_64-unknown-linux-musl)",
            );
            None
        }
    }
}

/// `dir` hidden in node `node` (an empty tmpfs mounted over it in the node's own mount
/// namespace) until dropped.
struct Hidden<'a> {
    cluster: &'a Cluster,
    node: usize,
    dir: PathBuf,
}

impl<'a> Hidden<'a> {
    fn new(cluster: &'a Cluster, node: usize, dir: &Path) -> Hidden<'a> {
        let mut mount = Command::new("mount");
        mount
            .args([
                "-t",
                "tmpfs",
                "-o",
                "size=1m,mode=0755",
                "mpir-test-private",
            ])
            .arg(dir);
        let o = cluster.run_in(node, &mount).output().unwrap();
        assert!(o.status.success(), "hiding {}: {}", dir.display(), text(&o));
        Hidden {
            cluster,
            node,
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for Hidden<'_> {
    fn drop(&mut self) {
        let mut umount = Command::new("umount");
        umount.arg(&self.dir);
        let _ = self.cluster.run_in(self.node, &umount).output();
    }
}

/// The sent programs' private directories left in node `node`'s `/tmp`.
fn left_in_tmp(cluster: &Cluster, node: usize) -> Vec<String> {
    let o = cluster
        .run_in(node, Command::new("ls").args(["-a", "/tmp"]))
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("mpir-agent."))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_static_mpir_sent_to_a_node_without_the_shared_path_reads_its_ranks_and_leaves_nothing() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let Some(program) = static_mpir() else {
        return;
    };
    let dir = scratch("cli-mn-ship");
    // Three nodes: with a fanout of 2 the agents form a tree, and an agent started from a
    // sent program sends its own program on to its subtree.
    let Some(mut job) = Job::start(&cluster, &dir, &[(2, 1), (3, 1), (PRIVATE, 2)]) else {
        return;
    };
    let starter = job.orterun.local_pid.to_string();
    let launch = format!("{} {{host}} {{agent}}", cluster.nsrsh().display());
    let tool_dir = PathBuf::from(common::mpir().get_program())
        .parent()
        .unwrap()
        .to_path_buf();
    let before = left_in_tmp(&cluster, PRIVATE);
    let hidden = Hidden::new(&cluster, PRIVATE, &tool_dir);

    // The node really cannot run the tool from the front end's path: its ranks are unread,
    // the agent not started; node2's are read.
    let o = mpir_in_node1(
        &cluster,
        &[
            "queues",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let doc = json_doc(&o);
    for r in doc["ranks"].as_array().unwrap() {
        let host = &job.ranks[r["rank"].as_u64().unwrap() as usize].2;
        if host == &format!("node{PRIVATE}") {
            assert_eq!(r["why"]["code"], "agent_not_started", "{r:#}");
        } else {
            assert!(r["error"].is_null(), "{r:#}");
        }
    }
    job.assert_untouched(&cluster);

    // Sent: every rank read on its node, through a tree (a subtree root sends its own program
    // on).
    let o = mpir_in_node1(
        &cluster,
        &[
            "queues",
            "--json",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
            "--agent-fanout",
            "2",
            "--agent-ship",
            &program.to_string_lossy(),
        ],
    );
    assert_pending_tag_42_read(&o, &job.ranks);
    job.assert_untouched(&cluster);
    // The sent program removed itself as it started: no private directory is left on the
    // nodes (the agents have ended with the command).
    assert_eq!(
        left_in_tmp(&cluster, PRIVATE),
        before,
        "left on node{PRIVATE}"
    );
    for node in [2, 3] {
        let left = left_in_tmp(&cluster, node);
        assert!(left.iter().all(|d| before.contains(d)), "left: {left:?}");
    }
    drop(hidden);

    // Only a static program is sent: the front end's own (dynamically linked) is refused
    // before any agent starts, with what to build.
    let own = common::mpir().get_program().to_string_lossy().into_owned();
    let o = mpir_in_node1(
        &cluster,
        &[
            "queues",
            "--starter",
            &starter,
            "--agent-launch",
            &launch,
            "--agent-fanout",
            "2",
            "--agent-ship",
            &own,
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("dynamically linked") && err.contains("musl"),
        "{}",
        text(&o)
    );
    job.assert_untouched(&cluster);
}
