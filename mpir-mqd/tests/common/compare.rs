//! Field-by-field comparison of a native walk with a DLL's answer for the same process.

use mpir_mqd::{CommunicatorQueues, Queue};
use mpir_types::mqd::{OpClass, Operation, Peer};

/// How the DLL under comparison is known to differ from the truth (each rule is a documented
/// gap of that DLL, not a tolerance).
#[derive(Clone, Copy)]
pub struct DllGaps {
    /// MPICH's DLL names unnamed communicators "--unnamed--".
    pub unnamed: Option<&'static str>,
    /// The DLL gives no global ranks (MPICH's: -1 everywhere, no groups).
    pub no_global_ranks: bool,
    /// The DLL reports placeholders for unexpected messages (MPICH's: the empty user buffer
    /// and count 0) instead of the message's size.
    pub unexpected_placeholders: bool,
    /// The DLL has no unexpected queue (Open MPI's: `mqs_no_information`).
    pub no_unexpected: bool,
    /// The DLL copies a send's local rank into its actual global rank (Open MPI's).
    pub send_actual_global_is_local: bool,
}

fn global_of(group: Option<&[Option<u64>]>, p: Peer) -> Option<u64> {
    match p {
        Peer::Rank(r) => group.and_then(|g| g.get(r as usize)).copied().flatten(),
        _ => None,
    }
}

fn compare_op(d: &Operation, n: &Operation, group: Option<&[Option<u64>]>, g: DllGaps, at: &str) {
    assert_eq!(d.class, n.class, "{at}: class");
    assert_eq!(d.status, n.status, "{at}: status");
    assert_eq!(d.peer_local, n.peer_local, "{at}: peer_local");
    assert_eq!(d.tag, n.tag, "{at}: tag");
    if g.no_global_ranks {
        assert_eq!(d.peer_global, None, "{at}: the DLL has no global ranks");
        assert_eq!(
            n.peer_global,
            global_of(group, n.peer_local),
            "{at}: native peer_global"
        );
        assert!(
            n.peer_global.is_some() || n.peer_local == Peer::Any,
            "{at}: native global rank of {:?} resolved",
            n.peer_local
        );
    } else {
        assert_eq!(d.peer_global, n.peer_global, "{at}: peer_global");
    }
    let placeholders = g.unexpected_placeholders && n.class == OpClass::Unexpected;
    if placeholders {
        assert_eq!(
            (d.buffer, d.length.elements),
            (0, Some(0)),
            "{at}: DLL placeholders"
        );
        // Eager data sits in a system buffer; a rendezvous header has no data yet.
        assert_eq!(
            n.system_buffer,
            n.buffer != 0,
            "{at}: system_buffer says whether the data is here"
        );
    } else {
        assert_eq!(d.buffer, n.buffer, "{at}: buffer");
        assert_eq!(d.system_buffer, n.system_buffer, "{at}: system_buffer");
        if d.length.elements.is_some() {
            assert_eq!(
                d.length.elements, n.length.elements,
                "{at}: length (elements)"
            );
        }
        if d.length.bytes.is_some() {
            assert_eq!(d.length.bytes, n.length.bytes, "{at}: length (bytes)");
        }
    }
    match (&d.actual, &n.actual) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            assert_eq!(a.local_rank, b.local_rank, "{at}: actual local rank");
            assert_eq!(a.tag, b.tag, "{at}: actual tag");
            if !placeholders {
                if a.length.elements.is_some() {
                    assert_eq!(a.length.elements, b.length.elements, "{at}: actual length");
                }
                if a.length.bytes.is_some() {
                    assert_eq!(a.length.bytes, b.length.bytes, "{at}: actual length");
                }
            }
            let want_global = b.local_rank.and_then(|r| global_of(group, Peer::Rank(r)));
            if g.no_global_ranks {
                assert_eq!(a.global_rank, None, "{at}: the DLL has no global ranks");
                assert_eq!(
                    b.global_rank, want_global,
                    "{at}: native actual global rank"
                );
            } else if g.send_actual_global_is_local && n.class == OpClass::Send {
                assert_eq!(
                    a.global_rank, a.local_rank,
                    "{at}: the DLL's copy of the local rank"
                );
                assert_eq!(
                    b.global_rank, want_global,
                    "{at}: native actual global rank"
                );
            } else {
                assert_eq!(a.global_rank, b.global_rank, "{at}: actual global rank");
            }
        }
        (a, b) => panic!("{at}: actual {a:?} vs native {b:?}"),
    }
}

/// Asserts that `native` reports every communicator and operation `dll` reports, equal field
/// by field except for the DLL's documented gaps (where the native value is checked against
/// the communicator's group instead); returns the native communicators matched.
pub fn assert_native_matches_dll<'a>(
    dll: &[CommunicatorQueues],
    native: &'a [CommunicatorQueues],
    g: DllGaps,
) -> Vec<&'a CommunicatorQueues> {
    assert!(!dll.is_empty(), "the DLL reported no communicators");
    let mut matched = Vec::new();
    for d in dll {
        let n = native
            .iter()
            .find(|n| n.communicator.unique_id == d.communicator.unique_id)
            .unwrap_or_else(|| panic!("native walk lacks {:?}: {native:#?}", d.communicator));
        let at = format!("communicator {:?}", d.communicator.name);
        match g.unnamed {
            Some(u) if d.communicator.name == u => {
                assert_eq!(n.communicator.name, "", "{at}: unnamed")
            }
            _ => assert_eq!(d.communicator.name, n.communicator.name, "{at}: name"),
        }
        // Equal also where Open MPI's DLL forgets to sign-extend (MPI_COMM_NULL's -2): the
        // host repairs it.
        assert_eq!(
            d.communicator.local_rank, n.communicator.local_rank,
            "{at}: local rank"
        );
        assert_eq!(d.communicator.size, n.communicator.size, "{at}: size");
        if g.no_global_ranks {
            assert_eq!(d.group, None, "{at}: the DLL has no groups");
        } else if d.communicator.size == 0 {
            // The host does not ask a DLL for an empty group.
            assert_eq!(d.group, None, "{at}: group");
            assert_eq!(n.group.as_deref(), Some(&[][..]), "{at}: group");
        } else {
            assert_eq!(d.group, n.group, "{at}: group");
        }
        let group = n.group.as_deref();
        if let Some(gr) = group {
            assert_eq!(gr.len() as i64, n.communicator.size, "{at}: group size");
        }
        for class in OpClass::ALL {
            let dq = d.queue(class);
            let nq = n.queue(class);
            assert!(
                !matches!(nq, Queue::Failed { .. } | Queue::NoInformation),
                "{at}: native {class:?} queue: {nq:?}"
            );
            if g.no_unexpected && class == OpClass::Unexpected {
                assert_eq!(
                    dq,
                    &Queue::NoInformation,
                    "{at}: the DLL has no unexpected queue"
                );
                continue;
            }
            if matches!(dq, Queue::NoInformation) {
                continue;
            }
            assert!(
                !matches!(dq, Queue::Failed { .. }),
                "{at}: DLL {class:?}: {dq:?}"
            );
            let (dops, nops) = (dq.operations(), nq.operations());
            assert_eq!(
                dops.len(),
                nops.len(),
                "{at}: {class:?} ops: DLL {dops:#?} native {nops:#?}"
            );
            for (i, (a, b)) in dops.iter().zip(nops).enumerate() {
                compare_op(a, b, group, g, &format!("{at} {class:?}[{i}]"));
            }
        }
        matched.push(n);
    }
    matched
}
