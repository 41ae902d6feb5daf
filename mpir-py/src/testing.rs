//! `mpir.testing`'s reader: a fake MPIR starter laid out in a [`MockTarget`] (the library's
//! own [`MockStarter`]), then read by the library's own acquisition protocol
//! ([`Acquisition`] in attach mode, no rank touched) — so a tool's test suite sees exactly
//! what a real starter with that table would give: typed ranks, the table's problems, or the
//! acquisition's error.
//!
//! Hostile tables are the point: names that are not UTF-8 or cannot be read, pids that are
//! not pids, `MPIR_proctable_size` past the table (or negative, or huge), an unknown
//! `MPIR_debug_state`.

use std::collections::HashSet;

use mpir_acquire::{AcquireOptions, Acquisition, Action, Event, Mode};
use mpir_target::mock::{Access, MockRank, MockStarter, MockTarget};
use mpir_target::{MemoryExt, SymbolLookupExt};
use mpir_types::DataModel;
use mpir_types::mpir::symbols;
use mpir_types::node::ThisNode;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::err;
use crate::session::{RankRow, rank_rows};

/// A string of a mock table: its bytes (no NUL needed), or `None` for one that cannot be
/// read.
type MockString = Option<Vec<u8>>;

/// What the reader gives Python: the ranks (as `Session.ranks` rows), the table's problems,
/// the acquisition's notes.
type MockJob = (Vec<RankRow>, Vec<String>, Vec<String>);

/// The data models by name.
fn model(name: &str) -> PyResult<DataModel> {
    Ok(match name {
        "lp64-le" => DataModel::LP64,
        "lp64-be" => DataModel::LP64_BE,
        "ilp32-le" => DataModel::ILP32,
        "ilp32-be" => DataModel::ILP32_BE,
        "llp64-le" => DataModel::LLP64,
        other => {
            return Err(PyValueError::new_err(format!(
                "model {other:?}: one of \"lp64-le\", \"lp64-be\", \"ilp32-le\", \"ilp32-be\", \"llp64-le\""
            )));
        }
    })
}

/// A C `int` of the model (every model here has a 4-byte `int`).
fn c_int(what: &str, value: i64) -> PyResult<i64> {
    if i32::try_from(value).is_ok() {
        Ok(value)
    } else {
        Err(PyValueError::new_err(format!(
            "{what} = {value} does not fit the target's C int"
        )))
    }
}

/// Lays out a starter with `ranks` (host, executable, pid) in a mock target of `model`, then
/// reads its job as `mpir` would attach to it: typed ranks, problems, notes; or raises
/// `AcquireError` with the library's message.
///
/// `proctable_size` overrides `MPIR_proctable_size` after the table is laid out (a count past
/// the table, negative, or huge); `debug_state` overrides `MPIR_debug_state` (1 = spawned);
/// `this_node` names the hosts that are this node (the ranks' `local`).
#[pyfunction]
#[pyo3(signature = (ranks, model_name="lp64-le", proctable_size=None, debug_state=1, this_node=Vec::new(), share_strings=true))]
pub(crate) fn read_mock_job(
    ranks: Vec<(MockString, MockString, i64)>,
    model_name: &str,
    proctable_size: Option<i64>,
    debug_state: i64,
    this_node: Vec<String>,
    share_strings: bool,
) -> PyResult<MockJob> {
    let data_model = model(model_name)?;
    let target = lay_out(&ranks, data_model, share_strings)?;
    let address = |name: &str| -> PyResult<u64> {
        target
            .require_symbol(name)
            .map(|s| s.address)
            .map_err(|e| err("Error", mpir_session::chain(&e)))
    };
    let write = |name: &str, value: i64| -> PyResult<()> {
        target
            .write_c_int(address(name)?, c_int(name, value)?, name)
            .map_err(|e| err("Error", mpir_session::chain(&e)))
    };
    if let Some(size) = proctable_size {
        write(symbols::PROCTABLE_SIZE, size)?;
    }
    write(symbols::DEBUG_STATE, debug_state)?;
    let mut node = ThisNode::new();
    for name in this_node {
        node = node.with_name(&name);
    }
    let options = AcquireOptions::default()
        .with_this_node(node)
        .with_hold(false);
    let mut acquisition = Acquisition::new(1, Mode::Attach, options);
    let mut events = [Event::Attached, Event::Timeout].into_iter();
    loop {
        let Some(event) = events.next() else {
            return Err(err(
                "AcquireError",
                "the mock starter's job was not acquired (the acquisition still waits)",
            ));
        };
        acquisition.handle(&target, event);
        while let Some(action) = acquisition.poll_action() {
            match action {
                Action::Failed(e) => return Err(err("AcquireError", mpir_session::chain(&e))),
                Action::Finished => {
                    let job = acquisition
                        .take_job()
                        .ok_or_else(|| err("Error", "the acquisition finished without a job"))?;
                    return Ok(job_rows(&job));
                }
                _ => {}
            }
        }
    }
}

/// The mock target: the library's `MockStarter`, then the strings it cannot express
/// (bytes that are not UTF-8, unreadable strings) written over their placeholders.
fn lay_out(
    ranks: &[(MockString, MockString, i64)],
    model: DataModel,
    share_strings: bool,
) -> PyResult<MockTarget> {
    let plain = |s: &MockString| -> Option<String> {
        s.as_ref()
            .and_then(|b| String::from_utf8(b.clone()).ok())
            .filter(|t| !t.contains('\0'))
    };
    let mut patches: Vec<(usize, bool, &MockString)> = Vec::new();
    let mut mock_ranks = Vec::with_capacity(ranks.len());
    for (i, (host, exe, pid)) in ranks.iter().enumerate() {
        c_int("pid", *pid)?;
        let mut texts = [String::new(), String::new()];
        for (slot, (s, is_host)) in texts.iter_mut().zip([(host, true), (exe, false)]) {
            *slot = match plain(s) {
                Some(t) => t,
                None => {
                    patches.push((i, is_host, s));
                    "?".repeat(s.as_ref().map_or(0, Vec::len))
                }
            };
        }
        let [host_text, exe_text] = texts;
        mock_ranks.push(MockRank::new(host_text, exe_text, *pid));
    }
    let mut starter = MockStarter::new(mock_ranks);
    // Patched strings need a region of their own each.
    starter.share_strings = share_strings && patches.is_empty();
    let mut builder = MockTarget::builder(model);
    let placed = starter.place(&mut builder);
    let mut protected = HashSet::new();
    for (i, is_host, s) in patches {
        let Some(raw) = placed.raw.get(i) else {
            continue;
        };
        let address = if is_host {
            raw.host_name
        } else {
            raw.executable_name
        };
        match s {
            Some(bytes) => {
                let mut with_nul = bytes.clone();
                with_nul.push(0);
                let len = with_nul.len() as u64;
                builder.write_with(address, len, |v| v.put_bytes(0, &with_nul, "mock string"));
            }
            None => {
                if protected.insert(address) {
                    builder.set_access(address, Access::NONE);
                }
            }
        }
    }
    Ok(builder.build())
}

/// The job's ranks, problems and notes.
fn job_rows(job: &mpir_acquire::Job) -> MockJob {
    let ranks = rank_rows(job);
    let problems = job
        .table
        .resolved
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    let notes = job.notes.iter().map(ToString::to_string).collect();
    (ranks, problems, notes)
}
