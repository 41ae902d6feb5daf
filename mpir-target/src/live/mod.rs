//! Live processes: memory ([`LiveMemory`]) and a complete [`Target`](crate::Target) over a
//! running process ([`LiveTarget`]: its memory plus the symbols and types of its images).
//!
//! Reading does not stop or trace the process. Process control (launch and attach, breakpoints,
//! signals, detach) is [`tracer::Tracer`], one thread that owns every ptrace request.

#[cfg(target_os = "linux")]
pub mod access;
#[cfg(target_os = "linux")]
pub mod coop;
mod memory;
pub mod node;
#[cfg(target_os = "linux")]
pub mod procfs;
#[cfg(target_os = "linux")]
pub(crate) mod procmap;
#[cfg(target_os = "linux")]
pub mod tracer;

pub use memory::{LiveMemory, RemoteMemory};

use crate::debuginfo::{DebugOptions, ProcessImages};
use crate::error::Result;
use crate::image_target::ImageTarget;

/// A running process as a [`Target`](crate::Target): memory through [`LiveMemory`], symbols
/// and types through [`ProcessImages`].
pub type LiveTarget = ImageTarget<LiveMemory>;

impl ImageTarget<LiveMemory> {
    /// Opens process `pid` for reading (no stop, no trace).
    pub fn open(pid: u32, options: DebugOptions) -> Result<Self> {
        let images = ProcessImages::for_pid(pid, options)?;
        let memory = LiveMemory::new(pid, images.data_model());
        Ok(ImageTarget::new(memory, images))
    }

    /// [`open`](ImageTarget::open), its images' files parsed into `files`, shared with other
    /// processes (a starter and its ranks map the same libraries).
    pub fn open_with_cache(
        pid: u32,
        options: DebugOptions,
        files: std::sync::Arc<crate::debuginfo::FileCache>,
    ) -> Result<Self> {
        let images = ProcessImages::for_pid_with_cache(pid, options, files)?;
        let memory = LiveMemory::new(pid, images.data_model());
        Ok(ImageTarget::new(memory, images))
    }
}
