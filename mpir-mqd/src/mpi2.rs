//! The MPI-2 extensions of the interface ("MPI 2 extensions to the interface" in
//! `../shared/spec/message-queue-dumping.txt`), hosted when a DLL of interface version 3
//! provides them:
//!
//! - **The job object.** One per host at a time, a token like images and processes. It is set
//!   up (`mqs_setup_job`) before the first process is attached, carries what the DLL hangs on
//!   it (`put_job_info`/`get_job_info`), answers `get_process_job` for every process and
//!   `get_process(job, identity)`, and is destroyed (`mqs_destroy_job_info`) after the last
//!   process has been: when it is detached, or when the host is dropped.
//! - **Process identities.** After `mqs_setup_process` each process is named with
//!   `mqs_set_process_identity(process, global_rank)`; `get_process_identity` answers it. The
//!   DLL reports these identities in the global-rank fields of its results.
//! - **New processes.** `mqs_setup_new_process_iterator`/`mqs_next_new_process` list what a
//!   process spawned or connected to ([`Host::new_processes`]);
//!   `mqs_spawn_breakpoint_name` names the function to break on ([`Host::spawn_breakpoint_name`]).

// `c_long` is 64-bit here but 32-bit on other hosts: the widening conversion is needed there.
#![allow(clippy::useless_conversion)]

use std::ffi::{c_char, c_int};

use mpir_types::mqd::{INTERFACE_COMPATIBILITY_MPI2, result};

use crate::error::{MqdError, Result};
use crate::ffi::{Handle, RawProcessLocation, char_array_bytes};
use crate::host::{Host, ProcessId};

/// Room we give `mqs_spawn_breakpoint_name` for the function name.
pub(crate) const SPAWN_NAME_ROOM: usize = 4096;

/// Where a process created (or connected to) by another one is (`mqs_process_location`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ProcessLocation {
    /// Its process id.
    pub pid: i64,
    /// Its executable image (`image_name`, up to its first NUL or the array's end).
    pub image_name: String,
    /// The host it runs on (`host_name`, likewise bounded).
    pub host_name: String,
}

impl ProcessLocation {
    /// A location from its parts.
    pub fn new(pid: i64, image_name: impl Into<String>, host_name: impl Into<String>) -> Self {
        ProcessLocation {
            pid,
            image_name: image_name.into(),
            host_name: host_name.into(),
        }
    }

    fn from_raw(raw: &RawProcessLocation) -> Self {
        let text = |a: &[c_char]| String::from_utf8_lossy(&char_array_bytes(a)).into_owned();
        ProcessLocation {
            pid: i64::from(raw.pid),
            image_name: text(&raw.image_name),
            host_name: text(&raw.host_name),
        }
    }
}

/// [`MqdError::Unsupported`] for a host that does not implement `function` at all.
pub(crate) fn unsupported_here(path: &str, function: &str) -> MqdError {
    MqdError::Unsupported {
        path: path.to_string(),
        function: function.to_string(),
        reason: "this host does not implement it".into(),
    }
}

impl Host {
    /// Whether the DLL keeps an MPI-2 job object (interface version 3 and `mqs_setup_job`
    /// exported): then processes get identities and the job callbacks are live.
    pub fn has_jobs(&self) -> bool {
        self.dll.has_jobs()
    }

    fn unsupported(&self, function: &str) -> MqdError {
        let reason = if self.dll.compatibility < INTERFACE_COMPATIBILITY_MPI2 {
            format!(
                "it implements interface version {}, which has no MPI-2 functions",
                self.dll.compatibility
            )
        } else {
            "not exported".to_string()
        };
        MqdError::Unsupported {
            path: self.path.clone(),
            function: function.to_string(),
            reason,
        }
    }

    /// Refuses an identity already attached, when the DLL keeps a job.
    pub(crate) fn check_identity(&self, identity: i32) -> Result<()> {
        if self.dll.has_jobs() && self.shared.identity_in_use(identity) {
            return Err(MqdError::IdentityInUse {
                path: self.path.clone(),
                identity: crate::host::rank_from_dll(identity.into()),
            });
        }
        Ok(())
    }

    /// Sets the job up (`mqs_setup_job`) unless there is one or the DLL keeps none.
    pub(crate) fn ensure_job(&mut self) -> Result<()> {
        if !self.dll.has_jobs() || self.shared.job().is_some() {
            return Ok(());
        }
        let job = Handle::fresh();
        self.shared.set_job(job);
        self.shared.take_faults();
        let rc = self.call(|d| d.setup_job(job)).unwrap_or(result::OK);
        if rc != result::OK {
            let e = self.dll_error("mqs_setup_job", None, rc, None);
            self.end_job_if_idle();
            return Err(e);
        }
        Ok(())
    }

