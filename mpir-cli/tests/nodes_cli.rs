//! `mpir` on tables shaped like multi-node jobs: the fake starter lists this node's two ranks
//! plus entries for "other nodes" whose pids are real local processes that are no rank
//! (decoys that record any tracer or stop), and one entry on this node whose pid is such a
//! process. `attach`, `launch`, `queues` and `deadlock` must never touch a decoy; the JSON
//! says which node each rank is on and why a rank was left alone.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

mod common;

use common::{Fixtures, fixtures, mpir};
use mpir_target::testkit::{Decoys, assert_untouched, run, skip};
use serde_json::Value;

/// The starter's arguments: two ranks here, decoys 0 and 1 on other nodes, decoy 2 here.
fn job_args(d: &Decoys) -> Vec<String> {
    let p = d.pids();
    vec![
        "-n".into(),
        "2".into(),
        "-R".into(),
        format!("far-node-1.cluster.invalid:{}", p[0]),
        "-R".into(),
        format!("far-node-2:{}", p[1]),
        "-R".into(),
        format!("=:{}", p[2]),
    ]
}

/// A running job of the fake starter (ranks wait for stdin to close).
struct Running {
    child: Child,
    _out: BufReader<ChildStdout>,
}

impl Running {
    fn start(f: &Fixtures, d: &Decoys) -> Running {
        let mut child = Command::new(&f.starter)
            .args(job_args(d))
            .arg("--")
            .arg(&f.rank)
            .arg("stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        while seen.matches("rank ").count() < 2 {
            assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
        }
        Running { child, _out: out }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn json(o: &std::process::Output) -> Value {
    common::json_doc(o)
}

fn controls(doc: &Value) -> Vec<String> {
    doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["control"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn attach_json_says_which_node_each_rank_is_on_and_touches_none() {
    let Some(f) = fixtures("cli-nodes-attach") else {
        return;
    };
    let Some(decoys) = Decoys::start(&f.dir, 3) else {
        return;
    };
    let job = Running::start(&f, &decoys);
    let o = mpir()
        .args(["attach", "--json", &job.pid()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&o);
    let local: Vec<Value> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["local"].clone())
        .collect();
    assert_eq!(
        local,
        [true, true, false, false, true].map(Value::Bool),
        "{doc:#}"
    );
    assert_eq!(
        controls(&doc),
        [
            "not_attached",
            "not_attached",
            "remote",
            "remote",
            "not_attached"
        ]
    );
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{doc:#}");
    assert_eq!(nodes[0]["ranks"], 3);
    assert_eq!(nodes[1]["host"], "far-node-1.cluster.invalid");
    assert_eq!(nodes[1]["local"], false);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert!(
        doc["this_node"]["names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str() == Some(&hostname.trim().to_ascii_lowercase())),
        "{doc:#}"
    );
    assert_eq!(doc["starter"]["debug_state"]["name"], "spawned");

    // An alias from the caller: far-node-2 is this node; attach still touches nothing.
    let o = mpir()
        .args(["attach", "--json", "--this-node", "far-node-2", &job.pid()])
        .output()
        .unwrap();
    let doc = json(&o);
    assert_eq!(doc["ranks"][3]["local"], true);
    assert_eq!(doc["ranks"][3]["control"], "not_attached");
    assert_eq!(doc["this_node"]["aliases"][0], "far-node-2");
    decoys.assert_untouched();
}

#[test]
fn launch_holds_only_proven_ranks_and_says_why_the_others_were_left() {
    let Some(f) = fixtures("cli-nodes-launch") else {
        return;
    };
    let Some(decoys) = Decoys::start(&f.dir, 3) else {
        return;
    };
    let o = mpir()
        .args(["launch", "--json", "--"])
        .arg(&f.starter)
        .args(job_args(&decoys))
        .arg("--")
        .arg(&f.rank)
        .arg("linger")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&o);
    let c = controls(&doc);
    assert_eq!(
        &c[..4],
        ["attached", "attached", "remote", "remote"],
        "{doc:#}"
    );
    assert!(
        c[4].starts_with("refused: not this job's process"),
        "{doc:#}"
    );
    decoys.assert_untouched();
}

#[test]
fn queues_and_deadlock_never_reach_other_nodes_pids() {
    let Some(f) = fixtures("cli-nodes-queues") else {
        return;
    };
    let Some(decoys) = Decoys::start(&f.dir, 3) else {
        return;
    };
    let job = Running::start(&f, &decoys);
    for cmd in ["queues", "deadlock"] {
        let o = mpir()
            .args([cmd, "--json", "--starter", &job.pid()])
            .output()
            .unwrap();
        // The fake ranks have no MPI: nothing can be read, which is not what is checked here.
        let text = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd}: {text}{err}");
        decoys.assert_untouched();
    }
    assert_untouched(job.child.id());
}

#[test]
fn an_mpi2dd_job_reports_its_mpi_flags_in_the_flags_shape() {
    // mpir-acquire's `both` fixture, MPI2DD only: its mpi_flags are I_AM_METADIR | I_AM_DIR |
    // I_AM_STARTER.
    let Some(f) = fixtures("cli-mpi2dd-flags") else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let provider = root.join("mpi2dd/provider");
    let both = f.dir.join("both");
    if let Err(e) = run(Command::new("cc")
        .arg(format!("-I{}", provider.display()))
        .args(["-g", "-DNO_MPIR"])
        .arg(provider.join("mpi2dd_provider.c"))
        .arg(root.join("mpir-acquire/tests/fixtures/both.c"))
        .arg("-o")
        .arg(&both))
    {
        return skip(&e);
    }
    let mut child = Command::new(&both)
        .arg("2")
        .arg(&f.rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("ready") {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    let o = mpir()
        .args(["attach", "--json", &child.id().to_string()])
        .output()
        .unwrap();
    drop(child.stdin.take());
    let _ = child.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&o);
    assert_eq!(doc["interface"], "mpi2dd", "{doc:#}");
    assert_eq!(doc["flags"]["i_am_starter"]["present"], true, "{doc:#}");
    assert_eq!(doc["flags"]["i_am_starter"]["value"], 1);
    for absent in [
        "partial_attach_ok",
        "force_to_main",
        "acquired_pre_main",
        "ignore_queues",
    ] {
        assert_eq!(doc["flags"][absent]["present"], false, "{absent}");
    }
    assert_eq!(doc["ranks"][0]["local"], true, "{doc:#}");
}

#[test]
fn rank_lists_and_ranges_select_what_is_held() {
    let Some(f) = fixtures("cli-ranks") else {
        return;
    };
    // Launch: the starter allows partial attach, so only the selection is attached.
    let o = mpir()
        .args(["launch", "--json", "--ranks", "0,2-", "--"])
        .arg(&f.starter)
        .args(["-n", "4", "--"])
        .arg(&f.rank)
        .arg("linger")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        controls(&json(&o)),
        ["attached", "not_attached", "attached", "attached"]
    );
    // A bad list is refused before anything runs, naming the piece.
    for (list, piece) in [("3-1", "3-1"), ("0,,2", "\"\""), ("x", "\"x\"")] {
        let o = mpir()
            .args(["launch", "--ranks", list, "--", "/bin/true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{list}: {err}");
        assert!(err.contains(piece), "{list}: {err}");
    }
    // queues and deadlock: --ranks needs --starter.
    let o = mpir()
        .args(["queues", "--pid", "1", "--ranks", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
