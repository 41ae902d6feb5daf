//! What a host knows about the objects it created for the DLL: images, processes, types, the
//! MPI-2 job, and what the DLL stored on them. Callbacks reach it only through handles (see `ffi`), so a
//! stale handle is a lookup miss, never a dangling pointer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::rc::Rc;

use mpir_target::{SymbolKind, Target, TargetError};
use mpir_types::{ByteOrder, TypeLayout};

use crate::ffi::{Handle, Opaque};

/// A target shared between the caller and the host.
pub(crate) type TargetRef = Rc<dyn Target>;

/// Most DLL debug messages and callback faults kept (older ones are dropped).
const MAX_LOG: usize = 256;

pub(crate) struct ImageEntry {
    pub(crate) name: String,
    target: TargetRef,
    pub(crate) info: Opaque,
    /// Types looked up by name: the handle, or `None` when the target has no such type.
    types: HashMap<String, Option<Handle>>,
}

pub(crate) struct ProcessEntry {
    pub(crate) image: Handle,
    target: TargetRef,
    global_rank: c_int,
    pub(crate) info: Opaque,
}

/// The MPI-2 job object: its token and what the DLL hung on it (`put_job_info`).
pub(crate) struct JobEntry {
    pub(crate) handle: Handle,
    pub(crate) info: Opaque,
}

/// The registry of one host. Borrows are never held across a call into the DLL.
#[derive(Default)]
pub(crate) struct Shared {
    images: RefCell<HashMap<Handle, ImageEntry>>,
    processes: RefCell<HashMap<Handle, ProcessEntry>>,
    /// The job, while one is set up (MPI-2 DLLs only; one per host at a time).
    job: RefCell<Option<JobEntry>>,
    types: RefCell<HashMap<Handle, TypeLayout>>,
    messages: RefCell<Vec<String>>,
    faults: RefCell<Vec<String>>,
    /// Types the DLL looked up since the faults were last taken that the process lacks.
    missing_types: RefCell<Vec<String>>,
}

fn push_bounded(log: &RefCell<Vec<String>>, line: String) {
    let mut log = log.borrow_mut();
    if log.len() >= MAX_LOG {
        log.remove(0);
    }
    log.push(line);
}

impl Shared {
    /// Records a problem a callback met (reported with the DLL call that failed).
    pub(crate) fn fault(&self, line: String) {
        push_bounded(&self.faults, line);
    }

    /// Records a `dprints` message.
    pub(crate) fn dprint(&self, line: String) {
        push_bounded(&self.messages, line);
    }

    /// Takes the faults recorded so far (and forgets the missing types met meanwhile).
    pub(crate) fn take_faults(&self) -> Vec<String> {
        self.missing_types.borrow_mut().clear();
        std::mem::take(&mut *self.faults.borrow_mut())
    }

    /// Takes the faults and the missing types recorded so far (for the error of a failed
    /// DLL call).
    pub(crate) fn take_call_faults(&self) -> (Vec<String>, Vec<String>) {
        let types = std::mem::take(&mut *self.missing_types.borrow_mut());
        (std::mem::take(&mut *self.faults.borrow_mut()), types)
    }

    /// Records that the DLL looked up type `name`, which the process lacks.
    fn type_missing(&self, name: &str) {
        let known = self.missing_types.borrow().iter().any(|t| t == name);
        if !known {
            push_bounded(&self.missing_types, name.to_string());
        }
    }

    /// The `dprints` messages so far.
    pub(crate) fn messages(&self) -> Vec<String> {
        self.messages.borrow().clone()
    }

    pub(crate) fn add_image(&self, handle: Handle, name: String, target: TargetRef) {
        self.images.borrow_mut().insert(
            handle,
            ImageEntry {
                name,
                target,
                info: std::ptr::null_mut(),
                types: HashMap::new(),
            },
        );
    }

    pub(crate) fn add_process(
        &self,
        handle: Handle,
        image: Handle,
        target: TargetRef,
        global_rank: c_int,
    ) {
        self.processes.borrow_mut().insert(
            handle,
            ProcessEntry {
                image,
                target,
                global_rank,
                info: std::ptr::null_mut(),
            },
        );
    }

