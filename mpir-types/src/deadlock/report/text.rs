//! The report's text form: its summary line, then the collective mismatches, cycles with their
//! chains, blocked ranks, ranks not waiting, stack waits, where the waits came from and notes.

use std::fmt;

use super::waits::WaitOp;
use super::{DeadlockReport, Verdict};
use crate::deadlock::WaitSource;
use crate::deadlock::stuck::ranks_text;
use crate::stacks::BlockedCall;

impl DeadlockReport {
    /// The first line of the text form.
    pub fn summary(&self) -> String {
        let snaps = match self.samples {
            1 => "1 snapshot".to_string(),
            n => format!("{n} snapshots"),
        };
        let cycles = match self.cycles.len() {
            1 => "1 cycle".to_string(),
            n => format!("{n} cycles"),
        };
        match self.verdict {
            Verdict::NoCycle => {
                let mut s = format!(
                    "no cycle: {} ranks, {} waiting operations, none waits in a cycle ({snaps})",
                    self.ranks,
                    self.waits.len()
                );
                if let Some(w) = self.stack_waits.as_ref().filter(|w| !w.hang) {
                    s.push_str(&format!(
                        "; but {} inside MPI waiting for what no queue shows, so no verdict about them",
                        ranks_text(&w.blocked_ranks())
                    ));
                }
                if !self.blocked.is_empty() {
                    s.push_str(&format!(
                        "; {} ranks wait on ranks that finalized, are finalizing or exited",
                        self.blocked.len()
                    ));
                }
                s
            }
            Verdict::PotentialDeadlock => format!(
                "potential deadlock: {cycles} of pending operations ({snaps}; queues do not show whether a rank is blocked)"
            ),
            Verdict::Deadlock => {
                format!("deadlock: {cycles}, the same pending operations in all {snaps}")
            }
            Verdict::PotentialCollectiveMismatch => format!(
                "potential collective hang: {} ({snaps}; ranks may still be on their way)",
                self.collective_text()
            ),
            Verdict::CollectiveMismatch => format!(
                "collective hang: {}, the same in all {snaps}",
                self.collective_text()
            ),
            Verdict::PotentialBlockedInMpi => format!(
                "potential hang: every rank is inside MPI and none has a wait the queues show \
                 ({snaps}; who waits for whom is unknown, and ranks may still be moving)"
            ),
            Verdict::BlockedInMpi => format!(
                "hang: every rank is blocked inside MPI and none moved in all {snaps}; who \
                 waits for whom is unknown (no queue shows their waits)"
            ),
        }
    }

    fn collective_text(&self) -> String {
        let parts: Vec<String> = self.collective.iter().map(|c| c.to_string()).collect();
        parts.join(" | ")
    }
}

/// ` in MPI_Recv at main (ring.c:12)`, or nothing.
fn in_call(c: Option<&BlockedCall>) -> String {
    c.map_or_else(String::new, |c| format!(" in {c}"))
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        if self.has_cycle() {
            for c in &self.collective {
                writeln!(f, "collective mismatch too: {c}")?;
            }
        }
        for c in &self.collective {
            for call in &c.calls {
                for s in &call.call_sites {
                    writeln!(f, "  {} called at {s}", call.call)?;
                }
            }
            if !c.unknown.is_empty() {
                writeln!(
                    f,
                    "  not considered (activity unknown): ranks {}",
                    c.unknown
                )?;
            }
            if !c.not_members.is_empty() {
                writeln!(
                    f,
                    "  not considered (not members of its communicator): ranks {}",
                    c.not_members
                )?;
            }
        }
        for (i, c) in self.cycles.iter().enumerate() {
            let ranks: Vec<String> = c.ranks.iter().map(u64::to_string).collect();
            writeln!(f, "cycle {}: ranks {}", i + 1, ranks.join(" "))?;
            for s in &c.chain {
                writeln!(
                    f,
                    "  rank {:<5} {}; waits for rank {}{}",
                    s.rank,
                    s.op,
                    s.waits_for,
                    in_call(s.blocked_in.as_ref())
                )?;
            }
        }
        if !self.blocked.is_empty() {
            if self.has_cycle() {
                writeln!(f, "blocked by the deadlock (not in a cycle):")?;
            } else {
                writeln!(
                    f,
                    "blocked, waiting on ranks that finalized, are finalizing or exited:"
                )?;
            }
            for b in &self.blocked {
                let ops: Vec<String> = b.waits.iter().map(WaitOp::to_string).collect();
                let on: Vec<String> = b.waits_for.iter().map(u64::to_string).collect();
                writeln!(
                    f,
                    "  rank {:<5} {}; waits for rank {}{}",
                    b.rank,
                    ops.join("; "),
                    on.join(", "),
                    in_call(b.blocked_in.as_ref())
                )?;
            }
        }
        if !self.not_waiting.is_empty() {
            writeln!(
                f,
                "not waiting: not inside MPI, finalized or exited (their pending operations are not waits):"
            )?;
            for n in &self.not_waiting {
                let mut ops: Vec<String> = n.operations.iter().map(WaitOp::to_string).collect();
                if n.omitted > 0 {
                    ops.push(format!("{} more", n.omitted));
                }
                let ops = if ops.is_empty() {
                    String::new()
                } else {
                    format!("; pending {}", ops.join("; "))
                };
                writeln!(f, "  rank {:<5} {}{ops}", n.rank, n.activity)?;
            }
        }
        if let Some(w) = &self.stack_waits {
            w.write_lines(f)?;
        }
        if self.sources.iter().any(|s| s.source != WaitSource::Queues) {
            let parts: Vec<String> = self
                .sources
                .iter()
                .map(|s| {
                    let what = match s.source {
                        WaitSource::WaitStates => "wait-state export",
                        WaitSource::Queues => "message queues",
                        _ => "stacks alone",
                    };
                    format!("{what} for {}", ranks_text(&s.ranks))
                })
                .collect();
            writeln!(f, "waits read from: {}", parts.join("; "))?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if self.notes_omitted > 0 {
            writeln!(f, "note: {} more notes omitted", self.notes_omitted)?;
        }
        Ok(())
    }
}
