//! A synthetic job's documents (`mpir.job/1`, `mpir.stacks/2`, `mpir.deadlock/4`) of any size,
//! shaped as `mpir` writes them (the tests validate them against `docs/schema`), for the
//! report's scale tests and benchmark, and with chosen names for its injection tests.
//!
//! The job: `ranks` ranks on nodes of 64; ranks 0-2 deadlock in a ring of `MPI_Recv`; every
//! other rank waits in `MPI_Waitall` for the rank before it (blocked by the cycle), under one
//! of 64 solver phases (rank % 64), so the merged tree has about 200 nodes and 65
//! equivalence classes.

use serde_json::{Value, json};

/// Strings from "target memory" the documents carry: a test puts hostile ones here.
#[derive(Debug, Clone)]
pub struct Names {
    /// A function on the path of rank 3's phase (ranks 3, 67, 131…).
    pub function: String,
    /// The source file of that function.
    pub file: String,
    /// The module (shared object path) of the cycle's innermost frame.
    pub module: String,
    /// The first node's host name.
    pub host: String,
    /// The communicator of every operation.
    pub comm: String,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            function: "exchange_halo".into(),
            file: "/src/app/solver.c".into(),
            module: "/usr/lib/x86_64-linux-gnu/libucp.so.0".into(),
            host: "node000".into(),
            comm: "MPI_COMM_WORLD".into(),
        }
    }
}

/// Ranks per node.
const PER_NODE: u64 = 64;
/// Solver phases (classes besides the cycle's).
const PHASES: u64 = 64;
/// The phase whose function and file are [`Names::function`] and [`Names::file`].
const NAMED_PHASE: u64 = 3;

fn host(names: &Names, node: u64) -> String {
    if node == 0 {
        names.host.clone()
    } else {
        format!("node{node:03}")
    }
}

