//! `mpir demo`: the README's main command. It launches the bundled demo job (built by this
//! crate's build script from mpir-demo/demo), prints the job, the queues and the deadlock, and
//! leaves nothing running. The expected values come from mpir-demo/demo/rank.c.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use serde_json::Value;

mod common;
use common::mpir;

fn gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z')),
    }
}

fn demo(args: &[&str]) -> Value {
    let out = mpir()
        .arg("demo")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = common::json_doc(&out);
    assert_eq!(doc["schema"], "mpir.demo/4");
    assert!(doc["demo"].as_str().unwrap().contains("demo job"));
    // Nothing left: every rank and the starter are gone.
    assert_eq!(doc["left_running"], serde_json::json!([]));
    for r in doc["job"]["ranks"].as_array().unwrap() {
        assert!(gone(r["pid"].as_u64().unwrap()), "rank left running: {r}");
    }
    assert!(gone(doc["job"]["starter"]["pid"].as_u64().unwrap()));
    doc
}

#[test]
fn the_demo_shows_the_job_the_queues_and_the_deadlock() {
    let doc = demo(&[]);
    let ranks = doc["job"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for r in ranks {
        assert_eq!(r["control"], "attached", "{r}");
        assert!(
            r["executable"]
                .as_str()
                .unwrap()
                .ends_with("mpir-demo-rank")
        );
    }
    // rank.c: ranks 0-2 receive from the next of the three, tag 7, on "demo-ring".
    let q = &doc["queues"];
    assert!(q["engine"].as_str().unwrap().contains("native"), "{q:#}");
    for r in 0..3u64 {
        let rank = q["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["rank"] == r)
            .unwrap();
        let ring = rank["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "demo-ring")
            .unwrap();
        let ops = ring["operations"].as_array().unwrap();
        assert_eq!(ops.len(), 1, "{ring:#}");
        assert_eq!(ops[0]["class"], "receive");
        assert_eq!(ops[0]["peer_local"], (r + 1) % 3);
        assert_eq!(ops[0]["tag"], 7);
        let icomm = rank["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "MPI_ICOMM_WORLD")
            .unwrap();
        assert_eq!(icomm["origin"], "internal");
    }
    // The deadlock, confirmed over samples; rank 3 (wildcard receive, send to 0) blocked by it.
    let d = &doc["deadlock"];
    assert_eq!(d["verdict"], "deadlock", "{d:#}");
    assert_eq!(d["cycles"].as_array().unwrap().len(), 1);
    assert_eq!(d["cycles"][0]["ranks"], serde_json::json!([0, 1, 2]));
    assert_eq!(d["cycles"][0]["communicators"][0]["name"], "demo-ring");
    assert_eq!(d["blocked"][0]["rank"], 3);
}

#[test]
fn two_ranks_make_no_cycle() {
    let doc = demo(&["-n", "2"]);
    assert_eq!(doc["job"]["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(
        doc["deadlock"]["verdict"], "no_cycle",
        "{:#}",
        doc["deadlock"]
    );
}

#[test]
fn the_table_says_it_is_the_demo_and_that_nothing_is_left() {
    let out = mpir().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("This is mpir-rs's bundled DEMO job"),
        "{text}"
    );
    assert!(text.contains("deadlock: 1 cycle"), "{text}");
    assert!(text.contains("cycle 1: ranks 0 1 2"), "{text}");
    assert!(text.contains("nothing is left running"), "{text}");
}
