//! Which MPI call a rank is in, from hand-built stacks of the shapes Open MPI, MPICH, Fortran
//! bindings and profiling wrappers give; threads, helpers, what was not read; hostile stacks.

mod stack_shapes;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpir_types::stacks::{
    CallKind, Frame, RankActivity, Truncation, Trust, UnknownWhy, classify_threads,
};
use stack_shapes::*;

#[test]
fn open_mpi_recv_and_mpich_barrier() {
    let c = in_call(&ompi_recv(12));
    assert_eq!(c.call, "MPI_Recv");
    assert_eq!(c.symbol, "PMPI_Recv");
    assert_eq!(c.kind, CallKind::PointToPoint);
    assert_eq!(c.tid, 100);
    // The helper thread (libevent progress engine) does not count.
    assert_eq!(c.threads_in_mpi, 1);
    let site = c.call_site.as_ref().unwrap();
    assert_eq!(site.function.as_deref(), Some("main"));
    assert_eq!(site.module, APP);
    assert_eq!(site.location.as_ref().map(|l| l.line), Some(12));
    assert_eq!(c.to_string(), "MPI_Recv at main (ring.c:12)");

    let c = in_call(&mpich_barrier(20));
    assert_eq!(
        (c.call.as_str(), c.kind),
        ("MPI_Barrier", CallKind::Collective)
    );
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("main"));
}

#[test]
fn fortran_bindings_and_profiling_wrappers_name_the_users_call() {
    let fortran = |binding: &str| {
        vec![main_thread(
            100,
            vec![
                f(MPICH, "MPID_Progress_wait"),
                f(MPICH, "MPIR_Barrier_impl"),
                f(MPICH, "PMPI_Barrier"),
                f(FORT, binding),
                f(APP, "MAIN__"),
                f(APP, "main"),
            ],
        )]
    };
    for binding in [
        "mpi_barrier_",
        "pmpi_barrier__",
        "MPI_BARRIER",
        "ompi_barrier_f",
    ] {
        let c = in_call(&fortran(binding));
        assert_eq!(c.call, "MPI_Barrier", "{binding}");
        assert_eq!(c.symbol, binding);
        assert_eq!(
            c.call_site.unwrap().function.as_deref(),
            Some("MAIN__"),
            "{binding}"
        );
    }
    // A PMPI profiling wrapper: main → MPI_Barrier (the tool's) → PMPI_Barrier (the MPI's).
    let wrapped = vec![main_thread(
        100,
        vec![
            f(MPICH, "MPIR_Barrier_impl"),
            f(MPICH, "PMPI_Barrier"),
            f("/opt/tool/libprof.so", "MPI_Barrier"),
            main_at(30),
        ],
    )];
    let c = in_call(&wrapped);
    assert_eq!(
        (c.call.as_str(), c.symbol.as_str()),
        ("MPI_Barrier", "MPI_Barrier")
    );
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("main"));
    // A callback run from inside MPI that blocks again: the innermost run is the call.
    let nested = vec![main_thread(
        100,
        vec![
            f(OMPI, "PMPI_Recv"),
            f(APP, "on_error"),
            f(OMPI, "ompi_errhandler_invoke"),
            f(OMPI, "PMPI_Send"),
            main_at(40),
        ],
    )];
    let c = in_call(&nested);
    assert_eq!(c.call, "MPI_Recv");
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("on_error"));
}