/// A rank set string of sorted ranks (`0-2,5`).
fn set(ranks: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", ranks[i], ranks[j])
        } else {
            ranks[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// The job document.
pub fn job(ranks: u64, names: &Names) -> Value {
    let nodes = ranks.div_ceil(PER_NODE);
    json!({
        "schema": "mpir.job/1",
        "starter": {"pid": 4242, "image": "/usr/bin/srun", "launcher": null,
                    "debug_state": {"raw": 1, "name": "spawned"}},
        "interface": "mpir",
        "interfaces": ["mpir"],
        "flags": {
            "i_am_starter": {"present": true, "value": 1},
            "acquired_pre_main": {"present": false, "value": null},
            "force_to_main": {"present": false, "value": null},
            "partial_attach_ok": {"present": false, "value": null},
            "ignore_queues": {"present": false, "value": null}
        },
        "layout": "debug_info",
        "nodes": (0..nodes).map(|n| json!({
            "host": host(names, n), "local": n == 0,
            "ranks": PER_NODE.min(ranks - n * PER_NODE)
        })).collect::<Vec<_>>(),
        "this_node": {"names": [host(names, 0)], "addresses": ["127.0.0.1"], "aliases": []},
        "ranks": (0..ranks).map(|r| json!({
            "rank": r, "host": host(names, r / PER_NODE), "local": r < PER_NODE,
            "executable": "/home/user/app/solver", "pid": 10_000 + r,
            "control": if r < PER_NODE { "attached" } else { "remote" }
        })).collect::<Vec<_>>(),
        "problems": [],
        "notes": []
    })
}

fn node(
    parent: Option<usize>,
    kind: &str,
    function: &str,
    module: &str,
    at: Option<(&str, u64)>,
    (ranks, threads, ends): (&str, u64, &str),
) -> Value {
    json!({
        "parent": parent, "kind": kind, "function": function, "module": module,
        "file": at.map(|a| a.0), "line": at.map(|a| a.1),
        "ranks": ranks, "threads": threads, "ends": ends, "truncated": "",
        "trust": if kind == "root" { Value::Null } else { json!("cfi") }
    })
}

/// The stacks document (two samples; every rank unmoved).
pub fn stacks(ranks: u64, names: &Names) -> Value {
    assert!(ranks >= 8, "a synthetic job has 8 ranks or more");
    let all = format!("0-{}", ranks - 1);
    let app = "/home/user/app/solver";
    let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    let mpi = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
    let mut nodes = vec![
        node(None, "root", "/", "", None, (&all, ranks, "")),
        node(Some(0), "function", "_start", app, None, (&all, ranks, "")),
        node(
            Some(1),
            "function",
            "__libc_start_main",
            libc,
            None,
            (&all, ranks, ""),
        ),
        node(
            Some(2),
            "function",
            "main",
            app,
            Some(("/src/app/main.c", 88)),
            (&all, ranks, ""),
        ),
        node(Some(3), "function", "MPI_Recv", mpi, None, ("0-2", 3, "")),
        node(
            Some(4),
            "function",
            "ucp_worker_progress",
            &names.module,
            None,
            ("0-2", 3, "0-2"),
        ),
    ];
    for phase in 0..PHASES {
        let members: Vec<u64> = (3..ranks).filter(|r| r % PHASES == phase).collect();
        if members.is_empty() {
            continue;
        }
        let s = set(&members);
        let n = members.len() as u64;
        let (function, file) = if phase == NAMED_PHASE {
            (names.function.clone(), names.file.clone())
        } else {
            (
                format!("solver_phase_{phase}"),
                "/src/app/solver.c".to_string(),
            )
        };
        let p = nodes.len();
        nodes.push(node(
            Some(3),
            "function",
            &function,
            app,
            Some((&file, 200 + phase)),
            (&s, n, ""),
        ));
        nodes.push(node(
            Some(p),
            "function",
            "MPI_Waitall",
            mpi,
            None,
            (&s, n, ""),
        ));
        nodes.push(node(
            Some(p + 1),
            "function",
            "opal_progress",
            mpi,
            None,
            (&s, n, &s),
        ));
    }
    let stops: Vec<Value> = (0..2)
        .map(|_| {
            Value::Array(
                (0..ranks)
                    .map(|r| json!({"rank": r, "pid": 10_000 + r, "stopped_us": 300, "overran": false}))
                    .collect(),
            )
        })
        .collect();
    json!({
        "schema": "mpir.stacks/2",
        "source": "starter",
        "merge_key": "function",
        "view": "process",
        "limits": {"max_depth": 1024, "max_nodes": 1_000_000},
        "nodes": nodes,
        "unreached": [],
        "truncations": [],
        "cut_depth": "",
        "cut_nodes": "",
        "samples": 2,
        "interval_ms": 150,
        "unmoved": all,
        "stops": stops,
        "numbered": [],
        "python": {"versions": [], "problems": []},
        "coverage": {"ranks": ranks, "read": ranks, "complete": true}
    })
}

fn comm(names: &Names, ranks: u64) -> Value {
    json!({"name": names.comm, "context_id": 0, "size": ranks, "internal": false})
}

fn op(class: &str, peer: u64, names: &Names, ranks: u64) -> Value {
    json!({
        "class": class, "peer": {"rank": peer}, "tag": 7, "buffer": "0x7f0000001000",
        "comm": comm(names, ranks), "comm_unique_id": 4096,
        "length": {"bytes": null, "elements": 16}
    })
}

fn blocked_in(call: &str, kind: &str, function: &str, line: u64, tid: u64) -> Value {
    json!({
        "call": call, "symbol": call, "kind": kind,
        "call_site": {"function": function, "module": "/home/user/app/solver", "offset": 4096 + line,
                      "location": {"file": "/src/app/solver.c", "line": line}},
        "tid": tid, "threads_in_mpi": 1
    })
}

/// The wait-for analysis: the cycle of ranks 0-2, every other rank blocked by it.
pub fn deadlock(ranks: u64, names: &Names) -> Value {
    assert!(ranks >= 8, "a synthetic job has 8 ranks or more");
    let next = |r: u64| (r + 1) % 3;
    let chain: Vec<Value> = (0..3)
        .map(|r| {
            json!({"rank": r, "waits_for": next(r), "op": op("receive", next(r), names, ranks),
                   "blocked_in": blocked_in("MPI_Recv", "point_to_point", "main", 120, 10_000 + r)})
        })
        .collect();
    let phase_fn = |r: u64| {
        if r % PHASES == NAMED_PHASE {
            names.function.clone()
        } else {
            format!("solver_phase_{}", r % PHASES)
        }
    };
    let mut waits = Vec::new();
    let mut blocked = Vec::new();
    for r in 0..ranks {
        if r < 3 {
            waits.push(json!({
                "rank": r, "op": op("receive", next(r), names, ranks),
                "target": {"rank": {"rank": next(r)}}, "can_complete": false,
                "state": {"in_cycle": {"cycle": 0}},
                "blocked_in": blocked_in("MPI_Recv", "point_to_point", "main", 120, 10_000 + r)
            }));
        } else {
            let b = blocked_in(
                "MPI_Waitall",
                "completion",
                &phase_fn(r),
                200 + r % PHASES,
                10_000 + r,
            );
            waits.push(json!({
                "rank": r, "op": op("receive", r - 1, names, ranks),
                "target": {"rank": {"rank": r - 1}}, "can_complete": false,
                "state": "blocked_by_deadlock", "blocked_in": b
            }));
            blocked.push(json!({
                "rank": r, "waits": [op("receive", r - 1, names, ranks)],
                "waits_for": [r - 1], "blocked_in": b
            }));
        }
    }
    json!({
        "schema": "mpir.deadlock/4",
        "engine": "native MPICH debug queues",
        "unread": [],
        "coverage": {"ranks": ranks, "read": ranks, "complete": true, "stacks_only": [],
                     "not_read": [], "wait_states_not_used": []},
        "reader_notes": [],
        "verdict": "deadlock",
        "samples": 3,
        "ranks": ranks,
        "cycles": [{"ranks": [0, 1, 2], "chain": chain, "communicators": [comm(names, ranks)]}],
        "blocked": blocked,
        "waits": waits,
        "not_waiting": [],
        "collective": [],
        "stack_waits": null,
        "sources": [{"source": "queues", "ranks": format!("0-{}", ranks - 1)}],
        "notes": [],
        "notes_omitted": 0
    })
}

/// The three documents of a synthetic job of `ranks` ranks.
pub fn documents(ranks: u64, names: &Names) -> Vec<Value> {
    vec![
        job(ranks, names),
        stacks(ranks, names),
        deadlock(ranks, names),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_sets_are_compact() {
        assert_eq!(super::set(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(super::set(&[]), "");
    }
}
