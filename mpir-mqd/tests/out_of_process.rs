//! Out-of-process hosting (`mpir-mqd-host`) against the C walker DLL: identical answers to the
//! in-process host in four data models, and a DLL that segfaults or never returns turned into
//! a typed error with the helper killed and reaped while this process carries on.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

mod common;
use common::*;

use mpir_mqd::{
    CommunicatorQueues, HelperOptions, HostOptions, MqdError, OutOfProcessHost, ProcessSpec, Queue,
    QueueHost,
};
use mpir_target::MockTarget;
use mpir_types::DataModel;
use mpir_types::mqd::{LengthUnit, Peer};

const HELPER: &str = env!("CARGO_BIN_EXE_mpir-mqd-host");

fn helper() -> HelperOptions {
    HelperOptions::default().with_program(HELPER)
}

fn spawn(dll: &Path, options: HostOptions, helper: HelperOptions) -> OutOfProcessHost {
    OutOfProcessHost::spawn(dll, options, helper).unwrap_or_else(|e| panic!("spawn: {e}"))
}

/// Attaches the target, walks it twice, detaches; returns the walk and the has-queues message.
fn walk(
    host: &mut dyn QueueHost,
    target: Rc<MockTarget>,
) -> (Vec<CommunicatorQueues>, Option<String>) {
    let p = host
        .attach(ProcessSpec::new(IMAGE, target, Some(3)))
        .unwrap_or_else(|e| panic!("attach: {e}"));
    let message = host.queue_messages(p).0.map(str::to_string);
    let first = host.queues(p).unwrap_or_else(|e| panic!("queues: {e}"));
    let second = host
        .queues(p)
        .unwrap_or_else(|e| panic!("queues again: {e}"));
    assert_eq!(first, second, "a second walk gives the same answer");
    host.detach(p).expect("detach");
    assert!(matches!(
        host.queues(p),
        Err(MqdError::UnknownProcess { .. })
    ));
    (first, message)
}

fn process_is_gone(pid: u32) -> bool {
    // Reaped: no /proc entry at all (a zombie would still have one).
    !PathBuf::from(format!("/proc/{pid}")).exists()
}

fn both_modes_agree(model: DataModel, sizes: &str, name: &str) {
    let Some((_dir, dll)) = build_dll(name, &[]) else {
        return;
    };
    let options = HostOptions::default().with_length_unit(LengthUnit::Bytes);
    let target = Rc::new(fake_target(model, &two_comms(), true, true));

    let mut inproc = load(&dll, options.clone()).expect("load in process");
    let (expected, message) = walk(&mut inproc, Rc::clone(&target));
    drop(inproc);

    for cache in [true, false] {
        let mut remote = spawn(&dll, options.clone(), helper().with_read_cache(cache));
        assert_eq!(remote.version(), "mpir-rs test walker DLL");
        assert_eq!((remote.compatibility(), remote.taddr_width()), (2, Some(8)));
        assert!(remote.optional_exports().contains(&"mqs_get_comm_group"));
        let (got, got_message) = walk(&mut remote, Rc::clone(&target));
        assert_eq!(got, expected, "cache {cache}: same answer as in process");
        assert_eq!(got_message, message);
        assert!(
            remote
                .dll_messages()
                .iter()
                .any(|m| m == "walker: process set up"),
            "dprints crosses the pipe"
        );
        let pid = remote.helper_pid().expect("running");
        drop(remote);
        assert!(process_is_gone(pid), "helper reaped on drop");
    }

    // The shared answer is the right one (from the structure placed in the target), so the
    // comparison above is not between two equally wrong results.
    assert_eq!(expected.len(), 2);
    assert_eq!(expected[0].communicator.name, "comm_a");
    let s = expected[0].sends.operations();
    assert_eq!(
        (s[0].peer_local, s[0].peer_global),
        (Peer::Rank(2), Some(12))
    );
    assert_eq!(
        s[0].extra_text,
        [
            "seq=4294967298 flags=-3".to_string(),
            format!("sizes={sizes} sentinel=kept rank=3"),
        ]
    );
    assert_eq!(expected[0].unexpected, Queue::NoInformation);
    assert_eq!(expected[1].unexpected.operations()[0].length.bytes, Some(4));
    assert!(
        target.writes().is_empty(),
        "hosting never writes the target"
    );
}