    /// Forgets process `h`, returning what the DLL stored on it.
    pub(crate) fn remove_process(&self, h: Handle) -> Option<ProcessEntry> {
        self.processes.borrow_mut().remove(&h)
    }

    /// Forgets image `h` and its types, returning what the DLL stored on it.
    pub(crate) fn remove_image(&self, h: Handle) -> Option<ImageEntry> {
        let entry = self.images.borrow_mut().remove(&h)?;
        let mut types = self.types.borrow_mut();
        for t in entry.types.values().flatten() {
            types.remove(t);
        }
        Some(entry)
    }

    pub(crate) fn image_name(&self, h: Handle) -> Option<String> {
        self.images.borrow().get(&h).map(|i| i.name.clone())
    }

    pub(crate) fn set_image_info(&self, h: Handle, info: Opaque) -> bool {
        self.images
            .borrow_mut()
            .get_mut(&h)
            .map(|i| i.info = info)
            .is_some()
    }

    pub(crate) fn image_info(&self, h: Handle) -> Option<Opaque> {
        self.images.borrow().get(&h).map(|i| i.info)
    }

    pub(crate) fn set_process_info(&self, h: Handle, info: Opaque) -> bool {
        self.processes
            .borrow_mut()
            .get_mut(&h)
            .map(|p| p.info = info)
            .is_some()
    }

    pub(crate) fn process_info(&self, h: Handle) -> Option<Opaque> {
        self.processes.borrow().get(&h).map(|p| p.info)
    }

    /// The target of process or image `h`.
    pub(crate) fn target_of(&self, h: Handle) -> Option<TargetRef> {
        if let Some(p) = self.processes.borrow().get(&h) {
            return Some(Rc::clone(&p.target));
        }
        self.images.borrow().get(&h).map(|i| Rc::clone(&i.target))
    }

    /// Registers a new job object `h` (nothing stored on it yet).
    pub(crate) fn set_job(&self, h: Handle) {
        *self.job.borrow_mut() = Some(JobEntry {
            handle: h,
            info: std::ptr::null_mut(),
        });
    }

    /// The job's token, while one is set up.
    pub(crate) fn job(&self) -> Option<Handle> {
        self.job.borrow().as_ref().map(|j| j.handle)
    }

    /// Forgets the job, returning what the DLL stored on it.
    pub(crate) fn take_job(&self) -> Option<JobEntry> {
        self.job.borrow_mut().take()
    }

