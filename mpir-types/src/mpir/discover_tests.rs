//! The search on hand-made starters: a data region with the variables, a heap with the table
//! and its strings, and processes that run programs.

use super::*;
use crate::view::ViewMut;

const DATA: u64 = 0x4b_5000;
const HEAP: u64 = 0x1eb2_0000;
const STR: u64 = HEAP + 0x800;

/// A starter's memory and its descendants' programs.
struct Fake {
    model: DataModel,
    data: Vec<u8>,
    heap: Vec<u8>,
    /// pid → the names that prove its program.
    runs: BTreeMap<u32, Vec<&'static [u8]>>,
    descendants: BTreeSet<u32>,
    reads: std::cell::Cell<u64>,
}

impl Fake {
    fn new(model: DataModel) -> Self {
        Fake {
            model,
            data: vec![0; 0x200],
            heap: vec![0; 0x1000],
            runs: BTreeMap::new(),
            descendants: BTreeSet::new(),
            reads: std::cell::Cell::new(0),
        }
    }

    fn region(&mut self, address: u64) -> (&mut Vec<u8>, u64) {
        if address >= HEAP {
            (&mut self.heap, address - HEAP)
        } else {
            (&mut self.data, address - DATA)
        }
    }

    fn put_pointer(&mut self, at: u64, value: u64) {
        let model = self.model;
        let (bytes, off) = self.region(at);
        ViewMut::new(model, 0, bytes)
            .put_pointer(off, value, "ptr")
            .unwrap();
    }

    fn put_int(&mut self, at: u64, value: i64) {
        let model = self.model;
        let (bytes, off) = self.region(at);
        ViewMut::new(model, 0, bytes)
            .put_c_int(off, value, "int")
            .unwrap();
    }

    fn put_str(&mut self, at: u64, s: &[u8]) {
        let (bytes, off) = self.region(at);
        let off = off as usize;
        bytes[off..off + s.len()].copy_from_slice(s);
        bytes[off + s.len()] = 0;
    }

    /// Strings "vm" at STR and "./hang" at STR + 0x10.
    fn strings(&mut self) -> (u64, u64) {
        self.put_str(STR, b"vm");
        self.put_str(STR + 0x10, b"./hang");
        (STR, STR + 0x10)
    }

    /// A table of `pids` at `table` (host "vm", executable "./hang"), the pids made
    /// descendants running `./hang`.
    fn table(&mut self, table: u64, pids: &[i64]) {
        let (host, exe) = self.strings();
        let layout = ProcDescLayout::abi(&self.model);
        for (i, &pid) in pids.iter().enumerate() {
            let at = table + i as u64 * layout.size;
            self.put_pointer(at + layout.host_name.offset, host);
            self.put_pointer(at + layout.executable_name.offset, exe);
            let model = self.model;
            let (bytes, off) = self.region(at + layout.pid.offset);
            ViewMut::new(model, 0, bytes)
                .put_int(off, layout.pid.size, pid, "pid")
                .unwrap();
            if let Ok(p) = u32::try_from(pid) {
                self.descendants.insert(p);
                self.runs.insert(p, vec![b"./hang"]);
            }
        }
    }

    /// MPICH 5.0.2 hydra's layout: size 4 bytes before the pointer.
    fn mpich5(model: DataModel, pids: &[i64]) -> Self {
        let mut f = Fake::new(model);
        f.table(HEAP + 0x20, pids);
        f.put_pointer(DATA + 0xd8, HEAP + 0x20);
        f.put_int(DATA + 0xd4, pids.len() as i64);
        f.put_int(DATA + 0xc8, 1); // MPIR_debug_state
        f
    }

    fn search(&self) -> Result<Discovered, DiscoverError> {
        self.search_with(&SearchOptions::default())
    }

    fn search_with(&self, options: &SearchOptions) -> Result<Discovered, DiscoverError> {
        let regions = [Region {
            address: DATA,
            bytes: &self.data,
        }];
        discover(&self.model, &regions, &self.descendants, self, options)
    }
}

impl Facts for Fake {
    fn readable(&self, address: u64, len: u64) -> bool {
        let inside =
            |base: u64, n: usize| address >= base && address.saturating_add(len) <= base + n as u64;
        inside(DATA, self.data.len()) || inside(HEAP, self.heap.len())
    }

    fn read(&self, address: u64, buf: &mut [u8]) -> usize {
        self.reads.set(self.reads.get() + 1);
        for (base, bytes) in [(DATA, &self.data), (HEAP, &self.heap)] {
            if address >= base && address < base + bytes.len() as u64 {
                let off = (address - base) as usize;
                let n = buf.len().min(bytes.len() - off);
                buf[..n].copy_from_slice(&bytes[off..off + n]);
                return n;
            }
        }
        0
    }

    fn runs(&self, pid: u32, executable: &[u8]) -> bool {
        self.runs
            .get(&pid)
            .is_some_and(|names| names.contains(&executable))
    }
}

