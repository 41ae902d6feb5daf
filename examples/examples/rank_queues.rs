//! List the message queues of one MPI process through its MPI's own message-queue DLL.
//!
//! ```text
//! cargo run -p mpir-examples --example rank_queues -- PID [TYPES_SIDECAR]
//! ```
//!
//! The DLL is the one the process names (`MPIR_dll_name`, or Open MPI's
//! `mpimsgq_dll_locations`); it runs in a helper process — this very example, started again
//! with an argument — so a DLL that crashes cannot take the tool down. Stock Open MPI has no
//! debug info: give the types sidecar built by `scripts/openmpi-types-sidecar.sh`.
//!
//! The process is read while it runs: a tool that wants one consistent snapshot stops it first
//! (see `mpir queues`, which holds every rank while it reads).

use std::rc::Rc;

use mpir_mqd::{HelperOptions, HostOptions, ProcessSpec};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;

const HELPER: &str = "--mqd-helper";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(HELPER) {
        // Started by ourselves as the DLL's host process.
        std::process::exit(
            if mpir_mqd::helper_main() == std::process::ExitCode::SUCCESS {
                0
            } else {
                1
            },
        );
    }
    let pid: u32 = args
        .first()
        .ok_or("usage: rank_queues PID [TYPES_SIDECAR]")?
        .parse()?;
    let mut debug = DebugOptions::default();
    if let Some(sidecar) = args.get(1) {
        debug = debug.with_types_sidecar(sidecar);
    }
    let target = LiveTarget::open(pid, debug)?;
    let (dll, source) = mpir_mqd::discover_dll(&target, None)?;
    println!(
        "pid {pid}: message-queue DLL {} (from {source:?})",
        dll.display()
    );

    let me = std::env::current_exe()?;
    let helper = HelperOptions::default().with_program_args(me, [HELPER]);
    // The DLL the MPI library of the target names, hosted in a helper process.
    let mut host = mpir_mqd::open_out_of_process(&dll, HostOptions::default(), helper)?;
    let image = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    // The world rank is unknown here; the DLL reports local ranks anyway.
    let process = host.attach(ProcessSpec::new(
        image.display().to_string(),
        Rc::new(target),
        None,
    ))?;
    for comm in host.queues(process)? {
        let c = &comm.communicator;
        println!("{} (size {}, my rank {}):", c.name, c.size, c.local_rank);
        for queue in [&comm.sends, &comm.receives, &comm.unexpected] {
            for op in queue.operations() {
                println!(
                    "  {:?} peer {:?} tag {:?} {:?} bytes, {:?}",
                    op.class, op.peer_local, op.tag, op.length.bytes, op.status
                );
            }
        }
    }
    host.detach(process)?;
    Ok(())
}
