//! `/proc/PID/maps` as the kernel writes it: bytes, not text. A path is whatever bytes the
//! file's name has (not necessarily UTF-8), with a newline in a name written as `\012`
//! (`seq_file_path` escapes only the newline here), and ` (deleted)` appended to a file that
//! was unlinked since it was mapped. Lines from a process's own read (the cooperative channel)
//! or a hostile one may be cut anywhere: such a line is skipped, never a panic.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What the kernel appends to the name of a mapped file that was unlinked.
const DELETED: &[u8] = b" (deleted)";
/// How the kernel writes a newline inside a name.
const ESCAPED_NEWLINE: &[u8] = b"\\012";

/// One line of `/proc/PID/maps` that maps a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Mapping {
    pub(super) start: u64,
    /// The end address (0 when not known: a core's mappings).
    pub(super) end: u64,
    pub(super) offset: u64,
    /// The file's inode (0 when not known).
    pub(super) inode: u64,
    /// Its path, unescaped, without the ` (deleted)` mark.
    pub(super) path: PathBuf,
    /// The map says the file was unlinked since it was mapped: its path names nothing, or
    /// another file.
    pub(super) deleted: bool,
}

/// The fields of one maps line before its path: (start, end), permissions, offset, inode, and
/// the rest of the line (the path, padded on its left with spaces).
struct Fields<'a> {
    range: (u64, u64),
    perms: &'a [u8],
    offset: u64,
    inode: u64,
    rest: &'a [u8],
}

fn hex(field: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()
}

/// Splits off the next field ended by one space; `None` at the end of the line.
fn next_field<'a>(line: &mut &'a [u8]) -> Option<&'a [u8]> {
    let at = line.iter().position(|&b| b == b' ')?;
    let (field, rest) = line.split_at(at);
    *line = rest.get(1..).unwrap_or_default();
    Some(field)
}

fn fields(mut line: &[u8]) -> Option<Fields<'_>> {
    let range = next_field(&mut line)?;
    let perms = next_field(&mut line)?;
    let offset = hex(next_field(&mut line)?)?;
    let _device = next_field(&mut line)?;
    // The inode ends with a space when a path follows, with the line otherwise.
    let (inode, rest) = match next_field(&mut line) {
        Some(inode) => (inode, line),
        None => (line, &[][..]),
    };
    let at = range.iter().position(|&b| b == b'-')?;
    let (start, end) = (range.get(..at)?, range.get(at + 1..)?);
    Some(Fields {
        range: (hex(start)?, hex(end)?),
        perms,
        offset,
        inode: std::str::from_utf8(inode).ok()?.parse().unwrap_or(0),
        rest,
    })
}

/// A name as the kernel escaped it, back to its bytes (`\012` → newline).
fn unescape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut rest = name;
    while !rest.is_empty() {
        if rest.starts_with(ESCAPED_NEWLINE) {
            out.push(b'\n');
            rest = rest.get(ESCAPED_NEWLINE.len()..).unwrap_or_default();
        } else if let Some((&b, tail)) = rest.split_first() {
            out.push(b);
            rest = tail;
        }
    }
    out
}

/// The private file mappings of a maps text: anonymous mappings, `[heap]`-like names and
/// shared mappings (never an image: the kernel and ld.so map images private; shared-memory
/// segments and lock files are skipped without being opened) are left out, as are lines that
/// do not parse.
pub(super) fn parse_maps(text: &[u8]) -> Vec<Mapping> {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let f = fields(line)?;
            let shared = f.perms.get(3) == Some(&b's');
            let name = unescape(f.rest.trim_ascii_start());
            file_mapping(f.range, f.offset, f.inode, shared, &name)
        })
        .collect()
}

