//! Opening files whose paths come from the target (its memory map, a core's `NT_FILE` note, a
//! debuglink): only regular files, and never blocking on the way. A path the target names can
//! be a FIFO (a mapped file deleted and replaced, a crafted core), and `open(2)` on a FIFO
//! waits for a writer for ever; a device can stream without end.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading if it is a regular file; anything else is an `InvalidInput` error
/// saying what it is. The type is checked before the open (opening a device runs its driver)
/// and again on the open file (the path may have changed in between); `O_NONBLOCK` keeps the
/// open of a FIFO swapped in meanwhile from waiting, and has no effect on regular files.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    not_regular(std::fs::metadata(path)?.file_type())?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    not_regular(file.metadata()?.file_type())?;
    Ok(file)
}

/// Whether a path a process maps is a kernel interface rather than a file: a device (outside
/// the `/dev/shm` tmpfs), or under `/proc` or `/sys`. No process image comes from one, and
/// opening or reading one can act on a device, so image lists and core reads skip them.
pub(crate) fn is_kernel_interface(path: &Path) -> bool {
    (path.starts_with("/dev") && !path.starts_with("/dev/shm"))
        || path.starts_with("/proc")
        || path.starts_with("/sys")
}

fn not_regular(kind: std::fs::FileType) -> io::Result<()> {
    if kind.is_file() {
        return Ok(());
    }
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file"),
    ))
}

/// Reads the whole of `path` if it is a regular file ([`open_regular`]).
pub(crate) fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_interfaces_are_devices_proc_and_sys_but_not_shm() {
        for p in [
            "/dev/zero",
            "/dev/infiniband/uverbs0",
            "/proc/kmsg",
            "/sys/bus/pci/x/resource0",
        ] {
            assert!(is_kernel_interface(Path::new(p)), "{p}");
        }
        for p in [
            "/dev/shm/psm2.x",
            "/usr/lib/libmpi.so",
            "/devices/lib.so",
            "/proc2/x",
        ] {
            assert!(!is_kernel_interface(Path::new(p)), "{p}");
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "opens files: Miri's isolation has no file system (HARDENING.md, section Miri)"
    )]
    fn only_regular_files_open() {
        assert!(open_regular(Path::new("/proc/self/status")).is_ok());
        let e = open_regular(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a device"), "{e}");
        let e = open_regular(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }
}
