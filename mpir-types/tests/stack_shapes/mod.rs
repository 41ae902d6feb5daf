//! Stacks of the shapes real MPI ranks have (Open MPI, MPICH, Fortran), hand-built, shared by
//! the tests of frame classification and of the hang analysis.

#![allow(dead_code, reason = "each test crate uses a part")]

use mpir_types::stacks::{
    BlockedCall, Frame, RankActivity, SourceLocation, ThreadStack, Trust, classify_threads,
};

pub(crate) const APP: &str = "/home/u/ring";
pub(crate) const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
pub(crate) const OMPI: &str = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
pub(crate) const OPAL: &str = "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40";
pub(crate) const MPICH: &str = "/usr/lib/x86_64-linux-gnu/libmpich.so.12";
pub(crate) const FORT: &str = "/usr/lib/x86_64-linux-gnu/libmpi_mpifh.so.40";

pub(crate) fn f(module: &str, symbol: &str) -> Frame {
    Frame::new(module, 0x100 + symbol.len() as u64, Trust::Cfi).with_symbol(symbol)
}

pub(crate) fn main_at(line: u32) -> Frame {
    f(APP, "main").with_location(SourceLocation::new("ring.c", line))
}

/// The outer frames every C program's main thread has.
pub(crate) fn libc_start() -> [Frame; 3] {
    [
        f(LIBC, "__libc_start_call_main"),
        f(LIBC, "__libc_start_main_impl"),
        f(APP, "_start"),
    ]
}

pub(crate) fn thread(tid: u32, inner: Vec<Frame>) -> ThreadStack {
    ThreadStack::new(tid, inner)
}

pub(crate) fn main_thread(tid: u32, inner: Vec<Frame>) -> ThreadStack {
    let mut frames = inner;
    frames.extend(libc_start());
    thread(tid, frames)
}

/// Open MPI: main → MPI_Recv → ob1 → opal_progress → poll.
pub(crate) fn ompi_recv(line: u32) -> Vec<ThreadStack> {
    vec![
        main_thread(
            100,
            vec![
                f(LIBC, "poll"),
                f(OPAL, "opal_progress"),
                f(OMPI, "mca_pml_ob1_recv"),
                f(OMPI, "PMPI_Recv"),
                main_at(line),
            ],
        ),
        thread(
            101,
            vec![
                f(LIBC, "epoll_wait"),
                f(OPAL, "event_base_loop"),
                f(OPAL, "progress_engine"),
                f(LIBC, "start_thread"),
                f(LIBC, "clone3"),
            ],
        ),
    ]
}

/// MPICH: main → MPI_Barrier → MPIR_Barrier_impl → MPID_Progress_wait.
pub(crate) fn mpich_barrier(line: u32) -> Vec<ThreadStack> {
    vec![main_thread(
        100,
        vec![
            f(MPICH, "MPIDI_CH3I_Progress"),
            f(MPICH, "MPID_Progress_wait"),
            f(MPICH, "MPIR_Barrier_intra_auto"),
            f(MPICH, "MPIR_Barrier_impl"),
            f(MPICH, "MPI_Barrier"),
            main_at(line),
        ],
    )]
}

pub(crate) fn in_call(threads: &[ThreadStack]) -> BlockedCall {
    match classify_threads(threads, Some(100)) {
        RankActivity::InMpi(c) | RankActivity::Finalizing(c) => c,
        other => panic!("not in MPI: {other:?}"),
    }
}

pub(crate) fn activity(threads: Vec<ThreadStack>) -> RankActivity {
    classify_threads(&threads, Some(100))
}

/// A rank computing in `compute`, at `offset`.
pub(crate) fn computing(offset: u64) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![
            Frame::new(APP, offset, Trust::Context).with_symbol("compute"),
            main_at(3),
        ],
    )])
}

pub(crate) fn outside(line: u32) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![f(LIBC, "clock_nanosleep"), main_at(line)],
    )])
}

/// A rank in `call` (a C name), called from main at `line`.
pub(crate) fn in_mpi(call: &str, line: u32) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![f(OPAL, "opal_progress"), f(OMPI, call), main_at(line)],
    )])
}
