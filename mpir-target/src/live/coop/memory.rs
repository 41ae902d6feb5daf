//! [`CoopMemory`]: a process's memory read through its cooperative channel (READ).

use std::sync::Mutex;

use mpir_types::DataModel;

use super::{CoopClient, CoopError};
use crate::error::{Fault, Result, TargetError};
use crate::traits::Memory;

/// `EFAULT` and `EIO`: the process itself could not read the range.
const EFAULT: u32 = 14;
const EIO: u32 = 5;

/// The memory of a process that reads itself for us, over its cooperative channel: a
/// [`Memory`] for when ptrace and `process_vm_readv` are forbidden. Each read is one READ
/// request of at most 1 MiB (a longer one is short, as [`Memory::read_partial`] allows).
/// Writing is not supported.
#[derive(Debug)]
pub struct CoopMemory {
    client: Mutex<CoopClient>,
    model: DataModel,
}

impl CoopMemory {
    /// The memory behind `client`, decoded with `model`.
    pub fn new(client: CoopClient, model: DataModel) -> Self {
        CoopMemory {
            client: Mutex::new(client),
            model,
        }
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.client.lock().unwrap_or_else(|e| e.into_inner()).pid()
    }

    /// Runs `f` with the connection (for its other requests: THREADS, MAPS…), between reads.
    pub fn with_client<R>(&self, f: impl FnOnce(&mut CoopClient) -> R) -> R {
        f(&mut self.client.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The connection back, for its other requests.
    pub fn into_client(self) -> CoopClient {
        self.client.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a channel's failure shows as a memory fault.
fn fault(e: &CoopError) -> Fault {
    match e {
        CoopError::Refused {
            status: EFAULT | EIO,
            ..
        } => Fault::Unmapped,
        e => Fault::Os(e.to_string()),
    }
}

impl Memory for CoopMemory {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut client = self.client.lock().unwrap_or_else(|e| e.into_inner());
        client
            .read(address, buf)
            .map_err(|e| TargetError::Unreadable {
                address,
                len: buf.len() as u64,
                fault: fault(&e),
            })
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        Err(TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault: Fault::Unsupported,
        })
    }
}

impl crate::live::RemoteMemory for CoopMemory {
    fn read_remote(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_partial(address, buf)
    }
}
