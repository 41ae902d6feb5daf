//! `mpir_options_set_other_nodes` and the agent settings: how a session reads the job's ranks
//! on other nodes — through `mpir agent`s started by the job's own engine, as `mpir` does
//! (`mpir_agent::reach_from_library`).

use std::ffi::{c_char, c_int};
use std::time::Duration;

use crate::error::{Failure, Result, guard, mpir_status};
use crate::options::{bytes, mpir_options, optional_path, update};

// Symbol versions (MPIR_0.1, see mpir.map and the crate root).
std::arch::global_asm!(
    ".symver mpir_options_set_other_nodes, mpir_options_set_other_nodes@@@MPIR_0.1",
    ".symver mpir_options_set_agent_program, mpir_options_set_agent_program@@@MPIR_0.1",
    ".symver mpir_options_set_agent_launch, mpir_options_set_agent_launch@@@MPIR_0.1",
    ".symver mpir_options_set_agent_fanout, mpir_options_set_agent_fanout@@@MPIR_0.1",
    ".symver mpir_options_set_agent_listen, mpir_options_set_agent_listen@@@MPIR_0.1",
    ".symver mpir_options_set_agent_token_dir, mpir_options_set_agent_token_dir@@@MPIR_0.1",
    ".symver mpir_options_set_agent_timeout_ms, mpir_options_set_agent_timeout_ms@@@MPIR_0.1",
);

/// `s` as UTF-8, or `MPIR_STATUS_INVALID_UTF8` naming `what`.
fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str> {
    std::str::from_utf8(b).map_err(|e| {
        Failure::new(
            mpir_status::MPIR_STATUS_INVALID_UTF8,
            format!("{what} {:?} is not UTF-8: {e}", String::from_utf8_lossy(b)),
        )
    })
}

/// Nonzero (the default): a session of a job with ranks on other nodes reads them too, through
/// an `mpir agent` on each such node started by the job's own engine (srun beside a Slurm job,
/// a second hydra job, Open MPI's tool daemons, or the template of
/// [`mpir_options_set_agent_launch`]); the documents then cover the whole job, as `mpir`'s do.
/// When no engine is known and no template or program was set, those ranks stay unread (each
/// says it runs on another node). Zero: only this node's ranks are read.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_other_nodes(
    opts: *mut mpir_options,
    enabled: c_int,
) -> mpir_status {
    guard("mpir_options_set_other_nodes", || {
        update(opts, |o| {
            o.other_nodes.enabled = enabled != 0;
            Ok(())
        })
    })
}

/// The `mpir` program the other nodes run as their agent (the same path there: one
/// installation on a shared file system). NULL: the first `mpir` on the `PATH`. A program set
/// here that cannot be used fails the session's creation. The path is bytes.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_agent_program(
    opts: *mut mpir_options,
    path: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_agent_program", || {
        // SAFETY: the caller's contract.
        let path = unsafe { optional_path(path, "path") }?;
        update(opts, |o| {
            o.other_nodes.program = path;
            Ok(())
        })
    })
}

/// How to start the agent on each other node: a command with `{host}` and `{agent}` that
/// forwards the agent's standard input and output, run without a shell (`mpir
/// --agent-launch`, e.g. `"ssh {host} {agent}"`). NULL: the job's own engine. UTF-8.
///
/// # Safety
/// `command` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_agent_launch(
    opts: *mut mpir_options,
    command: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_agent_launch", || {
        let command = if command.is_null() {
            None
        } else {
            // SAFETY: not NULL; the caller's contract.
            let b = unsafe { bytes(command, "command") }?;
            Some(utf8(b, "command")?.to_string())
        };
        update(opts, |o| {
            o.other_nodes.launch = command;
            Ok(())
        })
    })
}

/// Most agents one program starts and talks to (2 to 1024; past that many nodes the agents
/// form a tree); 0 restores the default (32).
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_agent_fanout(
    opts: *mut mpir_options,
    fanout: u32,
) -> mpir_status {
    guard("mpir_options_set_agent_fanout", || {
        if fanout == 1 || fanout > 1024 {
            return Err(Failure::new(
                mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
                format!("fanout {fanout}: between 2 and 1024 (0 for the default)"),
            ));
        }
        update(opts, |o| {
            o.other_nodes.fanout = (fanout > 0).then_some(fanout);
            Ok(())
        })
    })
}

/// Where agents that connect back (Open MPI's tool daemons) connect: an IP address of this
/// node, with or without a port (`"10.0.0.1"`, `"10.0.0.1:4000"`, `"[::1]:4000"`). NULL: the
/// address this node reaches their nodes from.
///
/// # Safety
/// `address` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_agent_listen(
    opts: *mut mpir_options,
    address: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_agent_listen", || {
        let address = if address.is_null() {
            None
        } else {
            // SAFETY: not NULL; the caller's contract.
            let b = unsafe { bytes(address, "address") }?;
            let text = utf8(b, "address")?;
            Some(
                mpir_agent::parse_listen(text)
                    .map_err(|e| Failure::new(mpir_status::MPIR_STATUS_INVALID_ARGUMENT, e))?,
            )
        };
        update(opts, |o| {
            o.other_nodes.listen = address;
            Ok(())
        })
    })
}

/// Where the private directory of the connecting agents' one-time token files is made: a
/// directory this node and the job's nodes share. NULL: `~/.mpir/agent-tokens`. Bytes.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_agent_token_dir(
    opts: *mut mpir_options,
    dir: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_agent_token_dir", || {
        // SAFETY: the caller's contract.
        let dir = unsafe { optional_path(dir, "dir") }?;
        update(opts, |o| {
            o.other_nodes.token_dir = dir;
            Ok(())
        })
    })
}

/// Longest wait, in milliseconds, for every agent to start and for every agent's answer to a
/// read (plus the time its samples take); 0 restores the default.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_agent_timeout_ms(
    opts: *mut mpir_options,
    ms: u64,
) -> mpir_status {
    guard("mpir_options_set_agent_timeout_ms", || {
        update(opts, |o| {
            o.other_nodes.timeout = (ms > 0).then(|| Duration::from_millis(ms));
            Ok(())
        })
    })
}