    /// `mqs_set_process_identity(process, identity)`, when the DLL keeps a job and exports it.
    pub(crate) fn set_identity(&self, process: Handle, identity: i32, image: &str) -> Result<()> {
        if !self.dll.has_jobs() {
            return Ok(());
        }
        let rc = self.call(|d| d.set_process_identity(process, c_int::from(identity)));
        match rc {
            None | Some(result::OK) => Ok(()),
            Some(rc) => Err(self.dll_error(
                "mqs_set_process_identity",
                Some(image.to_string()),
                rc,
                None,
            )),
        }
    }

    /// Destroys the job (`mqs_destroy_job_info` on what the DLL stored) once no process is
    /// attached: the spec calls it after all of the job's processes have been destroyed.
    pub(crate) fn end_job_if_idle(&self) {
        if self.shared.process_count() != 0 {
            return;
        }
        if let Some(job) = self.shared.take_job()
            && !job.info.is_null()
        {
            self.call(|d| d.destroy_job_info(job.info));
        }
    }

    /// The processes `process` created or connected to (`MPI_Comm_spawn`, `MPI_Comm_connect`,
    /// `MPI_Comm_join`): `mqs_setup_new_process_iterator`, then `mqs_next_new_process` until
    /// the end of the list, at most [`crate::HostOptions::max_new_processes`] of them. Empty
    /// when the DLL says there are none (`mqs_end_of_list` or `mqs_no_information` from the
    /// set-up). [`MqdError::Unsupported`] when the DLL does not provide the calls.
    pub fn new_processes(&mut self, process: ProcessId) -> Result<Vec<ProcessLocation>> {
        let p = process.process;
        let name = self
            .shared
            .image_name(process.image)
            .ok_or(MqdError::UnknownProcess { handle: p.0 })?;
        if !self.dll.has_new_processes() {
            return Err(
                self.unsupported(if self.dll.has_setup_new_process_iterator() {
                    "mqs_next_new_process"
                } else {
                    "mqs_setup_new_process_iterator"
                }),
            );
        }
        self.shared.take_faults();
        let rc = self
            .call(|d| d.setup_new_process_iterator(p))
            .unwrap_or(result::END_OF_LIST);
        match rc {
            result::OK => {}
            result::END_OF_LIST | result::NO_INFORMATION => return Ok(Vec::new()),
            _ => {
                return Err(self.dll_error("mqs_setup_new_process_iterator", Some(name), rc, None));
            }
        }
        let mut out = Vec::new();
        let mut raw = Box::new(RawProcessLocation::zeroed());
        loop {
            if out.len() >= self.options.max_new_processes {
                return Err(MqdError::Unbounded {
                    path: self.path.clone(),
                    what: "new processes".into(),
                    limit: self.options.max_new_processes,
                });
            }
            *raw = RawProcessLocation::zeroed();
            let rc = self
                .call(|d| d.next_new_process(p, &mut raw))
                .unwrap_or(result::END_OF_LIST);
            match rc {
                result::OK => out.push(ProcessLocation::from_raw(&raw)),
                result::END_OF_LIST => return Ok(out),
                _ => return Err(self.dll_error("mqs_next_new_process", Some(name), rc, None)),
            }
        }
    }

    /// The function on which a debugger sets a breakpoint to learn that `process` completed a
    /// spawn (`mqs_spawn_breakpoint_name`; we give the DLL 4096 chars and read back up to the
    /// first NUL within them). [`MqdError::Unsupported`] when the DLL does not provide it.
    pub fn spawn_breakpoint_name(&mut self, process: ProcessId) -> Result<String> {
        let p = process.process;
        let name = self
            .shared
            .image_name(process.image)
            .ok_or(MqdError::UnknownProcess { handle: p.0 })?;
        let mut buf: Vec<c_char> = vec![0; SPAWN_NAME_ROOM];
        self.shared.take_faults();
        let Some(rc) = self.call(|d| d.spawn_breakpoint_name(p, &mut buf)) else {
            return Err(self.unsupported("mqs_spawn_breakpoint_name"));
        };
        if rc != result::OK {
            return Err(self.dll_error("mqs_spawn_breakpoint_name", Some(name), rc, None));
        }
        Ok(String::from_utf8_lossy(&char_array_bytes(&buf)).into_owned())
    }
}
