//! The MPI-2 extensions of the interface against the C walker DLL built with `FOR_MPI2`
//! (interface version 3), in process and out of process, over `MockTarget`s.
//!
//! The DLL models a dynamic MPI: processes have internal names and communicator groups hold
//! those names; the job object carries the DLL's table from internal names to the identities
//! the host gave (`mqs_set_process_identity`, read back through `get_process_identity`), and the
//! global ranks it reports are translated through it. So the ranks in our results can only equal
//! the identities we passed if the job callbacks, the identity calls and the job's lifetime are
//! right. What the DLL saw (job set-ups and destructions with call counters, identity checks,
//! `get_process` round trips) it reports through `dprints`.

use std::rc::Rc;

mod common;
use common::*;

use mpir_mqd::{
    CommunicatorQueues, HelperOptions, HostOptions, MqdError, ProcessId, ProcessLocation,
    ProcessSpec, QueueHost,
};
use mpir_target::MockTarget;
use mpir_types::DataModel;
use mpir_types::mqd::{LengthUnit, Peer};

const HELPER: &str = env!("CARGO_BIN_EXE_mpir-mqd-host");

/// Internal names (what the target's groups hold) and the identities we give.
const A_NAME: i64 = 100;
const B_NAME: i64 = 200;
const GHOST_NAME: i64 = 300; // in a group, never attached
const A_ID: i32 = 0; // COMM_WORLD rank 0
const B_ID: i32 = 5; // a spawned process: an index past the world's ranks

const JOB_SET_UP: &str = "walker: job set up";
const LONG_HOST: &str = "a-host-name-of-seventy-characters-which-fills-the-64-char-array-fully";

fn modes() -> [(&'static str, Hosting); 2] {
    [
        ("in process", Hosting::InProcess),
        (
            "out of process",
            Hosting::OutOfProcess(HelperOptions::default().with_program(HELPER)),
        ),
    ]
}

fn open(dll: &std::path::Path, hosting: Hosting, options: HostOptions) -> Box<dyn QueueHost> {
    // SAFETY: the walker DLL is our own fixture, built for this host.
    unsafe { common::open_host(dll, hosting, options) }.unwrap_or_else(|e| panic!("open: {e}"))
}

fn options() -> HostOptions {
    HostOptions::default().with_length_unit(LengthUnit::Bytes)
}

fn identity_line(id: i32) -> String {
    format!(
        "walker: identity {id} set (callback says {id}, get_process round-trips, \
         unknown identity NULL)"
    )
}

fn destroyed_line(n: usize) -> String {
    format!("walker: job destroyed (set up {n}, destroyed {n}, processes alive 0, info ours)")
}

fn count(host: &dyn QueueHost, pred: impl Fn(&str) -> bool) -> usize {
    host.dll_messages().iter().filter(|m| pred(m)).count()
}

/// Process A: one communicator with B and a process nobody attached.
fn comms_of_a() -> Vec<FakeComm> {
    vec![FakeComm {
        id: 0x51,
        rank: 0,
        name: "parent side",
        group: vec![A_NAME, B_NAME, GHOST_NAME],
        queues: [
            FakeQueue::List(vec![(1, 7, 10, 0x5000, 1, 0)]),
            FakeQueue::List(vec![(2, 8, 4, 0x6000, 2, 0), (-1, -1, 3, 0x6100, 3, 0)]),
            FakeQueue::List(vec![]),
        ],
    }]
}

/// Process B (spawned by A): one communicator back to A.
fn comms_of_b() -> Vec<FakeComm> {
    vec![FakeComm {
        id: 0x52,
        rank: 0,
        name: "child side",
        group: vec![B_NAME, A_NAME],
        queues: [
            FakeQueue::List(vec![(1, 9, 16, 0x7000, 4, 0)]),
            FakeQueue::List(vec![]),
            FakeQueue::List(vec![]),
        ],
    }]
}

fn spawned_by_a() -> Vec<FakeSpawned<'static>> {
    vec![
        (4242, "/spawned/worker", "node-a"),
        (4243, "/spawned/worker-2", LONG_HOST),
    ]
}

fn process(m: DataModel, comms: &[FakeComm], name: i64, spawned: &[FakeSpawned]) -> Rc<MockTarget> {
    let mut b = fake_builder(m, comms, true, true);
    add_mpi2(&mut b, name, spawned);
    Rc::new(b.build())
}

