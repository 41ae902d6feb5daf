//! Opening files whose paths come from the target (its memory map, a core's `NT_FILE` note, a
//! debuglink): only regular files, and never blocking on the way. A path the target names can
//! be a FIFO (a mapped file deleted and replaced, a crafted core), and `open(2)` on a FIFO
//! waits for a writer for ever; a device can stream without end.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading if it is a regular file. `O_NONBLOCK` keeps the open of a FIFO
/// from waiting (it has no effect on regular files); anything but a regular file is an
/// `InvalidInput` error saying what it is.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
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
