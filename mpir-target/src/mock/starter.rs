//! A fake MPIR starter laid out in a [`MockTarget`](super::MockTarget): the symbols, the
//! process descriptor table and its strings, in any data model and `MPIR_PROCDESC` layout.

use std::collections::HashMap;

use mpir_types::mpir::{self, DebugState, ProcDescLayout, RawProcDesc, symbols};
use mpir_types::{LayoutSource, TypeLayout};

use super::MockTargetBuilder;

/// One rank of a [`MockStarter`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockRank {
    /// Host name.
    pub host: String,
    /// Executable name.
    pub executable: String,
    /// Pid.
    pub pid: i64,
}

impl MockRank {
    /// A rank on `host` running `executable` as `pid`.
    pub fn new(host: impl Into<String>, executable: impl Into<String>, pid: i64) -> Self {
        MockRank {
            host: host.into(),
            executable: executable.into(),
            pid,
        }
    }
}

/// A recipe for an MPIR starter. Fields are public; [`MockStarter::new`] gives the common case
/// (ABI layout, shared strings, `MPIR_DEBUG_SPAWNED`, `MPIR_i_am_starter` present).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockStarter {
    /// The ranks, in rank order.
    pub ranks: Vec<MockRank>,
    /// Store each distinct string once (as the spec recommends) rather than once per entry.
    pub share_strings: bool,
    /// Lay the table out in this layout and describe it as debug information would (type
    /// `MPIR_PROCDESC`, pointee of `MPIR_proctable`); `None` uses the ABI layout and registers no
    /// type.
    pub layout: Option<ProcDescLayout>,
    /// Value of `MPIR_debug_state`.
    pub debug_state: DebugState,
    /// Presence-only flags to define, with their `int` values (real starters use 0).
    pub flags: Vec<(String, i64)>,
    /// `MPIR_debug_abort_string`, when defined.
    pub abort_string: Option<String>,
}

/// Where [`MockStarter::place`] put things.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlacedStarter {
    /// Address of the table (the value of `MPIR_proctable`).
    pub table_address: u64,
    /// The layout used.
    pub layout: ProcDescLayout,
    /// The entries as stored.
    pub raw: Vec<RawProcDesc>,
}

impl MockStarter {
    /// A spawned job of `ranks`, ABI layout, shared strings, `MPIR_i_am_starter` present.
    pub fn new(ranks: Vec<MockRank>) -> Self {
        MockStarter {
            ranks,
            share_strings: true,
            layout: None,
            debug_state: DebugState::Spawned,
            flags: vec![(symbols::I_AM_STARTER.into(), 0)],
            abort_string: None,
        }
    }

    /// `n` ranks named `host{i % hosts}` running `executable`, pids from `first_pid`.
    pub fn uniform(n: usize, hosts: usize, executable: &str, first_pid: i64) -> Self {
        MockStarter::new(
            (0..n)
                .map(|i| {
                    MockRank::new(
                        format!("node{:02}", i % hosts.max(1)),
                        executable,
                        first_pid + i as i64,
                    )
                })
                .collect(),
        )
    }

    /// Lays the starter out in `b`: `MPIR_Breakpoint`, `MPIR_debug_state`,
    /// `MPIR_being_debugged` (0), `MPIR_proctable(_size)`, the table and its strings, the flags and
    /// the abort string.
    ///
    /// # Panics
    /// If a value does not fit the builder's data model (e.g. a pid too large for the layout).
    pub fn place(&self, b: &mut MockTargetBuilder) -> PlacedStarter {
        let model = b.model();
        let layout = self
            .layout
            .clone()
            .unwrap_or_else(|| ProcDescLayout::abi(&model));
        let mut shared: HashMap<String, u64> = HashMap::new();
        let mut string = |b: &mut MockTargetBuilder, s: &str| {
            if self.share_strings {
                *shared.entry(s.to_string()).or_insert_with(|| b.cstring(s))
            } else {
                b.cstring(s)
            }
        };
        let raw: Vec<RawProcDesc> = self
            .ranks
            .iter()
            .map(|r| RawProcDesc {
                host_name: string(b, &r.host),
                executable_name: string(b, &r.executable),
                pid: r.pid,
            })
            .collect();
        let len = layout.size * raw.len() as u64;
        // Padding holds garbage in real tables: make sure nobody decodes it.
        let table_address = b.alloc_with(vec![0xa5; len as usize]);
        b.write_with(table_address, len, |v| {
            let bytes = v.as_view().bytes().len();
            let mut tmp = vec![0xa5; bytes];
            mpir::encode_proctable(&model, &layout, table_address, &raw, &mut tmp)?;
            v.put_bytes(0, &tmp, "MPIR_proctable")
        });
        b.function(symbols::BREAKPOINT);
        b.int_variable(symbols::DEBUG_STATE, self.debug_state.to_raw());
        b.int_variable(symbols::BEING_DEBUGGED, 0);
        b.int_variable(symbols::PROCTABLE_SIZE, raw.len() as i64);
        b.pointer_variable(symbols::PROCTABLE, table_address);
        for (name, value) in &self.flags {
            b.int_variable(name, *value);
        }
        if let Some(text) = &self.abort_string {
            let s = b.cstring(text);
            b.pointer_variable(symbols::DEBUG_ABORT_STRING, s);
        }
        if let Some(given) = &self.layout {
            let ty = TypeLayout::new(
                "MPIR_PROCDESC",
                given.size,
                LayoutSource::DebugInfo {
                    file: Some("mock".into()),
                },
            )
            .with_member("host_name", given.host_name.offset, given.host_name.size)
            .with_member(
                "executable_name",
                given.executable_name.offset,
                given.executable_name.size,
            )
            .with_member("pid", given.pid.offset, given.pid.size);
            b.type_layout(ty);
            b.variable_type(symbols::PROCTABLE, "MPIR_PROCDESC");
        }
        PlacedStarter {
            table_address,
            layout,
            raw,
        }
    }
}