fn spec(target: &Rc<MockTarget>, identity: i32) -> ProcessSpec {
    ProcessSpec::new(
        IMAGE,
        Rc::clone(target) as Rc<dyn mpir_target::Target>,
        u64::try_from(identity).ok(),
    )
}

fn attach(host: &mut dyn QueueHost, target: &Rc<MockTarget>, identity: i32) -> ProcessId {
    host.attach(spec(target, identity))
        .unwrap_or_else(|e| panic!("attach identity {identity}: {e}"))
}

/// Everything one session produced, for comparing the two modes.
#[derive(Debug, PartialEq)]
struct Session {
    a: Vec<CommunicatorQueues>,
    b: Vec<CommunicatorQueues>,
    a_alone: Vec<CommunicatorQueues>,
    spawned: Vec<ProcessLocation>,
    breakpoint: String,
    messages: Vec<String>,
}

/// A whole job's life on `host`, asserting as it goes.
fn job_session(host: &mut dyn QueueHost, m: DataModel, with_group: bool, mode: &str) -> Session {
    assert_eq!(host.compatibility(), 3, "{mode}");
    assert!(host.has_jobs(), "{mode}");
    for f in [
        "mqs_setup_job",
        "mqs_destroy_job_info",
        "mqs_set_process_identity",
        "mqs_setup_new_process_iterator",
        "mqs_next_new_process",
        "mqs_spawn_breakpoint_name",
    ] {
        assert!(host.optional_exports().contains(&f), "{mode}: {f}");
    }
    let ta = process(m, &comms_of_a(), A_NAME, &spawned_by_a());
    let tb = process(m, &comms_of_b(), B_NAME, &[]);
    assert_eq!(
        count(host, |l| l == JOB_SET_UP),
        0,
        "{mode}: no job before an attach"
    );

    let a = attach(host, &ta, A_ID);
    // (The DLL's mqs_setup_process fails unless the job was set up before it.)
    assert_eq!(count(host, |l| l == JOB_SET_UP), 1, "{mode}");
    assert_eq!(count(host, |l| l == identity_line(A_ID)), 1, "{mode}");
    let b = attach(host, &tb, B_ID);
    assert_eq!(
        count(host, |l| l == JOB_SET_UP),
        1,
        "{mode}: one job for all processes"
    );
    assert_eq!(count(host, |l| l == identity_line(B_ID)), 1, "{mode}");

    // Identities name processes: a second process with B's identity is refused, and the
    // refusal leaves the job alone.
    let tc = process(m, &comms_of_b(), 999, &[]);
    match host.attach(spec(&tc, B_ID)) {
        Err(MqdError::IdentityInUse { identity, .. }) => {
            assert_eq!(identity, Some(B_ID as u64), "{mode}")
        }
        other => panic!("{mode}: unexpected {other:?}"),
    }
    assert_eq!(count(host, |l| l.starts_with("walker: job destroyed")), 0);

    // Global ranks in the results are the identities we gave, translated by the DLL from
    // the groups' internal names through the table it keeps on the job.
    let qa = host
        .queues(a)
        .unwrap_or_else(|e| panic!("{mode}: queues A: {e}"));
    assert_eq!(qa.len(), 1);
    let c = &qa[0];
    assert_eq!(c.communicator.name, "parent side");
    let expected_group = with_group.then(|| vec![Some(A_ID as u64), Some(B_ID as u64), None]);
    assert_eq!(c.group, expected_group, "{mode}");
    let s = c.sends.operations();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].peer_local, Peer::Rank(1));
    assert_eq!(
        s[0].peer_global,
        Some(B_ID as u64),
        "{mode}: B's identity, from the DLL itself when it has no comm group"
    );
    assert_eq!(
        s[0].extra_text[2], "identity=0",
        "{mode}: get_process_identity"
    );
    let r = c.receives.operations();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].peer_local, r[0].peer_global),
        (Peer::Rank(2), None),
        "{mode}: a process without an identity has no global rank"
    );
    assert_eq!((r[1].peer_local, r[1].peer_global), (Peer::Any, None));

    let qb = host
        .queues(b)
        .unwrap_or_else(|e| panic!("{mode}: queues B: {e}"));
    let s = qb[0].sends.operations();
    assert_eq!(
        (s[0].peer_local, s[0].peer_global),
        (Peer::Rank(1), Some(A_ID as u64)),
        "{mode}"
    );
    assert_eq!(s[0].extra_text[2], "identity=5", "{mode}");
    assert_eq!(
        qb[0].group,
        with_group.then(|| vec![Some(B_ID as u64), Some(A_ID as u64)]),
        "{mode}"
    );

    // New processes: the list placed in A's memory; none in B.
    let spawned = host
        .new_processes(a)
        .unwrap_or_else(|e| panic!("{mode}: new processes: {e}"));
    assert_eq!(
        spawned,
        [
            ProcessLocation::new(4242, "/spawned/worker", "node-a"),
            ProcessLocation::new(4243, "/spawned/worker-2", &LONG_HOST[..64]),
        ],
        "{mode}: a host name filling its 64 chars without a NUL is cut at the array's end"
    );
    assert_eq!(host.new_processes(b).expect("B spawned nothing"), []);
    let breakpoint = host
        .spawn_breakpoint_name(a)
        .unwrap_or_else(|e| panic!("{mode}: breakpoint name: {e}"));
    assert_eq!(breakpoint, "fake_spawn_hook");

    // The job outlives its first process and is destroyed once, after its last.
    host.detach(a).expect("detach A");
    assert_eq!(
        count(host, |l| l.starts_with("walker: job destroyed")),
        0,
        "{mode}"
    );
    host.detach(b).expect("detach B");
    assert_eq!(
        count(host, |l| l.starts_with("walker: job destroyed")),
        1,
        "{mode}"
    );
    assert_eq!(count(host, |l| l == destroyed_line(1)), 1, "{mode}");

    // Attaching again makes a new job, which knows only A: B's identity is gone with the old
    // job's table.
    let a2 = attach(host, &ta, A_ID);
    assert_eq!(count(host, |l| l == JOB_SET_UP), 2, "{mode}");
    let a_alone = host.queues(a2).expect("queues A again");
    assert_eq!(
        a_alone[0].sends.operations()[0].peer_global,
        None,
        "{mode}: the new job has no identity for B"
    );
    host.detach(a2).expect("detach A again");
    assert_eq!(count(host, |l| l == destroyed_line(2)), 1, "{mode}");
    assert!(
        ta.writes().is_empty() && tb.writes().is_empty(),
        "hosting never writes the target"
    );
    Session {
        a: qa,
        b: qb,
        a_alone,
        spawned,
        breakpoint,
        messages: host.dll_messages(),
    }
}

