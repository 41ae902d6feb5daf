//! Which memory of a process goes into its core: the mappings of `/proc/PID/smaps` and, for
//! each, how many of its bytes are dumped.

use std::path::Path;

use object::elf;

use super::{CoreOptions, PAGE};
use crate::traits::Memory;

/// One mapping of `/proc/PID/smaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MapLine {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) read: bool,
    pub(super) write: bool,
    pub(super) exec: bool,
    pub(super) offset: u64,
    /// The sixth field: a path, `[heap]`, `[vdso]`…, or empty.
    pub(super) name: String,
    /// Some pages are the process's own (`Anonymous:` above 0): a file mapping written to.
    pub(super) anonymous: bool,
    /// `VmFlags` has `dd` (`VM_DONTDUMP`) or `io` (`VM_IO`): never dumped, never read.
    pub(super) dont_dump: bool,
}

/// One header line of `/proc/PID/smaps` (as in `/proc/PID/maps`).
fn parse_map_line(line: &str) -> Option<MapLine> {
    let mut f = line.splitn(6, ' ');
    let (range, perms, offset) = (f.next()?, f.next()?.as_bytes(), f.next()?);
    let (_dev, _inode) = (f.next()?, f.next()?);
    let name = f.next().unwrap_or("").trim_start().to_string();
    let (a, b) = range.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    (start < end && perms.len() == 4).then_some(())?;
    Some(MapLine {
        start,
        end,
        read: perms.first() == Some(&b'r'),
        write: perms.get(1) == Some(&b'w'),
        exec: perms.get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        name,
        anonymous: false,
        dont_dump: false,
    })
}

/// The mappings of `/proc/PID/smaps`: each header line, with what its `Anonymous:` and
/// `VmFlags:` lines say; malformed lines skipped.
pub(super) fn parse_smaps(text: &str) -> Vec<MapLine> {
    let mut maps: Vec<MapLine> = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Anonymous:") {
            if let Some(m) = maps.last_mut() {
                m.anonymous = v.split_whitespace().next().is_some_and(|kb| kb != "0");
            }
        } else if let Some(v) = line.strip_prefix("VmFlags:") {
            if let Some(m) = maps.last_mut() {
                m.dont_dump = v.split_whitespace().any(|f| f == "dd" || f == "io");
            }
        } else if let Some(m) = parse_map_line(line) {
            maps.push(m);
        }
    }
    maps
}

impl MapLine {
    pub(super) fn is_file(&self) -> bool {
        self.name.starts_with('/')
    }

    /// How many of its bytes go into the core, from its start. `memory` tells an ELF image's
    /// first page by its magic.
    pub(super) fn dump_size(&self, options: &CoreOptions, memory: &impl Memory) -> u64 {
        let special = matches!(
            self.name.as_str(),
            "[vvar]" | "[vvar_vclock]" | "[vsyscall]"
        );
        if !self.read || special || self.dont_dump {
            return 0;
        }
        let size = self.end - self.start;
        if !self.is_file() {
            return size;
        }
        // Devices, /proc, /sys: reading them can act on hardware.
        let path = Path::new(self.name.trim_end_matches(" (deleted)"));
        if crate::files::is_kernel_interface(path) {
            return 0;
        }
        if self.write || self.anonymous || options.file_backed {
            return size;
        }
        let mut magic = [0u8; 4];
        let elf = self.offset == 0
            && memory.read_partial(self.start, &mut magic).ok() == Some(4)
            && magic == elf::ELFMAG;
        if elf { size.min(PAGE) } else { 0 }
    }

    /// Its permissions as `p_flags`.
    pub(super) fn flags(&self) -> elf::ProgramFlags {
        let bit = |on: bool, flag: elf::ProgramFlags| if on { flag.0 } else { 0 };
        elf::ProgramFlags(
            bit(self.read, elf::PF_R) | bit(self.write, elf::PF_W) | bit(self.exec, elf::PF_X),
        )
    }
}

#[cfg(test)]
mod tests {
    use mpir_types::DataModel;

    use super::*;

    #[test]
    fn smaps_mappings_and_what_of_them_is_dumped() {
        let text = "\
00400000-00401000 r--p 00000000 08:01 123 /usr/bin/app
Anonymous:             0 kB
VmFlags: rd mr mw me
00401000-00402000 r-xp 00001000 08:01 123 /usr/bin/app
Anonymous:             0 kB
00402000-00403000 r--p 00002000 08:01 123 /usr/bin/app
Anonymous:             4 kB
00600000-00601000 rw-p 00003000 08:01 123 /usr/bin/app
01000000-01021000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000001000 rw-s 00000000 00:05 9 /dev/shm/mpi seg (deleted)
7f0000002000-7f0000003000 rw-s 00000000 00:05 9 /dev/infiniband/uverbs0
7f0000004000-7f0000005000 ---p 00000000 00:00 0
7f0000006000-7f0000007000 rw-p 00000000 00:00 0
VmFlags: rd wr mr mw me dd
7ffd00000000-7ffd00002000 r--p 00000000 00:00 0 [vvar]
7ffd00002000-7ffd00004000 r-xp 00000000 00:00 0 [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
bad line
00500000-00400000 r--p 00000000 00:00 0
";
        let maps = parse_smaps(text);
        assert_eq!(maps.len(), 12, "{maps:#?}");
        assert_eq!(maps[1].offset, 0x1000);
        assert_eq!(maps[5].name, "/dev/shm/mpi seg (deleted)");
        assert_eq!(maps[1].flags().0, elf::PF_R.0 | elf::PF_X.0);
        assert!(maps[2].anonymous && !maps[0].anonymous);
        assert!(maps[8].dont_dump && !maps[4].dont_dump);
        // The application's first page is an ELF header; nothing else is mapped.
        let mut b = crate::mock::MockTarget::builder(DataModel::LP64);
        b.map(
            0x400000,
            b"\x7fELF".to_vec(),
            crate::mock::Access::READ_ONLY,
        );
        let memory = b.build();
        let default = CoreOptions::default();
        let sizes: Vec<u64> = maps
            .iter()
            .map(|m| m.dump_size(&default, &memory))
            .collect();
        // The ELF header page; not the code; the page written to (RELRO), .data, heap,
        // shared memory (even deleted) and the vDSO. A device, an unreadable mapping, one
        // marked VM_DONTDUMP, [vvar], [vsyscall]: never read.
        assert_eq!(
            sizes,
            [
                0x1000, 0, 0x1000, 0x1000, 0x21000, 0x1000, 0, 0, 0, 0, 0x2000, 0
            ]
        );
        let all = default.with_file_backed(true);
        assert_eq!(maps[1].dump_size(&all, &memory), 0x1000);
        assert_eq!(maps[6].dump_size(&all, &memory), 0);
        assert_eq!(maps[8].dump_size(&all, &memory), 0);
    }
}
