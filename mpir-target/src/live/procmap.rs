//! A process's memory map through the `PROCMAP_QUERY` ioctl of `/proc/PID/maps` (Linux 6.11,
//! `include/uapi/linux/fs.h`): one mapping per call, as numbers and the raw bytes of its name,
//! instead of the text the kernel formats (and escapes) for every line. Reading an Open MPI
//! rank's ~370 mappings as text was a sixth of a one-shot `mpir stacks`, most of it the
//! kernel's formatting.
//!
//! The same permission check guards both (the file's open); a kernel without the ioctl, or
//! anything unexpected from it, gives `None` and the caller reads the text, as before.

#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

/// `_IOWR('f', 17, struct procmap_query)`: the structure is 104 bytes.
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
/// `query_flags`: the mapping at the address, or the next one above it.
const COVERING_OR_NEXT_VMA: u64 = 0x10;
/// `vma_flags`.
const READABLE: u64 = 0x01;
const WRITABLE: u64 = 0x02;
const SHARED: u64 = 0x08;

/// Mappings read at most: `vm.max_map_count` is 65,530 by default.
const MAX_MAPPINGS: usize = 1 << 20;
/// The longest name taken (a path is at most `PATH_MAX`, 4096, with ` (deleted)`).
const NAME_BUFFER: usize = 4096 + 64;

/// `struct procmap_query` (all fields naturally aligned: no padding).
#[repr(C)]
#[derive(Default)]
struct Query {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const _: () = assert!(std::mem::size_of::<Query>() == 104);

/// One mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vma {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    pub(crate) inode: u64,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) shared: bool,
    /// The name as the kernel gives it (a file's path, raw; `[heap]`…), empty for none.
    pub(crate) name: Vec<u8>,
}

/// The mappings of process `pid` in address order, or `None` when the ioctl cannot give
/// them (an older kernel, a name longer than a path, a map changing under the walk in a way
/// that does not progress, no mapping at all): then read the text.
pub(crate) fn read(pid: u32) -> Option<Vec<Vma>> {
    let file = std::fs::File::open(format!("/proc/{pid}/maps")).ok()?;
    let mut name = vec![0u8; NAME_BUFFER];
    let mut out = Vec::new();
    let mut addr = 0u64;
    loop {
        if out.len() >= MAX_MAPPINGS {
            return None;
        }
        let mut q = Query {
            size: std::mem::size_of::<Query>() as u64,
            query_flags: COVERING_OR_NEXT_VMA,
            query_addr: addr,
            vma_name_size: NAME_BUFFER as u32,
            vma_name_addr: name.as_mut_ptr() as u64,
            ..Query::default()
        };
        // SAFETY: `q` is a properly sized and initialised `struct procmap_query` that lives
        // across the call; the only pointer in it (`vma_name_addr`) is to `name`, which is
        // `vma_name_size` bytes long and outlives the call; `build_id_addr` is 0 (not asked).
        let r = unsafe { libc::ioctl(file.as_raw_fd(), PROCMAP_QUERY as _, &mut q) };
        if r != 0 {
            // ENOENT: no mapping at or above `addr`: the end. Anything else: not usable.
            let errno = std::io::Error::last_os_error().raw_os_error();
            return (errno == Some(libc::ENOENT) && !out.is_empty()).then_some(out);
        }
        if q.vma_end <= q.vma_start || q.vma_end <= addr {
            return None;
        }
        let len = (q.vma_name_size as usize).min(name.len());
        let mut bytes = name.get(..len).unwrap_or_default();
        if let Some(stripped) = bytes.strip_suffix(&[0]) {
            bytes = stripped;
        }
        out.push(Vma {
            start: q.vma_start,
            end: q.vma_end,
            offset: q.vma_offset,
            inode: q.inode,
            readable: q.vma_flags & READABLE != 0,
            writable: q.vma_flags & WRITABLE != 0,
            shared: q.vma_flags & SHARED != 0,
            name: bytes.to_vec(),
        });
        addr = q.vma_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ioctl's mappings are the text's, line for line (where the kernel has it).
    #[test]
    #[cfg_attr(miri, ignore = "an ioctl, which Miri cannot run")]
    fn the_ioctl_reads_what_the_text_says() {
        let Some(vmas) = read(std::process::id()) else {
            eprintln!("skipped: no PROCMAP_QUERY on this kernel");
            return;
        };
        // Our own map changes as threads come and go: compare with a text read right after,
        // on the mappings of files, which do not.
        let text = std::fs::read(format!("/proc/{}/maps", std::process::id())).unwrap();
        let files = |v: Vec<(u64, u64, u64, Vec<u8>)>| -> Vec<(u64, u64, u64, Vec<u8>)> {
            v.into_iter().filter(|m| m.3.starts_with(b"/")).collect()
        };
        let ours = files(
            vmas.iter()
                .map(|v| (v.start, v.end, v.offset, v.name.clone()))
                .collect(),
        );
        let theirs = files(
            text.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let s = String::from_utf8_lossy(l);
                    let w: Vec<&str> = s.split_whitespace().collect();
                    let (a, b) = w[0].split_once('-').unwrap();
                    let name = s.splitn(6, char::is_whitespace).nth(5).unwrap_or("");
                    (
                        u64::from_str_radix(a, 16).unwrap(),
                        u64::from_str_radix(b, 16).unwrap(),
                        u64::from_str_radix(w[2], 16).unwrap(),
                        name.trim_start().as_bytes().to_vec(),
                    )
                })
                .collect(),
        );
        assert!(!ours.is_empty());
        assert_eq!(ours, theirs);
    }

    #[test]
    #[cfg_attr(miri, ignore = "opens /proc")]
    fn no_such_process_is_none() {
        assert_eq!(read(u32::MAX), None);
    }
}