fn job_in_both_modes(m: DataModel, defines: &[&str], name: &str, with_group: bool) {
    let Some((_dir, dll)) = build_dll(name, defines) else {
        return;
    };
    let sessions: Vec<Session> = modes()
        .into_iter()
        .map(|(mode, hosting)| {
            let mut host = open(&dll, hosting, options());
            job_session(&mut *host, m, with_group, mode)
        })
        .collect();
    assert_eq!(sessions[0], sessions[1], "both modes give the same answers");
}

#[test]
fn identities_and_the_job_in_both_modes_lp64() {
    job_in_both_modes(DataModel::LP64, &["FOR_MPI2"], "mpi2-lp64", true);
}

#[test]
fn identities_come_from_the_dll_without_a_comm_group_big_endian_32_bit() {
    // Without mqs_get_comm_group the host has nothing to fill global ranks from: what the
    // results show is the DLL's own translation.
    job_in_both_modes(
        DataModel::ILP32_BE,
        &["FOR_MPI2", "NO_COMM_GROUP"],
        "mpi2-ilp32be-nogroup",
        false,
    );
}

#[test]
fn dropping_the_host_destroys_the_job_once_after_its_processes() {
    // In process only: the DLL stays loaded in this process (never unloaded), so a second
    // host for it reads the counters the first one left behind.
    let Some((_dir, dll)) = build_dll("mpi2-drop", &["FOR_MPI2"]) else {
        return;
    };
    let m = DataModel::LP64;
    let mut host = open(&dll, Hosting::InProcess, options());
    assert_eq!(
        count(&*host, |l| l
            == "walker: callbacks set (jobs set up 0, destroyed 0, processes alive 0, \
                alive at the last job destruction -1)"),
        1
    );
    let ta = process(m, &comms_of_a(), A_NAME, &spawned_by_a());
    let tb = process(m, &comms_of_b(), B_NAME, &[]);
    attach(&mut *host, &ta, A_ID);
    attach(&mut *host, &tb, B_ID);
    drop(host);
    let again = open(&dll, Hosting::InProcess, options());
    assert_eq!(
        count(&*again, |l| l
            == "walker: callbacks set (jobs set up 1, destroyed 1, processes alive 0, \
                alive at the last job destruction 0)"),
        1,
        "{:?}",
        again.dll_messages()
    );
}

