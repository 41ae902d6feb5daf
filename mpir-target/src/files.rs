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

/// Whether process `pid` is known to live in another mount namespace than this tool (its
/// paths then name files of its own root, not of ours). Unknown (unreadable) counts as the
/// same: such a process's files are not ours to read either way.
pub(crate) fn other_mount_namespace(pid: u32) -> bool {
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt"));
    let ours = std::fs::read_link("/proc/self/ns/mnt");
    matches!((theirs, ours), (Ok(a), Ok(b)) if a != b)
}

/// One file mapping of a process, as its `/proc/PID/maps` line names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MappedFile<'a> {
    /// The process.
    pub(crate) pid: u32,
    /// The mapping's start and end addresses.
    pub(crate) range: (u64, u64),
    /// The mapped file's inode (0 when the map gave none).
    pub(crate) inode: u64,
    /// Its path, as the process sees it (inside its own root).
    pub(crate) path: &'a Path,
}

/// A path in this tool's namespace that opens the very file a process in another mount
/// namespace (a container) maps, or `None`. A path in such a process's map is valid only
/// inside its root, and its root may hold symbolic links pointing anywhere: followed from
/// here through `/proc/PID/root`, an absolute link would resolve against this tool's root
/// and name a host file. So the file is reached, in order of preference, through:
/// 1. `/proc/PID/map_files/START-END`: the kernel's handle of the mapped file itself, no path
///    walked at all (opening it needs `CAP_SYS_ADMIN` or `CAP_CHECKPOINT_RESTORE`);
/// 2. `/proc/PID/root/PATH` when none of its components is a symbolic link and `openat2`
///    with `RESOLVE_IN_ROOT` (links resolved inside the process's root, never out of it)
///    opens the same file ([`in_root`]).
///
/// Either way the file's inode must be the one the map names.
pub(crate) fn mapped_file(m: MappedFile<'_>) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let inode_ok = |p: &Path| {
        std::fs::metadata(p)
            .is_ok_and(|meta| meta.is_file() && (m.inode == 0 || meta.ino() == m.inode))
    };
    let direct = std::path::PathBuf::from(format!(
        "/proc/{}/map_files/{:x}-{:x}",
        m.pid, m.range.0, m.range.1
    ));
    if inode_ok(&direct) {
        return Some(direct);
    }
    in_root(m.pid, m.path).ok().filter(|p| inode_ok(p))
}

/// `path` (absolute, as process `pid` names it) under `/proc/PID/root`, when it can be
/// opened from here as the process itself would open it: no component is a symbolic link
/// (a map's paths are the kernel's, free of links; a link there now was put there since) nor
/// `..`, and `openat2` resolving inside the process's root names the same file (device and
/// inode) as the path does from here.
pub(crate) fn in_root(pid: u32, path: &Path) -> io::Result<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let refuse = |what: String| io::Error::new(io::ErrorKind::PermissionDenied, what);
    let root = std::path::PathBuf::from(format!("/proc/{pid}/root"));
    let mut here = root.clone();
    let mut relative = std::path::PathBuf::new();
    let mut parts = 0usize;
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(name) => {
                parts += 1;
                if parts > 256 {
                    return Err(refuse(format!("{}: too many components", path.display())));
                }
                here.push(name);
                relative.push(name);
                if std::fs::symlink_metadata(&here)?.file_type().is_symlink() {
                    return Err(refuse(format!(
                        "{}: {} is a symbolic link in the process's root",
                        path.display(),
                        relative.display()
                    )));
                }
            }
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(refuse(format!(
                    "{}: not a plain absolute path",
                    path.display()
                )));
            }
        }
    }
    if parts == 0 {
        return Err(refuse(format!("{}: names no file", path.display())));
    }
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let dir = File::open(&root)?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(&dir, relative.as_path(), how).map_err(io::Error::from)?;
    let inside = File::from(fd).metadata()?;
    let outside = std::fs::metadata(&here)?;
    if (inside.dev(), inside.ino()) != (outside.dev(), outside.ino()) {
        return Err(refuse(format!(
            "{}: the file under the process's root is not the one it names",
            path.display()
        )));
    }
    Ok(here)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "opens files: Miri's isolation has no file system (HARDENING.md, section Miri)"
    )]
    fn a_path_under_a_processs_root_has_no_link_and_no_dot_dot() {
        let dir = std::env::temp_dir().join(format!("mpir-in-root-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/file"), b"x").unwrap();
        let _ = std::fs::remove_file(dir.join("link"));
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let me = std::process::id();
        let ok = in_root(me, &dir.join("real/file")).unwrap();
        assert_eq!(
            ok,
            Path::new(&format!("/proc/{me}/root"))
                .join(dir.strip_prefix("/").unwrap())
                .join("real/file")
        );
        // The same file through a link in the path: refused, whatever it names.
        let e = in_root(me, &dir.join("link/file")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        for bad in ["real/../real/file", "link/../real/file"] {
            let p = dir.join(bad);
            assert!(in_root(me, &p).is_err(), "{}", p.display());
        }
        assert!(in_root(me, Path::new("/")).is_err());
        // Not in another mount namespace than ourselves.
        assert!(!other_mount_namespace(me));
        let _ = std::fs::remove_dir_all(&dir);
    }

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
