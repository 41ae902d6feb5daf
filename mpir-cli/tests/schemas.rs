//! The schemas of docs/schema are strict enough to catch what they are for: a hand-written
//! document of each kind with one field of the wrong type or an unknown field is rejected
//! (the CLI tests validate every document they read: see `common::json_doc`).

mod common;

use serde_json::{Value, json};

fn rejects(doc: &Value) -> bool {
    std::panic::catch_unwind(|| common::validate(doc)).is_err()
}

fn queues_doc(buffer: Value) -> Value {
    json!({
        "schema": "mpir.queues/1", "engine": "native MPICH ch3", "notes": [],
        "ranks": [{ "rank": 0, "pid": 10, "error": null, "notes": [], "communicators": [{
            "name": "MPI_COMM_WORLD", "id": 1, "context_id": 0, "origin": "predefined",
            "size": 2, "local_rank": 0, "group": [0, 1], "missing": [],
            "operations": [{ "class": "receive", "status": "pending", "peer_local": 1,
                "any_source": false, "peer_global": 1, "tag": 3, "any_tag": false,
                "length_bytes": 4, "length_elements": null, "buffer": buffer,
                "system_buffer": false, "actual": null, "extra_text": [] }] }] }]
    })
}

#[test]
fn addresses_must_be_hex_strings() {
    common::validate(&queues_doc(json!("0x7ffd82250590")));
    assert!(rejects(&queues_doc(json!(140_737_488_355_328_u64))));
    assert!(rejects(&queues_doc(json!("140737488355328"))));
    assert!(rejects(&queues_doc(json!("0X7FFD"))));
}

#[test]
fn unknown_fields_and_kinds_are_refused() {
    let mut doc = queues_doc(json!("0x10"));
    doc["ranks"][0]["communicators"][0]["extra"] = json!(1);
    assert!(rejects(&doc));
    assert!(rejects(&json!({ "schema": "mpir.deadlock/1" })));
    assert!(rejects(&json!({ "schema": "mpir.nothing/1" })));
}

#[test]
fn a_deadlock_document_without_verdict_needs_its_error() {
    let doc = |verdict: &str, error: Option<&str>| {
        let mut d = json!({
            "schema": "mpir.deadlock/4", "engine": "none", "unread": [],
            "coverage": { "ranks": 2, "read": 0, "complete": false, "stacks_only": [], "wait_states_not_used": [], "not_read": [
                { "rank": 0, "pid": 5, "reason": "gone" }, { "rank": 1, "pid": 6, "reason": "gone" }] },
            "reader_notes": [], "verdict": verdict, "samples": 3, "ranks": 0,
            "cycles": [], "blocked": [], "waits": [], "not_waiting": [], "collective": [],
            "stack_waits": null, "sources": [], "notes": [], "notes_omitted": 0
        });
        if let Some(e) = error {
            d["error"] = json!(e);
        }
        d
    };
    common::validate(&doc("unknown", Some("no rank's queues could be read")));
    assert!(rejects(&doc("unknown", None)));
    assert!(rejects(&doc("no_cycle", Some("an error beside a verdict"))));
}

#[test]
fn a_stacks_document_is_the_tree_plus_its_envelope() {
    let doc = json!({
        "schema": "mpir.stacks/2", "source": "pids", "merge_key": "function", "view": "process",
        "limits": { "max_depth": 1024, "max_nodes": 1000000 },
        "nodes": [
            { "parent": null, "kind": "root", "function": "/", "module": "", "file": null,
              "line": null, "ranks": "0-1", "threads": 2, "ends": "", "truncated": "",
              "trust": null },
            { "parent": 0, "kind": "function", "function": "main", "module": "/bin/app",
              "file": null, "line": null, "ranks": "0-1", "threads": 2, "ends": "",
              "truncated": "", "trust": "cfi" },
            { "parent": 1, "kind": "python", "function": "Ring.step", "module": "ring.py",
              "file": "ring.py", "line": 12, "ranks": "0-1", "threads": 2, "ends": "0-1",
              "truncated": "", "trust": "cfi" }
        ],
        "unreached": [{ "rank": 2, "reason": "exited", "text": "process exited",
                        "why": { "code": "exited", "text": "the process exited" } },
                      { "rank": 3, "reason": { "other": "remote" }, "text": "remote",
                        "why": { "code": "remote", "text": "on another node (n3): not read from here",
                                 "host": "n3" } }],
        "truncations": [], "cut_depth": "", "cut_nodes": "", "samples": 2, "interval_ms": 150,
        "unmoved": "0-1",
        "stops": [[{ "rank": 0, "pid": 10, "stopped_us": 120, "overran": false }], []],
        "numbered": [{ "rank": 0, "pid": 10 }],
        "python": { "versions": [{ "version": "3.11", "ranks": "0-1" }],
                    "problems": [{ "text": "the frame chain loops", "ranks": "1" }] },
        "coverage": { "ranks": 4, "read": 2, "complete": false }
    });
    common::validate(&doc);
    let mut bad = doc.clone();
    bad["python"]["versions"][0]["ranks"] = json!(3);
    assert!(rejects(&bad));
    let mut bad = doc.clone();
    bad["nodes"][2]["kind"] = json!("perl");
    assert!(rejects(&bad));
    let mut bad = doc.clone();
    bad["nodes"][1]["ranks"] = json!([0, 1]);
    assert!(rejects(&bad));
    let mut bad = doc.clone();
    bad["unreached"][0]["reason"] = json!("gone");
    assert!(rejects(&bad));
    let mut bad = doc;
    bad["stops"][0][0]["stopped_ms"] = json!(1);
    assert!(rejects(&bad));
}
