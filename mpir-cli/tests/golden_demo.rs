//! Golden test of `mpir demo --json` against `tests/golden/demo.json`.
//!
//! How the golden file was made and checked: it was written by hand from what the demo job's C
//! sources say — `demo/rank.c` (four ranks: ranks 0–2 each post a receive from the next of the
//! three, tag 7, 16 ints, on "demo-ring" (context id 3 << 4 = 48): a ring nobody sends to;
//! rank 3 posts an `MPI_ANY_SOURCE` receive of 8 doubles tag 42 and a send of 262144 doubles
//! to rank 0 tag 99 on demo-ring, and holds an unexpected 16-byte message from rank 1 tag 5
//! on `MPI_COMM_WORLD` (no buffer: address 0); the communicators as `MPI_Init` and
//! `MPI_Comm_dup` leave them on `MPIR_All_communicators`, newest first, `MPI_COMM_SELF`
//! without a group) and `demo/starter.c` (only `MPIR_i_am_starter`, = 1, of the flags) — and
//! the deadlock part from the analysis's definitions in docs/cli-json.md (the ring is the one
//! cycle, rank 3 is blocked by it, its wildcard receive has ranks 0–2 as candidates). Then it
//! was compared with the tool's output; no difference was taken over without being traced to
//! the sources. The first hand-written version differed in five places, each corrected after
//! checking it: communicators come in creation order (WORLD, SELF, ICOMM, demo-ring: the walker
//! lists `MPIR_All_communicators` oldest first); `MPI_COMM_SELF`'s group is the rank itself
//! (a one-member communicator, though rank.c leaves the group pointer NULL); every rank notes
//! that rank.c defines no `MPIR_Datatype_direct` (so lengths are in elements only); the send
//! has `actual` (docs/cli-json.md: sends carry their matched peer and tag); the unexpected
//! message has no length (its debug-queue entry has count 0 — rank.c puts the 16 bytes in the
//! request's status only) and sits in a system buffer (an eager message, not a rendezvous
//! header). The stack facts of the deadlock part (issue 18) come from rank.c's step 4: ranks
//! 0–2 are blocked in its `MPI_Recv` (a point-to-point call) called from `main` at rank.c:265,
//! rank 3 in its `MPI_Waitall` (a completion) at rank.c:268, one thread each. Only
//! run-specific values are normalised: pids and thread ids, this machine's host name and
//! facts, directories of the programs and sources, offsets of code in its module, and target
//! addresses (checked to be hex first; the null address of the unexpected message is kept). `cli_on_demo.rs` compares `mpir queues`
//! and `mpir deadlock` on a running demo job with the same golden document's parts.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use serde_json::Value;

#[test]
fn the_demo_document_is_what_the_demo_sources_say() {
    let out = common::mpir().args(["demo", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut doc = common::json_doc(&out);
    // The same processes in the job and in the queues, before the pids are normalised.
    let pids = |v: &Value| -> Vec<Value> {
        v["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["pid"].clone())
            .collect()
    };
    assert_eq!(pids(&doc["job"]), pids(&doc["queues"]));
    common::normalise(&mut doc);
    let golden = common::golden_demo();
    if doc != golden {
        panic!(
            "mpir demo --json differs from tests/golden/demo.json; normalised output:\n{}",
            serde_json::to_string_pretty(&doc).unwrap()
        );
    }
}