const PIDS: [i64; 4] = [13471, 13472, 13473, 13474];

fn not_found(e: DiscoverError) -> (Searched, Vec<Rejection>) {
    match e {
        DiscoverError::NotFound {
            searched,
            rejections,
            ..
        } => (searched, rejections),
        other => panic!("expected NotFound, got {other}"),
    }
}

#[test]
fn finds_mpich5_layout_with_its_evidence() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.descendants.insert(13470); // hydra_pmi_proxy: a descendant that is no rank
    let d = f.search().unwrap();
    assert_eq!(d.pointer_address, DATA + 0xd8);
    assert_eq!(d.table_address, HEAP + 0x20);
    assert_eq!(d.size_address, DATA + 0xd4);
    assert_eq!(d.size_offset(), -4);
    assert_eq!(d.entries, 4);
    assert_eq!(d.pids, [13471, 13472, 13473, 13474]);
    assert_eq!(d.layout.size, 24);
    let text = d.to_string();
    assert!(
        text.contains("0x4b50d8") && text.contains("4 bytes before"),
        "{text}"
    );
}

#[test]
fn finds_the_size_after_the_pointer_in_every_data_model() {
    for (name, model) in DataModel::PRESETS {
        let mut f = Fake::new(model);
        f.table(HEAP + 0x40, &PIDS[..3]);
        // Intel MPI's hydra: the size one pointer after the table pointer.
        f.put_pointer(DATA + 0x40, HEAP + 0x40);
        f.put_int(DATA + 0x40 + model.pointer_size(), 3);
        let d = f.search().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(d.size_offset(), model.pointer_size() as i64, "{name}");
        assert_eq!(d.entries, 3, "{name}");
    }
}

#[test]
fn two_equally_valid_tables_are_refused_and_both_named() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    // A second pointer to a copy of the table, with its own size word.
    f.table(HEAP + 0x200, &PIDS);
    f.put_pointer(DATA + 0x100, HEAP + 0x200);
    f.put_int(DATA + 0x108, 4);
    let e = f.search().unwrap_err();
    let DiscoverError::Ambiguous { candidates } = &e else {
        panic!("expected Ambiguous, got {e}");
    };
    let at: Vec<u64> = candidates.iter().map(|c| c.pointer_address).collect();
    assert_eq!(at, [DATA + 0xd8, DATA + 0x100]);
    let text = e.to_string();
    assert!(text.contains("refusing to guess"), "{text}");
    assert!(
        text.contains("0x4b50d8") && text.contains("0x4b5100"),
        "{text}"
    );
}

#[test]
fn two_size_words_for_one_pointer_are_two_candidates() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.put_int(DATA + 0xe0, 4); // another int equal to the count right after the pointer
    assert!(matches!(
        f.search(),
        Err(DiscoverError::Ambiguous { candidates }) if candidates.len() == 2
    ));
}

#[test]
fn a_pid_that_is_no_descendant_rejects_the_table() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.descendants.remove(&13473);
    f.descendants.insert(13470); // hydra_pmi_proxy: 4 entries stay a plausible count
    let (searched, rejections) = not_found(f.search().unwrap_err());
    assert_eq!(searched.checked, 1);
    assert_eq!(
        rejections[0].reason,
        Reason::NotDescendant {
            index: 2,
            pid: 13473
        }
    );
}

#[test]
fn duplicate_and_invalid_pids_reject_the_table() {
    let mut f = Fake::mpich5(DataModel::LP64, &[13471, 13472, 13471, 13474]);
    f.descendants.insert(13470); // 4 entries stay a plausible count
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        r.iter().any(|r| r.reason
            == Reason::Duplicate {
                index: 2,
                pid: 13471,
                first: 0
            }),
        "{r:?}"
    );
    let mut f = Fake::mpich5(DataModel::LP64, &[13471, -5, 13473, 13474]);
    f.descendants.insert(13472); // the count stays plausible
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        matches!(r[0].reason, Reason::InvalidPid { index: 1, pid: -5 }),
        "{r:?}"
    );
}

#[test]
fn a_size_word_smaller_than_the_table_is_not_its_size() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.put_int(DATA + 0xd4, 3);
    let (_, r) = not_found(f.search().unwrap_err());
    assert_eq!(
        r[0].reason,
        Reason::TableContinues {
            entries: 3,
            pid: 13474
        }
    );
}

#[test]
fn a_size_word_larger_than_the_table_reads_garbage_and_is_rejected() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.descendants.insert(13470); // so that 5 is a plausible count
    f.put_int(DATA + 0xd4, 5);
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        matches!(r[0].reason, Reason::InvalidPid { index: 4, pid: 0 }),
        "{r:?}"
    );
}