#[test]
fn dlls_without_the_job_functions_keep_the_mpi1_path() {
    // The MPI-1 walker as version 2 (its own) and as version 3 (a DLL built with FOR_MPI2 that
    // exports none of the MPI-2 functions): both walk as before, with global ranks filled from
    // the group, and two processes may share a rank (no identities without a job).
    let Some((_d2, v2)) = build_dll("mpi1-v2", &[]) else {
        return;
    };
    let Some((_d3, v3)) = build_dll("mpi1-v3", &["COMPAT=3"]) else {
        return;
    };
    let target = Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true));
    let mut answers = Vec::new();
    for (dll, version, reason) in [
        (
            &v2,
            2,
            "it implements interface version 2, which has no MPI-2 functions",
        ),
        (&v3, 3, "not exported"),
    ] {
        for (mode, hosting) in modes() {
            let mut host = open(dll, hosting, options());
            assert_eq!(host.compatibility(), version);
            assert!(!host.has_jobs(), "{mode}");
            let p = attach(&mut *host, &target, 3);
            let twin = attach(&mut *host, &target, 3);
            let comms = host.queues(p).expect("queues");
            let s = comms[0].sends.operations();
            assert_eq!(
                (s[0].peer_local, s[0].peer_global),
                (Peer::Rank(2), Some(12))
            );
            assert_eq!(s[0].extra_text.len(), 2, "the MPI-1 walker's lines only");
            for (function, got) in [
                (
                    "mqs_setup_new_process_iterator",
                    host.new_processes(p).map(|_| ()),
                ),
                (
                    "mqs_spawn_breakpoint_name",
                    host.spawn_breakpoint_name(p).map(|_| ()),
                ),
            ] {
                match got {
                    Err(MqdError::Unsupported {
                        function: f,
                        reason: r,
                        ..
                    }) => assert_eq!((f.as_str(), r.as_str()), (function, reason), "{mode}"),
                    other => panic!("{mode}: unexpected {other:?}"),
                }
            }
            assert!(
                !host.dll_messages().iter().any(|l| l.contains("job")),
                "{mode}: no job calls"
            );
            host.detach(twin).expect("detach");
            answers.push(comms);
        }
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn mpi2_failures_are_typed_and_bounded_in_both_modes() {
    // LONG_SPAWN_NAME: the name does not fit our buffer; ENDLESS: the new-process iterator
    // never ends.
    let Some((_d, dll)) = build_dll("mpi2-bad", &["FOR_MPI2", "LONG_SPAWN_NAME", "ENDLESS"]) else {
        return;
    };
    let mut opts = options();
    opts.max_new_processes = 8;
    let mut errors = Vec::new();
    for (mode, hosting) in modes() {
        let mut host = open(&dll, hosting, opts.clone());
        let t = process(DataModel::LP64, &comms_of_a(), A_NAME, &spawned_by_a());
        let p = attach(&mut *host, &t, A_ID);
        let name = host.spawn_breakpoint_name(p).expect_err("too long");
        match &name {
            MqdError::Dll { call, message, .. } => {
                assert_eq!(*call, "mqs_spawn_breakpoint_name", "{mode}");
                assert_eq!(
                    message, "walker: breakpoint name buffer too small",
                    "{mode}"
                );
            }
            e => panic!("{mode}: unexpected {e:?}"),
        }
        let endless = host.new_processes(p).expect_err("endless");
        assert!(
            matches!(&endless, MqdError::Unbounded { limit: 8, what, .. } if what == "new processes"),
            "{mode}: {endless:?}"
        );
        host.detach(p).expect("detach");
        let gone = host.new_processes(p).expect_err("detached");
        assert!(
            matches!(gone, MqdError::UnknownProcess { .. }),
            "{mode}: {gone:?}"
        );
        errors.push((name, endless));
    }
    assert_eq!(errors[0], errors[1], "the same errors in both modes");
}
