//! The in-process host: one loaded DLL, the processes attached to it, and the iteration over
//! their communicators and queues.

// `c_long`/`c_ulong` are 64-bit here but 32-bit on other hosts: the widening conversions
// are needed there.
#![allow(clippy::useless_conversion)]
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;

use mpir_target::Target;
use mpir_types::mqd::{LengthUnit, OpClass, result};

use crate::error::{CallbackReport, MqdError, Result};
use crate::ffi::{self, Active, Dll, Handle};
use crate::model::CommunicatorQueues;
use crate::mpi2::ProcessLocation;
use crate::raw::{HostLayouts, RawCommQueues, RawQueue, infer_unit};
use crate::state::Shared;

/// DLLs hosted in this process (canonical paths): one host per DLL.
static HOSTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn hosted() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HOSTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a [`Host`] interprets and bounds what a DLL returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostOptions {
    /// Units of the DLL's lengths; `None` infers them from `mqs_version_string` (Open MPI's
    /// DLL counts bytes, MPICH's counts elements).
    pub length_unit: Option<LengthUnit>,
    /// Most communicators one process may report.
    pub max_communicators: usize,
    /// Most operations one queue of one communicator may report.
    pub max_operations: usize,
    /// Largest communicator whose group is fetched with `mqs_get_comm_group`.
    pub max_group_size: usize,
    /// Most new processes one process may report (`mqs_next_new_process`, MPI-2).
    pub max_new_processes: usize,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            length_unit: None,
            max_communicators: 1 << 16,
            max_operations: 1 << 20,
            max_group_size: 1 << 22,
            max_new_processes: 1 << 14,
        }
    }
}

impl HostOptions {
    /// The defaults with lengths in `unit`.
    pub fn with_length_unit(mut self, unit: LengthUnit) -> Self {
        self.length_unit = Some(unit);
        self
    }

    /// The defaults with other iteration bounds.
    pub fn with_bounds(mut self, communicators: usize, operations: usize) -> Self {
        self.max_communicators = communicators;
        self.max_operations = operations;
        self
    }
}

/// One process to attach: its image name (for messages), its target, and its rank in
/// `MPI_COMM_WORLD` (from the acquired job).
///
/// For a DLL with the MPI-2 job functions the rank is also the process's *identity*, which
/// the spec defines as the debugger's index in its `COMM_UNIVERSE`: `COMM_WORLD`'s ranks are
/// its prefix, and a process created by `MPI_Comm_spawn` gets an index past them. Identities
/// must then be unique among the attached processes.
#[non_exhaustive]
pub struct ProcessSpec {
    /// The executable image's name (used in the DLL's has-queues messages).
    pub image_name: String,
    /// The process: memory, symbols of all its images, types (DWARF or a types sidecar).
    pub target: Rc<dyn Target>,
    /// Rank in `MPI_COMM_WORLD` (the identity, for an MPI-2 DLL), when known.
    pub global_rank: Option<u64>,
}

impl ProcessSpec {
    /// A process of `image_name` read through `target`, of world rank `global_rank`.
    pub fn new(
        image_name: impl Into<String>,
        target: Rc<dyn Target>,
        global_rank: Option<u64>,
    ) -> Self {
        ProcessSpec {
            image_name: image_name.into(),
            target,
            global_rank,
        }
    }

    /// The rank as the DLL's interface carries it (a C `int`, -1 when unknown or too large).
    pub(crate) fn rank_for_dll(&self) -> c_int {
        rank_for_dll(self.global_rank)
    }
}

/// A global rank as the DLL's interface carries it (a C `int`, -1 when unknown or too large).
pub(crate) fn rank_for_dll(rank: Option<u64>) -> c_int {
    rank.and_then(|r| c_int::try_from(r).ok()).unwrap_or(-1)
}

/// A global rank the DLL's interface carried (negative: unknown).
pub(crate) fn rank_from_dll(rank: i64) -> Option<u64> {
    u64::try_from(rank).ok()
}

impl std::fmt::Debug for ProcessSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessSpec")
            .field("image_name", &self.image_name)
            .field("global_rank", &self.global_rank)
            .finish_non_exhaustive()
    }
}

/// A process attached to a [`Host`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    pub(crate) process: Handle,
    pub(crate) image: Handle,
}

impl ProcessId {
    /// The two handle values (for the pipe protocol).
    pub(crate) fn to_raw(self) -> (u64, u64) {
        (self.process.0 as u64, self.image.0 as u64)
    }