#[test]
fn out_of_process_matches_in_process_lp64() {
    both_modes_agree(DataModel::LP64, "2,4,8,8,8", "oop-lp64");
}

#[test]
fn out_of_process_matches_in_process_big_endian_lp64() {
    both_modes_agree(DataModel::LP64_BE, "2,4,8,8,8", "oop-lp64be");
}

#[test]
fn out_of_process_matches_in_process_32_bit() {
    both_modes_agree(DataModel::ILP32, "2,4,4,8,4", "oop-ilp32");
}

#[test]
fn out_of_process_matches_in_process_big_endian_32_bit() {
    both_modes_agree(DataModel::ILP32_BE, "2,4,4,8,4", "oop-ilp32be");
}

fn attached(dll: &Path, helper: HelperOptions) -> (OutOfProcessHost, mpir_mqd::ProcessId) {
    let mut host = spawn(dll, HostOptions::default(), helper);
    let p = host
        .attach(ProcessSpec::new(
            IMAGE,
            Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            Some(0),
        ))
        .expect("attach works: the faulty call is the queue walk");
    (host, p)
}

#[test]
fn a_segfaulting_dll_is_a_typed_error_and_the_host_survives() {
    let Some((_d, crash)) = build_dll("oop-crash", &["CRASH_IN_UPDATE"]) else {
        return;
    };
    let (mut host, p) = attached(&crash, helper());
    let pid = host.helper_pid().expect("running");
    match host.queues(p) {
        Err(MqdError::HelperDied { call, status, .. }) => {
            assert_eq!(call, "queues");
            assert_eq!(status, "killed by signal 11 (SIGSEGV)");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(process_is_gone(pid), "the crashed helper was reaped");
    assert_eq!(host.helper_pid(), None);
    assert!(matches!(host.queues(p), Err(MqdError::HelperGone { .. })));
    assert!(matches!(host.detach(p), Err(MqdError::HelperGone { .. })));
    drop(host);

    // This process is intact: a good DLL still works, out of process and in process.
    let Some((_d2, good)) = build_dll("oop-after-crash", &[]) else {
        return;
    };
    let (mut again, p) = attached(&good, helper());
    assert_eq!(again.queues(p).expect("queues").len(), 2);
    let mut inproc = load(&good, HostOptions::default()).expect("in process");
    let (comms, _) = walk(
        &mut inproc,
        Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
    );
    assert_eq!(comms.len(), 2);
}

#[test]
fn a_dll_that_never_returns_times_out_and_is_killed() {
    let Some((_d, hang)) = build_dll("oop-hang", &["HANG_IN_UPDATE"]) else {
        return;
    };
    let silence = Duration::from_millis(400);
    let (mut host, p) = attached(
        &hang,
        helper().with_timeouts(silence, Duration::from_secs(60)),
    );
    let pid = host.helper_pid().expect("running");
    let start = Instant::now();
    match host.queues(p) {
        Err(MqdError::HelperTimeout { call, after_ms, .. }) => {
            assert_eq!(call, "queues");
            assert_eq!(after_ms, 400);
        }
        other => panic!("unexpected {other:?}"),
    }
    let took = start.elapsed();
    assert!(
        took >= silence && took < Duration::from_secs(5),
        "gave up after {took:?}"
    );
    assert!(
        process_is_gone(pid),
        "the hung helper was killed and reaped"
    );
    assert!(matches!(host.queues(p), Err(MqdError::HelperGone { .. })));
}

#[test]
fn an_overall_deadline_bounds_a_dll_that_keeps_talking() {
    // ENDLESS: next_operation never ends, each step reading memory (so the helper is never
    // silent). The bound on operations stops it in the helper; a tight call deadline stops it
    // even when the bound is huge.
    let Some((_d, dll)) = build_dll("oop-endless", &["ENDLESS"]) else {
        return;
    };
    let mut host = spawn(&dll, HostOptions::default().with_bounds(16, 50), helper());
    let p = host
        .attach(ProcessSpec::new(
            IMAGE,
            Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            Some(0),
        ))
        .expect("attach");
    let comms = host.queues(p).expect("communicators still listed");
    match &comms[0].sends {
        Queue::Failed {
            partial,
            error: MqdError::Unbounded { limit: 50, .. },
        } => assert_eq!(partial.len(), 50),
        q => panic!("unexpected {q:?}"),
    }

    let mut host = spawn(
        &dll,
        HostOptions::default().with_bounds(16, usize::MAX),
        helper()
            .with_read_cache(false)
            .with_timeouts(Duration::from_secs(10), Duration::from_millis(700)),
    );
    let p = host
        .attach(ProcessSpec::new(
            IMAGE,
            Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            Some(0),
        ))
        .expect("attach");
    let pid = host.helper_pid().expect("running");
    assert!(
        matches!(host.queues(p), Err(MqdError::HelperTimeout { .. })),
        "the call deadline applies although the helper keeps asking"
    );
    assert!(process_is_gone(pid));
}

#[test]
fn load_errors_cross_the_pipe_typed() {
    let Some((_d, compat4)) = build_dll("oop-compat4", &["COMPAT=4"]) else {
        return;
    };
    let err =
        OutOfProcessHost::spawn(&compat4, HostOptions::default(), helper()).expect_err("compat 4");
    assert!(
        matches!(
            err,
            MqdError::Incompatible {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let Some((_d2, noexport)) = build_dll("oop-noexport", &["NO_NEXT_OPERATION"]) else {
        return;
    };
    match OutOfProcessHost::spawn(&noexport, HostOptions::default(), helper()) {
        Err(MqdError::MissingExports { names, .. }) => assert_eq!(names, ["mqs_next_operation"]),
        other => panic!("unexpected {other:?}"),
    }
    let not_a_dll = std::env::temp_dir().join("mpir-mqd-not-a-dll.txt");
    std::fs::write(&not_a_dll, "hello").expect("write");
    assert!(matches!(
        OutOfProcessHost::spawn(&not_a_dll, HostOptions::default(), helper()),
        Err(MqdError::Load { .. })
    ));
}

#[test]
fn a_missing_or_foreign_helper_is_a_start_error() {
    let Some((_d, dll)) = build_dll("oop-helpers", &[]) else {
        return;
    };
    let err = OutOfProcessHost::spawn(
        &dll,
        HostOptions::default(),
        HelperOptions::default().with_program("/nonexistent/mpir-mqd-host"),
    )
    .expect_err("missing helper");
    assert!(matches!(err, MqdError::HelperStart { .. }), "{err:?}");

    // A program that exits at once without greeting.
    let err = OutOfProcessHost::spawn(
        &dll,
        HostOptions::default(),
        HelperOptions::default().with_program("/bin/true"),
    )
    .expect_err("true is no helper");
    assert!(
        matches!(&err, MqdError::HelperStart { reason, .. } if reason.contains("before greeting")),
        "{err:?}"
    );
    // A program that floods the pipe with garbage: a protocol error, bounded, no huge
    // allocation ("y\ny\n" announces a frame of 0x0a790a79 bytes).
    let err = OutOfProcessHost::spawn(
        &dll,
        HostOptions::default(),
        HelperOptions::default().with_program("/usr/bin/yes"),
    )
    .expect_err("yes is no helper");
    assert!(matches!(err, MqdError::Protocol { .. }), "{err:?}");
}

#[test]
fn both_modes_behind_one_api() {
    let Some((_d, dll)) = build_dll("oop-open", &[]) else {
        return;
    };
    let target = Rc::new(fake_target(DataModel::LP64_BE, &two_comms(), true, true));
    let mut answers = Vec::new();
    for hosting in [Hosting::OutOfProcess(helper()), Hosting::InProcess] {
        // SAFETY: the walker DLL is our own fixture, built for this host.
        let mut host =
            unsafe { common::open_host(&dll, hosting, HostOptions::default()) }.expect("open");
        answers.push(walk(&mut *host, Rc::clone(&target)).0);
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0][1].communicator.name, "dup of comm_a");
}

#[test]
fn the_helper_is_found_next_to_the_executable() {
    // Tests run from target/<profile>/deps; cargo puts the helper in target/<profile>.
    let found = mpir_mqd::find_helper(None).expect("found");
    assert_eq!(
        std::fs::canonicalize(found).expect("canonical"),
        std::fs::canonicalize(HELPER).expect("canonical")
    );
    assert!(matches!(
        mpir_mqd::find_helper(Some(Path::new("/nonexistent/helper"))),
        Err(MqdError::HelperStart { .. })
    ));
}