#[test]
fn huge_negative_or_zero_sizes_are_never_read() {
    for size in [i64::from(i32::MAX), -1, 0, 5] {
        let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
        f.put_int(DATA + 0xd4, size);
        let before = f.reads.get();
        let (_, r) = not_found(f.search().unwrap_err());
        let Reason::NoSize { bound, values } = &r[0].reason else {
            panic!("{size}: {r:?}");
        };
        assert_eq!(*bound, 4);
        assert!(values.contains(&(-4, size)), "{values:?}");
        // One read per probed word (the first pid), nothing of the table.
        assert!(
            f.reads.get() - before <= 2,
            "{size}: {} reads",
            f.reads.get()
        );
    }
}

#[test]
fn unterminated_unmapped_or_empty_strings_reject_the_table() {
    // Executable name running off the heap's end with no NUL.
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    let tail = HEAP + 0x1000 - 8;
    f.put_pointer(HEAP + 0x20 + 8, tail);
    let end = f.heap.len();
    f.heap[end - 8..].copy_from_slice(b"abcdefgh");
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        matches!(&r[0].reason, Reason::BadString { index: 0, field: "executable_name", problem, .. } if problem == "unreadable"),
        "{r:?}"
    );
    // Longer than the bound, inside mapped memory.
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.heap[0x900..0xa00].fill(b'x');
    f.put_pointer(HEAP + 0x20 + 24, HEAP + 0x900);
    let (_, r) = not_found(
        f.search_with(&SearchOptions::default().with_max_string(64))
            .unwrap_err(),
    );
    assert!(
        matches!(&r[0].reason, Reason::BadString { index: 1, field: "host_name", problem, .. } if problem.contains("within 64")),
        "{r:?}"
    );
    // Pointing at nothing mapped.
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.put_pointer(HEAP + 0x20 + 48, 0xdead_0000);
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        matches!(
            &r[0].reason,
            Reason::BadString {
                index: 2,
                address: 0xdead_0000,
                ..
            }
        ),
        "{r:?}"
    );
    // Empty.
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.put_pointer(HEAP + 0x20 + 72, HEAP + 0xf00);
    let (_, r) = not_found(f.search().unwrap_err());
    assert!(
        matches!(&r[0].reason, Reason::BadString { problem, .. } if problem == "empty"),
        "{r:?}"
    );
}

#[test]
fn an_executable_name_its_process_does_not_run_rejects_the_table() {
    let mut f = Fake::mpich5(DataModel::LP64, &PIDS);
    f.runs.insert(13474, vec![b"./other"]);
    let (_, r) = not_found(f.search().unwrap_err());
    assert_eq!(
        r[0].reason,
        Reason::OtherProgram {
            index: 3,
            pid: 13474,
            executable: "./hang".into()
        }
    );
    assert!(
        r[0].to_string().contains("does not run \"./hang\""),
        "{}",
        r[0]
    );
}

#[test]
fn a_table_pointing_at_itself_ends() {
    // The word points at its own region; its "entries" are the variables themselves.
    let mut f = Fake::new(DataModel::LP64);
    // Entry 0's pid is the low half of the word at DATA + 0x10: the word itself.
    f.descendants.insert(DATA as u32);
    f.put_pointer(DATA + 0x10, DATA);
    f.put_pointer(DATA, DATA);
    f.put_pointer(DATA + 8, DATA);
    f.put_int(DATA + 0x18, 1);
    let e = f.search().unwrap_err();
    assert!(matches!(e, DiscoverError::NotFound { .. }), "{e}");
}

#[test]
fn no_descendants_and_nothing_found_say_what_was_searched() {
    let f = Fake::new(DataModel::LP64);
    assert_eq!(f.search().unwrap_err(), DiscoverError::NoDescendants);
    let mut f = Fake::new(DataModel::LP64);
    f.descendants.insert(4242);
    let e = f.search().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("64 words in 512 bytes of 1 writable regions"),
        "{text}"
    );
}

#[test]
fn bounds_end_the_search_with_an_error_not_a_guess() {
    let f = Fake::mpich5(DataModel::LP64, &PIDS);
    let e = f
        .search_with(&SearchOptions::default().with_max_scan_bytes(100))
        .unwrap_err();
    assert!(matches!(e, DiscoverError::Budget { limit: 100, .. }), "{e}");
    let e = f
        .search_with(&SearchOptions::default().with_max_reads(2))
        .unwrap_err();
    assert!(
        matches!(e, DiscoverError::Budget { what: "reads", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("refusing to guess"));
}

#[test]
fn rejections_kept_are_bounded_and_all_counted() {
    let mut f = Fake::new(DataModel::LP64);
    f.table(HEAP + 0x20, &PIDS);
    // Forty pointers to the table, none with a size word.
    for i in 0..40 {
        f.put_pointer(DATA + 0x10 + i * 8, HEAP + 0x20);
    }
    let e = f.search().unwrap_err();
    let DiscoverError::NotFound {
        rejections,
        rejected,
        ..
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(rejections.len(), DEFAULT_MAX_REJECTIONS);
    assert_eq!(*rejected, 40);
    assert!(e.to_string().contains("and 24 more"), "{e}");
}