    pub(crate) fn set_job_info(&self, h: Handle, info: Opaque) -> bool {
        match self.job.borrow_mut().as_mut() {
            Some(j) if j.handle == h => {
                j.info = info;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn job_info(&self, h: Handle) -> Option<Opaque> {
        self.job
            .borrow()
            .as_ref()
            .filter(|j| j.handle == h)
            .map(|j| j.info)
    }

    /// The job process `h` belongs to (every process of the host belongs to its one job).
    pub(crate) fn job_of(&self, h: Handle) -> Option<Handle> {
        if !self.processes.borrow().contains_key(&h) {
            return None;
        }
        self.job()
    }

    /// The process of job `job` whose identity is `identity`.
    pub(crate) fn process_with_identity(&self, job: Handle, identity: c_int) -> Option<Handle> {
        if self.job() != Some(job) {
            return None;
        }
        self.processes
            .borrow()
            .iter()
            .filter(|(_, p)| p.global_rank == identity)
            .map(|(h, _)| *h)
            .min()
    }

    /// Whether a process with identity `identity` is attached.
    pub(crate) fn identity_in_use(&self, identity: c_int) -> bool {
        self.processes
            .borrow()
            .values()
            .any(|p| p.global_rank == identity)
    }

    /// How many processes are attached.
    pub(crate) fn process_count(&self) -> usize {
        self.processes.borrow().len()
    }

    /// The global rank of process `h`, which is also its identity for an MPI-2 DLL (the
    /// debugger's COMM_UNIVERSE index, with COMM_WORLD's ranks as its prefix).
    pub(crate) fn global_rank(&self, h: Handle) -> Option<c_int> {
        self.processes.borrow().get(&h).map(|p| p.global_rank)
    }

    pub(crate) fn image_of(&self, h: Handle) -> Option<Handle> {
        self.processes.borrow().get(&h).map(|p| p.image)
    }

    /// The handle of type `name` in image `image`, looked up once with `lookup`.
    pub(crate) fn find_type(
        &self,
        image: Handle,
        name: &str,
        lookup: impl FnOnce(&dyn Target, &str) -> Result<Option<TypeLayout>, TargetError>,
    ) -> Option<Handle> {
        let target = {
            let images = self.images.borrow();
            let Some(entry) = images.get(&image) else {
                drop(images);
                self.fault(format!("find_type({name}): unknown image {:#x}", image.0));
                return None;
            };
            if let Some(cached) = entry.types.get(name) {
                let cached = *cached;
                drop(images);
                if cached.is_none() {
                    self.type_missing(name);
                }
                return cached;
            }
            Rc::clone(&entry.target)
        };
        let found = match lookup(&*target, name) {
            Ok(None) => {
                self.type_missing(name);
                None
            }
            Ok(found) => found,
            Err(e) => {
                self.fault(format!("find_type({name}): {e}"));
                None
            }
        };
        let handle = found.map(|layout| {
            let h = Handle::fresh();
            self.types.borrow_mut().insert(h, layout);
            h
        });
        if let Some(entry) = self.images.borrow_mut().get_mut(&image) {
            entry.types.insert(name.to_string(), handle);
        }
        handle
    }

    /// Offset of member `field` of type `ty`.
    pub(crate) fn field_offset(&self, ty: Handle, field: &str) -> Option<u64> {
        let types = self.types.borrow();
        let Some(layout) = types.get(&ty) else {
            drop(types);
            self.fault(format!("field_offset({field}): unknown type {:#x}", ty.0));
            return None;
        };
        let offset = layout.member(field).map(|m| m.offset);
        if offset.is_none() {
            let name = layout.name.clone();
            drop(types);
            self.fault(format!("field_offset: {name} has no member {field}"));
        }
        offset
    }

    /// `sizeof` type `ty`.
    pub(crate) fn type_size(&self, ty: Handle) -> Option<u64> {
        self.types.borrow().get(&ty).map(|t| t.byte_size)
    }

    /// Every process handle, then every image handle (for teardown).
    pub(crate) fn handles(&self) -> (Vec<Handle>, Vec<Handle>) {
        let mut p: Vec<_> = self.processes.borrow().keys().copied().collect();
        let mut i: Vec<_> = self.images.borrow().keys().copied().collect();
        p.sort();
        i.sort();
        (p, i)
    }
}

/// `MPIR_Ignore_queues` is what Open MPI's DLL asks for; the MPIR spec says
/// `MPIR_ignore_queues`. Either spelling finds either symbol.
fn alias(name: &str) -> Option<&'static str> {
    match name {
        "MPIR_Ignore_queues" => Some("MPIR_ignore_queues"),
        "MPIR_ignore_queues" => Some("MPIR_Ignore_queues"),
        _ => None,
    }
}

/// The address of `name` (a function when `function`), searched in every image of `target`,
/// global and local symbols alike.
pub(crate) fn find_symbol(
    target: &dyn Target,
    name: &str,
    function: bool,
) -> Result<Option<u64>, TargetError> {
    let mut sym = target.symbol(name)?;
    if sym.is_none()
        && let Some(other) = alias(name)
    {
        sym = target.symbol(other)?;
    }
    Ok(sym
        .filter(|s| !(function && s.kind == SymbolKind::Object))
        .map(|s| s.address))
}

/// Converts a target-order scalar in place to host order.
pub(crate) fn to_host_order(order: ByteOrder, bytes: &mut [u8]) {
    if order != ByteOrder::host() {
        bytes.reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_conversion_reverses_only_foreign_data() {
        let mut be = [0x12, 0x34, 0x56, 0x78];
        to_host_order(ByteOrder::Big, &mut be);
        assert_eq!(u32::from_ne_bytes(be), 0x1234_5678);
        let mut le = [0x78, 0x56, 0x34, 0x12];
        to_host_order(ByteOrder::Little, &mut le);
        assert_eq!(u32::from_ne_bytes(le), 0x1234_5678);
    }
}
