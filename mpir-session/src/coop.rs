//! Ranks the kernel refuses this tool, read through their cooperative channel (issue 32): a
//! rank that runs mpir-rs's preload library answers for itself over a private per-user socket
//! (mpir-waits' COOP.md) — its memory map, its memory, every thread's registers and stack —
//! so that stacks, queues and wait states are read where `ptrace` and `process_vm_readv` are
//! forbidden (Yama scope 3, a seccomp profile, a non-dumpable rank).
//!
//! Used only for a rank whose refusal is permanent ([`AccessDenial::is_transient`] is false:
//! a rank another tracer holds is stopped, and its channel could not answer), and only once
//! the channel proves it is that process: the socket's peer is the pid (`SO_PEERCRED`, checked
//! by the client), owned by this tool's user, and its announcement agrees with `/proc` (start
//! time) and with the table (rank). The rank is not stopped: each thread copies its own
//! registers and stack when asked, and the reads are of a running process.
//!
//! When even the starter cannot be read, the job's table is built from the channels'
//! announcements ([`announced_job`]): the processes descending from the starter, each proven
//! as a table's rank would be (owner, start time, executable), one per rank of one size.

use std::rc::Rc;
use std::sync::Arc;

use mpir_target::live::coop::{CoopClient, CoopMemory};
use mpir_target::live::{LiveMemory, LiveTarget, procfs};
use mpir_types::access::AccessDenial;

use crate::channel::{CHANNEL_TIMEOUT, CoopRank};
use crate::session::Session;

impl Session {
    /// Rank `pid` (rank `rank` of the table, when known) through its channel, in place of
    /// a read the kernel refused for `denial`: `None` when it has no channel or the channel
    /// does not prove to be that process (the refusal stands).
    pub(crate) fn cooperate(
        &mut self,
        pid: u32,
        rank: Option<u64>,
        denial: &AccessDenial,
    ) -> Option<CoopRank> {
        let start = procfs::start_time(pid).ok()?;
        if let Some(c) = self.coop.get(&pid)
            && c.start == start
        {
            return Some(c.clone());
        }
        let mut client = CoopClient::connect(pid, CHANNEL_TIMEOUT).ok()?;
        let said = client.hello().ok()?;
        if said.start_time != start || rank.zip(said.rank).is_some_and(|(a, b)| a != b) {
            return None;
        }
        let maps = client.maps().ok()?;
        let images = mpir_target::debuginfo::ProcessImages::from_maps_text(
            &maps,
            Some(&said.executable),
            self.options.acquire.debug.clone(),
            Arc::clone(&self.files),
        )
        .ok()?;
        let model = images.data_model();
        let memory = Arc::new(CoopMemory::new(client, model));
        let live = LiveMemory::through(pid, model, Arc::clone(&memory) as _);
        let c = CoopRank {
            start,
            target: Rc::new(LiveTarget::new(live, images)),
            memory,
            denial: denial.clone(),
        };
        self.coop.insert(pid, c.clone());
        Some(c)
    }
}