    /// From two handle values received over the pipe (a garbage pair is simply unknown).
    pub(crate) fn from_raw(process: u64, image: u64) -> Self {
        let h = |v: u64| Handle(usize::try_from(v).unwrap_or(0));
        ProcessId {
            process: h(process),
            image: h(image),
        }
    }
}

/// What both hosting modes offer: an [`crate::Host`] (in-process) and an
/// [`crate::OutOfProcessHost`] (a helper process) give the same answers through it; the caller
/// picks with [`crate::open_out_of_process`] or [`crate::open_in_process`] (or by constructing
/// either).
pub trait QueueHost: std::fmt::Debug {
    /// The DLL's path as given.
    fn path(&self) -> &str;
    /// `mqs_version_string()`.
    fn version(&self) -> &str;
    /// `mqs_version_compatibility()`.
    fn compatibility(&self) -> i32;
    /// `mqs_dll_taddr_width()`, when the DLL exports it.
    fn taddr_width(&self) -> Option<i32>;
    /// The optional exports the DLL has (e.g. `mqs_get_comm_group`).
    fn optional_exports(&self) -> &[&'static str];
    /// The units lengths are reported in.
    fn length_unit(&self) -> LengthUnit;
    /// Messages the DLL printed through `dprints` (most recent last, bounded).
    fn dll_messages(&self) -> Vec<String>;
    /// Ends the host and returns what the DLL printed on its own (on stderr), deduplicated
    /// and counted: the out-of-process host collects it from its helper; the in-process host
    /// cannot (the DLL writes to this process's own stderr) and returns an empty log.
    fn finish_printed(&mut self) -> crate::output::OutputLog {
        crate::output::OutputLog::new()
    }
    /// The has-queues messages for `process` (image, process), formatted with the image name.
    fn queue_messages(&self, process: ProcessId) -> (Option<&str>, Option<&str>);
    /// Attaches a process (see [`Host::attach`]).
    fn attach(&mut self, spec: ProcessSpec) -> Result<ProcessId>;
    /// Detaches a process (see [`Host::detach`]).
    fn detach(&mut self, process: ProcessId) -> Result<()>;
    /// Every communicator of `process` with its three queues, normalised (see
    /// [`Host::queues`]).
    fn queues(&mut self, process: ProcessId) -> Result<Vec<CommunicatorQueues>>;
    /// Whether the DLL keeps an MPI-2 job object (see [`Host::has_jobs`]): interface version 3
    /// and `mqs_setup_job` exported.
    fn has_jobs(&self) -> bool {
        self.compatibility() == mpir_types::mqd::INTERFACE_COMPATIBILITY_MPI2
            && self.optional_exports().contains(&"mqs_setup_job")
    }
    /// The processes `process` created or connected to (MPI-2; see [`Host::new_processes`]).
    /// Unless implemented: [`MqdError::Unsupported`].
    fn new_processes(&mut self, process: ProcessId) -> Result<Vec<ProcessLocation>> {
        let _ = process;
        Err(crate::mpi2::unsupported_here(
            self.path(),
            "mqs_setup_new_process_iterator",
        ))
    }
    /// The function to break on to learn of spawned processes (MPI-2; see
    /// [`Host::spawn_breakpoint_name`]). Unless implemented: [`MqdError::Unsupported`].
    fn spawn_breakpoint_name(&mut self, process: ProcessId) -> Result<String> {
        let _ = process;
        Err(crate::mpi2::unsupported_here(
            self.path(),
            "mqs_spawn_breakpoint_name",
        ))
    }
}

impl QueueHost for Host {
    fn path(&self) -> &str {
        Host::path(self)
    }
    fn version(&self) -> &str {
        Host::version(self)
    }
    fn compatibility(&self) -> i32 {
        Host::compatibility(self)
    }
    fn taddr_width(&self) -> Option<i32> {
        Host::taddr_width(self)
    }
    fn optional_exports(&self) -> &[&'static str] {
        Host::optional_exports(self)
    }
    fn length_unit(&self) -> LengthUnit {
        Host::length_unit(self)
    }
    fn dll_messages(&self) -> Vec<String> {
        Host::dll_messages(self)
    }
    fn queue_messages(&self, process: ProcessId) -> (Option<&str>, Option<&str>) {
        Host::queue_messages(self, process)
    }
    fn attach(&mut self, spec: ProcessSpec) -> Result<ProcessId> {
        Host::attach(self, spec)
    }
    fn detach(&mut self, process: ProcessId) -> Result<()> {
        Host::detach(self, process)
    }
    fn queues(&mut self, process: ProcessId) -> Result<Vec<CommunicatorQueues>> {
        Host::queues(self, process)
    }
    fn has_jobs(&self) -> bool {
        Host::has_jobs(self)
    }
    fn new_processes(&mut self, process: ProcessId) -> Result<Vec<ProcessLocation>> {
        Host::new_processes(self, process)
    }
    fn spawn_breakpoint_name(&mut self, process: ProcessId) -> Result<String> {
        Host::spawn_breakpoint_name(self, process)
    }
}

/// Formats a has-queues message, which the interface defines as a printf format taking the
/// image name: `%s` becomes `image`, `%%` a percent sign; anything else is kept as written
/// (never handed to a real printf).
pub fn format_queue_message(format: &str, image: &str) -> String {
    let mut out = String::with_capacity(format.len() + image.len());
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('s') => {
                    chars.next();
                    out.push_str(image);
                    continue;
                }
                Some('%') => {
                    chars.next();
                    out.push('%');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// An MQD DLL loaded into this process, with the processes attached to it.
///
/// A host is bound to the thread that created it (it is neither `Send` nor `Sync`): the DLL
/// is called from that thread only, as real DLLs require, and only one host per DLL may exist
/// in the process at a time.
pub struct Host {
    pub(crate) dll: Dll,
    pub(crate) shared: Rc<Shared>,
    pub(crate) path: String,
    canonical: PathBuf,
    version: String,
    unit: LengthUnit,
    pub(crate) options: HostOptions,
    messages: Vec<(ProcessId, Option<String>, Option<String>)>,
    layouts: HostLayouts,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("unit", &self.unit)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The shared part of [`Host::load`]: one host per DLL, `loader` does the loading.
    pub(crate) fn open_with(
        path: &Path,
        options: HostOptions,
        loader: impl FnOnce(&Path) -> Result<Dll>,
    ) -> Result<Host> {
        let shown = path.display().to_string();
        let canonical = std::fs::canonicalize(path).map_err(|e| MqdError::Load {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        {
            let mut hosted = hosted();
            if hosted.contains(&canonical) {
                return Err(MqdError::AlreadyHosted {
                    path: canonical.display().to_string(),
                });
            }
            hosted.push(canonical.clone());
        }
        let shared = Rc::new(Shared::default());
        let loaded = {
            let _active = Active::enter(&shared);
            loader(&canonical)
        };
        let dll = match loaded {
            Ok(dll) => dll,
            Err(e) => {
                hosted().retain(|p| p != &canonical);
                return Err(e);
            }
        };
        let version = {
            let _active = Active::enter(&shared);
            dll.version_string()
        };
        let unit = infer_unit(options.length_unit, &version);
        Ok(Host {
            dll,
            shared,
            path: shown,
            canonical,
            version,
            unit,
            options,
            messages: Vec::new(),
            layouts: HostLayouts::new(),
        })
    }

    /// The DLL's path as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `mqs_version_string()`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `mqs_version_compatibility()`.
    pub fn compatibility(&self) -> i32 {
        self.dll.compatibility
    }

    /// `mqs_dll_taddr_width()`, when the DLL exports it.
    pub fn taddr_width(&self) -> Option<i32> {
        self.dll.taddr_width
    }

    /// The optional exports the DLL has (e.g. `mqs_get_comm_group`).
    pub fn optional_exports(&self) -> &[&'static str] {
        &self.dll.optional
    }

    /// The units lengths are reported in.
    pub fn length_unit(&self) -> LengthUnit {
        self.unit
    }

    /// Messages the DLL printed through `dprints` (most recent last, bounded).
    pub fn dll_messages(&self) -> Vec<String> {
        self.shared.messages()
    }

    /// The has-queues messages for `process` (image, process), formatted with the image name.
    /// MPICH's DLL sets one even on success.
    pub fn queue_messages(&self, process: ProcessId) -> (Option<&str>, Option<&str>) {
        self.messages
            .iter()
            .find(|(p, _, _)| *p == process)
            .map_or((None, None), |(_, i, p)| (i.as_deref(), p.as_deref()))
    }

    pub(crate) fn call<R>(&self, f: impl FnOnce(&Dll) -> R) -> R {
        let _active = Active::enter(&self.shared);
        f(&self.dll)
    }

    pub(crate) fn dll_error(
        &self,
        call: &'static str,
        image: Option<String>,
        code: c_int,
        message: Option<String>,
    ) -> MqdError {
        let message = message.unwrap_or_else(|| self.call(|d| d.error_string(code)));
        let (faults, missing_types) = self.shared.take_call_faults();
        MqdError::Dll {
            path: self.path.clone(),
            call,
            image,
            code,
            message,
            callbacks: Box::new(CallbackReport::new(faults, missing_types)),
        }
    }

    /// Attaches a process: `mqs_setup_image` and `mqs_image_has_queues` on its image, then
    /// `mqs_setup_process` and `mqs_process_has_queues`. Each process gets its own image
    /// object, so symbol addresses are the process's own (shared libraries load at different
    /// addresses in different ranks).
    ///
    /// With a DLL that has the MPI-2 job functions (interface version 3, `mqs_setup_job`
    /// exported), the first attach sets the job up (`mqs_setup_job`), and each process is
    /// named with `mqs_set_process_identity(process, global_rank)` right after
    /// `mqs_setup_process`; an identity already attached is [`MqdError::IdentityInUse`].
    pub fn attach(&mut self, spec: ProcessSpec) -> Result<ProcessId> {
        let rank = spec.rank_for_dll();
        self.check_identity(rank)?;
        self.ensure_job()?;
        let image = Handle::fresh();
        let process = Handle::fresh();
        let id = ProcessId { process, image };
        let name = spec.image_name.clone();
        self.shared
            .add_image(image, spec.image_name, Rc::clone(&spec.target));
        self.shared.take_faults();
        let rc = self.call(|d| d.setup_image(image));
        if rc != result::OK {
            let e = self.dll_error("mqs_setup_image", Some(name), rc, None);
            self.teardown(id);
            return Err(e);
        }
        let (rc, msg) = self.call(|d| d.image_has_queues(image));
        let image_msg = msg.map(|m| format_queue_message(&m, &name));
        if rc != result::OK {
            let e = self.dll_error("mqs_image_has_queues", Some(name), rc, image_msg);
            self.teardown(id);
            return Err(e);
        }
        self.shared.add_process(process, image, spec.target, rank);
        let rc = self.call(|d| d.setup_process(process));
        if rc != result::OK {
            let e = self.dll_error("mqs_setup_process", Some(name), rc, None);
            self.teardown(id);
            return Err(e);
        }
        if let Err(e) = self.set_identity(process, rank, &name) {
            self.teardown(id);
            return Err(e);
        }
        let (rc, msg) = self.call(|d| d.process_has_queues(process));
        let process_msg = msg.map(|m| format_queue_message(&m, &name));
        if rc != result::OK {
            let e = self.dll_error("mqs_process_has_queues", Some(name), rc, process_msg);
            self.teardown(id);
            return Err(e);
        }
        self.messages.push((id, image_msg, process_msg));
        Ok(id)
    }

    /// Detaches a process: the DLL destroys what it kept on it and on its image (and, when it
    /// was the last process of an MPI-2 job, on the job: `mqs_destroy_job_info`).
    pub fn detach(&mut self, process: ProcessId) -> Result<()> {
        if self.shared.image_of(process.process).is_none() {
            return Err(MqdError::UnknownProcess {
                handle: process.process.0,
            });
        }
        self.teardown(process);
        Ok(())
    }

    fn teardown(&mut self, id: ProcessId) {
        if let Some(p) = self.shared.remove_process(id.process)
            && !p.info.is_null()
        {
            self.call(|d| d.destroy_process_info(p.info));
        }
        if let Some(i) = self.shared.remove_image(id.image)
            && !i.info.is_null()
        {
            self.call(|d| d.destroy_image_info(i.info));
        }
        self.messages.retain(|(p, _, _)| *p != id);
        self.end_job_if_idle();
        self.shared.take_faults();
    }

    /// Every communicator of `process` with its three queues, normalised: lengths in bytes
    /// where known, global ranks filled from the communicator's group when the DLL gives -1.
    pub fn queues(&mut self, process: ProcessId) -> Result<Vec<CommunicatorQueues>> {
        let unit = self.unit;
        Ok(self
            .raw_queues(process)?
            .into_iter()
            .map(|r| r.finish(unit))
            .collect())
    }

    /// The iteration of [`Host::queues`] without the normalisation (what the out-of-process
    /// helper ships to its parent).
    pub(crate) fn raw_queues(&mut self, process: ProcessId) -> Result<Vec<RawCommQueues>> {
        let p = process.process;
        let name = self
            .shared
            .image_name(process.image)
            .ok_or(MqdError::UnknownProcess { handle: p.0 })?;
        self.shared.take_faults();
        let rc = self.call(|d| d.update_communicator_list(p));
        if rc != result::OK {
            return Err(self.dll_error("mqs_update_communicator_list", Some(name), rc, None));
        }
        let rc = self.call(|d| d.setup_communicator_iterator(p));
        match rc {
            result::OK => {}
            result::END_OF_LIST | result::NO_INFORMATION => return Ok(Vec::new()),
            _ => {
                return Err(self.dll_error(
                    "mqs_setup_communicator_iterator",
                    Some(name),
                    rc,
                    None,
                ));
            }
        }
        let mut out = Vec::new();
        let mut buf = self.layouts.communicator_buf();
        loop {
            if out.len() >= self.options.max_communicators {
                return Err(MqdError::Unbounded {
                    path: self.path.clone(),
                    what: "communicators".into(),
                    limit: self.options.max_communicators,
                });
            }
            buf.clear();
            let rc = self.call(|d| d.get_communicator(p, &mut buf));
            match rc {
                result::OK => {}
                result::END_OF_LIST => break,
                _ => return Err(self.dll_error("mqs_get_communicator", Some(name), rc, None)),
            }
            let communicator = match self.layouts.communicator(&buf) {
                Ok(c) => c,
                Err(e) => {
                    let why = Some(format!("its result cannot be decoded: {e}"));
                    return Err(self.dll_error("mqs_get_communicator", Some(name), rc, why));
                }
            };
            let group = self.comm_group(p, communicator.size);
            let queues = OpClass::ALL.map(|class| self.queue(p, class));
            out.push(RawCommQueues {
                communicator,
                group,
                queues,
            });
            let rc = self.call(|d| d.next_communicator(p));
            match rc {
                result::OK => {}
                result::END_OF_LIST => break,
                _ => return Err(self.dll_error("mqs_next_communicator", Some(name), rc, None)),
            }
        }
        Ok(out)
    }

    fn comm_group(&self, p: Handle, size: i64) -> Option<Vec<i64>> {
        let n = usize::try_from(size).ok()?;
        if n == 0 || n > self.options.max_group_size || !self.dll.has_comm_group() {
            return None;
        }
        let mut ranks: Vec<c_int> = vec![-1; n];
        let rc = self.call(|d| d.get_comm_group(p, &mut ranks))?;
        (rc == result::OK).then(|| ranks.into_iter().map(i64::from).collect())
    }

    fn queue(&self, p: Handle, class: OpClass) -> RawQueue {
        let rc = self.call(|d| d.setup_operation_iterator(p, class.to_raw()));
        match rc {
            result::OK => {}
            result::NO_INFORMATION => return RawQueue::NoInformation,
            result::END_OF_LIST => return RawQueue::Operations(Vec::new(), None),
            _ => {
                return RawQueue::Operations(
                    Vec::new(),
                    Some(self.dll_error("mqs_setup_operation_iterator", None, rc, None)),
                );
            }
        }
        let mut ops = Vec::new();
        let mut buf = self.layouts.operation_buf();
        loop {
            if ops.len() >= self.options.max_operations {
                let error = MqdError::Unbounded {
                    path: self.path.clone(),
                    what: format!("{class:?} operations"),
                    limit: self.options.max_operations,
                };
                return RawQueue::Operations(ops, Some(error));
            }
            buf.clear();
            let rc = self.call(|d| d.next_operation(p, &mut buf));
            match rc {
                result::OK => match self.layouts.operation(&buf) {
                    Ok(op) => ops.push(op),
                    Err(e) => {
                        let why = Some(format!("its result cannot be decoded: {e}"));
                        let error = self.dll_error("mqs_next_operation", None, rc, why);
                        return RawQueue::Operations(ops, Some(error));
                    }
                },
                result::END_OF_LIST => return RawQueue::Operations(ops, None),
                _ => {
                    let error = self.dll_error("mqs_next_operation", None, rc, None);
                    return RawQueue::Operations(ops, Some(error));
                }
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let (processes, images) = self.shared.handles();
        for p in processes {
            if let Some(e) = self.shared.remove_process(p)
                && !e.info.is_null()
            {
                self.call(|d| d.destroy_process_info(e.info));
            }
        }
        for i in images {
            if let Some(e) = self.shared.remove_image(i)
                && !e.info.is_null()
            {
                self.call(|d| d.destroy_image_info(e.info));
            }
        }
        self.end_job_if_idle();
        hosted().retain(|p| p != &self.canonical);
    }
}

/// Text of a code our callbacks return to the DLL (for diagnostics).
pub fn callback_error_text(code: i32) -> String {
    ffi::callback_code_text(code).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_messages_are_formatted_without_printf() {
        assert_eq!(
            format_queue_message("%s has no queues (100%%)", "/bin/app"),
            "/bin/app has no queues (100%)"
        );
        // Conversions other than %s are shown as written, never interpreted.
        assert_eq!(format_queue_message("%d %n %", "x"), "%d %n %");
        assert_eq!(format_queue_message("", "x"), "");
    }
}