/// The mapping of `range` at file `offset` of `inode` named `name` (its bytes, unescaped), when
/// it is a private mapping of a file ([`parse_maps`] says which are kept).
fn file_mapping(
    range: (u64, u64),
    offset: u64,
    inode: u64,
    shared: bool,
    name: &[u8],
) -> Option<Mapping> {
    if !name.starts_with(b"/") || shared {
        return None;
    }
    let (name, deleted) = match name.strip_suffix(DELETED) {
        Some(name) => (name, true),
        None => (name, false),
    };
    Some(Mapping {
        start: range.0,
        end: range.1,
        offset,
        inode,
        path: PathBuf::from(OsStr::from_bytes(name)),
        deleted,
    })
}

/// Address ranges `(start, end)`.
pub(super) type Ranges = Vec<(u64, u64)>;

/// The private file mappings and the readable, writable ranges of process `pid`, through the
/// kernel's `PROCMAP_QUERY` ioctl ([`crate::live::procmap`]): the same as [`parse_maps`] and
/// [`writable_ranges`] of its maps text, without the kernel formatting it. `None` where the
/// kernel cannot answer so: then read the text.
pub(super) fn query(pid: u32) -> Option<(Vec<Mapping>, Ranges)> {
    #[cfg(target_os = "linux")]
    {
        let vmas = crate::live::procmap::read(pid)?;
        let writable = vmas
            .iter()
            .filter(|v| v.readable && v.writable)
            .map(|v| (v.start, v.end))
            .collect();
        // Raw bytes: no escape to undo.
        let files = vmas
            .iter()
            .filter_map(|v| file_mapping((v.start, v.end), v.offset, v.inode, v.shared, &v.name))
            .collect();
        Some((files, writable))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// The readable, writable mappings `(start, end)` of a `/proc/PID/maps` text (where stacks
/// live).
pub(crate) fn writable_ranges(text: &[u8]) -> Vec<(u64, u64)> {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let f = fields(line)?;
            f.perms.starts_with(b"rw").then_some(f.range)
        })
        .collect()
}

