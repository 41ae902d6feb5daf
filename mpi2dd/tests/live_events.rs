//! Events on the live reference job: after the job is acquired (traversed, every process
//! attached with a breakpoint on MPI2DD_breakpoint, directory events requested), a spawn
//! raises DIRECTORY_CHANGED in the directory and SPAWN in the parent rank; re-traversing while
//! the parent is stopped shows the new world with its parentage, and the new ranks are the
//! processes the fixture says it started. Detaching leaves every process as found (bytes
//! restored, untraced, running), and the job still works and exits cleanly.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use mpi2dd::connect::LocalConnector;
use mpi2dd::events::{Reaction, breakpoint_address, read_event, update_debugger_flags};
use mpi2dd::flags::{DebugState, DebuggerFlags, MpiFlags};
use mpi2dd::read::{info_address, read_info_at};
use mpi2dd::traverse::{TraverseOptions, traverse};
use mpir_target::MemoryExt;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};
use support::*;

struct Held {
    target: LiveTarget,
    info: u64,
    breakpoint: u64,
    original: Vec<u8>,
}

fn tracer_pid(pid: i32) -> i32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_spawn_after_acquisition_raises_events_and_the_new_ranks_appear_with_their_parentage() {
    let dir = scratch("live-events");
    let Some(exe) = build_job(&dir) else { return };
    let mut job = RunningJob::start(&exe, 2, 2);
    let c = LocalConnector::new();
    let opts = TraverseOptions::default();
    let meta = job.meta_pid();
    let before = traverse(&c, "localhost", meta, &opts).unwrap().job;
    let w0 = before.worlds[0].id.clone();
    let parent = before.worlds[0].ranks[1].process.pid; // rank 1, started by directory 0

    // Acquire: every process attached, a breakpoint in each, directory events requested.
    let tracer = Tracer::new().unwrap();
    let mut held: BTreeMap<i32, Held> = BTreeMap::new();
    let pids: Vec<(i32, MpiFlags)> = before
        .processes
        .iter()
        .map(|p| (p.process.pid, p.mpi_flags))
        .chain(
            before
                .ranks()
                .map(|(_, r)| (r.process.pid, MpiFlags::EMPTY)),
        )
        .collect();
    assert_eq!(pids.len(), 7);
    for &(pid, flags) in &pids {
        let target = LiveTarget::open(pid as u32, DebugOptions::default()).unwrap();
        let info = info_address(&target).unwrap();
        let breakpoint = breakpoint_address(&target).unwrap();
        let original = target.read_vec(breakpoint, 1).unwrap();
        tracer.attach(pid as u32).unwrap();
        tracer.insert_breakpoint(pid as u32, breakpoint).unwrap();
        let mut set = DebuggerFlags::EMPTY;
        if flags.contains(MpiFlags::I_AM_DIR) || flags.contains(MpiFlags::I_AM_METADIR) {
            set |= DebuggerFlags::REQUEST_DIRECTORY_EVENTS;
        }
        if flags.contains(MpiFlags::I_AM_STARTER) {
            set |= DebuggerFlags::BEING_DEBUGGED;
        }
        update_debugger_flags(&target, info, set, DebuggerFlags::EMPTY).unwrap();
        tracer.resume(pid as u32).unwrap();
        held.insert(
            pid,
            Held {
                target,
                info,
                breakpoint,
                original,
            },
        );
    }

    // The spawn: directory 0 starts two ranks of a world spawned by rank 1.
    job.meta.send("spawn 0 1 2");
    let mut seen = Vec::new();
    let mut after = None;
    while !seen.iter().any(|(_, s)| *s == DebugState::Spawn) {
        let ev = tracer
            .wait(Duration::from_secs(20))
            .unwrap()
            .expect("an MPI2DD event within 20 s");
        let StopEvent::Breakpoint { pid, tid, address } = ev else {
            panic!("unexpected {ev:?}");
        };
        let h = &held[&(pid as i32)];
        assert_eq!(address, h.breakpoint);
        let event = read_event(&h.target, h.info, 4096).unwrap();
        seen.push((pid as i32, event.state));
        assert_eq!(event.reaction(), Reaction::Refresh);
        if event.state == DebugState::Spawn {
            // Still stopped in MPI2DD_breakpoint: the tables already list the new world.
            after = Some(traverse(&c, "localhost", meta, &opts).unwrap().job);
        }
        tracer.return_from_call(pid, tid).unwrap();
        tracer.resume(pid).unwrap();
    }
    assert_eq!(
        seen,
        [
            (job.dirs[0], DebugState::DirectoryChanged),
            (parent, DebugState::Spawn)
        ]
    );
    let started = job.read_spawned();
    let after = after.unwrap();
    assert!(after.problems.is_empty(), "{:?}", after.problems);

    let delta = before.delta(&after);
    let child_world = format!("{w0}.r1s0");
    let new: Vec<(&str, i32, i32)> = delta
        .new_ranks
        .iter()
        .map(|(w, r, p)| (&**w, *r, p.pid))
        .collect();
    assert_eq!(
        new,
        [
            (child_world.as_str(), 0, started[0]),
            (child_world.as_str(), 1, started[1])
        ]
    );
    assert!(delta.gone_ranks.is_empty() && delta.new_processes.is_empty());
    let cw = after.world(&child_world).unwrap();
    let s = cw.spawned_by.as_ref().unwrap();
    assert_eq!(
        (&s.parent_comm_world_id, s.parent_rank, s.sequence),
        (&w0, 1, 0)
    );
    assert_eq!(after.children(&w0).count(), 1);
    for &p in &started {
        assert_eq!(ppid(p), job.dirs[0], "spawned by directory 0");
        assert_eq!(
            tracer_pid(p),
            0,
            "new processes are not traced behind our back"
        );
    }

    // Detach: bytes restored, nobody traced; the flags we set stay, as the draft intends.
    for (pid, h) in &held {
        tracer.detach(*pid as u32).unwrap();
        assert_eq!(h.target.read_vec(h.breakpoint, 1).unwrap(), h.original);
        assert_eq!(tracer_pid(*pid), 0);
    }
    let d0 = &held[&job.dirs[0]];
    let flags = read_info_at(&d0.target, d0.info).unwrap().debugger_flags;
    assert_eq!(flags, DebuggerFlags::REQUEST_DIRECTORY_EVENTS);
    // With nobody attached, events are calls to an empty function: the job carries on.
    assert_eq!(job.spawn(1, 3, 1).len(), 1);
    drop(held);
    drop(tracer);
    assert!(job.meta.finish().success());
}