#[test]
fn threads_helpers_finalize_and_what_was_not_read() {
    // A worker thread in MPI while the main thread sleeps: in MPI, the worker's call.
    let threads = vec![
        main_thread(100, vec![f(LIBC, "clock_nanosleep"), main_at(5)]),
        thread(
            102,
            vec![
                f(OMPI, "PMPI_Recv"),
                f(APP, "worker"),
                f(LIBC, "start_thread"),
            ],
        ),
    ];
    let c = in_call(&threads);
    assert_eq!((c.tid, c.call.as_str()), (102, "MPI_Recv"));
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("worker"));
    // Two threads in MPI: the main thread's call, and both counted.
    let mut two = ompi_recv(12);
    two.push(thread(
        103,
        vec![
            f(OMPI, "PMPI_Wait"),
            f(APP, "worker"),
            f(LIBC, "start_thread"),
        ],
    ));
    let c = in_call(&two);
    assert_eq!(
        (c.tid, c.call.as_str(), c.threads_in_mpi),
        (100, "MPI_Recv", 2)
    );
    // Outside MPI: main sleeping, the helper thread ignored even when truncated.
    let outside = vec![
        main_thread(100, vec![f(LIBC, "clock_nanosleep"), main_at(5)]),
        thread(101, vec![f(LIBC, "epoll_wait"), f(OPAL, "progress_engine")])
            .with_truncation(Truncation::UnreadableStack),
    ];
    match classify_threads(&outside, Some(100)) {
        RankActivity::NotInMpi { at: Some(at) } => {
            assert_eq!(at.function.as_deref(), Some("clock_nanosleep"))
        }
        other => panic!("{other:?}"),
    }
    // A truncated stack showing no MPI frame is unknown, never "outside MPI".
    let cut = vec![
        thread(100, vec![f(LIBC, "poll"), f(OPAL, "opal_progress")])
            .with_truncation(Truncation::NoUnwindInfo),
    ];
    assert_eq!(
        classify_threads(&cut, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // …and so is one whose MPI frame was only found by scanning.
    let scanned = vec![thread(
        100,
        vec![
            f(LIBC, "poll"),
            Frame::new(OMPI, 0x40, Trust::Scan).with_symbol("PMPI_Recv"),
            main_at(3),
        ],
    )];
    assert_eq!(
        classify_threads(&scanned, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // A truncated stack whose read frames end inside MPI: in MPI, caller not read.
    let cut_in = vec![
        thread(100, vec![f(LIBC, "poll"), f(MPICH, "MPI_Barrier")])
            .with_truncation(Truncation::UnreadableStack),
    ];
    let c = in_call(&cut_in);
    assert!(c.call_site.is_none());
    assert_eq!(c.to_string(), "MPI_Barrier (caller not read)");
    // MPI_Finalize, and no stacks at all.
    let fin = vec![main_thread(
        100,
        vec![
            f(OMPI, "ompi_mpi_finalize"),
            f(OMPI, "PMPI_Finalize"),
            main_at(50),
        ],
    )];
    assert!(matches!(
        classify_threads(&fin, Some(100)),
        RankActivity::Finalizing(c) if c.call == "MPI_Finalize"
    ));
    assert_eq!(
        classify_threads(&[], None),
        RankActivity::Unknown(UnknownWhy::NoStacks)
    );
}

#[test]
fn hostile_stacks_stay_bounded() {
    // One shared copy of each huge name (frames hold `Arc<str>`).
    let huge: Arc<str> = "x".repeat(1 << 20).into();
    let mpi_huge: Arc<str> = format!("MPI_{huge}").into();
    let frames: Vec<Frame> = (0..200_000)
        .map(|i| match i % 3 {
            0 => Frame::new(huge.clone(), i, Trust::Cfi).with_symbol(huge.clone()),
            1 => Frame::new(APP, i, Trust::Cfi).with_symbol(mpi_huge.clone()),
            _ => Frame::new(APP, i, Trust::Cfi),
        })
        .collect();
    let t = Instant::now();
    let threads = vec![thread(100, frames)];
    // Frames past the examined limit are not read: unknown, not outside MPI.
    assert_eq!(
        classify_threads(&threads, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // A real MPI frame under huge names: the kept names are cut.
    let threads = vec![thread(
        100,
        vec![
            f(OMPI, "PMPI_Recv"),
            Frame::new(huge.clone(), 1, Trust::Cfi).with_symbol(huge.clone()),
            f(APP, "main"),
        ],
    )];
    let c = in_call(&threads);
    let site = c.call_site.unwrap();
    assert!(site.module.len() < 1024 && site.function.unwrap().len() < 1024);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}