/// `/proc/PID/exe`'s target without the ` (deleted)` mark of an unlinked executable (so that
/// it names the executable's mappings, whose mark [`parse_maps`] removed too).
pub(super) fn exe_path(link: PathBuf) -> PathBuf {
    match link.as_os_str().as_bytes().strip_suffix(DELETED) {
        Some(name) => PathBuf::from(OsStr::from_bytes(name)),
        None => link,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ioctl's file mappings are the text's (this process's own map, whose files do not
    /// change between the two reads).
    #[test]
    #[cfg_attr(miri, ignore = "reads /proc")]
    fn the_query_and_the_text_agree() {
        let pid = std::process::id();
        let Some((files, _)) = query(pid) else {
            eprintln!("skipped: no PROCMAP_QUERY on this kernel");
            return;
        };
        let text = std::fs::read(format!("/proc/{pid}/maps")).unwrap();
        assert!(!files.is_empty());
        assert_eq!(files, parse_maps(&text));
    }

    fn one(line: &[u8]) -> Option<Mapping> {
        let mut all = parse_maps(line);
        assert!(all.len() <= 1);
        all.pop()
    }

    #[test]
    fn an_ordinary_line() {
        let m = one(b"55d0c8a00000-55d0c8a02000 r-xp 00002000 fe:00 247003                     /usr/bin/sleep").unwrap();
        assert_eq!(
            m,
            Mapping {
                start: 0x55d0_c8a0_0000,
                end: 0x55d0_c8a0_2000,
                offset: 0x2000,
                inode: 247_003,
                path: PathBuf::from("/usr/bin/sleep"),
                deleted: false,
            }
        );
    }

    #[test]
    fn a_name_that_is_not_utf8_is_kept_as_its_bytes() {
        let m = one(b"1000-2000 r-xp 00000000 08:01 42 /tmp/caf\xe9/\xff\xfe lib.so").unwrap();
        assert_eq!(
            m.path.as_os_str().as_bytes(),
            b"/tmp/caf\xe9/\xff\xfe lib.so"
        );
        // The writable ranges of such a map are read too.
        let text = b"1000-2000 rw-p 00000000 08:01 42 /tmp/\xff\n3000-4000 r--p 0 00:00 0\n";
        assert_eq!(writable_ranges(text), vec![(0x1000, 0x2000)]);
    }

    #[test]
    fn an_escaped_newline_and_the_deleted_mark() {
        let m = one(b"1000-2000 r-xp 00000000 08:01 42 /tmp/a\\012b (deleted)").unwrap();
        assert_eq!(m.path, PathBuf::from("/tmp/a\nb"));
        assert!(m.deleted);
        // Spaces inside a name are the name's; only the kernel's mark is taken off.
        let m = one(b"1000-2000 r-xp 00000000 08:01 42   /tmp/x (deleted) y").unwrap();
        assert_eq!(m.path, PathBuf::from("/tmp/x (deleted) y"));
        assert!(!m.deleted);
        assert_eq!(
            exe_path(PathBuf::from("/tmp/prog (deleted)")),
            PathBuf::from("/tmp/prog")
        );
        assert_eq!(
            exe_path(PathBuf::from("/tmp/prog")),
            PathBuf::from("/tmp/prog")
        );
    }

    #[test]
    fn anonymous_shared_and_pseudo_mappings_are_no_files() {
        let text = b"1000-2000 rw-p 00000000 00:00 0 \n\
                     2000-3000 rw-p 00000000 00:00 0                          [heap]\n\
                     3000-4000 rw-s 00000000 00:05 9 /dev/shm/seg\n\
                     4000-5000 r--p 00000000 00:00 0";
        assert!(parse_maps(text).is_empty());
        // Readable and writable, shared or not: the anonymous, the heap and the segment.
        assert_eq!(writable_ranges(text).len(), 3);
    }

    #[test]
    fn hostile_lines_are_skipped_without_panic() {
        let huge = b"1000-2000 r-xp 1ffffffffffffffff 08:01 42 /lib/a.so";
        let lines: [&[u8]; 14] = [
            b"",
            b"1000",
            b"1000-",
            b"-2000 r-xp 0 08:01 42 /a",
            b"1000-2000",
            b"1000-2000 r-xp",
            b"1000-2000 r-xp 0",
            b"1000-2000 r-xp 0 08:01",
            b"zzzz-2000 r-xp 0 08:01 42 /a",
            b"1000-2000 r-xp 0 08:01 42 /a\\01",
            b"1000-2000 r-xp 0 08:01 42 /a\\",
            huge,
            b"\xff\xfe\xfd",
            b"1000-2000 r 0 08:01 x /a",
        ];
        for line in lines {
            let _ = parse_maps(line);
            let _ = writable_ranges(line);
        }
        assert!(one(huge).is_none(), "an offset past 64 bits is no offset");
        assert_eq!(
            one(b"1000-2000 r-xp 0 08:01 42 /a\\01").map(|m| m.path),
            Some(PathBuf::from("/a\\01")),
            "a cut escape is kept as it is"
        );
        // An inode that is not a number is unknown, not a reason to drop the mapping.
        assert_eq!(one(b"1000-2000 r 0 08:01 x /a").map(|m| m.inode), Some(0));
        // The largest values there are.
        let m =
            one(b"0-ffffffffffffffff r-xp ffffffffffffffff 08:01 18446744073709551615 /b").unwrap();
        assert_eq!((m.end, m.offset, m.inode), (u64::MAX, u64::MAX, u64::MAX));
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic generator: no dependency, the same bytes every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let alphabet = b"0123456789abcdef- rwxps:/\\\n()deltd\xff";
        // Fewer under Miri, which interprets every step.
        let rounds = if cfg!(miri) { 100 } else { 2000 };
        for _ in 0..rounds {
            let len = (x % 80) as usize;
            let line: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let _ = parse_maps(&line);
            let _ = writable_ranges(&line);
            x = x.wrapping_add(1);
        }
    }
}
